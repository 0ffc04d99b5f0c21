/* sf_config.c: the top-level config loader: reads one YAML file in the
 * OpenTelemetry Collector's layout (receivers, processors, exporters,
 * extensions, connectors, service), decodes every component with its type's
 * config map, checks the service section and its pipelines, and reports
 * every problem of the file in one run.
 *
 * DESIGN: everything a loaded config holds (nodes, strings, component
 * configs, pipelines) lives in one arena, freed by sf_config_destroy(); the
 * sf_config handed out is the first member of a private struct that also
 * holds the arena. On any error nothing is handed out. */
#include "internal/sf_config_int.h"
#include "internal/sf_core.h"
#include "sf_dynbuf.h"
#include "sf_encoding.h"
#include "sf_net.h"
#include "sf_sender.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define SF_CONFIG_MAX_FILE (4u << 20)
#define SF_CONFIG_ARENA_CHUNK 16384

typedef struct sf_config_owned {
    sf_config pub;              /* first: a sf_config * is a sf_config_owned * */
    sf_arena *arena;
} sf_config_owned;

/* ---- service section rows ------------------------------------------------ */

enum { METRICS_LEVEL_NONE = 0, METRICS_LEVEL_DETAILED = 3 };

/* CUSTOM parse that keeps the node for the loader's own checks. */
static sf_status keep_node(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    (void)ctx;
    *(const sf_node **)field = node;
    return SF_OK;
}


typedef struct telemetry_metrics {
    bool present;
    int level;
    char *address;
    const sf_node *readers;
} telemetry_metrics;

typedef struct telemetry_logs {
    bool present;
    int level;
    int encoding;               /* 0 console, 1 json */
    sf_strlist output_paths;
} telemetry_logs;

typedef struct telemetry_conf {
    bool present;
    telemetry_metrics metrics;
    telemetry_logs logs;
    sf_strmap resource;
} telemetry_conf;

/* service.telemetry.metrics.readers[i].pull.exporter.prometheus, upstream's
 * (OpenTelemetry configuration schema) keys and defaults */
typedef struct prom_labels {
    bool present;
    sf_strlist included, excluded;
} prom_labels;

typedef struct prom_conf {
    bool present;
    char *host;
    int64_t port;
    bool without_type_suffix, without_units, without_scope_info;
    prom_labels resource_labels;
} prom_conf;

typedef struct pull_exporter {
    bool present;
    prom_conf prometheus;
} pull_exporter;

typedef struct pull_conf {
    bool present;
    pull_exporter exporter;
} pull_conf;

/* service.telemetry.metrics.readers[i].periodic, upstream's otelconf
 * (v0.3, as the collector's service.telemetry reads it): an interval, a
 * timeout, and one otlp exporter. */
typedef struct push_header_conf {
    char *name;
    char *value;
} push_header_conf;

typedef struct otlp_push_conf {
    bool present;
    int protocol;               /* 0 http/protobuf, 1 grpc */
    char *endpoint;
    sf_cfg_list headers;        /* push_header_conf */
    char *headers_list;
    int compression;            /* 0 none, 1 gzip */
    int64_t timeout;
    bool insecure;
    char *certificate, *client_certificate, *client_key;
    int temporality;
    int histogram_aggregation;
} otlp_push_conf;

typedef struct push_exporter {
    bool present;
    otlp_push_conf otlp;
} push_exporter;

typedef struct periodic_conf {
    bool present;
    int64_t interval, timeout;
    push_exporter exporter;
} periodic_conf;

typedef struct reader_conf {
    pull_conf pull;
    periodic_conf periodic;
} reader_conf;

enum { PUSH_HTTP_PROTOBUF = 0, PUSH_GRPC = 1 };
enum { PUSH_COMPRESSION_NONE = 0, PUSH_COMPRESSION_GZIP = 1 };

static const sf_config_row prom_labels_rows[] = {
    { .key = "included", .type = SF_CFG_STRLIST, .offset = offsetof(prom_labels, included),
      .help = "resource attributes put on every series (service.name, service.version, "
              "service.instance.id)" },
    { .key = "excluded", .type = SF_CFG_STRLIST, .offset = offsetof(prom_labels, excluded),
      .help = "resource attributes left out" },
    { 0 }
};

static const sf_config_row prom_rows[] = {
    { .key = "host", .type = SF_CFG_STR, .def = "localhost", .offset = offsetof(prom_conf, host),
      .help = "address the Prometheus endpoint listens on" },
    { .key = "port", .type = SF_CFG_INT, .def = "9464", .offset = offsetof(prom_conf, port),
      .min = 0, .max = 65535, .help = "its port" },
    { .key = "without_type_suffix", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(prom_conf, without_type_suffix),
      .help = "no _total on counters (upstream's default reader: true)" },
    { .key = "without_units", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(prom_conf, without_units),
      .help = "no unit suffix (_seconds, _bytes) (upstream's default reader: true)" },
    { .key = "without_scope_info", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(prom_conf, without_scope_info),
      .help = "spanfence never adds scope labels or otel_scope_info, as if true" },
    { .key = "with_resource_constant_labels", .type = SF_CFG_SECTION,
      .offset = offsetof(prom_conf, resource_labels), .sub = prom_labels_rows,
      .help = "resource attributes as labels on every series" },
    { .key = "without_target_info", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { 0 }
};

static const sf_config_row pull_exporter_rows[] = {
    { .key = "prometheus", .type = SF_CFG_SECTION, .offset = offsetof(pull_exporter, prometheus),
      .sub = prom_rows, .help = "a Prometheus endpoint to scrape" },
    { 0 }
};

static const sf_config_row pull_rows[] = {
    { .key = "exporter", .type = SF_CFG_SECTION, .offset = offsetof(pull_conf, exporter),
      .sub = pull_exporter_rows, .help = "the pull exporter" },
    { .key = "producers", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { 0 }
};

static const sf_config_row push_header_rows[] = {
    { .key = "name", .type = SF_CFG_STR, .offset = offsetof(push_header_conf, name),
      .help = "header name" },
    { .key = "value", .type = SF_CFG_STR, .offset = offsetof(push_header_conf, value),
      .help = "its value (never logged; use ${env:VAR} for a secret)" },
    { 0 }
};

#define OTELCONF_FORM "write exporter: {otlp: {protocol: http/protobuf, endpoint: URL}} " \
                      "(otelconf v0.3, as the collector's service.telemetry reads it)"

static const sf_config_row otlp_push_rows[] = {
    { .key = "protocol", .type = SF_CFG_ENUM, .offset = offsetof(otlp_push_conf, protocol),
      .choices = "http/protobuf|grpc", .upstream = "http/json",
      .help = "http/protobuf or grpc (required)" },
    { .key = "endpoint", .type = SF_CFG_STR, .offset = offsetof(otlp_push_conf, endpoint),
      .help = "http/protobuf: the full URL (/v1/metrics when it has no path); grpc: "
              "http://host:port, https://host:port or host:port (required)" },
    { .key = "headers", .type = SF_CFG_LIST, .offset = offsetof(otlp_push_conf, headers),
      .sub = push_header_rows, .elem_size = sizeof(push_header_conf),
      .help = "headers sent with every push: [{name, value}]" },
    { .key = "headers_list", .type = SF_CFG_STR, .offset = offsetof(otlp_push_conf, headers_list),
      .help = "more headers as \"name=value,name2=value2\"" },
    { .key = "compression", .type = SF_CFG_ENUM, .def = "none",
      .offset = offsetof(otlp_push_conf, compression), .choices = "none|gzip",
      .help = "request compression" },
    { .key = "timeout", .type = SF_CFG_INT, .def = "10000", .offset = offsetof(otlp_push_conf, timeout),
      .min = 1, .max = 3600000, .help = "time limit of one push request, in milliseconds" },
    { .key = "insecure", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(otlp_push_conf, insecure),
      .help = "grpc to a host:port endpoint without TLS (a URL's scheme decides otherwise)" },
    { .key = "certificate", .type = SF_CFG_STR, .offset = offsetof(otlp_push_conf, certificate),
      .help = "PEM file of the CAs that sign the gateway's certificate" },
    { .key = "client_certificate", .type = SF_CFG_STR,
      .offset = offsetof(otlp_push_conf, client_certificate),
      .help = "PEM client certificate for mutual TLS (with client_key)" },
    { .key = "client_key", .type = SF_CFG_STR, .offset = offsetof(otlp_push_conf, client_key),
      .help = "PEM private key of client_certificate" },
    { .key = "temporality_preference", .type = SF_CFG_ENUM, .def = "cumulative",
      .offset = offsetof(otlp_push_conf, temporality), .choices = "cumulative",
      .upstream = "delta|lowmemory",
      .help = "sums are pushed cumulative, as the metrics endpoint serves them" },
    { .key = "default_histogram_aggregation", .type = SF_CFG_ENUM,
      .def = "explicit_bucket_histogram", .offset = offsetof(otlp_push_conf, histogram_aggregation),
      .choices = "explicit_bucket_histogram", .upstream = "base2_exponential_bucket_histogram",
      .help = "histograms keep the buckets they are served with" },
    { 0 }
};

static const sf_config_row push_exporter_rows[] = {
    { .key = "otlp", .type = SF_CFG_SECTION, .offset = offsetof(push_exporter, otlp),
      .sub = otlp_push_rows, .help = "push over OTLP (the only push exporter spanfence has)" },
    { .key = "console", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "the console exporter is not supported by spanfence: read the metrics endpoint, "
              "or push with otlp" },
    { .key = "otlp_http", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = OTELCONF_FORM },
    { .key = "otlp_grpc", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = OTELCONF_FORM },
    { 0 }
};

static const sf_config_row periodic_rows[] = {
    { .key = "interval", .type = SF_CFG_INT, .def = "60000", .offset = offsetof(periodic_conf, interval),
      .min = 1000, .max = 86400000,
      .help = "milliseconds between pushes (at least 1000: each push is a scrape of the "
              "metrics endpoint)" },
    { .key = "timeout", .type = SF_CFG_INT, .def = "30000", .offset = offsetof(periodic_conf, timeout),
      .min = 1, .max = 3600000,
      .help = "milliseconds one push may take, retries included" },
    { .key = "exporter", .type = SF_CFG_SECTION, .offset = offsetof(periodic_conf, exporter),
      .sub = push_exporter_rows, .help = "where to push: {otlp: {protocol, endpoint, ...}}" },
    { .key = "producers", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "cardinality_limits", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { 0 }
};

static const sf_config_row reader_rows[] = {
    { .key = "pull", .type = SF_CFG_SECTION, .offset = offsetof(reader_conf, pull),
      .sub = pull_rows, .help = "a pull reader (Prometheus)" },
    { .key = "periodic", .type = SF_CFG_SECTION, .offset = offsetof(reader_conf, periodic),
      .sub = periodic_rows,
      .help = "a push reader: what the metrics endpoint serves, pushed over OTLP every "
              "interval through the first metrics pipeline's processors" },
    { 0 }
};

typedef struct service_conf {
    const sf_node *pipelines;
    const sf_node *extensions;
    telemetry_conf telemetry;
} service_conf;

typedef struct top_conf {
    const sf_node *receivers, *processors, *exporters, *extensions, *service;
} top_conf;

typedef struct pipeline_conf {
    const sf_node *lists[3];    /* receivers, processors, exporters */
} pipeline_conf;

#define KEEP(k, conf, member, h) \
    { .key = k, .type = SF_CFG_CUSTOM, .offset = offsetof(conf, member), .parse = keep_node, .help = h }

static const sf_config_row metrics_rows[] = {
    { .key = "level", .type = SF_CFG_ENUM, .def = "normal",
      .offset = offsetof(telemetry_metrics, level), .choices = "none|basic|normal|detailed",
      .help = "'none' turns the metrics endpoint off" },
    { .key = "address", .type = SF_CFG_STR, .def = "127.0.0.1:8888",
      .offset = offsetof(telemetry_metrics, address),
      .help = "host:port of the Prometheus metrics endpoint" },
    { .key = "readers", .type = SF_CFG_CUSTOM, .offset = offsetof(telemetry_metrics, readers),
      .parse = keep_node, .sub = reader_rows,
      .help = "a list of pull and periodic readers (upstream's form), each:" },
    { 0 }
};

static const sf_config_row logs_rows[] = {
    { .key = "level", .type = SF_CFG_ENUM, .def = "info", .offset = offsetof(telemetry_logs, level),
      .choices = "debug|info|warn|error", .help = "lowest level logged" },
    { .key = "encoding", .type = SF_CFG_ENUM, .def = "console",
      .offset = offsetof(telemetry_logs, encoding), .choices = "console|json",
      .help = "console: one text line per record; json: one JSON object per line" },
    { .key = "development", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "output_paths", .type = SF_CFG_STRLIST, .offset = offsetof(telemetry_logs, output_paths),
      .help = "where records go: stderr (default), stdout, or file paths (appended)" },
    { .key = "error_output_paths", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "initial_fields", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "sampling", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "disable_caller", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "disable_stacktrace", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { 0 }
};

static const sf_config_row telemetry_rows[] = {
    { .key = "metrics", .type = SF_CFG_SECTION, .offset = offsetof(telemetry_conf, metrics),
      .sub = metrics_rows, .help = "the collector's own metrics" },
    { .key = "logs", .type = SF_CFG_SECTION, .offset = offsetof(telemetry_conf, logs),
      .sub = logs_rows, .help = "the collector's own log" },
    { .key = "resource", .type = SF_CFG_STRMAP, .offset = offsetof(telemetry_conf, resource),
      .help = "resource attributes of the collector's telemetry (service.name, ...)" },
    { .key = "traces", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { 0 }
};

static const sf_config_row service_rows[] = {
    KEEP("pipelines", service_conf, pipelines, "pipelines: receivers -> processors -> exporters"),
    KEEP("extensions", service_conf, extensions, "extensions to start (trace_control)"),
    { .key = "telemetry", .type = SF_CFG_SECTION, .offset = offsetof(service_conf, telemetry),
      .sub = telemetry_rows, .help = "the collector's own metrics and log" },
    { 0 }
};

static const sf_config_row top_rows[] = {
    KEEP("receivers", top_conf, receivers, "where spans come in"),
    KEEP("processors", top_conf, processors, "what is done to them"),
    KEEP("exporters", top_conf, exporters, "where they go"),
    KEEP("extensions", top_conf, extensions,
         "trace_control; other types are accepted and ignored"),
    { .key = "connectors", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "connectors are not supported by spanfence" },
    KEEP("service", top_conf, service, "which components run, and the collector's telemetry"),
    { 0 }
};

static const sf_config_row pipeline_rows[] = {
    KEEP("receivers", pipeline_conf, lists[0], "receiver ids"),
    KEEP("processors", pipeline_conf, lists[1], "processor ids, run in order"),
    KEEP("exporters", pipeline_conf, lists[2], "exporter ids"),
    { 0 }
};

/* ---- the loader ------------------------------------------------------------- */

typedef struct loader {
    sf_cfg_ctx ctx;
    sf_config *cfg;
    const sf_node *root;
    size_t cap;                 /* slots in cfg->components */
    sf_kind *kinds;             /* per component slot */
    const sf_node **keys;       /* per slot: the id's key node */
    bool *used;
    bool *piped;                /* per slot: listed by a pipeline */
    bool *foreign;              /* per slot: a type spanfence does not have */
    bool *valid;
} loader;

static bool is_empty(const sf_node *n)
{
    return n == NULL || (n->kind == SF_NODE_SCALAR && n->is_null);
}

static const char *plural(sf_kind kind)
{
    switch (kind) {
    case SF_KIND_RECEIVER:  return "receivers";
    case SF_KIND_PROCESSOR: return "processors";
    case SF_KIND_EXPORTER:  return "exporters";
    case SF_KIND_EXTENSION: return "extensions";
    }
    return "components";
}

/* What to use instead of upstream type `type`, or NULL (sf_foreign_types). */
static const char *foreign_instead(sf_kind kind, const char *type)
{
    for (const sf_foreign_type *f = sf_foreign_types; f->name != NULL; f++)
        if (f->kind == kind && strcmp(f->name, type) == 0)
            return f->instead;
    return NULL;
}

/* A traces pipeline lists a type spanfence does not have: say so, what to
 * use instead when it is a known upstream one, and what spanfence has. */
static void unknown_type(loader *l, sf_kind kind, const sf_node *at, const char *type)
{
    const char *cands[64];
    char have[512];
    size_t n = 0, used = 0;
    const char *hint, *instead = foreign_instead(kind, type);

    have[0] = '\0';
    for (const sf_component_type *const *t = sf_registry; *t && n < 64; t++)
        if ((*t)->kind == kind) {
            cands[n++] = (*t)->name;
            if (used < sizeof(have))
                used += (size_t)snprintf(have + used, sizeof(have) - used, "%s%s",
                                         used ? ", " : "", (*t)->name);
        }
    hint = sf_cfg_suggest(type, cands, n);
    if (instead)
        sf_cfg_error(&l->ctx, at, NULL, "%s type '%s' is not supported by spanfence: %s "
                     "(spanfence's %s: %s)", sf_kind_name(kind), type, instead, plural(kind),
                     have);
    else if (hint)
        sf_cfg_error(&l->ctx, at, NULL, "unknown %s type '%s' (did you mean '%s'?)",
                     sf_kind_name(kind), type, hint);
    else
        sf_cfg_error(&l->ctx, at, NULL, "unknown %s type '%s' (spanfence's %s: %s)",
                     sf_kind_name(kind), type, plural(kind), have);
}

/* Split "type/name": false (and reported) when either part is empty. */
static bool split_id(loader *l, const sf_node *at, const char *id, const char *what,
                     char *type, size_t size)
{
    const char *slash = strchr(id, '/');
    size_t tl = slash ? (size_t)(slash - id) : strlen(id);

    if (tl == 0 || tl >= size || (slash && slash[1] == '\0')) {
        sf_cfg_error(&l->ctx, at, NULL, "invalid %s id '%s' (expected 'type' or 'type/name')",
                     what, id);
        return false;
    }
    memcpy(type, id, tl);
    type[tl] = '\0';
    return true;
}


/* Whether a problem inside `n` was already reported while reading the file. */
static bool subtree_invalid(const sf_node *n)
{
    if (n == NULL)
        return false;
    if (n->invalid)
        return true;
    for (size_t i = 0; i < n->n; i++)
        if (subtree_invalid(n->items[i]))
            return true;
    return false;
}

/* The node at dotted `path` ("protocols.grpc.endpoint") under `value`, or
 * the deepest one found on the way (a default's section), or NULL. */
static const sf_node *node_at(const sf_node *value, const char *path)
{
    const sf_node *n = value, *last = NULL;
    char part[64];

    while (n != NULL && *path != '\0') {
        size_t len = strcspn(path, ".");

        snprintf(part, sizeof(part), "%.*s", (int)len, path);
        last = n;
        n = sf_node_get(n, part);
        path += len + (path[len] == '.');
    }
    return n != NULL ? n : last;
}

/* Every endpoint a receiver binds (its type's describe_listen) must be a
 * host:port with a port that exists: gRPC core would take 70000 as 4464. */
static void check_listen(loader *l, const sf_component_type *type, const void *config,
                         const sf_node *value)
{
    sf_listen_desc ld[SF_LISTEN_MAX];
    size_t n = type->describe_listen(config, ld, SF_LISTEN_MAX);

    for (size_t i = 0; i < n; i++) {
        char buf[128];
        const char *why;

        if (ld[i].endpoint == NULL)
            continue;
        why = sf_net_endpoint_problem(ld[i].endpoint, buf, sizeof(buf));
        if (why != NULL) {
            const sf_node *at = node_at(value, ld[i].path);

            sf_cfg_error(&l->ctx, at ? at : l->ctx.node, ld[i].path, "invalid endpoint '%s': %s",
                         ld[i].endpoint, why);
        }
    }
}

/* Decode one component definition into the next slot of cfg->components.
 * Problems are reported; SF_ENOMEM is the only status that stops the load. */
static sf_status load_component(loader *l, sf_kind kind, const sf_node *key,
                                const sf_node *value, const sf_component_type *type)
{
    sf_config *cfg = l->cfg;
    sf_config_component *c = &cfg->components[cfg->n_components];
    size_t slot = cfg->n_components;
    char tname[128];

    l->ctx.path = sf_cfg_path_join(&l->ctx, plural(kind), key->text);
    if (l->ctx.path == NULL)
        return SF_ENOMEM;
    l->ctx.node = key;
    c->id = key->text;
    c->node = key;
    l->kinds[slot] = kind;
    l->keys[slot] = key;
    cfg->n_components++;
    if (type == NULL) {
        if (!split_id(l, key, key->text, sf_kind_name(kind), tname, sizeof(tname)))
            return SF_OK;
        type = sf_registry_find(kind, tname);
        if (type == NULL) {
            /* Judged once the pipelines are known (check_foreign): an
             * error in any pipeline (it would have to run), a warning
             * when none lists it. */
            l->foreign[slot] = true;
            l->valid[slot] = is_empty(value) || value->kind == SF_NODE_MAP;
            if (!l->valid[slot])
                sf_cfg_error(&l->ctx, value, NULL, "expected a mapping of settings, got %s",
                             value->kind == SF_NODE_SEQ ? "a list" : "a single value");
            return SF_OK;
        }
    }
    c->type = type;
    c->config = sf_cfg_alloc(&l->ctx, type->config_size);
    if (c->config == NULL)
        return SF_ENOMEM;
    size_t errors = sf_diag_errors(l->ctx.diag);
    sf_status st = sf_cfg_decode(&l->ctx, type->config_map, value, c->config);

    if (st == SF_ENOMEM)
        return st;
    if (sf_diag_errors(l->ctx.diag) == errors && type->check && !subtree_invalid(value)) {
        l->ctx.value = value;
        st = type->check(&l->ctx, c->config);
        l->ctx.value = NULL;
        if (l->ctx.oom)
            return SF_ENOMEM;
    }
    if (sf_diag_errors(l->ctx.diag) == errors && type->describe_listen != NULL &&
        !subtree_invalid(value))
        check_listen(l, type, c->config, value);
    l->valid[slot] = sf_diag_errors(l->ctx.diag) == errors;
    return SF_OK;
}

static sf_status load_components(loader *l, sf_kind kind, const sf_node *map)
{
    if (is_empty(map))
        return SF_OK;
    if (map->kind != SF_NODE_MAP) {
        l->ctx.path = plural(kind);
        sf_cfg_error(&l->ctx, map, NULL, "expected a mapping of %s ids to their settings, got %s",
                     sf_kind_name(kind), map->kind == SF_NODE_SEQ ? "a list" : "a single value");
        return SF_CONFIG;
    }
    for (size_t i = 0; i < map->n; i++)
        if (load_component(l, kind, map->keys[i], map->items[i], NULL) == SF_ENOMEM)
            return SF_ENOMEM;
    return SF_OK;
}

static size_t find_slot(const loader *l, sf_kind kind, const char *id)
{
    for (size_t i = 0; i < l->cfg->n_components; i++)
        if (l->kinds[i] == kind && strcmp(l->cfg->components[i].id, id) == 0)
            return i;
    return SIZE_MAX;
}

/* A pipeline of a signal its component's type does not run is refused
 * here, never accepted and then lost: the type says which signals it
 * handles (sf_component_type.signals). Types spanfence does not have are
 * judged by check_foreign. */
static void check_signal(loader *l, const sf_config_pipeline *p, sf_kind kind,
                         const sf_config_component *c, const sf_node *at, const char *sub)
{
    if (c->type == NULL || sf_component_type_handles(c->type, p->signal))
        return;
    sf_cfg_error(&l->ctx, at, sub, "%s '%s' cannot be used in %s pipeline '%s': spanfence's "
                 "'%s' handles %s only", sf_kind_name(kind), c->id,
                 sf_signal_name(p->signal), p->id, c->type->name,
                 sf_component_type_signals(c->type));
}

static sf_status load_pipeline_list(loader *l, sf_config_pipeline *p, sf_kind kind,
                                    const sf_node *list, size_t *listed, const sf_node **at)
{
    static const char *const names[] = { "receivers", "processors", "exporters" };
    const char *name = names[kind];
    sf_config_component ***out = kind == SF_KIND_RECEIVER ? &p->receivers
                               : kind == SF_KIND_PROCESSOR ? &p->processors : &p->exporters;
    size_t *n_out = kind == SF_KIND_RECEIVER ? &p->n_receivers
                  : kind == SF_KIND_PROCESSOR ? &p->n_processors : &p->n_exporters;
    const char *path = l->ctx.path;

    *listed = 0;
    *at = list != NULL && list->kind == SF_NODE_SEQ ? list : NULL;
    if (is_empty(list))
        return SF_OK;
    if (list->kind != SF_NODE_SEQ) {
        sf_cfg_error(&l->ctx, list, name, "expected a list of %s ids, got %s", sf_kind_name(kind),
                     list->kind == SF_NODE_MAP ? "a mapping" : "a single value");
        return SF_CONFIG;
    }
    *listed = list->n;
    *out = sf_cfg_alloc(&l->ctx, (list->n ? list->n : 1) * sizeof(**out));
    if (*out == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < list->n; i++) {
        const sf_node *it = list->items[i];
        char sub[64];
        size_t slot;
        bool dup = false;

        snprintf(sub, sizeof(sub), "%s[%zu]", name, i);
        if (it->kind != SF_NODE_SCALAR || it->is_null) {
            sf_cfg_error(&l->ctx, it, sub, "expected %s id, got %s",
                         kind == SF_KIND_EXPORTER ? "an exporter" : kind == SF_KIND_RECEIVER ? "a receiver" : "a processor",
                         it->kind == SF_NODE_SCALAR ? "an empty value"
                         : it->kind == SF_NODE_MAP ? "a mapping" : "a list");
            continue;
        }
        for (size_t j = 0; j < i; j++) {
            const sf_node *o = list->items[j];

            if (o->kind == SF_NODE_SCALAR && strcmp(o->text, it->text) == 0)
                dup = true;
        }
        if (dup) {
            sf_cfg_error(&l->ctx, it, sub, "pipeline '%s' lists %s '%s' more than once", p->id,
                         sf_kind_name(kind), it->text);
            continue;
        }
        slot = find_slot(l, kind, it->text);
        if (slot == SIZE_MAX) {
            sf_cfg_error(&l->ctx, it, sub, "pipeline '%s' references undefined %s '%s'", p->id,
                         sf_kind_name(kind), it->text);
            continue;
        }
        l->used[slot] = true;
        l->piped[slot] = true;
        check_signal(l, p, kind, &l->cfg->components[slot], it, sub);
        (*out)[(*n_out)++] = &l->cfg->components[slot];
    }
    l->ctx.path = path;
    return l->ctx.oom ? SF_ENOMEM : SF_OK;
}

static sf_status load_pipelines(loader *l, const sf_node *service_key, const sf_node *pipelines)
{
    const sf_node *pkey = sf_node_key(sf_node_get(l->root, "service"), "pipelines");
    sf_config *cfg = l->cfg;
    bool any = false;

    l->ctx.path = "service";
    if (pkey == NULL) {
        sf_cfg_error(&l->ctx, service_key, NULL, "missing required key 'pipelines'");
        return SF_CONFIG;
    }
    l->ctx.path = "service.pipelines";
    if (is_empty(pipelines) || pipelines->kind != SF_NODE_MAP) {
        if (is_empty(pipelines))
            sf_cfg_error(&l->ctx, pkey, NULL, "no pipeline is defined");
        else
            sf_cfg_error(&l->ctx, pipelines, NULL, "expected a mapping of pipeline ids, got %s",
                         pipelines->kind == SF_NODE_SEQ ? "a list" : "a single value");
        return SF_CONFIG;
    }
    cfg->pipelines = sf_cfg_alloc(&l->ctx, pipelines->n * sizeof(*cfg->pipelines));
    if (cfg->pipelines == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < pipelines->n; i++) {
        const sf_node *key = pipelines->keys[i];
        sf_config_pipeline *p = &cfg->pipelines[cfg->n_pipelines];
        pipeline_conf pc = { { NULL } };
        char sig[64];
        size_t s, listed[3];
        const sf_node *at[3];

        l->ctx.path = "service.pipelines";
        if (!split_id(l, key, key->text, "pipeline", sig, sizeof(sig)))
            continue;
        for (s = 0; s < SF_SIGNAL_COUNT; s++)
            if (strcmp(sig, sf_signal_name((sf_signal)s)) == 0)
                break;
        if (s == SF_SIGNAL_COUNT) {
            const char *names[SF_SIGNAL_COUNT];
            const char *hint;

            for (size_t k = 0; k < SF_SIGNAL_COUNT; k++)
                names[k] = sf_signal_name((sf_signal)k);
            hint = sf_cfg_suggest(sig, names, SF_SIGNAL_COUNT);

            l->ctx.path = sf_cfg_path_join(&l->ctx, "service.pipelines", key->text);
            if (l->ctx.path == NULL)
                return SF_ENOMEM;
            if (hint)
                sf_cfg_error(&l->ctx, key, NULL, "unknown pipeline type '%s' (did you mean '%s'?)",
                             sig, hint);
            else
                sf_cfg_error(&l->ctx, key, NULL, "unknown pipeline type '%s'", sig);
            continue;
        }
        l->ctx.path = sf_cfg_path_join(&l->ctx, "service.pipelines", key->text);
        if (l->ctx.path == NULL)
            return SF_ENOMEM;
        l->ctx.node = key;
        p->id = key->text;
        p->signal = (sf_signal)s;
        p->node = key;
        cfg->n_pipelines++;
        if (sf_cfg_decode(&l->ctx, pipeline_rows, pipelines->items[i], &pc) == SF_ENOMEM)
            return SF_ENOMEM;
        for (int k = 0; k < 3; k++)
            if (load_pipeline_list(l, p, (sf_kind)k, pc.lists[k], &listed[k], &at[k]) ==
                SF_ENOMEM)
                return SF_ENOMEM;
        any = true;
        /* at the list when there is one (`exporters: []`), else the pipeline */
        if (listed[SF_KIND_RECEIVER] == 0)
            sf_cfg_error(&l->ctx, at[SF_KIND_RECEIVER] ? at[SF_KIND_RECEIVER] : key,
                         at[SF_KIND_RECEIVER] ? "receivers" : NULL,
                         "pipeline '%s' has no receivers", p->id);
        if (listed[SF_KIND_EXPORTER] == 0)
            sf_cfg_error(&l->ctx, at[SF_KIND_EXPORTER] ? at[SF_KIND_EXPORTER] : key,
                         at[SF_KIND_EXPORTER] ? "exporters" : NULL,
                         "pipeline '%s' has no exporters", p->id);
    }
    if (!any) {
        l->ctx.path = "service.pipelines";
        sf_cfg_error(&l->ctx, pkey, NULL, "no pipeline is defined");
    }
    return SF_OK;
}

/* An extension spanfence does not have is not run: a warning, with what to
 * use instead when it is a known upstream one. */
static void warn_extension(loader *l, const sf_node *at, const char *sub, const char *id)
{
    char tname[128];
    const char *instead;

    snprintf(tname, sizeof(tname), "%.*s", (int)strcspn(id, "/"), id);
    instead = foreign_instead(SF_KIND_EXTENSION, tname);
    if (instead)
        sf_cfg_warn(&l->ctx, at, sub, "extension '%s' is not supported by spanfence and is "
                    "ignored: %s", id, instead);
    else
        sf_cfg_warn(&l->ctx, at, sub, "extension '%s' is not supported by spanfence and is "
                    "ignored", id);
}

/* Extensions of a registered type are decoded like any component and run
 * when service.extensions lists them; other types (health_check, pprof...)
 * are accepted with a warning and ignored. */
static sf_status load_extensions(loader *l, const sf_node *defs, const sf_node *refs)
{
    size_t *slots = NULL;       /* per definition: its component slot, or SIZE_MAX */

    l->ctx.path = "extensions";
    if (!is_empty(defs) && defs->kind != SF_NODE_MAP) {
        sf_cfg_error(&l->ctx, defs, NULL, "expected a mapping of extension ids to their settings");
        defs = NULL;
    }
    if (is_empty(defs))
        defs = NULL;
    if (defs) {
        slots = sf_cfg_alloc(&l->ctx, (defs->n ? defs->n : 1) * sizeof(*slots));
        if (slots == NULL)
            return SF_ENOMEM;
    }
    for (size_t j = 0; defs && j < defs->n; j++) {
        const sf_node *key = defs->keys[j];
        const sf_component_type *type;
        char tname[128];

        slots[j] = SIZE_MAX;
        l->ctx.path = "extensions";
        if (!split_id(l, key, key->text, "extension", tname, sizeof(tname))) {
            slots[j] = SIZE_MAX - 1;        /* reported */
            continue;
        }
        type = sf_registry_find(SF_KIND_EXTENSION, tname);
        if (type == NULL)
            continue;
        slots[j] = l->cfg->n_components;
        if (load_component(l, SF_KIND_EXTENSION, key, defs->items[j], type) == SF_ENOMEM)
            return SF_ENOMEM;
    }
    l->ctx.path = "service";
    if (!is_empty(refs) && refs->kind != SF_NODE_SEQ) {
        sf_cfg_error(&l->ctx, refs, "extensions", "expected a list of extension ids");
        refs = NULL;
    }
    if (!is_empty(refs) && refs->kind == SF_NODE_SEQ) {
        l->cfg->extensions = sf_cfg_alloc(&l->ctx, (refs->n ? refs->n : 1) *
                                          sizeof(*l->cfg->extensions));
        if (l->cfg->extensions == NULL)
            return SF_ENOMEM;
    }
    for (size_t i = 0; refs && refs->kind == SF_NODE_SEQ && i < refs->n; i++) {
        const sf_node *it = refs->items[i];
        char sub[48];
        size_t j;

        snprintf(sub, sizeof(sub), "extensions[%zu]", i);
        if (it->kind != SF_NODE_SCALAR || it->is_null) {
            sf_cfg_error(&l->ctx, it, sub, "expected an extension id");
            continue;
        }
        for (j = 0; defs && j < defs->n; j++)
            if (strcmp(defs->keys[j]->text, it->text) == 0)
                break;
        if (defs == NULL || j == defs->n) {
            sf_cfg_error(&l->ctx, it, sub, "references undefined extension '%s'", it->text);
            continue;
        }
        if (slots[j] < SIZE_MAX - 1) {
            if (l->used[slots[j]]) {
                sf_cfg_error(&l->ctx, it, sub, "extension '%s' is listed more than once",
                             it->text);
                continue;
            }
            l->used[slots[j]] = true;
            l->cfg->extensions[l->cfg->n_extensions++] = &l->cfg->components[slots[j]];
            continue;
        }
        slots[j] = SIZE_MAX - 2;            /* referenced, warned here */
        warn_extension(l, it, sub, it->text);
    }
    l->ctx.path = "extensions";
    for (size_t j = 0; defs && j < defs->n; j++) {
        if (slots[j] == SIZE_MAX)
            warn_extension(l, defs->keys[j], defs->keys[j]->text, defs->keys[j]->text);
    }
    return l->ctx.oom ? SF_ENOMEM : SF_OK;
}

/* RFC 9110 token characters (a header name). */
static bool is_token(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && strchr("!#$%&'*+-.^_`|~", *s) == NULL)
            return false;
    return true;
}

/* A header the push will send: a token name, a value without CR, LF or
 * NUL. Values are secrets: never in a message. */
static bool push_header_ok(loader *l, const sf_node *at, const char *sub, const char *name,
                           const char *value)
{
    if (name == NULL || !is_token(name)) {
        sf_cfg_error(&l->ctx, at, sub, "'%s' is not a header name", name ? name : "");
        return false;
    }
    if (strcasecmp(name, "content-type") == 0 || strcasecmp(name, "content-encoding") == 0 ||
        strcasecmp(name, "content-length") == 0 || strcasecmp(name, "transfer-encoding") == 0) {
        sf_cfg_error(&l->ctx, at, sub, "header '%s' is set by the exporter itself", name);
        return false;
    }
    if (value == NULL || strpbrk(value, "\r\n") != NULL) {
        sf_cfg_error(&l->ctx, at, sub, "the value of header '%s' is missing or holds a line "
                     "break", name);
        return false;
    }
    return true;
}

static bool push_add_header(loader *l, sf_config_push_reader *pr, const char *name,
                            size_t name_len, const char *value, size_t value_len)
{
    sf_config_push_header *h = &pr->headers[pr->n_headers];

    h->name = sf_cfg_strdup(&l->ctx, name, name_len);
    h->value = sf_cfg_strdup(&l->ctx, value, value_len);
    if (h->name == NULL || h->value == NULL)
        return false;
    pr->n_headers++;
    return true;
}

/* `s` without the spaces around it (the end cut in place). */
static char *trim(char *s)
{
    size_t n;

    while (isspace((unsigned char)*s))
        s++;
    n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* headers_list "k=v,k2=v2" (W3C baggage form, as upstream parses it:
 * spaces around names and values trimmed, values %-decoded) into `pr`;
 * a name `headers` also gives keeps the value `headers` gives. */
static void push_headers_list(loader *l, const sf_node *at, const char *list,
                              sf_config_push_reader *pr)
{
    const char *p = list;

    while (*p != '\0') {
        const char *end = strchr(p, ','), *eq;
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *pair;

        while (len > 0 && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        while (len > 0 && isspace((unsigned char)p[len - 1]))
            len--;
        if (len > 0) {
            pair = sf_cfg_strdup(&l->ctx, p, len);
            if (pair == NULL)
                return;
            eq = strchr(pair, '=');
            if (eq == NULL || eq == pair || strchr(pair, ';') != NULL) {
                sf_cfg_error(&l->ctx, at, "headers_list", "expected name=value pairs separated "
                             "by commas");
                return;
            }
            char *name = pair, *value = pair + (eq - pair) + 1;
            bool given = false;

            name[eq - pair] = '\0';
            name = trim(name);
            value = trim(value);
            sf_percent_decode(value, strlen(value) + 1, value, strlen(value));  /* in place */
            if (!push_header_ok(l, at, "headers_list", name, value))
                return;
            for (size_t k = 0; k < pr->n_headers && !given; k++)
                given = strcasecmp(pr->headers[k].name, name) == 0;
            if (!given && !push_add_header(l, pr, name, strlen(name), value, strlen(value)))
                return;
        }
        if (end == NULL)
            break;
        p = end + 1;
    }
}

/* The otlp exporter's endpoint as the push will use it: http/protobuf a
 * full http(s) URL (/v1/metrics when it has no path, as upstream's SDK),
 * grpc host:port with TLS decided by the scheme or `insecure`. */
static bool push_endpoint(loader *l, const sf_node *at, const otlp_push_conf *o,
                          sf_config_push_reader *pr)
{
    const char *e = o->endpoint, *hostport, *slash;
    bool https = strncasecmp(e, "https://", 8) == 0, http = strncasecmp(e, "http://", 7) == 0;
    char buf[1100];

    hostport = https ? e + 8 : http ? e + 7 : e;
    slash = strchr(hostport, '/');
    if (strlen(e) > 1000) {
        sf_cfg_error(&l->ctx, at, "endpoint", "longer than 1000 bytes");
        return false;
    }
    if (o->protocol == PUSH_HTTP_PROTOBUF) {
        if ((!http && !https) || hostport[0] == '\0' || hostport[0] == '/' ||
            strpbrk(e, " \t\r\n") != NULL) {
            sf_cfg_error(&l->ctx, at, "endpoint", "'%s' is not an http:// or https:// URL (for "
                         "http/protobuf the full URL, e.g. https://gateway:4318/v1/metrics)", e);
            return false;
        }
        snprintf(buf, sizeof(buf), "%s%s", e, slash == NULL ? "/v1/metrics" : "");
        pr->tls = https;
    } else {
        size_t hl = slash ? (size_t)(slash - hostport) : strlen(hostport);
        char why[128];

        snprintf(buf, sizeof(buf), "%.*s", (int)hl, hostport);
        if ((slash != NULL && slash[1] != '\0') || strpbrk(buf, " \t\r\n") != NULL ||
            sf_net_endpoint_problem(buf, why, sizeof(why)) != NULL) {
            sf_cfg_error(&l->ctx, at, "endpoint", "'%s' is not a grpc endpoint (http://host:port, "
                         "https://host:port or host:port)", e);
            return false;
        }
        pr->tls = https || (!http && !o->insecure);
    }
    pr->endpoint = sf_cfg_strdup(&l->ctx, buf, strlen(buf));
    return pr->endpoint != NULL;
}

/* readers[i].periodic: checked, and added to cfg->push_readers. */
static sf_status load_periodic(loader *l, const sf_node *it, const periodic_conf *pc)
{
    const sf_node *pn = sf_node_get(it, "periodic");
    const sf_node *on = sf_node_get(sf_node_get(pn, "exporter"), "otlp");
    const otlp_push_conf *o = &pc->exporter.otlp;
    const push_header_conf *hv = o->headers.v;
    sf_config_push_reader *pr;
    const char *const file_keys[] = { "certificate", "client_certificate", "client_key" };
    char *const files[] = { o->certificate, o->client_certificate, o->client_key };
    bool ok = true;

    if (!o->present) {
        sf_cfg_error(&l->ctx, pn, "periodic", "expected an otlp exporter (periodic: {exporter: "
                     "{otlp: {protocol: http/protobuf, endpoint: URL}}})");
        return SF_OK;
    }
    if (sf_node_get(on, "protocol") == NULL) {
        sf_cfg_error(&l->ctx, on, "periodic.exporter.otlp", "'protocol' is required "
                     "(http/protobuf or grpc)");
        return SF_OK;
    }
    if (o->endpoint == NULL || o->endpoint[0] == '\0') {
        sf_cfg_error(&l->ctx, on, "periodic.exporter.otlp", "'endpoint' is required");
        return SF_OK;
    }
    pr = &l->cfg->push_readers[l->cfg->n_push_readers];
    memset(pr, 0, sizeof(*pr));
    pr->path = l->ctx.path;
    pr->node = it;
    pr->interval_ms = pc->interval;
    pr->timeout_ms = pc->timeout;
    pr->grpc = o->protocol == PUSH_GRPC;
    pr->gzip = o->compression == PUSH_COMPRESSION_GZIP;
    pr->export_timeout_ms = o->timeout;
    pr->certificate = o->certificate;
    pr->client_certificate = o->client_certificate;
    pr->client_key = o->client_key;
    l->ctx.path = sf_cfg_path_join(&l->ctx, pr->path, "periodic.exporter.otlp");
    if (l->ctx.path == NULL)
        return SF_ENOMEM;
    ok = push_endpoint(l, sf_node_get(on, "endpoint"), o, pr);
    for (int i = 0; i < 3; i++) {
        const sf_node *at = sf_node_get(on, file_keys[i]);

        if (files[i] != NULL && access(files[i], R_OK) != 0) {
            char why[128];

            sf_cfg_error(&l->ctx, at, file_keys[i], "cannot read '%s': %s", files[i],
                         sf_net_errno_text(errno, why, sizeof(why)));
            ok = false;
        } else if (files[i] != NULL && ok && !pr->tls) {
            sf_cfg_warn(&l->ctx, at, file_keys[i], "has no effect without TLS (%s)",
                        pr->grpc ? "insecure: true or an http:// endpoint" : "an http:// URL");
        }
    }
    if ((o->client_certificate == NULL) != (o->client_key == NULL)) {
        sf_cfg_error(&l->ctx, on, NULL, "'client_certificate' and 'client_key' go together "
                     "(mutual TLS)");
        ok = false;
    }
    if (o->insecure && (!pr->grpc || strncasecmp(o->endpoint, "https://", 8) == 0 ||
                        strncasecmp(o->endpoint, "http://", 7) == 0))
        sf_cfg_warn(&l->ctx, sf_node_get(on, "insecure"), "insecure", "has no effect: the "
                    "endpoint's scheme decides (https:// is TLS)");
    pr->headers = sf_cfg_alloc(&l->ctx, (o->headers.n + (o->headers_list ?
                                         strlen(o->headers_list) / 2 + 1 : 0) + 1) *
                                        sizeof(*pr->headers));
    if (pr->headers == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < o->headers.n; i++) {
        const sf_node *hs = sf_node_get(on, "headers");
        const sf_node *at = hs && hs->kind == SF_NODE_SEQ && i < hs->n ? hs->items[i] : on;
        char sub[32];

        snprintf(sub, sizeof(sub), "headers[%zu]", i);
        if (!push_header_ok(l, at, sub, hv[i].name, hv[i].value))
            ok = false;
        else if (!push_add_header(l, pr, hv[i].name, strlen(hv[i].name), hv[i].value,
                                  strlen(hv[i].value)))
            return SF_ENOMEM;
    }
    if (o->headers_list != NULL) {
        size_t errors = sf_diag_errors(l->ctx.diag);

        push_headers_list(l, sf_node_get(on, "headers_list"), o->headers_list, pr);
        ok = ok && sf_diag_errors(l->ctx.diag) == errors;
    }
    if (l->ctx.oom)
        return SF_ENOMEM;
    if (ok && l->cfg->n_push_readers > 0) {
        l->ctx.path = pr->path;
        sf_cfg_error(&l->ctx, pn, "periodic", "only one periodic reader is supported");
    } else if (ok) {
        l->cfg->n_push_readers++;
    }
    return SF_OK;
}

/* service.telemetry.metrics.readers, upstream's current form: one pull
 * reader with a Prometheus exporter sets the metrics endpoint (replacing
 * `address`) and its naming; one periodic reader with an otlp exporter
 * pushes what that endpoint serves (load_periodic; the command builds the
 * push from cfg->push_readers). */
static sf_status load_readers(loader *l, const sf_node *readers, const sf_node *service)
{
    sf_config *cfg = l->cfg;
    bool found = false;

    if (is_empty(readers))
        return SF_OK;
    l->ctx.path = "service.telemetry.metrics.readers";
    if (readers->kind != SF_NODE_SEQ) {
        sf_cfg_error(&l->ctx, readers, NULL, "expected a list of readers, got %s",
                     readers->kind == SF_NODE_MAP ? "a mapping" : "a single value");
        return SF_OK;
    }
    cfg->push_readers = sf_cfg_alloc(&l->ctx, (readers->n + 1) * sizeof(*cfg->push_readers));
    if (cfg->push_readers == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < readers->n; i++) {
        const sf_node *it = readers->items[i];
        reader_conf rc;
        size_t errors;
        char sub[64], endpoint[300];
        const prom_conf *pc = &rc.pull.exporter.prometheus;

        memset(&rc, 0, sizeof(rc));
        snprintf(sub, sizeof(sub), "service.telemetry.metrics.readers[%zu]", i);
        l->ctx.path = sf_cfg_strdup(&l->ctx, sub, strlen(sub));
        if (l->ctx.path == NULL)
            return SF_ENOMEM;
        errors = sf_diag_errors(l->ctx.diag);
        if (sf_cfg_decode(&l->ctx, reader_rows, it, &rc) == SF_ENOMEM)
            return SF_ENOMEM;
        if (rc.periodic.present && rc.pull.present) {
            sf_cfg_error(&l->ctx, it, NULL, "a reader is either pull or periodic, not both");
            continue;
        }
        if (rc.periodic.present) {
            /* what the rows refused is said; the rest needs them right */
            if (sf_diag_errors(l->ctx.diag) == errors &&
                load_periodic(l, it, &rc.periodic) == SF_ENOMEM)
                return SF_ENOMEM;
            continue;
        }
        if (!rc.pull.present || !rc.pull.exporter.prometheus.present) {
            sf_cfg_error(&l->ctx, it, NULL, "expected a pull reader with a prometheus exporter "
                         "(pull: {exporter: {prometheus: {host, port}}}) or a periodic reader "
                         "with an otlp exporter (periodic: {exporter: {otlp: {protocol, "
                         "endpoint}}})");
            continue;
        }
        if (found) {
            sf_cfg_error(&l->ctx, it, NULL, "spanfence serves one metrics endpoint: only one "
                         "pull reader is supported");
            continue;
        }
        found = true;
        snprintf(endpoint, sizeof(endpoint), strchr(pc->host, ':') ? "[%s]:%lld" : "%s:%lld",
                 pc->host, (long long)pc->port);
        cfg->metrics_address = sf_cfg_strdup(&l->ctx, endpoint, strlen(endpoint));
        if (cfg->metrics_address == NULL)
            return SF_ENOMEM;
        cfg->metrics_type_suffix = !pc->without_type_suffix;
        cfg->metrics_units = !pc->without_units;
        for (size_t k = 0; k < pc->resource_labels.included.n; k++) {
            const char *a = pc->resource_labels.included.v[k];

            if (strcmp(a, "service.name") == 0)
                cfg->metrics_labels |= SF_RESOURCE_SERVICE_NAME;
            else if (strcmp(a, "service.version") == 0)
                cfg->metrics_labels |= SF_RESOURCE_SERVICE_VERSION;
            else if (strcmp(a, "service.instance.id") == 0)
                cfg->metrics_labels |= SF_RESOURCE_SERVICE_INSTANCE_ID;
        }
        if (pc->resource_labels.present && pc->resource_labels.included.n == 0 &&
            pc->resource_labels.excluded.n > 0)
            cfg->metrics_labels = SF_RESOURCE_SERVICE_NAME | SF_RESOURCE_SERVICE_VERSION |
                                  SF_RESOURCE_SERVICE_INSTANCE_ID;
        for (size_t k = 0; k < pc->resource_labels.excluded.n; k++) {
            const char *a = pc->resource_labels.excluded.v[k];

            if (strcmp(a, "service.name") == 0)
                cfg->metrics_labels &= ~(unsigned)SF_RESOURCE_SERVICE_NAME;
            else if (strcmp(a, "service.version") == 0)
                cfg->metrics_labels &= ~(unsigned)SF_RESOURCE_SERVICE_VERSION;
            else if (strcmp(a, "service.instance.id") == 0)
                cfg->metrics_labels &= ~(unsigned)SF_RESOURCE_SERVICE_INSTANCE_ID;
        }
    }
    if (found) {
        const sf_node *an = sf_node_get(sf_node_get(sf_node_get(service, "telemetry"), "metrics"),
                                        "address");

        if (an != NULL) {
            l->ctx.path = "service.telemetry.metrics.address";
            sf_cfg_warn(&l->ctx, an, NULL, "'address' has no effect when 'readers' sets the "
                        "metrics endpoint");
        }
    }
    return l->ctx.oom ? SF_ENOMEM : SF_OK;
}

static sf_status load_service(loader *l, const sf_node *service)
{
    const sf_node *skey = sf_node_key(l->root, "service");
    service_conf sc;
    sf_config *cfg = l->cfg;
    sf_status st;

    memset(&sc, 0, sizeof(sc));
    if (skey == NULL) {
        l->ctx.path = "";
        sf_cfg_error(&l->ctx, l->root, NULL, "missing required section 'service'");
        return SF_CONFIG;
    }
    l->ctx.path = "service";
    l->ctx.node = skey;
    if (!is_empty(service) && service->kind != SF_NODE_MAP) {
        sf_cfg_error(&l->ctx, service, NULL, "expected a mapping, got %s",
                     service->kind == SF_NODE_SEQ ? "a list" : "a single value");
        return SF_CONFIG;
    }
    st = sf_cfg_decode(&l->ctx, service_rows, service, &sc);
    if (st == SF_ENOMEM)
        return st;
    cfg->log_level = sc.telemetry.logs.level;
    cfg->metrics_detailed = sc.telemetry.metrics.level == METRICS_LEVEL_DETAILED;
    /* address NULL: it was not a string, and the decode said so */
    if (sc.telemetry.metrics.level != METRICS_LEVEL_NONE && sc.telemetry.metrics.address != NULL) {
        const sf_node *an = sf_node_get(sf_node_get(sf_node_get(service, "telemetry"), "metrics"),
                                        "address");

        char buf[128];
        const char *why = sf_net_endpoint_problem(sc.telemetry.metrics.address, buf, sizeof(buf));

        if (why != NULL) {
            l->ctx.path = "service.telemetry.metrics.address";
            sf_cfg_error(&l->ctx, an, NULL, "invalid address '%s': %s",
                         sc.telemetry.metrics.address, why);
        }
        cfg->metrics_address = sc.telemetry.metrics.address;
    }
    cfg->log_json = sc.telemetry.logs.encoding == 1;
    cfg->log_outputs = sc.telemetry.logs.output_paths;
    for (size_t i = 0; i < sc.telemetry.resource.n; i++) {
        if (strcmp(sc.telemetry.resource.keys[i], "service.name") == 0)
            cfg->service_name = sc.telemetry.resource.values[i];
        else if (strcmp(sc.telemetry.resource.keys[i], "service.version") == 0)
            cfg->service_version = sc.telemetry.resource.values[i];
        else if (strcmp(sc.telemetry.resource.keys[i], "service.instance.id") == 0)
            cfg->service_instance_id = sc.telemetry.resource.values[i];
    }
    if (sc.telemetry.metrics.level != METRICS_LEVEL_NONE &&
        load_readers(l, sc.telemetry.metrics.readers, service) == SF_ENOMEM)
        return SF_ENOMEM;
    if (sc.telemetry.metrics.level == METRICS_LEVEL_NONE) {
        const sf_node *rs = sc.telemetry.metrics.readers;

        /* a push reader pushes what the endpoint serves: with none, say so
         * rather than push nothing unseen */
        for (size_t i = 0; rs != NULL && rs->kind == SF_NODE_SEQ && i < rs->n; i++) {
            const sf_node *pn = sf_node_get(rs->items[i], "periodic");

            if (pn == NULL)
                continue;
            l->ctx.path = "service.telemetry.metrics.readers";
            sf_cfg_error(&l->ctx, pn, NULL, "a periodic reader pushes the collector's own "
                         "metrics, which level 'none' turns off (set level: normal or remove "
                         "the reader)");
        }
    }
    if (load_extensions(l, sf_node_get(l->root, "extensions"), sc.extensions) == SF_ENOMEM)
        return SF_ENOMEM;
    return load_pipelines(l, skey, sc.pipelines);
}

static void warn_unused(loader *l)
{
    for (size_t i = 0; i < l->cfg->n_components; i++) {
        if (l->used[i] || !l->valid[i] || l->foreign[i])
            continue;
        l->ctx.path = sf_cfg_path_join(&l->ctx, plural(l->kinds[i]), l->cfg->components[i].id);
        if (l->ctx.path == NULL)
            return;
        if (l->kinds[i] == SF_KIND_EXTENSION)
            sf_cfg_warn(&l->ctx, l->keys[i], NULL,
                        "extension '%s' is defined but not listed in service.extensions",
                        l->cfg->components[i].id);
        else
            sf_cfg_warn(&l->ctx, l->keys[i], NULL,
                        "%s '%s' is defined but not used in any pipeline",
                        sf_kind_name(l->kinds[i]), l->cfg->components[i].id);
    }
}

/* Components of types spanfence does not have: in any pipeline they are
 * an error (spanfence would have to run them, and what they would carry
 * must not be lost unseen); defined and listed by no pipeline, a warning. */
static void check_foreign(loader *l)
{
    for (size_t i = 0; i < l->cfg->n_components; i++) {
        const char *id = l->cfg->components[i].id;
        const char *slash;
        char tname[128];
        size_t tl;

        if (!l->foreign[i])
            continue;
        l->ctx.path = sf_cfg_path_join(&l->ctx, plural(l->kinds[i]), id);
        if (l->ctx.path == NULL)
            return;
        slash = strchr(id, '/');
        tl = slash ? (size_t)(slash - id) : strlen(id);
        snprintf(tname, sizeof(tname), "%.*s", (int)tl, id);
        if (!l->piped[i]) {
            if (l->valid[i])
                sf_cfg_warn(&l->ctx, l->keys[i], NULL, "%s '%s' is not run by spanfence",
                            sf_kind_name(l->kinds[i]), id);
            continue;
        }
        unknown_type(l, l->kinds[i], l->keys[i], tname);
    }
}

/* A window's closing record counts what was exported by the end of its
 * grace period: a batch processor that holds spans longer makes every
 * window with spans in its last moments wait for them (trace_control waits,
 * bounded) or close incomplete. Said at validate, once per pair. */
static void check_window_grace(loader *l)
{
    for (size_t e = 0; e < l->cfg->n_extensions; e++) {
        const sf_config_component *x = l->cfg->extensions[e];
        sf_windows_desc wd = { 0 };

        if (x->type == NULL || x->type->describe_windows == NULL || x->config == NULL ||
            !x->type->describe_windows(x->config, &wd) || wd.grace_key == NULL)
            continue;
        for (size_t p = 0; p < l->cfg->n_pipelines; p++) {
            const sf_config_pipeline *pl = &l->cfg->pipelines[p];

            if (pl->signal != SF_SIGNAL_TRACES)
                continue;
            for (size_t i = 0; i < pl->n_processors; i++) {
                const sf_config_component *pr = pl->processors[i];
                const sf_node *at;
                sf_batching b = { 0 };

                if (pr->type == NULL || pr->type->describe_batching == NULL ||
                    pr->config == NULL || !pr->type->describe_batching(pr->config, &b) ||
                    b.timeout_ms <= wd.grace)
                    continue;
                l->ctx.path = sf_cfg_path_join(&l->ctx, "extensions", x->id);
                if (l->ctx.path == NULL)
                    return;
                at = sf_node_get(sf_node_get(sf_node_get(l->root, "extensions"), x->id),
                                 wd.grace_key);
                sf_cfg_warn(&l->ctx, at ? at : x->node, wd.grace_key,
                            "%" PRId64 "ms is shorter than the timeout (%" PRId64 "ms) of "
                            "processor '%s' in pipeline '%s': a window's last spans may still be "
                            "batched when its grace period ends (its close then waits for them, "
                            "or reports them as 'queued')", wd.grace, b.timeout_ms, pr->id,
                            pl->id);
            }
        }
    }
}

static size_t map_size(const sf_node *n)
{
    return n && n->kind == SF_NODE_MAP ? n->n : 0;
}

static sf_status load_tree(loader *l)
{
    top_conf top = { 0 };
    static const sf_kind kinds[] = { SF_KIND_RECEIVER, SF_KIND_PROCESSOR, SF_KIND_EXPORTER };
    sf_config *cfg = l->cfg;
    sf_status st;

    l->ctx.node = NULL;
    st = sf_cfg_decode(&l->ctx, top_rows, l->root, &top);
    if (st == SF_ENOMEM)
        return st;
    l->cap = map_size(top.receivers) + map_size(top.processors) + map_size(top.exporters) +
             map_size(top.extensions);
    cfg->components = sf_cfg_alloc(&l->ctx, (l->cap ? l->cap : 1) * sizeof(*cfg->components));
    l->kinds = sf_cfg_alloc(&l->ctx, (l->cap ? l->cap : 1) * sizeof(*l->kinds));
    l->keys = sf_cfg_alloc(&l->ctx, (l->cap ? l->cap : 1) * sizeof(*l->keys));
    l->used = sf_cfg_alloc(&l->ctx, (l->cap ? l->cap : 1) * sizeof(*l->used));
    l->valid = sf_cfg_alloc(&l->ctx, (l->cap ? l->cap : 1) * sizeof(*l->valid));
    l->piped = sf_cfg_alloc(&l->ctx, (l->cap ? l->cap : 1) * sizeof(*l->piped));
    l->foreign = sf_cfg_alloc(&l->ctx, (l->cap ? l->cap : 1) * sizeof(*l->foreign));
    if (l->ctx.oom)
        return SF_ENOMEM;
    /* definition order: the sections in the order the file has them */
    for (size_t i = 0; i < l->root->n; i++) {
        for (size_t k = 0; k < 3; k++) {
            if (strcmp(l->root->keys[i]->text, plural(kinds[k])) == 0 &&
                load_components(l, kinds[k], l->root->items[i]) == SF_ENOMEM)
                return SF_ENOMEM;
        }
    }
    if (load_service(l, top.service) == SF_ENOMEM)
        return SF_ENOMEM;
    check_foreign(l);
    check_window_grace(l);
    /* without pipelines every component is unused: that says nothing new */
    if (map_size(sf_node_get(top.service, "pipelines")) > 0)
        warn_unused(l);
    return l->ctx.oom ? SF_ENOMEM : SF_OK;
}

/* ---- merging sources (--config repeated, --set) ------------------------------ */

/* `base` with `over` merged in, as the upstream collector's confmap: two
 * mappings merge key by key (the key keeps its first position), anything
 * else is replaced by `over`. New nodes are arena memory; the inputs are
 * not changed (they may be shared through aliases). NULL on no memory. */
static sf_node *merge_nodes(sf_arena *a, sf_node *base, sf_node *over)
{
    sf_node *n;

    if (base == NULL || base->kind != SF_NODE_MAP || over->kind != SF_NODE_MAP)
        return over;
    n = sf_arena_alloc(a, sizeof(*n));
    if (n == NULL)
        return NULL;
    *n = *base;
    n->keys = sf_arena_alloc(a, (base->n + over->n + 1) * sizeof(*n->keys));
    n->items = sf_arena_alloc(a, (base->n + over->n + 1) * sizeof(*n->items));
    if (n->keys == NULL || n->items == NULL)
        return NULL;
    memcpy(n->keys, base->keys, base->n * sizeof(*n->keys));
    memcpy(n->items, base->items, base->n * sizeof(*n->items));
    for (size_t i = 0; i < over->n; i++) {
        size_t j;

        for (j = 0; j < n->n; j++)
            if (strcmp(n->keys[j]->text, over->keys[i]->text) == 0)
                break;
        if (j == n->n) {
            n->keys[n->n] = over->keys[i];
            n->items[n->n++] = over->items[i];
            continue;
        }
        n->items[j] = merge_nodes(a, n->items[j], over->items[i]);
        if (n->items[j] == NULL)
            return NULL;
    }
    return n;
}

/* A mapping whose keys say "a::b::c" (confmap's key delimiter, as --set
 * and yaml: write them) as the nested mappings they mean, at every level. */
static sf_node *expand_keys(sf_arena *a, sf_node *map, int depth, size_t *budget)
{
    sf_node *n;

    /* aliases share nodes, so a tree can be far larger than its file: the
     * walk stops after `budget` mappings (their keys stay as written) */
    if (map == NULL || map->kind != SF_NODE_MAP || depth > 64 || *budget == 0)
        return map;
    (*budget)--;
    n = sf_arena_alloc(a, sizeof(*n));
    if (n == NULL)
        return NULL;
    *n = *map;
    n->n = 0;
    n->keys = sf_arena_alloc(a, (map->n + 1) * sizeof(*n->keys));
    n->items = sf_arena_alloc(a, (map->n + 1) * sizeof(*n->items));
    if (n->keys == NULL || n->items == NULL)
        return NULL;
    for (size_t i = 0; i < map->n; i++) {
        sf_node *k = map->keys[i], *v = expand_keys(a, map->items[i], depth + 1, budget);
        const char *sep = strstr(k->text, "::");
        size_t j;

        if (v == NULL)
            return NULL;
        if (sep != NULL && sep != k->text && sep[2] != '\0') {
            /* "a::rest": v -> a: {rest: v}, the rest expanded in turn */
            sf_node *head = sf_arena_alloc(a, sizeof(*head));
            sf_node *tail = sf_arena_alloc(a, sizeof(*tail));
            sf_node *inner = sf_arena_alloc(a, sizeof(*inner));

            if (head == NULL || tail == NULL || inner == NULL)
                return NULL;
            *head = *k;
            head->text = sf_arena_strndup(a, k->text, (size_t)(sep - k->text));
            head->len = (size_t)(sep - k->text);
            head->raw = NULL;
            *tail = *k;
            tail->text = sf_arena_strndup(a, sep + 2, strlen(sep + 2));
            tail->len = strlen(sep + 2);
            tail->raw = NULL;
            *inner = (sf_node){ .kind = SF_NODE_MAP, .line = k->line, .col = k->col,
                                .file = k->file, .source = k->source, .n = 1 };
            inner->keys = sf_arena_alloc(a, sizeof(*inner->keys));
            inner->items = sf_arena_alloc(a, sizeof(*inner->items));
            if (head->text == NULL || tail->text == NULL || inner->keys == NULL ||
                inner->items == NULL)
                return NULL;
            inner->keys[0] = tail;
            inner->items[0] = v;
            k = head;
            v = expand_keys(a, inner, depth + 1, budget);
            if (v == NULL)
                return NULL;
        }
        for (j = 0; j < n->n; j++)
            if (strcmp(n->keys[j]->text, k->text) == 0)
                break;
        if (j < n->n) {
            n->items[j] = merge_nodes(a, n->items[j], v);
            if (n->items[j] == NULL)
                return NULL;
        } else {
            n->keys[n->n] = k;
            n->items[n->n++] = v;
        }
    }
    return n;
}

/* Whether `text` holds "::" anywhere (it is not NUL-terminated). */
static bool has_key_delimiter(const char *text, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++)
        if (text[i] == ':' && text[i + 1] == ':')
            return true;
    return false;
}

/* Read every source into one tree (merged in order) and load it as a
 * document of type `t` (sf_config_int.h). */
sf_status sf_document_load(const sf_document_type *t, const char *const *names,
                           const char *const *texts, const size_t *lens, size_t n, sf_diag *diag,
                           void **out)
{
    void *doc;
    char *file;
    sf_arena *arena;
    sf_node *root = NULL;
    sf_cfg_ctx ctx;
    size_t errors = sf_diag_errors(diag), name_len = 0;
    sf_status st = SF_OK;

    *out = NULL;
    arena = sf_arena_create(t->arena_chunk, 0);
    if (arena == NULL)
        return SF_ENOMEM;
    doc = sf_arena_alloc(arena, t->size);
    if (doc == NULL) {
        st = SF_ENOMEM;
        goto out_destroy_arena;
    }
    memset(doc, 0, t->size);
    for (size_t i = 0; i < n; i++)
        name_len += strlen(names[i]) + 2;
    file = sf_arena_alloc(arena, name_len + 1);
    if (file == NULL) {
        st = SF_ENOMEM;
        goto out_destroy_arena;
    }
    file[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        sf_node *one = NULL;
        sf_status ys;

        strcat(file, names[i]);
        if (i + 1 < n)
            strcat(file, ", ");
        if (sf_diag_set_source(diag, names[i], (int)i) != SF_OK) {
            st = SF_ENOMEM;
            goto out_destroy_arena;
        }
        ys = sf_yaml_load(texts[i], lens[i], arena, diag, &one);
        if (ys == SF_ENOMEM) {
            st = SF_ENOMEM;
            goto out_destroy_arena;
        }
        if (one == NULL)
            continue;
        if (t->key_paths && (n > 1 || has_key_delimiter(texts[i], lens[i]))) {
            size_t budget = 100000;

            one = expand_keys(arena, one, 0, &budget);
            if (one == NULL || (root = merge_nodes(arena, root, one)) == NULL) {
                st = SF_ENOMEM;
                goto out_destroy_arena;
            }
        } else {
            root = one;
        }
    }
    /* messages without a node name the first source */
    if (sf_diag_set_source(diag, names[0], 0) != SF_OK) {
        st = SF_ENOMEM;
        goto out_destroy_arena;
    }
    if (root == NULL) {
        st = SF_CONFIG;
        goto out_destroy_arena;
    }
    sf_cfg_ctx_init(&ctx, diag, arena);
    st = t->load(doc, arena, file, root, &ctx);
    if (st == SF_ENOMEM || sf_diag_oom(diag)) {
        st = SF_ENOMEM;
        goto out_destroy_arena;
    }
    if (sf_diag_errors(diag) > errors) {
        st = SF_CONFIG;
        goto out_destroy_arena;
    }
    *out = doc;
    return SF_OK;

out_destroy_arena:
    sf_arena_destroy(arena);
    return st;
}

sf_status sf_document_load_file(const sf_document_type *t, const char *path, sf_diag *diag,
                                void **out)
{
    char *buf;
    size_t len;
    sf_status st;

    *out = NULL;
    st = sf_config_read_file(path, t->max_file, diag, &buf, &len);
    if (st != SF_OK)
        return st;
    st = sf_document_load(t, &path, (const char *const *)&buf, &len, 1, diag, out);
    sf_free(buf);
    return st;
}

/* A config once parsed: the service, the components, the pipelines. */
static sf_status load_config(void *doc, sf_arena *arena, char *file, sf_node *root,
                             sf_cfg_ctx *ctx)
{
    sf_config_owned *owned = doc;
    loader l;

    owned->arena = arena;
    owned->pub.file = file;
    owned->pub.root = root;
    memset(&l, 0, sizeof(l));
    l.ctx = *ctx;
    l.cfg = &owned->pub;
    l.root = root;
    return load_tree(&l);
}

static const sf_document_type config_document = {
    .size = sizeof(sf_config_owned),
    .arena_chunk = SF_CONFIG_ARENA_CHUNK,
    .max_file = SF_CONFIG_MAX_FILE,
    .key_paths = true,
    .load = load_config,
};

/* The sources, named by `names` in messages (the first is the config's
 * name), merged into one config. */
static sf_status load_sources(const char *const *names, const char *const *texts,
                              const size_t *lens, size_t n, sf_diag *diag, sf_config **out)
{
    void *doc;
    sf_status st = sf_document_load(&config_document, names, texts, lens, n, diag, &doc);

    *out = doc;
    return st;
}

sf_status sf_config_load_string(const char *name, const char *yaml, size_t len,
                                sf_diag *diag, sf_config **out)
{
    return load_sources(&name, &yaml, &len, 1, diag, out);
}

const char *sf_config_uri_unsupported(const char *uri, char *buf, size_t size)
{
    size_t i = 0;

    while (isalnum((unsigned char)uri[i]) || uri[i] == '+' || uri[i] == '-' || uri[i] == '.')
        i++;
    /* a scheme is two characters or more and starts with a letter (so a
     * path such as "C:..." or "./a:b" is a path) */
    if (uri[i] != ':' || i < 2 || !isalpha((unsigned char)uri[0]))
        return NULL;
    if ((i == 4 && strncmp(uri, "file", 4) == 0) || (i == 3 && strncmp(uri, "env", 3) == 0) ||
        (i == 4 && strncmp(uri, "yaml", 4) == 0))
        return NULL;
    snprintf(buf, size, "%.*s", (int)i, uri);
    return buf;
}

sf_status sf_config_load_uris(const char *const *uris, size_t n, sf_diag *diag,
                              sf_config **out)
{
    return sf_config_load_uris_extra(uris, n, NULL, NULL, diag, out);
}

sf_status sf_config_load_uris_extra(const char *const *uris, size_t n, const char *extra_name,
                                    const char *extra, sf_diag *diag, sf_config **out)
{
    const char **names, **texts;
    char **owned;
    size_t *lens;
    sf_status st = SF_OK;

    *out = NULL;
    if (n == 0)
        return SF_INVALID;
    names = sf_calloc(n + 1, sizeof(*names));
    texts = sf_calloc(n + 1, sizeof(*texts));
    owned = sf_calloc(n + 1, sizeof(*owned));
    lens = sf_calloc(n + 1, sizeof(*lens));
    if (names == NULL || texts == NULL || owned == NULL || lens == NULL) {
        st = SF_ENOMEM;
        goto out_free;
    }
    for (size_t i = 0; i < n && st == SF_OK; i++) {
        const char *u = uris[i];
        char scheme[32];

        names[i] = u;
        if (sf_config_uri_unsupported(u, scheme, sizeof(scheme)) != NULL) {
            if (sf_diag_set_source(diag, u, (int)i) != SF_OK)
                st = SF_ENOMEM;
            else
                sf_diag_error(diag, NULL, NULL, "config source scheme '%s' is not supported by "
                              "spanfence (use a file path, file:PATH, env:VAR or yaml:TEXT)",
                              scheme);
            st = st == SF_OK ? SF_CONFIG : st;
        } else if (strncmp(u, "env:", 4) == 0) {
            const char *v = getenv(u + 4);

            if (sf_diag_set_source(diag, u, (int)i) != SF_OK) {
                st = SF_ENOMEM;
            } else if (v == NULL) {
                sf_diag_error(diag, NULL, NULL, "environment variable '%s' is not set", u + 4);
                st = SF_CONFIG;
            } else {
                texts[i] = v;
                lens[i] = strlen(v);
            }
        } else if (strncmp(u, "yaml:", 5) == 0) {
            texts[i] = u + 5;
            lens[i] = strlen(u + 5);
        } else {
            const char *path = strncmp(u, "file:", 5) == 0 ? u + 5 : u;

            names[i] = path;
            st = sf_config_read_file(path, config_document.max_file, diag, &owned[i], &lens[i]);
            texts[i] = owned[i];
            if (st == SF_OK && sf_diag_set_source(diag, path, (int)i) != SF_OK)
                st = SF_ENOMEM;
        }
    }
    if (st == SF_OK && extra != NULL) {
        names[n] = extra_name != NULL ? extra_name : "(extra)";
        texts[n] = extra;
        lens[n] = strlen(extra);
    }
    if (st == SF_OK)
        st = load_sources(names, texts, lens, n + (extra != NULL), diag, out);
out_free:
    for (size_t i = 0; owned != NULL && i < n; i++)
        sf_free(owned[i]);
    sf_free(names);
    sf_free(texts);
    sf_free(owned);
    sf_free(lens);
    return st;
}

sf_status sf_config_read_file(const char *path, size_t max, sf_diag *diag, char **out,
                              size_t *out_len)
{
    FILE *f;
    sf_dynbuf buf;
    size_t n;
    sf_status st;

    *out = NULL;
    *out_len = 0;
    if (sf_diag_set_file(diag, path) != SF_OK)
        return SF_ENOMEM;
    /* One byte more than max tells "too large" from "exactly max". */
    sf_dynbuf_init(&buf, max + 1);
    f = fopen(path, "rb");
    if (f == NULL)
        goto out_io_error;
    do {
        void *tail;
        size_t room;

        st = sf_dynbuf_room(&buf, sf_dynbuf_len(&buf) == 0 ? 8192 : 1, &tail, &room);
        if (st == SF_TOOBIG) {
            sf_diag_error(diag, NULL, NULL, "the file is larger than %zu bytes", max);
            st = SF_CONFIG;
        }
        if (st != SF_OK)
            goto out_close;
        n = fread(tail, 1, room, f);
        sf_dynbuf_commit(&buf, n);
    } while (n > 0);
    if (ferror(f)) {
        fclose(f);
        goto out_io_error;
    }
    fclose(f);
    if (sf_dynbuf_len(&buf) > max) {
        sf_diag_error(diag, NULL, NULL, "the file is larger than %zu bytes", max);
        sf_dynbuf_release(&buf);
        return SF_CONFIG;
    }
    *out = sf_dynbuf_take(&buf, out_len);
    return *out != NULL ? SF_OK : SF_ENOMEM;

out_close:
    fclose(f);
    sf_dynbuf_release(&buf);
    return st;
out_io_error: {
        char reason[128];

        snprintf(reason, sizeof(reason), "%s", strerror(errno));
        reason[0] = (char)tolower((unsigned char)reason[0]);
        sf_diag_error(diag, NULL, NULL, "cannot read the file: %s", reason);
        sf_dynbuf_release(&buf);
        return SF_IO;
    }
}

sf_status sf_config_load(const char *path, sf_diag *diag, sf_config **out)
{
    void *doc;
    sf_status st = sf_document_load_file(&config_document, path, diag, &doc);

    *out = doc;
    return st;
}

void sf_config_destroy(sf_config *cfg)
{
    if (cfg == NULL)
        return;
    sf_arena_destroy(((sf_config_owned *)cfg)->arena);
}

sf_config_component *sf_config_find(const sf_config *cfg, const char *id)
{
    for (size_t i = 0; cfg && i < cfg->n_components; i++)
        if (strcmp(cfg->components[i].id, id) == 0)
            return &cfg->components[i];
    return NULL;
}

/* ---- --help-config ------------------------------------------------------------ */

static const char *type_name(sf_cfg_type t)
{
    switch (t) {
    case SF_CFG_STR:      return "string";
    case SF_CFG_BOOL:     return "bool";
    case SF_CFG_INT:      return "integer";
    case SF_CFG_DOUBLE:   return "number";
    case SF_CFG_DURATION: return "duration";
    case SF_CFG_SIZE:     return "size";
    case SF_CFG_ENUM:     return "one of";
    case SF_CFG_STRLIST:  return "list";
    case SF_CFG_STRMAP:   return "map";
    case SF_CFG_SECTION:  return "section";
    case SF_CFG_LIST:     return "list of";
    case SF_CFG_CUSTOM:   return "custom";
    case SF_CFG_REJECT:   return "refused";
    case SF_CFG_IGNORE:   return "ignored";
    case SF_CFG_END:      break;
    }
    return "?";
}

static void print_rows(const sf_config_row *rows, int indent)
{
    for (const sf_config_row *r = rows; r->type != SF_CFG_END; r++) {
        char range[128] = "", a[40], b[40];

        if (r->type == SF_CFG_INT && r->min < r->max)
            snprintf(range, sizeof(range), ", %lld to %lld", (long long)r->min, (long long)r->max);
        else if (r->type == SF_CFG_DURATION && r->min < r->max) {
            sf_format_duration(r->min, a, sizeof(a));
            sf_format_duration(r->max, b, sizeof(b));
            snprintf(range, sizeof(range), ", %s to %s", a, b);
        } else if (r->type == SF_CFG_SIZE && r->min < r->max) {
            sf_format_size(r->min, a, sizeof(a));
            sf_format_size(r->max, b, sizeof(b));
            snprintf(range, sizeof(range), ", %s to %s", a, b);
        } else if (r->type == SF_CFG_DOUBLE && r->dmin < r->dmax)
            snprintf(range, sizeof(range), ", %g to %g", r->dmin, r->dmax);
        printf("%*s%s (%s%s%s%s%s%s)%s%s\n", indent, "", r->key, type_name(r->type),
               r->type == SF_CFG_ENUM ? " " : "", r->type == SF_CFG_ENUM ? r->choices : "",
               range, r->def ? ", default " : "", r->def ? r->def : "",
               r->help ? ": " : "", r->help ? r->help : "");
        /* a CUSTOM row with rows (readers: a list of them) shows them too */
        if ((r->type == SF_CFG_SECTION || r->type == SF_CFG_LIST || r->type == SF_CFG_CUSTOM) &&
            r->sub)
            print_rows(r->sub, indent + 2);
    }
}

void sf_config_print_help(void)
{
    for (const sf_component_type *const *t = sf_registry; *t; t++) {
        printf("%s %s%s%s%s: %s\n", sf_kind_name((*t)->kind), (*t)->name,
               (*t)->alias ? " (alias " : "", (*t)->alias ? (*t)->alias : "",
               (*t)->alias ? ")" : "", (*t)->description ? (*t)->description : "");
        if ((*t)->config_map)
            print_rows((*t)->config_map, 2);
    }
    printf("service\n");
    print_rows(service_rows, 2);
}

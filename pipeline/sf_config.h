/* sf_config.h: the YAML config as components see it: positioned nodes,
 * diagnostics, and the config map (rows of key, type, default, offset, help)
 * that one decoder uses to fill a component's config struct, reject unknown
 * keys, check ranges and print help.
 *
 * The loader (sf_config_load) reads one file in the OpenTelemetry Collector's
 * layout, expands ${env:VAR}, resolves anchors, aliases and merge keys,
 * decodes every component with its type's config map, checks the service
 * section, and reports every problem it finds in one run as
 *   FILE:LINE:COL: path.to.key: what is wrong
 * Nothing here starts or binds anything. */
#ifndef SF_CONFIG_H
#define SF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_signal.h"
#include "sf_status.h"

/* ---- YAML nodes ------------------------------------------------------- */

typedef enum sf_node_kind {
    SF_NODE_SCALAR,
    SF_NODE_MAP,
    SF_NODE_SEQ
} sf_node_kind;

/* A YAML node after alias/merge resolution and env expansion. Read-only for
 * components; owned by the loaded document. */
typedef struct sf_node {
    sf_node_kind kind;
    int line, col;              /* 1-based position in the file */
    /* The source it came from when the config was merged from several
     * (--config given twice, --set): its name for messages, and its index
     * in the order given. NULL, 0: the one file being loaded. */
    const char *file;
    int source;
    /* SCALAR: text after ${env} expansion, NUL-terminated; `plain` is true
     * for an unquoted scalar (only those can be null/bool/number). A YAML
     * null (`~`, `null`, empty) is a plain scalar with text "" and is_null. */
    char *text;
    size_t len;
    /* The scalar as written, before ${env} expansion, when expansion changed
     * it (the policy pins `${env:VAR}` itself); NULL otherwise. */
    const char *raw;
    bool plain;
    bool is_null;
    /* A problem with this node was already reported while reading the file
     * (e.g. an unset environment variable): checks skip its component. */
    bool invalid;
    /* MAP: n pairs keys[i] -> items[i] (keys are scalars, unique);
     * SEQ: n items. */
    size_t n;
    struct sf_node **keys;
    struct sf_node **items;
} sf_node;

/* Value for `key` in a MAP node, or NULL. */
const sf_node *sf_node_get(const sf_node *map, const char *key);
/* The key node itself (where an error about the key points), or NULL. */
const sf_node *sf_node_key(const sf_node *map, const char *key);

/* ---- diagnostics ------------------------------------------------------ */

typedef struct sf_diag sf_diag;

sf_diag *sf_diag_create(const char *file);
void sf_diag_destroy(sf_diag *d);
/* Record an error/warning at node `at` (NULL: the file itself) about the
 * key path `path` (e.g. "processors.transform/allowlist.error_mode"; NULL for
 * none). Message: lowercase, no full stop, subjects in single quotes. */
void sf_diag_error(sf_diag *d, const sf_node *at, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void sf_diag_warn(sf_diag *d, const sf_node *at, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
size_t sf_diag_errors(const sf_diag *d);
size_t sf_diag_warnings(const sf_diag *d);
/* The i-th message, fully formatted "FILE:LINE:COL: path: msg", in the order
 * of their position in the file; warnings carry a "warning: " prefix on msg. */
size_t sf_diag_count(const sf_diag *d);
const char *sf_diag_message(const sf_diag *d, size_t i);
/* Print all messages, one per line, to stderr. */
void sf_diag_print(const sf_diag *d);

/* ---- config maps ------------------------------------------------------- */

typedef struct sf_cfg_ctx sf_cfg_ctx;

typedef enum sf_cfg_type {
    SF_CFG_END = 0,     /* terminates a row array */
    SF_CFG_STR,         /* char * */
    SF_CFG_BOOL,        /* bool */
    SF_CFG_INT,         /* int64_t, range [min, max] when min < max */
    SF_CFG_DOUBLE,      /* double, range [dmin, dmax] when dmin < dmax */
    SF_CFG_DURATION,    /* int64_t milliseconds: "5s", "250ms", "1m30s", "0" */
    SF_CFG_SIZE,        /* int64_t bytes: "512MiB", "64KiB", "1048576" */
    SF_CFG_ENUM,        /* int: index into `choices` ("gzip|none") */
    SF_CFG_STRLIST,     /* sf_strlist */
    SF_CFG_STRMAP,      /* sf_strmap: any keys -> string values (e.g. headers) */
    SF_CFG_SECTION,     /* nested mapping decoded with `sub`: `offset` is where the
                           nested struct starts, sub-row offsets are relative to
                           it; the nested struct begins with `bool present`, set
                           when the key appears (a null value, as in `grpc:`,
                           counts as an empty mapping) */
    SF_CFG_LIST,        /* sf_cfg_list: a sequence of mappings, each decoded with
                           `sub` into an element of `elem_size` bytes (zeroed,
                           defaults applied; sub-row offsets are relative to the
                           element, which has no `present` flag) */
    SF_CFG_CUSTOM,      /* `parse` decodes the node into the field */
    SF_CFG_REJECT,      /* key is known but refused; `help` is the message */
    SF_CFG_IGNORE       /* an upstream key spanfence accepts but does not use:
                           warns "'key' has no effect in spanfence" */
} sf_cfg_type;

#define SF_CFG_NO_FIELD ((size_t)-1)

typedef struct sf_strlist {
    size_t n;
    char **v;
} sf_strlist;

typedef struct sf_cfg_list {
    size_t n;
    void *v;                    /* n elements of the row's elem_size bytes */
} sf_cfg_list;

typedef struct sf_strmap {
    size_t n;
    char **keys;
    char **values;
} sf_strmap;

typedef struct sf_config_row {
    const char *key;
    sf_cfg_type type;
    const char *def;            /* default, as YAML text; NULL: zero/absent */
    size_t offset;              /* offsetof(config struct, field) */
    const char *help;           /* one line, shown by --help-config */
    int64_t min, max;           /* INT, DURATION (ms), SIZE (bytes) */
    double dmin, dmax;          /* DOUBLE */
    const char *choices;        /* ENUM */
    /* ENUM: values the upstream collector accepts here that spanfence
     * does not ("snappy|lz4"): refused as "not supported by spanfence"
     * rather than unknown, with the choices to use instead. */
    const char *upstream;
    const struct sf_config_row *sub;  /* SECTION, LIST */
    size_t elem_size;                 /* LIST: sizeof one element */
    /* CUSTOM: decode `node` into `field`; report problems with
     * sf_cfg_error() and return SF_CONFIG. */
    sf_status (*parse)(sf_cfg_ctx *ctx, const sf_node *node, void *field);
} sf_config_row;

/* Inside parse/check callbacks: report at `at`, with the path of the key
 * being decoded plus `subpath` (may be NULL), e.g. "trace_statements[1]". */
void sf_cfg_error(sf_cfg_ctx *ctx, const sf_node *at, const char *subpath, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void sf_cfg_warn(sf_cfg_ctx *ctx, const sf_node *at, const char *subpath, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An exporter's tls.server_name_override (`tls`: its tls mapping node, for
 * the position): a host name (sf_is_host_name), and only with TLS. SF_OK
 * when absent (NULL); SF_CONFIG, reported, otherwise. */
sf_status sf_cfg_check_server_name(sf_cfg_ctx *ctx, const sf_node *tls, const char *name,
                                    bool insecure);
/* Memory that lives as long as the loaded config (freed with it). */
void *sf_cfg_alloc(sf_cfg_ctx *ctx, size_t size);
char *sf_cfg_strdup(sf_cfg_ctx *ctx, const char *s, size_t len);
/* The start of a CUSTOM row that reads a list: the zeroed array of `node`'s
 * items, `size` bytes each, living as long as the config. NULL with
 * *st = SF_OK when the value is null (an empty list); NULL with SF_CONFIG,
 * reported as "expected a list of <what>", when it is not a sequence; NULL
 * with SF_ENOMEM. */
void *sf_cfg_list_alloc(sf_cfg_ctx *ctx, const sf_node *node, const char *what, size_t size,
                        sf_status *st);
/* For a CUSTOM row that reads a mapping into an sf_strmap: room in `m` for
 * `n` pairs, living as long as the config; SF_ENOMEM. _add appends copies
 * of the scalars `key` and `value` (within that room); SF_ENOMEM. */
sf_status sf_cfg_strmap_alloc(sf_cfg_ctx *ctx, sf_strmap *m, size_t n);
sf_status sf_cfg_strmap_add(sf_cfg_ctx *ctx, sf_strmap *m, const sf_node *key,
                            const sf_node *value);
/* The key node of the component (or section) being checked, for positions. */
const sf_node *sf_cfg_node(const sf_cfg_ctx *ctx);
/* In a check callback: the component's value mapping (NULL when it has no
 * settings), to find the node of a key with sf_node_get(). */
const sf_node *sf_cfg_value(const sf_cfg_ctx *ctx);

/* Parse "1m30s"/"250ms"/"5s"/"2h"/"0" into milliseconds (units ns, us, ms,
 * s, m, h; sub-millisecond totals round up to 1ms unless zero). */
sf_status sf_parse_duration(const char *s, int64_t *ms);
/* Parse "512MiB", "64KiB", "1GiB", "10MB", "4096" into bytes. */
sf_status sf_parse_size(const char *s, int64_t *bytes);
/* A DNS host name or dotted IPv4 address, as a TLS server name: labels of
 * 1-63 letters, digits and '-' (not first or last), dot-separated, 253
 * characters at most; no port, scheme, brackets or spaces. */
bool sf_is_host_name(const char *s);

/* ---- the loaded config ------------------------------------------------- */

struct sf_component_type;

typedef struct sf_config_component {
    char *id;                                  /* "transform/allowlist" */
    /* NULL (and config NULL) for a type spanfence does not have: allowed
     * only in metrics/logs pipelines or unused, never run */
    const struct sf_component_type *type;
    void *config;                              /* type->config_size bytes */
    const sf_node *node;
} sf_config_component;

typedef struct sf_config_pipeline {
    char *id;                                  /* "traces", "traces/2" */
    sf_signal signal;
    size_t n_receivers, n_processors, n_exporters;
    sf_config_component **receivers;
    sf_config_component **processors;
    sf_config_component **exporters;
    const sf_node *node;
} sf_config_pipeline;

/* service.telemetry.metrics.readers[i].periodic with its otlp exporter
 * (upstream's otelconf spelling), decoded and checked. The core runs no
 * push of its own: the command turns it into components and a pipeline
 * (pipeline/cli/telemetry_push.c). */
typedef struct sf_config_push_header {
    char *name;
    char *value;                               /* after ${env} expansion: a secret */
} sf_config_push_header;

typedef struct sf_config_push_reader {
    const char *path;                          /* "service.telemetry.metrics.readers[1]" */
    const sf_node *node;                       /* the reader, for positions */
    int64_t interval_ms;                       /* periodic.interval */
    int64_t timeout_ms;                        /* periodic.timeout */
    bool grpc;                                 /* protocol grpc, else http/protobuf */
    char *endpoint;                            /* http: the full URL (/v1/metrics added
                                                  when it has no path); grpc: host:port */
    bool tls;                                  /* https://, or grpc without insecure */
    bool gzip;                                 /* compression gzip, else none */
    int64_t export_timeout_ms;                 /* exporter.otlp.timeout */
    char *certificate, *client_certificate, *client_key;
    size_t n_headers;                          /* headers, then headers_list */
    sf_config_push_header *headers;
} sf_config_push_reader;

typedef struct sf_config {
    char *file;
    sf_node *root;
    size_t n_components;
    sf_config_component *components;
    size_t n_pipelines;
    sf_config_pipeline *pipelines;
    size_t n_extensions;                       /* service.extensions of registered types, */
    sf_config_component **extensions;          /* in the listed order (also in components) */
    char *metrics_address;                     /* service.telemetry.metrics.address, or the
                                                  pull reader's host:port; NULL: none */
    /* The endpoint's naming. `address` (and no readers) names series as
     * upstream's default reader does: no _total, no units, no resource
     * labels. A pull reader's prometheus exporter adds them unless its
     * without_type_suffix / without_units say not. */
    bool metrics_type_suffix;                  /* counters end in _total */
    bool metrics_units;                        /* _seconds, _bytes */
    bool metrics_detailed;                     /* metrics.level: detailed */
    unsigned metrics_labels;                   /* SF_RESOURCE_* on every series */
    const char *service_name;                  /* service.telemetry.resource, or NULL */
    const char *service_version;
    const char *service_instance_id;
    int log_level;                             /* service.telemetry.logs.level (sf_log_level) */
    bool log_json;                             /* service.telemetry.logs.encoding: json */
    sf_strlist log_outputs;                    /* output_paths; n == 0: stderr */
    size_t n_push_readers;                     /* periodic readers: 0 or 1 */
    sf_config_push_reader *push_readers;
} sf_config;

enum {
    SF_RESOURCE_SERVICE_NAME = 1,
    SF_RESOURCE_SERVICE_VERSION = 2,
    SF_RESOURCE_SERVICE_INSTANCE_ID = 4
};

/* Load and validate `path`. On SF_OK *out is a valid config (diag may hold
 * warnings); on SF_CONFIG diag holds every error found and *out is NULL;
 * SF_IO when the file cannot be read (also reported in diag). */
sf_status sf_config_load(const char *path, sf_diag *diag, sf_config **out);
/* Load and validate the config merged from `n` sources in order, as the
 * upstream collector's resolver does (`--config` repeated, then `--set`):
 *   PATH or file:PATH   a YAML file
 *   env:VAR             YAML text in environment variable VAR
 *   yaml:TEXT           YAML text inline ("yaml:processors::batch::timeout: 2s")
 * Mappings merge key by key, later sources winning; any other value (a
 * list included) is replaced whole. A key "a::b" is the key b inside a. A
 * message names the source of its node. Other schemes (http:, s3:...) are
 * an error naming the supported ones. Returns as sf_config_load. */
sf_status sf_config_load_uris(const char *const *uris, size_t n, sf_diag *diag,
                              sf_config **out);
/* Same, with YAML text `extra` merged last as a source named `extra_name`
 * (both may be NULL: none), for a layer the command writes itself. */
sf_status sf_config_load_uris_extra(const char *const *uris, size_t n, const char *extra_name,
                                    const char *extra, sf_diag *diag, sf_config **out);
/* The scheme of `uri` spanfence does not read ("http"), copied into buf, or
 * NULL when it reads it (a path, file:, env:, yaml:). */
const char *sf_config_uri_unsupported(const char *uri, char *buf, size_t size);
/* Same, from a string (tests); `name` is used as the file name in messages. */
sf_status sf_config_load_string(const char *name, const char *yaml, size_t len,
                                sf_diag *diag, sf_config **out);
void sf_config_destroy(sf_config *cfg);
/* Expand ${env:VAR}, ${VAR}, ${env:VAR:-default} and $$ in `in` as the
 * loader does in a scalar value, for a caller that needs one setting of a
 * config and not the rest (trace-level's socket). On SF_OK *out is heap
 * memory (sf_free); SF_CONFIG with *err (heap, sf_free) naming the problem
 * ("environment variable 'X' is not set"); SF_ENOMEM. */
sf_status sf_config_expand_env(const char *in, char **out, char **err);

/* Find a component by id, or NULL. */
sf_config_component *sf_config_find(const sf_config *cfg, const char *id);

/* Print the config map of every registered type (for --help-config). */
void sf_config_print_help(void);

#endif

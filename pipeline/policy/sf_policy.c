/* sf_policy.c: the production policy: reading the policy file (the config
 * loader's document loader and row decoder, so unknown keys, wrong types and
 * ranges are reported with positions like in a config) and checking a loaded
 * config against it, one message per violation at the closest node.
 *
 * DESIGN: the policy pins outcomes, not text: the allowlist is compared as
 * the set of keys each context lets through (every keep_keys and delete_key
 * of the context applied, in any order), asked of the edit the processor
 * compiles, the one the codec runs, and the exporter by its decoded
 * settings (defaults included). Span-name rules are the exception: what a
 * replace_pattern removes cannot be compared, so they are pinned as text,
 * the exact ordered list of (pattern, replacement) of each context.
 * Components are found through the config's sections, so components of
 * types spanfence does not run (in metrics and logs pipelines) are checked
 * too: the exporter is used by no other pipeline, their receivers bind
 * loopback. What a component's settings mean is asked of its type
 * (describe_allowlist, describe_export, describe_listen: sf_describe.h), so
 * every exporter type with a sending queue is pinned the same way, and
 * this file knows no component by name. Everything the policy holds lives
 * in one arena owned by the sf_policy. */
#include "sf_policy.h"

#include "internal/sf_config_int.h"
#include "internal/sf_core.h"
#include "sf_sender.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SF_POLICY_MAX_FILE (1u << 20)
#define SF_POLICY_ARENA_CHUNK 8192

/* ---- the policy file --------------------------------------------------------- */

typedef struct policy_keys {
    bool present;
    sf_strlist ctx[SF_OTLP_CTX_COUNT];     /* v == NULL: not pinned */
} policy_keys;

/* One replace_pattern(name, pattern, replacement), both unescaped. */
typedef struct policy_rule {
    char *pattern;
    char *replacement;
} policy_rule;

typedef struct policy_rules {
    const sf_node *node;                        /* NULL: not pinned */
    size_t n;
    policy_rule *v;
} policy_rules;

typedef struct policy_name_rules {
    bool present;
    policy_rules ctx[SF_OTLP_CTX_COUNT];   /* only span and spanevent have rows */
} policy_name_rules;

typedef struct policy_value_rules {
    bool present;
    sf_strmap ctx[SF_OTLP_CTX_COUNT];           /* key -> the condition after 'where' */
} policy_value_rules;

/* What every fence section pins (the allowlist section for traces, a logs
 * or metrics section): its rows are FENCE_ROWS, and check_rules holds a
 * processor's rules for the section's signal against it. */
typedef struct policy_fence {
    char *processor;
    int error_mode;                             /* SF_ERROR_MODE_* */
    bool declared_fields;
    int kept_value_types;                       /* VALUES_* (any: not pinned) */
    bool pseudonymize_ids;                      /* the processor's pseudonymize_ids */
    policy_keys keys;
    int64_t max_string_length;                  /* 0: not pinned */
    policy_keys pseudonymized;                  /* per context, the keys pseudonymized */
    policy_value_rules value_rules;
    sf_strmap field_values;                     /* "span.name" -> the value set */
    sf_strmap field_patterns;                   /* "span.name" -> the IsMatch that keeps it */
} policy_fence;

typedef struct policy_allowlist {
    bool present;
    policy_fence fence;
    bool clear_status_message;
    bool clear_trace_state;
    policy_name_rules name_rules;
    int64_t max_events_per_span;                /* 0: not pinned */
    int64_t max_links_per_span;                 /* 0: not pinned */
    int64_t max_spans_per_request;              /* 0: not pinned */
    int64_t max_resources_per_request;          /* 0: not pinned */
    int64_t max_scopes_per_resource;            /* 0: not pinned */
} policy_allowlist;

typedef struct policy_exporter {
    bool present;
    char *id;
    char *endpoint;
    char *endpoint_env;
    int queue_sizer;                            /* sf_sizer max_queue_size counts in */
    int64_t max_queue_size;
    int64_t max_elapsed_time;                   /* ms */
} policy_exporter;

typedef struct policy_receivers {
    bool present;
    sf_strlist ids;                             /* v == NULL: not pinned */
    bool loopback_only;
} policy_receivers;

typedef struct policy_trace_control {
    bool present;
    bool markers;
    bool auto_revert;
    bool enforce;
    int out_of_band;                /* OOB_* */
} policy_trace_control;

enum { OOB_ANY = 0, OOB_DROP = 1 };

/* The fence of the logs or the metrics pipelines: the processor whose
 * statements for that signal bound every such pipeline, its key sets, the
 * body rule (logs) or exemplars (metrics), and the one exporter. */
typedef struct policy_signal {
    bool present;
    policy_fence fence;
    char *body;                                 /* logs: "drop" or the condition after 'where' */
    int exemplars;                              /* metrics: EXEMPLARS_* */
    sf_strmap histogram_bounds;                 /* metrics: name -> "b1, b2, ..." */
    policy_exporter exporter;
} policy_signal;

enum { EXEMPLARS_DROP = 0, EXEMPLARS_KEEP = 1 };

typedef struct policy_conf {
    policy_allowlist allowlist;
    policy_exporter exporter;
    policy_receivers receivers;
    policy_trace_control trace_control;
    policy_signal logs;
    policy_signal metrics;
} policy_conf;

struct sf_policy {
    policy_conf conf;
    char *file;
    sf_arena *arena;
};

/* X(name, ctx): the contexts a signal's section pins, each with a row in
 * its keys, pseudonymized and value_rules sections. */
#define TRACES_CONTEXTS(X) \
    X("resource", SF_OTLP_RESOURCE) X("scope", SF_OTLP_SCOPE) X("span", SF_OTLP_SPAN) \
    X("spanevent", SF_OTLP_SPANEVENT) X("link", SF_OTLP_LINK)
#define LOGS_CONTEXTS(X) \
    X("resource", SF_OTLP_RESOURCE) X("scope", SF_OTLP_SCOPE) X("log", SF_OTLP_LOG)
#define METRICS_CONTEXTS(X) \
    X("resource", SF_OTLP_RESOURCE) X("scope", SF_OTLP_SCOPE) X("metric", SF_OTLP_METRIC) \
    X("datapoint", SF_OTLP_DATAPOINT)

/* The row of context `c` in a per-context section: its `elem` in
 * `section`'s ctx[], decoded as `cfg_type` (by `parse_fn`, for a custom one). */
#define CTX_ROW(name, c, cfg_type, section, elem, parse_fn, help_text) \
    { .key = name, .type = cfg_type, .offset = offsetof(section, ctx) + (c) * sizeof(elem), \
      .parse = parse_fn, .help = help_text },
#define KEYS_ROW(name, c) \
    CTX_ROW(name, c, SF_CFG_STRLIST, policy_keys, sf_strlist, NULL, \
            "the exact attribute keys the " name " context lets through")

static const sf_config_row keys_rows[] = { TRACES_CONTEXTS(KEYS_ROW) { 0 } };

static const sf_config_row rule_rows[] = {
    { .key = "pattern", .type = SF_CFG_STR, .offset = offsetof(policy_rule, pattern),
      .help = "the regular expression, as the statement's second argument unescaped" },
    { .key = "replacement", .type = SF_CFG_STR, .offset = offsetof(policy_rule, replacement),
      .help = "the replacement, as the statement's third argument unescaped" },
    { 0 }
};

/* A list of {pattern, replacement} mappings, in the order they must run. */
static sf_status parse_rules(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    policy_rules *out = field;
    const char *base = ctx->path;
    sf_status st = SF_OK;

    memset(out, 0, sizeof(*out));
    out->v = sf_cfg_list_alloc(ctx, node, "{pattern, replacement} mappings", sizeof(*out->v), &st);
    if (out->v == NULL)
        return st;
    out->node = node;
    out->n = node->n;
    for (size_t i = 0; i < node->n && st != SF_ENOMEM; i++) {
        const sf_node *it = node->items[i];
        sf_status rs;

        if (sf_cfg_path_item(ctx, base, i) != SF_OK)
            return SF_ENOMEM;
        rs = sf_cfg_decode(ctx, rule_rows, it, &out->v[i]);
        if (rs == SF_OK && out->v[i].pattern == NULL) {
            sf_cfg_error(ctx, it, NULL, "'pattern' is required");
            rs = SF_CONFIG;
        }
        if (rs == SF_OK && out->v[i].replacement == NULL) {
            sf_cfg_error(ctx, it, NULL, "'replacement' is required (\"\" for none)");
            rs = SF_CONFIG;
        }
        ctx->path = base;
        if (rs != SF_OK)
            st = rs;
    }
    return st;
}

#define RULES_ROW(name, c) \
    CTX_ROW(name, c, SF_CFG_CUSTOM, policy_name_rules, policy_rules, parse_rules, \
            "the exact replace_pattern(name, ...) rules of the " name " context, in order")

static const sf_config_row name_rules_rows[] = {
    RULES_ROW("span", SF_OTLP_SPAN)
    RULES_ROW("spanevent", SF_OTLP_SPANEVENT)
    { 0 }
};

#define VALUE_ROW(name, c) \
    CTX_ROW(name, c, SF_CFG_STRMAP, policy_value_rules, sf_strmap, NULL, \
            "the " name " context's value rules: key -> the condition after 'where'")

static const sf_config_row value_rules_rows[] = { TRACES_CONTEXTS(VALUE_ROW) { 0 } };

/* The rows the allowlist section (traces) and the logs and metrics sections
 * share, for section struct T (each has these members): `sig` names the
 * signal in help, `ctx_keys` and `ctx_values` are its contexts' rows; the
 * allowlist, the first section, pins declared mode and value types only
 * when asked (`declared`, `kept`: the defaults), the later ones by default. */
#define FENCE_ROWS(T, sig, ctx_keys, ctx_values, declared, kept)                                  \
    { .key = "processor", .type = SF_CFG_STR, .offset = offsetof(T, fence.processor),             \
      .help = "id of the transform processor whose " sig " statements every " sig                 \
              " pipeline runs (required)" },                                                      \
    { .key = "error_mode", .type = SF_CFG_ENUM, .def = SF_ERROR_MODE_DEFAULT,                     \
      .offset = offsetof(T, fence.error_mode), .choices = SF_ERROR_MODE_CHOICES,                  \
      .help = "the error_mode the processor and its " sig " statements must run with" },          \
    { .key = "declared_fields", .type = SF_CFG_BOOL, .def = declared,                             \
      .offset = offsetof(T, fence.declared_fields),                                               \
      .help = "the processor must run in declared mode (declared_fields: true)" },                \
    { .key = "kept_value_types", .type = SF_CFG_ENUM, .def = kept,                                \
      .offset = offsetof(T, fence.kept_value_types), .choices = "any|scalar|single",              \
      .help = "the processor's kept_value_types must be at least this: scalar (scalar or "        \
              "single), single (one value per kept key, no arrays); any: not pinned" },           \
    { .key = "pseudonymize_ids", .type = SF_CFG_BOOL, .def = "false",                             \
      .offset = offsetof(T, fence.pseudonymize_ids),                                              \
      .help = "trace and span ids (of spans, links, log records) must leave as keyed "            \
              "pseudonyms (the processor's pseudonymize_ids)" },                                  \
    { .key = "keys", .type = SF_CFG_SECTION, .offset = offsetof(T, fence.keys), .sub = ctx_keys,  \
      .help = "per context, the exact key set of the " sig " statements (required: an "           \
              "absent context must have no keep_keys)" },                                         \
    { .key = "max_string_length", .type = SF_CFG_INT, .def = "0", .min = 0, .max = 1 << 20,       \
      .offset = offsetof(T, fence.max_string_length),                                             \
      .help = "exported strings must be bounded by at most this many bytes (0: not pinned)" },    \
    { .key = "pseudonymized", .type = SF_CFG_SECTION,                                             \
      .offset = offsetof(T, fence.pseudonymized), .sub = ctx_keys,                                \
      .help = "per context, the exact keys pseudonymize(attributes, \"k\") applies to" },         \
    { .key = "value_rules", .type = SF_CFG_SECTION,                                               \
      .offset = offsetof(T, fence.value_rules), .sub = ctx_values,                                \
      .help = "per context, every value rule exactly: key -> its condition as written after "     \
              "'where' (a context listed must have no other)" },                                  \
    { .key = "field_values", .type = SF_CFG_STRMAP, .offset = offsetof(T, fence.field_values),    \
      .help = "string fields (span.name, log.severity_text, metric.name, ...) -> the value "      \
              "their set(...) statement writes; every field listed needs exactly that "           \
              "statement" },                                                                      \
    { .key = "field_patterns", .type = SF_CFG_STRMAP, .offset = offsetof(T, fence.field_patterns), \
      .help = "string fields -> the IsMatch pattern of their set(...) where not IsMatch(...); "   \
              "a field in field_values and not here must be set unconditionally" }

static const sf_config_row allowlist_rows[] = {
    FENCE_ROWS(policy_allowlist, "trace", keys_rows, value_rules_rows, "false", "scalar"),
    { .key = "clear_status_message", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(policy_allowlist, clear_status_message),
      .help = "require set(status.message, \"\")" },
    { .key = "clear_trace_state", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(policy_allowlist, clear_trace_state),
      .help = "require set(trace_state, \"\") in the span and link contexts" },
    { .key = "name_rules", .type = SF_CFG_SECTION, .offset = offsetof(policy_allowlist, name_rules),
      .sub = name_rules_rows, .help = "per context, the exact ordered span-name rules; a context "
      "not listed must have none (absent: names are not pinned)" },
    { .key = "max_events_per_span", .type = SF_CFG_INT, .def = "0", .min = 0, .max = 1 << 16,
      .offset = offsetof(policy_allowlist, max_events_per_span),
      .help = "spans must keep at most this many events (the processor's max_events_per_span; "
      "0: not pinned)" },
    { .key = "max_links_per_span", .type = SF_CFG_INT, .def = "0", .min = 0, .max = 1 << 16,
      .offset = offsetof(policy_allowlist, max_links_per_span),
      .help = "spans must keep at most this many links (max_links_per_span; 0: not pinned)" },
    { .key = "max_spans_per_request", .type = SF_CFG_INT, .def = "0", .min = 0, .max = 1 << 24,
      .offset = offsetof(policy_allowlist, max_spans_per_request),
      .help = "a request must keep at most this many spans (the processor's "
      "max_spans_per_request; 0: not pinned)" },
    { .key = "max_resources_per_request", .type = SF_CFG_INT, .def = "0", .min = 0,
      .max = 1 << 16, .offset = offsetof(policy_allowlist, max_resources_per_request),
      .help = "a request must keep at most this many resource entries "
      "(max_resources_per_request; 0: not pinned)" },
    { .key = "max_scopes_per_resource", .type = SF_CFG_INT, .def = "0", .min = 0,
      .max = 1 << 16, .offset = offsetof(policy_allowlist, max_scopes_per_resource),
      .help = "a resource entry must keep at most this many scope entries "
      "(max_scopes_per_resource; 0: not pinned)" },
    { 0 }
};

static const sf_config_row exporter_rows[] = {
    { .key = "id", .type = SF_CFG_STR, .offset = offsetof(policy_exporter, id),
      .help = "id of the traces pipeline's exporter, otlphttp or otlp (required)" },
    { .key = "endpoint", .type = SF_CFG_STR, .offset = offsetof(policy_exporter, endpoint),
      .help = "the exact value of its endpoint" },
    { .key = "endpoint_env", .type = SF_CFG_STR, .offset = offsetof(policy_exporter, endpoint_env),
      .help = "its endpoint must be written as ${env:NAME}" },
    { .key = "queue_sizer", .type = SF_CFG_ENUM, .def = "requests",
      .offset = offsetof(policy_exporter, queue_sizer), .choices = "requests|items|bytes",
      .help = "the sending_queue.sizer the config must use: what max_queue_size counts" },
    { .key = "max_queue_size", .type = SF_CFG_INT, .offset = offsetof(policy_exporter, max_queue_size),
      .help = "largest sending_queue.queue_size, in queue_sizer units (required)", .min = 1,
      .max = INT64_C(1) << 40 },
    { .key = "max_elapsed_time", .type = SF_CFG_DURATION,
      .offset = offsetof(policy_exporter, max_elapsed_time),
      .help = "largest retry_on_failure.max_elapsed_time; 0 (forever) is refused (required)",
      .min = 1, .max = 86400000 },
    { 0 }
};

static const sf_config_row receivers_rows[] = {
    { .key = "ids", .type = SF_CFG_STRLIST, .offset = offsetof(policy_receivers, ids),
      .help = "the exact receivers of the traces pipeline" },
    { .key = "loopback_only", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(policy_receivers, loopback_only),
      .help = "every receiver endpoint in the config binds a loopback address" },
    { 0 }
};

static const sf_config_row logs_keys_rows[] = { LOGS_CONTEXTS(KEYS_ROW) { 0 } };
static const sf_config_row metrics_keys_rows[] = { METRICS_CONTEXTS(KEYS_ROW) { 0 } };
static const sf_config_row logs_value_rows[] = { LOGS_CONTEXTS(VALUE_ROW) { 0 } };
static const sf_config_row metrics_value_rows[] = { METRICS_CONTEXTS(VALUE_ROW) { 0 } };

/* The logs and metrics sections: the fence's rows, and the one exporter. */
#define SIGNAL_ROWS(sig, ctx_keys, ctx_values)                                                \
    FENCE_ROWS(policy_signal, sig, ctx_keys, ctx_values, "true", "any"),                       \
    { .key = "exporter", .type = SF_CFG_SECTION, .offset = offsetof(policy_signal, exporter),  \
      .sub = exporter_rows, .help = "the one " sig " exporter, used by no pipeline of "        \
      "another signal (required)" }

static const sf_config_row logs_rows[] = {
    SIGNAL_ROWS("log", logs_keys_rows, logs_value_rows),
    { .key = "body", .type = SF_CFG_STR, .def = "drop", .offset = offsetof(policy_signal, body),
      .help = "'drop': set(body, nil) with no condition; else the exact condition written after "
              "'where' in set(body, nil) where not ... (the shape a body that leaves has)" },
    { 0 }
};

static const sf_config_row metrics_rows[] = {
    SIGNAL_ROWS("metric", metrics_keys_rows, metrics_value_rows),
    { .key = "exemplars", .type = SF_CFG_ENUM, .def = "drop",
      .offset = offsetof(policy_signal, exemplars), .choices = "drop|keep",
      .help = "drop: no keep_exemplars(exemplars); keep: exemplars leave with checked ids and "
              "the datapoint's allowlist on their filtered attributes" },
    { .key = "histogram_bounds", .type = SF_CFG_STRMAP,
      .offset = offsetof(policy_signal, histogram_bounds),
      .help = "metric name -> its explicit_bounds, comma-separated: the processor's "
              "histogram_bounds must hold exactly these sets (names and numbers)" },
    { 0 }
};

static const sf_config_row trace_control_rows[] = {
    { .key = "markers", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(policy_trace_control, markers),
      .help = "every trace_control extension announces its windows with marker spans" },
    { .key = "auto_revert", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(policy_trace_control, auto_revert),
      .help = "every trace_control extension ends a window early when its capture loses spans" },
    { .key = "enforce_resting_level", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(policy_trace_control, enforce),
      .help = "every trace_control extension sets idle engines to the resting level at an "
              "interval (enforce_interval not 0)" },
    { .key = "out_of_band", .type = SF_CFG_ENUM, .def = "any",
      .offset = offsetof(policy_trace_control, out_of_band), .choices = "any|drop",
      .help = "drop: every target of a trace_control extension keeps the spans it sends while "
              "it rests (its level raised out of band) in the VM (out_of_band: drop)" },
    { 0 }
};

static const sf_config_row policy_rows[] = {
    { .key = "allowlist", .type = SF_CFG_SECTION, .offset = offsetof(policy_conf, allowlist),
      .sub = allowlist_rows, .help = "the attribute allowlist (required)" },
    { .key = "exporter", .type = SF_CFG_SECTION, .offset = offsetof(policy_conf, exporter),
      .sub = exporter_rows, .help = "the dedicated traces exporter (required)" },
    { .key = "receivers", .type = SF_CFG_SECTION, .offset = offsetof(policy_conf, receivers),
      .sub = receivers_rows, .help = "the receivers and where they listen" },
    { .key = "trace_control", .type = SF_CFG_SECTION,
      .offset = offsetof(policy_conf, trace_control), .sub = trace_control_rows,
      .help = "what a trace_control extension, when the config has one, must do" },
    { .key = "logs", .type = SF_CFG_SECTION, .offset = offsetof(policy_conf, logs),
      .sub = logs_rows, .help = "the fence of every logs pipeline (absent: a config with a logs "
      "pipeline does not hold)" },
    { .key = "metrics", .type = SF_CFG_SECTION, .offset = offsetof(policy_conf, metrics),
      .sub = metrics_rows, .help = "the fence of every metrics pipeline (absent: a config with a "
      "metrics pipeline does not hold)" },
    { 0 }
};

enum { VALUES_ANY = 0, VALUES_SCALAR = 1, VALUES_SINGLE = 2 }; /* kept_value_types' choices */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Report entries of `list` (written at `node`) given twice, then sort it. */
static void check_list(sf_diag *diag, const char *path, const sf_node *node, sf_strlist *list)
{
    if (list->v == NULL)
        return;
    for (size_t i = 0; node && node->kind == SF_NODE_SEQ && i < node->n; i++) {
        for (size_t j = 0; j < i; j++) {
            if (node->items[i]->kind == SF_NODE_SCALAR && node->items[j]->kind == SF_NODE_SCALAR &&
                strcmp(node->items[i]->text, node->items[j]->text) == 0) {
                sf_diag_error(diag, node->items[i], path, "'%s' is listed more than once",
                              node->items[i]->text);
                break;
            }
        }
    }
    qsort(list->v, list->n, sizeof(*list->v), cmp_str);
}

static bool valid_env_name(const char *s)
{
    if (!(isalpha((unsigned char)*s) || *s == '_'))
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return false;
    return true;
}

/* The exporter section `ex` (at key `at`) of `path`: what it requires. */
static void check_exporter_policy(const policy_exporter *pe, const char *path, const sf_node *at,
                                  const sf_node *ex, sf_diag *diag)
{
    char sub[64];

    if (pe->id == NULL || pe->id[0] == '\0')
        sf_diag_error(diag, at, path, "'id' is required");
    if (sf_node_get(ex, "max_queue_size") == NULL)
        sf_diag_error(diag, at, path, "'max_queue_size' is required");
    if (sf_node_get(ex, "max_elapsed_time") == NULL)
        sf_diag_error(diag, at, path, "'max_elapsed_time' is required");
    snprintf(sub, sizeof(sub), "%s.endpoint_env", path);
    if (pe->endpoint_env && !valid_env_name(pe->endpoint_env))
        sf_diag_error(diag, sf_node_get(ex, "endpoint_env"), sub,
                      "invalid environment variable name '%s'", pe->endpoint_env);
}

/* A logs or metrics section: processor, keys and exporter required. */
static void check_signal_policy(policy_signal *ps, const char *name, const sf_node *root,
                                sf_diag *diag)
{
    const sf_node *sec = sf_node_get(root, name), *at = sf_node_key(root, name);
    const sf_node *keys = sf_node_get(sec, "keys");
    char path[64];

    if (!ps->present)
        return;
    if (ps->fence.processor == NULL || ps->fence.processor[0] == '\0')
        sf_diag_error(diag, at, name, "'processor' is required");
    if (!ps->fence.keys.present)
        sf_diag_error(diag, at, name, "'keys' is required");
    for (int i = 0; i < SF_OTLP_CTX_COUNT; i++) {
        const char *cn = sf_otlp_ctx_name((sf_otlp_ctx)i);

        snprintf(path, sizeof(path), "%s.keys.%s", name, cn);
        check_list(diag, path, sf_node_get(keys, cn), &ps->fence.keys.ctx[i]);
    }
    snprintf(path, sizeof(path), "%s.exporter", name);
    if (!ps->exporter.present)
        sf_diag_error(diag, at, name, "'exporter' is required");
    else
        check_exporter_policy(&ps->exporter, path, sf_node_key(sec, "exporter"),
                              sf_node_get(sec, "exporter"), diag);
}

/* What the row decoder cannot say: required keys, duplicates, names. */
static void check_policy(sf_policy *p, const sf_node *root, sf_diag *diag)
{
    policy_conf *c = &p->conf;
    const sf_node *al = sf_node_get(root, "allowlist"), *ex = sf_node_get(root, "exporter");
    const sf_node *keys = sf_node_get(al, "keys");
    bool any = false;

    if (!c->allowlist.present)
        sf_diag_error(diag, root, NULL, "missing required section 'allowlist'");
    else if (c->allowlist.fence.processor == NULL || c->allowlist.fence.processor[0] == '\0')
        sf_diag_error(diag, sf_node_key(root, "allowlist"), "allowlist", "'processor' is required");
    if (c->allowlist.present) {
        for (int i = 0; i < SF_OTLP_CTX_COUNT; i++) {
            const char *name = sf_otlp_ctx_name((sf_otlp_ctx)i);
            char path[64];

            snprintf(path, sizeof(path), "allowlist.keys.%s", name);
            any |= c->allowlist.fence.keys.ctx[i].v != NULL;
            check_list(diag, path, sf_node_get(keys, name), &c->allowlist.fence.keys.ctx[i]);
        }
        if (!any)
            sf_diag_error(diag, keys ? sf_node_key(al, "keys") : sf_node_key(root, "allowlist"),
                          "allowlist", "'keys' must pin at least one context");
    }
    if (!c->exporter.present) {
        sf_diag_error(diag, root, NULL, "missing required section 'exporter'");
    } else {
        check_exporter_policy(&c->exporter, "exporter", sf_node_key(root, "exporter"), ex, diag);
    }
    check_list(diag, "receivers.ids", sf_node_get(sf_node_get(root, "receivers"), "ids"),
               &c->receivers.ids);
    check_signal_policy(&c->logs, "logs", root, diag);
    check_signal_policy(&c->metrics, "metrics", root, diag);
}

/* The policy once parsed: its rows, then what they cannot say. */
static sf_status load_policy(void *doc, sf_arena *arena, char *file, sf_node *root,
                             sf_cfg_ctx *ctx)
{
    sf_policy *p = doc;
    sf_status st;

    p->arena = arena;
    p->file = file;
    st = sf_cfg_decode(ctx, policy_rows, root, &p->conf);
    if (st != SF_ENOMEM)
        check_policy(p, root, ctx->diag);
    return st;
}

static const sf_document_type policy_document = {
    .size = sizeof(sf_policy),
    .arena_chunk = SF_POLICY_ARENA_CHUNK,
    .max_file = SF_POLICY_MAX_FILE,
    .load = load_policy,
};

sf_status sf_policy_load_string(const char *name, const char *yaml, size_t len, sf_diag *diag,
                                sf_policy **out)
{
    void *doc;
    sf_status st = sf_document_load(&policy_document, &name, &yaml, &len, 1, diag, &doc);

    *out = doc;
    return st;
}

sf_status sf_policy_load(const char *path, sf_diag *diag, sf_policy **out)
{
    void *doc;
    sf_status st = sf_document_load_file(&policy_document, path, diag, &doc);

    *out = doc;
    return st;
}

void sf_policy_destroy(sf_policy *policy)
{
    if (policy != NULL)
        sf_arena_destroy(policy->arena);
}

const char *sf_policy_file(const sf_policy *policy)
{
    return policy->file;
}

/* ---- the check ------------------------------------------------------------------ */

typedef struct checker {
    const policy_conf *pol;
    const sf_config *cfg;
    sf_diag *diag;
    const sf_config_pipeline *main;     /* the one traces pipeline the policy allows */
    bool oom;                           /* a check ran out of memory */
    sf_arena *scratch;                  /* configs decoded here (decoded_config), or NULL */
    const policy_signal *signal;        /* the logs or metrics section being checked, or NULL */
} checker;

static void violate(checker *k, const sf_node *at, const char *subject, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void violate(checker *k, const sf_node *at, const char *subject, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sf_diag_error(k->diag, at, "policy", "%s: %s", subject, msg);
}

/* The component `id` of config section `section` (ids are unique per kind
 * only: a receiver and an exporter may both be called "otlp"). */
static const sf_config_component *find_in(const sf_config *cfg, const char *section,
                                          const char *id)
{
    const sf_node *key = sf_node_key(sf_node_get(cfg->root, section), id);

    for (size_t i = 0; key && i < cfg->n_components; i++)
        if (cfg->components[i].node == key)
            return &cfg->components[i];
    return NULL;
}

static const sf_node *pipeline_value(const sf_config *cfg, const sf_config_pipeline *p)
{
    return sf_node_get(sf_node_get(sf_node_get(cfg->root, "service"), "pipelines"), p->id);
}

static bool in_list(const sf_strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0)
            return true;
    return false;
}

static bool runs(const sf_config_component *const *list, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i]->id, id) == 0)
            return true;
    return false;
}

/* Whether `key` is among the rule's keys (sorted, sf_describe.h). */
static bool rule_has(const sf_rule *r, const char *key)
{
    return sf_sorted_keys_has(r->keys, r->n_keys, key);
}

/* The first rule of context c of kind `kind` (or, with `key`, the first
 * keep_keys or delete_key that removes `key`) into *out; false if none. */
static bool find_rule(const sf_allowlist_desc *al, sf_otlp_ctx c, sf_rule_kind kind,
                      const char *key, sf_rule *out)
{
    for (size_t i = 0; al->get(al->rules, c, i, out); i++) {
        if (key == NULL && out->kind == kind)
            return true;
        if (key != NULL && (out->kind == SF_RULE_KEEP_KEYS || out->kind == SF_RULE_DELETE_KEY) &&
            (out->kind == SF_RULE_KEEP_KEYS) != rule_has(out, key))
            return true;
    }
    return false;
}

/* A key no config names: the compiled keyset's verdict on keys it does not
 * list. */
#define UNLISTED_KEY "spanfence.policy.probe: a key no statement names"

/* ---- the compiled edit ------------------------------------------------------- */

/* The edit the codec will run for one signal, compiled as the processor
 * compiles it when it is created (create, edit, destroy: the same code as
 * at start). What leaves (is a key kept, are status messages and
 * trace_state cleared) is asked of it and of nothing else, so the policy's
 * answer is the one the fence acts on; the rule list the edit was built
 * from (describe_allowlist) gives what is pinned as text (name rules, value
 * rules, set(...) fields) and where each statement was written. */
typedef struct compiled {
    struct sf_component comp;
    bool created;                   /* comp is to be destroyed */
    sf_status st;                   /* SF_OK, or why the edit could not be built */
    const sf_otlp_edit *e;          /* NULL: not built (st), or none for the signal */
} compiled;

static void compiled_build(checker *k, const sf_config_component *c, sf_signal sig,
                           compiled *out)
{
    *out = (compiled){ .comp = { .type = c->type, .id = c->id, .config = c->config } };
    if (c->type->create == NULL || c->type->edit == NULL)
        return;                     /* no edit: check_compiled says so */
    out->st = c->type->create(&out->comp, c->config);
    if (out->st == SF_ENOMEM)
        k->oom = true;
    if (out->st != SF_OK)
        return;
    out->created = true;
    out->e = c->type->edit(&out->comp, sig);
}

static void compiled_release(compiled *ce)
{
    if (ce->created && ce->comp.type->destroy != NULL)
        ce->comp.type->destroy(&ce->comp);
    ce->created = false;
    ce->e = NULL;
}

/* Whether an attribute `key` of context c leaves the compiled edit. */
static bool edit_keeps(const sf_otlp_edit *e, sf_otlp_ctx c, const char *key)
{
    const sf_otlp_keyset *ks = e->keys[c];

    return ks == NULL || sf_otlp_keyset_keeps(ks, (const uint8_t *)key, strlen(key));
}

/* Context c's key set against the policy's: bounded by a keep_keys in the
 * config, and exactly the pinned keys leaving the compiled edit (every
 * keep_keys and delete_key of the context applied, in any order). */
static void check_keys(checker *k, const char *subj, const sf_allowlist_desc *al,
                       const sf_otlp_edit *e, const policy_keys *pk, sf_otlp_ctx c,
                       const sf_node *where)
{
    const sf_strlist *want = &pk->ctx[c];
    sf_rule keep_rule, drop_rule;
    const sf_rule *keep = find_rule(al, c, SF_RULE_KEEP_KEYS, NULL, &keep_rule) ? &keep_rule : NULL;
    const char *name = sf_otlp_ctx_name(c);

    if (want->v == NULL) {
        if (keep != NULL)
            violate(k, keep->node, subj, "the policy pins no %s allowlist, the config has one",
                    name);
        return;
    }
    if (keep == NULL) {
        violate(k, where, subj, "%s attributes are not bounded by keep_keys: the policy pins "
                "%zu %s key%s", name, want->n, name, want->n == 1 ? "" : "s");
        return;
    }
    if (e == NULL)
        return;                     /* not built: check_compiled says why */
    if (e->keys[c] == NULL) {
        violate(k, where, subj, "the compiled edit does not filter %s attributes, though the "
                "config bounds them", name);
        return;
    }
    if (edit_keeps(e, c, UNLISTED_KEY))
        violate(k, where, subj, "the compiled edit keeps %s keys no statement names", name);
    /* what the context lets through: the first keep_keys, less what any
     * other operation removes; the order of statements does not matter */
    for (size_t i = 0; i < keep->n_keys; i++) {
        const char *key = keep->keys[i];

        if (edit_keeps(e, c, key) && !in_list(want, key))
            violate(k, keep->node, subj, "%s allowlist has key '%s' not in the policy", name, key);
    }
    for (size_t i = 0; i < want->n; i++) {
        if (!edit_keeps(e, c, want->v[i])) {
            const sf_rule *op = find_rule(al, c, SF_RULE_KEEP_KEYS, want->v[i], &drop_rule)
                                ? &drop_rule : NULL;

            violate(k, op ? op->node : keep->node, subj,
                    "%s allowlist is missing key '%s' required by the policy", name, want->v[i]);
        }
    }
}

/* `s` as an OTTL string body (\\ and \" escaped), for messages that can
 * be pasted into a statement. */
static const char *ottl_quote(const char *s, char *buf, size_t size)
{
    size_t w = 0;

    for (; *s && w + 3 < size; s++) {
        if (*s == '"' || *s == '\\')
            buf[w++] = '\\';
        buf[w++] = *s;
    }
    buf[w] = '\0';
    return buf;
}

/* The replace_pattern rules of context c must be exactly the policy's, in
 * order; a context the policy does not list must have none. */
static void check_name_rules(checker *k, const char *subj, const sf_allowlist_desc *al,
                             sf_otlp_ctx c, const sf_node *where)
{
    const policy_rules *want = &k->pol->allowlist.name_rules.ctx[c];
    const char *name = sf_otlp_ctx_name(c);
    const sf_node *last = NULL;
    bool any = false;
    char a[300], b[300], x[300], y[300];
    sf_rule rule;
    const sf_rule *op = &rule;
    size_t got = 0;

    for (size_t i = 0; al->get(al->rules, c, i, &rule); i++) {
        const policy_rule *r = want->node && got < want->n ? &want->v[got] : NULL;

        if (op->kind != SF_RULE_REPLACE_PATTERN)
            continue;
        got++;
        last = op->node;
        any = true;
        if (want->node == NULL)
            violate(k, op->node, subj, "%s name rule %zu replace_pattern(name, \"%s\", \"%s\") "
                    "is not in the policy, which pins no %s name rules", name, got,
                    ottl_quote(op->pattern, a, sizeof(a)),
                    ottl_quote(op->replacement, b, sizeof(b)), name);
        else if (r == NULL)
            violate(k, op->node, subj, "%s name rule %zu replace_pattern(name, \"%s\", \"%s\") "
                    "is not in the policy, which pins %zu", name, got,
                    ottl_quote(op->pattern, a, sizeof(a)),
                    ottl_quote(op->replacement, b, sizeof(b)), want->n);
        else if (strcmp(op->pattern, r->pattern) != 0 ||
                 strcmp(op->replacement, r->replacement) != 0)
            violate(k, op->node, subj, "%s name rule %zu is replace_pattern(name, \"%s\", \"%s\"), "
                    "the policy requires replace_pattern(name, \"%s\", \"%s\")", name, got,
                    ottl_quote(op->pattern, a, sizeof(a)),
                    ottl_quote(op->replacement, b, sizeof(b)),
                    ottl_quote(r->pattern, x, sizeof(x)), ottl_quote(r->replacement, y, sizeof(y)));
    }
    for (size_t i = got; want->node && i < want->n; i++)
        violate(k, any ? last : where, subj, "%s name rule %zu is missing: the policy "
                "requires replace_pattern(name, \"%s\", \"%s\")", name, i + 1,
                ottl_quote(want->v[i].pattern, x, sizeof(x)),
                ottl_quote(want->v[i].replacement, y, sizeof(y)));
}

/* The SET_FIELD rule of field f in the edit, or false. */
static bool find_set_field(const sf_allowlist_desc *al, sf_otlp_field f, sf_rule *out)
{
    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
        for (size_t i = 0; al->get(al->rules, (sf_otlp_ctx)c, i, out); i++) {
            if (out->kind == SF_RULE_SET_FIELD && out->field == f)
                return true;
        }
    }
    return false;
}

static const char *strmap_get(const sf_strmap *m, const char *key)
{
    for (size_t i = 0; i < m->n; i++) {
        if (strcmp(m->keys[i], key) == 0)
            return m->values[i];
    }
    return NULL;
}

/* The processor's rules for one signal against what a fence section pins:
 * declared_fields, max_string_length, pseudonymized, value_rules and the
 * field rules. */
static void check_rules(checker *k, const char *subj, const sf_allowlist_desc *al,
                        const policy_fence *fence, const sf_node *value, const sf_node *statements)
{
    sf_rule op;

    if (fence->declared_fields && !al->declared_fields) {
        const sf_node *at = sf_node_get(value, "declared_fields");

        violate(k, at ? at : statements, subj, "declared_fields is not true: the policy requires "
                "a rule for every kept key and string field");
    }
    if (fence->max_string_length > 0 &&
        (al->max_string_length == 0 || al->max_string_length > (size_t)fence->max_string_length)) {
        const sf_node *at = sf_node_get(value, "max_string_length");

        violate(k, at ? at : statements, subj, "exported strings are bounded by %zu bytes%s, the "
                "policy requires at most %lld", al->max_string_length,
                al->max_string_length == 0 ? " (none)" : "",
                (long long)fence->max_string_length);
    }
    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
        const sf_strlist *want = &fence->pseudonymized.ctx[c];
        const sf_strmap *vr = &fence->value_rules.ctx[c];
        const char *cn = sf_otlp_ctx_name((sf_otlp_ctx)c);

        for (size_t i = 0; al->get(al->rules, (sf_otlp_ctx)c, i, &op); i++) {
            if (op.kind == SF_RULE_PSEUDONYMIZE && want->v != NULL) {
                bool listed = false;

                for (size_t j = 0; j < want->n; j++)
                    listed = listed || strcmp(want->v[j], op.keys[0]) == 0;
                if (!listed)
                    violate(k, op.node, subj, "%s key '%s' is pseudonymized, the policy does "
                            "not list it", cn, op.keys[0]);
            }
            if (op.kind == SF_RULE_VALUE && fence->value_rules.present) {
                const char *w = strmap_get(vr, op.keys[0]);

                if (w == NULL)
                    violate(k, op.node, subj, "%s key '%s' has a value rule the policy does not "
                            "list: '%s'", cn, op.keys[0], op.pattern);
                else if (strcmp(w, op.pattern) != 0)
                    violate(k, op.node, subj, "%s key '%s' has the value rule '%s', the policy "
                            "requires '%s'", cn, op.keys[0], op.pattern, w);
            }
        }
        for (size_t j = 0; want->v != NULL && j < want->n; j++) {
            bool found = false;

            for (size_t i = 0; !found && al->get(al->rules, (sf_otlp_ctx)c, i, &op); i++)
                found = op.kind == SF_RULE_PSEUDONYMIZE && strcmp(op.keys[0], want->v[j]) == 0;
            if (!found)
                violate(k, statements, subj, "%s key '%s' is not pseudonymized: the policy "
                        "requires pseudonymize(attributes, \"%s\")", cn, want->v[j],
                        want->v[j]);
        }
        for (size_t j = 0; fence->value_rules.present && j < vr->n; j++) {
            bool found = false;

            for (size_t i = 0; !found && al->get(al->rules, (sf_otlp_ctx)c, i, &op); i++)
                found = op.kind == SF_RULE_VALUE && strcmp(op.keys[0], vr->keys[j]) == 0;
            if (!found)
                violate(k, statements, subj, "%s key '%s' has no value rule: the policy "
                        "requires delete_key(attributes, \"%s\") where %s", cn, vr->keys[j],
                        vr->keys[j], vr->values[j]);
        }
    }
    for (size_t j = 0; j < fence->field_values.n; j++) {
        const char *field = fence->field_values.keys[j], *pattern;
        sf_otlp_field f = SF_OTLP_FIELD_NONE;

        for (int i = 1; i < SF_OTLP_FIELD_COUNT; i++)
            if (strcmp(sf_otlp_field_name((sf_otlp_field)i), field) == 0)
                f = (sf_otlp_field)i;
        pattern = strmap_get(&fence->field_patterns, field);
        if (f == SF_OTLP_FIELD_NONE) {
            violate(k, statements, subj, "the policy names the unknown field '%s'", field);
        } else if (!find_set_field(al, f, &op)) {
            violate(k, statements, subj, "%s has no set(...) rule: the policy requires one "
                    "setting '%s'%s%s", field, fence->field_values.values[j],
                    pattern ? " where not IsMatch(...) " : "", pattern ? pattern : "");
        } else if (strcmp(op.replacement, fence->field_values.values[j]) != 0) {
            violate(k, op.node, subj, "%s is set to '%s', the policy requires '%s'", field,
                    op.replacement, fence->field_values.values[j]);
        } else if ((pattern == NULL) != (op.pattern == NULL) ||
                   (pattern != NULL && strcmp(pattern, op.pattern) != 0)) {
            violate(k, op.node, subj, "%s is kept when it matches '%s', the policy requires "
                    "'%s'", field, op.pattern ? op.pattern : "(never: always set)",
                    pattern ? pattern : "(never: always set)");
        }
    }
}

/* Whether the n comma-separated numbers of `text` are exactly v[0, n). */
static bool bounds_equal(const char *text, const double *v, size_t n)
{
    const char *p = text;
    size_t i = 0;

    for (;;) {
        char *end = NULL;
        double x = strtod(p, &end);

        if (end == p || i >= n || x != v[i])
            return false;
        i++;
        while (*end == ' ')
            end++;
        if (*end == '\0')
            return i == n;
        if (*end != ',')
            return false;
        p = end + 1;
    }
}

/* The metrics section's histogram_bounds against the compiled edit: the
 * points are checked, and the sets are exactly the policy's. */
static void check_compiled_bounds(checker *k, const char *subj, const sf_otlp_edit *e,
                                  const sf_node *where)
{
    const sf_strmap *want = &k->signal->histogram_bounds;

    if (want->n == 0)
        return;
    if (!e->check_histograms)
        violate(k, where, subj, "histogram points are not checked: the policy pins "
                "histogram_bounds");
    for (size_t i = 0; i < want->n; i++) {
        const sf_otlp_bounds *b = NULL;

        for (size_t j = 0; j < e->n_bounds; j++)
            if (strcmp(e->bounds[j].metric, want->keys[i]) == 0)
                b = &e->bounds[j];
        if (b == NULL)
            violate(k, where, subj, "histogram_bounds has no set for '%s': the policy requires "
                    "[%s]", want->keys[i], want->values[i]);
        else if (!bounds_equal(want->values[i], b->v, b->n))
            violate(k, where, subj, "histogram_bounds of '%s' differ from the policy's [%s]",
                    want->keys[i], want->values[i]);
    }
    for (size_t j = 0; j < e->n_bounds; j++)
        if (strmap_get(want, e->bounds[j].metric) == NULL)
            violate(k, where, subj, "histogram_bounds has a set for '%s', which the policy does "
                    "not pin", e->bounds[j].metric);
}

/* The compiled edit of a logs or metrics program against its description:
 * the body governed and ruled as described, exemplars as described. */
static void check_compiled_signal(checker *k, const char *subj, const sf_allowlist_desc *al,
                                  sf_signal sig, const sf_otlp_edit *e, const sf_node *where)
{
    sf_rule op;
    bool rule = false, keep = false;

    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
        for (size_t i = 0; al->get(al->rules, (sf_otlp_ctx)c, i, &op); i++) {
            rule = rule || (op.kind == SF_RULE_SET_FIELD && op.field == SF_OTLP_FIELD_LOG_BODY &&
                            op.pattern != NULL);
            keep = keep || op.kind == SF_RULE_KEEP_EXEMPLARS;
        }
    }
    if (sig == SF_SIGNAL_LOGS) {
        if (!(e->fields & SF_OTLP_FIELD_BIT(SF_OTLP_FIELD_LOG_BODY)))
            violate(k, where, subj, "the compiled edit does not govern the log body");
        else if (!rule && e->body_rule != NULL)
            violate(k, where, subj, "the compiled edit keeps log bodies the config drops");
        else if (rule && e->body_rule == NULL)
            violate(k, where, subj, "the compiled edit drops every log body, though the config "
                    "keeps some");
        if (k->signal != NULL && k->signal->fence.pseudonymize_ids && e->id_fn == NULL)
            violate(k, where, subj, "pseudonymize_ids is off: log records' trace and span ids "
                    "leave as the client chose them, the policy requires keyed pseudonyms");
    } else if (sig == SF_SIGNAL_METRICS) {
        if (!(e->fields & SF_OTLP_FIELD_BIT(SF_OTLP_FIELD_EXEMPLARS)))
            violate(k, where, subj, "the compiled edit does not govern exemplars");
        else if (e->keep_exemplars != keep)
            violate(k, where, subj, "the compiled edit %s exemplars, the config %s them",
                    e->keep_exemplars ? "keeps" : "drops", keep ? "keeps" : "drops");
        if (k->signal != NULL)
            check_compiled_bounds(k, subj, e, where);
    }
    if (k->signal != NULL && k->signal->fence.kept_value_types == VALUES_SINGLE &&
        al->single_values_only && !e->single_values_only)
        violate(k, where, subj, "the compiled edit keeps array values");
}

/* A cap the policy pins (`key`, at most `want`; 0: not pinned) against the
 * compiled edit's cap `have` on governed field f (0: none). */
static void check_cap(checker *k, const char *subj, const sf_config_component *c,
                      const char *key, int64_t want, uint32_t have, sf_otlp_field f,
                      const char *per)
{
    const sf_node *value = sf_node_get(sf_node_get(k->cfg->root, "processors"), c->id);
    const sf_node *at = sf_node_get(value, key);

    if (want <= 0 || (have != 0 && have <= want))
        return;
    if (have == 0)
        violate(k, at ? at : c->node, subj, "%s is not set: any number of %s leave, the policy "
                "allows %lld %s", key, sf_otlp_field_name(f), (long long)want, per);
    else
        violate(k, at ? at : c->node, subj, "%s is %u, the policy allows at most %lld", key,
                have, (long long)want);
}

/* The compiled edit beyond the key sets and cleared fields the checks
 * above asked of it: a processor whose edit cannot be built (a pseudonym
 * key file that cannot be read, say) cannot pass; the governed fields,
 * value types, caps and ids as the description and the policy say. */
static void check_compiled(checker *k, const char *subj, const sf_config_component *c,
                           const sf_allowlist_desc *al, sf_signal sig, const compiled *ce,
                           const sf_node *where)
{
    const policy_allowlist *pa = &k->pol->allowlist;
    const sf_otlp_edit *e = ce->e;

    if (ce->st == SF_ENOMEM)
        return;
    if (ce->st != SF_OK) {
        violate(k, c->node, subj, "its edit cannot be built (the log above says why): it would "
                "not start");
        return;
    }
    if (e == NULL) {
        violate(k, c->node, subj, "has no compiled edit for %s", sf_signal_name(sig));
    } else if (sig != SF_SIGNAL_TRACES) {
        check_compiled_signal(k, subj, al, sig, e, where);
    } else {
        if (pa->fence.kept_value_types >= VALUES_SCALAR && al->scalar_values_only &&
            !e->scalar_values_only && !e->single_values_only)
            violate(k, where, subj, "the compiled edit keeps kvlist and bytes values, which the "
                    "config removes");
        if (pa->fence.kept_value_types == VALUES_SINGLE && al->single_values_only &&
            !e->single_values_only)
            violate(k, where, subj, "the compiled edit keeps array values, which the config "
                    "removes");
        check_cap(k, subj, c, "max_events_per_span", pa->max_events_per_span,
                  e->cap[SF_OTLP_FIELD_SPAN_EVENTS], SF_OTLP_FIELD_SPAN_EVENTS, "a span");
        check_cap(k, subj, c, "max_links_per_span", pa->max_links_per_span,
                  e->cap[SF_OTLP_FIELD_SPAN_LINKS], SF_OTLP_FIELD_SPAN_LINKS, "a span");
        check_cap(k, subj, c, "max_spans_per_request", pa->max_spans_per_request,
                  e->cap[SF_OTLP_FIELD_SPANS], SF_OTLP_FIELD_SPANS, "a request");
        check_cap(k, subj, c, "max_resources_per_request", pa->max_resources_per_request,
                  e->cap[SF_OTLP_FIELD_RESOURCE_SPANS], SF_OTLP_FIELD_RESOURCE_SPANS,
                  "a request");
        check_cap(k, subj, c, "max_scopes_per_resource", pa->max_scopes_per_resource,
                  e->cap[SF_OTLP_FIELD_SCOPE_SPANS], SF_OTLP_FIELD_SCOPE_SPANS,
                  "a resource entry");
        if (pa->fence.pseudonymize_ids && e->id_fn == NULL) {
            const sf_node *value = sf_node_get(sf_node_get(k->cfg->root, "processors"), c->id);
            const sf_node *at = sf_node_get(value, "pseudonymize_ids");

            violate(k, at ? at : c->node, subj, "pseudonymize_ids is off: the client's trace "
                    "and span ids leave as it chose them, the policy requires keyed pseudonyms");
        }
    }
}

/* The processor a fence section names (`what`: "allowlist", "logs fence"),
 * its rules (describe_allowlist) in `al` and its settings' node in
 * `value`, with "processors.ID" in subj; NULL, said, when the config has
 * no such processor or it keeps no allowlist. */
static const sf_config_component *fence_processor(checker *k, const policy_fence *fence,
                                                  const char *what, char *subj, size_t size,
                                                  sf_allowlist_desc *al, const sf_node **value)
{
    const sf_config_component *c = find_in(k->cfg, "processors", fence->processor);

    snprintf(subj, size, "processors.%s", fence->processor);
    if (c == NULL) {
        violate(k, sf_node_key(k->cfg->root, "processors"), subj,
                "the %s processor is not defined", what);
        return NULL;
    }
    if (c->type == NULL || c->type->describe_allowlist == NULL ||
        !c->type->describe_allowlist(c->config, al)) {
        violate(k, c->node, subj, "is not an allowlist processor (such as transform)");
        return NULL;
    }
    *value = sf_node_get(sf_node_get(k->cfg->root, "processors"), c->id);
    return c;
}

/* The processor's error_mode against the one the fence section pins. */
static void check_error_mode(checker *k, const char *subj, const sf_config_component *c,
                             const sf_node *value, const sf_allowlist_desc *al, int want)
{
    const sf_node *at = sf_node_get(value, "error_mode");

    if (al->error_mode != want)
        violate(k, at ? at : c->node, subj, "error_mode is '%s', the policy requires '%s'",
                sf_error_mode_name(al->error_mode), sf_error_mode_name(want));
}

/* The error_mode of each of the processor's statements in context `ctx`
 * that sets its own, against the pinned one. */
static void check_statement_modes(checker *k, const char *subj, const sf_allowlist_desc *al,
                                  sf_otlp_ctx ctx, int want)
{
    sf_rule op;

    for (size_t i = 0; al->get(al->rules, ctx, i, &op); i++)
        if (op.error_mode >= 0 && op.error_mode != want)
            violate(k, op.node, subj, "%s statement runs with error_mode '%s', the policy "
                    "requires '%s'", sf_otlp_ctx_name(ctx), sf_error_mode_name(op.error_mode),
                    sf_error_mode_name(want));
}

static void check_allowlist(checker *k)
{
    const policy_allowlist *pa = &k->pol->allowlist;
    sf_allowlist_desc al;
    const sf_config_component *c;
    compiled ce;
    const sf_node *value, *statements;
    char subj[300];

    c = fence_processor(k, &pa->fence, "allowlist", subj, sizeof(subj), &al, &value);
    if (c == NULL)
        return;
    statements = sf_node_key(value, "trace_statements");
    if (statements == NULL)
        statements = c->node;
    compiled_build(k, c, SF_SIGNAL_TRACES, &ce);
    check_error_mode(k, subj, c, value, &al, pa->fence.error_mode);
    for (int ctx = 0; ctx < SF_OTLP_CTX_COUNT; ctx++)
        check_statement_modes(k, subj, &al, (sf_otlp_ctx)ctx, pa->fence.error_mode);
    if (pa->fence.kept_value_types == VALUES_SCALAR && !al.scalar_values_only) {
        const sf_node *at = sf_node_get(value, "kept_value_types");

        violate(k, at ? at : c->node, subj, "kept_value_types is 'any'%s, the policy requires "
                "'scalar': a kept key could carry a kvlist or bytes value", at ? "" : " (the default)");
    }
    if (pa->fence.kept_value_types == VALUES_SINGLE && !al.single_values_only) {
        const sf_node *at = sf_node_get(value, "kept_value_types");

        violate(k, at ? at : c->node, subj, "kept_value_types is '%s'%s, the policy requires "
                "'single': a kept key could carry an array whose elements spell text",
                al.scalar_values_only ? "scalar" : "any", at ? "" : " (the default)");
    }
    if (pa->clear_status_message && ce.e != NULL && !ce.e->clear_status_message)
        violate(k, statements, subj, "span status messages are not cleared: the policy requires "
                "set(status.message, \"\")");
    if (pa->clear_trace_state && ce.e != NULL) {
        static const sf_otlp_ctx with_trace_state[] = { SF_OTLP_SPAN, SF_OTLP_LINK };

        for (size_t i = 0; i < 2; i++) {
            const char *name = sf_otlp_ctx_name(with_trace_state[i]);

            if (!(ce.e->clear_trace_state & SF_OTLP_CTX_BIT(with_trace_state[i])))
                violate(k, statements, subj, "%s trace_state is not cleared: the policy requires "
                        "set(trace_state, \"\") in the %s context", name, name);
        }
    }
    for (int ctx = 0; ctx < SF_OTLP_CTX_COUNT; ctx++)
        check_keys(k, subj, &al, ce.e, &pa->fence.keys, (sf_otlp_ctx)ctx, statements);
    if (pa->name_rules.present) {
        check_name_rules(k, subj, &al, SF_OTLP_SPAN, statements);
        check_name_rules(k, subj, &al, SF_OTLP_SPANEVENT, statements);
    }
    check_rules(k, subj, &al, &pa->fence, value, statements);
    check_compiled(k, subj, c, &al, SF_SIGNAL_TRACES, &ce, statements);
    compiled_release(&ce);
}

static void check_pipelines(checker *k)
{
    const sf_config *cfg = k->cfg;
    const char *proc = k->pol->allowlist.fence.processor, *exp = k->pol->exporter.id;
    char subj[300];

    for (size_t i = 0; i < cfg->n_pipelines && k->main == NULL; i++) {
        const sf_config_pipeline *p = &cfg->pipelines[i];

        if (p->signal == SF_SIGNAL_TRACES && runs((const sf_config_component *const *)p->processors,
                                                  p->n_processors, proc))
            k->main = p;
    }
    for (size_t i = 0; i < cfg->n_pipelines && k->main == NULL; i++)
        if (cfg->pipelines[i].signal == SF_SIGNAL_TRACES)
            k->main = &cfg->pipelines[i];
    for (size_t i = 0; i < cfg->n_pipelines; i++) {
        const sf_config_pipeline *p = &cfg->pipelines[i];
        const sf_node *pv = pipeline_value(cfg, p), *list = sf_node_get(pv, "exporters");

        snprintf(subj, sizeof(subj), "service.pipelines.%s", p->id);
        if (p->signal == SF_SIGNAL_TRACES && p != k->main)
            violate(k, p->node, subj, "a second traces pipeline: the policy allows exactly one");
        if (p->signal == SF_SIGNAL_TRACES &&
            !runs((const sf_config_component *const *)p->processors, p->n_processors, proc)) {
            const sf_node *at = sf_node_key(pv, "processors");

            violate(k, at ? at : p->node, subj, "does not run processor '%s'", proc);
        }
        for (size_t j = 0; list && list->kind == SF_NODE_SEQ && j < list->n; j++) {
            const sf_node *it = list->items[j];

            if (it->kind != SF_NODE_SCALAR)
                continue;
            if (p == k->main && strcmp(it->text, exp) != 0)
                violate(k, it, subj, "exports to '%s': the policy allows only '%s'", it->text,
                        exp);
            if (p != k->main && strcmp(it->text, exp) == 0)
                violate(k, it, subj, "uses exporter '%s', which the policy reserves for pipeline "
                        "'%s'", exp, k->main->id);
        }
        if (p == k->main &&
            !runs((const sf_config_component *const *)p->exporters, p->n_exporters, exp)) {
            const sf_node *at = sf_node_key(pv, "exporters");

            violate(k, at ? at : p->node, subj, "does not export to '%s'", exp);
        }
    }
}

static bool is_env_ref(const char *raw, const char *var)
{
    size_t n = strlen(var);

    if (strncmp(raw, "${env:", 6) == 0)
        raw += 6;
    else if (strncmp(raw, "${", 2) == 0)
        raw += 2;
    else
        return false;
    return strncmp(raw, var, n) == 0 && strcmp(raw + n, "}") == 0;
}

/* The type of `c` (of kind `kind`), and its decoded settings: its config,
 * or, when the loader left it undecoded (a component only logs or metrics
 * pipelines use, while the loader runs traces only), its settings decoded
 * here with its type's map, defaults included. NULL when they do not
 * decode (or no memory). */
static const void *decoded_config(checker *k, const sf_config_component *c, sf_kind kind,
                                  const sf_node *value, const sf_component_type **type)
{
    sf_diag *scratch_diag;
    sf_cfg_ctx ctx;
    void *config;
    sf_status st;
    char tname[128];

    *type = c->type;
    if (*type == NULL) {
        snprintf(tname, sizeof(tname), "%.*s", (int)strcspn(c->id, "/"), c->id);
        *type = sf_registry_find(kind, tname);
    }
    if (c->config != NULL || *type == NULL || (*type)->config_map == NULL)
        return c->config;
    if (k->scratch == NULL && (k->scratch = sf_arena_create(SF_POLICY_ARENA_CHUNK, 0)) == NULL)
        goto out_oom;
    config = sf_arena_alloc(k->scratch, (*type)->config_size ? (*type)->config_size : 1);
    scratch_diag = sf_diag_create(k->cfg->file);
    if (config == NULL || scratch_diag == NULL) {
        sf_diag_destroy(scratch_diag);
        goto out_oom;
    }
    memset(config, 0, (*type)->config_size);
    sf_cfg_ctx_init(&ctx, scratch_diag, k->scratch);
    ctx.node = c->node;
    st = sf_cfg_decode(&ctx, (*type)->config_map, value, config);
    sf_diag_destroy(scratch_diag);
    if (st == SF_ENOMEM)
        goto out_oom;
    return st == SF_OK ? config : NULL;

out_oom:
    k->oom = true;
    return NULL;
}

static void check_exporter(checker *k, const policy_exporter *pe, sf_signal sig)
{
    const sf_config_component *c = find_in(k->cfg, "exporters", pe->id);
    const sf_component_type *type;
    const void *config;
    const sf_queue_config *q;
    const sf_retry_config *r;
    sf_export_desc ed;
    const sf_node *value, *queue, *retry, *at;
    char subj[300], path[400], a[40], b[40];

    snprintf(subj, sizeof(subj), "exporters.%s", pe->id);
    if (c == NULL) {
        violate(k, sf_node_key(k->cfg->root, "exporters"), subj, "the %s exporter is not defined",
                sf_signal_name(sig));
        return;
    }
    value = sf_node_get(sf_node_get(k->cfg->root, "exporters"), c->id);
    config = decoded_config(k, c, SF_KIND_EXPORTER, value, &type);
    if (type == NULL || type->describe_export == NULL || config == NULL ||
        !type->describe_export(config, &ed) || ed.sending_queue == NULL ||
        ed.retry_on_failure == NULL) {
        violate(k, c->node, subj, "is not a network exporter with a sending queue (such as "
                "otlphttp or otlp)");
        return;
    }
    q = ed.sending_queue;
    r = ed.retry_on_failure;
    if (pe->endpoint || pe->endpoint_env) {
        at = sf_node_get(value, ed.endpoint_key);
        snprintf(path, sizeof(path), "%s.%s", subj, ed.endpoint_key);
        if (pe->endpoint && (ed.endpoint == NULL || strcmp(ed.endpoint, pe->endpoint) != 0))
            violate(k, at ? at : c->node, path, "is '%s', the policy pins '%s'",
                    ed.endpoint ? ed.endpoint : "", pe->endpoint);
        if (pe->endpoint_env && (at == NULL || at->raw == NULL ||
                                 !is_env_ref(at->raw, pe->endpoint_env)))
            violate(k, at ? at : c->node, path, "is not read from ${env:%s} as the policy "
                    "requires", pe->endpoint_env);
        at = ed.override_key ? sf_node_get(value, ed.override_key) : NULL;
        if (at != NULL && ed.overridden) {
            snprintf(path, sizeof(path), "%s.%s", subj, ed.override_key);
            violate(k, at, path, "overrides the endpoint the policy pins");
        }
        /* a per-signal endpoint of another signal (upstream's logs_endpoint,
         * metrics_endpoint): this exporter may carry that signal too, so
         * any such key set is an endpoint the policy does not pin */
        for (size_t i = 0; value != NULL && value->kind == SF_NODE_MAP && i < value->n; i++) {
            const char *key = value->keys[i]->text;
            size_t n = strlen(key);

            if (n > 9 && strcmp(key + n - 9, "_endpoint") == 0 &&
                (ed.override_key == NULL || strcmp(key, ed.override_key) != 0) &&
                value->items[i]->kind == SF_NODE_SCALAR && !value->items[i]->is_null) {
                snprintf(path, sizeof(path), "%s.%s", subj, key);
                violate(k, value->items[i], path, "overrides the endpoint the policy pins for "
                        "the signal it names");
            }
        }
    }
    queue = sf_node_get(value, "sending_queue");
    if (!q->enabled) {
        /* Without the queue every send runs on the receiver's thread: a slow
         * gateway would block the engine. */
        at = sf_node_get(queue, "enabled");
        snprintf(path, sizeof(path), "%s.sending_queue.enabled", subj);
        violate(k, at ? at : c->node, path, "is false: sends would run on the receiver's "
                "thread and a slow gateway would block the engine; the policy requires the "
                "bounded queue");
    } else if (q->sizer != pe->queue_sizer) {
        static const char *const sizers[] = { "requests", "items", "bytes" };

        at = sf_node_get(queue, "sizer");
        snprintf(path, sizeof(path), "%s.sending_queue.sizer", subj);
        violate(k, at ? at : c->node, path, "is %s%s, the policy bounds the queue in %s",
                sizers[q->sizer >= 0 && q->sizer <= 2 ? q->sizer : 0], at ? "" : " (the default)",
                sizers[pe->queue_sizer >= 0 && pe->queue_sizer <= 2 ? pe->queue_sizer : 0]);
    } else if (q->queue_size > pe->max_queue_size) {
        at = sf_node_get(queue, "queue_size");
        snprintf(path, sizeof(path), "%s.sending_queue.queue_size", subj);
        violate(k, at ? at : c->node, path, "is %lld%s, the policy allows at most %lld",
                (long long)q->queue_size, at ? "" : " (the default)",
                (long long)pe->max_queue_size);
    }
    retry = sf_node_get(value, "retry_on_failure");
    if (r->enabled && (r->max_elapsed_time == 0 || r->max_elapsed_time > pe->max_elapsed_time)) {
        at = sf_node_get(retry, "max_elapsed_time");
        snprintf(path, sizeof(path), "%s.retry_on_failure.max_elapsed_time", subj);
        sf_format_duration(r->max_elapsed_time, a, sizeof(a));
        sf_format_duration(pe->max_elapsed_time, b, sizeof(b));
        violate(k, at ? at : c->node, path, "is %s%s%s, the policy allows at most %s", a,
                r->max_elapsed_time == 0 ? " (retry forever)" : "",
                at ? "" : " (the default)", b);
    }
}

/* "127.0.0.1:4317", "localhost:4318", "[::1]:4317", "http://127.0.0.1:9".
 * Loopback is a numeric address, as inet_pton reads it, in 127.0.0.0/8,
 * ::1 or ::ffff:127.0.0.0/104 (v4-mapped), or the exact name "localhost",
 * which resolves to those (RFC 6761; nss-files and systemd-resolved answer
 * it themselves). Any other name, "127.attacker.example" among them, could
 * resolve anywhere and is not loopback; an empty host (":4317") binds every
 * interface. */
static bool is_loopback(const char *endpoint)
{
    const char *s = strstr(endpoint, "://");
    char host[INET6_ADDRSTRLEN + 1];
    struct in_addr a4;
    struct in6_addr a6;
    size_t n;

    s = s ? s + 3 : endpoint;
    if (*s == '[') {
        const char *end = strchr(++s, ']');

        if (end == NULL || (size_t)(end - s) >= sizeof(host))
            return false;
        memcpy(host, s, (size_t)(end - s));
        host[end - s] = '\0';
        if (inet_pton(AF_INET6, host, &a6) != 1)
            return false;
        return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    }
    n = strcspn(s, ":/");
    if (n == 0 || n >= sizeof(host))
        return false;
    memcpy(host, s, n);
    host[n] = '\0';
    if (strcmp(host, "localhost") == 0)
        return true;
    return inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

static void check_endpoint(checker *k, const sf_node *at, const char *path, const char *endpoint)
{
    if (!is_loopback(endpoint))
        violate(k, at, path, "'%s' is not a loopback address: the policy allows loopback only",
                endpoint);
}

/* Receivers spanfence does not decode: every `endpoint` in their settings. */
static void walk_endpoints(checker *k, const sf_node *n, const char *path, int depth)
{
    char sub[512];

    if (n == NULL || n->kind != SF_NODE_MAP || depth > 16)
        return;
    for (size_t i = 0; i < n->n; i++) {
        if (snprintf(sub, sizeof(sub), "%s.%s", path, n->keys[i]->text) >= (int)sizeof(sub))
            memcpy(sub + sizeof(sub) - 4, "...", 4);    /* only named shorter in messages */
        if (strcmp(n->keys[i]->text, "endpoint") == 0 && n->items[i]->kind == SF_NODE_SCALAR)
            check_endpoint(k, n->items[i], sub, n->items[i]->text);
        else
            walk_endpoints(k, n->items[i], sub, depth + 1);
    }
}

/* The value at the dotted `path` under `value` (whose key is `key`), or,
 * when it is not written, the key of the deepest part that is. */
static const sf_node *node_at_path(const sf_node *value, const sf_node *key, const char *path)
{
    char part[128];

    while (*path != '\0') {
        size_t n = strcspn(path, ".");
        const sf_node *next;

        if (n >= sizeof(part))
            return key;
        memcpy(part, path, n);
        part[n] = '\0';
        next = sf_node_get(value, part);
        if (next == NULL)
            return key;
        key = sf_node_key(value, part);
        value = next;
        path += n + (path[n] == '.');
    }
    return value;
}

static void check_receivers(checker *k)
{
    const policy_receivers *pr = &k->pol->receivers;
    const sf_node *section = sf_node_get(k->cfg->root, "receivers");
    char subj[300], path[400];

    if (pr->ids.v != NULL && k->main != NULL) {
        const sf_node *pv = pipeline_value(k->cfg, k->main), *list = sf_node_get(pv, "receivers");

        snprintf(subj, sizeof(subj), "service.pipelines.%s", k->main->id);
        for (size_t j = 0; list && list->kind == SF_NODE_SEQ && j < list->n; j++)
            if (list->items[j]->kind == SF_NODE_SCALAR && !in_list(&pr->ids, list->items[j]->text))
                violate(k, list->items[j], subj, "receiver '%s' is not in the policy",
                        list->items[j]->text);
        for (size_t i = 0; i < pr->ids.n; i++)
            if (!runs((const sf_config_component *const *)k->main->receivers,
                      k->main->n_receivers, pr->ids.v[i]))
                violate(k, list ? sf_node_key(pv, "receivers") : k->main->node, subj,
                        "does not use receiver '%s' pinned by the policy", pr->ids.v[i]);
    }
    if (!pr->loopback_only || section == NULL || section->kind != SF_NODE_MAP)
        return;
    for (size_t i = 0; i < section->n; i++) {
        const sf_config_component *c = find_in(k->cfg, "receivers", section->keys[i]->text);

        snprintf(subj, sizeof(subj), "receivers.%s", section->keys[i]->text);
        if (c != NULL && c->type != NULL && c->type->describe_listen != NULL) {
            sf_listen_desc ld[SF_LISTEN_MAX];
            size_t n = c->type->describe_listen(c->config, ld, SF_LISTEN_MAX);

            /* decoded: defaults count, and defaults are loopback */
            for (size_t j = 0; j < n; j++) {
                snprintf(path, sizeof(path), "%s.%s", subj, ld[j].path);
                check_endpoint(k, node_at_path(section->items[i], section->keys[i], ld[j].path),
                               path, ld[j].endpoint);
            }
            continue;
        }
        walk_endpoints(k, section->items[i], subj, 0);
    }
}

/* The node at dotted `path` ("markers.enabled") under `map`, or NULL. */
static const sf_node *node_at(const sf_node *map, const char *path)
{
    char key[64];

    while (map != NULL && *path) {
        size_t n = strcspn(path, ".");

        if (n >= sizeof(key))
            return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        map = sf_node_get(map, key);
        path += n + (path[n] == '.');
    }
    return map;
}

/* Every component whose type has trace-level windows (describe_windows:
 * trace_control), listed or not, against the policy's trace_control
 * section. */
static void check_trace_control(checker *k)
{
    const policy_trace_control *pt = &k->pol->trace_control;

    for (size_t i = 0; pt->present && i < k->cfg->n_components; i++) {
        const sf_config_component *c = &k->cfg->components[i];
        const sf_node *v = sf_node_get(sf_node_get(k->cfg->root, "extensions"), c->id);
        sf_windows_desc wd;
        char subj[300];

        if (c->type == NULL || c->type->describe_windows == NULL || c->config == NULL ||
            !c->type->describe_windows(c->config, &wd))
            continue;
        snprintf(subj, sizeof(subj), "extensions.%s", c->id);
        if (pt->markers && !wd.announced)
            violate(k, node_at(v, wd.announced_key) ? node_at(v, wd.announced_key) : c->node,
                    subj, "'%s' is false: the policy requires each window to be announced in "
                    "the capture (a marker span)", wd.announced_key);
        if (pt->auto_revert && !wd.ends_on_loss)
            violate(k, node_at(v, wd.ends_on_loss_key) ? node_at(v, wd.ends_on_loss_key)
                    : c->node, subj, "'%s' is false: the policy requires a window to end when "
                    "its capture loses spans", wd.ends_on_loss_key);
        if (pt->enforce && wd.rest_interval == 0)
            violate(k, node_at(v, wd.rest_interval_key) ? node_at(v, wd.rest_interval_key)
                    : c->node, subj, "'%s' is 0: the policy requires idle engines to be set to "
                    "the resting level at an interval", wd.rest_interval_key);
        if (pt->out_of_band == OOB_DROP && wd.exports_out_of_band != NULL)
            violate(k, node_at(v, wd.out_of_band_key) ? node_at(v, wd.out_of_band_key) : c->node,
                    subj, "target '%s' exports the spans it sends while it rests: the policy "
                    "requires 'out_of_band: drop' (a level raised out of band stays in the VM)",
                    wd.exports_out_of_band);
    }
}

/* The contexts of a signal's statements. */
static bool signal_has_ctx(sf_signal sig, sf_otlp_ctx c)
{
    if (c == SF_OTLP_RESOURCE || c == SF_OTLP_SCOPE)
        return true;
    if (sig == SF_SIGNAL_LOGS)
        return c == SF_OTLP_LOG;
    if (sig == SF_SIGNAL_METRICS)
        return c == SF_OTLP_METRIC || c == SF_OTLP_DATAPOINT;
    return c == SF_OTLP_SPAN || c == SF_OTLP_SPANEVENT || c == SF_OTLP_LINK;
}

/* The fence processor of a logs or metrics section: its statements for
 * the signal, in declared mode, with the pinned key sets, body rule or
 * exemplars, compiled as described. */
static void check_signal_processor(checker *k, sf_signal sig, const policy_signal *ps)
{
    const char *list = sig == SF_SIGNAL_LOGS ? "log_statements" : "metric_statements";
    const sf_config_component *c;
    const sf_node *value, *statements;
    sf_allowlist_desc al;
    compiled ce;
    char subj[300], what[32];
    sf_rule op;

    snprintf(what, sizeof(what), "%s fence", sf_signal_name(sig));
    c = fence_processor(k, &ps->fence, what, subj, sizeof(subj), &al, &value);
    if (c == NULL)
        return;
    statements = sf_node_key(value, list);
    if (al.signal_rules[sig] == NULL) {
        violate(k, c->node, subj, "has no %s: the policy fences %s with them", list,
                sf_signal_name(sig));
        return;
    }
    al.rules = al.signal_rules[sig];
    compiled_build(k, c, sig, &ce);
    check_error_mode(k, subj, c, value, &al, ps->fence.error_mode);
    for (int ctx = 0; ctx < SF_OTLP_CTX_COUNT; ctx++) {
        check_statement_modes(k, subj, &al, (sf_otlp_ctx)ctx, ps->fence.error_mode);
        if (signal_has_ctx(sig, (sf_otlp_ctx)ctx))
            check_keys(k, subj, &al, ce.e, &ps->fence.keys, (sf_otlp_ctx)ctx, statements);
    }
    if (sig == SF_SIGNAL_LOGS) {
        bool found = find_set_field(&al, SF_OTLP_FIELD_LOG_BODY, &op);
        const char *got = found ? op.pattern : NULL;

        if (strcmp(ps->body, "drop") == 0 && got != NULL)
            violate(k, op.node, subj, "log bodies leave when '%s': the policy drops every body",
                    got);
        else if (strcmp(ps->body, "drop") != 0 && (got == NULL || strcmp(got, ps->body) != 0))
            violate(k, found ? op.node : statements, subj, "the log body rule is %s%s%s, the "
                    "policy requires set(body, nil) where %s", got ? "'" : "",
                    got ? got : "to drop every body", got ? "'" : "", ps->body);
    } else {
        bool keep = false;

        for (size_t i = 0; al.get(al.rules, SF_OTLP_DATAPOINT, i, &op); i++)
            keep = keep || op.kind == SF_RULE_KEEP_EXEMPLARS;
        if (keep != (ps->exemplars == EXEMPLARS_KEEP))
            violate(k, statements, subj, "exemplars %s, the policy requires them %s",
                    keep ? "leave (keep_exemplars)" : "are dropped",
                    ps->exemplars == EXEMPLARS_KEEP ? "kept (keep_exemplars(exemplars))"
                                                    : "dropped");
    }
    check_rules(k, subj, &al, &ps->fence, value, statements ? statements : c->node);
    if ((ps->fence.kept_value_types == VALUES_SINGLE && !al.single_values_only) ||
        (ps->fence.kept_value_types == VALUES_SCALAR && !al.scalar_values_only)) {
        const sf_node *at = sf_node_get(value, "kept_value_types");

        violate(k, at ? at : c->node, subj, "kept_value_types is '%s'%s, the policy requires "
                "'%s'", al.single_values_only ? "single" : al.scalar_values_only ? "scalar"
                : "any", at ? "" : " (the default)",
                ps->fence.kept_value_types == VALUES_SINGLE ? "single" : "scalar");
    }
    k->signal = ps;
    check_compiled(k, subj, c, &al, sig, &ce, statements);
    compiled_release(&ce);
    k->signal = NULL;
}

/* A logs or metrics section against the config: without one, a pipeline
 * of that signal does not hold (it would leave unfenced); with one, every
 * such pipeline runs the fence processor and exports to the one exporter,
 * which no pipeline of another signal uses. */
static void check_signal(checker *k, sf_signal sig, const policy_signal *ps)
{
    const sf_config *cfg = k->cfg;
    const char *name = sf_signal_name(sig);
    bool any = false;
    char subj[300];

    for (size_t i = 0; i < cfg->n_pipelines; i++) {
        const sf_config_pipeline *p = &cfg->pipelines[i];
        const sf_node *pv = pipeline_value(cfg, p), *list = sf_node_get(pv, "exporters");

        snprintf(subj, sizeof(subj), "service.pipelines.%s", p->id);
        if (ps->present && p->signal != sig) {
            /* logs and metrics may share one exporter when both sections
             * fence them and name it (the seed's telemetry gateway) */
            const policy_signal *other = p->signal == SF_SIGNAL_LOGS ? &k->pol->logs
                                         : p->signal == SF_SIGNAL_METRICS ? &k->pol->metrics
                                         : NULL;

            if (other != NULL && other->present && other->exporter.id != NULL &&
                strcmp(other->exporter.id, ps->exporter.id) == 0)
                continue;
            for (size_t j = 0; list && list->kind == SF_NODE_SEQ && j < list->n; j++)
                if (list->items[j]->kind == SF_NODE_SCALAR &&
                    strcmp(list->items[j]->text, ps->exporter.id) == 0)
                    violate(k, list->items[j], subj, "uses exporter '%s', which the policy "
                            "reserves for %s", ps->exporter.id, name);
            continue;
        }
        if (p->signal != sig)
            continue;
        any = true;
        if (!ps->present) {
            violate(k, p->node, subj, "a %s pipeline, but the policy has no '%s' section: its "
                    "%s would leave unfenced", name, name, sf_signal_items(sig));
            continue;
        }
        if (!runs((const sf_config_component *const *)p->processors, p->n_processors,
                  ps->fence.processor)) {
            const sf_node *at = sf_node_key(pv, "processors");

            violate(k, at ? at : p->node, subj, "does not run processor '%s'", ps->fence.processor);
        }
        for (size_t j = 0; list && list->kind == SF_NODE_SEQ && j < list->n; j++)
            if (list->items[j]->kind == SF_NODE_SCALAR &&
                strcmp(list->items[j]->text, ps->exporter.id) != 0)
                violate(k, list->items[j], subj, "exports to '%s': the policy allows only '%s'",
                        list->items[j]->text, ps->exporter.id);
        if (!runs((const sf_config_component *const *)p->exporters, p->n_exporters,
                  ps->exporter.id)) {
            const sf_node *at = sf_node_key(pv, "exporters");

            violate(k, at ? at : p->node, subj, "does not export to '%s'", ps->exporter.id);
        }
    }
    if (!ps->present || !any)
        return;
    check_signal_processor(k, sig, ps);
    check_exporter(k, &ps->exporter, sig);
}

sf_status sf_policy_check(const sf_policy *policy, const sf_config *cfg, sf_diag *diag)
{
    checker k = { .pol = &policy->conf, .cfg = cfg, .diag = diag };
    size_t errors = sf_diag_errors(diag);

    if (sf_diag_set_file(diag, cfg->file) != SF_OK)
        return SF_ENOMEM;
    check_allowlist(&k);
    check_pipelines(&k);
    check_exporter(&k, &k.pol->exporter, SF_SIGNAL_TRACES);
    check_signal(&k, SF_SIGNAL_LOGS, &k.pol->logs);
    check_signal(&k, SF_SIGNAL_METRICS, &k.pol->metrics);
    check_receivers(&k);
    check_trace_control(&k);
    sf_arena_destroy(k.scratch);
    if (k.oom || sf_diag_oom(diag))
        return SF_ENOMEM;
    return sf_diag_errors(diag) > errors ? SF_CONFIG : SF_OK;
}

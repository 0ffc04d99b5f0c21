/* sf_describe.h: what a component type tells the core about itself, through
 * optional slots of sf_component_type (sf_component.h), so that the core
 * never includes a component's header, casts its config or compares type
 * names. Every question is asked of the type, so every type that answers it
 * is treated the same (the policy pins an `otlp` exporter like `otlphttp`).
 *
 *   describe_export     exporters: where they send, their sending queue and
 *                       retries (the policy's exporter checks)
 *   describe_listen     receivers: the endpoints they bind (loopback_only)
 *   describe_allowlist  processors: the attribute rules their config applies,
 *                       the list their compiled edit is built from (the
 *                       policy's name rules, value rules and positions)
 *   describe_batching   processors: the merging they ask of the sending
 *                       queues of the exporters their pipeline feeds
 *   describe_windows    extensions that raise what engines emit for a time
 *                       (trace-level windows): their safeguards (the
 *                       policy's trace_control checks)
 *   metric_rows         any kind: the type's own series on the metrics
 *                       endpoint, kept in sf_counters.values
 *   verbs               any kind: `spanfence <verb> ...` subcommands
 *
 * The describe_* slots read the decoded config (type->config_size bytes as
 * the loader filled them, defaults included) and nothing else, so they work
 * in `spanfence validate`, before anything is created. What they return
 * points into that config and lives as long as it does. */
#ifndef SF_DESCRIBE_H
#define SF_DESCRIBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_config.h"
#include "sf_metrics.h"
#include "sf_otlp_wire.h"

struct sf_queue_config;
struct sf_retry_config;

/* ---- exporters ---------------------------------------------------------- */

typedef struct sf_export_desc {
    const char *endpoint_key;       /* the key of the destination: "endpoint" */
    const char *endpoint;           /* its decoded value, or NULL when unset */
    /* A key that, when set, replaces the endpoint for traces
     * ("traces_endpoint"), or NULL when the type has none. */
    const char *override_key;
    bool overridden;                /* override_key is set */
    const struct sf_queue_config *sending_queue;    /* sf_sender.h */
    const struct sf_retry_config *retry_on_failure;
} sf_export_desc;

/* ---- receivers ---------------------------------------------------------- */

#define SF_LISTEN_MAX 8

typedef struct sf_listen_desc {
    const char *path;               /* the key under the component: "protocols.grpc.endpoint" */
    const char *endpoint;           /* decoded host:port (defaults included) */
} sf_listen_desc;

/* OTLP/HTTP's path for traces (the specification's default): the otlp
 * receiver's default traces_url_path (a config default must be a
 * constant; sf_signal_http_path() says the same). */
#define SF_OTLP_TRACES_PATH "/v1/traces"

/* ---- processors: attribute rules --------------------------------------- */

/* X(ENUM, name): how a rule that cannot be applied is handled. */
#define SF_ERROR_MODE_MAP(X)        \
    X(PROPAGATE, "propagate")       \
    X(IGNORE,    "ignore")          \
    X(SILENT,    "silent")

typedef enum sf_error_mode {
#define SF_ERROR_MODE_ENUM(e, name) SF_ERROR_MODE_##e,
    SF_ERROR_MODE_MAP(SF_ERROR_MODE_ENUM)
#undef SF_ERROR_MODE_ENUM
    SF_ERROR_MODE_COUNT
} sf_error_mode;

/* The same names as a config row's ENUM choices and its default, so the
 * rows that take an error_mode (the transform processor's, the policy's)
 * do not write them out again; in the order of the map (test_describe). */
#define SF_ERROR_MODE_CHOICES "propagate|ignore|silent"
#define SF_ERROR_MODE_DEFAULT "propagate"
/* "propagate", "ignore", "silent"; "?" out of range. */
const char *sf_error_mode_name(int mode);
/* "resource", "scope", "span", "spanevent", "link"; "?" out of range. */
const char *sf_otlp_ctx_name(sf_otlp_ctx c);

/* Whether key is one of keys[0, n), sorted by strcmp (a rule's keys, a
 * transform's keyset): a binary search. */
bool sf_sorted_keys_has(const char *const *keys, size_t n, const char *key);

typedef enum sf_rule_kind {
    SF_RULE_KEEP_KEYS,              /* only `keys` survive */
    SF_RULE_DELETE_KEY,             /* keys[0] does not survive */
    SF_RULE_CLEAR_STATUS_MESSAGE,   /* span status messages become "" */
    SF_RULE_CLEAR_TRACE_STATE,      /* trace_state becomes "" (span, link) */
    SF_RULE_REPLACE_PATTERN,        /* names: every match of pattern -> replacement */
    SF_RULE_VALUE,                  /* keys[0]'s value must fit `pattern`: the condition's
                                     * text as written after 'where ' */
    SF_RULE_PSEUDONYMIZE,           /* keys[0]'s value leaves as its keyed pseudonym */
    SF_RULE_SET_FIELD,              /* `field` becomes `replacement` unless `pattern`
                                     * (NULL: always) matches it; log.body: dropped unless
                                     * `pattern` (NULL: always), the condition as written
                                     * after 'where ', holds; datapoint.exemplars: dropped */
    SF_RULE_KEEP_EXEMPLARS,         /* exemplars leave (ids checked, filtered attributes
                                     * as the datapoint's) */
    SF_RULE_OTHER                   /* anything else the processor does */
} sf_rule_kind;

typedef struct sf_rule {
    sf_rule_kind kind;
    int error_mode;                 /* the SF_ERROR_MODE_* it runs with, or -1: the processor's */
    size_t n_keys;                  /* KEEP_KEYS, DELETE_KEY */
    const char *const *keys;        /* sorted by strcmp, unique */
    const char *pattern;            /* REPLACE_PATTERN, as written unescaped */
    const char *replacement;
    sf_otlp_field field;            /* SET_FIELD */
    const sf_node *node;            /* where it was written, or NULL */
} sf_rule;

/* A processor's rules per context, in the order they run, and the settings
 * they run with. What they let through is not asked here: the policy asks
 * the edit the processor compiles from them (sf_component_type.edit), the
 * one the codec runs, and reads the rules for what is pinned as text and
 * for positions. */
typedef struct sf_allowlist_desc {
    int error_mode;                 /* the processor's SF_ERROR_MODE_* */
    bool scalar_values_only;        /* a kept key holding a kvlist, bytes or nested array goes */
    bool single_values_only;        /* ... and one holding an array */
    bool declared_fields;           /* every kept key and string field has a rule */
    size_t max_string_length;       /* the bound on exported strings, 0: none */
    const void *rules;              /* handed back to the functions below (traces') */
    /* Each signal's rules, handed back like `rules` (which is
     * signal_rules[SF_SIGNAL_TRACES] when the processor has traces rules):
     * the transform's trace_statements, log_statements, metric_statements;
     * NULL when none are written for that signal. */
    const void *signal_rules[SF_SIGNAL_COUNT];
    size_t (*count)(const void *rules, sf_otlp_ctx c);
    /* The i-th rule of context c into *out; false past the end. */
    bool (*get)(const void *rules, sf_otlp_ctx c, size_t i, sf_rule *out);
} sf_allowlist_desc;

/* ---- extensions: trace-level windows ------------------------------------- */

/* The safeguards of an extension that raises what engines emit for a
 * bounded window, each with the key (dotted, under the component) that
 * sets it, for positions in messages. */
typedef struct sf_windows_desc {
    bool announced;                 /* each window is announced in the capture */
    const char *announced_key;      /* "markers.enabled" */
    bool ends_on_loss;              /* a window ends early when its capture loses spans */
    const char *ends_on_loss_key;   /* "auto_revert.enabled" */
    int64_t rest_interval;          /* ms between rounds setting idle engines to rest; 0: none */
    const char *rest_interval_key;  /* "enforce_interval" */
    int64_t grace;                  /* ms a window's spans are still counted after its end */
    const char *grace_key;          /* "grace_period" */
    /* a target whose spans while it rests (raised out of band) are
     * exported, with the key that says so ("targets.r1.out_of_band"),
     * or NULL: every target keeps them in the VM */
    const char *exports_out_of_band;
    char out_of_band_key[128];
} sf_windows_desc;

/* ---- metrics of a type --------------------------------------------------- */

typedef struct sf_metric_row {
    /* "spanfence_trace_control_open_windows"; NULL ends. A "%s" in it
     * makes it a metric per signal, the "%s" the instance's items
     * ("otelcol_processor_accepted_%s": _spans, _log_records,
     * _metric_points); without, instances for logs or metrics carry a
     * signal="..." label. */
    const char *name;
    bool gauge;                     /* false: a counter, carried over a reload */
    const char *help;
    /* A gauge of work still owed: after shutdown a non-zero value is that
     * many `lost` ("audit record") that `lost_how` ("could not be
     * written"), and the collector exits 1. NULL for other rows. */
    const char *lost;
    const char *lost_how;
} sf_metric_row;

/* ---- subcommands --------------------------------------------------------- */

typedef struct sf_cli_verb {
    const char *name;               /* `spanfence trace-level ...`; NULL ends */
    const char *usage;              /* "set|status|reset ...", for spanfence --help */
    const char *help;               /* "trace-level windows (--help)" */
    /* argv[0] is the verb; returns the exit status. */
    int (*run)(int argc, char **argv);
} sf_cli_verb;

#endif

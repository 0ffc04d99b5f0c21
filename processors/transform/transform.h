/* processors/transform/transform.h: the `transform` processor's config: the
 * OTTL statements spanfence supports, parsed at load time into one program
 * per signal (trace_statements, log_statements, metric_statements; per
 * context, an ordered list of operations), and the read-only accessors the
 * policy validator uses to ask what a program lets through. */
#ifndef SF_PROCESSORS_TRANSFORM_H
#define SF_PROCESSORS_TRANSFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_component.h"
#include "sf_describe.h"
#include "sf_otlp_wire.h"
#include "sf_signal.h"

/* A statement's context is the codec's (sf_otlp_ctx), its statement list
 * a signal (sf_signal: trace_statements, log_statements,
 * metric_statements), its operation a rule kind (sf_rule_kind): the fence
 * speaks the core's words, it declares none of its own. */
#define SF_TRANSFORM_CTX_NONE ((sf_otlp_ctx)-1) /* flat statements: context from the path */

/* What a kept attribute may hold (the `kept_value_types` option). */
typedef enum sf_transform_value_types {
    SF_TRANSFORM_VALUES_ANY = 0,    /* any AnyValue (the default, as upstream) */
    SF_TRANSFORM_VALUES_SCALAR = 1, /* string, bool, int, double, empty, or an array of
                                     * those; a kept key holding a kvlist, bytes or a
                                     * nested array is removed like a key not kept */
    SF_TRANSFORM_VALUES_SINGLE = 2  /* one value per kept key: string, bool, int, double
                                     * or empty; an array is removed too (the codec's
                                     * single_values_only) */
} sf_transform_value_types;

/* Attribute keys, sorted by strcmp (bytewise, case-sensitive), unique. */
typedef struct sf_transform_keyset {
    size_t n;
    const char *const *keys;
} sf_transform_keyset;

typedef struct sf_transform_op {
    sf_rule_kind kind;
    sf_otlp_ctx ctx;
    int error_mode;                 /* its group's SF_ERROR_MODE_*, or -1: the processor's */
    sf_transform_keyset keys;       /* KEEP_KEYS: the allowlist; DELETE_KEY: one key */
    /* REPLACE_PATTERN: a PCRE2 pattern (compiled once at load to check it,
     * then freed; the processor compiles its own at create) and the
     * replacement, in pcre2_substitute syntax ($1, ${1}, ${name}, $$),
     * applied to every match (global). NULL for other kinds. */
    const char *pattern;
    const char *replacement;
    /* VALUE_RULE, SET_FIELD of the log body: the condition compiled
     * (SF_OTLP_STR_REGEX alternatives hold the pattern text in `regex`; the
     * processor compiles its own); NULL on a body: always dropped. */
    const sf_otlp_value_rule *rule;
    sf_otlp_field field;            /* SET_FIELD: which; `replacement` the value,
                                     * `pattern` the IsMatch that keeps the field as
                                     * it is, or NULL (always set) */
    const char *statement;          /* source text, for messages */
    const sf_node *node;            /* where it was written, or NULL */
} sf_transform_op;

typedef struct sf_transform_program sf_transform_program;   /* transform_config.c */

/* The length bound every exported string has in declared mode unless
 * max_string_length says otherwise. */
#define SF_TRANSFORM_DECLARED_MAX_STRING 256

typedef struct sf_transform_config {
    int error_mode;                 /* SF_ERROR_MODE_* */
    int kept_value_types;           /* sf_transform_value_types */
    bool declared_fields;           /* every kept key and string field has a rule */
    int64_t max_string_length;      /* 0: none (declared: SF_TRANSFORM_DECLARED_MAX_STRING) */
    int64_t max_events_per_span;    /* 0: any number (the codec's cap on span.events) */
    int64_t max_links_per_span;     /* 0: any number (span.links) */
    int64_t max_spans_per_request;  /* 0: any number (the codec's cap on request.spans) */
    int64_t max_resources_per_request; /* 0: any number (request.resource_spans) */
    int64_t max_scopes_per_resource;   /* 0: any number (resource.scope_spans) */
    bool pseudonymize_ids;          /* trace and span ids leave as keyed pseudonyms */
    /* histogram_bounds: per metric name, the explicit_bounds its points must
     * have (the codec's check_histograms); memory from sf_cfg_alloc */
    size_t n_bounds;
    sf_otlp_bounds *bounds;
    char *pseudonym_key;            /* the HMAC key, or NULL (never logged) */
    char *pseudonym_key_file;       /* or a file holding it */
    sf_transform_program *program;  /* from trace_statements; memory from sf_cfg_alloc */
    sf_transform_program *log_program;      /* from log_statements */
    sf_transform_program *metric_program;   /* from metric_statements */
} sf_transform_config;

extern const sf_config_row sf_transform_config_map[];
/* The component type (transform.c); the registry lists it. */
extern const sf_component_type sf_transform_processor_type;

/* ---- parsing, usable without the config loader (tests, tools) ------------ */

/* Where parsed statements get their memory (never freed one by one: it
 * lives as long as the program) and where problems are reported. */
typedef struct sf_transform_sink {
    void *ctx;
    void *(*alloc)(void *ctx, size_t size);
    /* `subpath` like "trace_statements[1].statements[0]"; `msg` is final text. */
    void (*error)(void *ctx, const sf_node *at, const char *subpath, const char *msg);
} sf_transform_sink;

/* Parse one trace statement of `group` context (SF_TRANSFORM_CTX_NONE: paths
 * must carry a context prefix) into *op. On error returns SF_CONFIG and
 * writes a message quoting the statement into err (truncated to errlen);
 * *op is then unspecified. SF_ENOMEM when sink->alloc fails. */
sf_status sf_transform_parse_statement(const char *text, size_t len, sf_otlp_ctx group,
                                       const sf_transform_sink *sink, sf_transform_op *op,
                                       char *err, size_t errlen);
/* The same for a statement of `list` (whose contexts it may use). */
sf_status sf_transform_parse_in(sf_signal list, const char *text, size_t len,
                                sf_otlp_ctx group, const sf_transform_sink *sink,
                                sf_transform_op *op, char *err, size_t errlen);

/* Build a program from the `trace_statements` node (either layout). Every
 * problem is reported through sink->error; SF_CONFIG if there was any (then
 * *out is NULL). An absent or null node gives an empty program. */
sf_status sf_transform_program_build(const sf_node *node, const sf_transform_sink *sink,
                                     sf_transform_program **out);
/* The same for the node of `list`. */
sf_status sf_transform_program_build_list(sf_signal list, const sf_node *node,
                                          const sf_transform_sink *sink,
                                          sf_transform_program **out);
/* "trace_statements", "log_statements", "metric_statements". */
const char *sf_transform_list_name(sf_signal list);
/* The program of `list` in cfg (NULL: the list was not written). */
const sf_transform_program *sf_transform_program_of(const sf_transform_config *cfg,
                                                    sf_signal list);
/* Whether context c belongs to `list`. */
bool sf_transform_list_has(sf_signal list, sf_otlp_ctx c);

/* ---- read-only accessors (policy validator); NULL program = empty -------- */

size_t sf_transform_op_count(const sf_transform_program *p, sf_otlp_ctx c);
/* The i-th operation of context c, in the order they run; NULL past the end. */
const sf_transform_op *sf_transform_op_get(const sf_transform_program *p, sf_otlp_ctx c,
                                           size_t i);
/* Whether `key` is in the set: exact, bytewise, case-sensitive. */
bool sf_transform_keyset_has(const sf_transform_keyset *ks, const char *key);
/* Whether at least one keep_keys bounds context c's attributes. */
bool sf_transform_has_allowlist(const sf_transform_program *p, sf_otlp_ctx c);
/* Whether an attribute named `key` survives every operation of context c
 * (true for any key when c has no keep_keys: nothing bounds it). */
bool sf_transform_keeps_key(const sf_transform_program *p, sf_otlp_ctx c, const char *key);
/* Whether span status messages are cleared. */
bool sf_transform_clears_status_message(const sf_transform_program *p);
/* Whether trace_state is cleared in context c (SF_OTLP_SPAN or _LINK). */
bool sf_transform_clears_trace_state(const sf_transform_program *p, sf_otlp_ctx c);
/* The SET_FIELD operation of field f (the first), or NULL. */
const sf_transform_op *sf_transform_field_op(const sf_transform_program *p, sf_otlp_field f);
/* Whether keep_exemplars(exemplars) is in the datapoint context. */
bool sf_transform_keeps_exemplars(const sf_transform_program *p);
/* The error mode `op` runs with under `cfg` (its group's, else the processor's). */
int sf_transform_op_error_mode(const sf_transform_config *cfg, const sf_transform_op *op);

/* The pseudonym key of cfg (pseudonym_key, or pseudonym_key_file less its
 * trailing newlines) into *key (sf_malloc'd; sf_transform_key_free wipes
 * and frees it), or NULL when cfg has none. SF_CONFIG with *why ("is
 * shorter than 16 bytes", "cannot be read"): never the key itself. */
sf_status sf_transform_key_load(const sf_transform_config *cfg, uint8_t **key, size_t *len,
                                const char **why);
void sf_transform_key_free(uint8_t *key, size_t len);
/* The max_string_length that applies under cfg (declared mode's default). */
size_t sf_transform_max_string(const sf_transform_config *cfg);
/* The type's check: declared mode's rules, the pseudonym key. */
sf_status sf_transform_check(sf_cfg_ctx *ctx, void *config);

/* The type's describe_allowlist: the program's rules and the answers above,
 * in the core's words (sf_describe.h), for the policy. */
bool sf_transform_describe(const void *config, sf_allowlist_desc *out);

#endif

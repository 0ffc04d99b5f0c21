/* sf_otlp_wire.h: the one reader and writer of OTLP bytes, for the three
 * signals (sf_signal.h). Every part of spanfence that looks at an encoded
 * Export{Trace,Logs,Metrics}ServiceRequest (the receivers' validation, item
 * counting, the transform, the exporters' bytes, the trace_control tap) goes
 * through it, so they cannot disagree.
 *
 * One pass over a request validates it against the OTLP schema of its signal,
 * applies an edit (the transform's allowlist, name rules, cleared fields) and
 * writes the result in canonical form: only fields the schema defines, each
 * with its wire type, in field-number order, minimal varints, singular fields
 * once (protobuf merge semantics: the value a standard decoder sees), default
 * scalars omitted, repeated fields in order. Unknown, reserved and obsolete
 * fields (ResourceSpans 1000, OTLP 0.15-0.18's instrumentation_library_spans)
 * are dropped and counted; so are the profiles-only dictionary indexes
 * (KeyValue.key_strindex, AnyValue.string_value_strindex), meaningless in a
 * trace. Input whose meaning is not certain is refused (SF_INVALID): see
 * sf_otlp_rewrite. */
#ifndef SF_OTLP_WIRE_H
#define SF_OTLP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_signal.h"
#include "sf_status.h"

struct sf_buf;

/* SF_OTLP_MSG_MAP(X), X(ENUM, label): the message types of the schema;
 * SF_OTLP_FIELD_MAP(X), X(ENUM, name): the string-bearing fields outside
 * attributes that an edit can govern; SF_OTLP_NUM_<MSG>_<FIELD>: field
 * numbers. Generated at build time from the .proto files and
 * pipeline/proto/trace_fields.txt (tools/gen_otlp_schema.py). */
#include "sf_otlp_schema.h"

typedef enum sf_otlp_msg {
#define SF_OTLP_MSG_ENUM(e, label) SF_OTLP_MSG_##e,
    SF_OTLP_MSG_MAP(SF_OTLP_MSG_ENUM)
#undef SF_OTLP_MSG_ENUM
    SF_OTLP_MSG_COUNT
} sf_otlp_msg;

const char *sf_otlp_msg_label(sf_otlp_msg m);
/* Signal s's export request message (the root of its tree); s must be
 * below SF_SIGNAL_COUNT. */
sf_otlp_msg sf_otlp_signal_request(sf_signal s);

/* Where attributes and names live; the order is the tree's, traces' first.
 * RESOURCE and SCOPE serve all three signals. */
typedef enum sf_otlp_ctx {
    SF_OTLP_RESOURCE = 0,
    SF_OTLP_SCOPE,
    SF_OTLP_SPAN,
    SF_OTLP_SPANEVENT,
    SF_OTLP_LINK,
    SF_OTLP_LOG,                /* LogRecord.attributes */
    SF_OTLP_METRIC,             /* Metric.metadata */
    SF_OTLP_DATAPOINT,          /* every data point's attributes, an exemplar's
                                 * filtered_attributes */
    SF_OTLP_CTX_COUNT
} sf_otlp_ctx;

#define SF_OTLP_CTX_BIT(c) (1u << (c))

/* Each governed field is decided in one place in the codec (field_verdict). */
typedef enum sf_otlp_field {
    SF_OTLP_FIELD_NONE = 0,
#define SF_OTLP_FIELD_ENUM(e, name) SF_OTLP_FIELD_##e,
    SF_OTLP_FIELD_MAP(SF_OTLP_FIELD_ENUM)
#undef SF_OTLP_FIELD_ENUM
    SF_OTLP_FIELD_COUNT
} sf_otlp_field;

#define SF_OTLP_FIELD_BIT(f) (1u << (f))

/* "span.name", ...; "none" for SF_OTLP_FIELD_NONE or out of range. */
const char *sf_otlp_field_name(sf_otlp_field f);

/* ---- value rules: what a kept attribute may hold -------------------------- */

/* Value types an alternative accepts. */
enum { SF_OTLP_VAL_STRING = 1, SF_OTLP_VAL_INT = 2, SF_OTLP_VAL_DOUBLE = 4, SF_OTLP_VAL_BOOL = 8 };

/* What a string must look like, cheapest first. */
typedef enum sf_otlp_str_shape {
    SF_OTLP_STR_ANY = 0,        /* any string (within the edit's length bound) */
    SF_OTLP_STR_HEX,            /* min_len..max_len lowercase hex digits */
    SF_OTLP_STR_SET,            /* one of set[0, n_set), bytewise */
    SF_OTLP_STR_REGEX           /* regex matches the whole string: edit->match_fn */
} sf_otlp_str_shape;

typedef struct sf_otlp_value_alt {
    unsigned types;             /* SF_OTLP_VAL_* */
    sf_otlp_str_shape shape;    /* for strings; other types pass on their type alone */
    uint32_t min_len, max_len;  /* HEX */
    size_t n_set;               /* SET */
    const char *const *set;
    const void *regex;          /* REGEX: handed back to edit->match_fn */
} sf_otlp_value_alt;

/* A kept attribute's rule: its value (each element of an array value) must
 * be accepted by one of the alternatives (none: any string or int when
 * `pseudonym`), and no string longer than the edit's max_string_length;
 * else the attribute is removed like a key not kept and counted. With
 * `pseudonym` a string or int that fits leaves as edit->pseudonym_fn
 * makes it; any other type is removed. */
typedef struct sf_otlp_value_rule {
    size_t n_alts;
    const sf_otlp_value_alt *alts;
    bool pseudonym;
} sf_otlp_value_rule;

/* The explicit_bounds a histogram metric's points must have. */
typedef struct sf_otlp_bounds {
    const char *metric;         /* the metric's name, exactly */
    size_t n;
    const double *v;            /* strictly increasing, finite */
} sf_otlp_bounds;

/* An attribute an edit adds (the `attributes` and `resource` processors'
 * insert and upsert of constants): a string value. Insert: added when no
 * entry of the key leaves the list; upsert: the list's first entry of the
 * key leaves with this value (whatever the keyset says of it), or the
 * attribute is added; update: the same replacement, nothing added when the
 * key is absent. Added and upserted attributes are not judged by the
 * edit's keyset or value rules (they are the operator's own constants) and
 * are written after the list's other attributes; a resource or scope the
 * input leaves out is written to hold them. key and value must be
 * UTF-8 (else the call fails with SF_FILTER), key not empty. */
typedef struct sf_otlp_insert {
    const char *key;
    const char *value;
    bool upsert;
    bool update;                /* replace only: as upsert, but never added */
} sf_otlp_insert;

/* What keep_metric_fn says of a metric. */
enum {
    SF_OTLP_METRIC_NOMEM = -1,  /* it could not judge for want of memory */
    SF_OTLP_METRIC_DROP = 0,
    SF_OTLP_METRIC_KEEP = 1,
    SF_OTLP_METRIC_FAILED = 2   /* a condition could not be run (a match limit):
                                 * dropped, fail closed, and counted apart */
};

/* Scratch text an edit writes a new name into; the codec owns it. */
typedef struct sf_otlp_text {
    uint8_t *data;              /* sf_malloc'd, grown with sf_otlp_text_reserve */
    size_t len;
    size_t cap;
} sf_otlp_text;

/* Make room for `cap` bytes in t->data. SF_ENOMEM. */
sf_status sf_otlp_text_reserve(sf_otlp_text *t, size_t cap);

/* Attribute keys with a verdict each (keep or remove) and one verdict for
 * every other key: an allowlist, a denylist or both. Read-only once made,
 * shared by every thread. */
typedef struct sf_otlp_keyset sf_otlp_keyset;

/* A keyset of the n keys[i] (NUL-terminated, compared bytewise; they must
 * outlive the set; a key given twice keeps its first verdict) with verdicts
 * keep[i], and `keep_other` for the rest. SF_ENOMEM; SF_INVALID when a key
 * is not UTF-8 (no attribute could have it). */
sf_status sf_otlp_keyset_create(size_t n, const char *const *keys, const bool *keep,
                                bool keep_other, sf_otlp_keyset **out);
/* The same, with rules[i] (NULL: none) for the kept keys; the rules must
 * outlive the set. rules NULL: no key has one. */
sf_status sf_otlp_keyset_create_with(size_t n, const char *const *keys, const bool *keep,
                                     const sf_otlp_value_rule *const *rules, bool keep_other,
                                     sf_otlp_keyset **out);
void sf_otlp_keyset_destroy(sf_otlp_keyset *ks);    /* NULL ok */
/* Whether the attribute key[0, len) stays. */
bool sf_otlp_keyset_keeps(const sf_otlp_keyset *ks, const uint8_t *key, size_t len);

/* An edit: what a processor changes, asked by the codec while it walks. Its
 * functions are called on receiver threads, concurrently: they must treat
 * `ctx` as read-only. `state` is one pointer per sf_otlp_rewrite call (NULL
 * at the start) for per-call scratch; `release` frees it at the end. */
typedef struct sf_otlp_edit {
    void *ctx;
    const sf_otlp_keyset *keys[SF_OTLP_CTX_COUNT]; /* per context, or NULL: not filtered */
    unsigned rename;            /* SF_OTLP_CTX_BITs whose names (span, span event) go through rename */
    unsigned clear_trace_state; /* ... whose trace_state is cleared (span, link) */
    bool clear_status_message;
    bool scalar_values_only;    /* a kept attribute holding a kvlist, bytes or a nested
                                 * array is removed like one not kept */
    bool single_values_only;    /* one value per kept key: an array is removed too (and
                                 * a governed log body holding one is dropped) */
    /* The new name for in[0, len) (valid UTF-8) of context c, written into
     * *out (out->len). SF_OK; any error fails the request (fail closed). */
    sf_status (*rename_fn)(const void *ctx, void **state, sf_otlp_ctx c, const uint8_t *in,
                           size_t len, sf_otlp_text *out);
    void (*release)(const void *ctx, void *state);
    /* The fields past the names, trace_state and status message that the
     * edit governs (SF_OTLP_FIELD_BITs): entity_refs is cleared, the
     * strings (scope name and version, the schema_urls) go through
     * field_fn, which writes what leaves into *out ("" clears). An absent
     * field is not asked about. */
    unsigned fields;
    sf_status (*field_fn)(const void *ctx, void **state, sf_otlp_field f, const uint8_t *in,
                          size_t len, sf_otlp_text *out);
    /* Attribute lists keep the first entry of a key; later ones are removed. */
    bool one_value_per_key;
    /* An attribute string value (or array element) longer than this is
     * removed like a value failing its rule; 0: no bound. */
    size_t max_string_length;
    /* SF_OTLP_STR_REGEX: whether `regex` matches all of s[0, n). */
    bool (*match_fn)(const void *ctx, void **state, const void *regex, const uint8_t *s,
                     size_t n);
    /* Pseudonyms (rules with `pseudonym`): a string into out[0, *out_len)
     * (at most 64 bytes), an int into *out_int. false: the value is removed. */
    bool (*pseudonym_fn)(const void *ctx, void **state, const uint8_t *in, size_t len,
                         uint8_t *out, size_t *out_len);
    bool (*pseudonym_int_fn)(const void *ctx, void **state, int64_t in, int64_t *out_int);
    /* Logs: when the edit governs SF_OTLP_FIELD_LOG_BODY (in `fields`), a
     * log record's body leaves only when it passes this rule (the
     * attributes' value-rule machinery, max_string_length included; a
     * pseudonym rule replaces a string or int body); NULL: every body is
     * dropped. Dropped bodies are counted (stats.dropped_bodies). */
    const sf_otlp_value_rule *body_rule;
    /* Metrics: when the edit governs SF_OTLP_FIELD_EXEMPLARS, exemplars are
     * dropped (counted: stats.dropped_exemplars) unless this is set; kept
     * ones keep their trace and span ids (checked as ids) and their
     * filtered_attributes pass the DATAPOINT keyset. */
    bool keep_exemplars;
    /* Metrics: whether the metric named name[0, len) (the name a decoder
     * sees: "" when absent, the last when given twice; valid UTF-8) leaves:
     * an sf_otlp_metric_verdict; NULL: every metric does. One that does not
     * leaves with nothing of it, its points read and checked all the same
     * and counted in stats.filtered_items, not in stats.spans (the `filter`
     * processor). SF_OTLP_METRIC_NOMEM fails the pass with SF_ENOMEM. */
    int (*keep_metric_fn)(const void *ctx, void **state, const uint8_t *name, size_t len);
    /* Attributes added per context (n_inserts[c] of inserts[c]): see
     * sf_otlp_insert. A message of a context with inserts is written by the
     * codec's general walk (slower than its streaming one). */
    size_t n_inserts[SF_OTLP_CTX_COUNT];
    const sf_otlp_insert *inserts[SF_OTLP_CTX_COUNT];
    /* Per governed repeated field (span.events, span.links, a request's
     * resource_spans, a ResourceSpans' scope_spans): at most this many
     * occurrences in one message leave, 0: any number; for SPANS, at most
     * this many spans in the request. The rest are read and checked, not
     * written, added to the message's dropped count for that field when it
     * has one (Span.dropped_events_count, ...) and counted in stats.capped;
     * the spans they held in stats.capped_items. */
    uint32_t cap[SF_OTLP_FIELD_COUNT];
    /* Trace and span ids (spans, their parents and links, log records,
     * exemplars) leave as this makes them: into out[0, len) (len 16 or 8, the
     * id's) a pseudonym of in[0, len), never all zero, the same for the
     * same input on every call. NULL: ids leave as they came. All-zero ids
     * (invalid) are not asked about; false fails the pass (SF_FILTER). */
    bool (*id_fn)(const void *ctx, void **state, const uint8_t *in, size_t len, uint8_t *out);
    /* Optional, with id_fn: what id_fn makes of n ids at once, out[i][0,
     * lens[i]) for in[i][0, lens[i]) (each 16 or 8; none all zero), where
     * that costs less than n calls. The codec asks it about the ids of the
     * spans ahead in a traces request with the one it needs; NULL: one
     * id_fn call an id. */
    bool (*ids_fn)(const void *ctx, void **state, const uint8_t *const *in, const uint8_t *lens,
                   size_t n, uint8_t (*out)[16]);
    /* Metrics: histogram points (HistogramDataPoint) hold numbers that are
     * numbers, or are dropped (read and checked, not written) and counted
     * in stats.dropped_points: explicit_bounds finite and strictly
     * increasing, one bucket count more than bounds (or neither), counts
     * summing to `count`; and, for a metric named in bounds[0, n_bounds),
     * explicit_bounds exactly that set (packed bytes chosen to spell text
     * do not fit it). */
    bool check_histograms;
    size_t n_bounds;
    const sf_otlp_bounds *bounds;
} sf_otlp_edit;

/* Attributes an edit removed, by context and key, for drift reports: a
 * key the context's keyset lists (the config named it) by that keyset's
 * own string, any other as "other" (key NULL): what a client chose never
 * reaches a log line or a metric label. */
#define SF_OTLP_DRIFT_MAX 16
typedef struct sf_otlp_drift {
    uint8_t ctx;                /* sf_otlp_ctx */
    bool failed_rule;           /* kept key, value failed its rule; else key not kept */
    const char *key;            /* the keyset's key (as given to keyset_create), NULL: other */
    uint32_t count;
} sf_otlp_drift;

/* What one pass saw. */
typedef struct sf_otlp_stats {
    size_t spans;               /* items of the request's signal: spans, log records or
                                 * metric data points (on error: seen before it) */
    uint64_t removed_attributes; /* attributes the edit removed */
    uint64_t renamed;           /* names the edit changed */
    uint64_t failed_values;     /* of removed_attributes: a kept key's value failed its rule */
    uint64_t duplicate_keys;    /* of removed_attributes: a key's second and later entries */
    uint64_t pseudonyms;        /* values replaced by their pseudonym */
    size_t n_drift;             /* removals by context and key, the first SF_OTLP_DRIFT_MAX */
    sf_otlp_drift drift[SF_OTLP_DRIFT_MAX];
    uint64_t dropped_bodies;    /* log bodies the edit's body rule dropped */
    uint64_t dropped_exemplars; /* exemplars the edit dropped */
    size_t filtered_items;      /* items of metrics keep_metric_fn dropped (not in spans) */
    size_t filter_failed_items; /* ... of them, of metrics it answered FAILED */
    uint64_t inserted;          /* attributes the edit's inserts added or upserted */
    uint64_t capped[SF_OTLP_FIELD_COUNT]; /* occurrences past the edit's cap, by field */
    size_t capped_items;        /* spans in them (not in spans) */
    uint64_t pseudonymized_ids; /* ids id_fn replaced */
    size_t dropped_points;      /* histogram points check_histograms dropped (not in spans) */
    uint64_t dropped_fields[SF_OTLP_MSG_COUNT]; /* unknown/obsolete fields, by message */
    const char *error;          /* on SF_INVALID: what was wrong (static text) */
} sf_otlp_stats;

/* Validate in[0, len), apply `edit` (NULL: none) and write the canonical
 * request into *out (one reference, the caller's; out NULL: validate and
 * count only). AnyValue arrays/kvlists nested deeper than max_depth, and
 * merges of repeated singular messages whose copies would exceed the
 * request's size twice over, are refused.
 * SF_INVALID when the bytes are not a request whose meaning every decoder
 * agrees on: truncated; a tag longer than 5 bytes or field number 0; wire
 * types 6 and 7, unbalanced groups; a known field with another wire type; a
 * varint longer than 10 bytes or past 64 bits; a uint32 past 2^32-1, an
 * int32 or enum not a sign-extended 32-bit value, a bool other than 0 or 1;
 * a string that is not UTF-8; a trace id not 0 or 16 bytes, a span id not 0
 * or 8. SF_ENOMEM; SF_FILTER when the edit failed. `stats` may be NULL.
 * Thread-safe. */
sf_status sf_otlp_rewrite(const uint8_t *in, size_t len, unsigned max_depth,
                          const sf_otlp_edit *edit, struct sf_buf **out, sf_otlp_stats *stats);

/* sf_otlp_rewrite without output or edit: SF_OK when valid; *spans the spans
 * seen (all of them when valid). */
sf_status sf_otlp_scan(const uint8_t *in, size_t len, unsigned max_depth, size_t *spans);

/* The same for a request of signal `s`: an ExportTraceServiceRequest
 * (exactly sf_otlp_rewrite / sf_otlp_scan), an ExportLogsServiceRequest or
 * an ExportMetricsServiceRequest. stats->spans and *items count the
 * signal's items: spans, log records, metric data points (the data_points
 * of gauge, sum, histogram, exponential_histogram and summary). Besides the
 * refusals above: a sint32 past 32 bits; a packed repeated field whose
 * payload is not whole elements. SF_UNSUPPORTED for a signal out of range.
 * The edit's inserts (n_inserts) are applied here; an insert that is not a
 * UTF-8 key and value fails the call with SF_FILTER. */
sf_status sf_otlp_rewrite_signal(sf_signal s, const uint8_t *in, size_t len, unsigned max_depth,
                                 const sf_otlp_edit *edit, struct sf_buf **out,
                                 sf_otlp_stats *stats);
sf_status sf_otlp_scan_signal(sf_signal s, const uint8_t *in, size_t len, unsigned max_depth,
                              size_t *items);

/* Whether p[0, n) is UTF-8 as proto3 requires of strings (no overlongs,
 * surrogates or code points past U+10FFFF): the codec's own check. */
bool sf_otlp_utf8_valid(const uint8_t *p, size_t n);

/* The traces request in[0, len) without the ResourceSpans `keep` refuses:
 * keep(ctx, rs, n) is asked of each top-level resource_spans entry, `rs`
 * being the entry as it is on the wire (its tag, length and payload: a
 * request of its own); the entries it refuses are left out of `out` (at
 * least `len` bytes, the caller's), everything else is copied as it is.
 * Returns how many entries were left out, *out_len then the bytes written;
 * 0 when none was, or when the top level does not read as fields (the
 * codec refuses such a request later, whole). Thread-safe. */
size_t sf_otlp_drop_resources(const uint8_t *in, size_t len,
                              bool (*keep)(void *ctx, const uint8_t *rs, size_t n), void *ctx,
                              uint8_t *out, size_t *out_len);

/* Spans in the valid request data[0, len) whose resource carries all `n`
 * attributes keys[i] = values[i] (string values, compared bytewise; n == 0
 * matches every resource), with protobuf merge semantics. 0 for anything
 * invalid. */
size_t sf_otlp_count_matching_spans(const uint8_t *data, size_t len, size_t n,
                                    const char *const *keys, const char *const *values);

#endif

/* receivers/prometheus/prom_parse.h: the exposition parser: the bytes of
 * one scrape (Prometheus text 0.0.4 or OpenMetrics 1.0.0 text) into
 * metric families and samples, a pure function of its input and limits
 * (no clock, no I/O, no global state), so it is fuzzed and compared with
 * prometheus_client's parser as it is.
 *
 * The text is the engine's: every limit is checked while reading, and the
 * first one crossed ends the parse with its reason (the scrape is then
 * refused whole, as Prometheus refuses it). Everything the result points
 * to lives in the caller's arena. */
#ifndef SF_PROM_PARSE_H
#define SF_PROM_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_arena.h"

/* X(ENUM, "text" as in # TYPE) */
#define SF_PROM_TYPE_MAP(X)                  \
    X(UNTYPED, "untyped")                    \
    X(COUNTER, "counter")                    \
    X(GAUGE, "gauge")                        \
    X(HISTOGRAM, "histogram")                \
    X(GAUGEHISTOGRAM, "gaugehistogram")      \
    X(SUMMARY, "summary")                    \
    X(INFO, "info")                          \
    X(STATESET, "stateset")                  \
    X(UNKNOWN, "unknown")

typedef enum sf_prom_type {
#define SF_PROM_TYPE_ENUM(e, t) SF_PROM_##e,
    SF_PROM_TYPE_MAP(SF_PROM_TYPE_ENUM)
#undef SF_PROM_TYPE_ENUM
    SF_PROM_TYPE_COUNT
} sf_prom_type;

const char *sf_prom_type_name(sf_prom_type t);

typedef enum sf_prom_format {
    SF_PROM_TEXT,               /* text/plain; version=0.0.4 */
    SF_PROM_OPENMETRICS         /* application/openmetrics-text; version=1.0.0 */
} sf_prom_format;

/* Why a parse (or a scrape) was refused: X(ENUM, reason label). The
 * labels are the `reason` of spanfence_receiver_prometheus_failed_scrapes. */
#define SF_PROM_ERR_MAP(X)                             \
    X(OK, "ok")                                        \
    X(MALFORMED, "malformed")                          \
    X(LINE_TOO_LONG, "line_too_long")                  \
    X(SAMPLE_LIMIT, "sample_limit")                    \
    X(LABEL_LIMIT, "label_limit")                      \
    X(LABEL_NAME_LENGTH, "label_name_length_limit")    \
    X(LABEL_VALUE_LENGTH, "label_value_length_limit")  \
    X(NO_MEMORY, "memory")                             \
    X(BODY_TOO_LARGE, "body_size_limit")               \
    X(TIMEOUT, "timeout")                              \
    X(HTTP_STATUS, "http_status")                      \
    X(CONNECT, "connect")                              \
    X(TRANSPORT, "transport")

typedef enum sf_prom_err {
#define SF_PROM_ERR_ENUM(e, l) SF_PROM_ERR_##e,
    SF_PROM_ERR_MAP(SF_PROM_ERR_ENUM)
#undef SF_PROM_ERR_ENUM
    SF_PROM_ERR_COUNT
} sf_prom_err;

const char *sf_prom_err_label(sf_prom_err e);

typedef struct sf_prom_limits {
    size_t max_line;                /* bytes of one line, newline excluded */
    size_t sample_limit;            /* samples in one scrape; 0: none */
    size_t label_limit;             /* labels of one sample; 0: none */
    size_t label_name_length;       /* bytes; 0: none */
    size_t label_value_length;      /* bytes, after unescaping; 0: none */
} sf_prom_limits;

typedef struct sf_prom_label {
    const char *name;               /* NUL-terminated, valid label name */
    const char *value;              /* NUL-terminated UTF-8 without NUL */
    size_t value_len;
} sf_prom_label;

typedef struct sf_prom_sample {
    const char *name;               /* the sample's name: "foo_bucket" */
    uint32_t family;                /* index into families */
    uint16_t n_labels;              /* sorted by name, unique */
    bool has_ts;
    bool duplicate;                 /* a series seen earlier in the scrape: dropped */
    sf_prom_label *labels;
    double value;
    int64_t ts_ms;                  /* with has_ts: milliseconds since the epoch */
} sf_prom_sample;

typedef struct sf_prom_family {
    const char *name;               /* from # TYPE, or the sample's name when untyped */
    const char *help;               /* unescaped; "" when none */
    const char *unit;               /* OpenMetrics # UNIT; "" when none */
    sf_prom_type type;
    size_t n_samples;               /* samples of this family (duplicates included) */
} sf_prom_family;

typedef struct sf_prom_result {
    sf_prom_family *families;
    size_t n_families;
    sf_prom_sample *samples;        /* in the order of the text */
    size_t n_samples;
    size_t duplicates;              /* samples marked duplicate */
    size_t exemplars;               /* OpenMetrics exemplars read and ignored */
    sf_prom_err err;                /* SF_PROM_ERR_OK, or why the parse stopped */
    size_t err_line;                /* 1-based line of the error */
    char err_text[160];             /* "line 12: ..." for the log (no label values) */
} sf_prom_result;

/* Parse `len` bytes of `format` with `limits` into `out`, every string and
 * array in `arena`. Returns out->err: SF_PROM_ERR_OK with out filled, or
 * the first problem (out->families/samples then hold what was read before
 * it; callers refuse the scrape). Never reads past data + len; `data` need
 * not be NUL-terminated. */
sf_prom_err sf_prom_parse(const uint8_t *data, size_t len, sf_prom_format format,
                          const sf_prom_limits *limits, sf_arena *arena, sf_prom_result *out);

/* The format a Content-Type names: OpenMetrics for
 * application/openmetrics-text, the text format for anything else (as
 * Prometheus falls back). */
sf_prom_format sf_prom_format_of(const char *content_type);

/* The family name the sample of `name` belongs to when `family` has `type`:
 * whether `name` is `family` or family plus a suffix that type allows
 * (_bucket/_sum/_count/_created for histograms, _total/_created for
 * counters...). */
bool sf_prom_name_in_family(const char *name, const char *family, sf_prom_type type);

#endif

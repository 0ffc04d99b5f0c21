/* pipeline/extensions/trace_control/trace_control.h: the `trace_control`
 * extension (operator trace-level windows on LLM engines) as the rest of
 * spanfence sees it: its config, and the pieces `spanfence trace-level`
 * shares with the collector (checks, audit records, the engine request,
 * the control-socket client and a tiny strict JSON reader).
 *
 * Protocol on the control socket (AF_UNIX, SOCK_STREAM, one request per
 * connection, one JSON object per line each way):
 *   {"op":"set","target":"r1","level":3,"for_ms":600000,"reason":"..."}
 *   {"op":"reset","target":"r1"}
 *   {"op":"status"}
 * answered by {"ok":true|false,"message":"...",...}. */
#ifndef SF_TRACE_CONTROL_H
#define SF_TRACE_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_component.h"

/* SGLang's /set_trace_level takes GET or POST with the level as the query
 * parameter `level` (an integer >= 0; a body is not read), and answers 200
 * `success`, 400 on a missing or bad level, 401 without the API key. */
enum { SF_TC_GET = 0, SF_TC_POST };

#define SF_TC_MAX_REASON 256
#define SF_TC_MAX_REQUEST 4096
#define SF_TC_MAX_MATCH 8           /* attributes in a target's match */
#define SF_TC_MAX_MATCH_LEN 256     /* bytes of one attribute name or value */

#define SF_TC_MAX_DROP_PATTERNS 8

/* Where a target's engine writes its log, and what in it says the engine
 * dropped spans. The engine's own words are read through the core's log
 * tap (the receiver's requests as it made them, before any processor), only
 * while a window of the target is open or in its grace period; the text
 * never leaves the extension, only counts do. */
typedef struct sf_tc_engine_log {
    char *receiver;             /* id of a receiver of a logs pipeline; NULL: none */
    sf_strmap match;            /* log record (or resource) attributes, string values, that
                                   mark the engine's records (_SYSTEMD_UNIT: sglang.service);
                                   n == 0: every record of the receiver */
    size_t n_drops;
    char *drops[SF_TC_MAX_DROP_PATTERNS];  /* PCRE2 patterns of drop messages; a named group
                                   `ops` is the number dropped; default: SGLang's two */
} sf_tc_engine_log;

/* SGLang's drop messages: the OpenTelemetry Python SDK's BatchSpanProcessor
 * (said once, of unknown size), and SGLANG_TRACE_ASYNC=1's ZMQ buffer
 * (observability/trace_async.py, with the number of trace ops dropped). */
#define SF_TC_DROP_SDK_QUEUE "Queue is full, likely spans will be dropped"
#define SF_TC_DROP_ZMQ "ZMQ send buffer full, dropping (?<ops>[0-9]+) trace ops for "

/* The engine's latency histograms, as a prometheus receiver scrapes them
 * (trace_control_latency.c): the points of `metric[]` whose resource's
 * service.name is `job`, bucket counts summed over their series. */
enum { SF_TC_LAT_TTFT, SF_TC_LAT_ITL, SF_TC_LAT_COUNT };
#define SF_TC_LAT_TTFT_METRIC "sglang:time_to_first_token_seconds"
#define SF_TC_LAT_ITL_METRIC "sglang:inter_token_latency_seconds"
#define SF_TC_MAX_BASELINE_SCRAPES 100

typedef struct sf_tc_engine_metrics {
    char *receiver;             /* id of a prometheus receiver of a metrics pipeline; NULL: none */
    char *job;                  /* its scrape job (the points' service.name) */
    char *metric[SF_TC_LAT_COUNT];  /* histogram names; default SGLang's */
    int64_t baseline_scrapes;   /* scrapes before a window opens that make its baseline */
} sf_tc_engine_metrics;

/* auto_revert.max_latency_increase: per metric, how far its p50 or p99
 * (bucket-bounded) may rise above the baseline: `ratio` times it ("2x"),
 * or `add` seconds more ("+50ms"). */
typedef struct sf_tc_latency_limit {
    bool set;
    bool is_ratio;
    double value;               /* the ratio, or seconds */
} sf_tc_latency_limit;

typedef struct sf_tc_latency_limits {
    bool present;
    sf_tc_latency_limit m[SF_TC_LAT_COUNT];
    int64_t min_samples;        /* before and during: fewer never end a window */
} sf_tc_latency_limits;

typedef struct sf_tc_target {
    char *id;                   /* replica id: "r1" */
    char *endpoint;             /* the engine's trace-level URL */
    int method;                 /* SF_TC_GET/POST; the level is always ?field=N */
    char *field;                /* query parameter name ("level") */
    sf_strmap headers;          /* sent with every request (Authorization: Bearer
                                   ${env:...}); values never logged or audited */
    char *ca_file, *cert_file, *key_file;   /* https: TLS (NULL: system CAs, no cert) */
    bool insecure_skip_verify;
    sf_strmap match;            /* resource attributes (string values) that mark this
                                   engine's spans: a window's closing record then also
                                   counts the spans accepted/refused from it; n == 0: none */
    sf_tc_engine_metrics engine_metrics;
    sf_tc_engine_log engine_log;
    int out_of_band;            /* SF_TC_OOB_*: spans (by match) while the target rests */
    int64_t arrival_timeout;    /* ms after a window opens without a span from the target
                                   before its arrival is `none` (warned, audited) */
} sf_tc_target;

/* out_of_band: count (counted, recorded, exported: the default) or drop
 * (counted, recorded, and kept in the VM: dropped by the receivers with
 * reason out_of_band; needs a match). */
enum { SF_TC_OOB_COUNT = 0, SF_TC_OOB_DROP };

typedef struct sf_tc_targets {
    size_t n;
    sf_tc_target *v;
} sf_tc_targets;

typedef struct sf_tc_levels {
    size_t n;
    int64_t *v;
} sf_tc_levels;

typedef struct sf_tc_retry {
    bool present;
    int64_t initial_interval;   /* ms */
    int64_t max_interval;       /* ms */
} sf_tc_retry;

typedef struct sf_tc_auto_revert {
    bool present;
    bool enabled;
    int64_t max_lost_spans;     /* a window ends early when more are lost */
    double max_loss_ratio;      /* ... or lost / received passes this */
    int64_t check_interval;     /* ms between checks while a window is open */
    sf_tc_latency_limits max_latency_increase;  /* the latency guard (engine_metrics) */
} sf_tc_auto_revert;

typedef struct sf_tc_markers {
    bool present;
    bool enabled;               /* one marker span per window into the traces pipeline */
    char *pipeline;             /* that pipeline's id; NULL: every traces pipeline */
} sf_tc_markers;

typedef struct sf_tc_config {
    char *socket;               /* control socket path */
    char *socket_group;         /* group allowed to use it (mode 0660), or NULL: 0600 */
    char *audit_log;            /* append-only JSON lines */
    sf_tc_levels levels;        /* allowed levels */
    int64_t resting_level;
    int64_t max_window;         /* ms */
    int64_t request_timeout;    /* ms, one engine request */
    int64_t shutdown_timeout;   /* ms spent resetting open windows at shutdown */
    int64_t enforce_interval;   /* ms between resting-level rounds; 0: at start only */
    int64_t grace_period;       /* ms after a window's end before its closing record */
    int64_t reset_timeout;      /* ms a reset is retried before it is recorded failed */
    sf_tc_retry retry;
    sf_tc_auto_revert auto_revert;
    sf_tc_markers markers;
    sf_tc_targets targets;
} sf_tc_config;

extern const sf_config_row sf_tc_config_map[];
/* One key of a mapping read by sf_tc_parse_map(): keys[w] is its name,
 * `sub` its path ("path.key") for errors. */
typedef sf_status (*sf_tc_key_fn)(sf_cfg_ctx *ctx, const sf_node *v, const char *sub, size_t w,
                                  void *arg);
/* The one loop over a target's mappings (the target, tls, engine_log,
 * engine_metrics; trace_control_keys.c): `v` must be a mapping and each of
 * its keys one of keys[0, n_keys), both said in the error naming the keys;
 * each key goes to `fn`. SF_ENOMEM at once; otherwise every key is read
 * and SF_CONFIG comes back when any failed. */
sf_status sf_tc_parse_map(sf_cfg_ctx *ctx, const sf_node *v, const char *path,
                          const char *const *keys, size_t n_keys, sf_tc_key_fn fn, void *arg);
/* trace_control_latency_config.c: `engine_metrics` of a target, and
 * auto_revert's `max_latency_increase` (CUSTOM row); their cross-checks. */
sf_status sf_tc_parse_engine_metrics(sf_cfg_ctx *ctx, const sf_node *v, const char *path,
                                     sf_tc_engine_metrics *em);
sf_status sf_tc_parse_latency_limits(sf_cfg_ctx *ctx, const sf_node *node, void *field);
sf_status sf_tc_check_latency(sf_cfg_ctx *ctx, const sf_tc_config *c);
/* "2x" or "1.5x" (ratio), "+50ms", "+0.2s" (seconds added) into lim;
 * false for anything else. */
bool sf_tc_latency_limit_parse(const char *s, sf_tc_latency_limit *lim);
sf_status sf_tc_check(sf_cfg_ctx *ctx, void *config);
extern const sf_component_type sf_trace_control_extension_type;

/* The trace_control config of a loaded config (the first extension of that
 * type listed in service.extensions, else the first defined), or NULL. */
const sf_tc_config *sf_tc_config_of(const sf_config *cfg);

/* The target named `id`, or NULL. */
const sf_tc_target *sf_tc_find_target(const sf_tc_config *c, const char *id);

/* Check a set request against the config: target known, level allowed and
 * not the resting level, 0 < for_ms <= max_window. SF_OK, or SF_INVALID
 * with the reason in err (lowercase, subjects quoted). */
sf_status sf_tc_check_set(const sf_tc_config *c, const char *target, int64_t level,
                          int64_t for_ms, char *err, size_t err_size);

/* Append one record (a JSON object, no newline) to the audit log `path`
 * (created 0600, never through a symbolic link), then fsync. SF_IO on
 * failure, with nothing of the record left in the file (a short write is
 * cut off again): every line of the log is one whole record. */
sf_status sf_tc_audit_append(const char *path, const char *record);

/* Audit records are built with json-c (which escapes every string):
 * {"event":E,"window":W,"target":T} (no "window" when W is NULL), or NULL
 * when out of memory; members are added with json_object_object_add. */
struct json_object;
struct json_object *sf_tc_record_new(const char *event, const char *window, const char *target);
/* "key":"2026-01-02T03:04:05.678Z" */
void sf_tc_record_time(struct json_object *rec, const char *key, int64_t epoch_ms);
/* ,"status":N (when N != 0),"error":"..." of an engine's answer */
void sf_tc_record_answer(struct json_object *rec, long status, const char *detail);
/* The record as one line of text (sf_malloc'd), or NULL; puts rec either way. */
char *sf_tc_record_text(struct json_object *rec);

/* What an engine said to one request. */
typedef struct sf_tc_answer {
    long status;                /* HTTP status, 0 when there was no answer */
    char detail[384];           /* "the engine answered 401: <body excerpt>", "connection refused" */
} sf_tc_answer;

/* Ask the engine of `t` to use `level` (libcurl, bounded by timeout_ms),
 * with the target's headers (never logged) and TLS settings. SF_OK on a
 * 2xx answer; SF_RETRY when the engine did not answer, or said 5xx, 408 or
 * 429; SF_PERMANENT for any other answer (400, 401, 403, 404, ...) and for
 * TLS failures (certificates), which a retry cannot mend. */
sf_status sf_tc_engine_set(const sf_tc_target *t, int64_t level, int64_t timeout_ms,
                           sf_tc_answer *ans);

/* Send one request line to the control socket and read the answer line
 * (sf_malloc'd into *reply). SF_IO when the socket cannot be reached. */
sf_status sf_tc_client_request(const char *socket_path, const char *request, char **reply,
                               char *err, size_t err_size);

/* ---- a tiny strict JSON reader for one flat object ----------------------- */

/* Whether json[0..len) is exactly one well-formed JSON object (optionally
 * followed by whitespace), nested no deeper than 8. */
bool sf_tc_json_valid(const char *json, size_t len);
/* A top-level string member, unescaped into out. SF_OK; SF_INVALID when
 * absent, not a string, or longer than out_size - 1. */
sf_status sf_tc_json_str(const char *json, size_t len, const char *key, char *out,
                         size_t out_size);
/* A top-level integer member. SF_OK; SF_INVALID when absent or not an integer. */
sf_status sf_tc_json_int(const char *json, size_t len, const char *key, int64_t *out);
/* A top-level true/false member. SF_OK; SF_INVALID when absent or not a boolean. */
sf_status sf_tc_json_bool(const char *json, size_t len, const char *key, bool *out);


#endif

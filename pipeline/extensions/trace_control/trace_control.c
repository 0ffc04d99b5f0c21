/* pipeline/extensions/trace_control/trace_control.c: the `trace_control`
 * extension: operator trace-level windows on LLM engines, asked for over a
 * local unix socket, recorded in an append-only audit log, announced in the
 * capture itself (one marker span per window), and always closed: on time,
 * on request, when the capture is losing spans, on shutdown, or at the next
 * start after a crash. Between windows it holds every engine at the resting
 * level.
 *
 * DESIGN
 * - One thread owns everything here: the listening socket, every target's
 *   state and the audit log writes. It polls the socket and a wake-up pipe
 *   with a timeout equal to the next deadline (a window's end, a loss
 *   check, a grace period's end, a retry, an enforcement round). A client
 *   is served to completion (read one line, at most one engine request,
 *   answer) before the next, so requests need no locks. An engine request
 *   blocks the loop for at most request_timeout.
 * - A target is IDLE, OPEN (level raised until `end`), RESETTING (window
 *   ended, resting level not confirmed yet: retried with doubling backoff
 *   for at most reset_timeout) or FAILED (the engine refused the reset, or
 *   did not answer within reset_timeout: recorded `reset_failed`; later
 *   windows may open, enforcement and `reset` try again). Engine answers:
 *   2xx done; 5xx, 408, 429 and no answer retried; any other (400, 401,
 *   403, 404) permanent, reported at once with the status and body excerpt.
 * - Enforcement: at start and every enforce_interval, every target that is
 *   IDLE or FAILED is set to the resting level (an engine restarted at its
 *   own default level is brought back). The audit log gets a record when
 *   what is known changes (`enforce` when the level is taken after it was
 *   unknown or other, `enforce_failed` when the engine stops taking it),
 *   not every round.
 * - A window's end (expired, reset, loss, shutdown) resets the engine at
 *   once; its closing record waits grace_period, so spans of requests
 *   admitted during the window still count (0, and at shutdown: at once).
 *   With auto_revert, an open window whose losses (collector-wide refused,
 *   dropped, failed; and the target's own refused spans when it has a
 *   `match`) pass max_lost_spans or max_loss_ratio ends early (cause
 *   "loss", the reason written).
 * - Markers: when a window closes, one span (service.name spanfence,
 *   covering the window, with its target, level, reason, uid, counts and
 *   whether the capture is complete) goes to the traces pipeline after its
 *   processors (sf_component_inject): through the codec and the exporters
 *   like any batch, so whoever reads the capture sees it. While the
 *   exporters do not run (a crashed window recovered at start) it waits.
 * - Audit records, in order: "open" (before the engine is asked), "reset"
 *   or "reset_failed" (the engine's answer to the resting level), "close"
 *   (after the grace period: cause, counts, complete). A window whose
 *   "open" has no "reset", "reset_failed" or refused "close" was left open
 *   by a crash: start() resets it.
 * - Per-engine counts: a target with a `match` (resource attributes) gets
 *   its spans counted while its window is open or closing, by a span tap
 *   the service calls on receiver threads after every emitted batch. The
 *   tap returns at once unless some matching window counts (`counting`,
 *   atomic); it reads only atomics and the read-only config, and adds to
 *   per-target monotonic atomic counters, of which the window keeps the
 *   values at its start: no locks on the data path.
 * - The audit record is written before the engine is asked: if it cannot
 *   be written, nothing is changed (fail closed). Header values (API keys)
 *   are never written anywhere. */
#define _GNU_SOURCE
#include "trace_control.h"
#include "sf_time.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define TC_RECORD_MAX 32768       /* a closing record with the largest match fits */
#define TC_LINE_MAX 16384
#define TC_MARKER_TRIES 600       /* a marker waits for the exporters at most 600 x 100 ms */
#define TC_MARKER_WAIT 100

/* Rows of tc_metric_rows: this extension's values in sf_counters. */
enum { TC_ENGINE_FAILURES, TC_OPEN_WINDOWS, TC_AUDIT_PENDING };

typedef enum tc_state { TC_IDLE, TC_OPEN, TC_RESETTING, TC_FAILED } tc_state;

/* recorded: what the audit log last said of a target's level in this run */
enum { TC_REC_NONE = -2, TC_REC_UNKNOWN = -1 };

typedef struct tc_window {
    const sf_tc_target *target;
    tc_state state;
    char id[128];                   /* "<target>-<start epoch ms>" (ids are at most 64) */
    int64_t level;
    unsigned uid;
    char reason[SF_TC_MAX_REASON * 6 + 1];  /* JSON-escaped */
    int64_t start_wall, end_wall;   /* epoch ms; end_wall: planned */
    int64_t end_mono;               /* CLOCK_MONOTONIC ms */
    sf_totals at_start;
    /* targets with a match: spans from this engine, since start (written by
     * the tap on receiver threads), and their values when the window opened */
    _Atomic bool counting;
    _Atomic uint64_t from_target[2];    /* [0] accepted, [1] refused */
    uint64_t from_target_at_start[2];
    /* RESETTING */
    int64_t next_try_mono, delay, reset_since_mono;
    unsigned attempts;
    char last_error[sizeof(((sf_tc_answer *)0)->detail)];   /* the engine's last refusal */
    long last_status;
    /* ended, closing record not written yet (grace period) */
    bool closing;
    int64_t close_due_mono, ended_wall, grace_ms;
    char cause[16];
    char note[512];                 /* why it ended early, or why the set failed */
    /* a marker span waiting for the exporters to run */
    uint8_t *marker;
    size_t marker_len;
    int marker_tries;
    int64_t marker_next_mono;
    /* the level the engine last took (metrics thread reads these) */
    _Atomic int64_t level_now;      /* -1: not known */
    _Atomic int64_t level_set_wall; /* epoch ms, 0: never */
    int64_t recorded;               /* TC_REC_* or the level last recorded */
    bool enforce_due;
    /* taken over from the instance that ran before a reload: start() does
     * not recover this target from the audit log */
    bool carried;
} tc_window;

typedef struct tc_ctx {
    sf_component *self;
    const sf_tc_config *cfg;
    tc_window *w;                   /* one per target, same order */
    int listen_fd;
    int wake[2];
    pthread_t thread;
    bool thread_started;
    bool socket_bound;
    _Atomic bool stop;
    _Atomic unsigned counting;      /* windows whose spans the tap counts */
    bool suspending;                /* reload: stop without closing windows */
    bool resumed;                   /* took over a suspended instance */
    bool stopping;                  /* close_all: no grace */
    int64_t next_enforce_mono, next_loss_mono;
    /* Audit records not written yet, oldest first: retried with backoff
     * (and at shutdown until shutdown_timeout) and kept in order; while any
     * is pending no window opens. */
    char **pending;
    size_t n_pending;
    int64_t audit_retry_mono, audit_delay;
} tc_ctx;

static void format_left(int64_t ms, char *buf, size_t size)
{
    int64_t s = (ms + 999) / 1000;

    if (s < 0)
        s = 0;
    if (s >= 3600)
        snprintf(buf, size, "%" PRId64 "h%02" PRId64 "m%02" PRId64 "s", s / 3600, s / 60 % 60,
                 s % 60);
    else if (s >= 60)
        snprintf(buf, size, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
    else
        snprintf(buf, size, "%" PRId64 "s", s);
}

/* open_windows counts windows that are open or waiting for their reset. */
static void set_state(tc_ctx *x, tc_window *w, tc_state st)
{
    bool was = w->state == TC_OPEN || w->state == TC_RESETTING;
    bool is = st == TC_OPEN || st == TC_RESETTING;

    w->state = st;
    if (was != is)
        atomic_fetch_add(&sf_component_counters(x->self)->values[TC_OPEN_WINDOWS], is ? 1 : -1);
}

static void took_level(tc_window *w, int64_t level)
{
    atomic_store(&w->level_now, level);
    atomic_store(&w->level_set_wall, sf_wall_ms());
}

/* ---- spans from a target ------------------------------------------------------ */

/* Receiver threads, after every emitted batch (sf_span_tap_fn). */
static void tap(void *ctx, const uint8_t *raw, size_t len, size_t spans, bool accepted)
{
    tc_ctx *x = ctx;

    if (spans == 0 || atomic_load_explicit(&x->counting, memory_order_acquire) == 0)
        return;
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];
        const sf_strmap *m = &w->target->match;
        size_t n;

        if (m->n == 0 || !atomic_load_explicit(&w->counting, memory_order_acquire))
            continue;
        n = sf_otlp_count_matching_spans(raw, len, m->n, (const char *const *)m->keys,
                                         (const char *const *)m->values);
        if (n > 0)
            atomic_fetch_add_explicit(&w->from_target[accepted ? 0 : 1], n,
                                      memory_order_relaxed);
    }
}

/* Control thread: start counting the spans of w's target (when it has a
 * match) from now. */
static void count_start(tc_ctx *x, tc_window *w)
{
    if (w->target->match.n == 0 || atomic_load(&w->counting))
        return;
    for (int k = 0; k < 2; k++)
        w->from_target_at_start[k] = atomic_load(&w->from_target[k]);
    atomic_store(&w->counting, true);
    atomic_fetch_add(&x->counting, 1);
}

static void count_stop(tc_ctx *x, tc_window *w)
{
    if (!atomic_load(&w->counting))
        return;
    atomic_store(&w->counting, false);
    atomic_fetch_sub(&x->counting, 1);
}

/* What the collector (and the target, with a match) did since w opened. */
typedef struct tc_counts {
    uint64_t accepted, exported, refused, dropped, send_failed, enqueue_failed, lost;
    uint64_t from_target[2];
    sf_totals now;
} tc_counts;

static void window_counts(tc_ctx *x, const tc_window *w, tc_counts *c)
{
    memset(c, 0, sizeof(*c));
    sf_component_totals(x->self, &c->now);
    for (int r = 0; r < SF_REASON_COUNT; r++) {
        c->refused += c->now.refused[r] - w->at_start.refused[r];
        c->dropped += c->now.dropped[r] - w->at_start.dropped[r];
        c->send_failed += c->now.send_failed[r] - w->at_start.send_failed[r];
    }
    c->accepted = c->now.accepted - w->at_start.accepted;
    c->exported = c->now.exported - w->at_start.exported;
    c->enqueue_failed = c->now.enqueue_failed - w->at_start.enqueue_failed;
    /* A full queue refuses synchronously: its spans are in the receivers'
     * refused (queue_full) already, so enqueue_failed is not added again.
     * An exporter without a sending queue whose send failed counts the
     * spans as send_failed and the receiver refuses them with the same
     * reason (retries_exhausted, permanent_error): counted once. */
    c->lost = c->refused + c->dropped + c->send_failed -
              (c->now.refused[SF_REASON_RETRIES_EXHAUSTED] -
               w->at_start.refused[SF_REASON_RETRIES_EXHAUSTED]) -
              (c->now.refused[SF_REASON_PERMANENT_ERROR] -
               w->at_start.refused[SF_REASON_PERMANENT_ERROR]);
    for (int k = 0; k < 2; k++)
        c->from_target[k] = atomic_load(&w->from_target[k]) - w->from_target_at_start[k];
}

/* A capture is complete when the engine took the level, nothing was lost
 * and everything accepted has been exported (nothing is still queued). */
static bool complete(const tc_window *w, const tc_counts *c)
{
    return strncmp(w->cause, "set_", 4) != 0 && c->lost == 0 && c->exported == c->accepted &&
           (w->target->match.n == 0 || c->from_target[1] == 0);
}

/* ---- audit records ------------------------------------------------------------ */

static void add(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*len >= size)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

static void add_reasons(char *buf, size_t size, size_t *len, const char *name,
                        const uint64_t *now, const uint64_t *then)
{
    add(buf, size, len, ",\"%s\":{", name);
    for (int r = 0; r < SF_REASON_COUNT; r++)
        add(buf, size, len, "%s\"%s\":%" PRIu64, r ? "," : "", sf_reason_label((sf_reason)r),
            now[r] - then[r]);
    add(buf, size, len, "}");
}

/* ,"status":N,"error":"..." of an engine's answer (no header is in it). */
static void add_answer(char *buf, size_t size, size_t *len, long status, const char *detail)
{
    char esc[sizeof(((sf_tc_answer *)0)->detail) * 6 + 1];

    sf_json_escape(detail, esc, sizeof(esc));
    if (status != 0)
        add(buf, size, len, ",\"status\":%ld", status);
    add(buf, size, len, ",\"error\":\"%s\"", esc);
}

static void set_pending_gauge(tc_ctx *x)
{
    atomic_store(&sf_component_counters(x->self)->values[TC_AUDIT_PENDING], (int64_t)x->n_pending);
}

/* Write the pending records in order; SF_OK when none is left. */
static sf_status audit_flush(tc_ctx *x)
{
    size_t done = 0;

    while (done < x->n_pending &&
           sf_tc_audit_append(x->cfg->audit_log, x->pending[done]) == SF_OK)
        sf_free(x->pending[done++]);
    if (done > 0) {
        memmove(x->pending, x->pending + done, (x->n_pending - done) * sizeof(*x->pending));
        x->n_pending -= done;
        if (x->n_pending == 0 && x->audit_delay != 0)     /* after a failure */
            sf_info("trace_control: the audit log '%s' is written again; no record pending",
                    x->cfg->audit_log);
        if (x->n_pending == 0)
            x->audit_delay = 0;
    }
    set_pending_gauge(x);
    if (x->n_pending == 0)
        return SF_OK;
    if (x->audit_delay == 0)
        x->audit_delay = x->cfg->retry.initial_interval;
    else
        x->audit_delay = x->audit_delay * 2 > x->cfg->retry.max_interval
                             ? x->cfg->retry.max_interval : x->audit_delay * 2;
    x->audit_retry_mono = sf_now_ms() + x->audit_delay;
    return SF_IO;
}

/* Append `record` after the pending ones and write them all. When it cannot
 * be written now it stays pending (retried) and is logged whole, so the
 * record is in the collector's log whatever happens; SF_IO then. */
static sf_status audit(tc_ctx *x, const char *record)
{
    char **p = sf_realloc(x->pending, (x->n_pending + 1) * sizeof(*p));
    char *copy = sf_strdup(record);

    if (p != NULL)
        x->pending = p;
    if (p == NULL || copy == NULL) {
        sf_free(copy);
        sf_error("trace_control: audit record NOT written (out of memory): %s", record);
        return SF_ENOMEM;
    }
    x->pending[x->n_pending++] = copy;
    if (audit_flush(x) == SF_OK)
        return SF_OK;
    sf_error("trace_control: audit record not written yet (%zu pending, retried in %" PRId64
             " ms): %s", x->n_pending, x->audit_delay, record);
    return SF_IO;
}

static void free_pending(tc_ctx *x)
{
    for (size_t i = 0; i < x->n_pending; i++)
        sf_free(x->pending[i]);
    sf_free(x->pending);
    x->pending = NULL;
    x->n_pending = 0;
}

/* The "open" record is written at once or not at all: when it (or an
 * older pending record) cannot be written, nothing is changed. */
static sf_status audit_open(tc_ctx *x, const tc_window *w)
{
    char rec[TC_RECORD_MAX], t0[32], t1[32];

    sf_time_format_utc(w->start_wall, t0, sizeof(t0));
    sf_time_format_utc(w->end_wall, t1, sizeof(t1));
    snprintf(rec, sizeof(rec),
             "{\"event\":\"open\",\"window\":\"%s\",\"target\":\"%s\",\"level\":%" PRId64
             ",\"uid\":%u,\"reason\":\"%s\",\"start\":\"%s\",\"planned_end\":\"%s\"}",
             w->id, w->target->id, w->level, w->uid, w->reason, t0, t1);
    if (audit_flush(x) != SF_OK)
        return SF_IO;
    return sf_tc_audit_append(x->cfg->audit_log, rec);
}

/* ,"target_scope":"match","match":{...},"accepted_from_target":N,
 * "refused_from_target":M: the spans of the window's own engine. */
static void add_target_counts(char *buf, size_t size, size_t *len, const tc_window *w,
                              const tc_counts *c)
{
    const sf_strmap *m = &w->target->match;
    char k[SF_TC_MAX_MATCH_LEN * 6 + 1], v[SF_TC_MAX_MATCH_LEN * 6 + 1];

    add(buf, size, len, ",\"target_scope\":\"match\",\"match\":{");
    for (size_t i = 0; i < m->n; i++) {
        sf_json_escape(m->keys[i], k, sizeof(k));
        sf_json_escape(m->values[i], v, sizeof(v));
        add(buf, size, len, "%s\"%s\":\"%s\"", i ? "," : "", k, v);
    }
    add(buf, size, len, "},\"accepted_from_target\":%" PRIu64 ",\"refused_from_target\":%"
        PRIu64, c->from_target[0], c->from_target[1]);
}

/* ---- marker spans ------------------------------------------------------------- */

typedef struct marker_attrs {
    size_t n;
    sf_otlp_kv kv[24];
    sf_otlp_any av[24];
    sf_otlp_kv *p[24];
} marker_attrs;

static sf_otlp_any *attr(marker_attrs *a, const char *key)
{
    size_t i = a->n++;

    opentelemetry__proto__common__v1__key_value__init(&a->kv[i]);
    opentelemetry__proto__common__v1__any_value__init(&a->av[i]);
    a->kv[i].key = (char *)key;
    a->kv[i].value = &a->av[i];
    a->p[i] = &a->kv[i];
    return &a->av[i];
}

static void attr_str(marker_attrs *a, const char *key, const char *v)
{
    sf_otlp_any *av = attr(a, key);

    av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    av->string_value = (char *)v;
}

static void attr_int(marker_attrs *a, const char *key, int64_t v)
{
    sf_otlp_any *av = attr(a, key);

    av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
    av->int_value = v;
}

static void attr_bool(marker_attrs *a, const char *key, bool v)
{
    sf_otlp_any *av = attr(a, key);

    av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
    av->bool_value = v;
}

/* Undo sf_json_escape for the reason (the marker carries it as text). */
static void unescape(const char *in, char *out, size_t size)
{
    size_t n = strlen(in);
    char *json = sf_malloc(n + 16);

    out[0] = '\0';
    if (json == NULL)
        return;
    snprintf(json, n + 16, "{\"s\":\"%s\"}", in);
    if (sf_tc_json_str(json, strlen(json), "s", out, size) != SF_OK)
        snprintf(out, size, "%s", in);
    sf_free(json);
}

/* One ExportTraceServiceRequest with the window's marker span, sf_malloc'd. */
static sf_status marker_build(const tc_window *w, const tc_counts *c, uint8_t **out,
                              size_t *out_len)
{
    sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    sf_otlp_resource_spans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT, *rsp = &rs;
    sf_otlp_resource res = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    sf_otlp_scope_spans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT, *ssp = &ss;
    sf_otlp_scope scope = OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
    sf_otlp_span span = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT, *spp = &span;
    sf_otlp_status status = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__INIT;
    marker_attrs ra = { .n = 0 }, sa = { .n = 0 };
    uint8_t ids[24];
    char name[128], reason[SF_TC_MAX_REASON + 1];
    bool done = c != NULL && complete(w, c);
    int64_t start = w->start_wall, end = w->ended_wall > start ? w->ended_wall : start;

    if (getrandom(ids, sizeof(ids), 0) != (ssize_t)sizeof(ids)) {
        for (size_t i = 0; i < sizeof(ids); i++)     /* never fails on Linux >= 3.17 */
            ids[i] = (uint8_t)(sf_now_ms() >> (i % 8));
    }
    ids[0] |= 1;                                      /* an all-zero id is invalid */
    ids[16] |= 1;
    attr_str(&ra, "service.name", "spanfence");
    res.n_attributes = ra.n;
    res.attributes = ra.p;
    scope.name = "spanfence.trace_control";
    snprintf(name, sizeof(name), "trace_control window %s", w->target->id);
    unescape(w->reason, reason, sizeof(reason));
    attr_str(&sa, "spanfence.window.id", w->id);
    attr_str(&sa, "spanfence.window.target", w->target->id);
    attr_int(&sa, "spanfence.window.level", w->level);
    attr_str(&sa, "spanfence.window.reason", reason);
    attr_int(&sa, "spanfence.window.uid", (int64_t)w->uid);
    attr_str(&sa, "spanfence.window.cause", w->cause);
    if (w->note[0] != '\0')
        attr_str(&sa, "spanfence.window.note", w->note);
    if (c != NULL) {
        attr_int(&sa, "spanfence.window.accepted", (int64_t)c->accepted);
        attr_int(&sa, "spanfence.window.exported", (int64_t)c->exported);
        attr_int(&sa, "spanfence.window.refused", (int64_t)c->refused);
        attr_int(&sa, "spanfence.window.failed",
                 (int64_t)(c->dropped + c->send_failed + c->enqueue_failed));
        attr_int(&sa, "spanfence.window.lost", (int64_t)c->lost);
        if (w->target->match.n > 0) {
            attr_int(&sa, "spanfence.window.accepted_from_target", (int64_t)c->from_target[0]);
            attr_int(&sa, "spanfence.window.refused_from_target", (int64_t)c->from_target[1]);
        }
    }
    attr_bool(&sa, "spanfence.window.complete", done);
    attr_int(&sa, "spanfence.window.grace_ms", w->grace_ms);
    span.trace_id = (ProtobufCBinaryData){ 16, ids };
    span.span_id = (ProtobufCBinaryData){ 8, ids + 16 };
    span.name = name;
    span.kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL;
    span.start_time_unix_nano = (uint64_t)start * 1000000u;
    span.end_time_unix_nano = (uint64_t)end * 1000000u;
    span.n_attributes = sa.n;
    span.attributes = sa.p;
    status.code = done ? OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_OK
                       : OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
    span.status = &status;
    ss.scope = &scope;
    ss.n_spans = 1;
    ss.spans = &spp;
    rs.resource = &res;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    *out_len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
    *out = sf_malloc(*out_len ? *out_len : 1);
    if (*out == NULL)
        return SF_ENOMEM;
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, *out);
    return SF_OK;
}

/* Hand a built marker to the pipeline; keep it for later while the
 * exporters do not run. Returns what the record says of it. */
static const char *marker_send(tc_ctx *x, tc_window *w)
{
    sf_status st = sf_component_inject(x->self, x->cfg->markers.pipeline, w->marker,
                                       w->marker_len);

    if (st == SF_STOPPED && ++w->marker_tries < TC_MARKER_TRIES && !x->stopping) {
        w->marker_next_mono = sf_now_ms() + TC_MARKER_WAIT;
        return "pending";
    }
    sf_free(w->marker);
    w->marker = NULL;
    if (st == SF_OK && w->marker_tries > 0)     /* its record said "pending" */
        sf_info("trace_control: the marker span of window '%s' was sent", w->id);
    if (st == SF_OK)
        return "sent";
    sf_warn("trace_control: the marker span of window '%s' was not exported: %s", w->id,
            sf_status_str(st));
    return "not sent";
}

/* Build and send w's marker (when markers are on); the record's value. */
static const char *marker_emit(tc_ctx *x, tc_window *w, const tc_counts *c)
{
    if (!x->cfg->markers.enabled)
        return "off";
    sf_free(w->marker);
    w->marker = NULL;
    w->marker_tries = 0;
    if (marker_build(w, c, &w->marker, &w->marker_len) != SF_OK)
        return "not sent";
    return marker_send(x, w);
}

/* ---- closing ------------------------------------------------------------------ */

/* The closing record, after the grace period: cause, and what the
 * collector as a whole accepted, exported and lost while the window was
 * open and in its grace period ("scope":"collector": every engine's spans);
 * for a target with a `match`, also the spans accepted and refused from
 * that engine alone ("target_scope":"match"); whether the capture is
 * complete; and the marker span sent with the same figures. */
static sf_status close_window(tc_ctx *x, tc_window *w, long status)
{
    char rec[TC_RECORD_MAX], t0[32], t1[32], t2[32], esc[sizeof(w->note) * 6 + 1];
    size_t len = 0;
    bool recovered = strcmp(w->cause, "recovered") == 0;
    tc_counts c;
    const char *marker;

    count_stop(x, w);
    w->closing = false;
    window_counts(x, w, &c);
    marker = marker_emit(x, w, recovered ? NULL : &c);
    sf_time_format_utc(w->ended_wall, t0, sizeof(t0));
    sf_time_format_utc(w->end_wall, t1, sizeof(t1));
    sf_time_format_utc(sf_wall_ms(), t2, sizeof(t2));
    add(rec, sizeof(rec),
        &len, "{\"event\":\"close\",\"window\":\"%s\",\"target\":\"%s\",\"level\":%" PRId64
        ",\"cause\":\"%s\",\"end\":\"%s\",\"planned_end\":\"%s\",\"closed\":\"%s\""
        ",\"grace_ms\":%" PRId64, w->id, w->target->id, w->level, w->cause, t0, t1, t2,
        w->grace_ms);
    if (w->note[0] != '\0') {
        sf_json_escape(w->note, esc, sizeof(esc));
        if (status != 0)
            add(rec, sizeof(rec), &len, ",\"status\":%ld", status);
        add(rec, sizeof(rec), &len, ",\"%s\":\"%s\"",
            strcmp(w->cause, "loss") == 0 ? "revert_reason" : "error", esc);
    }
    if (recovered) {
        /* the counters died with the crashed process */
        add(rec, sizeof(rec), &len, ",\"scope\":\"none\",\"complete\":false");
    } else {
        add(rec, sizeof(rec), &len,
            ",\"scope\":\"collector\",\"accepted\":%" PRIu64 ",\"exported\":%" PRIu64
            ",\"enqueue_failed\":%" PRIu64 ",\"lost\":%" PRIu64, c.accepted, c.exported,
            c.enqueue_failed, c.lost);
        add_reasons(rec, sizeof(rec), &len, "refused", c.now.refused, w->at_start.refused);
        add_reasons(rec, sizeof(rec), &len, "dropped", c.now.dropped, w->at_start.dropped);
        add_reasons(rec, sizeof(rec), &len, "send_failed", c.now.send_failed,
                    w->at_start.send_failed);
        if (w->target->match.n > 0)
            add_target_counts(rec, sizeof(rec), &len, w, &c);
        add(rec, sizeof(rec), &len, ",\"complete\":%s", complete(w, &c) ? "true" : "false");
    }
    add(rec, sizeof(rec), &len, ",\"marker\":\"%s\"}", marker);
    sf_info("trace_control: window '%s' on target '%s' closed (%s; capture %s)", w->id,
            w->target->id, w->cause, !recovered && complete(w, &c) ? "complete" : "NOT complete");
    return audit(x, rec);
}

/* ---- engines ---------------------------------------------------------------------- */

/* One attempt at the resting level. OK: IDLE, recorded "reset". A refusal
 * (400, 401, 403, 404, TLS) or no answer within reset_timeout: FAILED,
 * recorded "reset_failed". Else the next attempt is scheduled. */
static sf_status try_reset(tc_ctx *x, tc_window *w)
{
    char rec[TC_RECORD_MAX], t0[32];
    size_t len = 0;
    sf_tc_answer ans;
    sf_status st;
    int64_t now;

    w->attempts++;
    st = sf_tc_engine_set(w->target, x->cfg->resting_level, x->cfg->request_timeout, &ans);
    now = sf_now_ms();
    sf_time_format_utc(sf_wall_ms(), t0, sizeof(t0));
    if (st == SF_OK) {
        set_state(x, w, TC_IDLE);
        took_level(w, x->cfg->resting_level);
        w->recorded = x->cfg->resting_level;
        w->last_error[0] = '\0';
        w->last_status = 0;
        snprintf(rec, sizeof(rec),
                 "{\"event\":\"reset\",\"window\":\"%s\",\"target\":\"%s\",\"level\":%" PRId64
                 ",\"attempts\":%u,\"time\":\"%s\"}", w->id, w->target->id,
                 x->cfg->resting_level, w->attempts, t0);
        audit(x, rec);      /* if not written, pending: op_reset and shutdown say so */
        sf_info("trace_control: target '%s' is back at level %" PRId64, w->target->id,
                x->cfg->resting_level);
        return SF_OK;
    }
    sf_count(&sf_component_counters(x->self)->values[TC_ENGINE_FAILURES], 1);
    snprintf(w->last_error, sizeof(w->last_error), "%s", ans.detail);
    w->last_status = ans.status;
    atomic_store(&w->level_now, -1);
    if (st == SF_PERMANENT || now - w->reset_since_mono >= x->cfg->reset_timeout) {
        set_state(x, w, TC_FAILED);
        w->recorded = TC_REC_UNKNOWN;
        add(rec, sizeof(rec), &len,
            "{\"event\":\"reset_failed\",\"window\":\"%s\",\"target\":\"%s\",\"level\":%" PRId64
            ",\"attempts\":%u,\"time\":\"%s\",\"why\":\"%s\"", w->id, w->target->id,
            x->cfg->resting_level, w->attempts, t0,
            st == SF_PERMANENT ? "refused" : "reset_timeout");
        add_answer(rec, sizeof(rec), &len, ans.status, ans.detail);
        add(rec, sizeof(rec), &len, "}");
        audit(x, rec);
        sf_error("trace_control: target '%s' was NOT reset to level %" PRId64 " (%s after %u "
                 "attempt%s): %s; its level is not known: fix the engine or the target, then "
                 "run 'spanfence trace-level reset --target %s'", w->target->id,
                 x->cfg->resting_level, st == SF_PERMANENT ? "refused" : "gave up",
                 w->attempts, w->attempts == 1 ? "" : "s", ans.detail, w->target->id);
        return st == SF_PERMANENT ? SF_PERMANENT : SF_RETRY;
    }
    sf_warn("trace_control: target '%s' not reset to level %" PRId64 " (attempt %u): %s; "
            "retrying in %" PRId64 "ms", w->target->id, x->cfg->resting_level, w->attempts,
            ans.detail, w->delay);
    w->next_try_mono = now + w->delay;
    w->delay = w->delay * 2 > x->cfg->retry.max_interval ? x->cfg->retry.max_interval
                                                          : w->delay * 2;
    return st;
}

static void begin_reset(tc_ctx *x, tc_window *w)
{
    set_state(x, w, TC_RESETTING);
    w->attempts = 0;
    w->delay = x->cfg->retry.initial_interval;
    w->next_try_mono = sf_now_ms();
    w->reset_since_mono = w->next_try_mono;
}

/* End an OPEN window: the engine goes back to the resting level at once;
 * the closing record follows after the grace period (at once without one,
 * or when the collector stops: then before the reset). */
static sf_status end_window(tc_ctx *x, tc_window *w, const char *cause, const char *note)
{
    w->ended_wall = sf_wall_ms();
    snprintf(w->cause, sizeof(w->cause), "%s", cause);
    snprintf(w->note, sizeof(w->note), "%s", note ? note : "");
    w->grace_ms = x->stopping ? 0 : x->cfg->grace_period;
    sf_info("trace_control: window '%s' on target '%s' ended (%s)%s%s", w->id, w->target->id,
            cause, note ? ": " : "", note ? note : "");
    if (w->grace_ms == 0) {
        close_window(x, w, 0);
    } else {
        w->closing = true;
        w->close_due_mono = sf_now_ms() + w->grace_ms;
    }
    begin_reset(x, w);
    return try_reset(x, w);
}

/* Enforcement: set an IDLE or FAILED target to the resting level; record
 * only what changes what is known. */
static sf_status enforce(tc_ctx *x, tc_window *w)
{
    char rec[TC_RECORD_MAX], t0[32], prev[32];
    size_t len = 0;
    sf_tc_answer ans;
    int64_t before = atomic_load(&w->level_now);
    sf_status st = sf_tc_engine_set(w->target, x->cfg->resting_level, x->cfg->request_timeout,
                                    &ans);

    sf_time_format_utc(sf_wall_ms(), t0, sizeof(t0));
    if (st == SF_OK) {
        took_level(w, x->cfg->resting_level);
        if (w->state == TC_FAILED) {
            set_state(x, w, TC_IDLE);
            sf_info("trace_control: target '%s' took level %" PRId64 " again; its failed reset "
                    "is cleared", w->target->id, x->cfg->resting_level);
        }
        w->last_error[0] = '\0';
        w->last_status = 0;
        if (w->recorded != x->cfg->resting_level) {
            if (before >= 0)
                snprintf(prev, sizeof(prev), "%" PRId64, before);
            else
                snprintf(prev, sizeof(prev), "null");
            snprintf(rec, sizeof(rec),
                     "{\"event\":\"enforce\",\"target\":\"%s\",\"level\":%" PRId64
                     ",\"previous\":%s,\"time\":\"%s\",\"note\":\"%s\"}", w->target->id,
                     x->cfg->resting_level, prev, t0,
                     w->recorded == TC_REC_NONE ? "at start" : "the engine takes the resting "
                     "level again (it may have restarted at its own default)");
            audit(x, rec);
            sf_info("trace_control: target '%s' set to its resting level %" PRId64,
                    w->target->id, x->cfg->resting_level);
            w->recorded = x->cfg->resting_level;
        }
        return SF_OK;
    }
    sf_count(&sf_component_counters(x->self)->values[TC_ENGINE_FAILURES], 1);
    atomic_store(&w->level_now, -1);
    snprintf(w->last_error, sizeof(w->last_error), "%s", ans.detail);
    w->last_status = ans.status;
    if (w->recorded != TC_REC_UNKNOWN) {
        add(rec, sizeof(rec), &len,
            "{\"event\":\"enforce_failed\",\"target\":\"%s\",\"level\":%" PRId64 ",\"time\":\"%s\"",
            w->target->id, x->cfg->resting_level, t0);
        add_answer(rec, sizeof(rec), &len, ans.status, ans.detail);
        add(rec, sizeof(rec), &len, "}");
        audit(x, rec);
        w->recorded = TC_REC_UNKNOWN;
        sf_warn("trace_control: target '%s' did not take its resting level %" PRId64 ": %s "
                "(tried again every enforce_interval)", w->target->id, x->cfg->resting_level,
                ans.detail);
    }
    return st;
}

/* auto_revert: the reason an open window must end now, or false. */
static bool losing(tc_ctx *x, const tc_window *w, char *why, size_t size)
{
    const sf_tc_auto_revert *a = &x->cfg->auto_revert;
    tc_counts c;
    uint64_t received, tgt;

    if (!a->enabled)
        return false;
    window_counts(x, w, &c);
    received = c.accepted + c.refused;
    tgt = c.from_target[0] + c.from_target[1];
    if (c.lost > (uint64_t)a->max_lost_spans) {
        snprintf(why, size, "%" PRIu64 " spans lost (more than max_lost_spans %" PRId64 ")",
                 c.lost, a->max_lost_spans);
        return true;
    }
    if (c.lost > 0 && received > 0 && (double)c.lost / (double)received > a->max_loss_ratio) {
        snprintf(why, size, "%" PRIu64 " of %" PRIu64 " spans lost (%.2f%%, more than "
                 "max_loss_ratio %.2f%%)", c.lost, received,
                 100.0 * (double)c.lost / (double)received, 100.0 * a->max_loss_ratio);
        return true;
    }
    if (w->target->match.n > 0 && c.from_target[1] > 0 &&
        (double)c.from_target[1] / (double)tgt > a->max_loss_ratio) {
        snprintf(why, size, "%" PRIu64 " of the target's %" PRIu64 " spans refused (more than "
                 "max_loss_ratio %.2f%%)", c.from_target[1], tgt, 100.0 * a->max_loss_ratio);
        return true;
    }
    return false;
}

/* ---- requests ----------------------------------------------------------------------- */

typedef struct reply {
    char buf[SF_TC_MAX_REQUEST * 8];
    size_t len;
} reply;

static void answer(reply *r, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void answer(reply *r, bool ok, const char *fmt, ...)
{
    char msg[1024], esc[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sf_json_escape(msg, esc, sizeof(esc));
    r->len = 0;
    add(r->buf, sizeof(r->buf), &r->len, "{\"ok\":%s,\"message\":\"%s\"}",
        ok ? "true" : "false", esc);
}

static tc_window *window_of(tc_ctx *x, const char *target)
{
    for (size_t i = 0; i < x->cfg->targets.n; i++)
        if (strcmp(x->w[i].target->id, target) == 0)
            return &x->w[i];
    return NULL;
}

static void op_set(tc_ctx *x, const char *req, size_t len, unsigned uid, reply *r)
{
    char target[65], reason[SF_TC_MAX_REASON + 1], err[512], until[32];
    int64_t level, for_ms;
    sf_tc_answer ans;
    tc_window *w;
    tc_state prev;
    sf_status st;

    if (sf_tc_json_str(req, len, "target", target, sizeof(target)) != SF_OK ||
        sf_tc_json_int(req, len, "level", &level) != SF_OK ||
        sf_tc_json_int(req, len, "for_ms", &for_ms) != SF_OK) {
        answer(r, false, "a set request needs 'target', 'level' and 'for_ms'");
        return;
    }
    if (sf_tc_json_str(req, len, "reason", reason, sizeof(reason)) != SF_OK || reason[0] == '\0') {
        answer(r, false, "a set request needs a 'reason' of 1 to %d bytes", SF_TC_MAX_REASON);
        return;
    }
    if (sf_tc_check_set(x->cfg, target, level, for_ms, err, sizeof(err)) != SF_OK) {
        sf_warn("trace_control: refused a window for uid %u: %s", uid, err);
        answer(r, false, "%s", err);
        return;
    }
    w = window_of(x, target);
    if (w->state == TC_OPEN) {
        format_left(w->end_mono - sf_now_ms(), err, sizeof(err));
        answer(r, false, "target '%s' already has a window at level %" PRId64
               " (%s left); reset it first", target, w->level, err);
        return;
    }
    if (w->state == TC_RESETTING) {
        format_left(w->reset_since_mono + x->cfg->reset_timeout - sf_now_ms(), err, sizeof(err));
        answer(r, false, "target '%s' is still being reset to level %" PRId64 " (%u attempts, "
               "last: %s; given up in %s at most)", target, x->cfg->resting_level, w->attempts,
               w->last_error, err);
        return;
    }
    if (w->closing) {
        format_left(w->close_due_mono - sf_now_ms(), err, sizeof(err));
        answer(r, false, "target '%s': window '%s' is in its grace period (%s left); its "
               "closing record comes first", target, w->id, err);
        return;
    }
    prev = w->state;
    w->level = level;
    w->uid = uid;
    sf_json_escape(reason, w->reason, sizeof(w->reason));
    w->start_wall = sf_wall_ms();
    w->end_wall = w->start_wall + for_ms;
    w->end_mono = sf_now_ms() + for_ms;
    w->note[0] = '\0';
    snprintf(w->id, sizeof(w->id), "%s-%" PRId64, target, w->start_wall);
    sf_component_totals(x->self, &w->at_start);
    count_start(x, w);
    if (audit_open(x, w) != SF_OK) {
        count_stop(x, w);
        (void)prev;
        answer(r, false, "the audit log '%s' cannot be written; nothing was changed",
               x->cfg->audit_log);
        return;
    }
    set_state(x, w, TC_OPEN);
    st = sf_tc_engine_set(w->target, level, x->cfg->request_timeout, &ans);
    if (st != SF_OK) {
        sf_count(&sf_component_counters(x->self)->values[TC_ENGINE_FAILURES], 1);
        w->ended_wall = sf_wall_ms();
        w->grace_ms = 0;
        snprintf(w->note, sizeof(w->note), "%s", ans.detail);
        snprintf(w->last_error, sizeof(w->last_error), "%s", ans.detail);
        w->last_status = ans.status;
        if (st == SF_PERMANENT) {
            /* The engine answered and refused: its level did not change,
             * so there is nothing to reset. */
            sf_error("trace_control: target '%s' refused level %" PRId64 ": %s", target, level,
                     ans.detail);
            snprintf(w->cause, sizeof(w->cause), "set_refused");
            close_window(x, w, ans.status);
            set_state(x, w, prev);      /* a failed reset before stays failed */
            answer(r, false, "engine '%s' refused level %" PRId64 ": %s; nothing was changed",
                   target, level, ans.detail);
            return;
        }
        /* No answer, or 5xx: it may or may not have taken it (a timeout):
         * make sure it goes back to the resting level. */
        sf_warn("trace_control: target '%s' did not take level %" PRId64 ": %s", target, level,
                ans.detail);
        snprintf(w->cause, sizeof(w->cause), "set_failed");
        close_window(x, w, ans.status);
        begin_reset(x, w);
        w->next_try_mono = sf_now_ms() + w->delay;
        answer(r, false, "engine '%s' did not take level %" PRId64 ": %s; it will be reset to %"
               PRId64, target, level, ans.detail, x->cfg->resting_level);
        return;
    }
    took_level(w, level);
    w->recorded = level;
    sf_time_format_utc(w->end_wall, until, sizeof(until));
    sf_info("trace_control: window '%s': target '%s' at level %" PRId64 " until %s (uid %u)",
            w->id, target, level, until, uid);
    format_left(for_ms, err, sizeof(err));
    answer(r, true, "target '%s' is at level %" PRId64 " for %s, until %s (window %s)", target,
           level, err, until, w->id);
}

static void op_reset(tc_ctx *x, const char *req, size_t len, unsigned uid, reply *r)
{
    char target[128], grace[96] = "";
    tc_window *w;
    sf_status st;

    if (sf_tc_json_str(req, len, "target", target, sizeof(target)) != SF_OK) {
        answer(r, false, "a reset request needs 'target'");
        return;
    }
    w = window_of(x, target);
    if (w == NULL) {
        answer(r, false, "unknown target '%s'", target);
        return;
    }
    if (w->state == TC_IDLE) {
        answer(r, false, "target '%s' has no open window", target);
        return;
    }
    sf_info("trace_control: uid %u resets target '%s'", uid, target);
    if (w->state == TC_OPEN) {
        st = end_window(x, w, "reset", NULL);
    } else {
        if (w->state == TC_FAILED) {
            /* the operator's retry: a fresh, bounded reset */
            w->reset_since_mono = sf_now_ms();
            w->delay = x->cfg->retry.initial_interval;
        }
        st = try_reset(x, w);
    }
    if (w->closing)
        snprintf(grace, sizeof(grace), "; the window's closing record follows after its "
                 "%" PRId64 " ms grace period", w->grace_ms);
    if (st == SF_OK) {
        if (x->n_pending > 0) {
            answer(r, false, "target '%s' is back at level %" PRId64 ", but the audit log '%s' "
                   "cannot be written: %zu record%s pending (retried; logged by the collector)",
                   target, x->cfg->resting_level, x->cfg->audit_log, x->n_pending,
                   x->n_pending == 1 ? "" : "s");
            return;
        }
        answer(r, true, "target '%s' is back at level %" PRId64 "%s", target,
               x->cfg->resting_level, grace);
        return;
    }
    if (w->state == TC_FAILED)
        answer(r, false, "target '%s' was not reset to level %" PRId64 ": %s; recorded as "
               "reset_failed%s", target, x->cfg->resting_level, w->last_error, grace);
    else
        answer(r, false, "window on '%s' closed, but the engine did not take level %" PRId64
               ": %s; the reset is being retried%s", target, x->cfg->resting_level,
               w->last_error, grace);
}

static void op_status(tc_ctx *x, reply *r)
{
    char text[4096], esc[8192], left[32], until[32], set[32];
    size_t tl = 0, n = 0;
    int64_t now = sf_now_ms();

    r->len = 0;
    add(r->buf, sizeof(r->buf), &r->len, "{\"ok\":true,\"windows\":[");
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];
        const char *state = w->state == TC_OPEN ? "open" : w->state == TC_RESETTING
                            ? "resetting" : "failed";

        if (w->state == TC_IDLE)
            continue;
        sf_time_format_utc(w->end_wall, until, sizeof(until));
        add(r->buf, sizeof(r->buf), &r->len,
            "%s{\"target\":\"%s\",\"state\":\"%s\",\"level\":%" PRId64 ",\"uid\":%u,"
            "\"window\":\"%s\",\"planned_end\":\"%s\",\"left_ms\":%" PRId64 ",\"reason\":\"%s\"}",
            n ? "," : "", w->target->id, state, w->level, w->uid, w->id, until,
            w->state == TC_OPEN ? w->end_mono - now : 0, w->reason);
        n++;
    }
    add(r->buf, sizeof(r->buf), &r->len, "],\"targets\":[");
    n = 0;
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];
        int64_t lv = atomic_load(&w->level_now), at = atomic_load(&w->level_set_wall);
        const char *state = w->state == TC_OPEN ? "open" : w->state == TC_RESETTING
                            ? "resetting" : w->state == TC_FAILED ? "reset_failed"
                            : w->closing ? "closing" : "idle";
        char lvtext[32];

        sf_time_format_utc(at, set, sizeof(set));
        if (lv >= 0)
            snprintf(lvtext, sizeof(lvtext), "%" PRId64, lv);
        else
            snprintf(lvtext, sizeof(lvtext), "null");
        add(r->buf, sizeof(r->buf), &r->len, "%s{\"target\":\"%s\",\"state\":\"%s\","
            "\"level\":%s,\"level_set\":\"%s\"}", n++ ? "," : "", w->target->id, state, lvtext,
            at ? set : "");
        if (lv >= 0)
            add(text, sizeof(text), &tl, "%s: level %" PRId64 " (set %s)", w->target->id, lv,
                set);
        else
            add(text, sizeof(text), &tl, "%s: level not known", w->target->id);
        if (w->state == TC_OPEN) {
            format_left(w->end_mono - now, left, sizeof(left));
            sf_time_format_utc(w->end_wall, until, sizeof(until));
            add(text, sizeof(text), &tl, "; window at level %" PRId64 ", %s left (until %s), "
                "uid %u", w->level, left, until, w->uid);
        } else if (w->state == TC_RESETTING) {
            add(text, sizeof(text), &tl, "; window closed, reset to level %" PRId64 " pending "
                "(%u attempts%s%s)", x->cfg->resting_level, w->attempts,
                w->last_error[0] ? ", last: " : "", w->last_error);
        } else if (w->state == TC_FAILED) {
            add(text, sizeof(text), &tl, "; reset to level %" PRId64 " FAILED: %s (run "
                "'spanfence trace-level reset --target %s' once it is mended)",
                x->cfg->resting_level, w->last_error, w->target->id);
        } else if (w->last_error[0]) {
            add(text, sizeof(text), &tl, "; resting level not taken: %s", w->last_error);
        }
        if (w->closing) {
            format_left(w->close_due_mono - now, left, sizeof(left));
            add(text, sizeof(text), &tl, "; window '%s' closes in %s (grace)", w->id, left);
        }
        add(text, sizeof(text), &tl, "\n");
    }
    sf_json_escape(text, esc, sizeof(esc));
    add(r->buf, sizeof(r->buf), &r->len, "],\"message\":\"%s\"}", esc);
}

static void serve_client(tc_ctx *x, int fd)
{
    char req[SF_TC_MAX_REQUEST + 1], op[16];
    struct ucred cred;
    socklen_t cl = sizeof(cred);
    struct timeval tv = { .tv_sec = 2 };
    size_t len = 0;
    reply *r = sf_malloc(sizeof(*r));

    if (r == NULL)
        return;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
        sf_free(r);
        return;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (len < SF_TC_MAX_REQUEST && memchr(req, '\n', len) == NULL) {
        ssize_t n = recv(fd, req + len, SF_TC_MAX_REQUEST - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    while (len > 0 && (req[len - 1] == '\n' || req[len - 1] == '\r'))
        len--;
    req[len] = '\0';
    if (!sf_tc_json_valid(req, len) || sf_tc_json_str(req, len, "op", op, sizeof(op)) != SF_OK)
        answer(r, false, "expected one JSON object with an 'op'");
    else if (strcmp(op, "set") == 0)
        op_set(x, req, len, cred.uid, r);
    else if (strcmp(op, "reset") == 0)
        op_reset(x, req, len, cred.uid, r);
    else if (strcmp(op, "status") == 0)
        op_status(x, r);
    else
        answer(r, false, "unknown op '%s' (expected set, reset, status)", op);
    add(r->buf, sizeof(r->buf), &r->len, "\n");
    if (send(fd, r->buf, r->len, MSG_NOSIGNAL) < 0)
        sf_debug("trace_control: client went away before the answer");
    sf_free(r);
}

/* ---- the thread ------------------------------------------------------------------------ */

static void due(tc_ctx *x)
{
    int64_t now = sf_now_ms();
    bool check_loss = false;
    char why[256];

    if (x->next_enforce_mono != INT64_MAX && now >= x->next_enforce_mono) {
        for (size_t i = 0; i < x->cfg->targets.n; i++)
            x->w[i].enforce_due = true;
        x->next_enforce_mono = x->cfg->enforce_interval > 0 ? now + x->cfg->enforce_interval
                                                              : INT64_MAX;
    }
    if (now >= x->next_loss_mono) {
        check_loss = x->cfg->auto_revert.enabled;
        x->next_loss_mono = now + x->cfg->auto_revert.check_interval;
    }
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];

        if (w->enforce_due) {
            /* a target being reset (or recovered) is not enforced: its
             * reset is the same request */
            w->enforce_due = false;
            if (w->state == TC_IDLE || w->state == TC_FAILED)
                enforce(x, w);
        }
        if (w->state == TC_OPEN && now >= w->end_mono)
            end_window(x, w, "expired", NULL);
        else if (w->state == TC_OPEN && check_loss && losing(x, w, why, sizeof(why)))
            end_window(x, w, "loss", why);
        else if (w->state == TC_RESETTING && now >= w->next_try_mono)
            try_reset(x, w);
        if (w->closing && sf_now_ms() >= w->close_due_mono)
            close_window(x, w, 0);
        if (w->marker != NULL && sf_now_ms() >= w->marker_next_mono)
            marker_send(x, w);
    }
    if (x->n_pending > 0 && now >= x->audit_retry_mono)
        audit_flush(x);
}

static int64_t next_deadline(const tc_ctx *x)
{
    int64_t next = x->next_enforce_mono;
    bool open = false;

    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        const tc_window *w = &x->w[i];

        if (w->state == TC_OPEN && w->end_mono < next)
            next = w->end_mono;
        else if (w->state == TC_RESETTING && w->next_try_mono < next)
            next = w->next_try_mono;
        if (w->closing && w->close_due_mono < next)
            next = w->close_due_mono;
        if (w->marker != NULL && w->marker_next_mono < next)
            next = w->marker_next_mono;
        if (w->enforce_due)
            next = 0;
        open |= w->state == TC_OPEN;
    }
    if (open && x->cfg->auto_revert.enabled && x->next_loss_mono < next)
        next = x->next_loss_mono;
    if (x->n_pending > 0 && x->audit_retry_mono < next)
        next = x->audit_retry_mono;
    return next;
}

/* Shutdown: close every open window (no grace: the receivers have
 * stopped), write the closing records still in their grace period, and
 * try, for at most shutdown_timeout, to get every engine back to the
 * resting level. What is left is reset at the next start (its "open"
 * record has no "reset"). */
static void close_all(tc_ctx *x, const char *cause)
{
    int64_t deadline = sf_now_ms() + x->cfg->shutdown_timeout;

    x->stopping = true;
    x->next_enforce_mono = INT64_MAX;
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];

        w->enforce_due = false;
        if (w->state == TC_OPEN)
            end_window(x, w, cause, NULL);
        if (w->closing) {
            snprintf(w->note, sizeof(w->note), "grace period cut short (%s)", cause);
            close_window(x, w, 0);
        }
        if (w->marker != NULL)
            marker_send(x, w);
    }
    for (;;) {
        int64_t next = INT64_MAX, now = sf_now_ms();

        for (size_t i = 0; i < x->cfg->targets.n; i++)
            if (x->w[i].state == TC_RESETTING && x->w[i].next_try_mono < next)
                next = x->w[i].next_try_mono;
        if (x->n_pending > 0 && x->audit_retry_mono < next)
            next = x->audit_retry_mono;
        if (next == INT64_MAX)
            break;
        if (next >= deadline || now >= deadline) {
            if (x->n_pending > 0)
                audit_flush(x);     /* a last try before giving up */
            break;
        }
        if (next > now)
            poll(NULL, 0, (int)(next - now));
        now = sf_now_ms();
        for (size_t i = 0; i < x->cfg->targets.n; i++)
            if (x->w[i].state == TC_RESETTING && now >= x->w[i].next_try_mono)
                try_reset(x, &x->w[i]);
        if (x->n_pending > 0 && now >= x->audit_retry_mono)
            audit_flush(x);
    }
    for (size_t i = 0; i < x->cfg->targets.n; i++)
        if (x->w[i].state == TC_RESETTING)
            sf_error("trace_control: target '%s' could not be reset before exit; it will be reset "
                     "at the next start", x->w[i].target->id);
    for (size_t i = 0; i < x->n_pending; i++)
        sf_error("trace_control: audit record LOST: '%s' could not be written before exit: %s",
                 x->cfg->audit_log, x->pending[i]);
}

static void *run(void *arg)
{
    tc_ctx *x = arg;

    due(x);     /* windows recovered from a crash; enforcement at start */
    while (!atomic_load(&x->stop)) {
        struct pollfd p[2] = { { .fd = x->listen_fd, .events = POLLIN },
                               { .fd = x->wake[0], .events = POLLIN } };
        int64_t next = next_deadline(x), timeout = -1;

        if (next != INT64_MAX) {
            timeout = next - sf_now_ms();
            if (timeout < 0)
                timeout = 0;
            if (timeout > 60000)
                timeout = 60000;
        }
        if (poll(p, 2, (int)timeout) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (p[0].revents & POLLIN) {
            int fd = accept4(x->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                serve_client(x, fd);
                close(fd);
            }
        }
        due(x);
    }
    if (!x->suspending)
        close_all(x, "shutdown");
    return NULL;
}

/* ---- crash recovery ------------------------------------------------------------------------ */

/* Read the audit log: every target whose last "open" has no "reset",
 * "reset_failed" or refused "close" was left at a raised level by a
 * process that died; schedule its reset. */
static sf_status recover(tc_ctx *x)
{
    FILE *f = fopen(x->cfg->audit_log, "re");
    char *line;

    if (f == NULL)
        return errno == ENOENT ? SF_OK : SF_IO;
    line = sf_malloc(TC_LINE_MAX);
    if (line == NULL) {
        fclose(f);
        return SF_ENOMEM;
    }
    while (fgets(line, TC_LINE_MAX, f) != NULL) {
        char ev[16], target[65], id[128], cause[16], reason[SF_TC_MAX_REASON + 1];
        size_t len = strlen(line);
        tc_window *w;
        int64_t v = 0;

        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (sf_tc_json_str(line, len, "event", ev, sizeof(ev)) != SF_OK ||
            sf_tc_json_str(line, len, "target", target, sizeof(target)) != SF_OK ||
            sf_tc_json_str(line, len, "window", id, sizeof(id)) != SF_OK)
            continue;
        w = window_of(x, target);
        if (w == NULL || w->carried)
            continue;
        if (strcmp(ev, "open") == 0) {
            const char *dash = strrchr(id, '-');

            w->state = TC_RESETTING;
            w->level = sf_tc_json_int(line, len, "level", &v) == SF_OK ? v : 0;
            w->uid = sf_tc_json_int(line, len, "uid", &v) == SF_OK ? (unsigned)v : 0;
            if (sf_tc_json_str(line, len, "reason", reason, sizeof(reason)) == SF_OK)
                sf_json_escape(reason, w->reason, sizeof(w->reason));
            w->start_wall = dash ? strtoll(dash + 1, NULL, 10) : 0;
            w->end_wall = w->start_wall;
            snprintf(w->id, sizeof(w->id), "%s", id);
        } else if (strcmp(w->id, id) == 0 &&
                   (strcmp(ev, "reset") == 0 || strcmp(ev, "reset_failed") == 0 ||
                    (strcmp(ev, "close") == 0 &&
                     sf_tc_json_str(line, len, "cause", cause, sizeof(cause)) == SF_OK &&
                     strcmp(cause, "set_refused") == 0))) {
            w->state = TC_IDLE;
        }
    }
    fclose(f);
    sf_free(line);
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];

        if (w->state != TC_RESETTING || w->carried)
            continue;
        sf_warn("trace_control: window '%s' on target '%s' was left open by a previous run; "
                "resetting it", w->id, w->target->id);
        w->state = TC_IDLE;
        w->ended_wall = sf_wall_ms();
        w->grace_ms = 0;
        snprintf(w->cause, sizeof(w->cause), "recovered");
        w->note[0] = '\0';
        close_window(x, w, 0);
        begin_reset(x, w);
    }
    return SF_OK;
}

/* ---- metrics ---------------------------------------------------------------------------- */

/* Like add(), but counts what did not fit too, so the caller learns the
 * length the whole text needs (snprintf's contract). */
static void put(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void put(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(*len < size ? buf + *len : NULL, *len < size ? size - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

/* Each target's last known level and when it took it (sf_component_type.metrics). */
static size_t tc_metrics(sf_component *self, char *buf, size_t size)
{
    tc_ctx *x = sf_component_ctx(self);
    size_t len = 0;

    if (size > 0)
        buf[0] = '\0';
    if (x == NULL)
        return 0;
    put(buf, size, &len, "# HELP spanfence_trace_control_target_level The trace level each target "
        "last took (-1: not known: never set, or its last request failed).\n"
        "# TYPE spanfence_trace_control_target_level gauge\n");
    for (size_t i = 0; i < x->cfg->targets.n; i++)
        put(buf, size, &len, "spanfence_trace_control_target_level{extension=\"%s\",target=\"%s\"} "
            "%" PRId64 "\n", sf_component_id(self), x->w[i].target->id,
            atomic_load(&x->w[i].level_now));
    put(buf, size, &len, "# HELP spanfence_trace_control_target_level_set_seconds When the "
        "target last took a level (Unix time; 0: never).\n"
        "# TYPE spanfence_trace_control_target_level_set_seconds gauge\n");
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        int64_t at = atomic_load(&x->w[i].level_set_wall);

        put(buf, size, &len, "spanfence_trace_control_target_level_set_seconds{extension=\"%s\","
            "target=\"%s\"} %" PRId64 ".%03" PRId64 "\n", sf_component_id(self),
            x->w[i].target->id, at / 1000, at % 1000);
    }
    return len;
}

/* ---- lifecycle --------------------------------------------------------------------------- */

static sf_status tc_create(sf_component *self, const void *config)
{
    const sf_tc_config *cfg = config;
    tc_ctx *x;
    bool matching = false;

    if (cfg->markers.enabled && cfg->markers.pipeline != NULL &&
        !sf_component_has_traces_pipeline(self, cfg->markers.pipeline)) {
        sf_error("extensions.%s: markers.pipeline: '%s' is not a traces pipeline of this config",
                 sf_component_id(self), cfg->markers.pipeline);
        return SF_CONFIG;
    }
    x = sf_calloc(1, sizeof(*x));
    if (x == NULL)
        return SF_ENOMEM;
    x->w = sf_calloc(cfg->targets.n ? cfg->targets.n : 1, sizeof(*x->w));
    if (x->w == NULL) {
        sf_free(x);
        return SF_ENOMEM;
    }
    x->self = self;
    x->cfg = cfg;
    x->listen_fd = -1;
    x->wake[0] = x->wake[1] = -1;
    x->next_enforce_mono = 0;       /* the first round runs at start */
    for (size_t i = 0; i < cfg->targets.n; i++) {
        x->w[i].target = &cfg->targets.v[i];
        atomic_store(&x->w[i].level_now, -1);
        x->w[i].recorded = TC_REC_NONE;
        if (cfg->targets.v[i].match.n > 0)
            matching = true;
    }
    sf_component_set_ctx(self, x);
    /* No target with a match: no tap, so no cost at all on the data path. */
    if (matching)
        sf_component_set_span_tap(self, tap, x);
    return SF_OK;
}

/* Bind the control socket with owner-only (or owner+group) permissions from
 * the first moment it exists. */
static sf_status bind_socket(tc_ctx *x)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct stat stt;
    mode_t mode = x->cfg->socket_group ? 0660 : 0600, old;
    gid_t gid = (gid_t)-1;
    int rc;

    if (x->cfg->socket_group) {
        struct group *g = getgrnam(x->cfg->socket_group);
        if (g == NULL) {
            sf_error("trace_control: unknown group '%s'", x->cfg->socket_group);
            return SF_CONFIG;
        }
        gid = g->gr_gid;
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", x->cfg->socket);
    if (lstat(x->cfg->socket, &stt) == 0) {
        int probe;

        if (!S_ISSOCK(stt.st_mode)) {
            sf_error("trace_control: '%s' exists and is not a socket", x->cfg->socket);
            return SF_IO;
        }
        probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            close(probe);
            sf_error("trace_control: '%s' is in use by another collector", x->cfg->socket);
            return SF_IO;
        }
        if (probe >= 0)
            close(probe);
        unlink(x->cfg->socket);     /* left by a process that died */
    }
    x->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (x->listen_fd < 0)
        return SF_IO;
    old = umask(0777 & ~mode);
    rc = bind(x->listen_fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc != 0 || chmod(x->cfg->socket, mode) != 0 ||
        (gid != (gid_t)-1 && chown(x->cfg->socket, (uid_t)-1, gid) != 0) ||
        listen(x->listen_fd, 16) != 0) {
        sf_error("trace_control: cannot listen on '%s': %s", x->cfg->socket, strerror(errno));
        if (rc == 0)
            unlink(x->cfg->socket);
        close(x->listen_fd);
        x->listen_fd = -1;
        return SF_IO;
    }
    x->socket_bound = true;
    return SF_OK;
}


static void tc_shutdown(sf_component *self);

static sf_status tc_start(sf_component *self)
{
    tc_ctx *x = sf_component_ctx(self);
    sf_status st;

    st = recover(x);
    if (st != SF_OK && x->resumed) {
        /* The first start recovered what a crash left; failing the reload
         * (and with it the collector) over a log that cannot be read now
         * would be worse than not looking again. */
        sf_warn("trace_control: cannot read the audit log '%s' after the reload: windows a "
                "crash left on targets new in this config are not recovered", x->cfg->audit_log);
    } else if (st != SF_OK) {
        sf_error("trace_control: cannot read the audit log '%s'", x->cfg->audit_log);
        return st;
    }
    if (!x->socket_bound) {         /* else taken over with its windows (reload) */
        st = bind_socket(x);
        if (st != SF_OK)
            goto out_reset_now;
    }
    if (pipe2(x->wake, O_CLOEXEC) != 0) {
        st = SF_IO;
        goto out_reset_now;
    }
    if (pthread_create(&x->thread, NULL, run, x) != 0) {
        st = SF_ENOMEM;
        goto out_reset_now;
    }
    x->thread_started = true;
    if (x->resumed)
        sf_info("trace_control: carrying on after the reload on %s (%zu targets, %" PRId64
                " open windows kept)", x->cfg->socket, x->cfg->targets.n,
                (int64_t)atomic_load(&sf_component_counters(x->self)->values[TC_OPEN_WINDOWS]));
    else
        sf_info("trace_control: listening on %s (%zu targets)", x->cfg->socket,
                x->cfg->targets.n);
    return SF_OK;

out_reset_now:
    /* Not running: still try to put crashed windows back before giving up. */
    close_all(x, "shutdown");
    tc_shutdown(self);
    return st;
}

static void tc_shutdown(sf_component *self)
{
    tc_ctx *x = sf_component_ctx(self);

    if (x == NULL)
        return;
    if (x->thread_started) {
        atomic_store(&x->stop, true);
        if (write(x->wake[1], "x", 1) < 0)
            sf_debug("trace_control: wake-up write failed");
        pthread_join(x->thread, NULL);
        x->thread_started = false;
    }
    if (x->listen_fd >= 0) {
        close(x->listen_fd);
        x->listen_fd = -1;
    }
    if (x->socket_bound) {
        unlink(x->cfg->socket);
        x->socket_bound = false;
    }
    for (int i = 0; i < 2; i++) {
        if (x->wake[i] >= 0)
            close(x->wake[i]);
        x->wake[i] = -1;
    }
}

static void free_markers(tc_ctx *x)
{
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        sf_free(x->w[i].marker);
        x->w[i].marker = NULL;
    }
}

static void tc_destroy(sf_component *self)
{
    tc_ctx *x = sf_component_ctx(self);

    if (x == NULL)
        return;
    tc_shutdown(self);
    free_pending(x);
    free_markers(x);
    sf_free(x->w);
    sf_free(x);
    sf_component_set_ctx(self, NULL);
}

/* ---- reload ----------------------------------------------------------------------------- */

/* Reload: stop the thread but leave every window as it is (no closing
 * record, no engine request) and keep the socket bound: the whole context
 * is the parcel, taken over by the next instance (tc_resume). */
static void *tc_suspend(sf_component *self)
{
    tc_ctx *x = sf_component_ctx(self);

    if (x == NULL)
        return NULL;
    if (x->thread_started) {
        x->suspending = true;
        atomic_store(&x->stop, true);
        if (write(x->wake[1], "x", 1) < 0)
            sf_debug("trace_control: wake-up write failed");
        pthread_join(x->thread, NULL);
        x->thread_started = false;
    }
    for (int i = 0; i < 2; i++) {
        if (x->wake[i] >= 0)
            close(x->wake[i]);
        x->wake[i] = -1;
    }
    sf_component_set_ctx(self, NULL);   /* destroy: nothing left to do */
    return x;
}

/* Free a parcel whose windows are all idle (or given up on). */
static void parcel_free(tc_ctx *p)
{
    if (p->listen_fd >= 0)
        close(p->listen_fd);
    if (p->socket_bound)
        unlink(p->cfg->socket);
    free_pending(p);
    free_markers(p);
    sf_free(p->w);
    sf_free(p);
}

/* The next instance (self, created, not started) takes over what the
 * suspended one held: the windows of targets it still has, exactly as they
 * were (state, level, times, counts at their start, retry schedule), the
 * audit records still pending, and the listening socket when the path is
 * the same. Windows of targets the new config dropped are closed and reset
 * now (cause "reload"), as shutdown would. Self NULL: trace_control is gone
 * from the config: close and reset everything, as at shutdown. */
static void tc_resume(sf_component *self, void *parcel)
{
    tc_ctx *p = parcel, *x = self != NULL ? sf_component_ctx(self) : NULL;

    if (p == NULL)
        return;
    if (x == NULL) {
        close_all(p, "reload");
        parcel_free(p);
        return;
    }
    x->resumed = true;
    x->next_enforce_mono = p->next_enforce_mono;
    for (size_t i = 0; i < x->cfg->targets.n; i++)
        x->w[i].enforce_due = true;     /* targets new in this config: set them now */
    for (size_t i = 0; i < p->cfg->targets.n; i++) {
        tc_window *o = &p->w[i], *w = window_of(x, o->target->id);

        if (w == NULL)
            continue;
        w->carried = true;
        w->enforce_due = o->enforce_due;
        atomic_store(&w->level_now, atomic_load(&o->level_now));
        atomic_store(&w->level_set_wall, atomic_load(&o->level_set_wall));
        w->recorded = o->recorded;
        memcpy(w->last_error, o->last_error, sizeof(w->last_error));
        w->last_status = o->last_status;
        if (o->state == TC_IDLE && !o->closing && o->marker == NULL)
            continue;
        memcpy(w->id, o->id, sizeof(w->id));
        w->level = o->level;
        w->uid = o->uid;
        memcpy(w->reason, o->reason, sizeof(w->reason));
        w->start_wall = o->start_wall;
        w->end_wall = o->end_wall;
        w->end_mono = o->end_mono;
        w->at_start = o->at_start;
        w->next_try_mono = o->next_try_mono;
        w->delay = o->delay;
        w->reset_since_mono = o->reset_since_mono;
        w->attempts = o->attempts;
        w->closing = o->closing;
        w->close_due_mono = o->close_due_mono;
        w->ended_wall = o->ended_wall;
        w->grace_ms = o->grace_ms;
        memcpy(w->cause, o->cause, sizeof(w->cause));
        memcpy(w->note, o->note, sizeof(w->note));
        w->marker = o->marker;
        w->marker_len = o->marker_len;
        w->marker_tries = o->marker_tries;
        w->marker_next_mono = o->marker_next_mono;
        o->marker = NULL;
        o->closing = false;
        for (int k = 0; k < 2; k++) {
            atomic_store(&w->from_target[k], atomic_load(&o->from_target[k]));
            w->from_target_at_start[k] = o->from_target_at_start[k];
        }
        if (atomic_load(&o->counting) && w->target->match.n > 0) {
            atomic_store(&w->counting, true);
            atomic_fetch_add(&x->counting, 1);
        } else if (o->state == TC_OPEN) {
            count_start(x, w);      /* a match added by the new config: from now */
        }
        count_stop(p, o);
        set_state(x, w, o->state);
        o->state = TC_IDLE;
        if (w->state != TC_IDLE || w->closing)
            sf_info("trace_control: window '%s' on target '%s' kept across the reload", w->id,
                    w->target->id);
    }
    /* Older records first: they were due before anything the new one writes. */
    if (p->n_pending > 0) {
        char **all = sf_realloc(p->pending, (p->n_pending + x->n_pending) * sizeof(*all));

        if (all != NULL) {
            if (x->n_pending > 0)
                memcpy(all + p->n_pending, x->pending, x->n_pending * sizeof(*all));
            sf_free(x->pending);
            x->pending = all;
            x->n_pending += p->n_pending;
            x->audit_retry_mono = sf_now_ms();
            x->audit_delay = p->audit_delay;
            p->pending = NULL;
            p->n_pending = 0;
            set_pending_gauge(x);
        }
    }
    if (p->socket_bound && strcmp(p->cfg->socket, x->cfg->socket) == 0 &&
        (p->cfg->socket_group == NULL) == (x->cfg->socket_group == NULL) &&
        (p->cfg->socket_group == NULL || strcmp(p->cfg->socket_group, x->cfg->socket_group) == 0)) {
        x->listen_fd = p->listen_fd;
        x->socket_bound = true;
        p->listen_fd = -1;
        p->socket_bound = false;
    }
    close_all(p, "reload");         /* targets the new config dropped */
    parcel_free(p);
}

/* What the policy asks of trace-level windows (sf_describe.h). */
static bool tc_describe_windows(const void *config, sf_windows_desc *out)
{
    const sf_tc_config *c = config;

    *out = (sf_windows_desc){ .announced = c->markers.enabled, .announced_key = "markers.enabled",
                              .ends_on_loss = c->auto_revert.enabled,
                              .ends_on_loss_key = "auto_revert.enabled",
                              .rest_interval = c->enforce_interval,
                              .rest_interval_key = "enforce_interval" };
    return true;
}

/* Its series on the metrics endpoint, in sf_component_counters(self)->values. */
static const sf_metric_row tc_metric_rows[] = {
    [TC_ENGINE_FAILURES] = { .name = "spanfence_trace_control_engine_failures",
      .help = "Trace-level requests an engine did not take (retried as configured)." },
    [TC_OPEN_WINDOWS] = { .name = "spanfence_trace_control_open_windows", .gauge = true,
      .help = "Trace-level windows open or waiting for their engine to be reset." },
    [TC_AUDIT_PENDING] = { .name = "spanfence_trace_control_audit_pending", .gauge = true,
      .help = "Audit records that could not be written yet (retried; no window opens meanwhile).",
      .lost = "audit record", .lost_how = "could not be written (each is logged above)" },
    { 0 }
};

int sf_cli_trace_level(int argc, char **argv);   /* trace_control_cli.c */

static const sf_cli_verb tc_verbs[] = {
    { .name = "trace-level", .usage = "set|status|reset ...",
      .help = "trace-level windows (--help)", .run = sf_cli_trace_level },
    { 0 }
};

const sf_component_type sf_trace_control_extension_type = {
    .name = "trace_control",
    .kind = SF_KIND_EXTENSION,
    .description = "operator trace-level windows on LLM engines, audited and always reset",
    .config_size = sizeof(sf_tc_config),
    .config_map = sf_tc_config_map,
    .check = sf_tc_check,
    .create = tc_create,
    .start = tc_start,
    .shutdown = tc_shutdown,
    .destroy = tc_destroy,
    .suspend = tc_suspend,
    .resume = tc_resume,
    .describe_windows = tc_describe_windows,
    .metric_rows = tc_metric_rows,
    .metrics = tc_metrics,
    .verbs = tc_verbs,
};

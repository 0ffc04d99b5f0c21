/* pipeline/extensions/trace_control/trace_control.c: the `trace_control`
 * extension: operator trace-level windows on LLM engines, asked for over a
 * local unix socket, recorded in an append-only audit log, and always
 * closed: on time, on request, on shutdown, or at the next start after a
 * crash.
 *
 * DESIGN
 * - One thread owns everything here: the listening socket, every window's
 *   state and the audit log writes. It polls the socket and a wake-up pipe
 *   with a timeout equal to the next deadline (a window's end or a retry).
 *   A client is served to completion (read one line, at most one engine
 *   request, answer) before the next, so requests need no locks. An engine
 *   request blocks the loop for at most request_timeout.
 * - A target is IDLE, OPEN (level raised until `end`) or RESETTING (its
 *   window is closed and the resting level has not been confirmed yet:
 *   retried with doubling backoff, never given up while running).
 * - Audit records, in order: "open" (before the engine is asked), "close"
 *   (when the window ends: cause and the collector-wide span deltas), and
 *   "reset" (when the engine confirmed the resting level). A window whose
 *   "open" has no "reset" was left open by a crash: start() resets it.
 * - Per-engine counts: a target with a `match` (resource attributes) gets
 *   its spans counted while its window is open, by a span tap the service
 *   calls on receiver threads after every emitted batch. The tap returns at
 *   once unless some matching window is open (`counting`, atomic); it reads
 *   only atomics and the read-only config, and adds to per-target monotonic
 *   atomic counters, of which the window keeps the values at its start
 *   (like the collector-wide totals): no locks on the data path. A batch in
 *   flight when a window opens or closes may fall on either side, as for
 *   the collector-wide counts.
 * - The audit record is written before the engine is asked: if it cannot
 *   be written, nothing is changed (fail closed). */
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define TC_RECORD_MAX 32768       /* a closing record with the largest match fits */
#define TC_LINE_MAX 16384

/* Rows of tc_metric_rows: this extension's values in sf_counters. */
enum { TC_ENGINE_FAILURES, TC_OPEN_WINDOWS, TC_AUDIT_PENDING };

typedef enum tc_state { TC_IDLE, TC_OPEN, TC_RESETTING } tc_state;

typedef struct tc_window {
    const sf_tc_target *target;
    tc_state state;
    char id[128];                   /* "<target>-<start epoch ms>" (ids are at most 64) */
    int64_t level;
    unsigned uid;
    char reason[SF_TC_MAX_REASON * 6 + 1];  /* JSON-escaped */
    int64_t start_wall, end_wall;   /* epoch ms */
    int64_t end_mono;               /* CLOCK_MONOTONIC ms */
    sf_totals at_start;
    /* targets with a match: spans from this engine, since start (written by
     * the tap on receiver threads), and their values when the window opened */
    _Atomic bool counting;
    _Atomic uint64_t from_target[2];    /* [0] accepted, [1] refused */
    uint64_t from_target_at_start[2];
    /* RESETTING */
    int64_t next_try_mono, delay;
    unsigned attempts;
    /* taken over from the instance that ran before a reload: start() does
     * not recover this target from the audit log */
    bool known;
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

    if (s >= 3600)
        snprintf(buf, size, "%" PRId64 "h%02" PRId64 "m%02" PRId64 "s", s / 3600, s / 60 % 60,
                 s % 60);
    else if (s >= 60)
        snprintf(buf, size, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
    else
        snprintf(buf, size, "%" PRId64 "s", s);
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

static void set_pending_gauge(tc_ctx *x)
{
    atomic_store(&sf_component_counters(x->self)->values[TC_AUDIT_PENDING],
                 (int64_t)x->n_pending);
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

    sf_tc_format_time(w->start_wall, t0, sizeof(t0));
    sf_tc_format_time(w->end_wall, t1, sizeof(t1));
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
static void add_target_counts(char *buf, size_t size, size_t *len, const tc_window *w)
{
    const sf_strmap *m = &w->target->match;
    char k[SF_TC_MAX_MATCH_LEN * 6 + 1], v[SF_TC_MAX_MATCH_LEN * 6 + 1];

    add(buf, size, len, ",\"target_scope\":\"match\",\"match\":{");
    for (size_t i = 0; i < m->n; i++) {
        sf_tc_json_escape(m->keys[i], k, sizeof(k));
        sf_tc_json_escape(m->values[i], v, sizeof(v));
        add(buf, size, len, "%s\"%s\":\"%s\"", i ? "," : "", k, v);
    }
    add(buf, size, len, "},\"accepted_from_target\":%" PRIu64 ",\"refused_from_target\":%"
        PRIu64, atomic_load(&w->from_target[0]) - w->from_target_at_start[0],
        atomic_load(&w->from_target[1]) - w->from_target_at_start[1]);
}

/* The closing record: cause, and what the collector as a whole accepted,
 * exported and lost while the window was open ("scope":"collector": every
 * engine's spans); for a target with a `match`, also the spans accepted and
 * refused from that engine alone ("target_scope":"match"). */
static sf_status audit_close(tc_ctx *x, tc_window *w, const char *cause, const char *error)
{
    char rec[TC_RECORD_MAX], t0[32], t1[32], esc[512];
    size_t len = 0;
    int64_t now = sf_wall_ms();

    count_stop(x, w);

    sf_tc_format_time(now, t0, sizeof(t0));
    sf_tc_format_time(w->end_wall, t1, sizeof(t1));
    add(rec, sizeof(rec),
        &len, "{\"event\":\"close\",\"window\":\"%s\",\"target\":\"%s\",\"level\":%" PRId64
        ",\"cause\":\"%s\",\"end\":\"%s\",\"planned_end\":\"%s\"", w->id, w->target->id,
        w->level, cause, t0, t1);
    if (error != NULL) {
        sf_tc_json_escape(error, esc, sizeof(esc));
        add(rec, sizeof(rec), &len, ",\"error\":\"%s\"", esc);
    }
    if (strcmp(cause, "recovered") == 0) {
        /* the counters died with the crashed process */
        add(rec, sizeof(rec), &len, ",\"scope\":\"none\"}");
    } else {
        sf_totals t;
        uint64_t lost = 0;

        sf_component_totals(x->self, &t);
        for (int r = 0; r < SF_REASON_COUNT; r++)
            lost += (t.refused[r] - w->at_start.refused[r]) +
                    (t.dropped[r] - w->at_start.dropped[r]) +
                    (t.send_failed[r] - w->at_start.send_failed[r]);
        lost += t.enqueue_failed - w->at_start.enqueue_failed;
        add(rec, sizeof(rec), &len,
            ",\"scope\":\"collector\",\"accepted\":%" PRIu64 ",\"exported\":%" PRIu64
            ",\"enqueue_failed\":%" PRIu64 ",\"lost\":%" PRIu64,
            t.accepted - w->at_start.accepted, t.exported - w->at_start.exported,
            t.enqueue_failed - w->at_start.enqueue_failed, lost);
        add_reasons(rec, sizeof(rec), &len, "refused", t.refused, w->at_start.refused);
        add_reasons(rec, sizeof(rec), &len, "dropped", t.dropped, w->at_start.dropped);
        add_reasons(rec, sizeof(rec), &len, "send_failed", t.send_failed,
                    w->at_start.send_failed);
        if (w->target->match.n > 0)
            add_target_counts(rec, sizeof(rec), &len, w);
        add(rec, sizeof(rec), &len, "}");
    }
    return audit(x, rec);
}

/* ---- engines ---------------------------------------------------------------------- */

static void set_idle(tc_ctx *x, tc_window *w)
{
    w->state = TC_IDLE;
    atomic_fetch_sub(&sf_component_counters(x->self)->values[TC_OPEN_WINDOWS], 1);
}

/* One attempt at the resting level; on failure schedule the next one. */
static sf_status try_reset(tc_ctx *x, tc_window *w)
{
    char err[256], rec[TC_RECORD_MAX], t0[32];
    sf_status st;

    w->attempts++;
    st = sf_tc_engine_set(w->target, x->cfg->resting_level, x->cfg->request_timeout, err,
                          sizeof(err));
    if (st == SF_OK) {
        set_idle(x, w);
        sf_tc_format_time(sf_wall_ms(), t0, sizeof(t0));
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
    sf_warn("trace_control: target '%s' not reset to level %" PRId64 " (attempt %u): %s; "
            "retrying in %" PRId64 "ms", w->target->id, x->cfg->resting_level, w->attempts, err,
            w->delay);
    w->next_try_mono = sf_now_ms() + w->delay;
    w->delay = w->delay * 2 > x->cfg->retry.max_interval ? x->cfg->retry.max_interval
                                                          : w->delay * 2;
    return st;
}

static void begin_reset(tc_ctx *x, tc_window *w)
{
    w->state = TC_RESETTING;
    w->attempts = 0;
    w->delay = x->cfg->retry.initial_interval;
    w->next_try_mono = sf_now_ms();
}

/* Close an OPEN window (closing record) and ask for the resting level. */
static sf_status end_window(tc_ctx *x, tc_window *w, const char *cause)
{
    audit_close(x, w, cause, NULL);
    sf_info("trace_control: window '%s' on target '%s' closed (%s)", w->id, w->target->id, cause);
    begin_reset(x, w);
    return try_reset(x, w);
}

/* ---- requests ----------------------------------------------------------------------- */

typedef struct reply {
    char buf[SF_TC_MAX_REQUEST * 4];
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
    sf_tc_json_escape(msg, esc, sizeof(esc));
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
    tc_window *w;
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
    if (w->state != TC_IDLE) {
        format_left(w->end_mono - sf_now_ms(), err, sizeof(err));
        if (w->state == TC_OPEN)
            answer(r, false, "target '%s' already has a window at level %" PRId64
                   " (%s left); reset it first", target, w->level, err);
        else
            answer(r, false, "target '%s' is still being reset to level %" PRId64, target,
                   x->cfg->resting_level);
        return;
    }
    w->level = level;
    w->uid = uid;
    sf_tc_json_escape(reason, w->reason, sizeof(w->reason));
    w->start_wall = sf_wall_ms();
    w->end_wall = w->start_wall + for_ms;
    w->end_mono = sf_now_ms() + for_ms;
    snprintf(w->id, sizeof(w->id), "%s-%" PRId64, target, w->start_wall);
    sf_component_totals(x->self, &w->at_start);
    count_start(x, w);
    if (audit_open(x, w) != SF_OK) {
        count_stop(x, w);
        answer(r, false, "the audit log '%s' cannot be written; nothing was changed",
               x->cfg->audit_log);
        return;
    }
    atomic_fetch_add(&sf_component_counters(x->self)->values[TC_OPEN_WINDOWS], 1);
    st = sf_tc_engine_set(w->target, level, x->cfg->request_timeout, err, sizeof(err));
    if (st != SF_OK) {
        /* The engine may or may not have taken it (a timeout): make sure it
         * goes back to the resting level. */
        sf_count(&sf_component_counters(x->self)->values[TC_ENGINE_FAILURES], 1);
        sf_warn("trace_control: target '%s' did not take level %" PRId64 ": %s", target, level,
                err);
        audit_close(x, w, "set_failed", err);
        begin_reset(x, w);
        w->next_try_mono = sf_now_ms() + w->delay;
        answer(r, false, "engine '%s' did not take level %" PRId64 ": %s; it will be reset to %"
               PRId64, target, level, err, x->cfg->resting_level);
        return;
    }
    w->state = TC_OPEN;
    sf_tc_format_time(w->end_wall, until, sizeof(until));
    sf_info("trace_control: window '%s': target '%s' at level %" PRId64 " until %s (uid %u)",
            w->id, target, level, until, uid);
    format_left(for_ms, err, sizeof(err));
    answer(r, true, "target '%s' is at level %" PRId64 " for %s, until %s (window %s)", target,
           level, err, until, w->id);
}

static void op_reset(tc_ctx *x, const char *req, size_t len, unsigned uid, reply *r)
{
    char target[128];
    tc_window *w;

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
    if (w->state == TC_OPEN ? end_window(x, w, "reset") == SF_OK : try_reset(x, w) == SF_OK) {
        if (x->n_pending > 0) {
            answer(r, false, "target '%s' is back at level %" PRId64 ", but the audit log '%s' "
                   "cannot be written: %zu record%s pending (retried; logged by the collector)",
                   target, x->cfg->resting_level, x->cfg->audit_log, x->n_pending,
                   x->n_pending == 1 ? "" : "s");
            return;
        }
        answer(r, true, "target '%s' is back at level %" PRId64, target, x->cfg->resting_level);
        return;
    }
    answer(r, false, "window on '%s' closed, but the engine did not answer: reset to %" PRId64
           " is being retried", target, x->cfg->resting_level);
}

static void op_status(tc_ctx *x, reply *r)
{
    char text[2048], esc[4096], left[32], until[32];
    size_t tl = 0, n = 0;
    int64_t now = sf_now_ms();

    r->len = 0;
    add(r->buf, sizeof(r->buf), &r->len, "{\"ok\":true,\"windows\":[");
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];

        if (w->state == TC_IDLE)
            continue;
        format_left(w->state == TC_OPEN ? w->end_mono - now : 0, left, sizeof(left));
        sf_tc_format_time(w->end_wall, until, sizeof(until));
        add(r->buf, sizeof(r->buf), &r->len,
            "%s{\"target\":\"%s\",\"state\":\"%s\",\"level\":%" PRId64 ",\"uid\":%u,"
            "\"window\":\"%s\",\"planned_end\":\"%s\",\"left_ms\":%" PRId64 ",\"reason\":\"%s\"}",
            n ? "," : "", w->target->id, w->state == TC_OPEN ? "open" : "resetting", w->level,
            w->uid, w->id, until, w->state == TC_OPEN ? w->end_mono - now : 0, w->reason);
        if (w->state == TC_OPEN)
            add(text, sizeof(text), &tl, "%s: level %" PRId64 ", %s left (until %s), uid %u\n",
                w->target->id, w->level, left, until, w->uid);
        else
            add(text, sizeof(text), &tl, "%s: window closed, reset to level %" PRId64
                " pending (%u attempts)\n", w->target->id, x->cfg->resting_level, w->attempts);
        n++;
    }
    if (n == 0)
        add(text, sizeof(text), &tl, "no open windows\n");
    sf_tc_json_escape(text, esc, sizeof(esc));
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

    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];

        if (w->state == TC_OPEN && now >= w->end_mono)
            end_window(x, w, "expired");
        else if (w->state == TC_RESETTING && now >= w->next_try_mono)
            try_reset(x, w);
    }
    if (x->n_pending > 0 && now >= x->audit_retry_mono)
        audit_flush(x);
}

static int64_t next_deadline(const tc_ctx *x)
{
    int64_t next = INT64_MAX;

    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        const tc_window *w = &x->w[i];

        if (w->state == TC_OPEN && w->end_mono < next)
            next = w->end_mono;
        else if (w->state == TC_RESETTING && w->next_try_mono < next)
            next = w->next_try_mono;
    }
    if (x->n_pending > 0 && x->audit_retry_mono < next)
        next = x->audit_retry_mono;
    return next;
}

/* Shutdown: close every open window and try, for at most shutdown_timeout,
 * to get every engine back to the resting level. What is left is reset at
 * the next start (its "open" record has no "reset"). */
static void close_all(tc_ctx *x, const char *cause)
{
    int64_t deadline = sf_now_ms() + x->cfg->shutdown_timeout;

    for (size_t i = 0; i < x->cfg->targets.n; i++)
        if (x->w[i].state == TC_OPEN)
            end_window(x, &x->w[i], cause);
    for (;;) {
        int64_t next = next_deadline(x), now = sf_now_ms();

        if (next == INT64_MAX)
            return;
        if (next >= deadline || now >= deadline) {
            if (x->n_pending > 0)
                audit_flush(x);     /* a last try before giving up */
            break;
        }
        if (next > now)
            poll(NULL, 0, (int)(next - now));
        due(x);
    }
    for (size_t i = 0; i < x->cfg->targets.n; i++)
        if (x->w[i].state != TC_IDLE)
            sf_error("trace_control: target '%s' could not be reset before exit; it will be reset "
                     "at the next start", x->w[i].target->id);
    for (size_t i = 0; i < x->n_pending; i++)
        sf_error("trace_control: audit record LOST: '%s' could not be written before exit: %s",
                 x->cfg->audit_log, x->pending[i]);
}

static void *run(void *arg)
{
    tc_ctx *x = arg;

    due(x);     /* windows recovered from a crash */
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

/* Read the audit log: every target whose last "open" has no "reset" was
 * left at a raised level by a process that died; schedule its reset. */
static sf_status recover(tc_ctx *x)
{
    FILE *f = fopen(x->cfg->audit_log, "re");
    char *line;
    size_t n = 0;

    if (f == NULL)
        return errno == ENOENT ? SF_OK : SF_IO;
    line = sf_malloc(TC_LINE_MAX);
    if (line == NULL) {
        fclose(f);
        return SF_ENOMEM;
    }
    while (fgets(line, TC_LINE_MAX, f) != NULL) {
        char ev[16], target[65], id[128];
        size_t len = strlen(line);
        tc_window *w;
        int64_t level = 0;

        n++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (sf_tc_json_str(line, len, "event", ev, sizeof(ev)) != SF_OK ||
            sf_tc_json_str(line, len, "target", target, sizeof(target)) != SF_OK ||
            sf_tc_json_str(line, len, "window", id, sizeof(id)) != SF_OK)
            continue;
        w = window_of(x, target);
        if (w == NULL || w->known)
            continue;
        if (strcmp(ev, "open") == 0) {
            sf_tc_json_int(line, len, "level", &level);
            w->state = TC_RESETTING;
            w->level = level;
            snprintf(w->id, sizeof(w->id), "%s", id);
        } else if (strcmp(ev, "reset") == 0 && strcmp(w->id, id) == 0) {
            w->state = TC_IDLE;
        }
    }
    fclose(f);
    sf_free(line);
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];

        if (w->state != TC_RESETTING || w->known)
            continue;
        sf_warn("trace_control: window '%s' on target '%s' was left open by a previous run; "
                "resetting it", w->id, w->target->id);
        w->end_wall = sf_wall_ms();
        atomic_fetch_add(&sf_component_counters(x->self)->values[TC_OPEN_WINDOWS], 1);
        audit_close(x, w, "recovered", NULL);
        begin_reset(x, w);
    }
    return SF_OK;
}

/* ---- lifecycle --------------------------------------------------------------------------- */

static sf_status tc_create(sf_component *self, const void *config)
{
    const sf_tc_config *cfg = config;
    tc_ctx *x = sf_calloc(1, sizeof(*x));
    bool matching = false;

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
    for (size_t i = 0; i < cfg->targets.n; i++) {
        x->w[i].target = &cfg->targets.v[i];
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

static void tc_destroy(sf_component *self)
{
    tc_ctx *x = sf_component_ctx(self);

    if (x == NULL)
        return;
    tc_shutdown(self);
    free_pending(x);
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
    for (size_t i = 0; i < p->cfg->targets.n; i++) {
        tc_window *o = &p->w[i], *w = window_of(x, o->target->id);

        if (w == NULL)
            continue;
        w->known = true;
        if (o->state == TC_IDLE)
            continue;
        w->state = o->state;
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
        w->attempts = o->attempts;
        for (int k = 0; k < 2; k++) {
            atomic_store(&w->from_target[k], atomic_load(&o->from_target[k]));
            w->from_target_at_start[k] = o->from_target_at_start[k];
        }
        if (atomic_load(&o->counting) && w->target->match.n > 0) {
            atomic_store(&w->counting, true);
            atomic_fetch_add(&x->counting, 1);
        } else if (w->state == TC_OPEN) {
            count_start(x, w);      /* a match added by the new config: from now */
        }
        count_stop(p, o);
        o->state = TC_IDLE;
        atomic_fetch_add(&sf_component_counters(x->self)->values[TC_OPEN_WINDOWS], 1);
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

/* Its series on the metrics endpoint, in sf_component_counters(self)->values. */
static const sf_metric_row tc_metric_rows[] = {
    [TC_ENGINE_FAILURES] = { .name = "spanfence_trace_control_engine_failures",
      .help = "Trace-level requests an engine did not take (each is retried with backoff)." },
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
    .metric_rows = tc_metric_rows,
    .verbs = tc_verbs,
};

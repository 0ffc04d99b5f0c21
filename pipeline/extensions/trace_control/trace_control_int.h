/* pipeline/extensions/trace_control/trace_control_int.h: what the files of
 * the trace_control extension share and nothing else sees: a target's
 * window state, the extension's context, and the functions one part
 * (windows, audit, engines, requests, recovery) offers the others. All of
 * them run on the control thread unless their comment says otherwise. */
#ifndef SF_TRACE_CONTROL_INT_H
#define SF_TRACE_CONTROL_INT_H

#include "trace_control.h"
#include "trace_control_latency.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include <json-c/json.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define TC_RECORD_MAX 32768       /* a closing record with the largest match fits */
#define TC_LINE_MAX 16384
#define TC_MARKER_TRIES 600       /* a marker waits for the exporters at most 600 x 100 ms */
#define TC_MARKER_WAIT 100
#define TC_DRAIN_MAX 30000        /* a closing record waits at most 30 s for queued spans */
#define TC_DRAIN_STEP 100
#define TC_OWN_STEP 100           /* how often a window's backlog is looked at */

/* Rows of tc_metric_rows: this extension's values in sf_counters. */
enum { TC_ENGINE_FAILURES, TC_OPEN_WINDOWS, TC_AUDIT_PENDING, TC_OUT_OF_BAND };

typedef enum tc_state { TC_IDLE, TC_OPEN, TC_RESETTING, TC_FAILED } tc_state;

/* Whether a window's spans come (tc_window.arrival): none yet, within the
 * target's arrival_timeout; some came; none came within it. */
enum { TC_ARRIVAL_WAITING, TC_ARRIVAL_ARRIVING, TC_ARRIVAL_NONE };
#define TC_ARRIVAL_STEP 500       /* ms: how often a window with none is looked at again */

/* recorded: what the audit log last said of a target's level in this run */
enum { TC_REC_NONE = -2, TC_REC_UNKNOWN = -1 };

/* What the engine said it dropped (engine_log), per target: drop messages
 * (events), those that said how many (sized), the trace ops they said,
 * and logs requests of its receiver that could not be read (unread). */
enum { TC_ENG_EVENTS, TC_ENG_SIZED, TC_ENG_OPS, TC_ENG_UNREAD, TC_ENG_COUNT };

/* A target's drop patterns, compiled (read-only after create). */
typedef struct tc_drops {
    size_t n;
    pcre2_code *re[SF_TC_MAX_DROP_PATTERNS];
    uint32_t ops_group[SF_TC_MAX_DROP_PATTERNS];   /* 0: the pattern has no `ops` */
    pcre2_match_context *mctx;
} tc_drops;

typedef struct tc_engine_drops {
    uint64_t events, sized, ops;
} tc_engine_drops;

/* What the collector (and the target, with a match) did since w opened. */
typedef struct tc_counts {
    uint64_t accepted, exported, refused, dropped, send_failed, enqueue_failed, lost;
    uint64_t from_target[2];
    uint64_t engine[TC_ENG_COUNT];  /* targets with an engine_log */
    /* lost: the window's own spans (accepted or refused while it was open
     * or in its grace period): refused at once, or dropped or failed after
     * they were queued (post_lost); lost_collector: every span the
     * collector lost meanwhile, those queued before the window included */
    uint64_t post_lost, lost_collector;
    sf_totals now;
} tc_counts;

/* What the last closed window of a target said (status, metrics). */
typedef struct tc_closed {
    bool valid;
    char id[128];
    char cause[16];
    uint64_t accepted, exported, lost, queued;
    uint64_t engine_dropped;
    bool complete;
    const char *capture;            /* complete, complete at the collector, empty, incomplete */
    tc_lat_view lat;                /* its engine's latency before and during it */
    int64_t closed_wall;            /* epoch ms */
} tc_closed;

/* A window's own spans leave the queues after those queued before it
 * opened (`backlog`; the queues keep order): once as many have left, what
 * leaves is the window's. `from`: the totals when the control thread first
 * saw the backlog gone (`ready`; checked every TC_OWN_STEP ms; at once when
 * nothing was queued). A loss between the opening and `from`, when spans
 * of both left meanwhile, cannot be told apart: it is charged to the
 * window (never a capture called complete that may have lost). */
typedef struct tc_own {
    uint64_t backlog;
    bool ready;
    sf_totals from;
} tc_own;

typedef struct tc_window {
    const sf_tc_target *target;
    tc_state state;
    char id[128];                   /* "<target>-<start epoch ms>" (ids are at most 64) */
    int64_t level;
    unsigned uid;
    char reason[SF_TC_MAX_REASON + 1];
    int64_t start_wall, end_wall;   /* epoch ms; end_wall: planned */
    int64_t end_mono;               /* CLOCK_MONOTONIC ms */
    sf_totals at_start;
    tc_own own;
    /* targets with a match: spans from this engine, since start (written by
     * the tap on receiver threads), and their values when the window opened */
    _Atomic bool counting;
    _Atomic uint64_t from_target[2];    /* [0] accepted, [1] refused */
    uint64_t from_target_at_start[2];
    /* targets with an engine_log: what its engine said it dropped since
     * start (the log tap writes it on receiver threads), as from_target */
    tc_drops drops;
    _Atomic bool log_counting;
    _Atomic uint64_t engine[TC_ENG_COUNT];
    uint64_t engine_at_start[TC_ENG_COUNT];
    /* targets with engine_metrics: the latency guard (trace_control_latency.c) */
    tc_latency *lat;
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
    char last_close[768];           /* the last closed window, for status */
    tc_closed closed;               /* the same, as figures */
    /* grace period over, spans accepted by then still leaving: the counts
     * taken then, and how long the closing record waits for them */
    bool draining;
    tc_counts at_end;
    int64_t drain_since_mono, drain_until_mono;
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
    /* out of band: spans from this target (by its match) while it rests,
     * counted by the tap; the control thread restores the resting level
     * and records them (oob_seen: how many it has recorded) */
    _Atomic bool resting;           /* idle, no window closing, resting level taken */
    _Atomic uint64_t oob_spans;
    _Atomic uint64_t oob_seen;
    int64_t oob_next_mono;          /* at most one record a second per target */
    /* taken over from the instance that ran before a reload: start() does
     * not recover this target from the audit log */
    bool carried;
    /* arrival (control thread): when the window opened (CLOCK_MONOTONIC
     * ms), and what was last said of its spans (TC_ARRIVAL_*) */
    int64_t open_mono;
    int arrival;
} tc_window;

/* One control-socket connection, served by the poll loop without ever
 * blocking it: its request is read as it arrives, its answer written as the
 * socket takes it, and it is cut off at its deadline whatever it does. */
#define TC_MAX_CLIENTS 16
#define TC_CLIENT_DEADLINE 2000     /* ms from accept to the whole request */

typedef struct tc_client {
    int fd;                         /* -1: a free slot */
    unsigned uid;                   /* the peer's (SO_PEERCRED) */
    int64_t deadline_mono;
    size_t in_len;
    char in[SF_TC_MAX_REQUEST + 1];
    char *out;                      /* the answer, while it is being sent */
    size_t out_len, out_off;
} tc_client;

/* A target's window as the metrics thread sees it: copied from its
 * tc_window by the control thread after every turn of its loop
 * (sf_tc_publish), under tc_ctx.pub_mu; the live counts are taken from the
 * collector's totals (atomics) against at_start. */
typedef struct tc_pub {
    const char *state;              /* idle, open, closing, resetting, reset_failed */
    bool window;                    /* a window open or in its grace period */
    char id[128];
    int64_t level, end_wall, end_mono;
    sf_totals at_start;
    tc_own own;
    uint64_t from_target_at_start[2];
    uint64_t engine_at_start[TC_ENG_COUNT];
    tc_closed last;
    int64_t open_mono;
} tc_pub;

typedef struct tc_ctx {
    sf_component *self;
    const sf_tc_config *cfg;
    tc_window *w;                   /* one per target, same order */
    int listen_fd;
    int wake[2];
    int oob_fd;                     /* eventfd: the tap saw spans out of band */
    pthread_t thread;
    bool thread_started;
    bool socket_bound;
    _Atomic bool stop;
    _Atomic unsigned counting;      /* windows whose spans the tap counts */
    _Atomic unsigned log_counting;  /* windows whose engine's log the log tap reads */
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
    tc_client clients[TC_MAX_CLIENTS];
    pthread_mutex_t pub_mu;         /* guards pub */
    tc_pub *pub;                    /* one per target, same order */
} tc_ctx;

/* ---- windows (trace_control_windows.c) ---- */

/* "1h02m03s", "4m05s", "6s": time left, rounded up. */
void sf_tc_format_left(int64_t ms, char *buf, size_t size);
/* Change w's state, keeping the open-windows gauge. */
void sf_tc_window_set_state(tc_ctx *x, tc_window *w, tc_state st);
/* The engine took `level` now (read by the metrics thread). */
void sf_tc_window_took_level(tc_window *w, int64_t level);
/* Receiver threads, after every emitted batch (sf_span_tap_fn). */
void sf_tc_window_tap(void *ctx, const uint8_t *raw, size_t len, size_t spans, bool accepted);
/* Start / stop counting the spans of w's target (when it has a match). */
void sf_tc_window_count_start(tc_ctx *x, tc_window *w);
void sf_tc_window_count_stop(tc_ctx *x, tc_window *w);
/* What the collector (and the target) did since w opened. */
void sf_tc_window_counts(tc_ctx *x, const tc_window *w, tc_counts *c);
/* The same from the figures taken at a window's start (any thread). */
void sf_tc_counts_since(tc_ctx *x, const tc_window *w, const sf_totals *at_start,
                        const tc_own *own, const uint64_t *from_target_at_start,
                        const uint64_t *engine_at_start, tc_counts *c);
/* Control thread: at open, what is queued before w (its backlog). */
void sf_tc_window_own_start(tc_ctx *x, tc_window *w);
/* Control thread: take w->own.from once w's backlog has left the queues. */
void sf_tc_window_track(tc_ctx *x, tc_window *w);
/* Control thread: copy every target's window into x->pub for the metrics
 * thread (status, per-window series; trace_control.c). */
void sf_tc_publish(tc_ctx *x);
/* Hand w's built marker to the pipeline; what the record says of it. */
const char *sf_tc_marker_send(tc_ctx *x, tc_window *w);
/* Write w's closing record and send its marker; the audit status. */
sf_status sf_tc_window_close(tc_ctx *x, tc_window *w, long status);

/* Control thread: spans came out of band: record, warn, count, and set
 * the resting level again now. */
void sf_tc_engine_out_of_band(tc_ctx *x);
/* Control thread: keep w->resting in step with its state. */
void sf_tc_window_watch(tc_ctx *x, tc_window *w);
/* Receiver threads (sf_span_gate): whether a target that drops its
 * out-of-band spans rests now; whether one ResourceSpans leaves (false:
 * it is such a target's, dropped with reason out_of_band). */
bool sf_tc_gate_armed(void *ctx);
bool sf_tc_gate_keeps(void *ctx, const uint8_t *rs, size_t len, sf_reason *reason);

/* Control thread, at open: w's arrival is watched from now. */
void sf_tc_window_arrival_start(tc_window *w);
/* The spans from w's target (by its match; without one, every span the
 * collector took) since it opened: what /status shows as arrival
 * (TC_ARRIVAL_*), from figures published at open (any thread). */
int sf_tc_arrival_of(tc_ctx *x, const tc_window *w, int64_t open_mono,
                     const sf_totals *at_start, const uint64_t *from_target_at_start);
/* Control thread: say (log, audit) once when an open window's arrival
 * turns none, and when spans then come. */
void sf_tc_window_arrival_check(tc_ctx *x, tc_window *w);
extern const char *const sf_tc_arrival_names[];

/* ---- the engine's own log (trace_control_engine_log.c) ---- */

struct Opentelemetry__Proto__Common__V1__KeyValue;
/* The string value of attribute `key` in kv[0, n), or NULL (an attribute
 * of another type counts as missing). Read by the log and latency scans. */
const char *sf_tc_str_attr(struct Opentelemetry__Proto__Common__V1__KeyValue *const *kv, size_t n,
                           const char *key);

/* Compile el's drop patterns into d (at create); SF_CONFIG, SF_ENOMEM. */
sf_status sf_tc_drops_compile(const sf_tc_engine_log *el, tc_drops *d);
void sf_tc_drops_free(tc_drops *d);
/* The drop messages in one ExportLogsServiceRequest: the records of el's
 * engine (its match) whose string body matches one of d's patterns.
 * SF_INVALID for bytes that are not a logs request the codec takes. Any
 * thread. */
sf_status sf_tc_engine_log_scan(const sf_tc_engine_log *el, const tc_drops *d,
                                const uint8_t *raw, size_t len, tc_engine_drops *out);
/* Receiver threads, after every emitted logs request (sf_log_tap_fn). */
void sf_tc_log_tap(void *ctx, const char *receiver, const uint8_t *raw, size_t len,
                   bool accepted);

/* ---- the engine's latency (trace_control_latency.c) ---- */

/* Receiver threads, after every emitted metrics request (sf_metrics_tap_fn). */
void sf_tc_metrics_tap(void *ctx, const char *receiver, const uint8_t *raw, size_t len,
                       bool accepted);

/* ---- audit records (trace_control_audit.c) ---- */

/* snprintf at buf + *len, advancing *len; nothing once buf is full. */
void sf_tc_add(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void sf_tc_audit_set_gauge(tc_ctx *x);
/* Write the pending records in order; SF_OK when none is left. */
sf_status sf_tc_audit_flush(tc_ctx *x);
/* Append `record` after the pending ones and write them all; SF_IO when it
 * stays pending (logged whole). */
sf_status sf_tc_audit(tc_ctx *x, const char *record);
void sf_tc_audit_free_pending(tc_ctx *x);
/* sf_tc_audit for a record built with sf_tc_record_new (puts rec). */
sf_status sf_tc_audit_record(tc_ctx *x, struct json_object *rec);
/* The "open" record, written at once or not at all (SF_IO). */
sf_status sf_tc_audit_open(tc_ctx *x, const tc_window *w);

/* ---- engines (trace_control_engines.c) ---- */

/* One attempt at the resting level (IDLE, RESETTING again, or FAILED). */
sf_status sf_tc_engine_try_reset(tc_ctx *x, tc_window *w);
/* w goes RESETTING, first attempt due now. */
void sf_tc_engine_begin_reset(tc_ctx *x, tc_window *w);
/* End an OPEN window: reset now, closing record after the grace period. */
sf_status sf_tc_window_end(tc_ctx *x, tc_window *w, const char *cause, const char *note);
/* Set an IDLE or FAILED target to the resting level. */
sf_status sf_tc_engine_enforce(tc_ctx *x, tc_window *w);
/* auto_revert: whether an open window must end now (the reason in why). */
bool sf_tc_window_losing(tc_ctx *x, const tc_window *w, char *why, size_t size);

/* ---- requests (trace_control_requests.c) ---- */

/* The window of target `target`, or NULL. */
tc_window *sf_tc_window_of(tc_ctx *x, const char *target);
/* Mark every client slot free (at create). */
void sf_tc_clients_init(tc_ctx *x);
/* Whether a slot is free for another connection. */
bool sf_tc_clients_room(const tc_ctx *x);
/* Accept the connections waiting on the listening socket (non-blocking). */
void sf_tc_clients_accept(tc_ctx *x);
/* Fill p with the clients' fds (at most TC_MAX_CLIENTS); their count. */
size_t sf_tc_clients_pollfds(const tc_ctx *x, struct pollfd *p);
/* Read, serve and answer what p (from sf_tc_clients_pollfds) says is
 * ready; cut off clients past their deadline. Never blocks. */
void sf_tc_clients_io(tc_ctx *x, const struct pollfd *p, size_t n);
/* The earliest client deadline (CLOCK_MONOTONIC ms), INT64_MAX: none. */
int64_t sf_tc_clients_deadline(const tc_ctx *x);
/* Close every connection (the thread is stopping). */
void sf_tc_clients_close(tc_ctx *x);

/* ---- crash recovery (trace_control_recovery.c) ---- */

/* Schedule the reset of every window the audit log says a crash left open. */
sf_status sf_tc_recover(tc_ctx *x);

#endif

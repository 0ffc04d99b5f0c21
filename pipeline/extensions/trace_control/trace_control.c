/* pipeline/extensions/trace_control/trace_control.c: the `trace_control`
 * extension: operator trace-level windows on LLM engines, asked for over a
 * local unix socket, recorded in an append-only audit log, announced in the
 * capture itself (one marker span per window), and always closed: on time,
 * on request, when the capture is losing spans, on shutdown, or at the next
 * start after a crash. Between windows it holds every engine at the resting
 * level. This file holds the thread, the control socket, the metrics and
 * the component's lifecycle and reload; the rest is split by concern:
 * trace_control_windows.c (state, counts, markers, closing record),
 * _audit.c (records, pending ones), _engines.c (resets, enforcement,
 * auto_revert), _requests.c (set/reset/status), _recovery.c (after a crash),
 * sharing trace_control_int.h.
 *
 * DESIGN
 * - One thread owns everything here: the listening socket, every target's
 *   state and the audit log writes. It polls the socket, its clients and a
 *   wake-up pipe with a timeout equal to the next deadline (a window's end,
 *   a loss check, a grace period's end, a retry, an enforcement round, a
 *   client's deadline). Client I/O never blocks it: up to TC_MAX_CLIENTS
 *   connections are read and answered non-blocking as they become ready,
 *   each cut off 2 s after accept (and 2 s after its answer is ready), so
 *   no client, slow or silent, holds a window past its end. A request is
 *   served on this thread once its line is in, so requests need no locks.
 *   An engine request blocks the loop for at most request_timeout.
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
 *   With auto_revert, an open window whose losses (its own spans refused,
 *   dropped or failed, not those queued before it opened: tc_own; and the
 *   target's own refused spans when it has a
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
#include "trace_control_int.h"
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
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- the thread ------------------------------------------------------------------------ */

static void due(tc_ctx *x)
{
    int64_t now = sf_now_ms();
    bool check_loss = false;
    char why[512];

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
                sf_tc_engine_enforce(x, w);
        }
        if (w->state == TC_OPEN && now >= w->end_mono)
            sf_tc_window_end(x, w, "expired", NULL);
        else if (w->state == TC_OPEN && check_loss && sf_tc_window_losing(x, w, why, sizeof(why)))
            sf_tc_window_end(x, w, "loss", why);
        else if (w->state == TC_OPEN && x->cfg->auto_revert.enabled &&
                 sf_tc_latency_rising(w->lat, &x->cfg->auto_revert.max_latency_increase, why,
                                      sizeof(why)))
            sf_tc_window_end(x, w, "latency", why);
        else if (w->state == TC_RESETTING && now >= w->next_try_mono)
            sf_tc_engine_try_reset(x, w);
        sf_tc_window_track(x, w);
        sf_tc_window_arrival_check(x, w);
        if (w->closing && sf_now_ms() >= w->close_due_mono)
            sf_tc_window_close(x, w, 0);
        if (w->marker != NULL && sf_now_ms() >= w->marker_next_mono)
            sf_tc_marker_send(x, w);
        sf_tc_window_watch(x, w);
    }
    if (x->n_pending > 0 && now >= x->audit_retry_mono)
        sf_tc_audit_flush(x);
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
        /* spans out of band not yet recorded (one record a second): their
         * record is due then, whether or not more come */
        if (atomic_load(&w->oob_spans) != atomic_load(&w->oob_seen) && w->oob_next_mono < next)
            next = w->oob_next_mono;
        if (w->state == TC_OPEN && w->arrival != TC_ARRIVAL_ARRIVING) {
            int64_t a = w->arrival == TC_ARRIVAL_WAITING
                        ? w->open_mono + w->target->arrival_timeout : sf_now_ms() + TC_ARRIVAL_STEP;

            if (a < next)
                next = a;
        }
        if (!w->own.ready && (w->state == TC_OPEN || w->state == TC_RESETTING || w->closing) &&
            sf_now_ms() + TC_OWN_STEP < next)
            next = sf_now_ms() + TC_OWN_STEP;
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
            sf_tc_window_end(x, w, cause, NULL);
        if (w->closing) {
            snprintf(w->note, sizeof(w->note), "grace period cut short (%s)", cause);
            sf_tc_window_close(x, w, 0);
        }
        if (w->marker != NULL)
            sf_tc_marker_send(x, w);
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
                sf_tc_audit_flush(x);     /* a last try before giving up */
            break;
        }
        if (next > now)
            poll(NULL, 0, (int)(next - now));
        now = sf_now_ms();
        for (size_t i = 0; i < x->cfg->targets.n; i++)
            if (x->w[i].state == TC_RESETTING && now >= x->w[i].next_try_mono)
                sf_tc_engine_try_reset(x, &x->w[i]);
        if (x->n_pending > 0 && now >= x->audit_retry_mono)
            sf_tc_audit_flush(x);
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
    sf_tc_publish(x);
    while (!atomic_load(&x->stop)) {
        /* [0] wake-up, [1] spans out of band, [2] the listening socket (while
         * a slot is free), then clients */
        struct pollfd p[3 + TC_MAX_CLIENTS] = { { .fd = x->wake[0], .events = POLLIN },
                                                { .fd = x->oob_fd, .events = POLLIN },
                                                { .fd = x->listen_fd, .events = POLLIN } };
        int64_t next = next_deadline(x), timeout = -1, cl = sf_tc_clients_deadline(x);
        size_t n;

        if (cl < next)
            next = cl;
        if (!sf_tc_clients_room(x))
            p[2].fd = -1;   /* the backlog holds them until a slot frees */
        n = sf_tc_clients_pollfds(x, p + 3);
        if (next != INT64_MAX) {
            timeout = next - sf_now_ms();
            if (timeout < 0)
                timeout = 0;
            if (timeout > 60000)
                timeout = 60000;
        }
        if (poll(p, 3 + n, (int)timeout) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break;
        /* Deadlines first: no client may hold a window past its end. */
        due(x);
        sf_tc_engine_out_of_band(x);    /* woken for it, or a record held back is due */
        sf_tc_clients_io(x, p + 3, n);
        if (p[2].revents & POLLIN)
            sf_tc_clients_accept(x);
        due(x);
        sf_tc_publish(x);
    }
    sf_tc_clients_close(x);
    if (!x->suspending)
        close_all(x, "shutdown");
    sf_tc_publish(x);
    return NULL;
}

/* ---- metrics ---------------------------------------------------------------------------- */

void sf_tc_publish(tc_ctx *x)
{
    pthread_mutex_lock(&x->pub_mu);
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        const tc_window *w = &x->w[i];
        tc_pub *p = &x->pub[i];

        p->state = w->state == TC_OPEN ? "open" : w->state == TC_RESETTING ? "resetting"
                   : w->state == TC_FAILED ? "reset_failed" : w->closing ? "closing" : "idle";
        p->window = w->state == TC_OPEN || w->closing;
        memcpy(p->id, w->id, sizeof(p->id));
        p->level = w->level;
        p->end_wall = w->end_wall;
        p->end_mono = w->end_mono;
        p->at_start = w->at_start;
        p->own = w->own;
        memcpy(p->from_target_at_start, w->from_target_at_start,
               sizeof(p->from_target_at_start));
        memcpy(p->engine_at_start, w->engine_at_start, sizeof(p->engine_at_start));
        p->last = w->closed;
        p->open_mono = w->open_mono;
    }
    pthread_mutex_unlock(&x->pub_mu);
}

/* Per-window series, bounded by the config: for each target, its window
 * open or in its grace period (live counts since it opened, seconds left)
 * and its last closed one (the closing record's counts, complete or not):
 * at most two windows per target, whatever the operators do. */
static size_t window_metrics(tc_ctx *x, const char *ext, char *buf, size_t size, size_t len)
{
    static const char *const kinds[] = { "accepted", "exported", "lost", "queued",
                                         "accepted_from_target", "refused_from_target" };

    sf_metrics_put(buf, size, &len,
        "# HELP spanfence_trace_control_window_spans Spans of each target's "
        "open (or closing) window since it opened, and of its last closed window as its "
        "closing record says; accepted_from_target and refused_from_target for targets with a "
        "match.\n# TYPE spanfence_trace_control_window_spans gauge\n");
    pthread_mutex_lock(&x->pub_mu);
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        const tc_pub *p = &x->pub[i];
        const tc_window *w = &x->w[i];
        bool match = w->target->match.n > 0;

        if (p->window) {
            tc_counts c;
            uint64_t v[6];

            sf_tc_counts_since(x, w, &p->at_start, &p->own, p->from_target_at_start,
                               p->engine_at_start, &c);
            v[0] = c.accepted;
            v[1] = c.exported;
            v[2] = c.lost;
            v[3] = c.accepted - c.exported - c.post_lost;
            v[4] = c.from_target[0];
            v[5] = c.from_target[1];
            for (size_t k = 0; k < (match ? 6u : 4u); k++)
                sf_metrics_put(buf, size, &len,
                    "spanfence_trace_control_window_spans{extension=\"%s\","
                    "target=\"%s\",window=\"%s\",state=\"%s\",count=\"%s\"} %" PRIu64 "\n",
                    ext, w->target->id, p->id, p->state, kinds[k], v[k]);
        }
        if (p->last.valid) {
            const uint64_t v[4] = { p->last.accepted, p->last.exported, p->last.lost,
                                    p->last.queued };

            for (size_t k = 0; k < 4; k++)
                sf_metrics_put(buf, size, &len,
                    "spanfence_trace_control_window_spans{extension=\"%s\","
                    "target=\"%s\",window=\"%s\",state=\"closed\",count=\"%s\"} %" PRIu64
                    "\n", ext, w->target->id, p->last.id, kinds[k], v[k]);
        }
    }
    sf_metrics_put(buf, size, &len,
        "# HELP spanfence_trace_control_window_seconds_left Seconds until "
        "each open window's planned end (0 once it ended, during its grace period).\n"
        "# TYPE spanfence_trace_control_window_seconds_left gauge\n");
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        const tc_pub *p = &x->pub[i];
        int64_t left = p->end_mono - sf_now_ms();

        if (!p->window)
            continue;
        if (strcmp(p->state, "open") != 0 || left < 0)
            left = 0;
        sf_metrics_put(buf, size, &len,
            "spanfence_trace_control_window_seconds_left{extension=\"%s\","
            "target=\"%s\",window=\"%s\",level=\"%" PRId64 "\"} %" PRId64 ".%03" PRId64 "\n",
            ext, x->w[i].target->id, p->id, p->level, left / 1000, left % 1000);
    }
    sf_metrics_put(buf, size, &len,
        "# HELP spanfence_trace_control_window_complete Whether each target's "
        "last closed window was complete (1) or not (0).\n"
        "# TYPE spanfence_trace_control_window_complete gauge\n");
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        const tc_pub *p = &x->pub[i];

        if (p->last.valid)
            sf_metrics_put(buf, size, &len,
                "spanfence_trace_control_window_complete{extension=\"%s\","
                "target=\"%s\",window=\"%s\"} %d\n", ext, x->w[i].target->id, p->last.id,
                p->last.complete ? 1 : 0);
    }
    pthread_mutex_unlock(&x->pub_mu);
    return len;
}

/* `spanfence status`'s part (sf_component_type.status): every target's
 * level and state, its window with live counts and time left, and its last
 * closed window. No reason and no uid: those are for the control socket's
 * users (the metrics endpoint has no access control). */
static json_object *tc_status(sf_component *self)
{
    tc_ctx *x = sf_component_ctx(self);
    json_object *o, *targets;
    char when[32];

    if (x == NULL || (o = json_object_new_object()) == NULL)
        return NULL;
    targets = json_object_new_array();
    json_object_object_add(o, "targets", targets);
    pthread_mutex_lock(&x->pub_mu);
    for (size_t i = 0; i < x->cfg->targets.n && targets != NULL; i++) {
        const tc_pub *p = &x->pub[i];
        const tc_window *w = &x->w[i];
        int64_t lv = atomic_load(&w->level_now), at = atomic_load(&w->level_set_wall);
        json_object *t = json_object_new_object(), *win = NULL, *last = NULL;

        if (t == NULL)
            break;
        json_object_array_add(targets, t);
        json_object_object_add(t, "target", json_object_new_string(w->target->id));
        json_object_object_add(t, "state", json_object_new_string(p->state ? p->state : "idle"));
        json_object_object_add(t, "level", lv >= 0 ? json_object_new_int64(lv) : NULL);
        sf_time_format_utc(at, when, sizeof(when));
        json_object_object_add(t, "level_set", at ? json_object_new_string(when) : NULL);
        json_object_object_add(t, "out_of_band", json_object_new_string(
            w->target->out_of_band == SF_TC_OOB_DROP ? "drop" : "count"));
        json_object_object_add(t, "out_of_band_spans",
                               json_object_new_uint64(atomic_load(&w->oob_spans)));
        if (p->window && (win = json_object_new_object()) != NULL) {
            tc_counts c;
            int64_t left = p->end_mono - sf_now_ms();

            sf_tc_counts_since(x, w, &p->at_start, &p->own, p->from_target_at_start,
                               p->engine_at_start, &c);
            json_object_object_add(win, "id", json_object_new_string(p->id));
            json_object_object_add(win, "level", json_object_new_int64(p->level));
            sf_time_format_utc(p->end_wall, when, sizeof(when));
            json_object_object_add(win, "planned_end", json_object_new_string(when));
            json_object_object_add(win, "left_ms", json_object_new_int64(
                strcmp(p->state, "open") == 0 && left > 0 ? left : 0));
            json_object_object_add(win, "accepted", json_object_new_uint64(c.accepted));
            json_object_object_add(win, "exported", json_object_new_uint64(c.exported));
            json_object_object_add(win, "lost", json_object_new_uint64(c.lost));
            json_object_object_add(win, "queued", json_object_new_uint64(
                c.accepted - c.exported - c.post_lost));
            json_object_object_add(win, "lost_collector",
                                   json_object_new_uint64(c.lost_collector));
            /* spans queued before the window opened, and whether they have
             * left the queues (from then on what leaves is the window's) */
            json_object_object_add(win, "queued_before", json_object_new_uint64(p->own.backlog));
            json_object_object_add(win, "queued_before_left", json_object_new_boolean(p->own.ready));
            /* whether the raised level shows: spans from the target since the
             * window opened (arriving), none yet (waiting), or none within
             * arrival_timeout (none: the engine's exporter may be broken) */
            json_object_object_add(win, "arrival", json_object_new_string(
                sf_tc_arrival_names[sf_tc_arrival_of(x, w, p->open_mono, &p->at_start,
                                                     p->from_target_at_start)]));
            json_object_object_add(win, "since_open_ms",
                                   json_object_new_int64(sf_now_ms() - p->open_mono));
            if (w->target->match.n > 0) {
                json_object_object_add(win, "accepted_from_target",
                                       json_object_new_uint64(c.from_target[0]));
                json_object_object_add(win, "refused_from_target",
                                       json_object_new_uint64(c.from_target[1]));
            }
            if (w->target->engine_log.receiver != NULL) {
                json_object_object_add(win, "engine_log",
                                       json_object_new_string(w->target->engine_log.receiver));
                json_object_object_add(win, "engine_dropped",
                                       json_object_new_uint64(c.engine[TC_ENG_EVENTS]));
                json_object_object_add(win, "engine_dropped_ops",
                                       json_object_new_uint64(c.engine[TC_ENG_OPS]));
            }
            if (w->lat != NULL) {
                tc_lat_view lv;

                sf_tc_latency_view(w->lat, &lv);
                json_object_object_add(win, "latency",
                                       sf_tc_latency_json(&lv, &w->target->engine_metrics));
            }
        }
        json_object_object_add(t, "window", win);
        if (w->lat != NULL) {
            /* whether its engine's histograms arrive at all, window or not */
            json_object *em = json_object_new_object();
            tc_lat_view lv;

            sf_tc_latency_view(w->lat, &lv);
            json_object_object_add(em, "receiver", json_object_new_string(
                w->target->engine_metrics.receiver));
            json_object_object_add(em, "job", json_object_new_string(
                w->target->engine_metrics.job));
            json_object_object_add(em, "scrapes", json_object_new_uint64(lv.scrapes));
            json_object_object_add(em, "restarts", json_object_new_uint64(lv.restarts));
            /* the engine's load at the last scrape: busy without spans
             * arriving means the level did not take */
            json_object_object_add(em, "running_reqs", lv.load.have_running
                                   ? json_object_new_double(lv.load.running) : NULL);
            json_object_object_add(em, "queued_reqs", lv.load.have_queued
                                   ? json_object_new_double(lv.load.queued) : NULL);
            json_object_object_add(t, "engine_metrics", em);
        }
        if (p->last.valid && (last = json_object_new_object()) != NULL) {
            json_object_object_add(last, "id", json_object_new_string(p->last.id));
            json_object_object_add(last, "cause", json_object_new_string(p->last.cause));
            sf_time_format_utc(p->last.closed_wall, when, sizeof(when));
            json_object_object_add(last, "closed", json_object_new_string(when));
            json_object_object_add(last, "accepted", json_object_new_uint64(p->last.accepted));
            json_object_object_add(last, "exported", json_object_new_uint64(p->last.exported));
            json_object_object_add(last, "lost", json_object_new_uint64(p->last.lost));
            json_object_object_add(last, "queued", json_object_new_uint64(p->last.queued));
            if (w->target->engine_log.receiver != NULL)
                json_object_object_add(last, "engine_dropped",
                                       json_object_new_uint64(p->last.engine_dropped));
            if (p->last.lat.valid)
                json_object_object_add(last, "latency", sf_tc_latency_json(
                    &p->last.lat, &w->target->engine_metrics));
            json_object_object_add(last, "complete", json_object_new_boolean(p->last.complete));
            json_object_object_add(last, "capture", json_object_new_string(
                p->last.capture != NULL ? p->last.capture : "incomplete"));
        }
        json_object_object_add(t, "last_window", last);
    }
    pthread_mutex_unlock(&x->pub_mu);
    return o;
}

/* Each target's last known level and when it took it, and the windows'
 * series (sf_component_type.metrics). */
static size_t tc_metrics(sf_component *self, char *buf, size_t size)
{
    tc_ctx *x = sf_component_ctx(self);
    size_t len = 0;

    sf_metrics_put(buf, size, &len,
        "# HELP spanfence_trace_control_target_level The trace level each target "
        "last took (-1: not known: never set, or its last request failed).\n"
        "# TYPE spanfence_trace_control_target_level gauge\n");
    for (size_t i = 0; i < x->cfg->targets.n; i++)
        sf_metrics_put(buf, size, &len,
            "spanfence_trace_control_target_level{extension=\"%s\",target=\"%s\"} "
            "%" PRId64 "\n", sf_component_id(self), x->w[i].target->id,
            atomic_load(&x->w[i].level_now));
    sf_metrics_put(buf, size, &len,
        "# HELP spanfence_trace_control_target_level_set_seconds When the "
        "target last took a level (Unix time; 0: never).\n"
        "# TYPE spanfence_trace_control_target_level_set_seconds gauge\n");
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        int64_t at = atomic_load(&x->w[i].level_set_wall);

        sf_metrics_put(buf, size, &len,
            "spanfence_trace_control_target_level_set_seconds{extension=\"%s\","
            "target=\"%s\"} %" PRId64 ".%03" PRId64 "\n", sf_component_id(self),
            x->w[i].target->id, at / 1000, at % 1000);
    }
    return window_metrics(x, sf_component_id(self), buf, size, len);
}

/* ---- lifecycle --------------------------------------------------------------------------- */

static void free_drops(tc_ctx *x)
{
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        sf_tc_drops_free(&x->w[i].drops);
        sf_tc_latency_destroy(x->w[i].lat);     /* the engine's metrics, as its log */
        x->w[i].lat = NULL;
    }
}

static void free_markers(tc_ctx *x)
{
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        sf_free(x->w[i].marker);
        x->w[i].marker = NULL;
    }
}

/* What a context holds besides its thread and socket (tc_destroy after
 * tc_shutdown, parcel_free after closing the socket, tc_create when a
 * target cannot be set up). */
static void ctx_free(tc_ctx *x)
{
    sf_tc_audit_free_pending(x);
    free_markers(x);
    free_drops(x);
    close(x->oob_fd);
    pthread_mutex_destroy(&x->pub_mu);
    sf_free(x->pub);
    sf_free(x->w);
    sf_free(x);
}

static sf_status tc_create(sf_component *self, const void *config)
{
    const sf_tc_config *cfg = config;
    tc_ctx *x;
    bool matching = false, reading = false, scraping = false;
    sf_status st = SF_OK;

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
    x->pub = sf_calloc(cfg->targets.n ? cfg->targets.n : 1, sizeof(*x->pub));
    if (x->pub == NULL) {
        sf_free(x->w);
        sf_free(x);
        return SF_ENOMEM;
    }
    pthread_mutex_init(&x->pub_mu, NULL);
    x->self = self;
    x->cfg = cfg;
    x->listen_fd = -1;
    x->wake[0] = x->wake[1] = -1;
    sf_tc_clients_init(x);
    /* the tap writes it from receiver threads: it lives as long as x */
    x->oob_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (x->oob_fd < 0) {
        pthread_mutex_destroy(&x->pub_mu);
        sf_free(x->pub);
        sf_free(x->w);
        sf_free(x);
        return SF_IO;
    }
    x->next_enforce_mono = 0;       /* the first round runs at start */
    for (size_t i = 0; i < cfg->targets.n; i++) {
        const sf_tc_engine_log *el = &cfg->targets.v[i].engine_log;
        const sf_tc_engine_metrics *em = &cfg->targets.v[i].engine_metrics;

        x->w[i].target = &cfg->targets.v[i];
        atomic_store(&x->w[i].level_now, -1);
        x->w[i].recorded = TC_REC_NONE;
        if (cfg->targets.v[i].match.n > 0)
            matching = true;
        if (el->receiver != NULL) {
            reading = true;
            if (!sf_component_has_receiver(self, el->receiver, SF_SIGNAL_LOGS)) {
                sf_error("extensions.%s: targets.%s.engine_log.receiver: '%s' is not a receiver "
                         "of a logs pipeline of this config", sf_component_id(self),
                         cfg->targets.v[i].id, el->receiver);
                st = SF_CONFIG;
            } else if ((st = sf_tc_drops_compile(el, &x->w[i].drops)) != SF_OK) {
                sf_error("extensions.%s: targets.%s.engine_log.drops: cannot compile: %s",
                         sf_component_id(self), cfg->targets.v[i].id, sf_status_str(st));
            }
        }
        if (st == SF_OK && em->receiver != NULL) {
            scraping = true;
            if (!sf_component_has_receiver(self, em->receiver, SF_SIGNAL_METRICS)) {
                sf_error("extensions.%s: targets.%s.engine_metrics.receiver: '%s' is not a "
                         "receiver of a metrics pipeline of this config", sf_component_id(self),
                         cfg->targets.v[i].id, em->receiver);
                st = SF_CONFIG;
            } else {
                st = sf_tc_latency_create(em, &x->w[i].lat);
            }
        }
        if (st != SF_OK) {
            ctx_free(x);
            return st;
        }
    }
    sf_component_set_ctx(self, x);
    /* No target with a match: no tap, so no cost at all on the data path. */
    if (matching)
        sf_component_set_span_tap(self, sf_tc_window_tap, x);
    /* Targets whose out-of-band spans stay in the VM: a gate that, while
     * none of them rests, costs a few atomic loads per traces request. */
    for (size_t i = 0; i < cfg->targets.n; i++)
        if (cfg->targets.v[i].out_of_band == SF_TC_OOB_DROP) {
            sf_component_set_span_gate(self, &(sf_span_gate){ .armed = sf_tc_gate_armed,
                                                              .keeps = sf_tc_gate_keeps,
                                                              .ctx = x });
            break;
        }
    /* Likewise for engine logs; with one, a logs request costs an atomic
     * load while no window of such a target is open. */
    if (reading)
        sf_component_set_log_tap(self, sf_tc_log_tap, x);
    /* And for the engine's metrics: one scrape, one decode per target. */
    if (scraping)
        sf_component_set_metrics_tap(self, sf_tc_metrics_tap, x);
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

    st = sf_tc_recover(x);
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

/* Stops the thread, when it runs, and closes its wake-up pipe (shutdown,
 * and suspend, which keeps the socket for the next instance). */
static void stop_thread(tc_ctx *x)
{
    if (x->thread_started) {
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
}

static void tc_shutdown(sf_component *self)
{
    tc_ctx *x = sf_component_ctx(self);

    if (x == NULL)
        return;
    stop_thread(x);
    if (x->listen_fd >= 0) {
        close(x->listen_fd);
        x->listen_fd = -1;
    }
    if (x->socket_bound) {
        unlink(x->cfg->socket);
        x->socket_bound = false;
    }
}

static void tc_destroy(sf_component *self)
{
    tc_ctx *x = sf_component_ctx(self);

    if (x == NULL)
        return;
    tc_shutdown(self);
    ctx_free(x);
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
    if (x->thread_started)
        x->suspending = true;
    stop_thread(x);
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
    ctx_free(p);
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
        tc_window *o = &p->w[i], *w = sf_tc_window_of(x, o->target->id);

        if (w == NULL)
            continue;
        w->carried = true;
        w->enforce_due = o->enforce_due;
        atomic_store(&w->level_now, atomic_load(&o->level_now));
        atomic_store(&w->level_set_wall, atomic_load(&o->level_set_wall));
        w->recorded = o->recorded;
        memcpy(w->last_error, o->last_error, sizeof(w->last_error));
        memcpy(w->last_close, o->last_close, sizeof(w->last_close));
        w->closed = o->closed;
        w->last_status = o->last_status;
        sf_tc_latency_carry(w->lat, o->lat);
        if (o->state == TC_IDLE && !o->closing && o->marker == NULL)
            continue;
        memcpy(w->id, o->id, sizeof(w->id));
        w->level = o->level;
        w->uid = o->uid;
        memcpy(w->reason, o->reason, sizeof(w->reason));
        w->start_wall = o->start_wall;
        w->end_wall = o->end_wall;
        w->end_mono = o->end_mono;
        w->open_mono = o->open_mono;
        w->arrival = o->arrival;
        w->at_start = o->at_start;
        w->own = o->own;
        w->next_try_mono = o->next_try_mono;
        w->delay = o->delay;
        w->reset_since_mono = o->reset_since_mono;
        w->attempts = o->attempts;
        w->closing = o->closing;
        w->close_due_mono = o->close_due_mono;
        w->ended_wall = o->ended_wall;
        w->grace_ms = o->grace_ms;
        w->draining = o->draining;
        w->at_end = o->at_end;
        w->drain_since_mono = o->drain_since_mono;
        w->drain_until_mono = o->drain_until_mono;
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
        for (int k = 0; k < TC_ENG_COUNT; k++) {
            atomic_store(&w->engine[k], atomic_load(&o->engine[k]));
            w->engine_at_start[k] = o->engine_at_start[k];
        }
        if (atomic_load(&o->log_counting) && w->target->engine_log.receiver != NULL) {
            atomic_store(&w->log_counting, true);
            atomic_fetch_add(&x->log_counting, 1);
        }
        if (atomic_load(&o->counting) && w->target->match.n > 0) {
            atomic_store(&w->counting, true);
            atomic_fetch_add(&x->counting, 1);
        } else if (o->state == TC_OPEN) {
            sf_tc_window_count_start(x, w);      /* a match added by the new config: from now */
        }
        sf_tc_window_count_stop(p, o);
        sf_tc_window_set_state(x, w, o->state);
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
            sf_tc_audit_set_gauge(x);
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
                              .rest_interval_key = "enforce_interval",
                              .grace = c->grace_period, .grace_key = "grace_period" };
    for (size_t i = 0; i < c->targets.n && out->exports_out_of_band == NULL; i++)
        if (c->targets.v[i].out_of_band != SF_TC_OOB_DROP) {
            out->exports_out_of_band = c->targets.v[i].id;
            snprintf(out->out_of_band_key, sizeof(out->out_of_band_key),
                     "targets.%s.out_of_band", c->targets.v[i].id);
        }
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
    [TC_OUT_OF_BAND] = { .name = "spanfence_trace_control_out_of_band_spans",
      .help = "Spans from a resting target (by its match): its level was raised out of band; "
              "each time the resting level is set again and an out_of_band record written." },
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
    .status = tc_status,
    .verbs = tc_verbs,
};

/* pipeline/extensions/trace_control/trace_control_requests.c: the control
 * socket's connections and requests (set, reset, status): one line in, one
 * JSON answer out, read and written by the control thread's poll loop
 * without blocking it, each connection cut off at its deadline. */
#define _GNU_SOURCE
#include "trace_control_int.h"
#include "sf_time.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
    sf_tc_add(r->buf, sizeof(r->buf), &r->len, "{\"ok\":%s,\"message\":\"%s\"}",
        ok ? "true" : "false", esc);
}

tc_window *sf_tc_window_of(tc_ctx *x, const char *target)
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
    w = sf_tc_window_of(x, target);
    if (w->state == TC_OPEN) {
        sf_tc_format_left(w->end_mono - sf_now_ms(), err, sizeof(err));
        answer(r, false, "target '%s' already has a window at level %" PRId64
               " (%s left); reset it first", target, w->level, err);
        return;
    }
    if (w->state == TC_RESETTING) {
        sf_tc_format_left(w->reset_since_mono + x->cfg->reset_timeout - sf_now_ms(), err, sizeof(err));
        answer(r, false, "target '%s' is still being reset to level %" PRId64 " (%u attempts, "
               "last: %s; given up in %s at most)", target, x->cfg->resting_level, w->attempts,
               w->last_error, err);
        return;
    }
    if (w->closing) {
        sf_tc_format_left(w->close_due_mono - sf_now_ms(), err, sizeof(err));
        answer(r, false, "target '%s': window '%s' is in its grace period (%s left); its "
               "closing record comes first", target, w->id, err);
        return;
    }
    prev = w->state;
    w->level = level;
    w->uid = uid;
    snprintf(w->reason, sizeof(w->reason), "%s", reason);
    w->start_wall = sf_wall_ms();
    w->end_wall = w->start_wall + for_ms;
    w->end_mono = sf_now_ms() + for_ms;
    w->note[0] = '\0';
    snprintf(w->id, sizeof(w->id), "%s-%" PRId64, target, w->start_wall);
    sf_component_totals(x->self, &w->at_start);
    sf_tc_window_own_start(x, w);
    sf_tc_window_count_start(x, w);
    sf_tc_window_arrival_start(w);
    /* from now its spans are the window's, never dropped as out of band
     * (the client may send them before the next turn's watch) */
    atomic_store(&w->resting, false);
    if (sf_tc_audit_open(x, w) != SF_OK) {
        sf_tc_window_count_stop(x, w);
        (void)prev;
        answer(r, false, "the audit log '%s' cannot be written; nothing was changed",
               x->cfg->audit_log);
        return;
    }
    sf_tc_window_set_state(x, w, TC_OPEN);
    sf_tc_latency_open(w->lat);     /* its baseline: the scrapes before now */
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
            sf_tc_window_close(x, w, ans.status);
            sf_tc_window_set_state(x, w, prev);      /* a failed reset before stays failed */
            answer(r, false, "engine '%s' refused level %" PRId64 ": %s; nothing was changed",
                   target, level, ans.detail);
            return;
        }
        /* No answer, or 5xx: it may or may not have taken it (a timeout):
         * make sure it goes back to the resting level. */
        sf_warn("trace_control: target '%s' did not take level %" PRId64 ": %s", target, level,
                ans.detail);
        snprintf(w->cause, sizeof(w->cause), "set_failed");
        sf_tc_window_close(x, w, ans.status);
        sf_tc_engine_begin_reset(x, w);
        w->next_try_mono = sf_now_ms() + w->delay;
        answer(r, false, "engine '%s' did not take level %" PRId64 ": %s; it will be reset to %"
               PRId64, target, level, ans.detail, x->cfg->resting_level);
        return;
    }
    sf_tc_window_took_level(w, level);
    w->recorded = level;
    sf_time_format_utc(w->end_wall, until, sizeof(until));
    sf_info("trace_control: window '%s': target '%s' at level %" PRId64 " until %s (uid %u)",
            w->id, target, level, until, uid);
    sf_tc_format_left(for_ms, err, sizeof(err));
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
    w = sf_tc_window_of(x, target);
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
        st = sf_tc_window_end(x, w, "reset", NULL);
    } else {
        if (w->state == TC_FAILED) {
            /* the operator's retry: a fresh, bounded reset */
            w->reset_since_mono = sf_now_ms();
            w->delay = x->cfg->retry.initial_interval;
        }
        st = sf_tc_engine_try_reset(x, w);
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
    sf_tc_add(r->buf, sizeof(r->buf), &r->len, "{\"ok\":true,\"windows\":[");
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];
        const char *state = w->state == TC_OPEN ? "open" : w->state == TC_RESETTING
                            ? "resetting" : "failed";

        tc_counts c;

        if (w->state == TC_IDLE)
            continue;
        sf_tc_window_counts(x, w, &c);
        sf_json_escape(w->reason, esc, sizeof(esc));
        sf_time_format_utc(w->end_wall, until, sizeof(until));
        sf_tc_add(r->buf, sizeof(r->buf), &r->len,
            "%s{\"target\":\"%s\",\"state\":\"%s\",\"level\":%" PRId64 ",\"uid\":%u,"
            "\"window\":\"%s\",\"planned_end\":\"%s\",\"left_ms\":%" PRId64 ",\"reason\":\"%s\","
            "\"accepted\":%" PRIu64 ",\"exported\":%" PRIu64 ",\"lost\":%" PRIu64,
            n ? "," : "", w->target->id, state, w->level, w->uid, w->id, until,
            w->state == TC_OPEN ? w->end_mono - now : 0, esc, c.accepted, c.exported, c.lost);
        if (w->target->match.n > 0)
            sf_tc_add(r->buf, sizeof(r->buf), &r->len, ",\"accepted_from_target\":%" PRIu64
                      ",\"refused_from_target\":%" PRIu64, c.from_target[0], c.from_target[1]);
        if (w->state == TC_OPEN)
            sf_tc_add(r->buf, sizeof(r->buf), &r->len, ",\"arrival\":\"%s\"",
                      sf_tc_arrival_names[sf_tc_arrival_of(x, w, w->open_mono, &w->at_start,
                                                           w->from_target_at_start)]);
        sf_tc_add(r->buf, sizeof(r->buf), &r->len, "}");
        n++;
    }
    sf_tc_add(r->buf, sizeof(r->buf), &r->len, "],\"targets\":[");
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
        sf_tc_add(r->buf, sizeof(r->buf), &r->len, "%s{\"target\":\"%s\",\"state\":\"%s\","
            "\"level\":%s,\"level_set\":\"%s\"}", n++ ? "," : "", w->target->id, state, lvtext,
            at ? set : "");
        if (lv >= 0)
            sf_tc_add(text, sizeof(text), &tl, "%s: level %" PRId64 " (set %s)", w->target->id, lv,
                set);
        else
            sf_tc_add(text, sizeof(text), &tl, "%s: level not known", w->target->id);
        if (w->state == TC_OPEN) {
            tc_counts c;

            sf_tc_window_counts(x, w, &c);
            sf_tc_format_left(w->end_mono - now, left, sizeof(left));
            sf_time_format_utc(w->end_wall, until, sizeof(until));
            sf_tc_add(text, sizeof(text), &tl, "; window at level %" PRId64 ", %s left (until %s), "
                "uid %u; since it opened: %" PRIu64 " spans accepted, %" PRIu64 " exported, %"
                PRIu64 " lost", w->level, left, until, w->uid, c.accepted, c.exported, c.lost);
            if (w->target->match.n > 0)
                sf_tc_add(text, sizeof(text), &tl, ", %" PRIu64 " from the target (%" PRIu64
                          " refused)", c.from_target[0], c.from_target[1]);
            if (sf_tc_arrival_of(x, w, w->open_mono, &w->at_start, w->from_target_at_start) ==
                TC_ARRIVAL_NONE) {
                sf_tc_format_left((now - w->open_mono) / 1000 * 1000, left, sizeof(left));
                sf_tc_add(text, sizeof(text), &tl, "; no spans from %s since the level was "
                          "raised %s ago: check the engine's exporter", w->target->id, left);
            }
        } else if (w->state == TC_RESETTING) {
            sf_tc_add(text, sizeof(text), &tl, "; window closed, reset to level %" PRId64 " pending "
                "(%u attempts%s%s)", x->cfg->resting_level, w->attempts,
                w->last_error[0] ? ", last: " : "", w->last_error);
        } else if (w->state == TC_FAILED) {
            sf_tc_add(text, sizeof(text), &tl, "; reset to level %" PRId64 " FAILED: %s (run "
                "'spanfence trace-level reset --target %s' once it is mended)",
                x->cfg->resting_level, w->last_error, w->target->id);
        } else if (w->last_error[0]) {
            sf_tc_add(text, sizeof(text), &tl, "; resting level not taken: %s", w->last_error);
        } else if (w->last_close[0]) {
            sf_tc_add(text, sizeof(text), &tl, "; %s", w->last_close);
        }
        if (w->closing) {
            sf_tc_format_left(w->close_due_mono - now, left, sizeof(left));
            sf_tc_add(text, sizeof(text), &tl, "; window '%s' closes in %s (grace)", w->id, left);
        }
        sf_tc_add(text, sizeof(text), &tl, "\n");
    }
    sf_json_escape(text, esc, sizeof(esc));
    sf_tc_add(r->buf, sizeof(r->buf), &r->len, "],\"message\":\"%s\"}", esc);
}

/* Act on one request line; the answer (with its newline) in r. */
static void serve(tc_ctx *x, char *req, size_t len, unsigned uid, reply *r)
{
    char op[16];

    while (len > 0 && (req[len - 1] == '\n' || req[len - 1] == '\r'))
        len--;
    req[len] = '\0';
    if (!sf_tc_json_valid(req, len) || sf_tc_json_str(req, len, "op", op, sizeof(op)) != SF_OK)
        answer(r, false, "expected one JSON object with an 'op'");
    else if (strcmp(op, "set") == 0)
        op_set(x, req, len, uid, r);
    else if (strcmp(op, "reset") == 0)
        op_reset(x, req, len, uid, r);
    else if (strcmp(op, "status") == 0)
        op_status(x, r);
    else
        answer(r, false, "unknown op '%s' (expected set, reset, status)", op);
    sf_tc_add(r->buf, sizeof(r->buf), &r->len, "\n");
}

/* ---- connections ----------------------------------------------------------------------- */

static void client_close(tc_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    sf_free(c->out);
    memset(c, 0, sizeof(*c));
    c->fd = -1;
}

void sf_tc_clients_init(tc_ctx *x)
{
    for (size_t i = 0; i < TC_MAX_CLIENTS; i++)
        x->clients[i].fd = -1;
}

bool sf_tc_clients_room(const tc_ctx *x)
{
    for (size_t i = 0; i < TC_MAX_CLIENTS; i++)
        if (x->clients[i].fd < 0)
            return true;
    return false;
}

void sf_tc_clients_accept(tc_ctx *x)
{
    for (size_t i = 0; i < TC_MAX_CLIENTS; i++) {
        tc_client *c = &x->clients[i];
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        int fd;

        if (c->fd >= 0)
            continue;
        fd = accept4(x->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;         /* EAGAIN: no one else is waiting */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->uid = cred.uid;
        c->deadline_mono = sf_now_ms() + TC_CLIENT_DEADLINE;
    }
}

size_t sf_tc_clients_pollfds(const tc_ctx *x, struct pollfd *p)
{
    size_t n = 0;

    for (size_t i = 0; i < TC_MAX_CLIENTS; i++) {
        const tc_client *c = &x->clients[i];

        if (c->fd >= 0)
            p[n++] = (struct pollfd){ .fd = c->fd, .events = c->out ? POLLOUT : POLLIN };
    }
    return n;
}

/* Send what the socket takes now; true when the answer is all out (or the
 * client is gone). */
static bool client_write(tc_client *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return false;
        if (n <= 0) {
            sf_debug("trace_control: client went away before the answer");
            return true;
        }
        c->out_off += (size_t)n;
    }
    return true;
}

/* Hand the finished answer to c and send what fits now. */
static void client_answer(tc_client *c, reply *r)
{
    c->out = sf_malloc(r->len);
    if (c->out == NULL) {
        client_close(c);
        return;
    }
    memcpy(c->out, r->buf, r->len);
    c->out_len = r->len;
    c->out_off = 0;
    /* the answer gets its own deadline: the request may have waited on an engine */
    c->deadline_mono = sf_now_ms() + TC_CLIENT_DEADLINE;
    if (client_write(c))
        client_close(c);
}

/* Read what has arrived; serve the request once its line (or EOF, or a
 * full buffer) is in. */
static void client_read(tc_ctx *x, tc_client *c, reply *r)
{
    bool whole = false;

    for (;;) {
        ssize_t n = recv(c->fd, c->in + c->in_len, SF_TC_MAX_REQUEST - c->in_len, MSG_DONTWAIT);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            whole = true;   /* EOF (or an error): serve what came */
            break;
        }
        c->in_len += (size_t)n;
        if (memchr(c->in, '\n', c->in_len) != NULL || c->in_len == SF_TC_MAX_REQUEST) {
            whole = true;
            break;
        }
    }
    if (!whole)
        return;
    if (c->in_len == 0) {       /* connected and left without a word */
        client_close(c);
        return;
    }
    serve(x, c->in, c->in_len, c->uid, r);
    client_answer(c, r);
}

void sf_tc_clients_io(tc_ctx *x, const struct pollfd *p, size_t n)
{
    reply *r = NULL;
    size_t k = 0;

    for (size_t i = 0; i < TC_MAX_CLIENTS; i++) {
        tc_client *c = &x->clients[i];
        short ev = 0;

        if (c->fd < 0)
            continue;
        if (k < n && p[k].fd == c->fd)
            ev = p[k++].revents;
        if (ev != 0 && c->out != NULL) {
            if (client_write(c))
                client_close(c);
        } else if (ev != 0) {
            if (r == NULL && (r = sf_malloc(sizeof(*r))) == NULL) {
                client_close(c);
                continue;
            }
            client_read(x, c, r);
        }
        if (c->fd >= 0 && sf_now_ms() >= c->deadline_mono) {
            if (c->out == NULL) {
                sf_warn("trace_control: a client (uid %u) sent no complete request within %d "
                        "ms; disconnected", c->uid, TC_CLIENT_DEADLINE);
                if (r != NULL || (r = sf_malloc(sizeof(*r))) != NULL) {
                    answer(r, false, "no complete request within %d ms", TC_CLIENT_DEADLINE);
                    sf_tc_add(r->buf, sizeof(r->buf), &r->len, "\n");
                    send(c->fd, r->buf, r->len, MSG_NOSIGNAL | MSG_DONTWAIT);
                }
            }
            client_close(c);
        }
    }
    sf_free(r);
}

int64_t sf_tc_clients_deadline(const tc_ctx *x)
{
    int64_t next = INT64_MAX;

    for (size_t i = 0; i < TC_MAX_CLIENTS; i++)
        if (x->clients[i].fd >= 0 && x->clients[i].deadline_mono < next)
            next = x->clients[i].deadline_mono;
    return next;
}

void sf_tc_clients_close(tc_ctx *x)
{
    for (size_t i = 0; i < TC_MAX_CLIENTS; i++)
        if (x->clients[i].fd >= 0)
            client_close(&x->clients[i]);
}

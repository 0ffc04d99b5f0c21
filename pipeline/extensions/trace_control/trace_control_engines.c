/* pipeline/extensions/trace_control/trace_control_engines.c: what is asked
 * of the engines: a window's end and the reset to the resting level (with
 * retries), enforcement between windows (and after spans out of band), and
 * auto_revert's loss check. */
#define _GNU_SOURCE
#include "trace_control_int.h"
#include "sf_time.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- engines ---------------------------------------------------------------------- */

/* One attempt at the resting level. OK: IDLE, recorded "reset". A refusal
 * (400, 401, 403, 404, TLS) or no answer within reset_timeout: FAILED,
 * recorded "reset_failed". Else the next attempt is scheduled. */
sf_status sf_tc_engine_try_reset(tc_ctx *x, tc_window *w)
{
    json_object *rec;
    sf_tc_answer ans;
    sf_status st;
    int64_t now;

    w->attempts++;
    st = sf_tc_engine_set(w->target, x->cfg->resting_level, x->cfg->request_timeout, &ans);
    now = sf_now_ms();
    if (st == SF_OK) {
        sf_tc_window_set_state(x, w, TC_IDLE);
        sf_tc_window_took_level(w, x->cfg->resting_level);
        w->recorded = x->cfg->resting_level;
        w->last_error[0] = '\0';
        w->last_status = 0;
        rec = sf_tc_record_new("reset", w->id, w->target->id);
        if (rec != NULL) {
            json_object_object_add(rec, "level", json_object_new_int64(x->cfg->resting_level));
            json_object_object_add(rec, "attempts", json_object_new_int64(w->attempts));
            sf_tc_record_time(rec, "time", sf_wall_ms());
        }
        sf_tc_audit_record(x, rec); /* if not written, pending: op_reset and shutdown say so */
        sf_info("trace_control: target '%s' is back at level %" PRId64, w->target->id,
                x->cfg->resting_level);
        return SF_OK;
    }
    sf_count(&sf_component_counters(x->self)->values[TC_ENGINE_FAILURES], 1);
    snprintf(w->last_error, sizeof(w->last_error), "%s", ans.detail);
    w->last_status = ans.status;
    atomic_store(&w->level_now, -1);
    if (st == SF_PERMANENT || now - w->reset_since_mono >= x->cfg->reset_timeout) {
        sf_tc_window_set_state(x, w, TC_FAILED);
        w->recorded = TC_REC_UNKNOWN;
        rec = sf_tc_record_new("reset_failed", w->id, w->target->id);
        if (rec != NULL) {
            json_object_object_add(rec, "level", json_object_new_int64(x->cfg->resting_level));
            json_object_object_add(rec, "attempts", json_object_new_int64(w->attempts));
            sf_tc_record_time(rec, "time", sf_wall_ms());
            json_object_object_add(rec, "why", json_object_new_string(
                                                   st == SF_PERMANENT ? "refused" : "reset_timeout"));
            sf_tc_record_answer(rec, ans.status, ans.detail);
        }
        sf_tc_audit_record(x, rec);
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

void sf_tc_engine_begin_reset(tc_ctx *x, tc_window *w)
{
    sf_tc_window_set_state(x, w, TC_RESETTING);
    w->attempts = 0;
    w->delay = x->cfg->retry.initial_interval;
    w->next_try_mono = sf_now_ms();
    w->reset_since_mono = w->next_try_mono;
}

/* End an OPEN window: the engine goes back to the resting level at once;
 * the closing record follows after the grace period (at once without one,
 * or when the collector stops: then before the reset). */
sf_status sf_tc_window_end(tc_ctx *x, tc_window *w, const char *cause, const char *note)
{
    w->ended_wall = sf_wall_ms();
    snprintf(w->cause, sizeof(w->cause), "%s", cause);
    snprintf(w->note, sizeof(w->note), "%s", note ? note : "");
    w->grace_ms = x->stopping ? 0 : x->cfg->grace_period;
    sf_tc_latency_end(w->lat);      /* its running figure: while the level was raised */
    /* an auto-revert cuts the operator's capture short: they must notice */
    if (strcmp(cause, "loss") == 0 || strcmp(cause, "latency") == 0)
        sf_warn("trace_control: window '%s' on target '%s' reverted early (auto_revert): %s; the "
                "target goes back to level %" PRId64, w->id, w->target->id, note ? note : "",
                x->cfg->resting_level);
    else
        sf_info("trace_control: window '%s' on target '%s' ended (%s)%s%s", w->id,
                w->target->id, cause, note ? ": " : "", note ? note : "");
    if (w->grace_ms == 0) {
        sf_tc_window_close(x, w, 0);
    } else {
        w->closing = true;
        w->close_due_mono = sf_now_ms() + w->grace_ms;
    }
    sf_tc_engine_begin_reset(x, w);
    return sf_tc_engine_try_reset(x, w);
}

/* Enforcement: set an IDLE or FAILED target to the resting level; record
 * only what changes what is known. */
sf_status sf_tc_engine_enforce(tc_ctx *x, tc_window *w)
{
    json_object *rec;
    sf_tc_answer ans;
    int64_t before = atomic_load(&w->level_now);
    sf_status st = sf_tc_engine_set(w->target, x->cfg->resting_level, x->cfg->request_timeout,
                                    &ans);

    if (st == SF_OK) {
        sf_tc_window_took_level(w, x->cfg->resting_level);
        if (w->state == TC_FAILED) {
            sf_tc_window_set_state(x, w, TC_IDLE);
            sf_info("trace_control: target '%s' took level %" PRId64 " again; its failed reset "
                    "is cleared", w->target->id, x->cfg->resting_level);
        }
        w->last_error[0] = '\0';
        w->last_status = 0;
        if (w->recorded != x->cfg->resting_level) {
            rec = sf_tc_record_new("enforce", NULL, w->target->id);
            if (rec != NULL) {
                json_object_object_add(rec, "level", json_object_new_int64(x->cfg->resting_level));
                json_object_object_add(rec, "previous",
                                       before >= 0 ? json_object_new_int64(before) : NULL);
                sf_tc_record_time(rec, "time", sf_wall_ms());
                json_object_object_add(rec, "note", json_object_new_string(
                    w->recorded == TC_REC_NONE ? "at start" : "the engine takes the resting "
                    "level again (it may have restarted at its own default)"));
            }
            sf_tc_audit_record(x, rec);
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
        rec = sf_tc_record_new("enforce_failed", NULL, w->target->id);
        if (rec != NULL) {
            json_object_object_add(rec, "level", json_object_new_int64(x->cfg->resting_level));
            sf_tc_record_time(rec, "time", sf_wall_ms());
            sf_tc_record_answer(rec, ans.status, ans.detail);
        }
        sf_tc_audit_record(x, rec);
        w->recorded = TC_REC_UNKNOWN;
        sf_warn("trace_control: target '%s' did not take its resting level %" PRId64 ": %s "
                "(tried again every enforce_interval)", w->target->id, x->cfg->resting_level,
                ans.detail);
    }
    return st;
}

void sf_tc_engine_out_of_band(tc_ctx *x)
{
    uint64_t v;
    int64_t now = sf_now_ms();

    if (read(x->oob_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        sf_debug("trace_control: out-of-band wake-up read failed");
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];
        uint64_t seen = atomic_load(&w->oob_spans), n = seen - atomic_load(&w->oob_seen);
        json_object *rec;

        if (n == 0 || now < w->oob_next_mono)
            continue;
        atomic_store(&w->oob_seen, seen);
        w->oob_next_mono = now + 1000;
        sf_count(&sf_component_counters(x->self)->values[TC_OUT_OF_BAND], (int64_t)n);
        sf_warn("trace_control: %" PRIu64 " spans from target '%s' while no window is open: its "
                "trace level was changed out of band; setting it back to %" PRId64 "%s", n,
                w->target->id, x->cfg->resting_level,
                w->target->out_of_band == SF_TC_OOB_DROP ? " (the spans were dropped: "
                "out_of_band: drop)" : "");
        rec = sf_tc_record_new("out_of_band", NULL, w->target->id);
        if (rec != NULL) {
            json_object_object_add(rec, "spans", json_object_new_uint64(n));
            json_object_object_add(rec, "level", json_object_new_int64(x->cfg->resting_level));
            json_object_object_add(rec, "dropped", json_object_new_boolean(
                w->target->out_of_band == SF_TC_OOB_DROP));
            sf_tc_record_time(rec, "time", sf_wall_ms());
            json_object_object_add(rec, "note", json_object_new_string(
                "spans from the target while it rests: its level was raised by someone else; "
                "the resting level is set again"));
        }
        sf_tc_audit_record(x, rec);
        sf_tc_engine_enforce(x, w);
    }
}

/* auto_revert: the reason an open window must end now, or false. */
bool sf_tc_window_losing(tc_ctx *x, const tc_window *w, char *why, size_t size)
{
    const sf_tc_auto_revert *a = &x->cfg->auto_revert;
    tc_counts c;
    uint64_t received, tgt;

    if (!a->enabled)
        return false;
    sf_tc_window_counts(x, w, &c);
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

/* pipeline/extensions/trace_control/trace_control_windows.c: a window's
 * life apart from its engine: its state and counts (and the span tap that
 * counts a target's own spans on receiver threads), its marker span, and
 * its closing record. */
#define _GNU_SOURCE
#include "trace_control_int.h"
#include "sf_time.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

void sf_tc_format_left(int64_t ms, char *buf, size_t size)
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
void sf_tc_window_set_state(tc_ctx *x, tc_window *w, tc_state st)
{
    bool was = w->state == TC_OPEN || w->state == TC_RESETTING;
    bool is = st == TC_OPEN || st == TC_RESETTING;

    w->state = st;
    if (was != is)
        atomic_fetch_add(&sf_component_counters(x->self)->values[TC_OPEN_WINDOWS], is ? 1 : -1);
}

void sf_tc_window_took_level(tc_window *w, int64_t level)
{
    atomic_store(&w->level_now, level);
    atomic_store(&w->level_set_wall, sf_wall_ms());
}

/* ---- spans from a target ------------------------------------------------------ */

/* Receiver threads, after every emitted batch (sf_span_tap_fn). Counts a
 * target's spans for its window, and spans from a resting target: its
 * level was raised by someone else (SGLang's route is unauthenticated). */
void sf_tc_window_tap(void *ctx, const uint8_t *raw, size_t len, size_t spans, bool accepted)
{
    tc_ctx *x = ctx;

    if (spans == 0)
        return;
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];
        const sf_strmap *m = &w->target->match;
        bool counting, resting;
        size_t n;

        if (m->n == 0)
            continue;
        counting = atomic_load_explicit(&w->counting, memory_order_acquire);
        resting = atomic_load_explicit(&w->resting, memory_order_acquire);
        if (!counting && !resting)
            continue;
        n = sf_otlp_count_matching_spans(raw, len, m->n, (const char *const *)m->keys,
                                         (const char *const *)m->values);
        if (n == 0)
            continue;
        if (counting) {
            atomic_fetch_add_explicit(&w->from_target[accepted ? 0 : 1], n, memory_order_relaxed);
        } else if (atomic_fetch_add(&w->oob_spans, n) == atomic_load(&w->oob_seen)) {
            uint64_t one = 1;

            if (write(x->oob_fd, &one, sizeof(one)) < 0)
                continue;   /* the counter is full: the thread is being woken anyway */
        }
    }
}

void sf_tc_window_watch(tc_ctx *x, tc_window *w)
{
    atomic_store_explicit(&w->resting, w->state == TC_IDLE && !w->closing &&
                          w->recorded == x->cfg->resting_level, memory_order_release);
}

/* The gate runs on every traces request: armed is a few atomic loads,
 * and keeps matches only targets that drop and rest. A target whose level
 * was raised out of band but is not yet seen resting (its state is not
 * idle at the resting level: starting, failed) is not dropped: what is
 * not known to be out of band is exported. */
bool sf_tc_gate_armed(void *ctx)
{
    tc_ctx *x = ctx;

    for (size_t i = 0; i < x->cfg->targets.n; i++)
        if (x->w[i].target->out_of_band == SF_TC_OOB_DROP &&
            atomic_load_explicit(&x->w[i].resting, memory_order_acquire))
            return true;
    return false;
}

bool sf_tc_gate_keeps(void *ctx, const uint8_t *rs, size_t len, sf_reason *reason)
{
    tc_ctx *x = ctx;

    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        const sf_strmap *m = &x->w[i].target->match;

        if (x->w[i].target->out_of_band != SF_TC_OOB_DROP ||
            !atomic_load_explicit(&x->w[i].resting, memory_order_acquire) ||
            sf_otlp_count_matching_spans(rs, len, m->n, (const char *const *)m->keys,
                                         (const char *const *)m->values) == 0)
            continue;
        *reason = SF_REASON_OUT_OF_BAND;
        return false;
    }
    return true;
}

/* ---- arrival: whether the raised level shows ------------------------------------ */

const char *const sf_tc_arrival_names[] = { "waiting", "arriving", "none" };

void sf_tc_window_arrival_start(tc_window *w)
{
    w->open_mono = sf_now_ms();
    w->arrival = TC_ARRIVAL_WAITING;
}

int sf_tc_arrival_of(tc_ctx *x, const tc_window *w, int64_t open_mono,
                     const sf_totals *at_start, const uint64_t *from_target_at_start)
{
    uint64_t n;

    if (w->target->match.n > 0) {
        n = atomic_load(&w->from_target[0]) + atomic_load(&w->from_target[1]) -
            from_target_at_start[0] - from_target_at_start[1];
    } else {
        sf_totals now;

        sf_component_totals(x->self, &now);
        n = now.accepted - at_start->accepted + sf_reasons_sum(now.refused) -
            sf_reasons_sum(at_start->refused);
    }
    if (n > 0)
        return TC_ARRIVAL_ARRIVING;
    return sf_now_ms() - open_mono >= w->target->arrival_timeout ? TC_ARRIVAL_NONE
                                                                  : TC_ARRIVAL_WAITING;
}

void sf_tc_window_arrival_check(tc_ctx *x, tc_window *w)
{
    int64_t now = sf_now_ms(), since = now - w->open_mono;
    int a;
    char ago[32];
    json_object *rec;

    if (w->state != TC_OPEN || w->arrival == TC_ARRIVAL_ARRIVING)
        return;
    a = sf_tc_arrival_of(x, w, w->open_mono, &w->at_start, w->from_target_at_start);
    sf_tc_format_left(since / 1000 * 1000, ago, sizeof(ago));    /* whole seconds ago */
    if (a == TC_ARRIVAL_NONE && w->arrival == TC_ARRIVAL_WAITING) {
        sf_warn("trace_control: window '%s': no spans from target '%s' since the level was "
                "raised to %" PRId64 " %s ago: check the engine's exporter", w->id,
                w->target->id, w->level, ago);
        rec = sf_tc_record_new("no_arrival", w->id, w->target->id);
        if (rec != NULL) {
            json_object_object_add(rec, "level", json_object_new_int64(w->level));
            json_object_object_add(rec, "since_open_ms", json_object_new_int64(since));
            sf_tc_record_time(rec, "time", sf_wall_ms());
            json_object_object_add(rec, "note", json_object_new_string(
                "the engine took the level but no span from it arrived within arrival_timeout: "
                "check the engine's exporter"));
        }
        sf_tc_audit_record(x, rec);
    } else if (a == TC_ARRIVAL_ARRIVING && w->arrival == TC_ARRIVAL_NONE) {
        sf_info("trace_control: window '%s': spans from target '%s' arriving, %s after the "
                "level was raised", w->id, w->target->id, ago);
    }
    w->arrival = a;
}

/* Control thread: start counting the spans of w's target (when it has a
 * match) from now. */
void sf_tc_window_count_start(tc_ctx *x, tc_window *w)
{
    if (w->target->engine_log.receiver != NULL && !atomic_load(&w->log_counting)) {
        for (int k = 0; k < TC_ENG_COUNT; k++)
            w->engine_at_start[k] = atomic_load(&w->engine[k]);
        atomic_store(&w->log_counting, true);
        atomic_fetch_add(&x->log_counting, 1);
    }
    if (w->target->match.n == 0 || atomic_load(&w->counting))
        return;
    for (int k = 0; k < 2; k++)
        w->from_target_at_start[k] = atomic_load(&w->from_target[k]);
    atomic_store(&w->counting, true);
    atomic_fetch_add(&x->counting, 1);
}

void sf_tc_window_count_stop(tc_ctx *x, tc_window *w)
{
    if (atomic_load(&w->log_counting)) {
        atomic_store(&w->log_counting, false);
        atomic_fetch_sub(&x->log_counting, 1);
    }
    if (!atomic_load(&w->counting))
        return;
    atomic_store(&w->counting, false);
    atomic_fetch_sub(&x->counting, 1);
}

void sf_tc_window_counts(tc_ctx *x, const tc_window *w, tc_counts *c)
{
    sf_tc_counts_since(x, w, &w->at_start, &w->own, w->from_target_at_start,
                       w->engine_at_start, c);
}

/* Spans that left the exporters' queues: exported, or dropped or failed
 * after they were queued (an exporter without a queue that failed a send
 * counts it as send_failed, and the receiver refused it: not queued). */
static uint64_t left_queues(const sf_totals *t)
{
    return t->exported + sf_reasons_sum(t->dropped) + sf_reasons_sum(t->send_failed) -
           t->refused[SF_REASON_RETRIES_EXHAUSTED] - t->refused[SF_REASON_PERMANENT_ERROR];
}

void sf_tc_window_own_start(tc_ctx *x, tc_window *w)
{
    uint64_t out = left_queues(&w->at_start);

    (void)x;
    w->own.backlog = w->at_start.accepted > out ? w->at_start.accepted - out : 0;
    w->own.ready = w->own.backlog == 0;
    w->own.from = w->at_start;
}

void sf_tc_window_track(tc_ctx *x, tc_window *w)
{
    sf_totals now;

    if (w->own.ready || (w->state != TC_OPEN && w->state != TC_RESETTING && !w->closing))
        return;
    sf_component_totals(x->self, &now);
    if (left_queues(&now) - left_queues(&w->at_start) >= w->own.backlog) {
        w->own.from = now;
        w->own.ready = true;
    }
}

void sf_tc_counts_since(tc_ctx *x, const tc_window *w, const sf_totals *at_start,
                        const tc_own *own, const uint64_t *from_target_at_start,
                        const uint64_t *engine_at_start, tc_counts *c)
{
    uint64_t out, own_out, post = 0;

    memset(c, 0, sizeof(*c));
    sf_component_totals(x->self, &c->now);
    for (int r = 0; r < SF_REASON_COUNT; r++) {
        c->refused += c->now.refused[r] - at_start->refused[r];
        c->dropped += c->now.dropped[r] - at_start->dropped[r];
        c->send_failed += c->now.send_failed[r] - at_start->send_failed[r];
    }
    c->accepted = c->now.accepted - at_start->accepted;
    c->enqueue_failed = c->now.enqueue_failed - at_start->enqueue_failed;
    /* A full queue refuses synchronously: its spans are in the receivers'
     * refused (queue_full) already, so enqueue_failed is not added again.
     * An exporter without a sending queue whose send failed counts the
     * spans as send_failed and the receiver refuses them with the same
     * reason (retries_exhausted, permanent_error): counted once. */
    c->lost_collector = c->refused + c->dropped + c->send_failed -
                        (c->now.refused[SF_REASON_RETRIES_EXHAUSTED] -
                         at_start->refused[SF_REASON_RETRIES_EXHAUSTED]) -
                        (c->now.refused[SF_REASON_PERMANENT_ERROR] -
                         at_start->refused[SF_REASON_PERMANENT_ERROR]);
    /* The window's own: refused while it ran (they were received then),
     * and what left the queues after its backlog, as many as it accepted;
     * of those, the losses after own->from, and those before it that may
     * have been its own (tc_own). */
    out = left_queues(&c->now) - left_queues(at_start);
    own_out = out > own->backlog ? out - own->backlog : 0;
    if (own->ready) {
        uint64_t gap = left_queues(&own->from) - left_queues(at_start) - own->backlog;
        uint64_t gap_lost = (left_queues(&own->from) - own->from.exported) -
                            (left_queues(at_start) - at_start->exported);

        post = (gap_lost < gap ? gap_lost : gap) +
               (left_queues(&c->now) - c->now.exported) -
               (left_queues(&own->from) - own->from.exported);
    }
    if (own_out > c->accepted)
        own_out = c->accepted;
    c->post_lost = post < own_out ? post : own_out;
    c->exported = own_out - c->post_lost;
    c->lost = c->refused + c->post_lost;
    for (int k = 0; k < 2; k++)
        c->from_target[k] = atomic_load(&w->from_target[k]) - from_target_at_start[k];
    for (int k = 0; k < TC_ENG_COUNT; k++)
        c->engine[k] = atomic_load(&w->engine[k]) - engine_at_start[k];
}

/* What a window's capture is worth, most serious first:
 * - "incomplete": the engine did not take the level (cause set_*), or
 *   spans were lost at the collector or are still queued, or the engine
 *   said it dropped some (engine_dropped, or its log could not be read);
 * - "empty": no span came from the target (by its match; without one, no
 *   span at all): the engine's exporter may be broken, nothing shows;
 * - "complete": none of that, and the engine's log (engine_log) said no
 *   drop;
 * - "complete at the collector": none of that, but the engine's own drops
 *   could not be seen (no engine_log).
 * complete() is true for the last two. */
static const char *verdict(const tc_window *w, const tc_counts *c)
{
    uint64_t from_target = w->target->match.n > 0 ? c->from_target[0] + c->from_target[1]
                                                  : c->accepted + c->refused;
    bool have_log = w->target->engine_log.receiver != NULL;

    if (strncmp(w->cause, "set_", 4) == 0 || c->lost > 0 || c->exported != c->accepted ||
        (w->target->match.n > 0 && c->from_target[1] > 0) ||
        (have_log && (c->engine[TC_ENG_EVENTS] > 0 || c->engine[TC_ENG_UNREAD] > 0)))
        return "incomplete";
    if (from_target == 0)
        return "empty";
    return have_log ? "complete" : "complete at the collector";
}

static bool complete(const tc_window *w, const tc_counts *c)
{
    return strncmp(verdict(w, c), "complete", 8) == 0;
}

/* ---- marker spans ------------------------------------------------------------- */

typedef struct marker_attrs {
    size_t n;
    sf_otlp_kv kv[48];
    sf_otlp_any av[48];
    sf_otlp_kv *p[48];
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

static void attr_double(marker_attrs *a, const char *key, double v)
{
    sf_otlp_any *av = attr(a, key);

    av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
    av->double_value = v;
}

static void attr_bool(marker_attrs *a, const char *key, bool v)
{
    sf_otlp_any *av = attr(a, key);

    av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
    av->bool_value = v;
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
    char name[128];
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
    attr_str(&sa, "spanfence.window.id", w->id);
    attr_str(&sa, "spanfence.window.target", w->target->id);
    attr_int(&sa, "spanfence.window.level", w->level);
    attr_str(&sa, "spanfence.window.reason", w->reason);
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
        attr_int(&sa, "spanfence.window.lost_collector", (int64_t)c->lost_collector);
        if (w->target->match.n > 0) {
            attr_int(&sa, "spanfence.window.accepted_from_target", (int64_t)c->from_target[0]);
            attr_int(&sa, "spanfence.window.refused_from_target", (int64_t)c->from_target[1]);
        }
        if (w->target->engine_log.receiver != NULL) {
            attr_int(&sa, "spanfence.window.engine_dropped", (int64_t)c->engine[TC_ENG_EVENTS]);
            attr_int(&sa, "spanfence.window.engine_dropped_ops", (int64_t)c->engine[TC_ENG_OPS]);
        }
    }
    if (w->lat != NULL) {
        /* the engine's latency before and during the window (bucket-bounded) */
        const char *keys[12];
        int kinds[12];
        int64_t ints[12];
        double dbls[12];
        tc_lat_view lv;
        size_t n;

        sf_tc_latency_view(w->lat, &lv);
        n = sf_tc_latency_attrs(&lv, keys, kinds, ints, dbls, 12);
        for (size_t i = 0; i < n; i++) {
            if (kinds[i] == 0)
                attr_int(&sa, keys[i], ints[i]);
            else
                attr_double(&sa, keys[i], dbls[i]);
        }
    }
    attr_bool(&sa, "spanfence.window.complete", done);
    attr_str(&sa, "spanfence.window.capture", c != NULL ? verdict(w, c) : "incomplete");
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
const char *sf_tc_marker_send(tc_ctx *x, tc_window *w)
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
    return sf_tc_marker_send(x, w);
}

/* ---- closing ------------------------------------------------------------------ */

/* "name":{reason:now-then,...} */
static void put_reasons(json_object *rec, const char *name, const uint64_t *now,
                        const uint64_t *then)
{
    json_object *o = json_object_new_object();

    for (int r = 0; r < SF_REASON_COUNT && o != NULL; r++)
        json_object_object_add(o, sf_reason_label((sf_reason)r),
                               json_object_new_uint64(now[r] - then[r]));
    json_object_object_add(rec, name, o);
}

/* "target_scope":"match","match":{...},"accepted_from_target":N,
 * "refused_from_target":M: the spans of the window's own engine. */
static void put_target_counts(json_object *rec, const tc_window *w, const tc_counts *c)
{
    const sf_strmap *m = &w->target->match;
    json_object *o = json_object_new_object();

    for (size_t i = 0; i < m->n && o != NULL; i++)
        json_object_object_add(o, m->keys[i], json_object_new_string(m->values[i]));
    json_object_object_add(rec, "target_scope", json_object_new_string("match"));
    json_object_object_add(rec, "match", o);
    json_object_object_add(rec, "accepted_from_target", json_object_new_uint64(c->from_target[0]));
    json_object_object_add(rec, "refused_from_target", json_object_new_uint64(c->from_target[1]));
}

/* "engine_log":"RECEIVER","engine_dropped":N,...: what the window's engine
 * said it dropped (its drop messages, read from its log while the window
 * was open or in its grace period). */
static void put_engine_counts(json_object *rec, const tc_window *w, const tc_counts *c)
{
    const uint64_t *e = c->engine;

    json_object_object_add(rec, "engine_log", json_object_new_string(
        w->target->engine_log.receiver));
    json_object_object_add(rec, "engine_dropped", json_object_new_uint64(e[TC_ENG_EVENTS]));
    json_object_object_add(rec, "engine_dropped_ops", json_object_new_uint64(e[TC_ENG_OPS]));
    json_object_object_add(rec, "engine_dropped_unsized",
                           json_object_new_uint64(e[TC_ENG_EVENTS] - e[TC_ENG_SIZED]));
    json_object_object_add(rec, "engine_dropped_note", json_object_new_string(
        "engine_dropped counts the engine's drop messages (events); engine_dropped_ops adds the "
        "numbers of those that say how many trace ops they dropped; engine_dropped_unsized "
        "counts those that do not (the SDK's queue-full warning: at least one span each)"));
    if (e[TC_ENG_UNREAD] > 0)
        json_object_object_add(rec, "engine_log_unread", json_object_new_uint64(e[TC_ENG_UNREAD]));
}

/* The closing record, after the grace period: cause, and what the
 * collector as a whole accepted, exported and lost while the window was
 * open and in its grace period ("scope":"collector": every engine's spans);
 * for a target with a `match`, also the spans accepted and refused from
 * that engine alone ("target_scope":"match"); whether the capture is
 * complete; and the marker span sent with the same figures. */
sf_status sf_tc_window_close(tc_ctx *x, tc_window *w, long status)
{
    bool recovered = strcmp(w->cause, "recovered") == 0;
    /* only a window that raised the level waits for its spans; shutdown does not */
    bool may_wait = !recovered && !x->stopping && strncmp(w->cause, "set_", 4) != 0;
    json_object *rec;
    tc_counts c, now;
    uint64_t queued;
    int64_t t = sf_now_ms();
    const char *marker;

    if (!w->draining) {
        sf_tc_window_count_stop(x, w);
        sf_tc_window_counts(x, w, &w->at_end);
        w->draining = true;
        w->drain_since_mono = t;
        w->drain_until_mono = t + TC_DRAIN_MAX;
    }
    /* What was accepted by the end of the grace period leaves before what
     * came after (the batch processor and the sending queue keep order):
     * once as many spans have been exported (or lost) since the window
     * opened, all of its own are out. */
    sf_tc_window_track(x, w);
    c = w->at_end;
    sf_tc_window_counts(x, w, &now);
    c.exported = now.exported < c.accepted ? now.exported : c.accepted;
    c.post_lost = now.post_lost < c.accepted - c.exported ? now.post_lost
                                                          : c.accepted - c.exported;
    c.lost = c.refused + c.post_lost;
    c.lost_collector = now.lost_collector;
    queued = c.accepted - c.exported - c.post_lost;
    if (queued > 0 && may_wait && t < w->drain_until_mono) {
        w->closing = true;
        w->close_due_mono = t + TC_DRAIN_STEP;
        return SF_OK;
    }
    w->draining = false;
    w->closing = false;
    marker = marker_emit(x, w, recovered ? NULL : &c);
    rec = sf_tc_record_new("close", w->id, w->target->id);
    if (rec != NULL) {
        json_object_object_add(rec, "level", json_object_new_int64(w->level));
        json_object_object_add(rec, "cause", json_object_new_string(w->cause));
        sf_tc_record_time(rec, "end", w->ended_wall);
        sf_tc_record_time(rec, "planned_end", w->end_wall);
        sf_tc_record_time(rec, "closed", sf_wall_ms());
        json_object_object_add(rec, "grace_ms", json_object_new_int64(w->grace_ms));
        if (w->note[0] != '\0') {
            if (status != 0)
                json_object_object_add(rec, "status", json_object_new_int64(status));
            json_object_object_add(rec, strcmp(w->cause, "loss") == 0 ||
                                   strcmp(w->cause, "latency") == 0 ? "revert_reason" : "error",
                                   json_object_new_string(w->note));
        }
        if (recovered) {
            /* the counters died with the crashed process */
            json_object_object_add(rec, "scope", json_object_new_string("none"));
            json_object_object_add(rec, "complete", json_object_new_boolean(false));
        } else {
            json_object_object_add(rec, "scope", json_object_new_string("collector"));
            json_object_object_add(rec, "accepted", json_object_new_uint64(c.accepted));
            json_object_object_add(rec, "exported", json_object_new_uint64(c.exported));
            json_object_object_add(rec, "enqueue_failed", json_object_new_uint64(c.enqueue_failed));
            json_object_object_add(rec, "lost", json_object_new_uint64(c.lost));
            /* beside the window's own: what the collector lost meanwhile,
             * spans queued before the window opened included */
            json_object_object_add(rec, "lost_collector", json_object_new_uint64(c.lost_collector));
            json_object_object_add(rec, "queued_before", json_object_new_uint64(w->own.backlog));
            /* accepted by the end of the grace period, neither exported nor
             * lost when the record was written */
            json_object_object_add(rec, "queued", json_object_new_uint64(queued));
            if (queued > 0)
                json_object_object_add(rec, "queued_note", json_object_new_string(
                    may_wait ? "still batched or queued 30 s after the grace period (is the "
                               "destination down?)"
                             : "still batched or queued when the collector stopped"));
            json_object_object_add(rec, "waited_ms",
                                   json_object_new_int64(t - w->drain_since_mono));
            put_reasons(rec, "refused", c.now.refused, w->at_start.refused);
            put_reasons(rec, "dropped", c.now.dropped, w->at_start.dropped);
            put_reasons(rec, "send_failed", c.now.send_failed, w->at_start.send_failed);
            if (w->target->match.n > 0)
                put_target_counts(rec, w, &c);
            if (w->target->engine_log.receiver != NULL)
                put_engine_counts(rec, w, &c);
            if (w->lat != NULL) {
                tc_lat_view lv;

                sf_tc_latency_view(w->lat, &lv);
                json_object_object_add(rec, "latency", sf_tc_latency_json(
                    &lv, &w->target->engine_metrics));
            }
            json_object_object_add(rec, "complete", json_object_new_boolean(complete(w, &c)));
            json_object_object_add(rec, "capture", json_object_new_string(verdict(w, &c)));
        }
        json_object_object_add(rec, "marker", json_object_new_string(marker));
    }
    sf_info("trace_control: window '%s' on target '%s' closed (%s; capture %s)", w->id,
            w->target->id, w->cause, recovered ? "incomplete" : verdict(w, &c));
    w->closed = (tc_closed){ .valid = true, .accepted = c.accepted, .exported = c.exported,
                             .lost = c.lost, .queued = queued,
                             .engine_dropped = c.engine[TC_ENG_EVENTS],
                             .complete = !recovered && complete(w, &c),
                             .capture = recovered ? "incomplete" : verdict(w, &c),
                             .closed_wall = sf_wall_ms() };
    sf_tc_latency_view(w->lat, &w->closed.lat);
    memcpy(w->closed.id, w->id, sizeof(w->closed.id));
    memcpy(w->closed.cause, w->cause, sizeof(w->closed.cause));
    snprintf(w->last_close, sizeof(w->last_close), "last window '%s' closed (%s%s%s): %" PRIu64
             " spans accepted, %" PRIu64 " exported, %" PRIu64 " lost, %" PRIu64 " queued; "
             "capture %s", w->id, w->cause, w->note[0] ? ": " : "", w->note, c.accepted,
             c.exported, c.lost, queued, recovered ? "incomplete" : verdict(w, &c));
    return sf_tc_audit_record(x, rec);
}

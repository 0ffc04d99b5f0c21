/* pipeline/extensions/trace_control/trace_control_engine_log.c: what an
 * engine says it dropped. A target's `engine_log` names the logs receiver
 * that reads the engine's log; the core's log tap hands this file every
 * logs request that receiver emitted, as the receiver made it (before the
 * fence removes bodies). While a window of the target is open or in its
 * grace period, the records of the engine (its `match`) whose body matches
 * one of its drop patterns are counted: one event per message, and the
 * number of trace ops when the message says it (a group `ops`). The text
 * itself goes nowhere: only counts leave this file. */
#include "trace_control_int.h"
#include "sf_otlp_wire.h"

#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"

sf_status sf_tc_drops_compile(const sf_tc_engine_log *el, tc_drops *d)
{
    memset(d, 0, sizeof(*d));
    for (size_t i = 0; i < el->n_drops; i++) {
        int err;
        PCRE2_SIZE at;
        int group;

        d->re[i] = pcre2_compile((PCRE2_SPTR)el->drops[i], PCRE2_ZERO_TERMINATED, PCRE2_UTF,
                                 &err, &at, NULL);
        if (d->re[i] == NULL) {
            sf_tc_drops_free(d);
            return SF_CONFIG;       /* the config check compiled it already */
        }
        d->n++;
        group = pcre2_substring_number_from_name(d->re[i], (PCRE2_SPTR) "ops");
        d->ops_group[i] = group > 0 ? (uint32_t)group : 0;
    }
    d->mctx = pcre2_match_context_create(NULL);
    if (d->mctx == NULL) {
        sf_tc_drops_free(d);
        return SF_ENOMEM;
    }
    /* a pattern that backtracks without end cannot stall a receiver */
    pcre2_set_match_limit(d->mctx, 100000);
    pcre2_set_depth_limit(d->mctx, 1000);
    return SF_OK;
}

void sf_tc_drops_free(tc_drops *d)
{
    for (size_t i = 0; i < d->n; i++)
        pcre2_code_free(d->re[i]);
    pcre2_match_context_free(d->mctx);
    memset(d, 0, sizeof(*d));
}

const char *sf_tc_str_attr(Opentelemetry__Proto__Common__V1__KeyValue *const *kv, size_t n,
                           const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (kv[i]->key != NULL && strcmp(kv[i]->key, key) == 0 && kv[i]->value != NULL &&
            kv[i]->value->value_case ==
                OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE)
            return kv[i]->value->string_value;
    return NULL;
}

/* Whether a record is the engine's: every pair of `m` is an attribute of
 * the record, or else of its resource, with that string value. */
static bool is_engines(const sf_strmap *m, const Opentelemetry__Proto__Logs__V1__LogRecord *r,
                       const Opentelemetry__Proto__Resource__V1__Resource *res)
{
    for (size_t i = 0; i < m->n; i++) {
        const char *v = sf_tc_str_attr(r->attributes, r->n_attributes, m->keys[i]);

        if (v == NULL && res != NULL)
            v = sf_tc_str_attr(res->attributes, res->n_attributes, m->keys[i]);
        if (v == NULL || strcmp(v, m->values[i]) != 0)
            return false;
    }
    return true;
}

/* One body against the patterns: the first that matches counts. */
static void match_body(const tc_drops *d, pcre2_match_data *md, const char *body,
                       tc_engine_drops *out)
{
    size_t len = strlen(body);

    for (size_t i = 0; i < d->n; i++) {
        PCRE2_SIZE *ov;
        uint64_t ops = 0;
        bool sized = false;

        if (pcre2_match(d->re[i], (PCRE2_SPTR)body, len, 0, 0, md, d->mctx) < 0)
            continue;
        out->events++;
        ov = pcre2_get_ovector_pointer(md);
        if (d->ops_group[i] > 0 && d->ops_group[i] < pcre2_get_ovector_count(md) &&
            ov[2 * d->ops_group[i]] != PCRE2_UNSET) {
            size_t a = ov[2 * d->ops_group[i]], b = ov[2 * d->ops_group[i] + 1];

            for (size_t k = a; k < b && k < a + 18; k++) {
                if (body[k] < '0' || body[k] > '9')
                    break;
                ops = ops * 10 + (uint64_t)(body[k] - '0');
                sized = true;
            }
        }
        if (sized) {
            out->sized++;
            out->ops += ops;
        }
        return;
    }
}

sf_status sf_tc_engine_log_scan(const sf_tc_engine_log *el, const tc_drops *d,
                                const uint8_t *raw, size_t len, tc_engine_drops *out)
{
    Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest *req;
    pcre2_match_data *md;
    sf_arena *arena;
    size_t items;
    sf_status st = SF_OK;

    memset(out, 0, sizeof(*out));
    /* the codec's own bounds first: no deeper nesting than a pipeline takes */
    if (sf_otlp_scan_signal(SF_SIGNAL_LOGS, raw, len, SF_OTLP_DEFAULT_MAX_DEPTH, &items) != SF_OK)
        return SF_INVALID;
    if (items == 0 || d->n == 0)
        return SF_OK;
    arena = sf_arena_create(8192, 0);
    if (arena == NULL)
        return SF_ENOMEM;
    md = pcre2_match_data_create(16, NULL);
    req = opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
        sf_arena_pb_allocator(arena), len, raw);
    if (md == NULL || req == NULL) {
        st = md == NULL ? SF_ENOMEM : SF_INVALID;
        goto out_free;
    }
    for (size_t i = 0; i < req->n_resource_logs; i++) {
        const Opentelemetry__Proto__Logs__V1__ResourceLogs *rl = req->resource_logs[i];

        for (size_t j = 0; j < rl->n_scope_logs; j++) {
            const Opentelemetry__Proto__Logs__V1__ScopeLogs *sl = rl->scope_logs[j];

            for (size_t k = 0; k < sl->n_log_records; k++) {
                const Opentelemetry__Proto__Logs__V1__LogRecord *r = sl->log_records[k];

                if (r->body == NULL || r->body->value_case !=
                        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE ||
                    !is_engines(&el->match, r, rl->resource))
                    continue;
                match_body(d, md, r->body->string_value, out);
            }
        }
    }
out_free:
    pcre2_match_data_free(md);
    sf_arena_destroy(arena);
    return st;
}

/* Receiver threads (sf_log_tap_fn). Returns at once unless a window of a
 * target reading this receiver counts; decodes the request once for all
 * such targets. Refused requests count too: the engine said it all the
 * same. */
void sf_tc_log_tap(void *ctx, const char *receiver, const uint8_t *raw, size_t len,
                   bool accepted)
{
    tc_ctx *x = ctx;

    (void)accepted;
    if (atomic_load_explicit(&x->log_counting, memory_order_acquire) == 0)
        return;
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];
        const sf_tc_engine_log *el = &w->target->engine_log;
        tc_engine_drops got;

        if (el->receiver == NULL || !atomic_load_explicit(&w->log_counting, memory_order_acquire) ||
            strcmp(el->receiver, receiver) != 0)
            continue;
        if (sf_tc_engine_log_scan(el, &w->drops, raw, len, &got) != SF_OK) {
            atomic_fetch_add_explicit(&w->engine[TC_ENG_UNREAD], 1, memory_order_relaxed);
            continue;
        }
        if (got.events > 0) {
            atomic_fetch_add_explicit(&w->engine[TC_ENG_EVENTS], got.events,
                                      memory_order_relaxed);
            atomic_fetch_add_explicit(&w->engine[TC_ENG_SIZED], got.sized, memory_order_relaxed);
            atomic_fetch_add_explicit(&w->engine[TC_ENG_OPS], got.ops, memory_order_relaxed);
        }
    }
}

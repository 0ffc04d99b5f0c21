/* bench/sample_batch.h: a realistic SGLang-like OTLP batch, shared by the
 * test sender (tools/sf_send.c) and the benchmarks. Each span has 12
 * attributes (5 of them on the allowlist in bench/configs, the rest stand-ins
 * for prompt text, output text and customer ids) and 2 events with 3
 * attributes each (1 allowlisted). About 1 KB per span encoded.
 * sf_sample_request() numbers its ids (seed, then a counter), which makes
 * them cheap to compress; sf_sample_request_random() gives the same spans
 * the ids a real engine makes: random 16-byte trace ids shared by the 4
 * spans of a request, random 8-byte span ids, parents, a random
 * 32-hex-digit request id per request and jittered times and counts. */
#ifndef SF_BENCH_SAMPLE_BATCH_H
#define SF_BENCH_SAMPLE_BATCH_H

#include <stdio.h>
#include <string.h>

#include "sf_alloc.h"
#include "sf_arena.h"
#include "sf_request.h"

/* The allowlist the benchmark configs use for these batches. */
#define SF_SAMPLE_SPAN_KEYS \
    "gen_ai.request.id", "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens", \
    "gen_ai.request.max_tokens", "gen_ai.request.temperature"
#define SF_SAMPLE_EVENT_KEYS "batch_size"

static sf_otlp_kv *sample_kv(sf_arena *a, const char *key)
{
    sf_otlp_kv *kv = sf_arena_alloc(a, sizeof(*kv));
    sf_otlp_any *v = sf_arena_alloc(a, sizeof(*v));

    opentelemetry__proto__common__v1__key_value__init(kv);
    opentelemetry__proto__common__v1__any_value__init(v);
    kv->key = (char *)key;
    kv->value = v;
    return kv;
}

static sf_otlp_kv *sample_str(sf_arena *a, const char *key, const char *val)
{
    sf_otlp_kv *kv = sample_kv(a, key);
    kv->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    kv->value->string_value = sf_arena_strndup(a, val, strlen(val));
    return kv;
}

static sf_otlp_kv *sample_int(sf_arena *a, const char *key, int64_t val)
{
    sf_otlp_kv *kv = sample_kv(a, key);
    kv->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
    kv->value->int_value = val;
    return kv;
}

static sf_otlp_kv *sample_dbl(sf_arena *a, const char *key, double val)
{
    sf_otlp_kv *kv = sample_kv(a, key);
    kv->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
    kv->value->double_value = val;
    return kv;
}

static const char sample_prompt[] =
    "You are a helpful assistant. The customer's account number is 4242-1111-0000 "
    "and they asked about the refund for order 88123. Summarise their last three "
    "messages and draft a reply that apologises for the delay.";

/* xorshift64*: reproducible "random" ids from a seed. */
static uint64_t sample_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static uint8_t *sample_request(size_t spans, uint64_t seed, int random_ids, int lean, size_t *len)
{
    sf_arena *a = sf_arena_create(1 << 20, 0);
    sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    sf_otlp_resource_spans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    sf_otlp_resource res = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    sf_otlp_scope_spans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    sf_otlp_scope scope = OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
    sf_otlp_resource_spans *rsp = &rs;
    sf_otlp_scope_spans *ssp = &ss;
    sf_otlp_kv *res_attrs[3];
    uint8_t *out;
    char buf[64];
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1, rid[2] = { 0, 0 };
    uint8_t *tid = NULL, *root = NULL;

    if (a == NULL)
        return NULL;
    res_attrs[0] = sample_str(a, "service.name", "sglang");
    res_attrs[1] = sample_str(a, "host.name", "cvm-replica-7");
    res_attrs[2] = sample_str(a, "customer.tenant", "acme-corp");
    res.attributes = res_attrs;
    res.n_attributes = 3;
    scope.name = "sglang.tracing";
    scope.version = "0.4.9";
    rs.resource = &res;
    rs.scope_spans = &ssp;
    rs.n_scope_spans = 1;
    ss.scope = &scope;
    ss.n_spans = spans;
    ss.spans = sf_arena_alloc(a, spans * sizeof(*ss.spans));
    req.resource_spans = &rsp;
    req.n_resource_spans = 1;

    for (size_t i = 0; i < spans; i++) {
        sf_otlp_span *sp = sf_arena_alloc(a, sizeof(*sp));
        sf_otlp_status *status = sf_arena_alloc(a, sizeof(*status));
        uint64_t id = seed * 1000003u + i + 1;
        uint8_t *sid = sf_arena_alloc(a, 8);

        opentelemetry__proto__trace__v1__span__init(sp);
        opentelemetry__proto__trace__v1__status__init(status);
        if (!random_ids) {
            tid = sf_arena_alloc(a, 16);
            memset(tid, 0, 16);
            memcpy(tid, &seed, sizeof(seed));
            memcpy(tid + 8, &id, sizeof(id));
            memcpy(sid, &id, sizeof(id));
        } else {
            uint64_t r;

            if (i % 4 == 0) {   /* a new request: its trace and its id */
                tid = sf_arena_alloc(a, 16);
                r = sample_rand(&rng);
                memcpy(tid, &r, 8);
                r = sample_rand(&rng);
                memcpy(tid + 8, &r, 8);
                rid[0] = sample_rand(&rng);
                rid[1] = sample_rand(&rng);
            }
            r = sample_rand(&rng);
            memcpy(sid, &r, 8);
            if (i % 4 == 0) {
                root = sid;
            } else {
                sp->parent_span_id.data = root;
                sp->parent_span_id.len = 8;
            }
            id = sample_rand(&rng) % 1000000000u;    /* times and counts jitter */
        }
        sp->trace_id.data = tid;
        sp->trace_id.len = 16;
        sp->span_id.data = sid;
        sp->span_id.len = 8;
        sp->name = (char *)"decode_step";
        sp->kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL;
        sp->start_time_unix_nano = 1764480000000000000ull + id * 1000;
        sp->end_time_unix_nano = sp->start_time_unix_nano + 25000000ull + (random_ids ? id % 20000000u : 0);
        sp->n_attributes = lean ? 6 : 12;
        sp->attributes = sf_arena_alloc(a, 12 * sizeof(*sp->attributes));
        if (random_ids)
            snprintf(buf, sizeof(buf), "req-%016llx%016llx", (unsigned long long)rid[0],
                     (unsigned long long)rid[1]);
        else
            snprintf(buf, sizeof(buf), "req-%016llx", (unsigned long long)id);
        sp->attributes[0] = sample_str(a, "gen_ai.request.id", buf);
        sp->attributes[1] = sample_int(a, "gen_ai.usage.prompt_tokens",
                                       1024 + (int64_t)((random_ids ? id : i) % 97));
        sp->attributes[2] = sample_int(a, "gen_ai.usage.completion_tokens",
                                       256 + (int64_t)((random_ids ? id / 97 : i) % 31));
        sp->attributes[3] = sample_int(a, "gen_ai.request.max_tokens", 2048);
        sp->attributes[4] = sample_dbl(a, "gen_ai.request.temperature", 0.7);
        sp->attributes[5] = sample_dbl(a, "gen_ai.request.top_p", 0.95);
        sp->attributes[6] = sample_str(a, "gen_ai.prompt", sample_prompt);
        sp->attributes[7] = sample_str(a, "gen_ai.completion",
                                       "I am sorry for the delay with your refund for order 88123.");
        sp->attributes[8] = sample_str(a, "user.email", "jane.doe@example.com");
        sp->attributes[9] = sample_str(a, "customer.id", "cust-000042");
        sp->attributes[10] = sample_str(a, "thread_label", "scheduler-tp0");
        sp->attributes[11] = sample_int(a, "tp_rank", (int64_t)(i % 8));
        sp->n_events = lean ? 0 : 2;
        sp->events = sf_arena_alloc(a, 2 * sizeof(*sp->events));
        for (size_t e = 0; e < sp->n_events; e++) {
            sf_otlp_event *ev = sf_arena_alloc(a, sizeof(*ev));
            opentelemetry__proto__trace__v1__span__event__init(ev);
            ev->name = (char *)(e == 0 ? "schedule" : "forward");
            ev->time_unix_nano = sp->start_time_unix_nano + e * 1000000ull;
            ev->n_attributes = 3;
            ev->attributes = sf_arena_alloc(a, 3 * sizeof(*ev->attributes));
            ev->attributes[0] = sample_int(a, "batch_size", 32);
            ev->attributes[1] = sample_str(a, "prompt_snippet", "Summarise their last three messages");
            ev->attributes[2] = sample_str(a, "client.ip", "10.1.2.3");
            sp->events[e] = ev;
        }
        status->code = (i % 50 == 0) ? OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR
                                     : OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_OK;
        status->message = (char *)((i % 50 == 0) ? "prompt rejected: contains 4242-1111-0000" : "");
        sp->status = status;
        ss.spans[i] = sp;
    }
    *len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
    out = sf_malloc(*len ? *len : 1);
    if (out != NULL)
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, out);
    sf_arena_destroy(a);
    return out;
}

/* Packed ExportTraceServiceRequest with `spans` spans; `seed` varies ids.
 * Returns an sf_malloc'd buffer (sf_free it) and its length, or NULL. */
static inline uint8_t *sf_sample_request(size_t spans, uint64_t seed, size_t *len)
{
    return sample_request(spans, seed, 0, 0, len);
}

/* Lean spans: the first 6 attributes (ids, token counts, sampling), no
 * text and no events: about a third of the bytes, for a flood whose
 * spans/s must outrun what the collector reads of one connection. */
static inline uint8_t *sf_sample_request_lean(size_t spans, uint64_t seed, size_t *len)
{
    return sample_request(spans, seed, 0, 1, len);
}

/* The same spans with high-entropy ids (see the top of this file). */
static inline uint8_t *sf_sample_request_random(size_t spans, uint64_t seed, size_t *len)
{
    return sample_request(spans, seed, 1, 0, len);
}

#endif

/* bench/sglang_batch.h: an SGLang-shaped traces request (root, thread and
 * two slice spans per request), encoded, for the benchmarks that run
 * configs/cvm.yaml's transform on it (bench_codec, codec_calls). */
#ifndef SF_BENCH_SGLANG_BATCH_H
#define SF_BENCH_SGLANG_BATCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sf_otlp_json.h"
#include "internal/sf_core.h"

/* One request of SGLang's tracing path (as tests/e2e/privacy_markers.py's
 * control): a root span with the request's keys, a thread span, two slices
 * (one with a schedule event and a link). */
static const char sglang_request[] =
    "{\"traceId\":\"%032x\",\"spanId\":\"%016x\",\"name\":\" Req 5f2b8e0c\",\"attributes\":["
    "{\"key\":\"rid\",\"value\":{\"stringValue\":\"5f2b8e0c9a7d4e1f8b3c6a2d0e9f%04x\"}},"
    "{\"key\":\"module\",\"value\":{\"stringValue\":\"sglang::request\"}},"
    "{\"key\":\"gen_ai.request.id\",\"value\":{\"stringValue\":\"5f2b8e0c9a7d4e1f8b3c6a2d0e9f%04x\"}},"
    "{\"key\":\"gen_ai.usage.prompt_tokens\",\"value\":{\"intValue\":\"512\"}},"
    "{\"key\":\"gen_ai.usage.cached_tokens\",\"value\":{\"intValue\":\"128\"}},"
    "{\"key\":\"gen_ai.usage.completion_tokens\",\"value\":{\"intValue\":\"64\"}},"
    "{\"key\":\"gen_ai.request.max_tokens\",\"value\":{\"intValue\":\"256\"}},"
    "{\"key\":\"gen_ai.request.temperature\",\"value\":{\"doubleValue\":0.7}},"
    "{\"key\":\"gen_ai.request.top_p\",\"value\":{\"doubleValue\":0.9}},"
    "{\"key\":\"gen_ai.request.top_k\",\"value\":{\"intValue\":\"40\"}},"
    "{\"key\":\"gen_ai.request.n\",\"value\":{\"intValue\":\"1\"}},"
    "{\"key\":\"gen_ai.response.model\",\"value\":{\"stringValue\":\"meta-llama/Llama-3.1-8B\"}},"
    "{\"key\":\"gen_ai.response.finish_reasons\",\"value\":{\"stringValue\":\"[\\\"stop\\\"]\"}},"
    "{\"key\":\"gen_ai.latency.time_to_first_token\",\"value\":{\"doubleValue\":0.031}},"
    "{\"key\":\"gen_ai.latency.time_in_model_prefill\",\"value\":{\"doubleValue\":0.012}},"
    "{\"key\":\"gen_ai.latency.time_in_model_decode\",\"value\":{\"doubleValue\":0.41}},"
    "{\"key\":\"gen_ai.latency.time_in_model_inference\",\"value\":{\"doubleValue\":0.43}},"
    "{\"key\":\"gen_ai.latency.e2e\",\"value\":{\"doubleValue\":0.45}}]},"
    "{\"traceId\":\"%032x\",\"spanId\":\"%016x\",\"name\":\"Scheduler [TP 0] (host:3f2a9c1d | pid:12345)\","
    "\"attributes\":[{\"key\":\"tp_rank\",\"value\":{\"intValue\":\"0\"}},"
    "{\"key\":\"host_id\",\"value\":{\"stringValue\":\"3f2a9c1d5e6f7a8b9c0d1e2f3a4b5c6d\"}},"
    "{\"key\":\"pid\",\"value\":{\"intValue\":\"12345\"}},"
    "{\"key\":\"thread_label\",\"value\":{\"stringValue\":\"Scheduler\"}}]},"
    "{\"traceId\":\"%032x\",\"spanId\":\"%016x\",\"name\":\"tokenize\"},"
    "{\"traceId\":\"%032x\",\"spanId\":\"%016x\",\"name\":\"decode_loop\",\"attributes\":["
    "{\"key\":\"decode_ct\",\"value\":{\"intValue\":\"63\"}}],"
    "\"events\":[{\"timeUnixNano\":\"1700000000100000000\",\"name\":\"schedule\",\"attributes\":["
    "{\"key\":\"bid\",\"value\":{\"stringValue\":\"3f2a9c1d\"}},"
    "{\"key\":\"batch_size\",\"value\":{\"intValue\":\"8\"}},"
    "{\"key\":\"forward_mode\",\"value\":{\"stringValue\":\"decode\"}}]}],"
    "\"links\":[{\"traceId\":\"%032x\",\"spanId\":\"%016x\"}]}";

/* `spans` spans (a multiple of 4) of SGLang requests, encoded. */
static uint8_t *sglang_batch(long spans, size_t *len)
{
    size_t cap = (size_t)spans * 1200 + 1024, at = 0;
    char *json = malloc(cap);
    sf_arena *a = sf_arena_create(1 << 20, 0);
    sf_otlp_request *req = NULL;
    uint8_t *out;
    char err[200];

    at += (size_t)snprintf(json + at, cap - at, "{\"resourceSpans\":[{\"resource\":{\"attributes\":["
        "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"sglang\"}},"
        "{\"key\":\"telemetry.sdk.language\",\"value\":{\"stringValue\":\"python\"}}]},"
        "\"scopeSpans\":[{\"scope\":{\"name\":\"sglang server\"},\"spans\":[");
    for (long r = 0; r < spans / 4; r++) {
        unsigned t = (unsigned)r + 1;

        at += (size_t)snprintf(json + at, cap - at, "%s", r ? "," : "");
        at += (size_t)snprintf(json + at, cap - at, sglang_request, t, 4 * t, t & 0xffff,
                               t & 0xffff, t, 4 * t + 1, t, 4 * t + 2, t, 4 * t + 3, t, 4 * t + 2);
    }
    snprintf(json + at, cap - at, "]}]}]}");
    if (sf_otlp_json_decode(a, json, strlen(json), 32, &req, err, sizeof(err)) != SF_OK) {
        fprintf(stderr, "sglang batch: %s\n", err);
        exit(1);
    }
    *len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(req);
    out = malloc(*len);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(req, out);
    sf_arena_destroy(a);
    free(json);
    return out;
}

#endif

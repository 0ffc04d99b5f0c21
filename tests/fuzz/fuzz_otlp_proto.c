/* tests/fuzz/fuzz_otlp_proto.c: libFuzzer target for the OTLP protobuf path
 * a receiver runs: wire check, protobuf-c decode into the batch arena, the
 * transform processor with a fixed allowlist, re-encode. Aborts if anything
 * outside the allowlist (or a status message) survives the filter, and if
 * the processor's wire path (consume_wire) and tree path disagree. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/sf_core.h"
#include "processors/transform/transform.h"
#include "fuzz_otlp_check.h"

/* The policy under test, loaded through the real config loader. The
 * allowlists the checks use (fuzz_otlp_check.h) are written out separately
 * so a parser or program bug cannot widen both at once. */
static const char policy_yaml[] =
    "receivers:\n"
    "  otlp:\n"
    "    protocols:\n"
    "      grpc:\n"
    "processors:\n"
    "  transform/fuzz:\n"
    "    error_mode: propagate\n"
    "    trace_statements:\n"
    "      - keep_keys(resource.attributes, [\"service.name\", \"r\"])\n"
    "      - keep_keys(scope.attributes, [\"scope.keep\", \"s\"])\n"
    "      - keep_keys(span.attributes, [\"gen_ai.request.id\", \"gen_ai.usage.prompt_tokens\","
    " \"tp_rank\", \"k\", \"x\"])\n"
    "      - delete_key(span.attributes, \"x\")\n"
    "      - set(span.status.message, \"\")\n"
    "      - keep_keys(spanevent.attributes, [\"batch_size\", \"e\"])\n"
    "      - keep_keys(link.attributes, [\"link.keep\", \"l\"])\n"
    "exporters:\n"
    "  otlphttp:\n"
    "    endpoint: http://127.0.0.1:4318\n"
    "service:\n"
    "  pipelines:\n"
    "    traces:\n"
    "      receivers: [otlp]\n"
    "      processors: [transform/fuzz]\n"
    "      exporters: [otlphttp]\n";

static struct sf_component comp;

static void init_once(void)
{
    static int done;
    sf_diag *diag;
    sf_config *cfg = NULL;
    sf_config_component *cc;

    if (done)
        return;
    done = 1;
    sf_log_set_level(SF_LOG_OFF);
    diag = sf_diag_create("fuzz_otlp_proto");
    if (diag == NULL ||
        sf_config_load_string("fuzz_otlp_proto", policy_yaml, strlen(policy_yaml), diag,
                              &cfg) != SF_OK) {
        if (diag != NULL)
            sf_diag_print(diag);
        fprintf(stderr, "fuzz_otlp_proto: policy does not load\n");
        abort();
    }
    sf_diag_destroy(diag);
    cc = sf_config_find(cfg, "transform/fuzz");
    if (cc == NULL || cc->type != &sf_transform_processor_type)
        abort();
    /* cfg stays loaded for the life of the process: the program lives in it. */
    comp.type = &sf_transform_processor_type;
    comp.id = cc->id;
    comp.config = cc->config;
    if (sf_transform_processor_type.create(&comp, cc->config) != SF_OK)
        abort();
}

/* Unpack + pack: the normal form two encodings are compared in. NULL when
 * protobuf-c rejects the bytes; else malloc'd (library memory, not ours). */
static uint8_t *normalise(const uint8_t *data, size_t len, size_t *out_len)
{
    sf_otlp_request *req =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len,
                                                                                         data);
    uint8_t *out;

    if (req == NULL)
        return NULL;
    *out_len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(req);
    out = malloc(*out_len ? *out_len : 1);
    if (out == NULL)
        abort();
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(req, out);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(req,
                                                                                          NULL);
    return out;
}

/* Run the processor's wire form, if it has one, on the raw request. */
static sf_status run_wire(const uint8_t *data, size_t len, size_t spans, sf_buf **out)
{
    *out = NULL;
    if (sf_transform_processor_type.consume_wire == NULL)
        return SF_UNSUPPORTED;
    return sf_transform_processor_type.consume_wire(&comp, data, len, spans, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_arena *arena;
    sf_batch b;
    sf_buf *wire_out = NULL, *tree_out = NULL;
    sf_status wst, tst;

    init_once();
    /* Bounded like a receiver's arena, so a large input fails with ENOMEM
     * instead of exhausting the fuzzer's memory. */
    arena = sf_arena_create(16384, 64u << 20);
    if (arena == NULL)
        abort();
    if (sf_batch_init(&b, arena, data, size, SF_OTLP_DEFAULT_MAX_DEPTH) != SF_OK)
        goto out_arena;

    wst = run_wire(b.raw, b.raw_len, b.spans, &wire_out);
    if (wst == SF_OK) {
        if (wire_out == NULL)
            fuzz_fail("consume_wire returned SF_OK without output");
        fuzz_check_filtered(wire_out->data, wire_out->len, "consume_wire");
    }

    tst = sf_batch_request(&b);
    if (tst == SF_OK) {
        if (b.spans != sf_otlp_count_spans(b.req))
            fuzz_fail("wire check counted %zu spans, protobuf-c decoded %zu", b.spans,
                      sf_otlp_count_spans(b.req));
        tst = sf_transform_processor_type.consume(&comp, &b);
        if (tst != SF_OK && tst != SF_FILTER)
            fuzz_fail("consume returned %s", sf_status_name(tst));
    }
    if (tst == SF_OK) {
        if (sf_batch_encode(&b, &tree_out) != SF_OK)
            fuzz_fail("sf_batch_encode failed");
        fuzz_check_filtered(tree_out->data, tree_out->len, "consume");
    }

    /* Both forms ran and succeeded: they must have made the same request. */
    if (wst == SF_OK && tst == SF_OK) {
        size_t wn = 0, tn = 0;
        uint8_t *w = normalise(wire_out->data, wire_out->len, &wn);
        uint8_t *t = normalise(tree_out->data, tree_out->len, &tn);

        if (w == NULL || t == NULL)
            fuzz_fail("output does not decode (wire %p, tree %p)", (void *)w, (void *)t);
        if (wn != tn || memcmp(w, t, wn) != 0)
            fuzz_fail("consume_wire and consume differ (%zu vs %zu bytes normalised)", wn, tn);
        free(w);
        free(t);
    }
    sf_buf_unref(tree_out);
    sf_buf_unref(wire_out);
    sf_batch_release(&b);
out_arena:
    sf_arena_destroy(arena);
    return 0;
}

/* tests/fuzz/fuzz_otlp_json.c: libFuzzer target for the OTLP/JSON decoder an
 * HTTP receiver runs on application/json bodies: decode into an arena, pack
 * to protobuf (as the receiver does on entry), and require that what it
 * accepted passes the wire check the protobuf path applies, that its JSON
 * encoding (the file exporter's) decodes again under the same rules, and
 * that every string configs/cvm.yaml's transform exports from it satisfies
 * its field's rule (fuzz_cvm_rules.h, as the protobuf target checks). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/sf_core.h"
#include "processors/transform/transform.h"
#include "sf_alloc.h"
#include "sf_log.h"
#include "sf_otlp_json.h"
#include "sf_otlp_count.h"
#include "fuzz_otlp_check.h"
#include "fuzz_cvm_rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy without a terminator: ASan sees any read past len. */
    char *json = malloc(size ? size : 1);
    sf_arena *arena = sf_arena_create(16384, 64u << 20);
    sf_otlp_request *req = NULL;
    char err[256];
    sf_status st;

    sf_log_set_level(SF_LOG_OFF);
    if (json == NULL || arena == NULL)
        abort();
    memcpy(json, data, size);
    err[0] = '\0';
    st = sf_otlp_json_decode(arena, json, size, SF_OTLP_DEFAULT_MAX_DEPTH, &req, err, sizeof(err));
    if (st == SF_OK) {
        size_t len, packed, spans = 0;
        uint8_t *buf;

        if (req == NULL)
            abort();
        len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(req);
        buf = malloc(len ? len : 1);
        if (buf == NULL)
            abort();
        packed = opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(req, buf);
        if (packed != len) {
            fprintf(stderr, "json: packed %zu bytes, expected %zu\n", packed, len);
            abort();
        }
        if (sf_otlp_scan(buf, len, SF_OTLP_DEFAULT_MAX_DEPTH, &spans) != SF_OK ||
            spans != sf_otlp_count_spans(req)) {
            fprintf(stderr, "json: accepted a request the wire check refuses (%zu spans)\n",
                    spans);
            abort();
        }
        check_cvm_rules(buf, len);
        free(buf);
        /* What the decoder took, the encoder writes as text the decoder
         * takes again, with the same spans: no member twice, no lone
         * surrogate, nothing its own rules refuse. */
        {
            char *text = NULL;
            size_t text_len = 0;
            sf_otlp_request *again = NULL;

            if (sf_otlp_json_encode(req, &text, &text_len) == SF_OK) {
                st = sf_otlp_json_decode(arena, text, text_len, SF_OTLP_DEFAULT_MAX_DEPTH, &again,
                                         err, sizeof(err));
                if (st != SF_OK && st != SF_ENOMEM) {
                    fprintf(stderr, "json: its own encoding refused: %s\n", err);
                    abort();
                }
                if (st == SF_OK && sf_otlp_count_spans(again) != spans) {
                    fprintf(stderr, "json: re-decoded %zu spans, first time %zu\n",
                            sf_otlp_count_spans(again), spans);
                    abort();
                }
                sf_free(text);
            }
        }
    } else if (st == SF_INVALID) {
        if (memchr(err, '\0', sizeof(err)) == NULL)
            abort();
    } else if (st != SF_ENOMEM && st != SF_TOOBIG) {
        fprintf(stderr, "json: unexpected status %s\n", sf_status_name(st));
        abort();
    }
    sf_arena_destroy(arena);
    free(json);
    return 0;
}

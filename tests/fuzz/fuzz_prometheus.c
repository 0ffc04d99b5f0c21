/* tests/fuzz/fuzz_prometheus.c: libFuzzer target for the prometheus
 * receiver's exposition parser and its OTLP conversion. The first byte
 * picks the format (odd: OpenMetrics) and tight limits (bit 1), the rest is
 * the body. Checks: what the parser accepted keeps its own invariants
 * (sorted unique labels, UTF-8 values without NUL, limits held, family
 * indexes in range), and its conversion is a request the codec takes as
 * any OTLP input, with as many points as the converter said. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receivers/prometheus/prom_convert.h"
#include "receivers/prometheus/prom_parse.h"
#include "sf_log.h"
#include "sf_request.h"

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "FUZZ CHECK FAILED: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                         \
        }                                                                    \
    } while (0)

static const sf_prom_label static_labels[] = { { .name = "replica", .value = "r1",
                                                 .value_len = 2 } };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const sf_prom_limits loose = { .max_line = 4096, .sample_limit = 2000,
                                          .label_limit = 32, .label_name_length = 64,
                                          .label_value_length = 512 };
    static const sf_prom_limits tight = { .max_line = 64, .sample_limit = 5, .label_limit = 2,
                                          .label_name_length = 4, .label_value_length = 4 };
    sf_prom_target target = { .job = "j", .instance = "127.0.0.1:1", .host = "127.0.0.1",
                              .port = "1", .scheme = "http", .labels = static_labels,
                              .n_labels = 1, .honor_timestamps = true };
    const sf_prom_limits *lim;
    sf_prom_format fmt;
    sf_prom_result r;
    sf_prom_scrape_info info = { .up = true, .time_ns = 1700000000000000000ULL };
    sf_prom_convert_stats st;
    sf_arena *arena, *scratch;
    sf_prom_starts *starts;
    uint8_t *body, *out;
    size_t len;

    sf_log_set_level(SF_LOG_OFF);
    if (size == 0)
        return 0;
    fmt = (data[0] & 1) ? SF_PROM_OPENMETRICS : SF_PROM_TEXT;
    lim = (data[0] & 2) ? &tight : &loose;
    target.honor_labels = (data[0] & 4) != 0;
    /* an exact-size copy without a terminator: ASan sees any read past it */
    body = malloc(size - 1 ? size - 1 : 1);
    arena = sf_arena_create(16384, 64u << 20);
    scratch = sf_arena_create(16384, 0);
    starts = sf_prom_starts_create(lim->sample_limit * 2);
    if (body == NULL || arena == NULL || scratch == NULL || starts == NULL)
        abort();
    memcpy(body, data + 1, size - 1);
    if (sf_prom_parse(body, size - 1, fmt, lim, arena, &r) == SF_PROM_ERR_OK) {
        size_t dups = 0;

        CHECK(r.n_samples <= lim->sample_limit);
        for (size_t i = 0; i < r.n_samples; i++) {
            const sf_prom_sample *s = &r.samples[i];

            CHECK(s->family < r.n_families);
            CHECK(s->n_labels <= lim->label_limit);
            CHECK(s->name != NULL && s->name[0] != '\0');
            dups += s->duplicate;
            for (uint16_t k = 0; k < s->n_labels; k++) {
                CHECK(strlen(s->labels[k].name) <= lim->label_name_length);
                CHECK(s->labels[k].value_len <= lim->label_value_length);
                CHECK(strlen(s->labels[k].value) == s->labels[k].value_len);
                CHECK(sf_otlp_utf8_valid((const uint8_t *)s->labels[k].value,
                                         s->labels[k].value_len));
                if (k > 0)
                    CHECK(strcmp(s->labels[k - 1].name, s->labels[k].name) < 0);
            }
        }
        CHECK(dups == r.duplicates);
        for (size_t f = 0; f < r.n_families; f++)
            CHECK(sf_otlp_utf8_valid((const uint8_t *)r.families[f].help,
                                     strlen(r.families[f].help)));
        /* twice: the second scrape goes through the start-time table */
        for (int pass = 0; pass < 2; pass++) {
            sf_request b;

            CHECK(sf_prom_convert(&r, &target, &info, starts, arena, &out, &len, &st) == SF_OK);
            sf_request_init_signal(&b, scratch, SF_SIGNAL_METRICS, out, len,
                                   SF_OTLP_DEFAULT_MAX_DEPTH);
            CHECK(sf_request_rewrite(&b, NULL, NULL) == SF_OK);
            CHECK(b.spans == st.points);
            sf_request_release(&b);
            info.time_ns += 1000000000ULL;
        }
    }
    sf_prom_starts_destroy(starts);
    sf_arena_destroy(scratch);
    sf_arena_destroy(arena);
    free(body);
    return 0;
}

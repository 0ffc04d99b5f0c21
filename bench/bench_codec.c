/* bench/bench_codec.c: per-stage cost of the hot path on one core, for the
 * SGLang-like batch of bench/sample_batch.h: the floors the end-to-end
 * figures are compared with. Prints spans per CPU-second for each stage
 * (median of `rounds` rounds, CPU time of this thread), then the exporters'
 * compression (gzip on libdeflate at levels 1 and 6, zstd at 1 and 3) of
 * the allowlisted batch, for the sample batch and for the same spans with
 * high-entropy ids: bytes per span and CPU per span, median [min-max].
 *   bench_codec [spans=512] [rounds=5] [only stages whose name has this]
 * ("compress" selects the compression table alone). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample_allowlist.h"
#include "sf_compress.h"
#include "internal/sf_core.h"

typedef double (*stage_fn)(const uint8_t *data, size_t len, sf_arena *arena, long iters);

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile size_t sink;

static double st_memcpy(const uint8_t *data, size_t len, sf_arena *arena, long iters)
{
    uint8_t *dst = sf_malloc(len);
    double t0 = cpu_now();
    (void)arena;
    for (long i = 0; i < iters; i++) {
        memcpy(dst, data, len);
        sink += dst[i % len];
    }
    double t = cpu_now() - t0;
    sf_free(dst);
    return t;
}

static double st_wire_check(const uint8_t *data, size_t len, sf_arena *arena, long iters)
{
    size_t spans;
    double t0 = cpu_now();
    (void)arena;
    for (long i = 0; i < iters; i++) {
        sf_otlp_scan(data, len, SF_OTLP_DEFAULT_MAX_DEPTH, &spans);
        sink += spans;
    }
    return cpu_now() - t0;
}

static double st_unpack(const uint8_t *data, size_t len, sf_arena *arena, long iters)
{
    sf_request b;
    double t0 = cpu_now();
    for (long i = 0; i < iters; i++) {
        sf_request_decode(&b, arena, data, len, SF_OTLP_DEFAULT_MAX_DEPTH);
        sink += b.spans;
        sf_arena_reset(arena);
    }
    return cpu_now() - t0;
}

static double st_unpack_malloc(const uint8_t *data, size_t len, sf_arena *arena, long iters)
{
    double t0 = cpu_now();
    (void)arena;
    for (long i = 0; i < iters; i++) {
        sf_otlp_request *r =
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len, data);
        sink += r->n_resource_spans;
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(r, NULL);
    }
    return cpu_now() - t0;
}

static double st_unpack_pack(const uint8_t *data, size_t len, sf_arena *arena, long iters)
{
    sf_request b;
    sf_buf *out;
    double t0 = cpu_now();
    for (long i = 0; i < iters; i++) {
        sf_request_decode(&b, arena, data, len, SF_OTLP_DEFAULT_MAX_DEPTH);
        sf_request_encode(&b, &out);
        sink += out->len;
        sf_buf_unref(out);
        sf_request_release(&b);
        sf_arena_reset(arena);
    }
    return cpu_now() - t0;
}

/* The codec: validation, the allowlist and the canonical writer in one pass. */
static double st_codec(const uint8_t *data, size_t len, const sf_otlp_edit *edit, long iters)
{
    sf_buf *out;
    double t0 = cpu_now();

    for (long i = 0; i < iters; i++) {
        if (sf_otlp_rewrite(data, len, SF_OTLP_DEFAULT_MAX_DEPTH, edit, &out, NULL) != SF_OK)
            abort();
        sink += out->len;
        sf_buf_unref(out);
    }
    return cpu_now() - t0;
}

static double st_codec_canonical(const uint8_t *data, size_t len, sf_arena *arena, long iters)
{
    (void)arena;
    return st_codec(data, len, NULL, iters);
}

static double st_codec_allowlist(const uint8_t *data, size_t len, sf_arena *arena, long iters)
{
    (void)arena;
    return st_codec(data, len, allow_edit, iters);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The exporters' compression of the allowlisted batch (what they send),
 * each compressor reused across iterations as a sender worker does. */
static int bench_compression(const char *label, const uint8_t *data, size_t len, long spans,
                             int rounds)
{
    static const struct { sf_compression c; int level; } codecs[] = {
        { SF_COMPRESSION_GZIP, 1 }, { SF_COMPRESSION_GZIP, 6 },
        { SF_COMPRESSION_ZSTD, 1 }, { SF_COMPRESSION_ZSTD, 3 },
    };
    sf_buf *filtered;
    double t[32];

    if (sf_otlp_rewrite(data, len, SF_OTLP_DEFAULT_MAX_DEPTH, allow_edit, &filtered, NULL) != SF_OK)
        return -1;
    printf("%s: %zu B/span encoded, %zu B/span allowlisted (what is compressed)\n", label,
           len / (size_t)spans, filtered->len / (size_t)spans);
    for (size_t k = 0; k < sizeof(codecs) / sizeof(codecs[0]); k++) {
        sf_compressor *c = sf_compressor_create(codecs[k].c, codecs[k].level);
        const uint8_t *z;
        size_t zlen = 0;
        long iters = 20;

        if (c == NULL)
            return -1;
        for (int r = 0; r < rounds; r++) {
            double t0 = cpu_now();

            for (long i = 0; i < iters; i++) {
                if (sf_compressor_run(c, filtered->data, filtered->len, &z, &zlen) != SF_OK)
                    return -1;
                sink += z[zlen - 1];
            }
            t[r] = (cpu_now() - t0) * 1e9 / (double)(spans * iters);  /* ns per span */
        }
        qsort(t, (size_t)rounds, sizeof(double), cmp_double);
        printf("  %-4s level %-2d %7.1f B/span (%4.1fx)  %7.0f ns/span [%.0f-%.0f]  %9.0f spans/CPU-s\n",
               sf_compression_name(codecs[k].c), codecs[k].level, (double)zlen / (double)spans,
               (double)filtered->len / (double)zlen, t[rounds / 2], t[0], t[rounds - 1],
               1e9 / t[rounds / 2]);
        sf_compressor_destroy(c);
    }
    sf_buf_unref(filtered);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct { const char *name; stage_fn fn; long iters_mult; } stages[] = {
        { "memcpy of the encoded batch", st_memcpy, 200 },
        { "codec: validate and count (sf_otlp_scan)", st_wire_check, 20 },
        { "protobuf-c unpack, malloc", st_unpack_malloc, 1 },
        { "protobuf-c unpack, arena", st_unpack, 1 },
        { "protobuf-c unpack + pack, arena", st_unpack_pack, 1 },
        { "codec: validate + canonical copy", st_codec_canonical, 10 },
        { "codec: validate + allowlist, one pass", st_codec_allowlist, 10 },
    };
    long spans = argc > 1 ? atol(argv[1]) : 512;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    const char *only = argc > 3 ? argv[3] : NULL;   /* stages whose name has this */
    long iters = 40;
    size_t len = 0;
    uint8_t *data = sf_sample_request((size_t)spans, 1, &len);
    sf_arena *arena = sf_arena_create(1 << 20, 0);
    sf_arena *mem = sf_arena_create(16384, 0);     /* the transform program */
    double t[32];

    if (data == NULL || arena == NULL || mem == NULL || allowlist_create(mem) != 0)
        return 1;
    if (rounds > 32)
        rounds = 32;
    printf("batch: %ld spans, %zu bytes (%.0f B/span)\n", spans, len, (double)len / (double)spans);
    if (only == NULL || strcmp(only, "compress") != 0)
        printf("%-40s %16s\n", "stage (one core, median)", "spans/CPU-s");
    for (size_t s = 0; s < sizeof(stages) / sizeof(stages[0]); s++) {
        long n = iters * stages[s].iters_mult;

        if (only != NULL && (strstr(stages[s].name, only) == NULL || strcmp(only, "compress") == 0))
            continue;
        for (int r = 0; r < rounds; r++)
            t[r] = stages[s].fn(data, len, arena, n);
        qsort(t, (size_t)rounds, sizeof(double), cmp_double);
        printf("%-40s %16.0f\n", stages[s].name, (double)(spans * n) / t[rounds / 2]);
    }
    if (only == NULL || strcmp(only, "compress") == 0) {
        size_t rlen = 0;
        uint8_t *rdata = sf_sample_request_random((size_t)spans, 1, &rlen);

        printf("\nexporter compression (one core, median [min-max] of %d rounds)\n", rounds);
        if (rdata == NULL || bench_compression("sample batch", data, len, spans, rounds) != 0 ||
            bench_compression("high-entropy ids", rdata, rlen, spans, rounds) != 0)
            return 1;
        sf_free(rdata);
    }
    allowlist_destroy();
    sf_arena_destroy(mem);
    sf_arena_destroy(arena);
    sf_free(data);
    return 0;
}

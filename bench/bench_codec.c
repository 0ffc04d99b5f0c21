/* bench/bench_codec.c: per-stage cost of the hot path on one core, for the
 * SGLang-like batch of bench/sample_batch.h: the floors the end-to-end
 * figures are compared with. Prints spans per CPU-second for each stage
 * (median of `rounds` rounds, CPU time of this thread), then the exporters'
 * compression (gzip on libdeflate at levels 1 and 6, zstd at 1 and 3, and
 * zlib's gzip at levels 1-6 to compare with) of the allowlisted batch, for the sample batch and for the same spans with
 * high-entropy ids: bytes per span and CPU per span, median [min-max].
 *   bench_codec [spans=512] [rounds=5] [only stages whose name has this]
 * ("compress" selects the compression table alone). The "sglang:" stages
 * run configs/cvm.yaml's transform (read from the current directory) on an
 * SGLang-shaped batch (sglang_batch: root, thread and two slice spans per
 * request), with its rules and with its allowlist alone. */
#ifndef SF_BENCH_CVM
#define SF_BENCH_CVM "configs/cvm.yaml"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include "sample_allowlist.h"
#include "sglang_batch.h"
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

/* ---- configs/cvm.yaml's transform on an SGLang-shaped batch ------------------ */

/* configs/cvm.yaml's transform as shipped (rules), or with the allowlist
 * alone: its keep_keys, cleared fields and the three replace_patterns (the
 * statements of configs/cvm.yaml before declared mode). */
static sf_config *cvm_loaded[2];
static struct sf_component cvm_comp[2];

static const sf_otlp_edit *cvm_edit(bool rules)
{
    FILE *f;
    char *text, *kept;
    size_t n, k = 0;
    sf_diag *d;
    sf_config_component *c;

    if (cvm_loaded[rules] != NULL)
        return cvm_comp[rules].type->edit(&cvm_comp[rules], SF_SIGNAL_TRACES);
    f = fopen(SF_BENCH_CVM, "rb");
    if (f == NULL) {
        fprintf(stderr, "bench_codec: %s: run from the source directory\n", SF_BENCH_CVM);
        exit(1);
    }
    text = malloc(1 << 16);
    n = fread(text, 1, (1 << 16) - 1, f);
    fclose(f);
    text[n] = '\0';
    kept = malloc(n + 1);
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (!rules && (strstr(line, " where not ") || strstr(line, "pseudonym") ||
                       strstr(line, "- set(name") || strstr(line, "- set(version") ||
                       strstr(line, "- set(schema_url") || strstr(line, "- set(entity_refs") ||
                       strstr(line, "declared_fields")))
            continue;
        k += (size_t)sprintf(kept + k, "%s\n", line);
    }
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "https://gateway.example:4318", 0);
    setenv("SPANFENCE_GATEWAY_TOKEN", "bench", 0);
    setenv("SPANFENCE_PSEUDONYM_KEY", "bench-pseudonym-key-0123456789", 0);
    d = sf_diag_create(NULL);
    if (sf_config_load_string("cvm.yaml", kept, k, d, &cvm_loaded[rules]) != SF_OK) {
        sf_diag_print(d);
        exit(1);
    }
    sf_diag_destroy(d);
    c = sf_config_find(cvm_loaded[rules], "transform/allowlist");
    cvm_comp[rules].type = c->type;
    cvm_comp[rules].id = c->id;
    cvm_comp[rules].config = c->config;
    if (c->type->create(&cvm_comp[rules], c->config) != SF_OK)
        exit(1);
    free(text);
    free(kept);
    return c->type->edit(&cvm_comp[rules], SF_SIGNAL_TRACES);
}

static const uint8_t *sglang_data;
static size_t sglang_len;

static double st_cvm_allowlist(const uint8_t *data, size_t len, sf_arena *arena, long iters)
{
    (void)data;
    (void)len;
    (void)arena;
    return st_codec(sglang_data, sglang_len, cvm_edit(false), iters);
}

static double st_cvm_rules(const uint8_t *data, size_t len, sf_arena *arena, long iters)
{
    (void)data;
    (void)len;
    (void)arena;
    return st_codec(sglang_data, sglang_len, cvm_edit(true), iters);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* zlib's gzip of one buffer, the stream reused (deflateReset) as a
 * sender worker would: what the exporters' libdeflate is measured against.
 * The compressed length, or 0. */
static size_t zlib_gzip(z_stream *z, const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
    if (deflateReset(z) != Z_OK)
        return 0;
    z->next_in = (Bytef *)in;
    z->avail_in = (uInt)len;
    z->next_out = out;
    z->avail_out = (uInt)cap;
    return deflate(z, Z_FINISH) == Z_STREAM_END ? cap - z->avail_out : 0;
}

static int bench_zlib(const sf_buf *filtered, long spans, int rounds, int level)
{
    z_stream z = { 0 };
    double t[32];
    size_t zlen = 0, cap;
    uint8_t *out;

    if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    cap = deflateBound(&z, filtered->len);
    if ((out = malloc(cap)) == NULL)
        return -1;
    for (int r = 0; r < rounds; r++) {
        double t0 = cpu_now();

        for (long i = 0; i < 20; i++) {
            if ((zlen = zlib_gzip(&z, filtered->data, filtered->len, out, cap)) == 0)
                return -1;
            sink += out[zlen - 1];
        }
        t[r] = (cpu_now() - t0) * 1e9 / (double)(spans * 20);
    }
    qsort(t, (size_t)rounds, sizeof(double), cmp_double);
    printf("  zlib gzip level %-2d %7.1f B/span (%4.1fx)  %7.0f ns/span [%.0f-%.0f]  %9.0f spans/CPU-s\n",
           level, (double)zlen / (double)spans, (double)filtered->len / (double)zlen,
           t[rounds / 2], t[0], t[rounds - 1], 1e9 / t[rounds / 2]);
    deflateEnd(&z);
    free(out);
    return 0;
}

/* The exporters' compression of the allowlisted batch (what they send),
 * each compressor reused across iterations as a sender worker does; then
 * zlib's gzip at levels 1 to 6 beside it (the exporters' gzip is
 * libdeflate's: compare the ratio and the cost). */
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
    for (int level = 1; level <= 6; level++)
        if (bench_zlib(filtered, spans, rounds, level) != 0)
            return -1;
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
        { "sglang: cvm.yaml allowlist alone", st_cvm_allowlist, 10 },
        { "sglang: cvm.yaml rules (declared)", st_cvm_rules, 10 },
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
    sglang_data = sglang_batch(spans - spans % 4, &sglang_len);
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

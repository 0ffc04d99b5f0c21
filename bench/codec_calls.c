/* bench/codec_calls.c: the codec's cost per receiver call, as the collector
 * spends it: one request's pass with a transform's edit (sf_request_rewrite)
 * and the transform's accounting of it (its consume), call after call, for
 * counting instructions under callgrind (bench/README.md, "The codec per
 * call"). The same source builds against 63e5389, whose edit and consume
 * took no signal, so two builds run the same requests with the same rules.
 *   codec_calls CONFIG PROCESSOR REQUEST CALLS   (run CALLS measured calls)
 *   codec_calls --write sglang|sample SPANS FILE (a request; this tree only)
 * Count only the measured calls:
 *   valgrind --tool=callgrind --toggle-collect=measured_call ./codec_calls ... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/sf_core.h"

/* Calls made before counting: the first ones log each removed key once
 * and fill lazily made state. */
#define WARM_CALLS 4

static size_t sink;

static sf_component *transform_load(const char *path, const char *id)
{
    static sf_component comp;
    static char text[1 << 17];
    sf_config *cfg = NULL;
    sf_config_component *c;
    sf_diag *d;
    FILE *f = fopen(path, "rb");
    size_t n;

    if (f == NULL) {
        perror(path);
        exit(1);
    }
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "https://gateway.example:4318", 0);
    setenv("SPANFENCE_GATEWAY_TOKEN", "bench", 0);
    setenv("SPANFENCE_PSEUDONYM_KEY", "bench-pseudonym-key-0123456789", 0);
    d = sf_diag_create(NULL);
    if (sf_config_load_string(path, text, n, d, &cfg) != SF_OK) {
        sf_diag_print(d);
        exit(1);
    }
    sf_diag_destroy(d);
    c = sf_config_find(cfg, id);
    if (c == NULL || c->type == NULL || c->type->edit == NULL) {
        fprintf(stderr, "codec_calls: %s: no editing processor '%s'\n", path, id);
        exit(1);
    }
    comp.type = c->type;
    comp.id = c->id;
    comp.config = c->config;
    if (c->type->create(&comp, c->config) != SF_OK)
        exit(1);
    return &comp;
}

/* One receiver call: the pass with the processor's edit, then its consume
 * (the collector's run_route for a pipeline whose first editor it is). */
static void one_call(sf_component *p, const uint8_t *data, size_t len)
{
    sf_request b;

#ifdef SF_SIGNALS_ALL
    const sf_otlp_edit *edit = p->type->edit(p, SF_SIGNAL_TRACES);
#else
    const sf_otlp_edit *edit = p->type->edit(p);
#endif
    sf_request_init(&b, NULL, data, len, SF_OTLP_DEFAULT_MAX_DEPTH);
    if (sf_request_rewrite(&b, edit, p) != SF_OK) {
        fprintf(stderr, "codec_calls: the pass failed\n");
        exit(1);
    }
#ifdef SF_SIGNALS_ALL
    if (sf_component_consume(p, &b) != SF_OK)
#else
    if (p->type->consume(p, &b) != SF_OK)
#endif
        exit(1);
    sink += b.wire->len;
    sf_buf_unref(b.wire);
}

__attribute__((noinline)) void measured_call(sf_component *p, const uint8_t *data, size_t len);
__attribute__((noinline)) void measured_call(sf_component *p, const uint8_t *data, size_t len)
{
    one_call(p, data, len);
}

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data;
    long n;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0) {
        perror(path);
        exit(1);
    }
    rewind(f);
    data = malloc((size_t)n);
    if (data == NULL || fread(data, 1, (size_t)n, f) != (size_t)n)
        exit(1);
    fclose(f);
    *len = (size_t)n;
    return data;
}

/* The requests are made by this tree only (63e5389 reads the same files). */
#ifdef SF_SIGNALS_ALL
#include "sample_batch.h"
#include "sglang_batch.h"

static int write_request(const char *shape, long spans, const char *path)
{
    size_t len = 0;
    uint8_t *data = strcmp(shape, "sglang") == 0 ? sglang_batch(spans - spans % 4, &len)
                                                 : sf_sample_request((size_t)spans, 1, &len);
    FILE *f = fopen(path, "wb");

    if (data == NULL || f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        return 1;
    }
    return 0;
}
#endif

int main(int argc, char **argv)
{
    sf_component *p;
    uint8_t *data;
    size_t len;
    long calls;

#ifdef SF_SIGNALS_ALL
    if (argc == 5 && strcmp(argv[1], "--write") == 0)
        return write_request(argv[2], atol(argv[3]), argv[4]);
#endif
    if (argc != 5) {
        fprintf(stderr, "usage: codec_calls CONFIG PROCESSOR REQUEST CALLS\n");
        return 2;
    }
    p = transform_load(argv[1], argv[2]);
    data = read_all(argv[3], &len);
    calls = atol(argv[4]);
    for (int i = 0; i < WARM_CALLS; i++)
        one_call(p, data, len);
    for (long i = 0; i < calls; i++)
        measured_call(p, data, len);
    printf("%ld calls of %zu bytes, %zu bytes out\n", calls, len, sink / (size_t)(calls + WARM_CALLS));
    return 0;
}

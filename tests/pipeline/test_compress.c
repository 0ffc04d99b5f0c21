/* tests/pipeline/test_compress.c: the exporters' compressors (gzip on
 * libdeflate, zstd) decode back with independent decoders (zlib, libzstd's
 * one-shot API), and sf_unzstd stays within its bounds: bombs, the exact
 * limit, corrupt, truncated and trailing data, windows over 8 MiB, several
 * frames, allocation failures; the names and levels of the `compression`
 * setting (its check's messages are in the config corpus,
 * tests/configs/invalid/compression_params.yaml). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY    /* ZSTD_writeSkippableFrame */
#include <zstd.h>

#include "sf_alloc.h"
#include "sf_compress.h"
#include "sf_zlib.h"
#include "tests/sf_torture.h"

/* Text with some repetition and some noise, like an OTLP batch. */
static uint8_t *sample(size_t n)
{
    uint8_t *p = sf_malloc(n);
    uint32_t x = 12345;

    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (i % 64) < 48 ? (uint8_t)("gen_ai.request.id req-0000 decode_step "[i % 40])
                             : (uint8_t)(x >> 24);
    }
    return p;
}

static void test_gzip_round_trip(void **state)
{
    static const int levels[] = { 1, 6, 12 };
    size_t n = 300000;
    uint8_t *in = sample(n);

    (void)state;
    for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
        sf_compressor *c = sf_compressor_create(SF_COMPRESSION_GZIP, levels[l]);
        const uint8_t *z;
        size_t zlen, outlen;
        uint8_t *out;

        assert_non_null(c);
        for (int twice = 0; twice < 2; twice++) {   /* the context is reused */
            assert_int_equal(sf_compressor_run(c, in, n, &z, &zlen), SF_OK);
            assert_true(zlen < n);
            assert_int_equal(z[0], 0x1f);            /* a gzip member */
            assert_int_equal(z[1], 0x8b);
            assert_int_equal(sf_inflate(z, zlen, n, &out, &outlen), SF_OK);
            assert_int_equal(outlen, n);
            assert_memory_equal(out, in, n);
            sf_free(out);
        }
        sf_compressor_destroy(c);
    }
    sf_free(in);
}

static void test_zstd_round_trip(void **state)
{
    static const int levels[] = { 1, 3, 19 };
    size_t n = 300000;
    uint8_t *in = sample(n), *plain = sf_malloc(n);
    size_t before = sf_alloc_in_use();

    (void)state;
    for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
        sf_compressor *c = sf_compressor_create(SF_COMPRESSION_ZSTD, levels[l]);
        const uint8_t *z;
        size_t zlen, outlen;
        uint8_t *out;
        const char *why = "unset";

        assert_non_null(c);
        assert_int_equal(sf_compressor_run(c, in, n, &z, &zlen), SF_OK);
        assert_true(zlen < n);
        /* the frame says its content size, so a decoder sizes its window */
        assert_int_equal(ZSTD_getFrameContentSize(z, zlen), n);
        /* libzstd's own one-shot decoder */
        assert_int_equal(ZSTD_decompress(plain, n, z, zlen), n);
        assert_memory_equal(plain, in, n);
        assert_int_equal(sf_unzstd(z, zlen, n, &out, &outlen, &why), SF_OK);
        assert_int_equal(outlen, n);
        assert_memory_equal(out, in, n);
        sf_free(out);
        /* exactly at the limit passes, one byte under it does not */
        assert_int_equal(sf_unzstd(z, zlen, n - 1, &out, &outlen, &why), SF_TOOBIG);
        assert_null(out);
        sf_compressor_destroy(c);
    }
    assert_int_equal(sf_alloc_in_use(), before);
    assert_null(sf_compressor_create(SF_COMPRESSION_NONE, 1));
    sf_free(plain);
    sf_free(in);
}

/* 64 MiB of zeros in a few KB: decoding stops at the limit, within memory
 * a hard limit of 4 MiB allows (the output buffer and the decoder). */
static void test_zstd_bomb(void **state)
{
    size_t n = 64u << 20, cap = ZSTD_compressBound(n);
    uint8_t *zeros = calloc(1, n), *z = malloc(cap), *out = (uint8_t *)"x";
    size_t zlen, outlen = 7, before;
    const char *why = NULL;

    (void)state;
    assert_non_null(zeros);
    assert_non_null(z);
    zlen = ZSTD_compress(z, cap, zeros, n, 1);
    assert_false(ZSTD_isError(zlen));
    assert_true(zlen < 16384);
    free(zeros);
    before = sf_alloc_in_use();
    sf_alloc_set_limits(0, before + (4u << 20));
    assert_int_equal(sf_unzstd(z, zlen, 1u << 20, &out, &outlen, &why), SF_TOOBIG);
    sf_alloc_set_limits(0, 0);
    assert_null(out);
    assert_int_equal(outlen, 0);
    assert_int_equal(sf_alloc_in_use(), before);
    free(z);
}

static void test_zstd_bad(void **state)
{
    uint8_t in[1000], frame[2048], buf[4096], *out;
    size_t flen, outlen;
    const char *why;

    (void)state;
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)(i * 7);
    flen = ZSTD_compress(frame, sizeof(frame), in, sizeof(in), 3);
    assert_false(ZSTD_isError(flen));

    why = NULL;     /* not zstd at all */
    assert_int_equal(sf_unzstd((const uint8_t *)"\x1f\x8b\x08\x00garbage", 11, 1 << 20, &out,
                               &outlen, &why), SF_INVALID);
    assert_string_equal(why, "not a zstd frame");
    assert_null(out);
    why = NULL;     /* empty body */
    assert_int_equal(sf_unzstd(frame, 0, 1 << 20, &out, &outlen, &why), SF_INVALID);
    assert_non_null(why);
    why = NULL;     /* truncated, at every length */
    for (size_t cut = 1; cut < flen; cut++) {
        assert_int_equal(sf_unzstd(frame, cut, 1 << 20, &out, &outlen, &why), SF_INVALID);
        assert_null(out);
    }
    assert_non_null(why);
    /* trailing garbage after a whole frame */
    memcpy(buf, frame, flen);
    memcpy(buf + flen, "junk", 4);
    why = NULL;
    assert_int_equal(sf_unzstd(buf, flen + 4, 1 << 20, &out, &outlen, &why), SF_INVALID);
    assert_string_equal(why, "not a zstd frame");
    /* a corrupted block */
    memcpy(buf, frame, flen);
    for (size_t i = flen / 2; i < flen - 4; i++)
        buf[i] ^= 0x5a;
    why = NULL;
    assert_int_equal(sf_unzstd(buf, flen, 1 << 20, &out, &outlen, &why), SF_INVALID);
    assert_non_null(why);
}

/* Two frames and a skippable frame between them: one body. */
static void test_zstd_frames(void **state)
{
    uint8_t a[500], b[700], buf[4096], *out;
    size_t n = 0, r, outlen;
    const char *why = NULL;

    (void)state;
    memset(a, 'a', sizeof(a));
    memset(b, 'b', sizeof(b));
    r = ZSTD_compress(buf, sizeof(buf), a, sizeof(a), 1);
    assert_false(ZSTD_isError(r));
    n += r;
    r = ZSTD_writeSkippableFrame(buf + n, sizeof(buf) - n, "meta", 4, 0);
    assert_false(ZSTD_isError(r));
    n += r;
    r = ZSTD_compress(buf + n, sizeof(buf) - n, b, sizeof(b), 1);
    assert_false(ZSTD_isError(r));
    n += r;
    assert_int_equal(sf_unzstd(buf, n, 1 << 20, &out, &outlen, &why), SF_OK);
    assert_int_equal(outlen, sizeof(a) + sizeof(b));
    assert_memory_equal(out, a, sizeof(a));
    assert_memory_equal(out + sizeof(a), b, sizeof(b));
    sf_free(out);
}

/* A frame that needs a 128 MiB window (streamed, no content size) is
 * refused before the decoder reserves it. */
static void test_zstd_window_limit(void **state)
{
    ZSTD_CCtx *c = ZSTD_createCCtx();
    size_t n = 1u << 20, cap = ZSTD_compressBound(n);
    uint8_t *in = sample(n), *z = malloc(cap), *out;
    ZSTD_inBuffer ib = { in, n, 0 };
    ZSTD_outBuffer ob = { z, cap, 0 };
    size_t outlen, before = sf_alloc_in_use();
    const char *why = NULL;

    (void)state;
    assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, 27)));
    assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0)));
    assert_false(ZSTD_isError(ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_continue)));
    assert_int_equal(ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_end), 0);
    assert_int_equal(ZSTD_getFrameContentSize(z, ob.pos), ZSTD_CONTENTSIZE_UNKNOWN);
    assert_int_equal(sf_unzstd(z, ob.pos, 64u << 20, &out, &outlen, &why), SF_INVALID);
    assert_string_equal(why, "zstd window larger than 8 MiB");
    assert_int_equal(sf_alloc_in_use(), before);
    ZSTD_freeCCtx(c);
    free(z);
    sf_free(in);
}

/* Every allocation of a compress and a decompress fails once in turn
 * (the torture helper): SF_ENOMEM, nothing leaked, and the next attempt
 * on the same compressor works. */
typedef struct squeeze {
    sf_compression alg;
    const uint8_t *in;
    size_t n;
    const uint8_t *z;               /* for unzstd: a frame of `in` */
    size_t zlen;
} squeeze;

static sf_status compress_scenario(void *arg)
{
    squeeze *q = arg;
    sf_compressor *c = sf_compressor_create(q->alg, 3);
    const uint8_t *z;
    size_t zlen;
    sf_status st;

    if (c == NULL)
        return SF_ENOMEM;
    st = sf_compressor_run(c, q->in, q->n, &z, &zlen);
    if (st != SF_OK && st != SF_ENOMEM)
        fail_msg("compress failed: %s", sf_status_name(st));
    /* a failed run leaves the compressor usable (only the Nth failed) */
    if (st != SF_OK && sf_compressor_run(c, q->in, q->n, &z, &zlen) != SF_OK)
        fail_msg("the compressor did not work again after a failed run");
    sf_compressor_destroy(c);
    return st;
}

static sf_status unzstd_scenario(void *arg)
{
    squeeze *q = arg;
    uint8_t *out = (uint8_t *)q;
    size_t outlen;
    sf_status st = sf_unzstd(q->z, q->zlen, q->n, &out, &outlen, NULL);

    if (st != SF_OK) {
        if (out != NULL)
            fail_msg("sf_unzstd failed (%s) and gave a buffer", sf_status_name(st));
        return st;
    }
    if (outlen != q->n || memcmp(out, q->in, q->n) != 0)
        fail_msg("sf_unzstd did not give the input back");
    sf_free(out);
    return SF_OK;
}

static void test_allocation_failures(void **state)
{
    static const sf_compression algs[] = { SF_COMPRESSION_GZIP, SF_COMPRESSION_ZSTD };
    size_t n = 100000;
    uint8_t *in = sample(n);

    (void)state;
    for (size_t a = 0; a < 2; a++) {
        squeeze q = { .alg = algs[a], .in = in, .n = n };
        sf_torture compress = { .name = sf_compression_name(algs[a]), .run = compress_scenario,
                                .arg = &q, .may_succeed = true, .expect = SF_ENOMEM };
        sf_torture unzstd = { .name = "unzstd", .run = unzstd_scenario, .arg = &q,
                              .expect = SF_ENOMEM };
        sf_compressor *c;
        uint8_t *zcopy;

        sf_torture_run(&compress);
        if (algs[a] != SF_COMPRESSION_ZSTD)
            continue;
        c = sf_compressor_create(algs[a], 3);
        assert_non_null(c);
        assert_int_equal(sf_compressor_run(c, in, n, &q.z, &q.zlen), SF_OK);
        zcopy = malloc(q.zlen);     /* the frame outlives the compressor */
        assert_non_null(zcopy);
        memcpy(zcopy, q.z, q.zlen);
        q.z = zcopy;
        sf_compressor_destroy(c);
        sf_torture_run(&unzstd);
        free(zcopy);
    }
    sf_free(in);
}

static void test_names_and_levels(void **state)
{
    static const sf_compression order[] = {
        SF_COMPRESSION_GZIP, SF_COMPRESSION_NONE, SF_COMPRESSION_ZSTD,
    };
    sf_compression_params none = { 0 }, zero = { .present = true, .level = 0 };
    sf_compression_params nine = { .present = true, .level = 9 };
    char choices[64] = "";

    (void)state;
    /* the names, joined in enum order, are the config's choices */
    for (size_t i = 0; i < 3; i++) {
        if (i > 0)
            strcat(choices, "|");
        strcat(choices, sf_compression_name(order[i]));
        assert_int_equal(order[i], (sf_compression)i);
    }
    assert_string_equal(choices, SF_COMPRESSION_CHOICES);
    assert_int_equal(sf_compression_level(SF_COMPRESSION_GZIP, &none), SF_GZIP_LEVEL_DEFAULT);
    assert_int_equal(sf_compression_level(SF_COMPRESSION_ZSTD, &none), SF_ZSTD_LEVEL_DEFAULT);
    assert_int_equal(sf_compression_level(SF_COMPRESSION_ZSTD, &zero), SF_ZSTD_LEVEL_DEFAULT);
    assert_int_equal(sf_compression_level(SF_COMPRESSION_GZIP, &nine), 9);
    assert_int_equal(sf_compression_level(SF_COMPRESSION_ZSTD, &nine), 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gzip_round_trip),
        cmocka_unit_test(test_zstd_round_trip),
        cmocka_unit_test(test_zstd_bomb),
        cmocka_unit_test(test_zstd_bad),
        cmocka_unit_test(test_zstd_frames),
        cmocka_unit_test(test_zstd_window_limit),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_names_and_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

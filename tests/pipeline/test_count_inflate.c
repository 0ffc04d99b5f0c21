/* tests/pipeline/test_count_inflate.c: the counting decompressor
 * (sf_count_inflate.h) counts what the wire check counts over identity,
 * gzip, deflate (zlib) and zstd bodies, protobuf and OTLP/JSON, fed in
 * pieces of any size, and says how many bytes it inflated; a bomb stops at
 * the bound (exactly the bound is fine, one byte more is SF_TOOBIG) with
 * the spans before it counted; a corrupt stream or a zstd window past
 * 8 MiB stops it (SF_INVALID) without crashing, a truncated one just waits;
 * one struct serves several bodies; the decoder's memory is counted, given
 * back at release, and every allocation failing in turn is SF_ENOMEM with
 * nothing leaked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "bench/sample_batch.h"
#include "sf_count_inflate.h"
#include "sf_otlp_json.h"
#include "sf_otlp_wire.h"
#include "tests/sf_test_deflate.h"
#include "tests/sf_torture.h"

/* `len` bytes of `plain` compressed as `coding` into a new malloc'd buffer. */
static uint8_t *compressed(sf_count_coding coding, const uint8_t *plain, size_t len,
                           size_t *out_len)
{
    size_t cap = ZSTD_compressBound(len) + 64;
    uint8_t *out;
    ZSTD_CCtx *cc;

    if (coding == SF_COUNT_GZIP || coding == SF_COUNT_DEFLATE)
        return sf_test_deflate(plain, len, coding == SF_COUNT_GZIP, out_len);
    out = malloc(cap);
    assert_non_null(out);
    if (coding == SF_COUNT_IDENTITY) {
        memcpy(out, plain, len);
        *out_len = len;
        return out;
    }
    /* With its checksum, so a corrupt frame is told at its end at the
     * latest (zstd's framing alone may decode it to other bytes). */
    cc = ZSTD_createCCtx();
    assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1)));
    *out_len = ZSTD_compress2(cc, out, cap, plain, len);
    assert_false(ZSTD_isError(*out_len));
    ZSTD_freeCCtx(cc);
    return out;
}

/* Count `len` bytes fed in pieces of `piece`; the bytes inflated in *inflated. */
static size_t count_in_pieces(sf_count_inflate *ci, const uint8_t *p, size_t len, size_t piece,
                              size_t *inflated)
{
    *inflated = 0;
    for (size_t off = 0; off < len; off += piece)
        *inflated += sf_count_inflate_feed(ci, p + off, len - off < piece ? len - off : piece);
    return sf_count_inflate_items(ci);
}

static const sf_count_coding codings[] = {
    SF_COUNT_IDENTITY, SF_COUNT_GZIP, SF_COUNT_DEFLATE, SF_COUNT_ZSTD,
};

static void test_counts_every_coding(void **state)
{
    static const size_t sizes[] = { 0, 3, 600 };
    static const size_t pieces[] = { 1, 7, 4096, 1 << 30 };

    (void)state;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t len = 0, want = 0;
        uint8_t *req = sf_sample_request(sizes[i], i, &len);
        size_t base = sf_alloc_in_use();

        assert_int_equal(sf_otlp_scan(req, len, 32, &want), SF_OK);
        assert_int_equal(want, sizes[i]);
        for (size_t c = 0; c < sizeof(codings) / sizeof(codings[0]); c++) {
            size_t zlen;
            uint8_t *z = compressed(codings[c], req, len, &zlen);

            for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
                sf_count_inflate ci;
                size_t inflated;

                memset(&ci, 0, sizeof(ci));
                sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, false, codings[c], len);
                assert_int_equal(count_in_pieces(&ci, z, zlen, pieces[k], &inflated), want);
                assert_int_equal(ci.stopped, SF_OK);
                /* identity inflates nothing: there is nothing to charge */
                assert_int_equal(inflated, codings[c] == SF_COUNT_IDENTITY ? 0 : len);
                assert_int_equal(ci.inflated, inflated);
                sf_count_inflate_release(&ci);
                assert_int_equal(sf_alloc_in_use(), base);
            }
            free(z);
        }
        sf_free(req);
    }
}

static void test_counts_json(void **state)
{
    size_t len = 0, jlen = 0;
    uint8_t *req = sf_sample_request(40, 1, &len);
    sf_otlp_request *tree =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
            NULL, len, req);
    char *json = NULL;

    (void)state;
    assert_non_null(tree);
    assert_int_equal(sf_otlp_json_encode(tree, &json, &jlen), SF_OK);
    for (size_t c = 0; c < sizeof(codings) / sizeof(codings[0]); c++) {
        size_t zlen, inflated;
        uint8_t *z = compressed(codings[c], (const uint8_t *)json, jlen, &zlen);
        sf_count_inflate ci;

        memset(&ci, 0, sizeof(ci));
        sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, true, codings[c], jlen);
        assert_int_equal(count_in_pieces(&ci, z, zlen, 999, &inflated), 40);
        assert_int_equal(ci.stopped, SF_OK);
        sf_count_inflate_release(&ci);
        free(z);
    }
    sf_free(json);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
        tree, NULL);
    sf_free(req);
}

/* A request with `spans` spans, then an unknown field of `zeros` zero
 * bytes (skipped by the counter: it reaches the bound, not an error). */
static uint8_t *bomb(size_t spans, size_t zeros, size_t *len, size_t *head)
{
    uint8_t *req = sf_sample_request(spans, 3, head);
    uint8_t *b = calloc(1, *head + 16 + zeros);
    size_t n = *head;
    uint64_t v = zeros;

    assert_non_null(b);
    memcpy(b, req, *head);
    sf_free(req);
    b[n++] = 15 << 3 | 2;           /* field 15, length-delimited */
    do {
        b[n++] = (uint8_t)(v & 0x7f) | (v >= 0x80 ? 0x80 : 0);
        v >>= 7;
    } while (v > 0);
    *head = n;
    *len = n + zeros;
    return b;
}

static void test_bomb_stops_at_the_bound(void **state)
{
    size_t len, head, base = sf_alloc_in_use();
    uint8_t *plain = bomb(7, (size_t)16 << 20, &len, &head);

    (void)state;
    for (size_t c = 1; c < sizeof(codings) / sizeof(codings[0]); c++) {
        size_t zlen, inflated;
        uint8_t *z = compressed(codings[c], plain, len, &zlen);
        sf_count_inflate ci;

        assert_true(zlen < len / 100);  /* a bomb indeed */
        memset(&ci, 0, sizeof(ci));
        /* One byte short of the body: stopped, at most one byte past it. */
        sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, false, codings[c], len - 1);
        assert_int_equal(count_in_pieces(&ci, z, zlen, 4096, &inflated), 7);
        assert_int_equal(ci.stopped, SF_TOOBIG);
        assert_int_equal(inflated, len);
        /* Further bytes cost nothing. */
        assert_int_equal(sf_count_inflate_feed(&ci, z, zlen), 0);
        /* A small bound: the spans before it are counted, little inflated. */
        sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, false, codings[c], head + 1000);
        assert_int_equal(count_in_pieces(&ci, z, zlen, 1 << 30, &inflated), 7);
        assert_int_equal(ci.stopped, SF_TOOBIG);
        assert_int_equal(inflated, head + 1001);
        /* Exactly the bound is fine. */
        sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, false, codings[c], len);
        assert_int_equal(count_in_pieces(&ci, z, zlen, 65536, &inflated), 7);
        assert_int_equal(ci.stopped, SF_OK);
        assert_int_equal(inflated, len);
        sf_count_inflate_release(&ci);
        free(z);
    }
    free(plain);
    assert_int_equal(sf_alloc_in_use(), base);
}

static void test_corrupt_and_truncated(void **state)
{
    size_t len = 0, base;
    uint8_t *req = sf_sample_request(50, 4, &len);
    static const uint8_t garbage[] = "this is not a compressed stream at all";

    (void)state;
    base = sf_alloc_in_use();
    for (size_t c = 1; c < sizeof(codings) / sizeof(codings[0]); c++) {
        size_t zlen, inflated;
        uint8_t *z = compressed(codings[c], req, len, &zlen);
        sf_count_inflate ci;

        memset(&ci, 0, sizeof(ci));
        /* Not a stream of this coding at all. */
        sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, false, codings[c], len);
        (void)count_in_pieces(&ci, garbage, sizeof(garbage), 5, &inflated);
        assert_int_equal(ci.stopped, SF_INVALID);
        assert_int_equal(sf_count_inflate_items(&ci), 0);
        /* Its middle overwritten: stops somewhere, counting no more. */
        for (size_t i = zlen / 3; i < zlen / 3 + 64 && i < zlen; i++)
            z[i] ^= 0x5a;
        sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, false, codings[c], len);
        assert_true(count_in_pieces(&ci, z, zlen, 100, &inflated) <= 50);
        assert_int_equal(ci.stopped, SF_INVALID);
        free(z);
        /* Truncated: no error, the count so far, waiting for more. */
        z = compressed(codings[c], req, len, &zlen);
        sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, false, codings[c], len);
        assert_true(count_in_pieces(&ci, z, zlen / 2, 100, &inflated) < 50);
        assert_int_equal(ci.stopped, SF_OK);
        sf_count_inflate_release(&ci);
        free(z);
    }
    assert_int_equal(sf_alloc_in_use(), base);
    sf_free(req);
}

/* RFC 9659: a zstd frame asking for a window past 8 MiB is refused. */
static void test_zstd_window_limit(void **state)
{
    size_t len = (size_t)9 << 20, zlen;
    uint8_t *plain = calloc(1, len), *z = malloc(ZSTD_compressBound(len));
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    sf_count_inflate ci;

    (void)state;
    assert_int_equal(ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, 24)), 0);
    zlen = ZSTD_compress2(cc, z, ZSTD_compressBound(len), plain, len);
    assert_false(ZSTD_isError(zlen));
    memset(&ci, 0, sizeof(ci));
    sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, false, SF_COUNT_ZSTD, len);
    assert_int_equal(sf_count_inflate_feed(&ci, z, zlen), 0);
    assert_int_equal(ci.stopped, SF_INVALID);
    sf_count_inflate_release(&ci);
    ZSTD_freeCCtx(cc);
    free(z);
    free(plain);
}

/* The decoder is counted while it lives, kept across bodies, freed at
 * release. */
static void test_memory_counted_and_reused(void **state)
{
    size_t len = 0, base, zlen, inflated, held;
    uint8_t *req = sf_sample_request(20, 5, &len);
    sf_count_inflate ci;

    (void)state;
    base = sf_alloc_in_use();
    memset(&ci, 0, sizeof(ci));
    for (size_t c = 1; c < sizeof(codings) / sizeof(codings[0]); c++) {
        uint8_t *z = compressed(codings[c], req, len, &zlen);

        sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, false, codings[c], len);
        assert_int_equal(count_in_pieces(&ci, z, zlen, 333, &inflated), 20);
        held = sf_alloc_in_use();
        assert_true(held > base);
        /* A second body on the same struct: the decoder is reused. */
        sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, false, codings[c], len);
        assert_int_equal(count_in_pieces(&ci, z, zlen, 1 << 30, &inflated), 20);
        assert_int_equal(ci.stopped, SF_OK);
        assert_true(sf_alloc_in_use() <= held);
        free(z);
    }
    sf_count_inflate_release(&ci);
    assert_int_equal(sf_alloc_in_use(), base);
    sf_count_inflate_release(&ci);     /* released twice, or zeroed: fine */
    sf_free(req);
}

typedef struct torture_arg {
    sf_count_coding coding;
    const uint8_t *z;
    size_t zlen, len;
} torture_arg;

static sf_status count_once(void *arg)
{
    torture_arg *t = arg;
    sf_count_inflate ci;
    size_t inflated;
    sf_status st;

    memset(&ci, 0, sizeof(ci));
    sf_count_inflate_init(&ci, SF_SIGNAL_TRACES, false, t->coding, t->len);
    (void)count_in_pieces(&ci, t->z, t->zlen, 512, &inflated);
    st = ci.stopped;
    if (st == SF_OK && sf_count_inflate_items(&ci) != 30)
        st = SF_INVALID;
    sf_count_inflate_release(&ci);
    return st;
}

static void test_allocation_failures(void **state)
{
    size_t len = 0;
    uint8_t *req = sf_sample_request(30, 6, &len);

    (void)state;
    for (size_t c = 1; c < sizeof(codings) / sizeof(codings[0]); c++) {
        torture_arg a = { .coding = codings[c], .len = len };
        uint8_t *z = compressed(codings[c], req, len, &a.zlen);
        sf_torture t = { .name = "count_inflate", .run = count_once, .arg = &a,
                         .expect = SF_ENOMEM };

        a.z = z;
        assert_true(sf_torture_run(&t) > 0);
        free(z);
    }
    sf_free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_every_coding),
        cmocka_unit_test(test_counts_json),
        cmocka_unit_test(test_bomb_stops_at_the_bound),
        cmocka_unit_test(test_corrupt_and_truncated),
        cmocka_unit_test(test_zstd_window_limit),
        cmocka_unit_test(test_memory_counted_and_reused),
        cmocka_unit_test(test_allocation_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

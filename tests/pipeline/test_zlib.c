/* tests/pipeline/test_zlib.c: bounded inflate (sf_zlib.h): gzip and zlib
 * streams round-trip; output of exactly max_out is fine and one byte more
 * is SF_TOOBIG (a bomb stops there); corrupt, truncated and trailing bytes
 * and a size trailer that lies are SF_INVALID; an empty stream gives an
 * empty buffer; every allocation failing in turn is SF_ENOMEM with nothing
 * leaked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "sf_alloc.h"
#include "sf_zlib.h"
#include "tests/sf_test_deflate.h"
#include "tests/sf_torture.h"

static uint8_t *pattern(size_t len)
{
    uint8_t *p = malloc(len ? len : 1);

    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(i * 7 + i / 251);
    return p;
}

static void test_round_trip(void **state)
{
    size_t base = sf_alloc_in_use();

    (void)state;
    for (int gz = 0; gz < 2; gz++) {
        for (size_t len = 0; len < 300000; len = len * 3 + 1) {
            uint8_t *plain = pattern(len), *z, *out = NULL;
            size_t zlen, out_len = 7;

            z = sf_test_deflate(plain, len, gz, &zlen);
            assert_int_equal(sf_inflate(z, zlen, 1u << 20, &out, &out_len), SF_OK);
            assert_non_null(out);
            assert_int_equal(out_len, len);
            if (len > 0)
                assert_memory_equal(out, plain, len);
            sf_free(out);
            free(z);
            free(plain);
        }
    }
    assert_int_equal(sf_alloc_in_use(), base);
}

static void test_bound(void **state)
{
    size_t len = 100000, zlen;
    uint8_t *zeros = calloc(1, len), *z = sf_test_deflate(zeros, len, true, &zlen), *out = NULL;
    size_t out_len = 0, base = sf_alloc_in_use();

    (void)state;
    assert_true(zlen < 1000);                       /* a small bomb */
    assert_int_equal(sf_inflate(z, zlen, len, &out, &out_len), SF_OK);      /* exactly */
    assert_int_equal(out_len, len);
    sf_free(out);
    out = (uint8_t *)&out;
    assert_int_equal(sf_inflate(z, zlen, len - 1, &out, &out_len), SF_TOOBIG);
    assert_null(out);
    assert_int_equal(out_len, 0);
    assert_int_equal(sf_inflate(z, zlen, 0, &out, &out_len), SF_TOOBIG);
    assert_int_equal(sf_alloc_in_use(), base);
    free(z);
    free(zeros);
}

static void test_invalid(void **state)
{
    uint8_t *plain = pattern(5000), *z, *bad, *out = NULL;
    size_t zlen, out_len;

    (void)state;
    z = sf_test_deflate(plain, 5000, true, &zlen);
    assert_int_equal(sf_inflate((const uint8_t *)"not gzip", 8, 1000, &out, &out_len),
                     SF_INVALID);
    assert_int_equal(sf_inflate(z, zlen - 10, 1u << 20, &out, &out_len), SF_INVALID);  /* cut */
    bad = malloc(zlen + 3);
    memcpy(bad, z, zlen);
    memcpy(bad + zlen, "xyz", 3);
    assert_int_equal(sf_inflate(bad, zlen + 3, 1u << 20, &out, &out_len), SF_INVALID); /* trailer */
    memcpy(bad, z, zlen);
    bad[zlen / 2] ^= 0x55;                                                  /* corrupt */
    assert_int_equal(sf_inflate(bad, zlen, 1u << 20, &out, &out_len), SF_INVALID);
    assert_null(out);
    /* a trailer whose size (ISIZE, which sizes libdeflate's one call) lies,
     * smaller and larger than the truth: refused as zlib refuses it */
    for (int lie = -1; lie <= 1; lie += 2) {
        uint32_t isize = 5000 + (uint32_t)(lie * 100);

        memcpy(bad, z, zlen);
        for (int i = 0; i < 4; i++)
            bad[zlen - 4 + i] = (uint8_t)(isize >> (8 * i));
        assert_int_equal(sf_inflate(bad, zlen, 1u << 20, &out, &out_len), SF_INVALID);
        assert_null(out);
    }
    free(bad);
    free(z);
    free(plain);
}

typedef struct zin {
    uint8_t *z;
    size_t zlen, len;
} zin;

static sf_status inflate_scenario(void *arg)
{
    zin *in = arg;
    uint8_t *out = NULL;
    size_t out_len;
    sf_status st = sf_inflate(in->z, in->zlen, 1u << 20, &out, &out_len);

    if (st == SF_OK)
        assert_int_equal(out_len, in->len);
    else
        assert_null(out);
    sf_free(out);
    return st;
}

static void test_allocation_failures(void **state)
{
    uint8_t *plain = pattern(200000);
    zin in = { .len = 200000 };
    const sf_torture t = { .name = "inflate", .run = inflate_scenario, .arg = &in,
                           .expect = SF_ENOMEM };

    (void)state;
    in.z = sf_test_deflate(plain, in.len, true, &in.zlen);
    assert_true(sf_torture_run(&t) >= 1);
    free(in.z);
    free(plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_allocation_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

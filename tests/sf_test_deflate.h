/* tests/sf_test_deflate.h: a test's gzip and zlib bodies, made with zlib
 * itself (the decoders under test are spanfence's). Header-only; include it
 * after <cmocka.h>. */
#ifndef SF_TEST_DEFLATE_H
#define SF_TEST_DEFLATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

/* `len` bytes of `plain` deflated as gzip (gzip true) or zlib into a new
 * malloc'd buffer. */
static inline uint8_t *sf_test_deflate(const uint8_t *plain, size_t len, bool gzip,
                                       size_t *out_len)
{
    z_stream z;
    size_t cap = compressBound(len) + 64;
    uint8_t *out = malloc(cap);

    assert_non_null(out);
    memset(&z, 0, sizeof(z));
    assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, gzip ? 15 + 16 : 15, 8,
                                  Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)plain;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

#endif

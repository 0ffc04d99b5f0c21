/* tests/pipeline/sf_pb_build.h: protobuf bytes built by hand for the codec's
 * tests (test_otlp_wire.c, test_otlp_signals.c): tags, varints of any
 * width, fixed values, strings and sub-messages with length prefixes of
 * any width, attributes. Include after cmocka.h (assert_true). */
#ifndef SF_PB_BUILD_H
#define SF_PB_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { VARINT = 0, I64 = 1, LEN = 2, SGROUP = 3, EGROUP = 4, I32 = 5 };

/* ---- building bytes --------------------------------------------------------- */

typedef struct pb {
    uint8_t d[32768];
    size_t n;
    size_t open[256];           /* content start of each open sub-message */
    unsigned width[256];        /* its length prefix's width (0: minimal) */
    int depth;
} pb;

static inline void pb_init(pb *b)
{
    b->n = 0;
    b->depth = 0;
}

static inline void pb_raw(pb *b, const void *p, size_t n)
{
    assert_true(b->n + n <= sizeof(b->d));
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

static inline void pb_byte(pb *b, uint8_t x)
{
    pb_raw(b, &x, 1);
}

static inline size_t vsize(uint64_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* v in exactly `width` bytes (0: minimal), padded with continuation bytes. */
static inline void pb_varw(pb *b, uint64_t v, unsigned width)
{
    unsigned n = width ? width : (unsigned)vsize(v);

    for (unsigned i = 0; i < n; i++) {
        uint8_t x = (uint8_t)(v & 0x7f);

        v >>= 7;
        pb_byte(b, (uint8_t)(x | (i + 1 < n ? 0x80 : 0)));
    }
}

static inline void pb_var(pb *b, uint64_t v)
{
    pb_varw(b, v, 0);
}

static inline void pb_tag(pb *b, uint32_t num, unsigned wt)
{
    pb_var(b, (uint64_t)num << 3 | wt);
}

static inline void pb_uint(pb *b, uint32_t num, uint64_t v)
{
    pb_tag(b, num, VARINT);
    pb_var(b, v);
}

static inline void pb_fix64(pb *b, uint32_t num, uint64_t v)
{
    pb_tag(b, num, I64);
    pb_raw(b, &v, 8);
}

static inline void pb_fix32(pb *b, uint32_t num, uint32_t v)
{
    pb_tag(b, num, I32);
    pb_raw(b, &v, 4);
}

static inline void pb_bytes(pb *b, uint32_t num, const void *p, size_t n)
{
    pb_tag(b, num, LEN);
    pb_var(b, n);
    pb_raw(b, p, n);
}

static inline void pb_str(pb *b, uint32_t num, const char *s)
{
    pb_bytes(b, num, s, strlen(s));
}

/* A sub-message whose tag and length prefix are `tag_width` and `width`
 * bytes wide (0: minimal). */
static inline void pb_openx(pb *b, uint32_t num, unsigned tag_width, unsigned width)
{
    assert_true(b->depth < 256);
    pb_varw(b, (uint64_t)num << 3 | LEN, tag_width);
    b->open[b->depth] = b->n;
    b->width[b->depth] = width;
    b->depth++;
}

static inline void pb_open(pb *b, uint32_t num)
{
    pb_openx(b, num, 0, 0);
}

static inline void pb_close(pb *b)
{
    size_t start, len;
    pb tmp;

    assert_true(b->depth > 0);
    b->depth--;
    start = b->open[b->depth];
    len = b->n - start;
    tmp.n = 0;
    tmp.depth = 0;
    pb_varw(&tmp, len, b->width[b->depth]);
    assert_true(b->n + tmp.n <= sizeof(b->d));
    memmove(b->d + start + tmp.n, b->d + start, len);
    memcpy(b->d + start, tmp.d, tmp.n);
    b->n += tmp.n;
}

static inline void pb_closen(pb *b, int n)
{
    while (n-- > 0)
        pb_close(b);
}

/* A KeyValue field `num` {key, value {string}}. */
static inline void kv_str(pb *b, uint32_t num, const char *key, const char *val)
{
    pb_open(b, num);
    pb_str(b, 1, key);
    pb_open(b, 2);
    pb_str(b, 1, val);
    pb_closen(b, 2);
}

static inline void kv_int(pb *b, uint32_t num, const char *key, uint64_t val)
{
    pb_open(b, num);
    pb_str(b, 1, key);
    pb_open(b, 2);
    pb_uint(b, 3, val);
    pb_closen(b, 2);
}

static const uint8_t TID[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static const uint8_t SID[8] = { 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x10, 0x11 };

#endif

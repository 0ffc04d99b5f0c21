/* sf_count_inflate.c: the counting decompressor (sf_count_inflate.h). Each
 * feed inflates through one 16 KiB buffer on the stack, asking the decoder
 * for at most one byte past the bound, and hands the output to the item
 * counter before the next piece. */
#include "sf_count_inflate.h"
#include "sf_alloc.h"
#include "sf_compress.h"

#include <limits.h>
#include <string.h>

#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#define PIECE ((size_t)16384)

static void *z_alloc(void *opaque, unsigned n, unsigned size)
{
    (void)opaque;
    return sf_calloc_unlimited(n, size);
}

static void z_free(void *opaque, void *p)
{
    (void)opaque;
    sf_free(p);
}

void sf_count_inflate_init(sf_count_inflate *ci, sf_signal signal, bool json,
                           sf_count_coding coding, size_t bound)
{
    z_stream *z = ci->z;
    ZSTD_DCtx *zd = ci->zd;

    /* The last body's decoder serves this one. */
    if (z != NULL && inflateReset(z) != Z_OK) {
        inflateEnd(z);
        sf_free(z);
        z = NULL;
    }
    if (zd != NULL)
        ZSTD_DCtx_reset(zd, ZSTD_reset_session_only);
    *ci = (sf_count_inflate){ .coding = coding, .bound = bound, .json = json, .z = z, .zd = zd };
    if (json)
        sf_json_span_counter_init_signal(&ci->counter.json, signal);
    else
        sf_span_counter_init_signal(&ci->counter.pb, signal);
}

size_t sf_count_inflate_items(const sf_count_inflate *ci)
{
    return ci->json ? ci->counter.json.spans : ci->counter.pb.spans;
}

static void count(sf_count_inflate *ci, const uint8_t *p, size_t n)
{
    bool bad;

    if (ci->json) {
        sf_json_span_counter_feed(&ci->counter.json, p, n);
        bad = ci->counter.json.bad;
    } else {
        sf_span_counter_feed(&ci->counter.pb, p, n);
        bad = ci->counter.pb.bad;
    }
    if (bad)
        ci->stopped = SF_INVALID;   /* no use inflating what cannot be counted */
}

/* How much the next piece of output may be: at most one byte past the
 * bound, which tells "too large" from "exactly the bound". */
static size_t piece_cap(const sf_count_inflate *ci)
{
    size_t room = ci->bound - ci->inflated;     /* inflated <= bound while counting */

    return room < PIECE ? room + 1 : PIECE;
}

/* `got` bytes of output: counted up to the bound. */
static void count_output(sf_count_inflate *ci, const uint8_t *out, size_t got)
{
    size_t room = ci->bound - ci->inflated;

    ci->inflated += got;
    if (got > room) {
        count(ci, out, room);
        ci->stopped = SF_TOOBIG;
        return;
    }
    count(ci, out, got);
}

static void feed_zlib(sf_count_inflate *ci, const uint8_t *p, size_t n)
{
    uint8_t out[PIECE];
    z_stream *z = ci->z;
    int zr;

    if (z == NULL) {
        z = sf_calloc_unlimited(1, sizeof(*z));
        if (z == NULL) {
            ci->stopped = SF_ENOMEM;
            return;
        }
        z->zalloc = z_alloc;
        z->zfree = z_free;
        /* 15 + 32: zlib or gzip header, detected, as sf_inflate reads them. */
        if (inflateInit2(z, 15 + 32) != Z_OK) {
            sf_free(z);
            ci->stopped = SF_ENOMEM;
            return;
        }
        ci->z = z;
    }
    while (n > 0 && ci->stopped == SF_OK && !ci->ended) {
        size_t k = n < UINT_MAX ? n : UINT_MAX;

        z->next_in = (Bytef *)p;
        z->avail_in = (uInt)k;
        p += k;
        n -= k;
        /* Until the input is used up and the decoder holds no more output. */
        do {
            size_t cap = piece_cap(ci);

            z->next_out = out;
            z->avail_out = (uInt)cap;
            zr = inflate(z, Z_NO_FLUSH);
            count_output(ci, out, cap - z->avail_out);
            if (ci->stopped != SF_OK)
                break;              /* past the bound, or the counter lost its way */
            if (zr == Z_STREAM_END) {
                ci->ended = true;
                break;
            }
            if (zr == Z_BUF_ERROR)
                break;              /* no progress: it needs the next bytes */
            if (zr != Z_OK) {
                ci->stopped = zr == Z_MEM_ERROR ? SF_ENOMEM : SF_INVALID;
                break;
            }
        } while (z->avail_in > 0 || z->avail_out == 0);
    }
}

static void feed_zstd(sf_count_inflate *ci, const uint8_t *p, size_t n)
{
    uint8_t out[PIECE];
    ZSTD_inBuffer ib = { p, n, 0 };
    ZSTD_outBuffer ob;

    if (ci->zd == NULL && (ci->zd = sf_zstd_dctx_create()) == NULL) {
        ci->stopped = SF_ENOMEM;
        return;
    }
    /* Frames follow one another (as sf_unzstd reads them): no end here. */
    do {
        size_t r;

        ob = (ZSTD_outBuffer){ out, piece_cap(ci), 0 };
        r = ZSTD_decompressStream(ci->zd, &ob, &ib);
        count_output(ci, out, ob.pos);
        if (ci->stopped != SF_OK)
            break;
        if (ZSTD_isError(r)) {
            /* A window past the limit, corrupt data, or no memory for it. */
            ci->stopped = ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation
                          ? SF_ENOMEM : SF_INVALID;
            break;
        }
    } while (ib.pos < ib.size || ob.pos == ob.size);
}

size_t sf_count_inflate_feed(sf_count_inflate *ci, const uint8_t *p, size_t n)
{
    size_t before = ci->inflated;

    if (ci->stopped != SF_OK || ci->ended || n == 0)
        return 0;
    switch (ci->coding) {
    case SF_COUNT_IDENTITY:
        count(ci, p, n);
        return 0;
    case SF_COUNT_GZIP:
    case SF_COUNT_DEFLATE:
        feed_zlib(ci, p, n);
        break;
    case SF_COUNT_ZSTD:
        feed_zstd(ci, p, n);
        break;
    }
    return ci->inflated - before;
}

void sf_count_inflate_release(sf_count_inflate *ci)
{
    if (ci->z != NULL) {
        inflateEnd(ci->z);
        sf_free(ci->z);
    }
    sf_zstd_dctx_destroy(ci->zd);
    memset(ci, 0, sizeof(*ci));
}

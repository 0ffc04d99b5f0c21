/* sf_zlib.c: bounded inflate: a gzip member whose trailer gives its size
 * in one call of libdeflate into a buffer of that size, anything else (a
 * zlib stream, a trailer that lies or passes the limit) streamed through
 * zlib into a growing buffer. */
#include "sf_zlib.h"
#include "sf_alloc.h"
#include "sf_dynbuf.h"

#include <libdeflate.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

/* A whole gzip member as its trailer says (ISIZE: the size mod 2^32), when
 * that is within max_out: libdeflate checks the CRC and the size, and
 * inflates 3-4x as fast as zlib's stream into a growing buffer (zeros: a
 * 20 MiB gzip bomb cost 91 ms here). SF_RETRY: not done (not gzip, no
 * such size, a lying trailer, trailing bytes): zlib's path decides, with
 * its own words for what is wrong. */
static sf_status inflate_whole_gzip(const uint8_t *in, size_t in_len, size_t max_out,
                                    uint8_t **out, size_t *out_len)
{
    struct libdeflate_decompressor *d;
    size_t isize, used = 0, got = 0;
    enum libdeflate_result r;
    uint8_t *buf;

    if (in_len < 18 || in[0] != 0x1f || in[1] != 0x8b)
        return SF_RETRY;
    isize = (size_t)in[in_len - 4] | (size_t)in[in_len - 3] << 8 |
            (size_t)in[in_len - 2] << 16 | (size_t)in[in_len - 1] << 24;
    if (isize == 0 || isize > max_out)
        return SF_RETRY;
    buf = sf_malloc(isize);
    d = buf != NULL ? libdeflate_alloc_decompressor() : NULL;
    if (d == NULL) {
        sf_free(buf);
        return SF_ENOMEM;
    }
    r = libdeflate_gzip_decompress_ex(d, in, in_len, buf, isize, &used, &got);
    libdeflate_free_decompressor(d);
    if (r != LIBDEFLATE_SUCCESS || used != in_len || got != isize) {
        sf_free(buf);
        return SF_RETRY;
    }
    *out = buf;
    *out_len = got;
    return SF_OK;
}

sf_status sf_inflate(const uint8_t *in, size_t in_len, size_t max_out, uint8_t **out,
                     size_t *out_len)
{
    z_stream z;
    sf_dynbuf buf;
    size_t first, len;
    sf_status st = SF_INVALID;
    int rc;

    *out = NULL;
    *out_len = 0;
    st = inflate_whole_gzip(in, in_len, max_out, out, out_len);
    if (st != SF_RETRY)
        return st;
    st = SF_INVALID;
    memset(&z, 0, sizeof(z));
    /* 15 + 32: zlib or gzip header, detected automatically. */
    if (inflateInit2(&z, 15 + 32) != Z_OK)
        return SF_ENOMEM;
    /* One byte more than the limit tells "too large" from "exactly max". */
    sf_dynbuf_init(&buf, max_out + 1);
    first = in_len < (SIZE_MAX - 4096) / 4 ? in_len * 4 + 4096 : SIZE_MAX;
    if (first > max_out + 1)
        first = max_out + 1;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)in_len;
    for (;;) {
        void *tail;
        size_t room;

        st = sf_dynbuf_room(&buf, sf_dynbuf_len(&buf) == 0 ? first : 1, &tail, &room);
        if (st != SF_OK)
            goto out_free;          /* SF_TOOBIG: past max_out + 1 */
        if (room > UINT32_MAX)
            room = UINT32_MAX;
        z.next_out = tail;
        z.avail_out = (uInt)room;
        rc = inflate(&z, Z_NO_FLUSH);
        sf_dynbuf_commit(&buf, room - z.avail_out);
        if (rc == Z_STREAM_END)
            break;
        if (rc == Z_MEM_ERROR) {
            st = SF_ENOMEM;
            goto out_free;
        }
        if (rc != Z_OK && !(rc == Z_BUF_ERROR && z.avail_out == 0)) {
            st = SF_INVALID;        /* corrupt, or truncated (no progress possible) */
            goto out_free;
        }
    }
    if (sf_dynbuf_len(&buf) > max_out) {
        st = SF_TOOBIG;
        goto out_free;
    }
    if (z.avail_in != 0) {
        st = SF_INVALID;            /* trailing bytes after the stream */
        goto out_free;
    }
    inflateEnd(&z);
    *out = (uint8_t *)sf_dynbuf_take(&buf, &len);
    if (*out == NULL)
        return SF_ENOMEM;
    *out_len = len;
    return SF_OK;

out_free:
    sf_dynbuf_release(&buf);
    inflateEnd(&z);
    return st;
}

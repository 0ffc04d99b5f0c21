/* sf_zlib.c: bounded inflate on zlib. */
#include "sf_zlib.h"
#include "sf_alloc.h"
#include "sf_dynbuf.h"

#include <stdint.h>
#include <string.h>
#include <zlib.h>

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

/* sf_zlib.c: bounded inflate on zlib. */
#include "sf_zlib.h"
#include "sf_alloc.h"

#include <string.h>
#include <zlib.h>

sf_status sf_inflate(const uint8_t *in, size_t in_len, size_t max_out, uint8_t **out,
                     size_t *out_len)
{
    z_stream z;
    uint8_t *buf = NULL;
    size_t cap, len = 0;
    sf_status st = SF_INVALID;
    int rc;

    *out = NULL;
    *out_len = 0;
    memset(&z, 0, sizeof(z));
    /* 15 + 32: zlib or gzip header, detected automatically. */
    if (inflateInit2(&z, 15 + 32) != Z_OK)
        return SF_ENOMEM;
    cap = in_len * 4 + 4096;
    if (cap > max_out + 1)
        cap = max_out + 1;
    buf = sf_malloc(cap);
    if (buf == NULL) {
        st = SF_ENOMEM;
        goto out_end;
    }
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)in_len;
    for (;;) {
        if (len == cap) {
            size_t ncap;
            uint8_t *nb;
            if (cap > max_out) {
                st = SF_TOOBIG;
                goto out_free;
            }
            ncap = cap * 2 > max_out + 1 ? max_out + 1 : cap * 2;
            nb = sf_realloc(buf, ncap);
            if (nb == NULL) {
                st = SF_ENOMEM;
                goto out_free;
            }
            buf = nb;
            cap = ncap;
        }
        z.next_out = buf + len;
        z.avail_out = (uInt)(cap - len);
        rc = inflate(&z, Z_NO_FLUSH);
        len = cap - z.avail_out;
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
    if (len > max_out) {
        st = SF_TOOBIG;
        goto out_free;
    }
    if (z.avail_in != 0) {
        st = SF_INVALID;            /* trailing bytes after the stream */
        goto out_free;
    }
    *out = buf;
    *out_len = len;
    inflateEnd(&z);
    return SF_OK;

out_free:
    sf_free(buf);
out_end:
    inflateEnd(&z);
    return st;
}

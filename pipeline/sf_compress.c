/* sf_compress.c: exporter compressors (libdeflate gzip, libzstd) and
 * bounded zstd decompression. Every byte they allocate is counted. */
#define ZSTD_STATIC_LINKING_ONLY    /* ZSTD_createDCtx_advanced, ZSTD_customMem */
#include "sf_compress.h"
#include "sf_dynbuf.h"
#include "sf_alloc.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <libdeflate.h>
#include <zstd.h>
#include <zstd_errors.h>

struct sf_compressor {
    sf_compression compression;
    int level;
    struct libdeflate_compressor *gz;
    ZSTD_CCtx *zc;
    uint8_t *buf;
    size_t cap;
};

/* ---- counted memory -------------------------------------------------------- */

static void *zstd_alloc(void *opaque, size_t size)
{
    (void)opaque;
    return sf_malloc(size);
}

static void zstd_free(void *opaque, void *p)
{
    (void)opaque;
    sf_free(p);
}

static const ZSTD_customMem zstd_counted = { zstd_alloc, zstd_free, NULL };

static pthread_once_t deflate_once = PTHREAD_ONCE_INIT;

/* Process-wide: every libdeflate user in spanfence is counted. */
static void deflate_init_once(void)
{
    libdeflate_set_memory_allocator(sf_malloc, sf_free);
}

/* ---- config ---------------------------------------------------------------- */

const sf_config_row sf_compression_params_rows[] = {
    { .key = "level", .type = SF_CFG_INT, .offset = offsetof(sf_compression_params, level),
      .help = "compression level: gzip 1-12 (libdeflate's scale, default 1), "
              "zstd 1-19 (default 1)" },
    { 0 }
};

const char *sf_compression_name(sf_compression compression)
{
    switch (compression) {
    case SF_COMPRESSION_GZIP: return "gzip";
    case SF_COMPRESSION_ZSTD: return "zstd";
    default:                  return "none";
    }
}

sf_status sf_compression_check(sf_cfg_ctx *ctx, sf_compression compression,
                               const sf_compression_params *params)
{
    const sf_node *section = sf_node_get(sf_cfg_value(ctx), "compression_params");
    const sf_node *at = sf_node_get(section, "level");
    int64_t max = compression == SF_COMPRESSION_GZIP ? SF_GZIP_LEVEL_MAX : SF_ZSTD_LEVEL_MAX;

    if (!params->present || at == NULL)
        return SF_OK;
    if (compression == SF_COMPRESSION_NONE) {
        sf_cfg_error(ctx, at, "compression_params.level",
                     "a level needs a compression: set 'compression' to gzip or zstd");
        return SF_CONFIG;
    }
    if (params->level < 1 || params->level > max) {
        sf_cfg_error(ctx, at, "compression_params.level",
                     "level %lld is out of range for %s: use 1-%lld%s", (long long)params->level,
                     sf_compression_name(compression), (long long)max,
                     compression == SF_COMPRESSION_GZIP ? " (libdeflate's scale)" : "");
        return SF_CONFIG;
    }
    return SF_OK;
}

int sf_compression_level(sf_compression compression, const sf_compression_params *params)
{
    if (params->present && params->level > 0)
        return (int)params->level;
    return compression == SF_COMPRESSION_ZSTD ? SF_ZSTD_LEVEL_DEFAULT : SF_GZIP_LEVEL_DEFAULT;
}

/* ---- compressing ----------------------------------------------------------- */

sf_compressor *sf_compressor_create(sf_compression compression, int level)
{
    sf_compressor *c;

    if (compression == SF_COMPRESSION_NONE)
        return NULL;
    pthread_once(&deflate_once, deflate_init_once);
    c = sf_calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->compression = compression;
    c->level = level;
    return c;
}

void sf_compressor_destroy(sf_compressor *c)
{
    if (c == NULL)
        return;
    libdeflate_free_compressor(c->gz);
    ZSTD_freeCCtx(c->zc);
    sf_free(c->buf);
    sf_free(c);
}

static sf_status reserve(sf_compressor *c, size_t bound)
{
    uint8_t *p;

    if (bound <= c->cap)
        return SF_OK;
    p = sf_realloc(c->buf, bound);
    if (p == NULL)
        return SF_ENOMEM;
    c->buf = p;
    c->cap = bound;
    return SF_OK;
}

sf_status sf_compressor_run(sf_compressor *c, const uint8_t *in, size_t len,
                            const uint8_t **out, size_t *out_len)
{
    size_t n;

    if (c->compression == SF_COMPRESSION_GZIP) {
        if (c->gz == NULL && (c->gz = libdeflate_alloc_compressor(c->level)) == NULL)
            return SF_ENOMEM;
        if (reserve(c, libdeflate_gzip_compress_bound(c->gz, len)) != SF_OK)
            return SF_ENOMEM;
        n = libdeflate_gzip_compress(c->gz, in, len, c->buf, c->cap);
        if (n == 0)
            return SF_ENOMEM;       /* the bound was enough: cannot happen */
    } else {
        if (c->zc == NULL) {
            c->zc = ZSTD_createCCtx_advanced(zstd_counted);
            if (c->zc == NULL)
                return SF_ENOMEM;
            /* Levels 1-19 keep the window within 8 MiB (RFC 9659). */
            if (ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_compressionLevel, c->level))) {
                ZSTD_freeCCtx(c->zc);
                c->zc = NULL;
                return SF_ENOMEM;
            }
        }
        if (reserve(c, ZSTD_compressBound(len)) != SF_OK)
            return SF_ENOMEM;
        /* One frame, content size in its header (so a decoder sizes its
         * window to the body); the bound makes dstSize_tooSmall impossible,
         * what remains is allocation failure. */
        n = ZSTD_compress2(c->zc, c->buf, c->cap, in, len);
        if (ZSTD_isError(n)) {
            ZSTD_CCtx_reset(c->zc, ZSTD_reset_session_only);
            return SF_ENOMEM;
        }
    }
    *out = c->buf;
    *out_len = n;
    return SF_OK;
}

/* ---- decompressing --------------------------------------------------------- */

sf_zstd_dctx *sf_zstd_dctx_create(void)
{
    ZSTD_DCtx *d = ZSTD_createDCtx_advanced(zstd_counted);

    if (d == NULL)
        return NULL;
    if (ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, SF_ZSTD_WINDOW_LOG_MAX))) {
        ZSTD_freeDCtx(d);
        return NULL;
    }
    return d;
}

void sf_zstd_dctx_destroy(sf_zstd_dctx *d)
{
    ZSTD_freeDCtx(d);
}

static const char *zstd_why(size_t r)
{
    switch (ZSTD_getErrorCode(r)) {
    case ZSTD_error_frameParameter_windowTooLarge: return "zstd window larger than 8 MiB";
    case ZSTD_error_prefix_unknown:                return "not a zstd frame";
    case ZSTD_error_checksum_wrong:                return "zstd checksum mismatch";
    default:                                       return "corrupt zstd data";
    }
}

sf_status sf_unzstd(const uint8_t *in, size_t in_len, size_t max_out, uint8_t **out,
                    size_t *out_len, const char **why)
{
    ZSTD_inBuffer ib = { in, in_len, 0 };
    unsigned long long hint;
    ZSTD_DCtx *d;
    sf_dynbuf buf;
    size_t first;
    sf_status st = SF_INVALID;
    const char *reason = "corrupt zstd data";

    *out = NULL;
    *out_len = 0;
    if (max_out > SIZE_MAX / 2)
        max_out = SIZE_MAX / 2;
    d = sf_zstd_dctx_create();
    if (d == NULL)
        return SF_ENOMEM;
    /* Room for one byte past max_out: the byte that proves "too big". The
     * header's content size is a hint for the first allocation, never
     * trusted beyond that. */
    sf_dynbuf_init(&buf, max_out + 1);
    hint = ZSTD_getFrameContentSize(in, in_len);
    if (hint != ZSTD_CONTENTSIZE_UNKNOWN && hint != ZSTD_CONTENTSIZE_ERROR && hint < max_out)
        first = (size_t)hint + 1;
    else
        first = in_len < (SIZE_MAX - 4096) / 4 ? in_len * 4 + 4096 : max_out + 1;
    if (first > max_out + 1)
        first = max_out + 1;
    if (sf_dynbuf_reserve(&buf, first) != SF_OK) {
        st = SF_ENOMEM;
        goto out_release_buf;
    }
    for (;;) {
        ZSTD_outBuffer ob = { NULL, 0, 0 };
        size_t r;

        st = sf_dynbuf_room(&buf, 1, &ob.dst, &ob.size);
        if (st != SF_OK)
            goto out_release_buf;   /* SF_TOOBIG, SF_ENOMEM */
        r = ZSTD_decompressStream(d, &ob, &ib);
        sf_dynbuf_commit(&buf, ob.pos);
        if (ZSTD_isError(r)) {
            st = ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? SF_ENOMEM : SF_INVALID;
            reason = zstd_why(r);
            goto out_release_buf;
        }
        if (sf_dynbuf_len(&buf) > max_out) {
            st = SF_TOOBIG;
            goto out_release_buf;
        }
        if (r == 0 && ib.pos == ib.size)
            break;                  /* the last frame is complete */
        if (ib.pos == ib.size && ob.pos < ob.size) {
            st = SF_INVALID;
            reason = "truncated zstd data";  /* it needs input there is none of */
            goto out_release_buf;
        }
    }
    ZSTD_freeDCtx(d);
    *out = (uint8_t *)sf_dynbuf_take(&buf, out_len);
    return SF_OK;

out_release_buf:
    sf_dynbuf_release(&buf);
    ZSTD_freeDCtx(d);
    if (why != NULL)
        *why = st == SF_INVALID ? reason : NULL;
    return st;
}

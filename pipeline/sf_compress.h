/* sf_compress.h: what the network exporters compress with (gzip on
 * libdeflate, zstd on libzstd, at a configured level), their shared
 * `compression` / `compression_params` config, and bounded zstd
 * decompression for request bodies (the gzip side is sf_zlib.h).
 *
 * DESIGN
 * A compressor belongs to one sender worker (not thread-safe) and reuses
 * its context and output buffer across requests; all of its memory goes
 * through sf_malloc, so it is counted and obeys the hard limit.
 * zstd decoders accept windows of at most 8 MiB (SF_ZSTD_WINDOW_LOG_MAX,
 * the limit RFC 9659 sets for HTTP's zstd content coding), so a frame
 * header cannot make a decoder reserve more than that. */
#ifndef SF_COMPRESS_H
#define SF_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_config.h"
#include "sf_status.h"

/* The `compression` enum of both network exporters, in the order of
 * SF_COMPRESSION_CHOICES (gzip first: it is the default). */
typedef enum sf_compression {
    SF_COMPRESSION_GZIP = 0,
    SF_COMPRESSION_NONE = 1,
    SF_COMPRESSION_ZSTD = 2,
} sf_compression;
#define SF_COMPRESSION_CHOICES "gzip|none|zstd"

/* Defaults and ranges of compression_params.level. gzip is libdeflate's
 * scale (1-12; 6 is zlib's default ratio at less CPU), zstd is libzstd's
 * 1-19 (20-22 need windows past RFC 9659's 8 MiB). */
#define SF_GZIP_LEVEL_DEFAULT 1
#define SF_GZIP_LEVEL_MAX 12
#define SF_ZSTD_LEVEL_DEFAULT 1
#define SF_ZSTD_LEVEL_MAX 19
#define SF_ZSTD_WINDOW_LOG_MAX 23

/* `compression_params` (upstream confighttp's spelling): a SF_CFG_SECTION
 * whose sub rows are sf_compression_params_rows. */
typedef struct sf_compression_params {
    bool present;
    int64_t level;                  /* 0: the algorithm's default */
} sf_compression_params;

extern const sf_config_row sf_compression_params_rows[];

/* In an exporter's check(): compression_params.level fits `compression`.
 * Reports through `ctx` and returns SF_CONFIG when it does not. */
sf_status sf_compression_check(sf_cfg_ctx *ctx, sf_compression compression,
                               const sf_compression_params *params);
/* The level to compress at (the default when none is configured). */
int sf_compression_level(sf_compression compression, const sf_compression_params *params);
/* "gzip", "zstd", "none". */
const char *sf_compression_name(sf_compression compression);

typedef struct sf_compressor sf_compressor;

/* A compressor for `compression` (not NONE) at `level`; NULL when out of
 * memory. Its context is made on first use. */
sf_compressor *sf_compressor_create(sf_compression compression, int level);
void sf_compressor_destroy(sf_compressor *c);   /* NULL is fine */
/* Compress `in` whole (one gzip member, or one zstd frame with its content
 * size). On SF_OK *out points into the compressor's buffer, valid until
 * the next call; SF_ENOMEM otherwise. */
sf_status sf_compressor_run(sf_compressor *c, const uint8_t *in, size_t len,
                            const uint8_t **out, size_t *out_len);

/* Decompress zstd frames (one or more, skippable frames allowed). On SF_OK
 * *out is an sf_malloc'd buffer of *out_len bytes (the caller frees it).
 * SF_TOOBIG when the output would pass max_out (checked while decoding, so
 * a bomb costs at most max_out bytes), SF_INVALID for a corrupt or
 * truncated stream or a window over 8 MiB (*why, when not NULL, says which
 * in a few words), SF_ENOMEM. */
sf_status sf_unzstd(const uint8_t *in, size_t in_len, size_t max_out, uint8_t **out,
                    size_t *out_len, const char **why);

/* A streaming zstd decoder (a ZSTD_DCtx) with the window limit above and
 * its memory counted, within the hard limit: its window can be 8 MiB, too
 * much to take past it. NULL when out of memory. */
typedef struct ZSTD_DCtx_s sf_zstd_dctx;
sf_zstd_dctx *sf_zstd_dctx_create(void);
void sf_zstd_dctx_destroy(sf_zstd_dctx *d);     /* NULL is fine */

#endif

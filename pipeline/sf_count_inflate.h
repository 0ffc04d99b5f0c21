/* sf_count_inflate.h: the items of a refused OTLP request counted over its
 * bytes as they stream past, compressed or not (received = accepted +
 * refused): the one counting decompressor of both OTLP servers. Compressed
 * bytes are inflated piecewise through a fixed buffer on the stack into the
 * item counter (sf_otlp_count.h) and dropped; nothing of the body is kept.
 *
 * The output is bounded: past `bound` bytes inflated (the size limit of an
 * accepted request) counting stops, so a bomb costs at most that much CPU
 * and no memory. The decoder's state is counted memory: zlib's (about
 * 45 KB) through sf_calloc_unlimited, never refused at the hard limit (it
 * lives only while a refused body streams past, and without it that body's
 * items would go uncounted); zstd's through sf_zstd_dctx_create (windows of
 * at most 8 MiB, RFC 9659), within the hard limit: too much to take past
 * it, so when it cannot be had the items stay uncounted. A corrupt stream,
 * or input the counter cannot frame, stops counting and keeps the count so
 * far. What a client's decompression costs is the caller's to charge:
 * sf_count_inflate_feed says how many bytes it inflated. */
#ifndef SF_COUNT_INFLATE_H
#define SF_COUNT_INFLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_otlp_count.h"
#include "sf_signal.h"
#include "sf_status.h"

/* The body's coding. gzip and deflate are read as sf_inflate reads them
 * (either header, detected), so what is counted is what would have been
 * accepted. */
typedef enum sf_count_coding {
    SF_COUNT_IDENTITY = 0,
    SF_COUNT_GZIP,
    SF_COUNT_DEFLATE,
    SF_COUNT_ZSTD,
} sf_count_coding;

struct z_stream_s;
struct ZSTD_DCtx_s;

typedef struct sf_count_inflate {
    /* SF_OK while counting; then why it stopped: SF_TOOBIG (past the
     * bound), SF_INVALID (corrupt, or the counter lost the framing),
     * SF_ENOMEM (no decoder). */
    sf_status stopped;
    size_t inflated;            /* bytes inflated so far (0 for identity) */
    /* private */
    sf_count_coding coding;
    size_t bound;
    bool json;
    bool ended;                 /* the compressed stream ended: the rest is ignored */
    union {
        sf_span_counter pb;
        sf_json_span_counter json;
    } counter;
    struct z_stream_s *z;       /* gzip, deflate: made on first use */
    struct ZSTD_DCtx_s *zd;     /* zstd: made on first use */
} sf_count_inflate;

/* Start counting one body: the items of `signal` in protobuf (json false)
 * or OTLP/JSON, coded as `coding`, inflated to at most `bound` bytes.
 * `ci` is zeroed memory (its owner's calloc) or was started before: its
 * decoder is then reset and kept for this body. Allocates nothing. */
void sf_count_inflate_init(sf_count_inflate *ci, sf_signal signal, bool json,
                           sf_count_coding coding, size_t bound);
/* The body's next `n` bytes. Returns the bytes inflated from them (0 for
 * identity, and once stopped): what the client's decompression cost. */
size_t sf_count_inflate_feed(sf_count_inflate *ci, const uint8_t *p, size_t n);
/* The items counted so far. */
size_t sf_count_inflate_items(const sf_count_inflate *ci);
/* Free the decoder; `ci` is then as if zeroed. A zeroed one is fine. */
void sf_count_inflate_release(sf_count_inflate *ci);

#endif

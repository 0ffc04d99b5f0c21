/* sf_zlib.h: bounded gzip/zlib decompression for request bodies. The
 * output limit is enforced while inflating, so a gzip bomb costs at most
 * `max_out` bytes of memory and the CPU to produce them (libdeflate's,
 * for a gzip member whose trailer states its size). */
#ifndef SF_ZLIB_H
#define SF_ZLIB_H

#include <stddef.h>
#include <stdint.h>

#include "sf_status.h"

/* Inflate a gzip or zlib stream (detected from its header). On SF_OK *out
 * is an sf_malloc'd buffer of *out_len bytes (the caller frees it).
 * SF_TOOBIG when the output would pass max_out, SF_INVALID for a corrupt
 * or truncated stream, SF_ENOMEM. */
sf_status sf_inflate(const uint8_t *in, size_t in_len, size_t max_out, uint8_t **out,
                     size_t *out_len);

#endif

/* tests/fuzz/fuzz_decompress.h: the contract every bounded decompressor
 * request bodies go through keeps (sf_inflate, sf_unzstd), checked by their
 * fuzz targets: never more than the cap out, every byte of the output
 * readable, out NULL and out_len 0 on a refusal, only the statuses a
 * receiver answers, nothing left allocated. Aborts with `name` otherwise. */
#ifndef SF_FUZZ_DECOMPRESS_H
#define SF_FUZZ_DECOMPRESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sf_alloc.h"
#include "sf_status.h"

/* `before`: sf_alloc_in_use() before the call; out and out_len as it left them. */
static inline void fuzz_check_decompressed(const char *name, sf_status st, uint8_t *out,
                                           size_t out_len, size_t cap, size_t before)
{
    if (st == SF_OK) {
        if (out == NULL || out_len > cap) {
            fprintf(stderr, "%s: SF_OK with out %p, out_len %zu (cap %zu)\n", name, (void *)out,
                    out_len, cap);
            abort();
        }
        /* Touch every byte: ASan catches a length larger than the buffer. */
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < out_len; i++)
            sum ^= out[i];
        (void)sum;
        sf_free(out);
    } else if (st != SF_INVALID && st != SF_TOOBIG && st != SF_ENOMEM) {
        fprintf(stderr, "%s: unexpected status %s\n", name, sf_status_name(st));
        abort();
    } else if (out != NULL || out_len != 0) {
        fprintf(stderr, "%s: %s left out %p, out_len %zu\n", name, sf_status_name(st),
                (void *)out, out_len);
        abort();
    }
    if (sf_alloc_in_use() != before) {
        fprintf(stderr, "%s: %zu bytes leaked (%s)\n", name, sf_alloc_in_use() - before,
                sf_status_name(st));
        abort();
    }
}

#endif

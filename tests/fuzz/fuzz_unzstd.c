/* tests/fuzz/fuzz_unzstd.c: libFuzzer target for the bounded zstd decoder
 * request bodies go through (sf_unzstd): never more than the 1 MiB cap out,
 * every byte accounted for, a reason for every refusal, nothing left
 * allocated. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sf_alloc.h"
#include "sf_compress.h"

#define CAP (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t before = sf_alloc_in_use(), out_len = 12345;
    const char *why = NULL;
    uint8_t *out = (uint8_t *)1;
    sf_status st = sf_unzstd(data, size, CAP, &out, &out_len, &why);

    if (st == SF_OK) {
        if (out == NULL || out_len > CAP) {
            fprintf(stderr, "sf_unzstd: SF_OK with out %p, out_len %zu (cap %u)\n", (void *)out,
                    out_len, CAP);
            abort();
        }
        /* Touch every byte: ASan catches a length larger than the buffer. */
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < out_len; i++)
            sum ^= out[i];
        (void)sum;
        sf_free(out);
    } else if (st != SF_INVALID && st != SF_TOOBIG && st != SF_ENOMEM) {
        fprintf(stderr, "sf_unzstd: unexpected status %s\n", sf_status_name(st));
        abort();
    } else if (st == SF_INVALID && why == NULL) {
        fprintf(stderr, "sf_unzstd: SF_INVALID without a reason\n");
        abort();
    } else if (out != NULL || out_len != 0) {
        fprintf(stderr, "sf_unzstd: %s left out %p, out_len %zu\n", sf_status_name(st),
                (void *)out, out_len);
        abort();
    }
    if (sf_alloc_in_use() != before) {
        fprintf(stderr, "sf_unzstd: %zu bytes leaked (%s)\n", sf_alloc_in_use() - before,
                sf_status_name(st));
        abort();
    }
    return 0;
}

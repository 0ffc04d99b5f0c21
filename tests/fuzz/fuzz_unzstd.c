/* tests/fuzz/fuzz_unzstd.c: libFuzzer target for the bounded zstd decoder
 * request bodies go through (sf_unzstd): never more than the 1 MiB cap out,
 * every byte accounted for, nothing left allocated (fuzz_decompress.h), and
 * a reason for every refusal. */
#include "fuzz_decompress.h"
#include "sf_compress.h"

#define CAP (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t before = sf_alloc_in_use(), out_len = 12345;
    const char *why = NULL;
    uint8_t *out = (uint8_t *)1;
    sf_status st = sf_unzstd(data, size, CAP, &out, &out_len, &why);

    if (st == SF_INVALID && why == NULL) {
        fprintf(stderr, "sf_unzstd: SF_INVALID without a reason\n");
        abort();
    }
    fuzz_check_decompressed("sf_unzstd", st, out, out_len, CAP, before);
    return 0;
}

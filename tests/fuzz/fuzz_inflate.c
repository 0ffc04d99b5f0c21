/* tests/fuzz/fuzz_inflate.c: libFuzzer target for the bounded gzip/zlib
 * inflate request bodies go through: never more than the 1 MiB cap out,
 * every byte accounted for, nothing left allocated (fuzz_decompress.h). */
#include "fuzz_decompress.h"
#include "sf_zlib.h"

#define CAP (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t before = sf_alloc_in_use(), out_len = 12345;
    uint8_t *out = (uint8_t *)1;
    sf_status st = sf_inflate(data, size, CAP, &out, &out_len);

    fuzz_check_decompressed("sf_inflate", st, out, out_len, CAP, before);
    return 0;
}

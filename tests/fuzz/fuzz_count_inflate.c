/* tests/fuzz/fuzz_count_inflate.c: libFuzzer target for the counting
 * decompressor refused request bodies go through (sf_count_inflate.h). The
 * first byte picks the coding (bits 0-1: identity, gzip, deflate, zstd),
 * the counter (bit 2: protobuf or OTLP/JSON) and the signal (the rest), the
 * second the size of the pieces the rest is fed in (1 << (b % 16)). Checked: never more than one byte past the 1 MiB bound
 * inflated, stopped (SF_TOOBIG) exactly when past it, only the statuses
 * the header names, the bytes each feed reports adding up, no more items
 * than the bytes counted could hold, nothing left allocated. */
#include <stdio.h>
#include <stdlib.h>

#include "sf_alloc.h"
#include "sf_count_inflate.h"

#define BOUND ((size_t)1 << 20)

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "sf_count_inflate: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t before = sf_alloc_in_use(), piece, reported = 0, fed = 0;
    sf_count_coding coding;
    sf_count_inflate ci = { 0 };
    sf_signal signal;
    bool json;

    if (size < 2)
        return 0;
    coding = (sf_count_coding)(data[0] & 3);
    json = (data[0] & 4) != 0;
    signal = (sf_signal)((data[0] >> 3) % SF_SIGNAL_COUNT);
    piece = (size_t)1 << (data[1] % 16);
    data += 2;
    size -= 2;
    sf_count_inflate_init(&ci, signal, json, coding, BOUND);
    for (size_t off = 0; off < size; off += piece) {
        size_t n = size - off < piece ? size - off : piece;

        reported += sf_count_inflate_feed(&ci, data + off, n);
        fed += n;
    }
    check(ci.stopped == SF_OK || ci.stopped == SF_TOOBIG || ci.stopped == SF_INVALID ||
          ci.stopped == SF_ENOMEM, "unexpected status");
    check(reported == ci.inflated, "the feeds' bytes do not add up to `inflated`");
    check(coding != SF_COUNT_IDENTITY || ci.inflated == 0, "identity inflated bytes");
    check(ci.inflated <= BOUND + 1, "inflated more than one byte past the bound");
    check((ci.stopped == SF_TOOBIG) == (ci.inflated > BOUND), "SF_TOOBIG but within the bound");
    /* An item takes two bytes at least ("{}", or a tag and a length). */
    check(sf_count_inflate_items(&ci) <= (coding == SF_COUNT_IDENTITY ? fed : ci.inflated) / 2,
          "more items than bytes to hold them");
    sf_count_inflate_release(&ci);
    check(sf_alloc_in_use() == before, "memory left allocated");
    return 0;
}

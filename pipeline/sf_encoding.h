/* sf_encoding.h: the text encodings of bytes that more than one part reads
 * or writes: hex digits (OTLP/JSON ids), percent-escapes (grpc-message,
 * header lists; OTEL_RESOURCE_ATTRIBUTES reads them more strictly) and base64 (OTLP/JSON bytes, gRPC's -bin
 * metadata). None of our libraries exports a base64 codec, hence this file;
 * it allocates nothing, so the caller picks the memory (arena, stack). */
#ifndef SF_ENCODING_H
#define SF_ENCODING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The value of one hex digit (either case), or -1 when `c` is not one. */
int sf_hex_digit(char c);

/* %XX escapes decoded from in[0, len) into out[0, cap), NUL-terminated
 * (cap > 0) and cut at cap - 1 bytes; a '%' not followed by two hex digits
 * is kept as it is, as gRPC's and the W3C baggage decoders do. `out` may be
 * `in` (the text only shrinks). The length written, without the NUL. */
size_t sf_percent_decode(char *out, size_t cap, const char *in, size_t len);

/* A peer's words for a log line: in[0, len), up to a NUL, into out[0, cap)
 * (cap > 0), NUL-terminated and cut at cap - 1 bytes, each control byte
 * (below 0x20, and DEL) written '?'. */
void sf_printable_copy(char *out, size_t cap, const char *in, size_t len);

/* How many bytes base64 text decodes to, or -1 when it cannot be base64.
 * Either alphabet (RFC 4648 sections 4 and 5), with or without padding:
 * at most two '=' and then only on a whole quartet, never a lone sixth
 * character in the last quartet. The characters are checked by
 * sf_base64_decode(), not here. */
ssize_t sf_base64_decoded_len(const char *in, size_t len);

/* Decode base64 text as sf_base64_decoded_len() reads it into out[0, cap).
 * The decoded length, or -1 when the text is not base64 or its bytes are
 * more than `cap` (out then holds a part of them). */
ssize_t sf_base64_decode(uint8_t *out, size_t cap, const char *in, size_t len);

/* Characters sf_base64_encode() writes for `len` bytes (padded); the caller
 * checks the product does not overflow for its sizes. */
#define SF_BASE64_ENCODED_LEN(len) (((len) + 2) / 3 * 4)

/* Encode in[0, len) in the standard alphabet, padded, into `out`, which
 * holds SF_BASE64_ENCODED_LEN(len) characters (no NUL is written). The
 * number of characters written. */
size_t sf_base64_encode(char *out, const uint8_t *in, size_t len);

#endif

/* sf_encoding.c: hex digits, percent-escapes, printable copies and base64 (see sf_encoding.h). */
#include "sf_encoding.h"

int sf_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t sf_percent_decode(char *out, size_t cap, const char *in, size_t len)
{
    size_t o = 0;

    for (size_t i = 0; i < len && o + 1 < cap; i++) {
        int hi, lo;

        if (in[i] == '%' && i + 2 < len && (hi = sf_hex_digit(in[i + 1])) >= 0 &&
            (lo = sf_hex_digit(in[i + 2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = in[i];
        }
    }
    out[o] = '\0';
    return o;
}

void sf_printable_copy(char *out, size_t cap, const char *in, size_t len)
{
    size_t i;

    for (i = 0; i + 1 < cap && i < len && in[i]; i++)
        out[i] = ((unsigned char)in[i] < 0x20 || in[i] == 0x7f) ? '?' : in[i];
    out[i] = '\0';
}

/* Both alphabets at once: '+' '/' (standard) and '-' '_' (URL-safe). */
static int b64_digit(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

/* The characters that carry data: `len` less the padding, or -1 when the
 * padding or the length cannot be base64's. */
static ssize_t b64_data_len(const char *in, size_t len)
{
    size_t pad = 0, m;

    while (pad < 2 && pad < len && in[len - 1 - pad] == '=')
        pad++;
    m = len - pad;
    if ((pad > 0 && len % 4 != 0) || m % 4 == 1)
        return -1;
    return (ssize_t)m;
}

ssize_t sf_base64_decoded_len(const char *in, size_t len)
{
    static const size_t tail_bytes[4] = { 0, 0, 1, 2 };
    ssize_t m = b64_data_len(in, len);

    if (m < 0)
        return -1;
    return (ssize_t)((size_t)m / 4 * 3 + tail_bytes[m % 4]);
}

ssize_t sf_base64_decode(uint8_t *out, size_t cap, const char *in, size_t len)
{
    ssize_t m = b64_data_len(in, len);
    uint32_t acc = 0;
    size_t o = 0;
    int bits = 0;

    if (m < 0)
        return -1;
    for (size_t i = 0; i < (size_t)m; i++) {
        int v = b64_digit(in[i]);

        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap)
                return -1;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return (ssize_t)o;
}

size_t sf_base64_encode(char *out, const uint8_t *in, size_t len)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;

    for (size_t i = 0; i < len; i += 3) {
        uint32_t acc = (uint32_t)in[i] << 16;

        if (i + 1 < len)
            acc |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            acc |= in[i + 2];
        out[o++] = alphabet[acc >> 18];
        out[o++] = alphabet[(acc >> 12) & 63];
        out[o++] = i + 1 < len ? alphabet[(acc >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? alphabet[acc & 63] : '=';
    }
    return o;
}

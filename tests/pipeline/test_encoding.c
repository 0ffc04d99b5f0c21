/* tests/pipeline/test_encoding.c: hex digits, percent-escapes, printable
 * copies of a peer's words and base64 (sf_encoding.h), the one codec that
 * OTLP/JSON bytes, gRPC's -bin metadata, grpc-message and header lists
 * share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sf_encoding.h"

static void test_hex_digit(void **state)
{
    (void)state;
    assert_int_equal(sf_hex_digit('0'), 0);
    assert_int_equal(sf_hex_digit('9'), 9);
    assert_int_equal(sf_hex_digit('a'), 10);
    assert_int_equal(sf_hex_digit('F'), 15);
    assert_int_equal(sf_hex_digit('g'), -1);
    assert_int_equal(sf_hex_digit('G'), -1);
    assert_int_equal(sf_hex_digit('/'), -1);
    assert_int_equal(sf_hex_digit('\0'), -1);
}

static const char *pct(const char *in, size_t cap)
{
    static char out[64];

    memset(out, 'X', sizeof(out));
    sf_percent_decode(out, cap, in, strlen(in));
    return out;
}

static void test_percent_decode(void **state)
{
    char s[] = "a%20b%2Cc";

    (void)state;
    assert_string_equal(pct("plain", 64), "plain");
    assert_string_equal(pct("a%41%62c", 64), "aAbc");
    /* a '%' without two hex digits is kept */
    assert_string_equal(pct("100%", 64), "100%");
    assert_string_equal(pct("%4", 64), "%4");
    assert_string_equal(pct("%zz%41", 64), "%zzA");
    /* cut at cap - 1 bytes, always terminated */
    assert_string_equal(pct("abcdef", 4), "abc");
    assert_string_equal(pct("%41%42%43", 3), "AB");
    assert_int_equal(sf_percent_decode(s, sizeof(s), s, strlen(s)), 5);
    assert_string_equal(s, "a b,c");   /* in place */
}

static void test_printable_copy(void **state)
{
    char out[8];

    (void)state;
    sf_printable_copy(out, sizeof(out), "ok\x1b[2J\x7f", 8);
    assert_string_equal(out, "ok?[2J?");
    sf_printable_copy(out, sizeof(out), "a long message", 14);
    assert_string_equal(out, "a long ");        /* cut at cap - 1 */
    sf_printable_copy(out, sizeof(out), "ab\0cd", 5);
    assert_string_equal(out, "ab");             /* up to a NUL */
    sf_printable_copy(out, sizeof(out), "abcd", 2);
    assert_string_equal(out, "ab");
}

/* decode `in` into a buffer of `cap`, returning what sf_base64_decode()
 * returns; `out` gets the bytes */
static ssize_t b64(const char *in, size_t cap, uint8_t *out)
{
    return sf_base64_decode(out, cap, in, strlen(in));
}

static void test_base64_decode(void **state)
{
    uint8_t out[32];

    (void)state;
    /* RFC 4648 section 10's vectors, padded and not */
    assert_int_equal(b64("", 32, out), 0);
    assert_int_equal(b64("Zg==", 32, out), 1);
    assert_memory_equal(out, "f", 1);
    assert_int_equal(b64("Zg", 32, out), 1);
    assert_int_equal(b64("Zm8=", 32, out), 2);
    assert_memory_equal(out, "fo", 2);
    assert_int_equal(b64("Zm9v", 32, out), 3);
    assert_memory_equal(out, "foo", 3);
    assert_int_equal(b64("Zm9vYmFy", 32, out), 6);
    assert_memory_equal(out, "foobar", 6);
    assert_int_equal(b64("Zm9vYg", 32, out), 4);
    assert_memory_equal(out, "foob", 4);
    /* both alphabets: 0xfb 0xff 0xfe */
    assert_int_equal(b64("+//+", 32, out), 3);
    assert_memory_equal(out, "\xfb\xff\xfe", 3);
    assert_int_equal(b64("-__-", 32, out), 3);
    assert_memory_equal(out, "\xfb\xff\xfe", 3);
    /* not base64 */
    assert_int_equal(b64("Zm9v!", 32, out), -1);
    assert_int_equal(b64("Z", 32, out), -1);          /* a lone sixth of a byte */
    assert_int_equal(b64("Zm9vY", 32, out), -1);
    assert_int_equal(b64("Zg=", 32, out), -1);        /* padding only on a quartet */
    assert_int_equal(b64("Z===", 32, out), -1);
    assert_int_equal(b64("Zm 9v", 32, out), -1);
    assert_int_equal(b64("Zg==Zg==", 32, out), -1);   /* '=' only at the end */
    /* over the room */
    assert_int_equal(b64("Zm9vYmFy", 5, out), -1);
    assert_int_equal(b64("Zm9vYmFy", 6, out), 6);
}

static void test_base64_decoded_len(void **state)
{
    (void)state;
    assert_int_equal(sf_base64_decoded_len("", 0), 0);
    assert_int_equal(sf_base64_decoded_len("Zg==", 4), 1);
    assert_int_equal(sf_base64_decoded_len("Zg", 2), 1);
    assert_int_equal(sf_base64_decoded_len("Zm8", 3), 2);
    assert_int_equal(sf_base64_decoded_len("Zm9vYmFy", 8), 6);
    assert_int_equal(sf_base64_decoded_len("Zm9vY", 5), -1);
    assert_int_equal(sf_base64_decoded_len("Zm8==", 5), -1);
}

static void test_base64_round_trip(void **state)
{
    uint8_t in[256], back[256];
    char text[SF_BASE64_ENCODED_LEN(256)];

    (void)state;
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)(255 - i);
    for (size_t n = 0; n <= sizeof(in); n += (n < 8 ? 1 : 37)) {
        size_t t = sf_base64_encode(text, in, n);

        assert_int_equal(t, SF_BASE64_ENCODED_LEN(n));
        assert_int_equal(sf_base64_decoded_len(text, t), (ssize_t)n);
        assert_int_equal(sf_base64_decode(back, sizeof(back), text, t), (ssize_t)n);
        assert_memory_equal(back, in, n);
    }
    assert_int_equal(sf_base64_encode(text, (const uint8_t *)"fo", 2), 4);
    assert_memory_equal(text, "Zm8=", 4);
    assert_int_equal(sf_base64_encode(text, (const uint8_t *)"\xfb\xff", 2), 4);
    assert_memory_equal(text, "+/8=", 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex_digit),
        cmocka_unit_test(test_percent_decode),
        cmocka_unit_test(test_printable_copy),
        cmocka_unit_test(test_base64_decode),
        cmocka_unit_test(test_base64_decoded_len),
        cmocka_unit_test(test_base64_round_trip),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

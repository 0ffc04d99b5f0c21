/* tests/pipeline/test_units.c: durations and sizes in config values
 * (sf_parse_duration, sf_parse_size), their formatting for messages, and
 * host names (sf_is_host_name, for TLS server names). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "internal/sf_config_int.h"

static int64_t dur(const char *s)
{
    int64_t ms = -12345;

    assert_int_equal(sf_parse_duration(s, &ms), SF_OK);
    return ms;
}

static void test_duration_valid(void **state)
{
    (void)state;
    assert_int_equal(dur("0"), 0);
    assert_int_equal(dur("0s"), 0);
    assert_int_equal(dur("5s"), 5000);
    assert_int_equal(dur("250ms"), 250);
    assert_int_equal(dur("1m30s"), 90000);
    assert_int_equal(dur("2h"), 7200000);
    assert_int_equal(dur("1h2m3s4ms"), 3723004);
    assert_int_equal(dur("1.5s"), 1500);
    assert_int_equal(dur("1500us"), 2);        /* rounds up */
    assert_int_equal(dur("1ns"), 1);           /* sub-millisecond: 1ms */
    assert_int_equal(dur("999us"), 1);
    assert_int_equal(dur("1000us"), 1);
    assert_int_equal(dur("2000000ns"), 2);
}

static void test_duration_invalid(void **state)
{
    static const char *const bad[] = {
        "", "5", "60", "5 s", " 5s", "5s ", "-5s", "+5s", "5x", "5d", "s", "ms", "1m30",
        "1.s.", "5S", "9999999999999999999h", "1e3s", "0x10s", NULL
    };
    int64_t ms = 77;

    (void)state;
    for (const char *const *s = bad; *s; s++) {
        assert_int_equal(sf_parse_duration(*s, &ms), SF_INVALID);
        assert_int_equal(ms, 77);
    }
}

static int64_t size(const char *s)
{
    int64_t b = -1;

    assert_int_equal(sf_parse_size(s, &b), SF_OK);
    return b;
}

static void test_size_valid(void **state)
{
    (void)state;
    assert_int_equal(size("0"), 0);
    assert_int_equal(size("4096"), 4096);
    assert_int_equal(size("64KiB"), 65536);
    assert_int_equal(size("512MiB"), 512LL << 20);
    assert_int_equal(size("1GiB"), 1LL << 30);
    assert_int_equal(size("2TiB"), 2LL << 40);
    assert_int_equal(size("10MB"), 10000000);
    assert_int_equal(size("10KB"), 10000);
    assert_int_equal(size("3GB"), 3000000000LL);
    assert_int_equal(size("7B"), 7);
}

static void test_size_invalid(void **state)
{
    static const char *const bad[] = {
        "", "10 MB", "10mb", "10Mib", "-1", "+1", "1.5MiB", "MiB", "10MiB ", "99999999999999999999",
        "9999999999TiB", "0x10", NULL
    };
    int64_t b = 77;

    (void)state;
    for (const char *const *s = bad; *s; s++) {
        assert_int_equal(sf_parse_size(*s, &b), SF_INVALID);
        assert_int_equal(b, 77);
    }
}

static void test_format(void **state)
{
    char buf[48];

    (void)state;
    sf_format_duration(0, buf, sizeof(buf));
    assert_string_equal(buf, "0s");
    sf_format_duration(1, buf, sizeof(buf));
    assert_string_equal(buf, "1ms");
    sf_format_duration(3600000, buf, sizeof(buf));
    assert_string_equal(buf, "1h");
    sf_format_duration(90250, buf, sizeof(buf));
    assert_string_equal(buf, "1m30s250ms");
    sf_format_size(1024, buf, sizeof(buf));
    assert_string_equal(buf, "1KiB");
    sf_format_size(1 << 30, buf, sizeof(buf));
    assert_string_equal(buf, "1GiB");
    sf_format_size(1000, buf, sizeof(buf));
    assert_string_equal(buf, "1000");
}

static void test_host_name(void **state)
{
    static const char *const good[] = { "gateway.internal", "a", "x-1.example.com", "127.0.0.1",
                                        "GATEWAY.Internal" };
    static const char *const bad[] = { "", "gateway.internal:443", "gate way", "-a.b", "a-.b",
                                       "a..b", ".a", "a.", "[::1]", "::1", "a_b", "https://a",
                                       "a/b", "caf\xc3\xa9" };
    char label64[80], long254[260];

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        assert_true(sf_is_host_name(good[i]));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(sf_is_host_name(bad[i]));
    memset(label64, 'a', 64);
    label64[64] = '\0';
    assert_false(sf_is_host_name(label64));
    label64[63] = '\0';
    assert_true(sf_is_host_name(label64));
    for (size_t i = 0; i < 254; i++)
        long254[i] = i % 2 ? '.' : 'a';
    long254[253] = '\0';            /* 253 characters, "a.a. ... a" */
    assert_true(sf_is_host_name(long254));
    long254[253] = 'a';
    long254[254] = '\0';
    assert_false(sf_is_host_name(long254));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration_valid),
        cmocka_unit_test(test_duration_invalid),
        cmocka_unit_test(test_size_valid),
        cmocka_unit_test(test_size_invalid),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_host_name),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/receivers/test_otlp_limit.c: the token bucket of the `otlp`
 * receiver's per-connection rate limits (receivers/otlp/otlp_limit.h):
 * frames past a burst are refused until time refills it at its rate, a
 * balance never banks more than the burst, decompression's charge after
 * the fact may go into debt (bounded) and closes the bucket until it is
 * paid back, and every close reason has its metric label. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "receivers/otlp/otlp_limit.h"

static void frames_past_the_burst_wait_for_the_rate(void **state)
{
    sf_otlp_bucket b;
    int taken = 0;

    (void)state;
    sf_otlp_bucket_init(&b, 100, 1000);
    while (sf_otlp_bucket_take(&b, 1, 100, 100, 1000))
        taken++;
    assert_int_equal(taken, 100);
    /* 100 a second: 5 ms gives none back yet, 10 ms one, 500 ms fifty */
    assert_false(sf_otlp_bucket_take(&b, 1, 100, 100, 1005));
    assert_true(sf_otlp_bucket_take(&b, 1, 100, 100, 1010));
    assert_false(sf_otlp_bucket_take(&b, 1, 100, 100, 1010));
    taken = 0;
    while (sf_otlp_bucket_take(&b, 1, 100, 100, 1510))
        taken++;
    assert_int_equal(taken, 50);
}

static void a_sustained_rate_is_held_to_the_limit(void **state)
{
    sf_otlp_bucket b;
    int taken = 0;

    (void)state;
    /* 1,000 frames a second offered for 10 s against 100 + 100/s: 1,100 pass */
    sf_otlp_bucket_init(&b, 100, 0);
    for (int64_t ms = 0; ms < 10000; ms++)
        taken += sf_otlp_bucket_take(&b, 1, 100, 100, ms);
    assert_in_range(taken, 1090, 1100);
}

static void an_idle_bucket_banks_no_more_than_its_burst(void **state)
{
    sf_otlp_bucket b;
    int taken = 0;

    (void)state;
    sf_otlp_bucket_init(&b, 0, 0);
    while (sf_otlp_bucket_take(&b, 1, 100, 100, 3600 * 1000))
        taken++;
    assert_int_equal(taken, 100);
}

static void decompression_goes_into_debt_and_pays_it_back(void **state)
{
    const int64_t rate = 8 << 20, most = 20 << 20;
    sf_otlp_bucket b;

    (void)state;
    /* A new connection: one message of any size at once... */
    sf_otlp_bucket_init(&b, 1, 0);
    assert_true(sf_otlp_bucket_open(&b, rate, rate, 0));
    sf_otlp_bucket_charge(&b, 20 << 20, most);
    /* ...then nothing until its 20 MiB are paid back at 8 MiB/s (2.5 s) */
    assert_false(sf_otlp_bucket_open(&b, rate, rate, 1000));
    assert_false(sf_otlp_bucket_open(&b, rate, rate, 2400));
    assert_true(sf_otlp_bucket_open(&b, rate, rate, 2600));
    /* the debt is bounded: a charge past it costs at most `most` */
    sf_otlp_bucket_charge(&b, INT64_MAX / 2, most);
    assert_true(b.tokens >= -most);
    assert_true(sf_otlp_bucket_open(&b, rate, rate, 2600 + 2600));
}

static void every_reason_has_a_label(void **state)
{
    (void)state;
    for (int k = 0; k < SF_OTLP_CLOSE_COUNT; k++) {
        const char *l = sf_otlp_close_label((sf_otlp_close)k);

        assert_non_null(l);
        assert_true(strlen(l) > 0);
        assert_string_not_equal(l, "unknown");
        for (int j = 0; j < k; j++)
            assert_string_not_equal(l, sf_otlp_close_label((sf_otlp_close)j));
    }
    assert_string_equal(sf_otlp_close_label(SF_OTLP_CLOSE_DECOMPRESSION), "decompression");
    assert_string_equal(sf_otlp_close_label(SF_OTLP_CLOSE_COUNT), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(frames_past_the_burst_wait_for_the_rate),
        cmocka_unit_test(a_sustained_rate_is_held_to_the_limit),
        cmocka_unit_test(an_idle_bucket_banks_no_more_than_its_burst),
        cmocka_unit_test(decompression_goes_into_debt_and_pays_it_back),
        cmocka_unit_test(every_reason_has_a_label),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/pipeline/test_signal.c: the signals' names and item names (the
 * suffixes of upstream's metric names), out-of-range values, and the
 * per-signal OTLP/JSON partial-success reply. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sf_alloc.h"
#include "sf_otlp_json.h"
#include "sf_signal.h"

static void test_names(void **state)
{
    (void)state;
    assert_int_equal(SF_SIGNAL_TRACES, 0);
    assert_string_equal(sf_signal_name(SF_SIGNAL_TRACES), "traces");
    assert_string_equal(sf_signal_name(SF_SIGNAL_LOGS), "logs");
    assert_string_equal(sf_signal_name(SF_SIGNAL_METRICS), "metrics");
    assert_string_equal(sf_signal_name(SF_SIGNAL_COUNT), "?");
    assert_string_equal(sf_signal_items(SF_SIGNAL_TRACES), "spans");
    assert_string_equal(sf_signal_items(SF_SIGNAL_LOGS), "log_records");
    assert_string_equal(sf_signal_items(SF_SIGNAL_METRICS), "metric_points");
    assert_string_equal(sf_signal_items((sf_signal)-1), "?");
}

static void expect_partial(sf_signal s, int64_t rejected, const char *msg, const char *want)
{
    char *out = NULL;
    size_t n = 0;

    assert_int_equal(sf_otlp_json_encode_partial(s, rejected, msg, &out, &n), SF_OK);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
    sf_free(out);
}

static void test_partial(void **state)
{
    (void)state;
    expect_partial(SF_SIGNAL_LOGS, 0, NULL, "{}");
    expect_partial(SF_SIGNAL_LOGS, 0, "", "{}");
    expect_partial(SF_SIGNAL_TRACES, 2, NULL, "{\"partialSuccess\":{\"rejectedSpans\":\"2\"}}");
    expect_partial(SF_SIGNAL_LOGS, 3, "too big",
                   "{\"partialSuccess\":{\"rejectedLogRecords\":\"3\",\"errorMessage\":\"too big\"}}");
    expect_partial(SF_SIGNAL_METRICS, 5, NULL,
                   "{\"partialSuccess\":{\"rejectedDataPoints\":\"5\"}}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_partial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/pipeline/test_sender_config.c: the `sending_queue` and
 * `retry_on_failure` rows every network exporter shares
 * (pipeline/sf_sender_config.c), decoded by the config map: the defaults
 * are upstream exporterhelper's (and the sender's defaults for a section
 * built by hand are the same), values and units are read, every bound is
 * held (one past it refused with the row's range), `storage` is refused
 * with the reason, unknown keys are refused, and every row is documented. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sf_sender.h"
#include "tests/sf_test_config.h"

typedef sf_test_cfg fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));

    sf_test_cfg_init(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    sf_test_cfg_release(*state);
    free(*state);
    return 0;
}

static sf_status decode(fx *f, const sf_config_row *rows, const char *yaml, void *out,
                        size_t size)
{
    return sf_test_cfg_decode(f, rows, yaml, out, size);
}

/* The one diagnostic, which must contain `part`. */
static void expect_one(fx *f, const char *part)
{
    assert_int_equal(sf_diag_count(f->diag), 1);
    if (strstr(sf_diag_message(f->diag, 0), part) == NULL)
        fail_msg("'%s' does not say '%s'", sf_diag_message(f->diag, 0), part);
}

static void test_queue_defaults(void **state)
{
    fx *f = *state;
    sf_queue_config q;

    assert_int_equal(decode(f, sf_sending_queue_rows, "x:\n", &q, sizeof(q)), SF_OK);
    assert_true(q.enabled);
    assert_int_equal(q.queue_size, 1000);
    assert_int_equal(q.num_consumers, 10);
    assert_int_equal(sf_diag_count(f->diag), 0);
    /* the sender's defaults for a section built by hand are the rows' */
    assert_int_equal(sf_sending_queue_defaults.enabled, q.enabled);
    assert_int_equal(sf_sending_queue_defaults.queue_size, q.queue_size);
    assert_int_equal(sf_sending_queue_defaults.num_consumers, q.num_consumers);
    /* upstream's sizer default; the batch merges by default (spanfence) */
    assert_int_equal(q.sizer, SF_SIZER_REQUESTS);
    assert_true(q.batch.enabled);
    assert_int_equal(q.batch.flush_timeout, 200);
    assert_int_equal(q.batch.min_size, 8192);
    assert_int_equal(q.batch.max_size, 0);
    assert_int_equal(q.batch.sizer, SF_SIZER_ITEMS);
    assert_int_equal(sf_sending_queue_defaults.sizer, q.sizer);
    assert_int_equal(sf_sending_queue_defaults.batch.enabled, q.batch.enabled);
    assert_int_equal(sf_sending_queue_defaults.batch.flush_timeout, q.batch.flush_timeout);
    assert_int_equal(sf_sending_queue_defaults.batch.min_size, q.batch.min_size);
    assert_int_equal(sf_sending_queue_defaults.batch.max_size, q.batch.max_size);
    assert_int_equal(sf_sending_queue_defaults.batch.sizer, q.batch.sizer);
}

/* The sizer and the batch's keys are read: a queue of 64 MiB counted in
 * bytes, merging up to 1 MB. */
static void test_sizer_values(void **state)
{
    fx *f = *state;
    sf_queue_config q;

    assert_int_equal(decode(f, sf_sending_queue_rows, "x:\n  sizer: bytes\n  queue_size: 67108864\n"
                            "  batch:\n    sizer: bytes\n    min_size: 262144\n"
                            "    max_size: 1000000\n    flush_timeout: 50ms\n", &q, sizeof(q)),
                     SF_OK);
    assert_int_equal(q.sizer, SF_SIZER_BYTES);
    assert_int_equal(q.queue_size, 67108864);
    assert_true(q.batch.present && q.batch.enabled);
    assert_int_equal(q.batch.sizer, SF_SIZER_BYTES);
    assert_int_equal(q.batch.min_size, 262144);
    assert_int_equal(q.batch.max_size, 1000000);
    assert_int_equal(q.batch.flush_timeout, 50);
    assert_int_equal(sf_diag_count(f->diag), 0);
}

static void test_retry_defaults(void **state)
{
    fx *f = *state;
    sf_retry_config r;

    assert_int_equal(decode(f, sf_retry_rows, "x:\n", &r, sizeof(r)), SF_OK);
    assert_true(r.enabled);
    assert_int_equal(r.initial_interval, 5000);
    assert_true(r.multiplier == 1.5);
    assert_true(r.randomization_factor == 0.5);
    assert_int_equal(r.max_interval, 30000);
    assert_int_equal(r.max_elapsed_time, 300000);
    assert_int_equal(sf_diag_count(f->diag), 0);
    assert_int_equal(sf_retry_defaults.enabled, r.enabled);
    assert_int_equal(sf_retry_defaults.initial_interval, r.initial_interval);
    assert_true(sf_retry_defaults.multiplier == r.multiplier);
    assert_true(sf_retry_defaults.randomization_factor == r.randomization_factor);
    assert_int_equal(sf_retry_defaults.max_interval, r.max_interval);
    assert_int_equal(sf_retry_defaults.max_elapsed_time, r.max_elapsed_time);
}

static void test_values(void **state)
{
    fx *f = *state;
    sf_queue_config q;
    sf_retry_config r;

    assert_int_equal(decode(f, sf_sending_queue_rows,
                            "x:\n  enabled: false\n  queue_size: 1\n  num_consumers: 256\n",
                            &q, sizeof(q)), SF_OK);
    assert_false(q.enabled);
    assert_int_equal(q.queue_size, 1);
    assert_int_equal(q.num_consumers, 256);
    assert_int_equal(decode(f, sf_retry_rows,
                            "x:\n  enabled: false\n  initial_interval: 250ms\n  multiplier: 2\n"
                            "  randomization_factor: 0\n  max_interval: 1m\n"
                            "  max_elapsed_time: 0\n", &r, sizeof(r)), SF_OK);
    assert_false(r.enabled);
    assert_int_equal(r.initial_interval, 250);
    assert_true(r.multiplier == 2.0);
    assert_true(r.randomization_factor == 0.0);
    assert_int_equal(r.max_interval, 60000);
    assert_int_equal(r.max_elapsed_time, 0);        /* retry forever */
    assert_int_equal(sf_diag_count(f->diag), 0);
}

typedef struct bound {
    const sf_config_row *rows;
    const char *yaml;
    const char *key;
} bound;

static void test_bounds(void **state)
{
    static const bound past[] = {
        { sf_sending_queue_rows, "x:\n  queue_size: 0\n", "queue_size" },
        { sf_sending_queue_rows, "x:\n  queue_size: 1099511627777\n", "queue_size" },
        { sf_sending_queue_rows, "x:\n  sizer: spans\n", "sizer" },
        { sf_sending_queue_rows, "x:\n  batch:\n    sizer: lines\n", "batch.sizer" },
        { sf_sending_queue_rows, "x:\n  batch:\n    min_size: -1\n", "batch.min_size" },
        { sf_sending_queue_rows, "x:\n  batch:\n    flush_timeout: 2h\n", "batch.flush_timeout" },
        { sf_sending_queue_rows, "x:\n  num_consumers: 0\n", "num_consumers" },
        { sf_sending_queue_rows, "x:\n  num_consumers: 257\n", "num_consumers" },
        { sf_sending_queue_rows, "x:\n  enabled: maybe\n", "enabled" },
        { sf_retry_rows, "x:\n  initial_interval: 0s\n", "initial_interval" },
        { sf_retry_rows, "x:\n  initial_interval: 2h\n", "initial_interval" },
        { sf_retry_rows, "x:\n  multiplier: 0.5\n", "multiplier" },
        { sf_retry_rows, "x:\n  multiplier: 101\n", "multiplier" },
        { sf_retry_rows, "x:\n  randomization_factor: 1.5\n", "randomization_factor" },
        { sf_retry_rows, "x:\n  randomization_factor: -0.1\n", "randomization_factor" },
        { sf_retry_rows, "x:\n  max_interval: 0s\n", "max_interval" },
        { sf_retry_rows, "x:\n  max_elapsed_time: 25h\n", "max_elapsed_time" },
        { sf_retry_rows, "x:\n  max_elapsed_time: soon\n", "max_elapsed_time" },
    };
    fx *f = *state;

    for (size_t i = 0; i < sizeof(past) / sizeof(past[0]); i++) {
        union { sf_queue_config q; sf_retry_config r; } out;
        char key[64];

        sf_test_cfg_reset_diag(f);
        if (decode(f, past[i].rows, past[i].yaml, &out, sizeof(out)) != SF_CONFIG)
            fail_msg("accepted: %s", past[i].yaml);
        snprintf(key, sizeof(key), "x.%s", past[i].key);
        expect_one(f, key);
    }
}

static void test_storage_and_unknown_refused(void **state)
{
    fx *f = *state;
    sf_queue_config q;
    sf_retry_config r;

    assert_int_equal(decode(f, sf_sending_queue_rows, "x:\n  storage: file_storage\n", &q,
                            sizeof(q)), SF_CONFIG);
    expect_one(f, "spanfence never writes spans to disk");
    sf_test_cfg_reset_diag(f);
    assert_int_equal(decode(f, sf_retry_rows, "x:\n  max_elapsed: 1s\n", &r, sizeof(r)),
                     SF_CONFIG);
    expect_one(f, "max_elapsed");
}

static void test_rows_documented(void **state)
{
    const sf_config_row *const maps[] = { sf_sending_queue_rows, sf_retry_rows };

    (void)state;
    for (size_t m = 0; m < 2; m++)
        for (const sf_config_row *row = maps[m]; row->key != NULL; row++) {
            assert_non_null(row->help);
            assert_true(strlen(row->help) > 10);
            assert_true(row->type == SF_CFG_REJECT || row->type == SF_CFG_SECTION ||
                        row->def != NULL);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_queue_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sizer_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_and_unknown_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rows_documented, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/pipeline/test_diag.c: config diagnostics (sf_config.h, sf_diag.c):
 * "FILE:LINE:COL: path: msg" formatting, warnings marked and counted apart,
 * messages kept in file order whatever order they came in, a repeat of
 * the same message kept once, a file-level message without a position,
 * and running out of memory remembered (sf_diag_oom) rather than lost
 * silently, leaking nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "internal/sf_config_int.h"
#include "sf_alloc.h"
#include "sf_config.h"
#include "tests/sf_torture.h"

static void test_format_order_and_counts(void **state)
{
    sf_diag *d = sf_diag_create("c.yaml");

    (void)state;
    assert_non_null(d);
    sf_diag_error_at(d, 12, 5, "processors.transform/allowlist", "unknown key '%s'", "eror_mode");
    sf_diag_error_at(d, 3, 1, NULL, "bad %d", 1);
    sf_diag_warn(d, NULL, "service", "nothing to %s", "do");
    sf_diag_error_at(d, 12, 2, "a", "first on its line");
    sf_diag_error_at(d, 3, 1, NULL, "bad %d", 1);           /* the same again: kept once */
    assert_int_equal(sf_diag_errors(d), 3);
    assert_int_equal(sf_diag_warnings(d), 1);
    assert_int_equal(sf_diag_count(d), 4);
    /* file order: no position first, then by line and column */
    assert_string_equal(sf_diag_message(d, 0), "c.yaml: service: warning: nothing to do");
    assert_string_equal(sf_diag_message(d, 1), "c.yaml:3:1: bad 1");
    assert_string_equal(sf_diag_message(d, 2), "c.yaml:12:2: a: first on its line");
    assert_string_equal(sf_diag_message(d, 3),
                        "c.yaml:12:5: processors.transform/allowlist: unknown key 'eror_mode'");
    assert_false(sf_diag_oom(d));
    sf_diag_destroy(d);
}

static void test_file_renamed(void **state)
{
    sf_diag *d = sf_diag_create(NULL);

    (void)state;
    assert_int_equal(sf_diag_set_file(d, "other.yaml"), SF_OK);
    sf_diag_error_at(d, 1, 1, NULL, "x");
    assert_string_equal(sf_diag_message(d, 0), "other.yaml:1:1: x");
    sf_diag_destroy(d);
}

/* Every allocation of recording fails in turn: the diag says it ran out of
 * memory (so the loader reports SF_ENOMEM, not a clean config) and frees
 * everything. */
static void record_40(sf_diag *d)
{
    for (int i = 0; i < 40; i++)
        sf_diag_error_at(d, i + 1, 1, NULL, "message %d", i);
}

static sf_status diag_scenario(void *arg)
{
    sf_diag *d = sf_diag_create("c.yaml");
    sf_status st;

    (void)arg;
    if (d == NULL)
        return SF_ENOMEM;
    record_40(d);
    st = sf_diag_oom(d) ? SF_ENOMEM : SF_OK;
    assert_int_equal(sf_diag_count(d) == 40, st == SF_OK);
    sf_diag_destroy(d);
    return st;
}

static void test_allocation_failures(void **state)
{
    const sf_torture t = { .name = "diag", .run = diag_scenario, .expect = SF_ENOMEM };

    (void)state;
    assert_true(sf_torture_run(&t) > 40);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_order_and_counts),
        cmocka_unit_test(test_file_renamed),
        cmocka_unit_test(test_allocation_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/pipeline/test_status.c: the one status type (sf_status.h): OK is 0
 * and every error negative and distinct, each has a name and a lowercase
 * message without a full stop from the one X-macro table, "retry later" and
 * "permanent" are told apart, and a value outside the enum still names
 * itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <string.h>

#include "sf_status.h"

static const sf_status all[] = {
#define SF_STATUS_ALL(name, val, retry, msg) SF_##name,
    SF_STATUS_MAP(SF_STATUS_ALL)
#undef SF_STATUS_ALL
};

static void test_table(void **state)
{
    (void)state;
    assert_int_equal(SF_OK, 0);
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        const char *msg = sf_status_str(all[i]);
        size_t n = strlen(msg);

        if (i > 0)
            assert_true(all[i] < 0);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(all[i], all[j]);
            assert_string_not_equal(sf_status_name(all[i]), sf_status_name(all[j]));
        }
        assert_true(n > 0 && msg[n - 1] != '.' && !isupper((unsigned char)msg[0]));
        assert_string_not_equal(sf_status_name(all[i]), "UNKNOWN");
    }
    assert_string_equal(sf_status_name(SF_FULL), "FULL");
    assert_string_equal(sf_status_str(SF_FULL), "queue full");
}

static void test_retryable(void **state)
{
    (void)state;
    assert_false(sf_status_retryable(SF_OK));
    assert_true(sf_status_retryable(SF_FULL));
    assert_true(sf_status_retryable(SF_MEMLIMIT));
    assert_true(sf_status_retryable(SF_ENOMEM));
    assert_true(sf_status_retryable(SF_STOPPED));
    assert_false(sf_status_retryable(SF_PERMANENT));
    assert_false(sf_status_retryable(SF_INVALID));
    assert_false(sf_status_retryable(SF_FILTER));
    assert_false(sf_status_retryable((sf_status)-999));
    assert_string_equal(sf_status_name((sf_status)-999), "UNKNOWN");
    assert_string_equal(sf_status_str((sf_status)-999), "unknown status");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_retryable),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

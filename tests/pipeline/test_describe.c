/* tests/pipeline/test_describe.c: the words component types describe
 * themselves with (sf_describe.h): error_mode's names, its config choices
 * and default agreeing with them, and the OTLP context names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "sf_describe.h"

static void test_error_modes(void **state)
{
    char joined[64] = "";

    (void)state;
    for (int m = 0; m < SF_ERROR_MODE_COUNT; m++) {
        if (m > 0)
            strcat(joined, "|");
        strcat(joined, sf_error_mode_name(m));
    }
    assert_string_equal(joined, SF_ERROR_MODE_CHOICES);
    assert_string_equal(SF_ERROR_MODE_DEFAULT, sf_error_mode_name(SF_ERROR_MODE_PROPAGATE));
    assert_string_equal(sf_error_mode_name(SF_ERROR_MODE_SILENT), "silent");
    assert_string_equal(sf_error_mode_name(-1), "?");
    assert_string_equal(sf_error_mode_name(SF_ERROR_MODE_COUNT), "?");
}

static void test_context_names(void **state)
{
    (void)state;
    assert_string_equal(sf_otlp_ctx_name(SF_OTLP_RESOURCE), "resource");
    assert_string_equal(sf_otlp_ctx_name(SF_OTLP_SPANEVENT), "spanevent");
    assert_string_equal(sf_otlp_ctx_name(SF_OTLP_LINK), "link");
    assert_string_equal(sf_otlp_ctx_name(SF_OTLP_CTX_COUNT), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_modes),
        cmocka_unit_test(test_context_names),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

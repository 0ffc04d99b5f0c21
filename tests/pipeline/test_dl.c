/* tests/pipeline/test_dl.c: the loader of the libraries opened on first use
 * (sf_dl.h): a library's functions land in the caller's struct at their
 * offsets, and a missing library or function is refused with a reason that
 * names it (and the Debian package that holds the library). libc stands in
 * for the libraries spanfence loads: always there, its functions known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sf_dl.h"

struct libc_fns {
    __typeof__(strlen) *strlen;
    __typeof__(abs) *abs;
};

static const sf_dl_sym libc_syms[] = {
    SF_DL_SYM(struct libc_fns, strlen),
    SF_DL_SYM(struct libc_fns, abs),
    { NULL, 0 }
};

static void test_resolves_into_the_struct(void **state)
{
    struct libc_fns fns = { 0 };
    char err[128] = "";

    (void)state;
    assert_true(sf_dl_load("libc.so.6", "libc6", libc_syms, &fns, err, sizeof err));
    assert_string_equal(err, "");
    assert_non_null(fns.strlen);
    assert_int_equal(fns.strlen("spanfence"), 9);
    assert_int_equal(fns.abs(-3), 3);
}

static void test_missing_library(void **state)
{
    struct libc_fns fns = { 0 };
    char err[256] = "";
    const char *want = "cannot load libspanfence-none.so.0 (Debian: spanfence-none): ";

    (void)state;
    assert_false(sf_dl_load("libspanfence-none.so.0", "spanfence-none", libc_syms, &fns, err,
                            sizeof err));
    assert_memory_equal(err, want, strlen(want));
    assert_non_null(strstr(err, "libspanfence-none.so.0")); /* dlerror's reason follows */
    assert_true(strlen(err) > strlen(want));
}

static void test_missing_function(void **state)
{
    static const sf_dl_sym syms[] = {
        SF_DL_SYM(struct libc_fns, strlen),
        { "spanfence_no_such_function", offsetof(struct libc_fns, abs) },
        { NULL, 0 }
    };
    struct libc_fns fns = { 0 };
    char err[128] = "";

    (void)state;
    assert_false(sf_dl_load("libc.so.6", "libc6", syms, &fns, err, sizeof err));
    assert_string_equal(err, "libc.so.6 lacks spanfence_no_such_function");
    assert_null(fns.abs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolves_into_the_struct),
        cmocka_unit_test(test_missing_library),
        cmocka_unit_test(test_missing_function),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/pipeline/test_dl.c: the loader of the libraries opened on first use
 * (sf_dl.h): a library's functions land in the caller's struct at their
 * offsets, loaded once however many threads ask first, its init run once
 * after them; a missing library or function, or an init that fails, is
 * refused for good with a reason that names it (and the Debian package
 * that holds the library). libc stands in for the libraries spanfence
 * loads: always there, its functions known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sf_dl.h"

struct libc_fns {
    SF_DL_FIELD(strlen)
    SF_DL_FIELD(abs)
};
#define SF_DL_FNS struct libc_fns

static const sf_dl_sym libc_syms[] = {
    SF_DL_ROW(strlen)
    SF_DL_ROW(abs)
    { NULL, 0 }
};

static atomic_int inits;

static bool count_init(sf_dl_lib *lib)
{
    (void)lib;
    atomic_fetch_add(&inits, 1);
    return true;
}

static bool failing_init(sf_dl_lib *lib)
{
    snprintf(lib->error, sizeof(lib->error), "initialisation failed: no");
    return false;
}

static void test_resolves_into_the_struct(void **state)
{
    static struct libc_fns fns;
    static sf_dl_lib lib = SF_DL_LIB("libc.so.6", "libc6", libc_syms, &fns, count_init);
    const struct libc_fns *f;

    (void)state;
    atomic_store(&inits, 0);
    assert_false(sf_dl_loaded(&lib));
    f = sf_dl_api(&lib);
    assert_ptr_equal(f, &fns);
    assert_true(sf_dl_loaded(&lib));
    assert_string_equal(lib.error, "");
    assert_int_equal(f->strlen("spanfence"), 9);
    assert_int_equal(f->abs(-3), 3);
    assert_ptr_equal(sf_dl_api(&lib), &fns);
    assert_int_equal(atomic_load(&inits), 1);
}

static struct libc_fns race_fns;
static sf_dl_lib race_lib = SF_DL_LIB("libc.so.6", "libc6", libc_syms, &race_fns, count_init);

static void *ask(void *arg)
{
    (void)arg;
    return (void *)sf_dl_api(&race_lib);
}

static void test_loaded_once_by_many_threads(void **state)
{
    pthread_t t[8];

    (void)state;
    atomic_store(&inits, 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&t[i], NULL, ask, NULL), 0);
    for (int i = 0; i < 8; i++) {
        void *got;

        assert_int_equal(pthread_join(t[i], &got), 0);
        assert_ptr_equal(got, &race_fns);       /* each saw the whole load */
    }
    assert_int_equal(atomic_load(&inits), 1);
    assert_int_equal(race_fns.strlen("ab"), 2);
}

static void test_missing_library(void **state)
{
    static struct libc_fns fns;
    static sf_dl_lib lib = SF_DL_LIB("libspanfence-none.so.0", "spanfence-none", libc_syms, &fns,
                                     count_init);
    const char *want = "cannot load libspanfence-none.so.0 (Debian: spanfence-none): ";

    (void)state;
    atomic_store(&inits, 0);
    assert_null(sf_dl_api(&lib));
    assert_memory_equal(lib.error, want, strlen(want));
    assert_true(strlen(lib.error) > strlen(want));      /* dlerror's reason follows */
    assert_false(sf_dl_loaded(&lib));
    assert_null(sf_dl_api(&lib));                       /* not tried again */
    assert_int_equal(atomic_load(&inits), 0);
}

static void test_missing_function(void **state)
{
    static const sf_dl_sym syms[] = {
        SF_DL_ROW(strlen)
        { "spanfence_no_such_function", offsetof(struct libc_fns, abs) },
        { NULL, 0 }
    };
    static struct libc_fns fns;
    static sf_dl_lib lib = SF_DL_LIB("libc.so.6", "libc6", syms, &fns, NULL);

    (void)state;
    assert_null(sf_dl_api(&lib));
    assert_string_equal(lib.error, "libc.so.6 lacks spanfence_no_such_function");
    assert_null(fns.abs);
}

static void test_failing_init(void **state)
{
    static struct libc_fns fns;
    static sf_dl_lib lib = SF_DL_LIB("libc.so.6", "libc6", libc_syms, &fns, failing_init);

    (void)state;
    assert_null(sf_dl_api(&lib));
    assert_string_equal(lib.error, "initialisation failed: no");
    assert_false(sf_dl_loaded(&lib));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolves_into_the_struct),
        cmocka_unit_test(test_loaded_once_by_many_threads),
        cmocka_unit_test(test_missing_library),
        cmocka_unit_test(test_missing_function),
        cmocka_unit_test(test_failing_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

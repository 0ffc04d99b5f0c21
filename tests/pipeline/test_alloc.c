/* tests/pipeline/test_alloc.c: the counted allocator (sf_alloc.h): exact
 * bytes in use through malloc/calloc/realloc/free, overflow refused, the
 * failure-injection hook (one failure, sticky failures, the count), the
 * hard limit refusing and the soft limit and external pressure asking to
 * refuse, charges, and the bookkeeping allocation the hard limit lets by. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "sf_alloc.h"

static void test_counts_exactly(void **state)
{
    size_t base = sf_alloc_in_use();
    char *p, *q;
    unsigned char *z;

    (void)state;
    p = sf_malloc(100);
    assert_non_null(p);
    assert_int_equal(sf_alloc_in_use(), base + 100);
    z = sf_calloc(10, 30);
    assert_non_null(z);
    for (int i = 0; i < 300; i++)
        assert_int_equal(z[i], 0);
    assert_int_equal(sf_alloc_in_use(), base + 400);
    memset(p, 'a', 100);
    q = sf_realloc(p, 1000);            /* grows, keeps the bytes */
    assert_non_null(q);
    assert_int_equal(q[99], 'a');
    assert_int_equal(sf_alloc_in_use(), base + 1300);
    q = sf_realloc(q, 10);              /* shrinks */
    assert_int_equal(sf_alloc_in_use(), base + 310);
    sf_free(q);
    sf_free(z);
    sf_free(NULL);
    assert_int_equal(sf_alloc_in_use(), base);
    p = sf_realloc(NULL, 5);            /* like malloc */
    assert_int_equal(sf_alloc_in_use(), base + 5);
    sf_free(p);
    p = sf_strdup("hello");
    assert_string_equal(p, "hello");
    q = sf_strndup("hello", 3);
    assert_string_equal(q, "hel");
    assert_int_equal(sf_alloc_in_use(), base + 6 + 4);
    sf_free(p);
    sf_free(q);
    assert_int_equal(sf_alloc_in_use(), base);
}

static void test_overflow_refused(void **state)
{
    size_t base = sf_alloc_in_use();

    (void)state;
    assert_null(sf_calloc(SIZE_MAX / 2, 3));
    assert_null(sf_malloc(SIZE_MAX - 4));
    assert_null(sf_calloc_unlimited(SIZE_MAX / 2, 3));
    assert_int_equal(sf_alloc_in_use(), base);
}

static void test_failure_injection(void **state)
{
    void *a, *b, *c;
    char *p;

    (void)state;
    sf_alloc_fail_at(2, 0);             /* only the second */
    a = sf_malloc(8);
    b = sf_malloc(8);
    c = sf_malloc(8);
    assert_non_null(a);
    assert_null(b);
    assert_non_null(c);
    assert_int_equal(sf_alloc_count(), 3);
    assert_int_equal(sf_alloc_fail_at(0, 0), 3);
    assert_int_equal(sf_alloc_count(), 0);
    sf_free(a);
    sf_free(c);

    sf_alloc_fail_at(2, 1);             /* the second and all after */
    a = sf_malloc(8);
    assert_non_null(a);
    assert_null(sf_malloc(8));
    assert_null(sf_calloc(1, 8));
    assert_null(sf_strdup("x"));
    p = sf_realloc(a, 64);              /* a failed realloc leaves the block */
    assert_null(p);
    sf_alloc_fail_at(0, 0);
    sf_free(a);
}

static void test_limits(void **state)
{
    size_t base = sf_alloc_in_use(), soft, hard;
    void *a, *b, *book;

    (void)state;
    sf_alloc_limits(&soft, &hard);
    assert_int_equal(soft, 0);
    assert_int_equal(hard, 0);
    assert_false(sf_alloc_under_pressure());
    sf_alloc_set_limits(base + 1000, base + 2000);
    sf_alloc_limits(&soft, &hard);
    assert_int_equal(hard, base + 2000);
    a = sf_malloc(900);
    assert_non_null(a);
    assert_false(sf_alloc_under_pressure());
    b = sf_malloc(200);                 /* past soft: pressure, still given */
    assert_non_null(b);
    assert_true(sf_alloc_under_pressure());
    assert_null(sf_malloc(1000));       /* past hard: refused */
    assert_null(sf_realloc(b, 1200));
    assert_false(sf_alloc_charge(1000));
    assert_int_equal(sf_alloc_in_use(), base + 1100);
    book = sf_calloc_unlimited(1, 1000);    /* bookkeeping: let by, counted */
    assert_non_null(book);
    assert_int_equal(sf_alloc_in_use(), base + 2100);
    sf_free(book);
    sf_free(b);
    assert_false(sf_alloc_under_pressure());
    assert_true(sf_alloc_charge(500));  /* charges count like allocations */
    assert_int_equal(sf_alloc_in_use(), base + 1400);
    assert_true(sf_alloc_under_pressure());
    sf_alloc_uncharge(500);
    assert_false(sf_alloc_under_pressure());
    sf_alloc_set_external_pressure(1);
    assert_true(sf_alloc_under_pressure());
    sf_alloc_set_external_pressure(0);
    assert_false(sf_alloc_under_pressure());
    sf_free(a);
    sf_alloc_set_limits(0, 0);
    a = sf_malloc(1u << 20);
    assert_non_null(a);
    sf_free(a);
    assert_int_equal(sf_alloc_in_use(), base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_exactly),
        cmocka_unit_test(test_overflow_refused),
        cmocka_unit_test(test_failure_injection),
        cmocka_unit_test(test_limits),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/pipeline/test_dynbuf.c: the bounded growable buffer (sf_dynbuf.h):
 * add, printf and in-place writes up to the bound and not a byte past it,
 * failures that leave the content as it was, reset, take, and every
 * allocation failing cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "sf_alloc.h"
#include "sf_dynbuf.h"
#include "tests/sf_torture.h"

static void test_add_and_bound(void **state)
{
    sf_dynbuf b;
    size_t before = sf_alloc_in_use();

    (void)state;
    sf_dynbuf_init(&b, 10);
    assert_string_equal(sf_dynbuf_ptr(&b), "");
    assert_int_equal(sf_dynbuf_len(&b), 0);
    assert_int_equal(sf_dynbuf_add(&b, "hello", 5), SF_OK);
    assert_int_equal(sf_dynbuf_addstr(&b, "world"), SF_OK);     /* exactly 10 */
    assert_string_equal(sf_dynbuf_ptr(&b), "helloworld");
    assert_int_equal(sf_dynbuf_add(&b, "!", 1), SF_TOOBIG);     /* one past */
    assert_string_equal(sf_dynbuf_ptr(&b), "helloworld");       /* unchanged */
    assert_int_equal(sf_dynbuf_add(&b, "", 0), SF_OK);
    assert_true(sf_dynbuf_capacity(&b) <= 10);
    sf_dynbuf_reset(&b);
    assert_int_equal(sf_dynbuf_len(&b), 0);
    assert_string_equal(sf_dynbuf_ptr(&b), "");
    assert_int_equal(sf_dynbuf_addstr(&b, "again"), SF_OK);
    assert_string_equal(sf_dynbuf_ptr(&b), "again");
    sf_dynbuf_release(&b);
    assert_int_equal(sf_alloc_in_use(), before);
    /* released is empty and usable again, same bound */
    assert_int_equal(sf_dynbuf_add(&b, "0123456789x", 11), SF_TOOBIG);
    assert_int_equal(sf_dynbuf_add(&b, "0123456789", 10), SF_OK);
    sf_dynbuf_release(&b);
}

static void test_grows_by_doubling(void **state)
{
    static char chunk[48576];
    sf_dynbuf b;
    size_t grows = 0, cap = 0;

    (void)state;
    memset(chunk, 'x', sizeof(chunk));
    sf_dynbuf_init(&b, 1u << 20);
    for (int i = 0; i < 10000; i++) {
        assert_int_equal(sf_dynbuf_add(&b, chunk, 100), SF_OK);
        if (sf_dynbuf_capacity(&b) != cap) {
            grows++;
            cap = sf_dynbuf_capacity(&b);
        }
    }
    assert_int_equal(sf_dynbuf_len(&b), 1000000);
    assert_true(grows <= 20);   /* doubling: log2(1e6 / 32) + 1 */
    assert_int_equal(sf_dynbuf_add(&b, chunk, 48576), SF_OK);  /* to exactly 1 MiB */
    assert_int_equal(sf_dynbuf_add(&b, chunk, 1), SF_TOOBIG);
    assert_int_equal(sf_dynbuf_capacity(&b), 1u << 20);          /* never past the bound */
    sf_dynbuf_release(&b);
}

static void test_printf(void **state)
{
    sf_dynbuf b;
    char big[300];

    (void)state;
    sf_dynbuf_init(&b, 64);
    assert_int_equal(sf_dynbuf_printf(&b, "%s=%d", "a", 1), SF_OK);
    assert_int_equal(sf_dynbuf_printf(&b, ",%s=%d", "bb", 22), SF_OK);
    assert_string_equal(sf_dynbuf_ptr(&b), "a=1,bb=22");
    memset(big, 'y', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    /* all or nothing: past the bound, nothing of it is appended */
    assert_int_equal(sf_dynbuf_printf(&b, "%s", big), SF_TOOBIG);
    assert_string_equal(sf_dynbuf_ptr(&b), "a=1,bb=22");
    /* fits the allocation but not the bound */
    assert_int_equal(sf_dynbuf_printf(&b, "%.*s", 56, big), SF_TOOBIG);
    assert_string_equal(sf_dynbuf_ptr(&b), "a=1,bb=22");
    assert_int_equal(sf_dynbuf_printf(&b, "%.*s", 55, big), SF_OK);  /* to exactly 64 */
    assert_int_equal(sf_dynbuf_len(&b), 64);
    sf_dynbuf_release(&b);
}

static void test_room_commit_reserve_take(void **state)
{
    sf_dynbuf b;
    void *tail;
    size_t room, len;
    char *p;

    (void)state;
    sf_dynbuf_init(&b, 100);
    assert_int_equal(sf_dynbuf_room(&b, 10, &tail, &room), SF_OK);
    assert_true(room >= 10 && room <= 100);
    memcpy(tail, "abc", 3);
    sf_dynbuf_commit(&b, 3);
    assert_string_equal(sf_dynbuf_ptr(&b), "abc");
    assert_int_equal(sf_dynbuf_room(&b, 98, &tail, &room), SF_TOOBIG);
    assert_int_equal(sf_dynbuf_room(&b, 97, &tail, &room), SF_OK);
    assert_int_equal(room, 97);
    assert_int_equal(sf_dynbuf_reserve(&b, 101), SF_TOOBIG);
    assert_int_equal(sf_dynbuf_reserve(&b, 100), SF_OK);
    assert_int_equal(sf_dynbuf_capacity(&b), 100);
    p = sf_dynbuf_take(&b, &len);
    assert_int_equal(len, 3);
    assert_string_equal(p, "abc");
    sf_free(p);
    assert_int_equal(sf_dynbuf_len(&b), 0);
    p = sf_dynbuf_take(&b, &len);       /* empty: an allocated "" */
    assert_non_null(p);
    assert_int_equal(len, 0);
    assert_string_equal(p, "");
    sf_free(p);
    sf_dynbuf_release(&b);
}

/* Every allocation the buffer makes fails in turn (the torture helper):
 * the call reports SF_ENOMEM, the content is what it was, and nothing
 * leaks. */
static sf_status grow_scenario(void *arg)
{
    sf_dynbuf b;
    sf_status st = SF_OK;
    int i;

    (void)arg;
    sf_dynbuf_init(&b, 1u << 16);
    for (i = 0; i < 200 && st == SF_OK; i++)
        st = i % 2 ? sf_dynbuf_printf(&b, "%04d,", i) : sf_dynbuf_add(&b, "0123456789", 10);
    if (st == SF_OK && sf_dynbuf_len(&b) != 100 * 10 + 100 * 5)
        fail_msg("%zu bytes after every add, not 1500", sf_dynbuf_len(&b));
    /* what was added before the failure is all there */
    if (st != SF_OK && sf_dynbuf_len(&b) != (size_t)(i - 1) / 2 * 15 + ((i - 1) % 2 ? 10 : 0))
        fail_msg("%zu bytes after add %d failed", sf_dynbuf_len(&b), i - 1);
    sf_dynbuf_release(&b);
    return st;
}

static void test_allocation_failures(void **state)
{
    const sf_torture t = { .name = "dynbuf growth", .run = grow_scenario, .expect = SF_ENOMEM };

    (void)state;
    assert_true(sf_torture_run(&t) >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_and_bound),
        cmocka_unit_test(test_grows_by_doubling),
        cmocka_unit_test(test_printf),
        cmocka_unit_test(test_room_commit_reserve_take),
        cmocka_unit_test(test_allocation_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/pipeline/test_arena.c: the region allocator (sf_arena.h): aligned
 * bump allocation over chunks, a large request in a chunk of its own, the
 * byte cap and the failed flag, reset (memory kept for reuse, flag
 * cleared), protobuf-c decoding into it, and creation and allocation under
 * the torture helper. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "sf_alloc.h"
#include "sf_arena.h"
#include "sf_request.h"
#include "tests/sf_torture.h"

static void test_aligned_and_counted(void **state)
{
    size_t base = sf_alloc_in_use();
    sf_arena *a = sf_arena_create(1024, 0);
    char *s;

    (void)state;
    assert_non_null(a);
    for (size_t n = 1; n < 200; n += 7) {
        void *p = sf_arena_alloc(a, n);

        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        memset(p, 0xa5, n);
    }
    assert_true(sf_arena_used(a) > 0);
    s = sf_arena_strndup(a, "hello world", 5);
    assert_string_equal(s, "hello");
    /* bigger than a chunk: a chunk of its own */
    assert_non_null(sf_arena_alloc(a, 10000));
    assert_false(sf_arena_failed(a));
    assert_true(sf_alloc_in_use() > base + 10000);
    sf_arena_destroy(a);
    assert_int_equal(sf_alloc_in_use(), base);
    sf_arena_destroy(NULL);
}

static void test_cap_and_reset(void **state)
{
    sf_arena *a = sf_arena_create(1024, 4096);
    size_t held;
    int got = 0;

    (void)state;
    assert_non_null(a);
    while (sf_arena_alloc(a, 512) != NULL)
        got++;
    assert_true(got >= 4 && got <= 8);      /* 4 KiB of chunks, no more */
    assert_true(sf_arena_failed(a));
    held = sf_alloc_in_use();
    sf_arena_reset(a);
    assert_false(sf_arena_failed(a));
    assert_int_equal(sf_arena_used(a), 0);
    assert_true(sf_alloc_in_use() <= held); /* kept for reuse, not grown */
    for (int i = 0; i < got; i++)
        assert_non_null(sf_arena_alloc(a, 512));
    sf_arena_destroy(a);
}

static void test_protobuf_decodes_into_it(void **state)
{
    sf_otlp_kv kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    sf_otlp_any v = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    uint8_t buf[64];
    size_t len;
    sf_otlp_kv *out;
    sf_arena *a = sf_arena_create(4096, 0);

    (void)state;
    kv.key = "k";
    v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    v.string_value = "value";
    kv.value = &v;
    len = opentelemetry__proto__common__v1__key_value__pack(&kv, buf);
    out = opentelemetry__proto__common__v1__key_value__unpack(sf_arena_pb_allocator(a), len, buf);
    assert_non_null(out);
    assert_string_equal(out->key, "k");
    assert_string_equal(out->value->string_value, "value");
    assert_true(sf_arena_used(a) > 0);
    sf_arena_destroy(a);            /* frees the message with it */
}

static sf_status arena_scenario(void *arg)
{
    sf_arena *a = sf_arena_create(256, 0);
    sf_status st = SF_OK;

    (void)arg;
    if (a == NULL)
        return SF_ENOMEM;
    for (int i = 0; i < 20 && st == SF_OK; i++)
        if (sf_arena_alloc(a, 100) == NULL)
            st = SF_ENOMEM;
    if (st == SF_OK && sf_arena_strndup(a, "abc", 3) == NULL)
        st = SF_ENOMEM;
    assert_int_equal(sf_arena_failed(a), st != SF_OK);
    sf_arena_destroy(a);
    return st;
}

static void test_allocation_failures(void **state)
{
    const sf_torture t = { .name = "arena", .run = arena_scenario, .expect = SF_ENOMEM };

    (void)state;
    assert_true(sf_torture_run(&t) >= 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aligned_and_counted),
        cmocka_unit_test(test_cap_and_reset),
        cmocka_unit_test(test_protobuf_decodes_into_it),
        cmocka_unit_test(test_allocation_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

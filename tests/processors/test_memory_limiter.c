/* tests/processors/test_memory_limiter.c: the memory_limiter's config
 * checks and its effect: refusal past the soft limit, failing allocations
 * past the hard limit, recovery when memory is freed, and an RSS guard
 * that refuses only while counted memory is high too, so it cannot latch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/sf_test.h"

#include "internal/sf_core.h"
#include "processors/memory_limiter/memory_limiter.h"

extern const sf_component_type sf_memory_limiter_processor_type;

static const char *load(const char *limiter_yaml)
{
    char yaml[1024];

    snprintf(yaml, sizeof(yaml),
             "receivers: {otlp: {protocols: {grpc: }}}\n"
             "processors:\n  memory_limiter:\n%s"
             "exporters: {otlphttp: {endpoint: 'http://127.0.0.1:1'}}\n"
             "service:\n  pipelines:\n    traces: {receivers: [otlp], processors: [memory_limiter], exporters: [otlphttp]}\n",
             limiter_yaml);
    return sf_test_config_messages("m.yaml", yaml);
}

static void test_config_checks(void **state)
{
    (void)state;
    assert_string_equal(load("    check_interval: 1s\n    limit_mib: 64\n"), "");
    assert_string_equal(load("    check_interval: 1s\n"),
                        "m.yaml:3:3: processors.memory_limiter: set exactly one of 'limit_mib' "
                        "and 'limit_percentage'\n");
    assert_string_equal(load("    limit_mib: 64\n    limit_percentage: 50\n"),
                        "m.yaml:3:3: processors.memory_limiter: set exactly one of 'limit_mib' "
                        "and 'limit_percentage'\n");
    assert_string_equal(load("    limit_mib: 64\n    spike_limit_mib: 64\n"),
                        "m.yaml:5:22: processors.memory_limiter.spike_limit_mib: must be below "
                        "'limit_mib' (64)\n");
    assert_string_equal(load("    limit_percentage: 101\n"),
                        "m.yaml:4:23: processors.memory_limiter.limit_percentage: value '101' is "
                        "out of range (expected 0 to 100)\n");
}

static size_t rss_mib(void)
{
    unsigned long total = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%lu %lu", &total, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (size_t)rss * 4096 >> 20;
}

static void test_soft_and_hard_limits(void **state)
{
    sf_memory_limiter_config cfg = { .check_interval = 50, .limit_mib = 0 };
    struct sf_component c = { .type = &sf_memory_limiter_processor_type, .id = "memory_limiter" };
    size_t base = sf_alloc_in_use();
    sf_request batch = { .spans = 7 };
    void *big, *more;

    (void)state;
    /* A hard limit well above both the counted memory and the RSS of this
     * process (the RSS sampler must not add pressure of its own); the soft
     * limit is 80% of it (spike: 20% by default). The big allocation below
     * is not touched, so it counts without raising RSS. */
    cfg.limit_mib = (int64_t)((rss_mib() > (base >> 20) ? rss_mib() : (base >> 20)) + 64);
    assert_int_equal(c.type->create(&c, &cfg), SF_OK);
    assert_int_equal(c.type->start(&c), SF_OK);
    assert_int_equal(c.type->consume(&c, &batch), SF_OK);

    big = sf_malloc(((size_t)cfg.limit_mib << 20) - ((size_t)cfg.limit_mib << 20) / 5 - base + 1024);
    assert_non_null(big);
    assert_true(sf_alloc_under_pressure());
    assert_int_equal(c.type->consume(&c, &batch), SF_MEMLIMIT);
    assert_int_equal(c.counters.dropped_spans[SF_REASON_MEMORY_LIMIT], 7);
    /* Past the hard limit nothing more is handed out. */
    more = sf_malloc(((size_t)cfg.limit_mib << 20) / 5);
    assert_null(more);
    /* ... except the small bookkeeping that refusals themselves need,
     * which is still counted. */
    {
        size_t before = sf_alloc_in_use();
        unsigned char *book = sf_calloc_unlimited(1, 4096);

        assert_non_null(book);
        assert_int_equal(book[4095], 0);
        assert_int_equal(sf_alloc_in_use(), before + 4096);
        sf_free(book);
        assert_int_equal(sf_alloc_in_use(), before);
    }

    sf_free(big);
    assert_false(sf_alloc_under_pressure());
    assert_int_equal(c.type->consume(&c, &batch), SF_OK);
    assert_int_equal(c.counters.incoming_items, 21);
    assert_int_equal(c.counters.outgoing_items, 14);

    c.type->shutdown(&c);
    c.type->destroy(&c);
    /* Limits are lifted at shutdown. */
    more = sf_malloc(64u << 20);
    assert_non_null(more);
    sf_free(more);
}

/* The RSS guard: RSS the count cannot see (here plain malloc, standing in
 * for gRPC core's buffers) adds pressure only while counted memory is also
 * high, and lets go as soon as counted memory is low, even though RSS stays
 * over the limit: refusing could free nothing, so it would only latch. */
static void test_rss_guard_cannot_latch(void **state)
{
    sf_memory_limiter_config cfg = { .check_interval = 10, .limit_mib = 16 };
    struct sf_component c = { .type = &sf_memory_limiter_processor_type, .id = "memory_limiter" };
    size_t uncounted = 48u << 20, counted = 8u << 20;   /* soft 12.8 MiB, low mark 6.4 */
    unsigned char *outside, *inside;

    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip();     /* no RSS guard in AddressSanitizer builds (memory_limiter.c) */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    skip();
#endif
#endif
    assert_true(sf_alloc_in_use() < (4u << 20));
    assert_int_equal(c.type->create(&c, &cfg), SF_OK);
    assert_int_equal(c.type->start(&c), SF_OK);
    assert_false(sf_alloc_under_pressure());

    /* RSS 48 MiB over the baseline, counted memory low: no pressure. */
    outside = malloc(uncounted);
    assert_non_null(outside);
    memset(outside, 1, uncounted);
    usleep(100 * 1000);             /* ten checks */
    assert_false(sf_alloc_under_pressure());

    /* Counted memory up too (under the soft limit): the guard refuses. */
    inside = sf_malloc(counted);
    assert_non_null(inside);
    memset(inside, 1, counted);
    SF_TEST_WAIT_FOR(sf_alloc_under_pressure());

    /* Counted memory freed, RSS still over the limit: it lets go. */
    sf_free(inside);
    SF_TEST_WAIT_FOR(!sf_alloc_under_pressure());

    free(outside);
    c.type->shutdown(&c);
    c.type->destroy(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_checks),
        cmocka_unit_test(test_soft_and_hard_limits),
        cmocka_unit_test(test_rss_guard_cannot_latch),
    };

    sf_log_set_level(SF_LOG_OFF);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

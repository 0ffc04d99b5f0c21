/* tests/processors/test_filter.c: the `filter` processor: upstream's
 * filterprocessor config for metrics by name (conditions on the name,
 * include and exclude, strict or regexp) compiled into the codec edit's
 * keep_metric_fn, judged here name by name and then on a request through
 * the codec; consume's accounting (dropped with reason "filtered"); and
 * the refusals of what spanfence does not filter. Configs go through the
 * real loader. */
#define _GNU_SOURCE     /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/sf_core.h"
#include "processors/filter/filter.h"
#include "tests/sf_torture.h"
#include "processor_fixture.h"
#include "tests/pipeline/sf_pb_build.h"

typedef pfx_run run;

static void load(run *r, const char *procs, const char *id)
{
    if (pfx_load_in(r, "filter.yaml", procs, id, "metrics") != SF_OK)
        fail_msg("%s", r->errors);
}

/* The processor's edit's verdict on the metric `name`. */
static int verdict(run *r, const char *name)
{
    const sf_otlp_edit *e = r->comp.type->edit(&r->comp, SF_SIGNAL_METRICS);
    void *state = NULL;
    int v;

    assert_non_null(e->keep_metric_fn);
    v = e->keep_metric_fn(e->ctx, &state, (const uint8_t *)name, strlen(name));
    if (e->release != NULL && state != NULL)
        e->release(e->ctx, state);
    return v;
}

/* Whether it lets the metric `name` leave (a plain keep or drop). */
static bool keeps(run *r, const char *name)
{
    int v = verdict(r, name);

    assert_true(v == SF_OTLP_METRIC_KEEP || v == SF_OTLP_METRIC_DROP);
    return v == SF_OTLP_METRIC_KEEP;
}

static void test_conditions(void **state)
{
    run r;

    (void)state;
    load(&r, "  filter/m:\n"
             "    error_mode: ignore\n"
             "    metrics:\n"
             "      metric:\n"
             "        - 'name == \"process.debug\"'\n"
             "        - 'IsMatch(name, \"^go_\")'\n"
             "        - 'not IsMatch(metric.name, \"^(sglang|vllm):\")'\n"
             "        - 'IsMatch(name, \"\\\\.tmp\")'\n", "filter/m");
    assert_false(keeps(&r, "process.debug"));
    assert_false(keeps(&r, "go_goroutines"));
    assert_false(keeps(&r, "http.server.duration"));   /* not an engine's */
    assert_false(keeps(&r, "sglang:x.tmp"));            /* \\. is a dot */
    assert_false(keeps(&r, ""));
    assert_true(keeps(&r, "sglang:num_running_reqs"));
    assert_true(keeps(&r, "vllm:tokens_total"));
    assert_true(keeps(&r, "sglang:xtmp"));
    /* the edit is for metrics only */
    assert_null(r.comp.type->edit(&r.comp, SF_SIGNAL_TRACES));
    assert_null(r.comp.type->edit(&r.comp, SF_SIGNAL_LOGS));
    pfx_unload(&r);

    /* != : every metric but one dropped */
    load(&r, "  filter:\n    metrics:\n      metric: ['name != \"keep\"']\n", "filter");
    assert_true(keeps(&r, "keep"));
    assert_false(keeps(&r, "keep2"));
    assert_false(keeps(&r, "kee"));
    pfx_unload(&r);

    /* $ is the end of the name, as in Go's regexp (PCRE2 would also match
     * before a final newline); a pattern that hits the match limit drops
     * the metric (FAILED: counted as filter_failed) */
    load(&r, "  filter:\n    metrics:\n      metric:\n"
             "        - 'not IsMatch(name, \"^sglang:[a-z_]+$\")'\n"
             "        - 'IsMatch(name, \"^(a|aa)+$\")'\n", "filter");
    assert_true(keeps(&r, "sglang:num_running_reqs"));
    assert_false(keeps(&r, "sglang:num_running_reqs\n"));
    assert_int_equal(verdict(&r, "sglang:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"),
                     SF_OTLP_METRIC_KEEP);
    pfx_unload(&r);
    load(&r, "  filter:\n    metrics:\n      metric: ['IsMatch(name, \"^(a|aa)+$\")']\n",
         "filter");
    assert_int_equal(verdict(&r, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"),
                     SF_OTLP_METRIC_FAILED);
    assert_true(keeps(&r, "b"));
    pfx_unload(&r);
}

static void test_include_exclude(void **state)
{
    run r;

    (void)state;
    load(&r, "  filter:\n    metrics:\n"
             "      include:\n        match_type: strict\n"
             "        metric_names: [sglang:a, sglang:b]\n", "filter");
    assert_true(keeps(&r, "sglang:a"));
    assert_true(keeps(&r, "sglang:b"));
    assert_false(keeps(&r, "sglang:a2"));
    assert_false(keeps(&r, "sglang:"));
    pfx_unload(&r);

    load(&r, "  filter:\n    metrics:\n"
             "      include:\n        match_type: regexp\n"
             "        metric_names: ['^sglang:[a-z_]+$']\n"
             "      exclude:\n        match_type: regexp\n"
             "        metric_names: [debug, '_test$']\n", "filter");
    assert_true(keeps(&r, "sglang:num_running_reqs"));
    assert_false(keeps(&r, "sglang:debug_queue"));
    assert_false(keeps(&r, "sglang:x_test"));
    assert_false(keeps(&r, "vllm:x"));
    assert_false(keeps(&r, "sglang:x\n"));
    pfx_unload(&r);
}

/* Through the codec, as the core runs it: the dropped metric's points are
 * filtered_items; consume counts them dropped with reason "filtered". */
static void test_request_and_accounting(void **state)
{
    run r;
    sf_request b;
    sf_counters *cnt;
    pb in;
    sf_arena *a = sf_arena_create(4096, 0);

    (void)state;
    load(&r, "  filter:\n    metrics:\n      metric: ['IsMatch(name, \"^debug\\\\.\")']\n",
         "filter");
    pb_init(&in);
    pb_open(&in, 1);
    pb_open(&in, 2);
    for (int m = 0; m < 3; m++) {
        pb_open(&in, 2);
        pb_str(&in, 1, m == 1 ? "debug.prompt_text" : "sglang:x");
        pb_open(&in, 5);
        for (int p = 0; p < 2 + m; p++) {
            pb_open(&in, 1);
            pb_fix64(&in, 6, (uint64_t)p + 1);
            pb_close(&in);
        }
        pb_closen(&in, 2);
    }
    pb_closen(&in, 2);
    sf_request_init_signal(&b, a, SF_SIGNAL_METRICS, in.d, in.n, 32);
    assert_int_equal(sf_component_process(&r.comp, &b), SF_OK);
    assert_int_equal(b.spans, 2 + 4);
    assert_int_equal(b.stats.filtered_items, 3);
    assert_null(memmem(b.wire->data, b.wire->len, "debug", 5));
    cnt = sf_component_counters(&r.comp);
    assert_int_equal(atomic_load(&cnt->incoming_items), 9);
    assert_int_equal(atomic_load(&cnt->outgoing_items), 6);
    assert_int_equal(atomic_load(&cnt->dropped_spans[SF_REASON_FILTERED]), 3);
    assert_int_equal(atomic_load(&cnt->values[0]), 3);
    sf_request_release(&b);

    /* a batch that reaches consume without the edit: dropped whole */
    memset(&b, 0, sizeof(b));
    b.signal = SF_SIGNAL_METRICS;
    b.spans = 5;
    assert_int_equal(sf_component_consume(&r.comp, &b), SF_FILTER);
    assert_int_equal(atomic_load(&cnt->dropped_spans[SF_REASON_FILTER_FAILED]), 5);
    pfx_unload(&r);
    sf_arena_destroy(a);
}

/* What spanfence does not filter is refused with what to use instead. */
static void test_refusals(void **state)
{
    static const struct {
        const char *procs, *signal, *want;
    } cases[] = {
        { "  filter:\n    traces:\n      span: ['name == \"x\"']\n", "metrics",
          "spanfence filters metrics by name only" },
        { "  filter:\n    logs:\n      log_record: ['true']\n", "metrics",
          "spanfence filters metrics by name only" },
        { "  filter:\n    metrics:\n      datapoint: ['attributes[\"a\"] == \"b\"']\n", "metrics",
          "data point conditions are not supported" },
        { "  filter:\n    metrics:\n      metric: ['attributes[\"a\"] == \"b\"']\n", "metrics",
          "condition 'attributes[\"a\"] == \"b\"' is not supported: conditions on the metric "
          "name only" },
        { "  filter:\n    metrics:\n      metric: ['name == \"a\" or name == \"b\"']\n",
          "metrics", "is not supported" },
        { "  filter:\n    metrics:\n      metric: ['IsMatch(name, \"(\")']\n", "metrics",
          "pattern \"(\": missing closing parenthesis" },
        { "  filter:\n    metrics:\n      metric: ['name == \"a\\d\"']\n", "metrics",
          "unknown escape in a string" },
        { "  filter:\n    metrics:\n      metric: ['name == \"a']\n", "metrics",
          "a string is not closed" },
        { "  filter:\n    metrics:\n      include:\n        match_type: strict\n", "metrics",
          "'metric_names' is required" },
        { "  filter:\n    metrics:\n      exclude:\n        match_type: expr\n"
          "        metric_names: [a]\n", "metrics",
          "match_type 'expr' is not supported by spanfence (use one of 'strict', 'regexp')" },
        { "  filter:\n    metrics:\n      exclude:\n        metric_names: ['^go_']\n",
          "metrics", "'match_type' is required: strict or regexp" },
        { "  filter:\n    metrics:\n      metric: ['name == \"a\"']\n"
          "      exclude: {match_type: strict, metric_names: [b]}\n", "metrics",
          "'metric' conditions and include/exclude cannot be used together" },
        { "  filter:\n    metrics:\n      exclude:\n        match_type: regexp\n"
          "        metric_names: ['[a']\n", "metrics", "pattern \"[a\"" },
        { "  filter:\n    metrics:\n      include:\n        match_type: strict\n"
          "        metric_names: [a]\n"
          "        resource_attributes: [{key: k, value: v}]\n", "metrics",
          "matching on resource attributes is not supported" },
        { "  filter:\n    metrics:\n      metric: ['name == \"a\"']\n", "traces",
          "processor 'filter' cannot be used in traces pipeline 'traces': spanfence's 'filter' "
          "handles metrics only" },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        run r;

        if (pfx_load_in(&r, "filter.yaml", cases[i].procs, "filter", cases[i].signal) !=
            SF_CONFIG)
            fail_msg("case %zu: loaded", i);
        if (strstr(r.errors, cases[i].want) == NULL)
            fail_msg("case %zu: wanted '%s' in:\n%s", i, cases[i].want, r.errors);
    }
}

/* create fails cleanly at every allocation. */
static void test_create_allocation_failures(void **state)
{
    run r;

    (void)state;
    load(&r, "  filter:\n    metrics:\n      metric: ['IsMatch(name, \"^go_\")', "
             "'name == \"a\"']\n", "filter");
    r.comp.type->destroy(&r.comp);
    assert_true(sf_torture_create(&r.comp, r.comp.config, false) >= 3);
    sf_config_destroy(r.cfg);
    load(&r, "  filter:\n    metrics:\n      include:\n        match_type: regexp\n"
             "        metric_names: [x]\n      exclude:\n        match_type: strict\n"
             "        metric_names: [y]\n", "filter");
    r.comp.type->destroy(&r.comp);
    assert_true(sf_torture_create(&r.comp, r.comp.config, false) >= 3);
    sf_config_destroy(r.cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conditions),
        cmocka_unit_test(test_include_exclude),
        cmocka_unit_test(test_request_and_accounting),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_create_allocation_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

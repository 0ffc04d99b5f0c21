/* tests/processors/test_transform_signals.c: the transform's log_statements
 * and metric_statements: which contexts each list may use, the log body
 * and exemplars under a rule (dropped unless a statement keeps them),
 * metric name/description/unit and severity_text/event_name as governed
 * strings, declared mode per list, and the edit each signal gets (the
 * codec's; no edit for a signal without statements, so it passes as
 * upstream leaves it). Configs go through the real loader; the processor
 * is created as at start and its per-signal edits are read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/sf_core.h"
#include "processors/transform/transform.h"
#include "tests/sf_torture.h"
#include "processor_fixture.h"

typedef pfx_run run;

static sf_status load(run *r, const char *body)
{
    return pfx_load_transform(r, "signals.yaml", body);
}

static void unload(run *r)
{
    pfx_unload(r);
}

static const sf_otlp_edit *edit_of(run *r, sf_signal s)
{
    return r->comp.type->edit(&r->comp, s);
}

static bool keeps(const sf_otlp_edit *e, sf_otlp_ctx c, const char *key)
{
    return e->keys[c] == NULL || sf_otlp_keyset_keeps(e->keys[c], (const uint8_t *)key,
                                                      strlen(key));
}

static bool governs(const sf_otlp_edit *e, sf_otlp_field f)
{
    return (e->fields & SF_OTLP_FIELD_BIT(f)) != 0;
}

#define HAS(s, sub) do { if (strstr((s), (sub)) == NULL) \
    fail_msg("'%s' is not in:\n%s", (sub), (s)); } while (0)

/* ---- logs ---------------------------------------------------------------------- */

static const char logs_body[] = PFX_LOG_STATEMENTS;

/* log_statements make the logs edit: the log context's keyset, the body
 * governed with its condition compiled, severity_text through its rule;
 * traces keep their edit, metrics (no metric_statements) get none. */
static void test_log_statements_edit(void **state)
{
    run r;
    const sf_otlp_edit *e;

    (void)state;
    assert_int_equal(load(&r, logs_body), SF_OK);
    e = edit_of(&r, SF_SIGNAL_LOGS);
    assert_non_null(e);
    assert_true(keeps(e, SF_OTLP_LOG, "code"));
    assert_true(keeps(e, SF_OTLP_LOG, "level"));
    assert_false(keeps(e, SF_OTLP_LOG, "user.prompt"));
    assert_true(keeps(e, SF_OTLP_RESOURCE, "service.name"));
    assert_false(keeps(e, SF_OTLP_RESOURCE, "host.name"));
    assert_true(governs(e, SF_OTLP_FIELD_LOG_BODY));
    assert_non_null(e->body_rule);
    assert_int_equal(e->body_rule->n_alts, 1);
    assert_int_equal(e->body_rule->alts[0].types, SF_OTLP_VAL_STRING);
    assert_int_equal(e->body_rule->alts[0].shape, SF_OTLP_STR_REGEX);
    assert_non_null(e->body_rule->alts[0].regex);        /* compiled at create */
    assert_true(governs(e, SF_OTLP_FIELD_LOG_SEVERITY_TEXT));
    assert_false(governs(e, SF_OTLP_FIELD_LOG_EVENT_NAME));     /* not declared, no rule */
    assert_non_null(e->field_fn);
    /* the trace edit is its own: the log statements do not bound spans */
    assert_non_null(edit_of(&r, SF_SIGNAL_TRACES));
    assert_null(edit_of(&r, SF_SIGNAL_TRACES)->keys[SF_OTLP_RESOURCE]);
    assert_null(edit_of(&r, SF_SIGNAL_METRICS));
    unload(&r);
}

/* Written log_statements govern the body: without a statement keeping it,
 * every body is dropped (the fence's default); set(body, nil) says it. */
static void test_body_dropped_unless_kept(void **state)
{
    static const char *const bodies[] = {
        "    log_statements:\n      - keep_keys(log.attributes, [])\n",
        "    log_statements:\n      - set(log.body, nil)\n",
        "    log_statements: []\n",
    };
    run r;

    (void)state;
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        const sf_otlp_edit *e;

        assert_int_equal(load(&r, bodies[i]), SF_OK);
        e = edit_of(&r, SF_SIGNAL_LOGS);
        assert_non_null(e);
        assert_true(governs(e, SF_OTLP_FIELD_LOG_BODY));
        assert_null(e->body_rule);
        unload(&r);
    }
    /* a body condition of several shapes: one alternative each */
    assert_int_equal(load(&r, "    log_statements:\n"
                              "      - set(log.body, nil) where not (IsInt(body) or "
                              "body == \"ok\")\n"), SF_OK);
    assert_non_null(edit_of(&r, SF_SIGNAL_LOGS)->body_rule);
    assert_int_equal(edit_of(&r, SF_SIGNAL_LOGS)->body_rule->n_alts, 2);
    assert_int_equal(edit_of(&r, SF_SIGNAL_LOGS)->body_rule->alts[1].shape, SF_OTLP_STR_SET);
    unload(&r);
}

/* ---- metrics ----------------------------------------------------------------- */

static const char metrics_body[] = PFX_METRIC_STATEMENTS;

static void test_metric_statements_edit(void **state)
{
    run r;
    const sf_otlp_edit *e;

    (void)state;
    assert_int_equal(load(&r, metrics_body), SF_OK);
    e = edit_of(&r, SF_SIGNAL_METRICS);
    assert_non_null(e);
    assert_false(keeps(e, SF_OTLP_METRIC, "anything"));
    assert_true(keeps(e, SF_OTLP_DATAPOINT, "model_name"));
    assert_false(keeps(e, SF_OTLP_DATAPOINT, "prompt"));
    assert_true(governs(e, SF_OTLP_FIELD_METRIC_NAME));
    assert_true(governs(e, SF_OTLP_FIELD_METRIC_DESCRIPTION));
    assert_true(governs(e, SF_OTLP_FIELD_METRIC_UNIT));
    /* exemplars carry trace ids and attributes: dropped unless kept */
    assert_true(governs(e, SF_OTLP_FIELD_EXEMPLARS));
    assert_false(e->keep_exemplars);
    assert_null(edit_of(&r, SF_SIGNAL_LOGS));
    unload(&r);

    assert_int_equal(load(&r, "    metric_statements:\n"
                              "      - keep_exemplars(datapoint.exemplars)\n"), SF_OK);
    e = edit_of(&r, SF_SIGNAL_METRICS);
    assert_true(governs(e, SF_OTLP_FIELD_EXEMPLARS));
    assert_true(e->keep_exemplars);
    unload(&r);
}

/* The name rule of a metric goes through the processor's field function:
 * a name the pattern does not allow becomes the fixed value. */
static void test_metric_name_rule_runs(void **state)
{
    run r;
    const sf_otlp_edit *e;
    sf_otlp_text out = { 0 };
    void *st = NULL;
    static const char good[] = "sglang:num_running_reqs", bad[] = "prompt: tell me a secret";

    (void)state;
    assert_int_equal(load(&r, metrics_body), SF_OK);
    e = edit_of(&r, SF_SIGNAL_METRICS);
    assert_int_equal(e->field_fn(e->ctx, &st, SF_OTLP_FIELD_METRIC_NAME, (const uint8_t *)good,
                                 strlen(good), &out), SF_OK);
    assert_int_equal(out.len, strlen(good));
    assert_memory_equal(out.data, good, out.len);
    assert_int_equal(e->field_fn(e->ctx, &st, SF_OTLP_FIELD_METRIC_NAME, (const uint8_t *)bad,
                                 strlen(bad), &out), SF_OK);
    assert_int_equal(out.len, 5);
    assert_memory_equal(out.data, "other", 5);
    assert_int_equal(e->field_fn(e->ctx, &st, SF_OTLP_FIELD_METRIC_DESCRIPTION,
                                 (const uint8_t *)bad, strlen(bad), &out), SF_OK);
    assert_int_equal(out.len, 0);
    e->release(e->ctx, st);
    sf_free(out.data);
    unload(&r);
}

/* ---- what each list may say ------------------------------------------------------ */

static void test_contexts_per_list(void **state)
{
    static const struct { const char *body; const char *msg; } cases[] = {
        { "    log_statements:\n      - context: span\n        statements: []\n",
          "signals.yaml:12:18: processors.transform.log_statements[0].context: unsupported "
          "context 'span' (resource, scope or log)" },
        { "    trace_statements:\n      - context: log\n        statements: []\n",
          "unsupported context 'log' (resource, scope, span, spanevent or link)" },
        { "    log_statements:\n      - keep_keys(datapoint.attributes, [])\n",
          "path 'datapoint.attributes': the datapoint context is not one of log_statements' "
          "contexts (resource, scope or log)" },
        { "    metric_statements:\n      - keep_keys(metric.attributes, [])\n",
          "unsupported path 'metric.attributes': a metric's attributes are its metadata" },
        { "    log_statements:\n      - keep_keys(log.metadata, [])\n",
          "unsupported path 'log.metadata': only a metric has metadata" },
        { "    log_statements:\n      - set(log.body, \"\")\n",
          "the body can only be dropped: set(body, nil)" },
        { "    log_statements:\n      - set(log.body, nil) where IsString(body)\n",
          "a condition on the body must read 'where not" },
        { "    log_statements:\n      - set(log.body, nil) where not IsString(attributes[\"x\"])\n",
          "expected body at column 39" },
        { "    metric_statements:\n      - keep_exemplars(metric.name)\n",
          "unsupported path 'metric.name' for keep_exemplars: only exemplars (datapoint)" },
        { "    metric_statements:\n      - set(datapoint.exemplars, [\"x\"])\n",
          "exemplars can only be cleared: set(exemplars, [])" },
        { "    metric_statements:\n      - set(metric.type, \"\")\n",
          "unsupported path 'metric.type'" },
        { "    log_statements:\n      - set(log.name, \"\")\n",
          "'log.name' is not a field of the log context that set can change (log body, "
          "severity_text, event_name; scope name, version, schema_url; resource schema_url, "
          "entity_refs)" },
        { "    log_statements:\n      - set(log.body, nil)\n      - set(log.body, nil) where "
          "not IsString(body)\n",
          "processors.transform.log_statements: the log body has a second rule" },
        { "    metric_statements:\n      - set(datapoint.exemplars, [])\n"
          "      - keep_exemplars(datapoint.exemplars)\n",
          "the datapoint exemplars has a second rule" },
    };
    run r;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(load(&r, cases[i].body), SF_CONFIG);
        HAS(r.errors, cases[i].msg);
    }
}

/* ---- declared mode, per list ------------------------------------------------------ */

static void test_declared_logs_gaps(void **state)
{
    run r;

    (void)state;
    assert_int_equal(load(&r, "    declared_fields: true\n"
                              "    log_statements:\n"
                              "      - keep_keys(log.attributes, [\"code\"])\n"), SF_CONFIG);
    HAS(r.errors, "processors.transform.log_statements: declared_fields: log key 'code' is kept "
                  "without a value rule");
    HAS(r.errors, "declared_fields: log.body has no rule (set(body, nil) [where not <what a "
                  "body that leaves must be>] in the log context)");
    HAS(r.errors, "declared_fields: log.severity_text has no rule");
    HAS(r.errors, "declared_fields: log.event_name has no rule");
    HAS(r.errors, "declared_fields: the resource context has no keep_keys");
    HAS(r.errors, "log_statements: declared_fields: resource.entity_refs has no rule");
    /* only the list written is judged: no trace or metric gaps */
    assert_null(strstr(r.errors, "span.name"));
    assert_null(strstr(r.errors, "metric.name"));
    assert_int_equal(load(&r, "    declared_fields: true\n"
                              "    metric_statements:\n"
                              "      - keep_keys(datapoint.attributes, [])\n"), SF_CONFIG);
    HAS(r.errors, "declared_fields: the metric context has no keep_keys (write "
                  "keep_keys(metadata, []) to keep none)");
    HAS(r.errors, "declared_fields: metric.name has no rule");
    HAS(r.errors, "declared_fields: metric.unit has no rule");
    HAS(r.errors, "declared_fields: datapoint.exemplars has no rule (set(exemplars, []) or "
                  "keep_exemplars(exemplars) in the datapoint context)");
}

/* Declared mode closes a signal whose list is not written: its edit runs
 * and lets nothing without a rule through. */
static void test_declared_closes_unwritten_signals(void **state)
{
    static const char body[] =
        "    declared_fields: true\n"
        "    log_statements:\n"
        "      - keep_keys(resource.attributes, [])\n"
        "      - set(resource.schema_url, \"\")\n"
        "      - set(resource.entity_refs, [])\n"
        "      - keep_keys(scope.attributes, [])\n"
        "      - set(scope.name, \"\")\n"
        "      - set(scope.version, \"\")\n"
        "      - set(scope.schema_url, \"\")\n"
        "      - keep_keys(log.attributes, [])\n"
        "      - set(log.body, nil)\n"
        "      - set(log.severity_text, \"\")\n"
        "      - set(log.event_name, \"\")\n";
    run r;
    const sf_otlp_edit *e;

    (void)state;
    assert_int_equal(load(&r, body), SF_OK);
    e = edit_of(&r, SF_SIGNAL_METRICS);
    assert_non_null(e);
    assert_false(keeps(e, SF_OTLP_DATAPOINT, "model_name"));
    assert_false(keeps(e, SF_OTLP_METRIC, "x"));
    assert_false(keeps(e, SF_OTLP_RESOURCE, "service.name"));
    assert_true(governs(e, SF_OTLP_FIELD_METRIC_NAME));
    assert_true(governs(e, SF_OTLP_FIELD_EXEMPLARS));
    assert_false(e->keep_exemplars);
    {
        /* a governed string without a rule leaves empty */
        static const char name[] = "prompt: my secret";
        sf_otlp_text out = { 0 };
        void *st = NULL;

        for (int f = SF_OTLP_FIELD_SCOPE_NAME; f < SF_OTLP_FIELD_COUNT; f++) {
            if (f == SF_OTLP_FIELD_ENTITY_REFS || f == SF_OTLP_FIELD_LOG_BODY ||
                f == SF_OTLP_FIELD_EXEMPLARS)
                continue;               /* not strings */
            out.len = 99;
            assert_int_equal(e->field_fn(e->ctx, &st, (sf_otlp_field)f, (const uint8_t *)name,
                                         strlen(name), &out), SF_OK);
            assert_int_equal(out.len, 0);
        }
        if (e->release != NULL && st != NULL)
            e->release(e->ctx, st);
        sf_free(out.data);
    }
    e = edit_of(&r, SF_SIGNAL_LOGS);
    assert_true(governs(e, SF_OTLP_FIELD_LOG_BODY));
    assert_null(e->body_rule);
    assert_true(e->one_value_per_key);
    /* traces without trace_statements: names emptied, status message and
     * trace_state cleared */
    e = edit_of(&r, SF_SIGNAL_TRACES);
    assert_true(e->clear_status_message);
    assert_true(e->rename & SF_OTLP_CTX_BIT(SF_OTLP_SPAN));
    assert_true(e->rename & SF_OTLP_CTX_BIT(SF_OTLP_SPANEVENT));
    assert_true(e->clear_trace_state & SF_OTLP_CTX_BIT(SF_OTLP_LINK));
    assert_false(keeps(e, SF_OTLP_SPAN, "rid"));
    {
        sf_otlp_text out = { 0 };
        void *st = NULL;

        out.len = 99;
        assert_int_equal(e->rename_fn(e->ctx, &st, SF_OTLP_SPAN, (const uint8_t *)"Req 1234", 8,
                                      &out), SF_OK);
        assert_int_equal(out.len, 0);
        if (e->release != NULL && st != NULL)
            e->release(e->ctx, st);
        sf_free(out.data);
    }
    unload(&r);
}

/* Creating the processor with programs for every signal (a body rule with
 * a regex, metric field rules) fails cleanly at every allocation. */
static void test_create_allocation_failures(void **state)
{
    char body[4096];
    run r;

    (void)state;
    snprintf(body, sizeof(body), "%s%s", logs_body, metrics_body);
    assert_int_equal(load(&r, body), SF_OK);
    r.comp.type->destroy(&r.comp);
    assert_true(sf_torture_create(&r.comp, r.comp.config, false) > 10);
    sf_config_destroy(r.cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_statements_edit),
        cmocka_unit_test(test_body_dropped_unless_kept),
        cmocka_unit_test(test_metric_statements_edit),
        cmocka_unit_test(test_metric_name_rule_runs),
        cmocka_unit_test(test_contexts_per_list),
        cmocka_unit_test(test_declared_logs_gaps),
        cmocka_unit_test(test_declared_closes_unwritten_signals),
        cmocka_unit_test(test_create_allocation_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

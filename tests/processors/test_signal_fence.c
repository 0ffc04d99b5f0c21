/* tests/processors/test_signal_fence.c: the transform, attributes and
 * resource processors on real OTLP logs and metrics: requests built as
 * protobuf bytes, run through each processor's compiled edit for the signal
 * by the codec (sf_otlp_rewrite_signal, as the core runs it), and read back
 * with protobuf-c from the official protos. What must hold: only kept
 * attributes leave, a log body only in its declared shape, severity_text
 * and metric name/description/unit through their rules, exemplars dropped
 * unless kept, the operator's inserts and deletes applied. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/sf_core.h"
#include "sf_otlp_wire.h"
#include "tests/pipeline/sf_pb_build.h"
#include "processor_fixture.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest logs_req;
typedef Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest metrics_req;
typedef Opentelemetry__Proto__Common__V1__KeyValue kv;

typedef pfx_run run;

static void load(run *r, const char *procs, const char *id)
{
    if (pfx_load(r, "fence.yaml", procs, id) != SF_OK)
        fail_msg("%s", r->errors);
}

static void unload(run *r)
{
    pfx_unload(r);
}

/* The request through the processor's edit for `s`: the output bytes. */
static sf_buf *apply(run *r, sf_signal s, const pb *in)
{
    sf_buf *out = NULL;

    assert_int_equal(sf_otlp_rewrite_signal(s, in->d, in->n, 32, r->comp.type->edit(&r->comp, s),
                                            &out, &r->stats), SF_OK);
    return out;
}

/* The value of attribute `key` (a string) among attrs, "(absent)", or
 * "(not a string)". */
static const char *attr(kv **attrs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(attrs[i]->key, key) != 0)
            continue;
        if (attrs[i]->value == NULL || attrs[i]->value->value_case !=
            OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE)
            return "(not a string)";
        return attrs[i]->value->string_value;
    }
    return "(absent)";
}

/* ---- logs ---------------------------------------------------------------------- */

/* One resource {service.name, host.name} with one scope of the records
 * (body, severity_text) each with attributes code, level, user.prompt. */
static void logs_request(pb *b, const char *const *bodies, const char *const *sev, size_t n)
{
    pb_init(b);
    pb_open(b, 1);                          /* resource_logs */
    pb_open(b, 1);                          /* resource */
    kv_str(b, 1, "service.name", "sglang");
    kv_str(b, 1, "host.name", "vm-host-17");
    pb_close(b);
    pb_open(b, 2);                          /* scope_logs */
    pb_open(b, 1);                          /* scope */
    pb_str(b, 1, "app");
    pb_close(b);
    for (size_t i = 0; i < n; i++) {
        pb_open(b, 2);                      /* log_records */
        pb_fix64(b, 1, 1700000000000000000ull);
        pb_uint(b, 2, 9);
        pb_str(b, 3, sev[i]);
        pb_open(b, 5);                      /* body */
        pb_str(b, 1, bodies[i]);
        pb_close(b);
        kv_str(b, 6, "code", "E42");
        kv_str(b, 6, "level", i == 0 ? "info" : "chatty");
        kv_str(b, 6, "user.prompt", "tell me the secret");
        pb_str(b, 12, "app.request");       /* event_name */
        pb_close(b);
    }
    pb_closen(b, 2);
}

static const char transform_logs[] = "  transform:\n" PFX_LOG_STATEMENTS;

static void test_logs_through_transform(void **state)
{
    static const char *const bodies[] = { "request abcd1234 done",
                                          "request abcd1234 done: prompt was 'my secret'" };
    static const char *const sev[] = { "INFO", "user said: my secret" };
    run r;
    pb in;
    sf_buf *out;
    logs_req *req;
    Opentelemetry__Proto__Logs__V1__ResourceLogs *rl;
    Opentelemetry__Proto__Logs__V1__LogRecord *a, *b;

    (void)state;
    load(&r, transform_logs, "transform");
    logs_request(&in, bodies, sev, 2);
    out = apply(&r, SF_SIGNAL_LOGS, &in);
    assert_int_equal(r.stats.spans, 2);                 /* log records */
    assert_int_equal(r.stats.dropped_bodies, 1);
    req = opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
        NULL, out->len, out->data);
    assert_non_null(req);
    rl = req->resource_logs[0];
    assert_string_equal(attr(rl->resource->attributes, rl->resource->n_attributes,
                             "service.name"), "sglang");
    assert_string_equal(attr(rl->resource->attributes, rl->resource->n_attributes,
                             "host.name"), "(absent)");
    assert_int_equal(rl->scope_logs[0]->n_log_records, 2);
    a = rl->scope_logs[0]->log_records[0];
    b = rl->scope_logs[0]->log_records[1];
    /* the body in its declared shape leaves; another goes whole */
    assert_non_null(a->body);
    assert_string_equal(a->body->string_value, "request abcd1234 done");
    assert_null(b->body);
    assert_string_equal(a->severity_text, "INFO");
    assert_string_equal(b->severity_text, "");
    assert_int_equal(b->severity_number, 9);            /* not a string: kept */
    assert_string_equal(attr(a->attributes, a->n_attributes, "code"), "E42");
    assert_string_equal(attr(a->attributes, a->n_attributes, "level"), "info");
    assert_string_equal(attr(b->attributes, b->n_attributes, "level"), "(absent)");
    assert_string_equal(attr(a->attributes, a->n_attributes, "user.prompt"), "(absent)");
    /* event_name has no rule outside declared mode: as it came */
    assert_string_equal(a->event_name, "app.request");
    opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(req,
                                                                                        NULL);
    sf_buf_unref(out);
    unload(&r);
}

/* The attributes processor on logs: the VM id upserted (replacing what a
 * client sent), a key deleted; the resource processor on the resource. */
static void test_logs_through_attributes_and_resource(void **state)
{
    static const char *const bodies[] = { "b" };
    static const char *const sev[] = { "INFO" };
    run r;
    pb in;
    sf_buf *out;
    logs_req *req;
    Opentelemetry__Proto__Logs__V1__LogRecord *a;
    Opentelemetry__Proto__Resource__V1__Resource *res;

    (void)state;
    setenv("SF_TEST_VM_ID", "vm-7f3a", 1);
    load(&r, "  attributes/vm:\n    actions:\n"
             "      - {key: vm.id, value: \"${env:SF_TEST_VM_ID}\", action: upsert}\n"
             "      - {key: level, value: \"forged\", action: upsert}\n"
             "      - {key: user.prompt, action: delete}\n", "attributes/vm");
    logs_request(&in, bodies, sev, 1);
    out = apply(&r, SF_SIGNAL_LOGS, &in);
    req = opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
        NULL, out->len, out->data);
    assert_non_null(req);
    a = req->resource_logs[0]->scope_logs[0]->log_records[0];
    assert_string_equal(attr(a->attributes, a->n_attributes, "vm.id"), "vm-7f3a");
    assert_string_equal(attr(a->attributes, a->n_attributes, "level"), "forged");
    assert_string_equal(attr(a->attributes, a->n_attributes, "user.prompt"), "(absent)");
    assert_string_equal(attr(a->attributes, a->n_attributes, "code"), "E42");
    assert_non_null(a->body);                           /* the attributes processor keeps it */
    res = req->resource_logs[0]->resource;
    assert_string_equal(attr(res->attributes, res->n_attributes, "vm.id"), "(absent)");
    opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(req,
                                                                                        NULL);
    sf_buf_unref(out);
    unload(&r);

    load(&r, "  resource:\n    attributes:\n"
             "      - {key: vm.id, value: \"vm-7f3a\", action: insert}\n"
             "      - {key: host.name, action: delete}\n", "resource");
    logs_request(&in, bodies, sev, 1);
    out = apply(&r, SF_SIGNAL_LOGS, &in);
    req = opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
        NULL, out->len, out->data);
    res = req->resource_logs[0]->resource;
    assert_string_equal(attr(res->attributes, res->n_attributes, "vm.id"), "vm-7f3a");
    assert_string_equal(attr(res->attributes, res->n_attributes, "host.name"), "(absent)");
    assert_string_equal(attr(res->attributes, res->n_attributes, "service.name"), "sglang");
    a = req->resource_logs[0]->scope_logs[0]->log_records[0];
    assert_string_equal(attr(a->attributes, a->n_attributes, "user.prompt"),
                        "tell me the secret");      /* resource actions only */
    opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(req,
                                                                                        NULL);
    sf_buf_unref(out);
    unload(&r);
}

/* ---- metrics ---------------------------------------------------------------- */

/* Two gauges (a name SGLang uses, and one carrying text) with metadata,
 * each with one point {model_name, prompt} and an exemplar. */
static void metrics_request(pb *b)
{
    static const char *const names[] = { "sglang:num_running_reqs", "prompt: my secret" };

    pb_init(b);
    pb_open(b, 1);                          /* resource_metrics */
    pb_open(b, 1);
    kv_str(b, 1, "service.name", "sglang");
    pb_close(b);
    pb_open(b, 2);                          /* scope_metrics */
    for (size_t i = 0; i < 2; i++) {
        pb_open(b, 2);                      /* metrics */
        pb_str(b, 1, names[i]);
        pb_str(b, 2, "Number of running requests, e.g. 'my secret'");
        pb_str(b, 3, i == 0 ? "1" : "secret-unit");
        pb_open(b, 5);                      /* gauge */
        pb_open(b, 1);                      /* data_points */
        pb_fix64(b, 3, 1700000000000000000ull);
        pb_fix64(b, 4, 0x4014000000000000ull);  /* as_double 5.0 */
        pb_open(b, 5);                      /* exemplars */
        kv_str(b, 7, "user.prompt", "my secret");
        pb_fix64(b, 2, 1700000000000000000ull);
        pb_bytes(b, 4, SID, 8);
        pb_bytes(b, 5, TID, 16);
        pb_close(b);
        kv_str(b, 7, "model_name", "llama");
        kv_str(b, 7, "prompt", "my secret");
        pb_closen(b, 2);
        kv_str(b, 12, "source", "my secret");   /* metadata */
        pb_close(b);
    }
    pb_closen(b, 2);
}

static const char transform_metrics[] = "  transform:\n" PFX_METRIC_STATEMENTS;

static void test_metrics_through_transform(void **state)
{
    run r;
    pb in;
    sf_buf *out;
    metrics_req *req;
    Opentelemetry__Proto__Metrics__V1__ScopeMetrics *sm;

    (void)state;
    load(&r, transform_metrics, "transform");
    metrics_request(&in);
    out = apply(&r, SF_SIGNAL_METRICS, &in);
    assert_int_equal(r.stats.spans, 2);                 /* data points */
    assert_int_equal(r.stats.dropped_exemplars, 2);
    req = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
        NULL, out->len, out->data);
    assert_non_null(req);
    sm = req->resource_metrics[0]->scope_metrics[0];
    assert_int_equal(sm->n_metrics, 2);
    assert_string_equal(sm->metrics[0]->name, "sglang:num_running_reqs");
    assert_string_equal(sm->metrics[1]->name, "other");
    for (size_t i = 0; i < 2; i++) {
        Opentelemetry__Proto__Metrics__V1__Metric *m = sm->metrics[i];
        Opentelemetry__Proto__Metrics__V1__NumberDataPoint *dp = m->gauge->data_points[0];

        assert_string_equal(m->description, "");
        assert_string_equal(m->unit, i == 0 ? "1" : "");
        assert_int_equal(m->n_metadata, 0);
        assert_int_equal(dp->n_exemplars, 0);
        assert_string_equal(attr(dp->attributes, dp->n_attributes, "model_name"), "llama");
        assert_string_equal(attr(dp->attributes, dp->n_attributes, "prompt"), "(absent)");
        assert_true(dp->as_double == 5.0);
    }
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(
        req, NULL);
    sf_buf_unref(out);
    unload(&r);
}

/* keep_exemplars: exemplars leave with their ids, their filtered
 * attributes judged by the datapoint allowlist. */
static void test_metrics_exemplars_kept(void **state)
{
    run r;
    pb in;
    sf_buf *out;
    metrics_req *req;
    Opentelemetry__Proto__Metrics__V1__Exemplar *ex;

    (void)state;
    load(&r, "  transform:\n    metric_statements:\n"
             "      - keep_keys(datapoint.attributes, [\"model_name\"])\n"
             "      - keep_exemplars(datapoint.exemplars)\n", "transform");
    metrics_request(&in);
    out = apply(&r, SF_SIGNAL_METRICS, &in);
    assert_int_equal(r.stats.dropped_exemplars, 0);
    req = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
        NULL, out->len, out->data);
    assert_non_null(req);
    ex = req->resource_metrics[0]->scope_metrics[0]->metrics[0]->gauge->data_points[0]
             ->exemplars[0];
    assert_int_equal(ex->trace_id.len, 16);
    assert_memory_equal(ex->trace_id.data, TID, 16);
    assert_string_equal(attr(ex->filtered_attributes, ex->n_filtered_attributes, "user.prompt"),
                        "(absent)");
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(
        req, NULL);
    sf_buf_unref(out);
    unload(&r);
}

/* The attributes processor on metrics: data point attributes only. */
static void test_metrics_through_attributes(void **state)
{
    run r;
    pb in;
    sf_buf *out;
    metrics_req *req;
    Opentelemetry__Proto__Metrics__V1__Metric *m;

    (void)state;
    load(&r, "  attributes:\n    actions:\n"
             "      - {key: vm.id, value: \"vm-7f3a\", action: insert}\n"
             "      - {key: prompt, action: delete}\n", "attributes");
    metrics_request(&in);
    out = apply(&r, SF_SIGNAL_METRICS, &in);
    assert_int_equal(r.stats.inserted, 2);
    req = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
        NULL, out->len, out->data);
    m = req->resource_metrics[0]->scope_metrics[0]->metrics[0];
    assert_string_equal(attr(m->gauge->data_points[0]->attributes,
                             m->gauge->data_points[0]->n_attributes, "vm.id"), "vm-7f3a");
    assert_string_equal(attr(m->gauge->data_points[0]->attributes,
                             m->gauge->data_points[0]->n_attributes, "prompt"), "(absent)");
    assert_string_equal(attr(m->metadata, m->n_metadata, "vm.id"), "(absent)");
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(
        req, NULL);
    sf_buf_unref(out);
    unload(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logs_through_transform),
        cmocka_unit_test(test_logs_through_attributes_and_resource),
        cmocka_unit_test(test_metrics_through_transform),
        cmocka_unit_test(test_metrics_exemplars_kept),
        cmocka_unit_test(test_metrics_through_attributes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

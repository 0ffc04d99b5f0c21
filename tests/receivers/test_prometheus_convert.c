/* tests/receivers/test_prometheus_convert.c: a parsed scrape into OTLP
 * (receivers/prometheus/prom_convert.c), read back with protobuf-c and
 * through the codec the pipelines run: types, bounds, de-cumulated
 * buckets, summaries, start times (_created, first seen, reset), resource
 * and point attributes, honor_labels, the synthetic scrape series. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "receivers/prometheus/prom_convert.h"
#include "sf_alloc.h"
#include "sf_request.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest pb_request;
typedef Opentelemetry__Proto__Metrics__V1__Metric pb_metric;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;

static const sf_prom_limits limits = { .max_line = 65536, .sample_limit = 1000,
                                       .label_limit = 64, .label_name_length = 256,
                                       .label_value_length = 4096 };
static const sf_prom_label static_labels[] = { { .name = "replica", .value = "r1",
                                                 .value_len = 2 } };
static const sf_prom_target target = { .job = "sglang", .instance = "127.0.0.1:30000",
                                        .host = "127.0.0.1", .port = "30000",
                                        .scheme = "http", .labels = static_labels,
                                        .n_labels = 1, .honor_timestamps = true };

#define T0 1700000000000000000ULL
#define SEC 1000000000ULL

typedef struct fx {
    sf_arena *arena;
    sf_prom_starts *starts;
    pb_request *req;
    sf_prom_convert_stats st;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));

    f->arena = sf_arena_create(65536, 0);
    f->starts = sf_prom_starts_create(1000);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;

    if (f->req)
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(f->req, NULL);
    sf_prom_starts_destroy(f->starts);
    sf_arena_destroy(f->arena);
    free(f);
    assert_int_equal(sf_alloc_in_use(), 0);
    return 0;
}

/* Parse `text`, convert it as a scrape at `t_ns` of `t`, unpack the result
 * into f->req, and check the codec takes it as any OTLP input. */
static void scrape_as(fx *f, const sf_prom_target *t, sf_prom_format fmt, const char *text,
                      uint64_t t_ns, bool up)
{
    sf_prom_result r;
    sf_prom_scrape_info info = { .up = up, .time_ns = t_ns, .duration_s = 0.25 };
    uint8_t *bytes;
    size_t len;
    sf_request b;
    sf_arena *scratch = sf_arena_create(16384, 0);

    if (f->req)
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(f->req, NULL);
    f->req = NULL;
    sf_arena_reset(f->arena);
    assert_int_equal(sf_prom_parse((const uint8_t *)text, strlen(text), fmt, &limits, f->arena,
                                   &r), SF_PROM_ERR_OK);
    assert_int_equal(sf_prom_convert(&r, t, &info, f->starts, f->arena, &bytes, &len, &f->st),
                     SF_OK);
    f->req = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(NULL, len, bytes);
    assert_non_null(f->req);
    sf_request_init_signal(&b, scratch, SF_SIGNAL_METRICS, bytes, len, SF_OTLP_DEFAULT_MAX_DEPTH);
    assert_int_equal(sf_request_rewrite(&b, NULL, NULL), SF_OK);
    assert_int_equal(b.spans, f->st.points);
    sf_request_release(&b);
    sf_arena_destroy(scratch);
}

static void scrape(fx *f, const char *text, uint64_t t_ns)
{
    scrape_as(f, &target, SF_PROM_TEXT, text, t_ns, true);
}

static const pb_metric *metric(const fx *f, const char *name)
{
    const Opentelemetry__Proto__Metrics__V1__ScopeMetrics *sm =
        f->req->resource_metrics[0]->scope_metrics[0];

    for (size_t i = 0; i < sm->n_metrics; i++)
        if (strcmp(sm->metrics[i]->name, name) == 0)
            return sm->metrics[i];
    fail_msg("no metric '%s'", name);
    return NULL;
}

static const char *attr(pb_kv **kv, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(kv[i]->key, key) == 0)
            return kv[i]->value->string_value;
    return NULL;
}

static void test_types(void **state)
{
    fx *f = *state;
    const pb_metric *m;

    scrape(f, "# HELP sglang:prompt_tokens_total Prompt tokens.\n"
              "# TYPE sglang:prompt_tokens_total counter\n"
              "sglang:prompt_tokens_total{model_name=\"m\"} 42\n"
              "# TYPE sglang:num_running_reqs gauge\n"
              "sglang:num_running_reqs{model_name=\"m\"} 3\n"
              "untyped_one 7\n"
              "# TYPE sglang:time_to_first_token_seconds histogram\n"
              "sglang:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.1\"} 1\n"
              "sglang:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.4\"} 3\n"
              "sglang:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.2\"} 2\n"
              "sglang:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 4\n"
              "sglang:time_to_first_token_seconds_sum{model_name=\"m\"} 5.5\n"
              "sglang:time_to_first_token_seconds_count{model_name=\"m\"} 4\n"
              "# TYPE lat summary\n"
              "lat{quantile=\"0.5\"} 0.2\n"
              "lat{quantile=\"0.99\"} NaN\n"
              "lat_sum 9\n"
              "lat_count 30\n", T0);
    m = metric(f, "sglang:prompt_tokens_total");
    assert_int_equal(m->data_case, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM);
    assert_true(m->sum->is_monotonic);
    assert_int_equal(m->sum->aggregation_temporality, 2);
    assert_string_equal(m->description, "Prompt tokens.");
    assert_true(m->sum->data_points[0]->as_double == 42);
    assert_string_equal(attr(m->sum->data_points[0]->attributes,
                             m->sum->data_points[0]->n_attributes, "model_name"), "m");
    assert_string_equal(attr(m->sum->data_points[0]->attributes,
                             m->sum->data_points[0]->n_attributes, "replica"), "r1");
    /* first seen: starts now */
    assert_true(m->sum->data_points[0]->start_time_unix_nano == T0);
    m = metric(f, "sglang:num_running_reqs");
    assert_int_equal(m->data_case, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE);
    m = metric(f, "untyped_one");
    assert_int_equal(m->data_case, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE);
    m = metric(f, "sglang:time_to_first_token_seconds");
    assert_int_equal(m->data_case, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM);
    {
        const Opentelemetry__Proto__Metrics__V1__HistogramDataPoint *p = m->histogram->data_points[0];

        assert_int_equal(m->histogram->n_data_points, 1);
        assert_int_equal(p->n_explicit_bounds, 3);
        assert_true(p->explicit_bounds[0] == 0.1 && p->explicit_bounds[1] == 0.2 &&
                    p->explicit_bounds[2] == 0.4);
        assert_int_equal(p->n_bucket_counts, 4);
        assert_int_equal(p->bucket_counts[0], 1);
        assert_int_equal(p->bucket_counts[1], 1);
        assert_int_equal(p->bucket_counts[2], 1);
        assert_int_equal(p->bucket_counts[3], 1);
        assert_int_equal(p->count, 4);
        assert_true(p->sum == 5.5);
        assert_null(attr(p->attributes, p->n_attributes, "le"));
    }
    m = metric(f, "lat");
    assert_int_equal(m->data_case, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY);
    assert_int_equal(m->summary->data_points[0]->count, 30);
    assert_true(m->summary->data_points[0]->sum == 9);
    assert_int_equal(m->summary->data_points[0]->n_quantile_values, 2);
    assert_true(m->summary->data_points[0]->quantile_values[0]->quantile == 0.5);
    assert_true(isnan(m->summary->data_points[0]->quantile_values[1]->value));
    /* the synthetic series */
    assert_true(metric(f, "up")->gauge->data_points[0]->as_double == 1);
    assert_true(metric(f, "scrape_samples_scraped")->gauge->data_points[0]->as_double == 13);
    assert_true(metric(f, "scrape_samples_post_metric_relabeling")->gauge->data_points[0]->as_double == 13);
    assert_true(metric(f, "scrape_series_added")->gauge->data_points[0]->as_double == 13);
    assert_true(metric(f, "scrape_duration_seconds")->gauge->data_points[0]->as_double == 0.25);
    /* 1 sum + 1 gauge + 1 gauge + 1 histogram + 1 summary + 5 synthetic */
    assert_int_equal(f->st.points, 10);
    {
        const Opentelemetry__Proto__Resource__V1__Resource *res =
            f->req->resource_metrics[0]->resource;

        assert_string_equal(attr(res->attributes, res->n_attributes, "service.name"), "sglang");
        assert_string_equal(attr(res->attributes, res->n_attributes, "service.instance.id"),
                            "127.0.0.1:30000");
        assert_string_equal(attr(res->attributes, res->n_attributes, "server.address"),
                            "127.0.0.1");
        assert_string_equal(attr(res->attributes, res->n_attributes, "server.port"), "30000");
        assert_string_equal(attr(res->attributes, res->n_attributes, "url.scheme"), "http");
    }
    assert_string_equal(f->req->resource_metrics[0]->scope_metrics[0]->scope->name,
                        SF_PROM_SCOPE_NAME);
}

static void test_start_times(void **state)
{
    fx *f = *state;
    const Opentelemetry__Proto__Metrics__V1__NumberDataPoint *p;

    scrape(f, "# TYPE c_total counter\nc_total 10\n", T0);
    scrape(f, "# TYPE c_total counter\nc_total 12\n", T0 + 15 * SEC);
    p = metric(f, "c_total")->sum->data_points[0];
    assert_true(p->start_time_unix_nano == T0);       /* kept from the first sight */
    assert_true(p->time_unix_nano == T0 + 15 * SEC);
    assert_true(metric(f, "scrape_series_added")->gauge->data_points[0]->as_double == 0);
    scrape(f, "# TYPE c_total counter\nc_total 3\n", T0 + 30 * SEC);   /* a reset */
    p = metric(f, "c_total")->sum->data_points[0];
    assert_true(p->start_time_unix_nano == T0 + 30 * SEC);
    scrape(f, "# TYPE c_total counter\nc_total 4\n", T0 + 45 * SEC);
    p = metric(f, "c_total")->sum->data_points[0];
    assert_true(p->start_time_unix_nano == T0 + 30 * SEC);
    /* a series gone for a scrape is forgotten, and starts again */
    scrape(f, "other 1\n", T0 + 60 * SEC);
    assert_int_equal(sf_prom_starts_count(f->starts), 1);
    scrape(f, "# TYPE c_total counter\nc_total 5\n", T0 + 75 * SEC);
    assert_true(metric(f, "c_total")->sum->data_points[0]->start_time_unix_nano == T0 + 75 * SEC);
    /* _created wins, in OpenMetrics and text alike */
    scrape_as(f, &target, SF_PROM_OPENMETRICS,
              "# TYPE d counter\nd_total 1\nd_created 1600000000.5\n# EOF\n", T0, true);
    p = metric(f, "d_total")->sum->data_points[0];
    assert_true(p->start_time_unix_nano == 1600000000500000000ULL);
    /* histograms reset on their count */
    scrape(f, "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 5\nh_count 5\nh_sum 1\n", T0);
    scrape(f, "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\nh_sum 1\n", T0 + SEC);
    assert_true(metric(f, "h")->histogram->data_points[0]->start_time_unix_nano == T0 + SEC);
}

static void test_labels_and_timestamps(void **state)
{
    fx *f = *state;
    sf_prom_target honor = target;
    const Opentelemetry__Proto__Metrics__V1__NumberDataPoint *p;

    scrape(f, "g{job=\"x\",replica=\"mine\",instance=\"i\"} 1 1600000000000\n", T0);
    p = metric(f, "g")->gauge->data_points[0];
    assert_string_equal(attr(p->attributes, p->n_attributes, "exported_job"), "x");
    assert_string_equal(attr(p->attributes, p->n_attributes, "exported_instance"), "i");
    assert_string_equal(attr(p->attributes, p->n_attributes, "exported_replica"), "mine");
    assert_string_equal(attr(p->attributes, p->n_attributes, "replica"), "r1");
    assert_true(p->time_unix_nano == 1600000000000000000ULL);
    honor.honor_labels = true;
    honor.honor_timestamps = false;
    scrape_as(f, &honor, SF_PROM_TEXT, "g{replica=\"mine\"} 1 1600000000000\n", T0, true);
    p = metric(f, "g")->gauge->data_points[0];
    assert_string_equal(attr(p->attributes, p->n_attributes, "replica"), "mine");
    assert_int_equal(p->n_attributes, 1);
    assert_true(p->time_unix_nano == T0);
}

static void test_openmetrics_types(void **state)
{
    fx *f = *state;
    const pb_metric *m;

    scrape_as(f, &target, SF_PROM_OPENMETRICS,
              "# TYPE i info\ni_info{version=\"1.2\"} 1\n"
              "# TYPE st stateset\nst{st=\"a\"} 1\nst{st=\"b\"} 0\n"
              "# TYPE gh gaugehistogram\ngh_bucket{le=\"+Inf\"} 3\ngh_gcount 3\ngh_gsum 2\n"
              "# TYPE u unknown\nu 1\n"
              "# EOF\n", T0, true);
    m = metric(f, "i_info");
    assert_int_equal(m->data_case, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM);
    assert_false(m->sum->is_monotonic);
    m = metric(f, "st");
    assert_false(m->sum->is_monotonic);
    assert_int_equal(m->sum->n_data_points, 2);
    assert_int_equal(metric(f, "u")->data_case,
                     OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE);
    /* gauge histograms are not converted, as upstream: counted */
    assert_int_equal(f->st.dropped, 3);
}

static void test_bad_histograms(void **state)
{
    fx *f = *state;

    /* decreasing buckets, a bad le, no count: each point dropped and counted */
    scrape(f, "# TYPE a histogram\na_bucket{le=\"1\"} 5\na_bucket{le=\"2\"} 3\n"
              "a_bucket{le=\"+Inf\"} 5\na_count 5\n"
              "# TYPE b histogram\nb_bucket{le=\"x\"} 1\nb_count 1\n"
              "# TYPE c histogram\nc_sum 3\n"
              "# TYPE d histogram\nd_bucket{le=\"1\"} 1\nd_count 1\nd_sum 1\n", T0);
    assert_int_equal(f->st.dropped, 3);
    assert_int_equal(metric(f, "d")->histogram->n_data_points, 1);
    /* no +Inf bucket: the count makes the last one */
    assert_int_equal(metric(f, "d")->histogram->data_points[0]->n_bucket_counts, 2);
    assert_int_equal(metric(f, "a")->histogram->n_data_points, 0);
}

static void test_down(void **state)
{
    fx *f = *state;
    sf_prom_scrape_info info = { .up = false, .time_ns = T0, .duration_s = 10 };
    uint8_t *bytes;
    size_t len;

    assert_int_equal(sf_prom_convert(NULL, &target, &info, f->starts, f->arena, &bytes, &len,
                                     &f->st), SF_OK);
    f->req = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(NULL, len, bytes);
    assert_non_null(f->req);
    assert_true(metric(f, "up")->gauge->data_points[0]->as_double == 0);
    assert_true(metric(f, "scrape_samples_scraped")->gauge->data_points[0]->as_double == 0);
    assert_int_equal(f->st.points, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_times, setup, teardown),
        cmocka_unit_test_setup_teardown(test_labels_and_timestamps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_openmetrics_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_histograms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_down, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/extensions/test_trace_control_latency.c: the latency guard: its
 * config (engine_metrics, max_latency_increase and their errors), the
 * bucket arithmetic (deltas, restarts, percentiles bounded by buckets), the
 * limit (ratio and time forms, min_samples), a target's series through
 * scrapes and a window, the decoding of a scrape, and the metrics tap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "extensions/trace_control/trace_control_int.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"
#include "sf_service.h"
#include "tests/sf_test.h"
#include "tests/sf_torture.h"

#define HEAD                                                                               \
    "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:4318\n" \
    "  prometheus/sglang:\n    config:\n      scrape_configs:\n"                           \
    "        - job_name: sglang\n          static_configs:\n"                              \
    "            - targets: ['127.0.0.1:30000']\n"                                         \
    "exporters:\n  debug:\n"                                                               \
    "extensions:\n  trace_control:\n    socket: /tmp/x.sock\n    audit_log: /tmp/x.jsonl\n" \
    "    levels: [0, 3]\n"
#define R1 "    targets:\n      r1:\n        endpoint: http://127.0.0.1:1/set_trace_level\n"
#define EM "        engine_metrics: {receiver: prometheus/sglang, job: sglang}\n"
#define TAIL                                                                               \
    "service:\n  extensions: [trace_control]\n  pipelines:\n"                              \
    "    traces:\n      receivers: [otlp]\n      exporters: [debug]\n"                     \
    "    metrics:\n      receivers: [prometheus/sglang]\n      exporters: [debug]\n"

static sf_config *load(const char *yaml, const char **messages)
{
    sf_diag *d = sf_diag_create("x.yaml");
    sf_config *cfg = NULL;

    sf_config_load_string("x.yaml", yaml, strlen(yaml), d, &cfg);
    *messages = sf_diag_count(d) > 0 ? sf_test_config_messages("x.yaml", yaml) : "";
    sf_diag_destroy(d);
    return cfg;
}

#define HAS(msg, want)                                                          \
    do {                                                                        \
        if (strstr((msg), (want)) == NULL)                                      \
            fail_msg("want '%s' in:\n%s", (want), (msg));                       \
    } while (0)

static void test_config(void **state)
{
    const char *msg;
    sf_config *cfg;
    const sf_tc_config *c;
    const sf_tc_target *t;

    (void)state;
    /* defaults: SGLang's two histograms, 5 scrapes of baseline, 20 samples */
    cfg = load(HEAD "    auto_revert: {max_latency_increase: {ttft: 2.0x, itl: '+50ms'}}\n"
               R1 EM TAIL, &msg);
    assert_string_equal(msg, "");
    c = sf_tc_config_of(cfg);
    t = sf_tc_find_target(c, "r1");
    assert_string_equal(t->engine_metrics.receiver, "prometheus/sglang");
    assert_string_equal(t->engine_metrics.job, "sglang");
    assert_string_equal(t->engine_metrics.metric[SF_TC_LAT_TTFT],
                        "sglang:time_to_first_token_seconds");
    assert_string_equal(t->engine_metrics.metric[SF_TC_LAT_ITL],
                        "sglang:inter_token_latency_seconds");
    assert_int_equal(t->engine_metrics.baseline_scrapes, 5);
    assert_true(c->auto_revert.max_latency_increase.present);
    assert_int_equal(c->auto_revert.max_latency_increase.min_samples, 20);
    assert_true(c->auto_revert.max_latency_increase.m[SF_TC_LAT_TTFT].is_ratio);
    assert_true(c->auto_revert.max_latency_increase.m[SF_TC_LAT_TTFT].value == 2.0);
    assert_false(c->auto_revert.max_latency_increase.m[SF_TC_LAT_ITL].is_ratio);
    assert_true(fabs(c->auto_revert.max_latency_increase.m[SF_TC_LAT_ITL].value - 0.05) < 1e-12);
    sf_config_destroy(cfg);

    /* names of one's own, a longer baseline, one limit, min_samples */
    cfg = load(HEAD "    auto_revert:\n      max_latency_increase: {itl: '+1s', min_samples: 5}\n"
               R1 "        engine_metrics: {receiver: prometheus/sglang, job: sglang, "
               "ttft: my_ttft, itl: my_itl, baseline_scrapes: 10}\n" TAIL, &msg);
    assert_string_equal(msg, "");
    c = sf_tc_config_of(cfg);
    t = sf_tc_find_target(c, "r1");
    assert_string_equal(t->engine_metrics.metric[SF_TC_LAT_TTFT], "my_ttft");
    assert_int_equal(t->engine_metrics.baseline_scrapes, 10);
    assert_false(c->auto_revert.max_latency_increase.m[SF_TC_LAT_TTFT].set);
    assert_true(c->auto_revert.max_latency_increase.m[SF_TC_LAT_ITL].value == 1.0);
    assert_int_equal(c->auto_revert.max_latency_increase.min_samples, 5);
    sf_config_destroy(cfg);

    /* engine_metrics without a guard: figures only */
    cfg = load(HEAD R1 EM TAIL, &msg);
    assert_string_equal(msg, "");
    assert_false(sf_tc_config_of(cfg)->auto_revert.max_latency_increase.present);
    sf_config_destroy(cfg);

    /* errors name the place */
    cfg = load(HEAD "    auto_revert: {max_latency_increase: {ttft: 2x, p99: 2x}}\n" R1 EM TAIL,
               &msg);
    HAS(msg, "auto_revert.max_latency_increase.p99: unknown key 'p99' (expected ttft, itl, "
             "min_samples)");
    sf_config_destroy(cfg);
    cfg = load(HEAD "    auto_revert: {max_latency_increase: {ttft: 2, itl: 50ms}}\n" R1 EM TAIL,
               &msg);
    HAS(msg, "max_latency_increase.ttft: invalid increase '2' (expected a ratio of at least 1 "
             "such as '2x', or a time such as '+50ms' or '+1s')");
    HAS(msg, "max_latency_increase.itl: invalid increase '50ms'");
    sf_config_destroy(cfg);
    cfg = load(HEAD "    auto_revert: {max_latency_increase: {ttft: 0.5x, min_samples: 0}}\n"
               R1 EM TAIL, &msg);
    HAS(msg, "max_latency_increase.ttft: invalid increase '0.5x'");
    HAS(msg, "max_latency_increase.min_samples: invalid value '0' (expected an integer 1 to "
             "1000000000)");
    sf_config_destroy(cfg);
    cfg = load(HEAD "    auto_revert: {max_latency_increase: {min_samples: 3}}\n" R1 EM TAIL,
               &msg);
    HAS(msg, "max_latency_increase: no limit is set");
    sf_config_destroy(cfg);
    cfg = load(HEAD "    auto_revert: {max_latency_increase: {ttft: 2x}}\n" R1
               "      r2:\n        endpoint: http://127.0.0.1:2/set_trace_level\n" EM TAIL, &msg);
    HAS(msg, "auto_revert.max_latency_increase: target 'r1' has no engine_metrics: the latency "
             "guard needs its engine's histograms");
    assert_null(strstr(msg, "target 'r2' has no engine_metrics"));
    sf_config_destroy(cfg);
    cfg = load(HEAD R1 "        engine_metrics: {receiver: otlp, job: sglang}\n" TAIL, &msg);
    HAS(msg, "r1.engine_metrics.receiver: 'otlp' is not a prometheus receiver");
    sf_config_destroy(cfg);
    cfg = load(HEAD R1 "        engine_metrics: {receiver: prometheus/sglang}\n" TAIL, &msg);
    HAS(msg, "r1.engine_metrics: missing required key 'job'");
    sf_config_destroy(cfg);
    cfg = load(HEAD R1 "        engine_metrics: {receiver: prometheus/sglang, job: sglang, "
               "scrapes: 3, baseline_scrapes: 0}\n" TAIL, &msg);
    HAS(msg, "unknown key 'scrapes' (expected receiver, job, ttft, itl, baseline_scrapes)");
    HAS(msg, "r1.engine_metrics.baseline_scrapes: invalid value '0' (expected an integer 1 to "
             "100)");
    sf_config_destroy(cfg);
}

/* A receiver the config does not have in a metrics pipeline is refused
 * when the extension is built (spanfence validate says so). */
static void test_unknown_receiver(void **state)
{
    const char *msg;
    sf_config *cfg;
    sf_service *svc = NULL;
    sf_diag *d = sf_diag_create("x.yaml");

    (void)state;
    cfg = load(HEAD R1 "        engine_metrics: {receiver: prometheus/other, job: sglang}\n" TAIL,
               &msg);
    assert_string_equal(msg, "");
    assert_int_equal(sf_service_create(cfg, d, &svc), SF_CONFIG);
    sf_config_destroy(cfg);
    cfg = load(HEAD R1 EM TAIL, &msg);
    assert_int_equal(sf_service_create(cfg, d, &svc), SF_OK);
    sf_service_destroy(svc);
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
}

static void test_limit_forms(void **state)
{
    static const char *const bad[] = { "2", "50ms", "+ms", "+-5ms", "infx", "nanx", "+1e3ms",
                                       "0.99x", "+0ms", "x", "+.s", "1..5x", "+5m", "2 x", "" };
    sf_tc_latency_limit l;

    (void)state;
    memset(&l, 0, sizeof(l));
    assert_true(sf_tc_latency_limit_parse("2x", &l));
    assert_true(l.set && l.is_ratio && l.value == 2.0);
    assert_true(sf_tc_latency_limit_parse("1.5x", &l) && l.value == 1.5);
    assert_true(sf_tc_latency_limit_parse("1x", &l) && l.value == 1.0);
    assert_true(sf_tc_latency_limit_parse("+50ms", &l));
    assert_true(!l.is_ratio && fabs(l.value - 0.05) < 1e-12);
    assert_true(sf_tc_latency_limit_parse("+1s", &l) && !l.is_ratio && l.value == 1.0);
    assert_true(sf_tc_latency_limit_parse("+0.25s", &l) && l.value == 0.25);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&l, 0, sizeof(l));
        if (sf_tc_latency_limit_parse(bad[i], &l))
            fail_msg("'%s' was taken", bad[i]);
    }
}

/* ---- the arithmetic ---------------------------------------------------------- */

/* bounds 0.1, 0.2, 0.5, 1, +Inf */
static tc_hist hist(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
    tc_hist h = { .n = 5, .le = { 0.1, 0.2, 0.5, 1.0, INFINITY }, .c = { a, b, c, d, e } };

    return h;
}

static void test_delta_and_quantiles(void **state)
{
    tc_hist a = hist(10, 5, 0, 0, 0), b = hist(12, 5, 20, 3, 0), d, acc = { .n = 0 };
    tc_hist other = { .n = 3, .le = { 0.1, 0.3, INFINITY }, .c = { 20, 20, 20 } };
    tc_lat_fig f;

    (void)state;
    assert_true(sf_tc_hist_delta(&b, &a, &d));
    assert_int_equal(d.c[0], 2);
    assert_int_equal(d.c[2], 20);
    assert_int_equal(sf_tc_hist_samples(&d), 25);
    /* a bucket that went down: a restart; other bounds: not comparable */
    assert_false(sf_tc_hist_delta(&a, &b, &d));
    assert_false(sf_tc_hist_delta(&other, &a, &d));
    assert_true(sf_tc_hist_add(&acc, &a));
    assert_true(sf_tc_hist_add(&acc, &b));
    assert_int_equal(acc.c[0], 22);
    assert_false(sf_tc_hist_add(&acc, &other));

    /* 2 in (0,0.1], 0 in (0.1,0.2], 20 in (0.2,0.5], 3 in (0.5,1]: the
     * median (13th of 25) is in the 0.5 bucket, the 99th (25th) in 1 */
    d = hist(2, 0, 20, 3, 0);
    sf_tc_lat_fig_of(&d, &f);
    assert_int_equal(f.samples, 25);
    assert_true(f.p50_le == 0.5);
    assert_true(f.p99_le == 1.0);
    /* the 99th of 100 is the 99th sample: 98 at 0.1 and 2 at +Inf: +Inf */
    d = hist(98, 0, 0, 0, 2);
    assert_true(sf_tc_hist_quantile_le(&d, 0.99) == INFINITY);
    assert_true(sf_tc_hist_quantile_le(&d, 0.50) == 0.1);
    d = hist(99, 0, 0, 0, 1);
    assert_true(sf_tc_hist_quantile_le(&d, 0.99) == 0.1);
    /* no sample: no figure */
    d = hist(0, 0, 0, 0, 0);
    assert_true(isnan(sf_tc_hist_quantile_le(&d, 0.5)));
    d = hist(0, 1, 0, 0, 0);
    assert_true(sf_tc_hist_quantile_le(&d, 0.5) == 0.2);
}

static void test_exceeds(void **state)
{
    sf_tc_latency_limit ratio = { .set = true, .is_ratio = true, .value = 2.0 };
    sf_tc_latency_limit add = { .set = true, .is_ratio = false, .value = 0.05 };
    sf_tc_latency_limit unset = { .set = false };
    tc_lat_fig before = { .samples = 100, .p50_le = 0.1, .p99_le = 0.2 };
    tc_lat_fig same = { .samples = 100, .p50_le = 0.1, .p99_le = 0.2 };
    tc_lat_fig p99_up = { .samples = 30, .p50_le = 0.1, .p99_le = 0.5 };
    tc_lat_fig p50_up = { .samples = 30, .p50_le = 0.2, .p99_le = 0.2 };
    tc_lat_fig to_inf = { .samples = 30, .p50_le = 0.1, .p99_le = INFINITY };
    tc_lat_fig few = { .samples = 19, .p50_le = 1.0, .p99_le = INFINITY };
    tc_lat_fig inf_before = { .samples = 100, .p50_le = INFINITY, .p99_le = INFINITY };
    char why[512] = "";

    (void)state;
    assert_false(sf_tc_latency_exceeds("ttft", &ratio, 20, &before, &same, why, sizeof(why)));
    /* 0.5 > 2 x 0.2 */
    assert_true(sf_tc_latency_exceeds("ttft", &ratio, 20, &before, &p99_up, why, sizeof(why)));
    HAS(why, "ttft p99 rose to <= 500ms from <= 200ms before the window (bucket-bounded; "
             "max_latency_increase 2x: 400ms), 30 samples during, 100 before");
    /* 0.2 is not more than 2 x 0.1; it is more than 0.1 + 0.05 */
    assert_false(sf_tc_latency_exceeds("itl", &ratio, 20, &before, &p50_up, why, sizeof(why)));
    assert_true(sf_tc_latency_exceeds("itl", &add, 20, &before, &p50_up, why, sizeof(why)));
    HAS(why, "itl p50 rose to <= 200ms from <= 100ms");
    HAS(why, "max_latency_increase +50ms: 150ms");
    assert_true(sf_tc_latency_exceeds("ttft", &add, 20, &before, &to_inf, why, sizeof(why)));
    HAS(why, "p99 rose to <= +Inf");
    /* too few samples, either side: never */
    assert_false(sf_tc_latency_exceeds("ttft", &add, 20, &before, &few, why, sizeof(why)));
    assert_false(sf_tc_latency_exceeds("ttft", &add, 20, &few, &p99_up, why, sizeof(why)));
    assert_true(sf_tc_latency_exceeds("ttft", &add, 19, &before, &few, why, sizeof(why)));
    /* no limit for the metric; a baseline past the top bucket */
    assert_false(sf_tc_latency_exceeds("ttft", &unset, 1, &before, &to_inf, why, sizeof(why)));
    assert_false(sf_tc_latency_exceeds("ttft", &add, 1, &inf_before, &to_inf, why, sizeof(why)));
}

/* A target's series: baseline over the last scrapes, a window's running
 * figure, a restart, the guard. */
static void test_series(void **state)
{
    sf_tc_engine_metrics em = { .receiver = "prometheus/sglang", .job = "sglang",
                                .metric = { "t", "i" }, .baseline_scrapes = 3 };
    sf_tc_latency_limits lim = { .present = true, .min_samples = 20,
                                 .m = { { .set = true, .is_ratio = true, .value = 2.0 } } };
    tc_latency *l;
    tc_hist h[2];
    tc_lat_view v;
    char why[512];

    (void)state;
    assert_int_equal(sf_tc_latency_create(&em, &l), SF_OK);
    assert_non_null(l);
    /* cumulative: 10 fast samples a scrape, 5 scrapes (the first is only
     * the starting point): the baseline is the last 3 deltas, 30 samples */
    for (uint64_t k = 0; k < 5; k++) {
        h[0] = hist(100 + 10 * k, 0, 0, 0, 0);
        h[1].n = 0;                 /* itl absent from the scrape: nothing said */
        sf_tc_latency_scrape(l, h);
    }
    sf_tc_latency_open(l);
    sf_tc_latency_view(l, &v);
    assert_true(v.valid && v.window);
    assert_int_equal(v.before[0].samples, 30);
    assert_true(v.before[0].p99_le == 0.1);
    assert_int_equal(v.during[0].samples, 0);
    assert_true(isnan(v.during[0].p50_le));
    assert_int_equal(v.before[1].samples, 0);
    /* no scrape since: the guard does not look */
    assert_false(sf_tc_latency_rising(l, &lim, why, sizeof(why)));

    /* flat: 10 more fast ones */
    h[0] = hist(150, 0, 0, 0, 0);
    sf_tc_latency_scrape(l, h);
    assert_false(sf_tc_latency_rising(l, &lim, why, sizeof(why)));
    /* 9 slow ones: 19 samples during, below min_samples */
    h[0] = hist(150, 0, 9, 0, 0);
    sf_tc_latency_scrape(l, h);
    assert_false(sf_tc_latency_rising(l, &lim, why, sizeof(why)));
    sf_tc_latency_view(l, &v);
    assert_int_equal(v.during[0].samples, 19);
    assert_int_equal(v.window_scrapes, 2);
    /* the engine restarts: that scrape is skipped, the window's baseline stays */
    h[0] = hist(1, 0, 1, 0, 0);
    sf_tc_latency_scrape(l, h);
    sf_tc_latency_view(l, &v);
    assert_int_equal(v.restarts, 1);
    assert_int_equal(v.during[0].samples, 19);
    assert_int_equal(v.before[0].samples, 30);
    assert_false(sf_tc_latency_rising(l, &lim, why, sizeof(why)));
    /* one more slow one after the restart: 20 during, p99 in the 0.5 bucket */
    h[0] = hist(1, 0, 2, 0, 0);
    sf_tc_latency_scrape(l, h);
    assert_true(sf_tc_latency_rising(l, &lim, why, sizeof(why)));
    HAS(why, "ttft p99 rose to <= 500ms from <= 100ms");
    assert_false(sf_tc_latency_rising(l, &lim, why, sizeof(why)));     /* said once a scrape */

    /* the window ends: its figure stays for its records, scrapes go on */
    sf_tc_latency_end(l);
    h[0] = hist(1, 0, 50, 0, 0);
    sf_tc_latency_scrape(l, h);
    sf_tc_latency_view(l, &v);
    assert_int_equal(v.during[0].samples, 20);
    assert_false(sf_tc_latency_rising(l, &lim, why, sizeof(why)));
    /* the next window's baseline: only deltas since the restart (2 of 3) */
    sf_tc_latency_open(l);
    sf_tc_latency_view(l, &v);
    assert_int_equal(v.before[0].samples, 49);
    assert_int_equal(v.during[0].samples, 0);
    sf_tc_latency_destroy(l);

    /* without engine_metrics: nothing kept, every call a no-op */
    em.receiver = NULL;
    assert_int_equal(sf_tc_latency_create(&em, &l), SF_OK);
    assert_null(l);
    sf_tc_latency_open(NULL);
    sf_tc_latency_end(NULL);
    sf_tc_latency_view(NULL, &v);
    assert_false(v.valid);
    assert_false(sf_tc_latency_rising(NULL, &lim, why, sizeof(why)));
}

/* ---- a scrape as the prometheus receiver makes it ------------------------------ */

typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint pb_hdp;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;

/* Two resources (jobs `sglang` and `other`), each with the histogram `t`
 * in two series (counts ×1 and ×2 of base) and a gauge. */
static uint8_t *scrape(const char *job2, const uint64_t *base, size_t *len)
{
    Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest req =
        OPENTELEMETRY__PROTO__COLLECTOR__METRICS__V1__EXPORT_METRICS_SERVICE_REQUEST__INIT;
    Opentelemetry__Proto__Metrics__V1__ResourceMetrics rm[2], *rmp[2];
    Opentelemetry__Proto__Resource__V1__Resource res[2];
    Opentelemetry__Proto__Metrics__V1__ScopeMetrics sm[2], *smp[2];
    Opentelemetry__Proto__Metrics__V1__Metric mt[2][2], *mtp[2][2];
    Opentelemetry__Proto__Metrics__V1__Histogram hg[2];
    Opentelemetry__Proto__Metrics__V1__Gauge gauge[2];
    pb_hdp pt[2][2], *ptp[2][2];
    pb_kv kv[2][2], *kvp[2][2];
    pb_any av[2][2];
    static double bounds[4] = { 0.1, 0.2, 0.5, 1.0 };
    uint64_t counts[2][2][5];
    const char *jobs[2] = { "sglang", job2 };
    uint8_t *out;

    for (int r = 0; r < 2; r++) {
        opentelemetry__proto__metrics__v1__resource_metrics__init(&rm[r]);
        opentelemetry__proto__resource__v1__resource__init(&res[r]);
        opentelemetry__proto__metrics__v1__scope_metrics__init(&sm[r]);
        opentelemetry__proto__metrics__v1__histogram__init(&hg[r]);
        opentelemetry__proto__metrics__v1__gauge__init(&gauge[r]);
        for (int k = 0; k < 2; k++) {
            opentelemetry__proto__common__v1__key_value__init(&kv[r][k]);
            opentelemetry__proto__common__v1__any_value__init(&av[r][k]);
            av[r][k].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
            kv[r][k].value = &av[r][k];
            kvp[r][k] = &kv[r][k];
            opentelemetry__proto__metrics__v1__histogram_data_point__init(&pt[r][k]);
            for (int b = 0; b < 5; b++)
                counts[r][k][b] = base[b] * (uint64_t)(k + 1);
            pt[r][k].n_bucket_counts = 5;
            pt[r][k].bucket_counts = counts[r][k];
            pt[r][k].n_explicit_bounds = 4;
            pt[r][k].explicit_bounds = bounds;
            ptp[r][k] = &pt[r][k];
            opentelemetry__proto__metrics__v1__metric__init(&mt[r][k]);
            mtp[r][k] = &mt[r][k];
        }
        kv[r][0].key = "service.name";
        av[r][0].string_value = (char *)jobs[r];
        kv[r][1].key = "service.instance.id";
        av[r][1].string_value = "127.0.0.1:30000";
        res[r].n_attributes = 2;
        res[r].attributes = kvp[r];
        hg[r].n_data_points = 2;
        hg[r].data_points = ptp[r];
        mt[r][0].name = "t";
        mt[r][0].data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM;
        mt[r][0].histogram = &hg[r];
        mt[r][1].name = "i";        /* a gauge of the histogram's name: not read */
        mt[r][1].data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE;
        mt[r][1].gauge = &gauge[r];
        sm[r].n_metrics = 2;
        sm[r].metrics = mtp[r];
        smp[r] = &sm[r];
        rm[r].resource = &res[r];
        rm[r].n_scope_metrics = 1;
        rm[r].scope_metrics = &smp[r];
        rmp[r] = &rm[r];
    }
    req.n_resource_metrics = 2;
    req.resource_metrics = rmp;
    *len = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__get_packed_size(&req);
    out = malloc(*len);
    assert_non_null(out);
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__pack(&req, out);
    return out;
}

static void test_scan(void **state)
{
    static const uint64_t base[5] = { 1, 2, 3, 4, 5 };
    static const char *const names[2] = { "t", "i" };
    tc_hist h[2];
    char inst[64];
    size_t len;
    uint8_t *req = scrape("other", base, &len);

    (void)state;
    assert_int_equal(sf_tc_latency_scan(req, len, "sglang", names, 2, h, inst, sizeof(inst), NULL),
                     SF_OK);
    assert_string_equal(inst, "127.0.0.1:30000");
    assert_int_equal(h[0].n, 5);
    assert_true(h[0].le[3] == 1.0 && isinf(h[0].le[4]));
    assert_int_equal(h[0].c[0], 3);         /* 1 + 2: the two series summed */
    assert_int_equal(h[0].c[4], 15);
    assert_int_equal(h[1].n, 0);            /* a gauge, not a histogram */
    assert_int_equal(sf_tc_latency_scan(req, len, "nobody", names, 2, h, inst, sizeof(inst), NULL),
                     SF_OK);
    assert_int_equal(h[0].n, 0);
    free(req);
    /* both resources of the job, same instance: both count */
    req = scrape("sglang", base, &len);
    assert_int_equal(sf_tc_latency_scan(req, len, "sglang", names, 2, h, inst, sizeof(inst), NULL),
                     SF_OK);
    assert_int_equal(h[0].c[0], 6);
    free(req);
    assert_int_equal(sf_tc_latency_scan((const uint8_t *)"\xff", 1, "sglang", names, 2, h, inst,
                                        sizeof(inst), NULL), SF_INVALID);
}

/* SGLang's load gauges in a scrape: summed over their series (as_int and
 * as_double alike), only for the job asked about. */
static void test_scan_gauges(void **state)
{
    Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest req;
    Opentelemetry__Proto__Metrics__V1__ResourceMetrics rm, *rmp = &rm;
    Opentelemetry__Proto__Resource__V1__Resource res;
    Opentelemetry__Proto__Metrics__V1__ScopeMetrics sm, *smp = &sm;
    Opentelemetry__Proto__Metrics__V1__Metric mt[2], *mtp[2] = { &mt[0], &mt[1] };
    Opentelemetry__Proto__Metrics__V1__Gauge g[2];
    Opentelemetry__Proto__Metrics__V1__NumberDataPoint dp[3];
    Opentelemetry__Proto__Metrics__V1__NumberDataPoint *run[2] = { &dp[0], &dp[1] }, *q = &dp[2];
    pb_kv kv, *kvp = &kv;
    pb_any av;
    static const char *const names[2] = { "t", "i" };
    tc_hist h[2];
    tc_gauges gg;
    char inst[64];
    uint8_t *buf;
    size_t len;

    (void)state;
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__init(&req);
    opentelemetry__proto__metrics__v1__resource_metrics__init(&rm);
    opentelemetry__proto__resource__v1__resource__init(&res);
    opentelemetry__proto__metrics__v1__scope_metrics__init(&sm);
    opentelemetry__proto__common__v1__key_value__init(&kv);
    opentelemetry__proto__common__v1__any_value__init(&av);
    av.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    av.string_value = "sglang";
    kv.key = "service.name";
    kv.value = &av;
    res.n_attributes = 1;
    res.attributes = &kvp;
    for (int i = 0; i < 3; i++)
        opentelemetry__proto__metrics__v1__number_data_point__init(&dp[i]);
    dp[0].value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_DOUBLE;
    dp[0].as_double = 3;                /* tp_rank 0 */
    dp[1].value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT;
    dp[1].as_int = 2;                   /* tp_rank 1 */
    dp[2].value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_DOUBLE;
    dp[2].as_double = 7;
    for (int i = 0; i < 2; i++) {
        opentelemetry__proto__metrics__v1__metric__init(&mt[i]);
        opentelemetry__proto__metrics__v1__gauge__init(&g[i]);
        mt[i].data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE;
        mt[i].gauge = &g[i];
    }
    mt[0].name = "sglang:num_running_reqs";
    g[0].n_data_points = 2;
    g[0].data_points = run;
    mt[1].name = "sglang:num_queue_reqs";
    g[1].n_data_points = 1;
    g[1].data_points = &q;
    sm.n_metrics = 2;
    sm.metrics = mtp;
    rm.resource = &res;
    rm.n_scope_metrics = 1;
    rm.scope_metrics = &smp;
    req.n_resource_metrics = 1;
    req.resource_metrics = &rmp;
    len = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__get_packed_size(&req);
    buf = malloc(len);
    assert_non_null(buf);
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__pack(&req, buf);

    assert_int_equal(sf_tc_latency_scan(buf, len, "sglang", names, 2, h, inst, sizeof(inst), &gg),
                     SF_OK);
    assert_true(gg.have_running && gg.have_queued);
    assert_true(gg.running == 5 && gg.queued == 7);
    assert_int_equal(h[0].n, 0);
    assert_int_equal(sf_tc_latency_scan(buf, len, "other", names, 2, h, inst, sizeof(inst), &gg),
                     SF_OK);
    assert_false(gg.have_running || gg.have_queued);
    free(buf);
}

/* The metrics tap reads only the named receiver's requests, and wakes the
 * control thread when a guard is set. */
static void test_tap(void **state)
{
    static const uint64_t base[5] = { 1, 0, 0, 0, 0 };
    sf_tc_config cfg;
    sf_tc_target t;
    tc_window w;
    tc_ctx x;
    tc_lat_view v;
    uint64_t woke = 0;
    size_t len;
    uint8_t *req = scrape("other", base, &len);

    (void)state;
    memset(&cfg, 0, sizeof(cfg));
    memset(&t, 0, sizeof(t));
    memset(&w, 0, sizeof(w));
    memset(&x, 0, sizeof(x));
    t.id = "r1";
    t.engine_metrics = (sf_tc_engine_metrics){ .receiver = "prometheus/sglang", .job = "sglang",
                                               .metric = { "t", "i" }, .baseline_scrapes = 5 };
    cfg.targets.n = 1;
    cfg.targets.v = &t;
    cfg.auto_revert.enabled = true;
    cfg.auto_revert.max_latency_increase.present = true;
    w.target = &t;
    x.cfg = &cfg;
    x.w = &w;
    x.oob_fd = eventfd(0, EFD_NONBLOCK);
    assert_true(x.oob_fd >= 0);
    assert_int_equal(sf_tc_latency_create(&t.engine_metrics, &w.lat), SF_OK);

    sf_tc_metrics_tap(&x, "prometheus/other", req, len, true);
    sf_tc_latency_view(w.lat, &v);
    assert_int_equal(v.scrapes, 0);
    assert_true(read(x.oob_fd, &woke, sizeof(woke)) < 0);
    sf_tc_metrics_tap(&x, "prometheus/sglang", req, len, true);
    sf_tc_metrics_tap(&x, "prometheus/sglang", req, len, false);   /* refused: measured all the same */
    sf_tc_latency_view(w.lat, &v);
    assert_int_equal(v.scrapes, 2);
    assert_int_equal(read(x.oob_fd, &woke, sizeof(woke)), (ssize_t)sizeof(woke));
    assert_int_equal(woke, 2);
    sf_tc_latency_destroy(w.lat);
    close(x.oob_fd);
    free(req);
}

/* A target's state and a scrape's decoding, every allocation failing in
 * turn: an error, never a leak. */
typedef struct torture_arg {
    const uint8_t *req;
    size_t len;
} torture_arg;

static sf_status torture_scenario(void *arg)
{
    static const char *const names[2] = { "t", "i" };
    const torture_arg *a = arg;
    sf_tc_engine_metrics em = { .receiver = "prometheus/sglang", .job = "sglang",
                                .metric = { "t", "i" }, .baseline_scrapes = 4 };
    tc_latency *l;
    tc_hist h[2];
    char inst[64];
    sf_status st = sf_tc_latency_create(&em, &l);

    if (st != SF_OK)
        return st;
    st = sf_tc_latency_scan(a->req, a->len, "sglang", names, 2, h, inst, sizeof(inst), NULL);
    if (st == SF_OK) {
        sf_tc_latency_scrape(l, h);
        sf_tc_latency_open(l);
        sf_tc_latency_scrape(l, h);
    }
    sf_tc_latency_destroy(l);
    return st;
}

static void test_torture(void **state)
{
    static const uint64_t base[5] = { 1, 2, 3, 4, 5 };
    torture_arg a;
    uint8_t *req = scrape("other", base, &a.len);
    const sf_torture t = { .name = "latency", .run = torture_scenario, .arg = &a,
                           .expect = SF_OK };

    (void)state;
    a.req = req;
    assert_true(sf_torture_run(&t) >= 3);
    free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_unknown_receiver),
        cmocka_unit_test(test_limit_forms),
        cmocka_unit_test(test_delta_and_quantiles),
        cmocka_unit_test(test_exceeds),
        cmocka_unit_test(test_series),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_scan_gauges),
        cmocka_unit_test(test_tap),
        cmocka_unit_test(test_torture),
    };

    sf_log_set_level(SF_LOG_OFF);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

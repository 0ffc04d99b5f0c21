/* tests/fuzz/fuzz_otlp_signals.c: libFuzzer target for the codec on OTLP
 * logs and metrics (sf_otlp_rewrite_signal). The first byte picks the
 * signal (even: logs, odd: metrics); the rest is the request. On every
 * input: the rewrite and the scan agree (status, items); on an accepted one
 * the output is canonical (the codec leaves it as it is), protobuf-c reads
 * it with no unknown field at any level, the streaming counter counts its
 * items, and the OTLP/JSON mapping takes it there and back to the same
 * bytes (when no string holds a NUL: protobuf-c's strings end at one; every
 * NaN comes back as the quiet NaN, since JSON spells them all "NaN"). Then
 * a policy edit (allowlists in every context, the body rule, governed
 * names, exemplars dropped, a resource upsert, metrics whose name starts
 * with 'd' filtered out, their points counted as protobuf-c's tree counts
 * them) must give output that holds only what the policy allows, checked
 * on protobuf-c's tree, and the same output from the input as from its
 * canonical form (an edit sees what a decoder sees, not how the bytes
 * spelled it); kept attributes hold one value (single_values_only: no
 * array, kvlist or bytes), and every histogram point that leaves holds
 * numbers that are numbers (check_histograms: finite increasing bounds,
 * one count more, counts summing to count; a metric named "h" only the
 * bounds {1, 2}, checked by the kept count), the points dropped counted. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sf_alloc.h"
#include "sf_arena.h"
#include "sf_otlp_count.h"
#include "sf_otlp_json.h"
#include "sf_request.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"

typedef Opentelemetry__Proto__Common__V1__KeyValue kv_t;

static void fail(const char *what)
{
    fprintf(stderr, "FUZZ CHECK FAILED: %s\n", what);
    abort();
}

/* Visits m and every message in it (on_msg) and every double they hold
 * (on_double, with its address), a oneof's member only when it is the one
 * set (protobuf-c's oneofs are unions). Either callback may be NULL. */
static void walk(ProtobufCMessage *m, void (*on_msg)(ProtobufCMessage *, void *),
                 void (*on_double)(void *, void *), void *arg)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    char *base = (char *)m;

    if (on_msg != NULL)
        on_msg(m, arg);
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        size_t k = 1;
        char *v = base + f->offset;

        if (f->type != PROTOBUF_C_TYPE_DOUBLE && f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which;

            memcpy(&which, base + f->quantifier_offset, sizeof(which));
            if (which != f->id)
                continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            memcpy(&k, base + f->quantifier_offset, sizeof(k));
            memcpy(&v, base + f->offset, sizeof(v));
        }
        for (size_t j = 0; j < k; j++) {
            if (f->type == PROTOBUF_C_TYPE_DOUBLE) {
                if (on_double != NULL)
                    on_double(v + j * sizeof(double), arg);
            } else {
                ProtobufCMessage *sub;

                memcpy(&sub, v + j * sizeof(sub), sizeof(sub));
                if (sub != NULL)
                    walk(sub, on_msg, on_double, arg);
            }
        }
    }
}

static void add_unknown(ProtobufCMessage *m, void *n)
{
    *(size_t *)n += m->n_unknown_fields;
}

/* Unknown fields anywhere in m. */
static size_t unknown_in(ProtobufCMessage *m)
{
    size_t n = 0;

    walk(m, add_unknown, NULL, &n);
    return n;
}

/* A NaN made the quiet NaN that OTLP/JSON's "NaN" reads back as: the
 * mapping has no spelling for a NaN's sign or payload. */
static void quiet_nan(void *p, void *arg)
{
    double x;

    (void)arg;
    memcpy(&x, p, sizeof(x));
    if (isnan(x)) {
        x = NAN;
        memcpy(p, &x, sizeof(x));
    }
}

static void quiet_nans(ProtobufCMessage *m)
{
    walk(m, NULL, quiet_nan, NULL);
}

/* ---- the policy ------------------------------------------------------------ */

static const char *const res_keys[] = { "service.name" };
static const char *const log_keys[] = { "level" };
static const char *const dp_keys[] = { "model_name" };
static const bool keep1[] = { true };
static const char *const ok_set[] = { "ok" };
static const sf_otlp_value_alt body_alt = { .types = SF_OTLP_VAL_STRING,
                                            .shape = SF_OTLP_STR_SET, .n_set = 1,
                                            .set = ok_set };
static const sf_otlp_value_rule body_rule = { .n_alts = 1, .alts = &body_alt };
static const sf_otlp_insert res_ins[] = { { .key = "vm.id", .value = "vm-1", .upsert = true } };
static sf_otlp_edit edit;
static const double h_values[] = { 1, 2 };
static const sf_otlp_bounds h_bounds = { .metric = "h", .n = 2, .v = h_values };

/* The filter's part of the edit: metrics whose name starts with 'd' go. */
static int keep_metric(const void *ctx, void **state, const uint8_t *name, size_t len)
{
    (void)ctx;
    (void)state;
    return len > 0 && name[0] == 'd' ? SF_OTLP_METRIC_DROP : SF_OTLP_METRIC_KEEP;
}

/* The data points of the metrics keep_metric drops, by protobuf-c's tree
 * (a name's first byte is the same there, NUL or not). */
static size_t points_dropped(const Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest *req)
{
    size_t n = 0;

    for (size_t i = 0; i < req->n_resource_metrics; i++) {
        for (size_t j = 0; j < req->resource_metrics[i]->n_scope_metrics; j++) {
            const Opentelemetry__Proto__Metrics__V1__ScopeMetrics *sm =
                req->resource_metrics[i]->scope_metrics[j];

            for (size_t k = 0; k < sm->n_metrics; k++) {
                const Opentelemetry__Proto__Metrics__V1__Metric *m = sm->metrics[k];

                if (m->name[0] != 'd')
                    continue;
                switch (m->data_case) {
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE:
                    n += m->gauge->n_data_points;
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM:
                    n += m->sum->n_data_points;
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM:
                    n += m->histogram->n_data_points;
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_EXPONENTIAL_HISTOGRAM:
                    n += m->exponential_histogram->n_data_points;
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY:
                    n += m->summary->n_data_points;
                    break;
                default:
                    break;
                }
            }
        }
    }
    return n;
}

/* Whether a histogram point holds numbers that are numbers (as the codec's
 * check_histograms, here on protobuf-c's tree), and the set of "h". */
static bool hist_ok(const char *metric, const Opentelemetry__Proto__Metrics__V1__HistogramDataPoint *dp)
{
    uint64_t total = 0;

    for (size_t i = 0; i < dp->n_explicit_bounds; i++)
        if (!isfinite(dp->explicit_bounds[i]) ||
            (i > 0 && !(dp->explicit_bounds[i] > dp->explicit_bounds[i - 1])))
            return false;
    if (dp->n_explicit_bounds == 0 && dp->n_bucket_counts == 0)
        return true;            /* no buckets: count and sum only */
    if (strcmp(metric, "h") == 0 &&
        (dp->n_explicit_bounds != 2 || dp->explicit_bounds[0] != 1 || dp->explicit_bounds[1] != 2))
        return false;
    for (size_t i = 0; i < dp->n_bucket_counts; i++) {
        if (total + dp->bucket_counts[i] < total)
            return false;
        total += dp->bucket_counts[i];
    }
    return dp->n_bucket_counts == dp->n_explicit_bounds + 1 && total == dp->count;
}

/* The histogram points check_histograms must drop (of metrics the filter
 * keeps), by protobuf-c's tree. */
static size_t points_unfit(const Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest *req)
{
    size_t n = 0;

    for (size_t i = 0; i < req->n_resource_metrics; i++)
        for (size_t j = 0; j < req->resource_metrics[i]->n_scope_metrics; j++) {
            const Opentelemetry__Proto__Metrics__V1__ScopeMetrics *sm =
                req->resource_metrics[i]->scope_metrics[j];

            for (size_t k = 0; k < sm->n_metrics; k++) {
                const Opentelemetry__Proto__Metrics__V1__Metric *m = sm->metrics[k];

                if (m->name[0] == 'd' ||
                    m->data_case != OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM)
                    continue;
                for (size_t q = 0; q < m->histogram->n_data_points; q++)
                    n += !hist_ok(m->name, m->histogram->data_points[q]);
            }
        }
    return n;
}

static void init_once(void)
{
    static sf_otlp_keyset *ks[4];

    if (ks[0] != NULL)
        return;
    if (sf_otlp_keyset_create(1, res_keys, keep1, false, &ks[0]) != SF_OK ||
        sf_otlp_keyset_create(1, log_keys, keep1, false, &ks[1]) != SF_OK ||
        sf_otlp_keyset_create(1, dp_keys, keep1, false, &ks[2]) != SF_OK ||
        sf_otlp_keyset_create(0, NULL, NULL, false, &ks[3]) != SF_OK)
        abort();
    edit.keys[SF_OTLP_RESOURCE] = ks[0];
    edit.keys[SF_OTLP_SCOPE] = ks[3];
    edit.keys[SF_OTLP_LOG] = ks[1];
    edit.keys[SF_OTLP_DATAPOINT] = ks[2];
    edit.keys[SF_OTLP_METRIC] = ks[3];
    edit.single_values_only = true;
    edit.check_histograms = true;
    edit.n_bounds = 1;
    edit.bounds = &h_bounds;
    /* every governed string from the scope on: cleared (no field_fn) */
    for (int f = SF_OTLP_FIELD_SCOPE_NAME; f < SF_OTLP_FIELD_COUNT; f++)
        edit.fields |= SF_OTLP_FIELD_BIT(f);
    edit.body_rule = &body_rule;
    edit.n_inserts[SF_OTLP_RESOURCE] = 1;
    edit.inserts[SF_OTLP_RESOURCE] = res_ins;
    edit.keep_metric_fn = keep_metric;
}

static bool key_in(const char *k, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(k, keys[i]) == 0)
            return true;
    return false;
}

static void check_attrs(kv_t **a, size_t n, const char *const *keys, size_t nk, const char *who)
{
    for (size_t i = 0; i < n; i++) {
        if (!key_in(a[i]->key, keys, nk))
            fail(who);
        if (a[i]->value != NULL &&
            (a[i]->value->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE ||
             a[i]->value->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE ||
             a[i]->value->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE))
            fail("a kept attribute holds more than one value");
    }
}

/* A histogram point that left: its numbers are numbers. */
static void check_histogram_point(const Opentelemetry__Proto__Metrics__V1__HistogramDataPoint *dp)
{
    uint64_t total = 0;

    if (dp->n_explicit_bounds == 0 && dp->n_bucket_counts == 0)
        return;
    if (dp->n_bucket_counts != dp->n_explicit_bounds + 1)
        fail("histogram point: counts not one more than bounds");
    for (size_t i = 0; i < dp->n_explicit_bounds; i++)
        if (!isfinite(dp->explicit_bounds[i]) ||
            (i > 0 && !(dp->explicit_bounds[i] > dp->explicit_bounds[i - 1])))
            fail("histogram point: bounds not finite and increasing");
    for (size_t i = 0; i < dp->n_bucket_counts; i++) {
        if (total + dp->bucket_counts[i] < total)
            fail("histogram point: counts overflow");
        total += dp->bucket_counts[i];
    }
    if (total != dp->count)
        fail("histogram point: counts do not sum to count");
}

static void check_resource(const Opentelemetry__Proto__Resource__V1__Resource *r)
{
    static const char *const allowed[] = { "service.name", "vm.id" };
    size_t vm = 0;

    if (r == NULL)
        fail("no resource to hold the upserted vm.id");
    check_attrs(r->attributes, r->n_attributes, allowed, 2, "resource attribute");
    for (size_t i = 0; i < r->n_attributes; i++) {
        const Opentelemetry__Proto__Common__V1__AnyValue *v = r->attributes[i]->value;

        if (strcmp(r->attributes[i]->key, "vm.id") != 0)
            continue;
        vm++;
        if (v == NULL ||
            v->value_case != OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE ||
            strcmp(v->string_value, "vm-1") != 0)
            fail("vm.id not the upserted value");
    }
    if (vm != 1)
        fail("vm.id not upserted once");
}

static void check_scope(const Opentelemetry__Proto__Common__V1__InstrumentationScope *s)
{
    if (s != NULL && (s->n_attributes != 0 || (s->name != NULL && s->name[0]) ||
                      (s->version != NULL && s->version[0])))
        fail("scope");
}

static void check_logs(const uint8_t *p, size_t n)
{
    Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest *req =
        opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(NULL, n, p);

    if (req == NULL)
        fail("edited logs unreadable");
    for (size_t i = 0; i < req->n_resource_logs; i++) {
        const Opentelemetry__Proto__Logs__V1__ResourceLogs *rl = req->resource_logs[i];

        check_resource(rl->resource);
        if (rl->schema_url[0] != '\0')
            fail("resource schema url");
        for (size_t j = 0; j < rl->n_scope_logs; j++) {
            const Opentelemetry__Proto__Logs__V1__ScopeLogs *sl = rl->scope_logs[j];

            check_scope(sl->scope);
            for (size_t k = 0; k < sl->n_log_records; k++) {
                const Opentelemetry__Proto__Logs__V1__LogRecord *r = sl->log_records[k];

                check_attrs(r->attributes, r->n_attributes, log_keys, 1, "log attribute");
                if (r->severity_text[0] != '\0' || r->event_name[0] != '\0')
                    fail("severity text or event name");
                if (r->body != NULL &&
                    (r->body->value_case != OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE ||
                     strcmp(r->body->string_value, "ok") != 0))
                    fail("log body outside its rule");
            }
        }
    }
    opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(req, NULL);
}

#define POINTS(type, metric)                                                                  \
    for (size_t q = 0; (metric) != NULL && q < (metric)->n_data_points; q++) {               \
        const type *dp = (metric)->data_points[q];                                            \
        check_attrs(dp->attributes, dp->n_attributes, dp_keys, 1, "datapoint attribute");      \
        EXEMPLARS(dp);                                                                        \
    }
#define EXEMPLARS(dp) if ((dp)->n_exemplars != 0) fail("exemplar kept")
#define NO_EXEMPLARS(dp) (void)(dp)

static void check_metrics(const uint8_t *p, size_t n)
{
    Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest *req =
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(NULL, n, p);

    if (req == NULL)
        fail("edited metrics unreadable");
    for (size_t i = 0; i < req->n_resource_metrics; i++) {
        const Opentelemetry__Proto__Metrics__V1__ResourceMetrics *rm = req->resource_metrics[i];

        check_resource(rm->resource);
        for (size_t j = 0; j < rm->n_scope_metrics; j++) {
            const Opentelemetry__Proto__Metrics__V1__ScopeMetrics *sm = rm->scope_metrics[j];

            check_scope(sm->scope);
            for (size_t k = 0; k < sm->n_metrics; k++) {
                const Opentelemetry__Proto__Metrics__V1__Metric *m = sm->metrics[k];

                if (m->name[0] || m->description[0] || m->unit[0] || m->n_metadata)
                    fail("metric name, description, unit or metadata");
                /* the data is a oneof: a union, only its case holds a pointer */
                switch (m->data_case) {
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE:
                    POINTS(Opentelemetry__Proto__Metrics__V1__NumberDataPoint, m->gauge)
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM:
                    POINTS(Opentelemetry__Proto__Metrics__V1__NumberDataPoint, m->sum)
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM:
                    POINTS(Opentelemetry__Proto__Metrics__V1__HistogramDataPoint, m->histogram)
                    for (size_t q = 0; m->histogram != NULL && q < m->histogram->n_data_points; q++)
                        check_histogram_point(m->histogram->data_points[q]);
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_EXPONENTIAL_HISTOGRAM:
                    POINTS(Opentelemetry__Proto__Metrics__V1__ExponentialHistogramDataPoint,
                           m->exponential_histogram)
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY:
#undef EXEMPLARS
#define EXEMPLARS NO_EXEMPLARS
                    POINTS(Opentelemetry__Proto__Metrics__V1__SummaryDataPoint, m->summary)
#undef EXEMPLARS
#define EXEMPLARS(dp) if ((dp)->n_exemplars != 0) fail("exemplar kept")
                    break;
                default:
                    break;
                }
            }
        }
    }
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(req, NULL);
}

/* ---- the target ------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_signal s;
    const uint8_t *in;
    size_t len, items = 0;
    sf_otlp_stats st;
    sf_buf *out = NULL, *again = NULL, *e1 = NULL, *e2 = NULL;
    sf_status rs, ss;

    if (size < 1)
        return 0;
    init_once();
    s = data[0] & 1 ? SF_SIGNAL_METRICS : SF_SIGNAL_LOGS;
    in = data + 1;
    len = size - 1;
    rs = sf_otlp_rewrite_signal(s, in, len, 32, NULL, &out, &st);
    ss = sf_otlp_scan_signal(s, in, len, 32, &items);
    if (rs != ss && !(rs == SF_ENOMEM || ss == SF_ENOMEM))
        fail("rewrite and scan disagree");
    if (rs != SF_OK)
        return 0;
    if (items != st.spans)
        fail("rewrite and scan count differently");
    /* canonical */
    if (sf_otlp_rewrite_signal(s, out->data, out->len, 32, NULL, &again, &st) != SF_OK ||
        again->len != out->len || memcmp(again->data, out->data, out->len) != 0)
        fail("output not canonical");
    sf_buf_unref(again);
    bool faithful = false;      /* protobuf-c's tree packs back to the output */
    uint8_t *quiet = NULL;      /* the output with its NaNs made quiet */
    size_t dropped = 0;         /* points of the metrics the edit's filter drops */
    size_t unfit = 0;           /* histogram points check_histograms drops */
    {
        ProtobufCMessage *m = s == SF_SIGNAL_LOGS
            ? (ProtobufCMessage *)opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(NULL, out->len, out->data)
            : (ProtobufCMessage *)opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(NULL, out->len, out->data);

        if (m == NULL || unknown_in(m) != 0)
            fail("output unreadable by protobuf-c or with unknown fields");
        if (s == SF_SIGNAL_METRICS) {
            dropped = points_dropped((const void *)m);
            unfit = points_unfit((const void *)m);
        }
        /* protobuf-c's strings end at a NUL: then its tree (and the JSON
         * made from it) holds less than the bytes */
        if (protobuf_c_message_get_packed_size(m) == out->len) {
            uint8_t *re = malloc(out->len + 1);

            if (re == NULL)
                abort();
            protobuf_c_message_pack(m, re);
            faithful = memcmp(re, out->data, out->len) == 0;
            quiet_nans(m);
            if (protobuf_c_message_get_packed_size(m) != out->len)
                fail("a quiet NaN changed the output's size");
            protobuf_c_message_pack(m, re);
            quiet = re;
        }
        protobuf_c_message_free_unpacked(m, NULL);
    }
    {
        sf_span_counter c;

        sf_span_counter_init_signal(&c, s);
        sf_span_counter_feed(&c, out->data, out->len);
        if (c.bad || c.spans != items)
            fail("the streaming counter disagrees on canonical output");
    }
    /* OTLP/JSON there and back (where protobuf-c reads the output whole) */
    if (faithful) {
        sf_arena *a = sf_arena_create(65536, 0);
        char *json = NULL, err[256];
        size_t jlen = 0, wlen = 0;
        const uint8_t *w = NULL;
        sf_buf *back = NULL;

        if (a == NULL)
            abort();
        if (sf_otlp_json_from_wire(s, a, out->data, out->len, &json, &jlen) == SF_OK) {
            if (sf_otlp_json_to_wire(s, a, json, jlen, 32, &w, &wlen, err, sizeof(err)) != SF_OK)
                fail(err);
            if (sf_otlp_rewrite_signal(s, w, wlen, 32, NULL, &back, &st) != SF_OK ||
                back->len != out->len || memcmp(back->data, quiet, out->len) != 0)
                fail("json round trip changed the request");
            sf_buf_unref(back);
        }
        sf_free(json);
        sf_arena_destroy(a);
    }
    free(quiet);
    /* the policy edit: on the input and on its canonical form alike */
    if (sf_otlp_rewrite_signal(s, in, len, 32, &edit, &e1, &st) != SF_OK)
        fail("the edit failed on a valid request");
    if (st.filtered_items != dropped || st.spans + st.dropped_points != items - dropped)
        fail("the filter's counts disagree with protobuf-c's tree");
    /* names ending at a NUL read shorter in protobuf-c's tree: judged only
     * when its tree is the output whole */
    if (faithful && st.dropped_points != unfit)
        fail("the histogram points dropped disagree with protobuf-c's tree");
    if (sf_otlp_rewrite_signal(s, out->data, out->len, 32, &edit, &e2, &st) != SF_OK)
        fail("the edit failed on a valid request");
    if (e1->len != e2->len || memcmp(e1->data, e2->data, e1->len) != 0)
        fail("the edit saw the input's spelling");
    if (s == SF_SIGNAL_LOGS)
        check_logs(e1->data, e1->len);
    else
        check_metrics(e1->data, e1->len);
    sf_buf_unref(e1);
    sf_buf_unref(e2);
    sf_buf_unref(out);
    return 0;
}

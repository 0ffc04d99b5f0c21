/* receivers/prometheus/prom_convert.c: a parsed scrape into an OTLP
 * metrics request (prom_convert.h). Each family's samples are sorted by
 * their labels (less `le` / `quantile`), so a histogram's or summary's
 * series is a run of samples; each run becomes one data point. */
#define _GNU_SOURCE     /* qsort_r */
#include "prom_convert.h"

#include "sf_alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest pb_request;
typedef Opentelemetry__Proto__Metrics__V1__ResourceMetrics pb_rm;
typedef Opentelemetry__Proto__Metrics__V1__ScopeMetrics pb_sm;
typedef Opentelemetry__Proto__Metrics__V1__Metric pb_metric;
typedef Opentelemetry__Proto__Metrics__V1__Gauge pb_gauge;
typedef Opentelemetry__Proto__Metrics__V1__Sum pb_sum;
typedef Opentelemetry__Proto__Metrics__V1__Histogram pb_hist;
typedef Opentelemetry__Proto__Metrics__V1__Summary pb_summary;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint pb_ndp;
typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint pb_hdp;
typedef Opentelemetry__Proto__Metrics__V1__SummaryDataPoint pb_sdp;
typedef Opentelemetry__Proto__Metrics__V1__SummaryDataPoint__ValueAtQuantile pb_vaq;
typedef Opentelemetry__Proto__Resource__V1__Resource pb_resource;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope pb_scope;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;

#define CUMULATIVE OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE

/* ---- the start-time table ---------------------------------------------------- */

typedef struct start_entry {
    uint64_t key;                   /* 0: empty */
    uint64_t start_ns;
    double last;
    uint32_t gen;
} start_entry;

struct sf_prom_starts {
    start_entry *slots;
    size_t n_slots, used, max;
    uint32_t gen;
};

sf_prom_starts *sf_prom_starts_create(size_t max)
{
    sf_prom_starts *s = sf_calloc(1, sizeof(*s));

    if (s == NULL)
        return NULL;
    s->max = max ? max : 1;
    /* small at first; the table doubles as series come, up to `max` */
    s->slots = sf_calloc(64, sizeof(*s->slots));
    if (s->slots == NULL) {
        sf_free(s);
        return NULL;
    }
    s->n_slots = 64;
    return s;
}

void sf_prom_starts_destroy(sf_prom_starts *s)
{
    if (s == NULL)
        return;
    sf_free(s->slots);
    sf_free(s);
}

size_t sf_prom_starts_count(const sf_prom_starts *s)
{
    return s ? s->used : 0;
}

static bool starts_rehash(sf_prom_starts *s, size_t n_slots, bool only_current)
{
    start_entry *ns = sf_calloc(n_slots, sizeof(*ns));
    size_t used = 0;

    if (ns == NULL)
        return false;
    for (size_t i = 0; i < s->n_slots; i++) {
        start_entry *e = &s->slots[i];
        size_t j;

        if (e->key == 0 || (only_current && e->gen != s->gen))
            continue;
        j = e->key & (n_slots - 1);
        while (ns[j].key != 0)
            j = (j + 1) & (n_slots - 1);
        ns[j] = *e;
        used++;
    }
    sf_free(s->slots);
    s->slots = ns;
    s->n_slots = n_slots;
    s->used = used;
    return true;
}

/* The start of series `key` whose value is now `v` at `t_ns`; *added when
 * it was not in the table. */
static uint64_t starts_lookup(sf_prom_starts *s, uint64_t key, double v, uint64_t t_ns,
                              bool *added)
{
    size_t j;

    *added = false;
    if (key == 0)
        key = 1;
    if ((s->used + 1) * 2 > s->n_slots && s->used < s->max)
        starts_rehash(s, s->n_slots * 2, false);
    j = key & (s->n_slots - 1);
    while (s->slots[j].key != 0 && s->slots[j].key != key)
        j = (j + 1) & (s->n_slots - 1);
    if (s->slots[j].key == key) {
        start_entry *e = &s->slots[j];

        if (v < e->last || isnan(e->last) != isnan(v))
            e->start_ns = t_ns;     /* a reset: the series starts again now */
        e->last = v;
        e->gen = s->gen;
        return e->start_ns;
    }
    *added = true;
    if (s->used >= s->max || (s->used + 1) * 2 > s->n_slots)
        return t_ns;
    s->slots[j] = (start_entry){ .key = key, .start_ns = t_ns, .last = v, .gen = s->gen };
    s->used++;
    return t_ns;
}

/* ---- building ---------------------------------------------------------------- */

typedef struct conv {
    sf_arena *a;
    const sf_prom_result *r;
    const sf_prom_target *t;
    const sf_prom_scrape_info *info;
    sf_prom_starts *starts;
    sf_prom_convert_stats *st;
    pb_metric **metrics;
    size_t n_metrics, cap_metrics;
    bool oom;
} conv;

static void *alloc(conv *c, size_t n)
{
    void *p = sf_arena_alloc(c->a, n ? n : 1);

    if (p == NULL)
        c->oom = true;
    return p;
}

static pb_kv *kv_str(conv *c, const char *k, const char *v)
{
    pb_kv *kv = alloc(c, sizeof(*kv));
    pb_any *any = alloc(c, sizeof(*any));

    if (kv == NULL || any == NULL)
        return NULL;
    opentelemetry__proto__common__v1__key_value__init(kv);
    opentelemetry__proto__common__v1__any_value__init(any);
    any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    any->string_value = (char *)v;
    kv->key = (char *)k;
    kv->value = any;
    return kv;
}

static const char *special_label(sf_prom_type t)
{
    if (t == SF_PROM_HISTOGRAM || t == SF_PROM_GAUGEHISTOGRAM)
        return "le";
    if (t == SF_PROM_SUMMARY)
        return "quantile";
    return NULL;
}

static bool is_target_label(const sf_prom_target *t, const char *name)
{
    if (strcmp(name, "job") == 0 || strcmp(name, "instance") == 0)
        return true;
    for (size_t i = 0; i < t->n_labels; i++)
        if (strcmp(t->labels[i].name, name) == 0)
            return true;
    return false;
}

/* A point's attributes: the sample's labels less `skip`, a clash with a
 * target label renamed exported_NAME (honor_labels false) or winning over
 * it (true), then the target's static labels. */
static pb_kv **attributes(conv *c, const sf_prom_sample *s, const char *skip, size_t *n_out)
{
    const sf_prom_target *t = c->t;
    pb_kv **kv = alloc(c, (s->n_labels + t->n_labels) * sizeof(*kv));
    size_t n = 0;

    *n_out = 0;
    if (kv == NULL)
        return NULL;
    for (uint16_t i = 0; i < s->n_labels; i++) {
        const char *name = s->labels[i].name;

        if (skip != NULL && strcmp(name, skip) == 0)
            continue;
        if (!t->honor_labels && is_target_label(t, name)) {
            size_t len = strlen(name);
            char *e = alloc(c, len + 10);

            if (e == NULL)
                return NULL;
            memcpy(e, "exported_", 9);
            memcpy(e + 9, name, len + 1);
            name = e;
        }
        if ((kv[n] = kv_str(c, name, s->labels[i].value)) == NULL)
            return NULL;
        n++;
    }
    for (size_t i = 0; i < t->n_labels; i++) {
        bool shadowed = false;

        for (uint16_t k = 0; t->honor_labels && k < s->n_labels && !shadowed; k++)
            shadowed = strcmp(s->labels[k].name, t->labels[i].name) == 0;
        if (shadowed)
            continue;
        if ((kv[n] = kv_str(c, t->labels[i].name, t->labels[i].value)) == NULL)
            return NULL;
        n++;
    }
    *n_out = n;
    return kv;
}

static pb_metric *new_metric(conv *c, const char *name, const sf_prom_family *f)
{
    pb_metric *m = alloc(c, sizeof(*m));

    if (m == NULL)
        return NULL;
    opentelemetry__proto__metrics__v1__metric__init(m);
    m->name = (char *)name;
    m->description = (char *)(f ? f->help : "");
    m->unit = (char *)(f ? f->unit : "");
    if (c->n_metrics == c->cap_metrics) {
        size_t cap = c->cap_metrics ? c->cap_metrics * 2 : 64;
        pb_metric **nm = alloc(c, cap * sizeof(*nm));

        if (nm == NULL)
            return NULL;
        if (c->n_metrics)
            memcpy(nm, c->metrics, c->n_metrics * sizeof(*nm));
        c->metrics = nm;
        c->cap_metrics = cap;
    }
    c->metrics[c->n_metrics++] = m;
    return m;
}

static uint64_t point_time(conv *c, const sf_prom_sample *s)
{
    if (s->has_ts && c->t->honor_timestamps && s->ts_ms > 0)
        return (uint64_t)s->ts_ms * 1000000ULL;
    return c->info->time_ns;
}

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* The identity of a point's series: the metric's name and the labels less
 * `skip` (the target's labels are the same for all of a target's). */
static uint64_t series_key(const char *metric, const sf_prom_sample *s, const char *skip)
{
    uint64_t h = fnv(0xcbf29ce484222325ULL, metric, strlen(metric) + 1);

    for (uint16_t i = 0; i < s->n_labels; i++) {
        if (skip != NULL && strcmp(s->labels[i].name, skip) == 0)
            continue;
        h = fnv(h, s->labels[i].name, strlen(s->labels[i].name) + 1);
        h = fnv(h, s->labels[i].value, s->labels[i].value_len + 1);
    }
    return h;
}

/* Start time of a cumulative point: its _created when given, else the
 * table's. `group` samples count towards series_added. */
static uint64_t start_time(conv *c, uint64_t key, double v, uint64_t t_ns,
                           const sf_prom_sample *created, size_t group)
{
    bool added;
    uint64_t start = starts_lookup(c->starts, key, v, t_ns, &added);

    if (added)
        c->st->series_added += group;
    if (created != NULL && isfinite(created->value) && created->value > 0 &&
        created->value * 1e9 < 1.8e19)
        return (uint64_t)(created->value * 1e9);
    return start;
}

/* ---- grouping ---------------------------------------------------------------- */

typedef struct sort_ctx {
    const sf_prom_sample *samples;
    const char *skip;
} sort_ctx;

static double le_of(const sf_prom_sample *s, const char *skip)
{
    for (uint16_t i = 0; skip && i < s->n_labels; i++)
        if (strcmp(s->labels[i].name, skip) == 0) {
            char *end;
            double d;

            if (strcasecmp(s->labels[i].value, "+Inf") == 0 ||
                strcasecmp(s->labels[i].value, "Inf") == 0)
                return INFINITY;
            d = strtod(s->labels[i].value, &end);
            return end != s->labels[i].value && *end == '\0' ? d : NAN;
        }
    return NAN;
}

static bool has_label(const sf_prom_sample *s, const char *name)
{
    for (uint16_t i = 0; name && i < s->n_labels; i++)
        if (strcmp(s->labels[i].name, name) == 0)
            return true;
    return false;
}

/* Compare the label sets of a and b, less `skip`. */
static int labels_cmp(const sf_prom_sample *a, const sf_prom_sample *b, const char *skip)
{
    uint16_t i = 0, j = 0;

    for (;;) {
        int d;

        while (i < a->n_labels && skip && strcmp(a->labels[i].name, skip) == 0)
            i++;
        while (j < b->n_labels && skip && strcmp(b->labels[j].name, skip) == 0)
            j++;
        if (i == a->n_labels || j == b->n_labels)
            return (i < a->n_labels) - (j < b->n_labels);
        d = strcmp(a->labels[i].name, b->labels[j].name);
        if (d == 0) {
            size_t la = a->labels[i].value_len, lb = b->labels[j].value_len;

            d = memcmp(a->labels[i].value, b->labels[j].value, la < lb ? la : lb);
            if (d == 0)
                d = (la > lb) - (la < lb);
        }
        if (d != 0)
            return d;
        i++;
        j++;
    }
}

static int sample_cmp(const void *x, const void *y, void *arg)
{
    const sort_ctx *sc = arg;
    const sf_prom_sample *a = &sc->samples[*(const uint32_t *)x];
    const sf_prom_sample *b = &sc->samples[*(const uint32_t *)y];
    int d = labels_cmp(a, b, sc->skip);
    double la, lb;

    if (d != 0)
        return d;
    la = le_of(a, sc->skip);
    lb = le_of(b, sc->skip);
    if (la < lb)
        return -1;
    if (la > lb)
        return 1;
    d = (*(const uint32_t *)x > *(const uint32_t *)y) - (*(const uint32_t *)x < *(const uint32_t *)y);
    return d;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);

    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Whether `s` is one of the parts of a histogram's or summary's point: a
 * bucket (`label` "le": NAME_bucket{le}) or a quantile (NAME{quantile}). */
static bool is_part(const sf_prom_family *f, const sf_prom_sample *s, const char *label)
{
    if (!has_label(s, label))
        return false;
    return strcmp(label, "le") == 0 ? ends_with(s->name, "_bucket") : strcmp(s->name, f->name) == 0;
}

/* The samples of one histogram or summary point: idx[i..end), which share
 * every label but `label`; how many (`group`) and how many are parts, and
 * its _sum, _count and _created samples and its first. */
typedef struct point_group {
    size_t end, group, parts;
    const sf_prom_sample *sum, *count, *created, *first;
} point_group;

static point_group scan_point(const conv *c, const sf_prom_family *f, const uint32_t *idx,
                              size_t i, size_t n, const char *label)
{
    point_group g = { .end = i };

    for (; g.end < n && labels_cmp(&c->r->samples[idx[i]], &c->r->samples[idx[g.end]], label) == 0;
         g.end++) {
        const sf_prom_sample *s = &c->r->samples[idx[g.end]];

        g.group++;
        if (is_part(f, s, label))
            g.parts++;
        else if (ends_with(s->name, "_sum"))
            g.sum = s;
        else if (ends_with(s->name, "_count"))
            g.count = s;
        else if (ends_with(s->name, "_created"))
            g.created = s;
        if (g.first == NULL)
            g.first = s;
    }
    return g;
}

/* ---- families ------------------------------------------------------------------ */

/* Room for one more pointer in the arena array at *arrp that holds n:
 * its capacity is a power of two from 8, so it grows when n is 0 or
 * reaches one. `arrp` points at the message's `T **data_points` (pointers
 * to messages share one representation). false when out of memory. */
static bool room_for_one(conv *c, void *arrp, size_t n)
{
    void **old, **np;

    if (n != 0 && (n < 8 || (n & (n - 1)) != 0))
        return true;
    np = alloc(c, (n ? n * 2 : 8) * sizeof(*np));
    if (np == NULL)
        return false;
    memcpy(&old, arrp, sizeof(old));
    if (n)
        memcpy(np, old, n * sizeof(*np));
    memcpy(arrp, &np, sizeof(np));
    return true;
}

static void add_number_point(conv *c, pb_metric *m, pb_ndp *p)
{
    pb_ndp ***pts;
    size_t *n;

    if (m->data_case == OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE) {
        pts = &m->gauge->data_points;
        n = &m->gauge->n_data_points;
    } else {
        pts = &m->sum->data_points;
        n = &m->sum->n_data_points;
    }
    if (!room_for_one(c, pts, *n))
        return;
    (*pts)[(*n)++] = p;
    c->st->points++;
}

static pb_metric *number_metric(conv *c, const char *name, const sf_prom_family *f, int kind,
                                bool monotonic)
{
    pb_metric *m = new_metric(c, name, f);

    if (m == NULL)
        return NULL;
    if (kind == 0) {
        m->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE;
        m->gauge = alloc(c, sizeof(*m->gauge));
        if (m->gauge == NULL)
            return NULL;
        opentelemetry__proto__metrics__v1__gauge__init(m->gauge);
    } else {
        m->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM;
        m->sum = alloc(c, sizeof(*m->sum));
        if (m->sum == NULL)
            return NULL;
        opentelemetry__proto__metrics__v1__sum__init(m->sum);
        m->sum->aggregation_temporality = CUMULATIVE;
        m->sum->is_monotonic = monotonic;
    }
    return m;
}

static pb_ndp *number_point(conv *c, const sf_prom_sample *s, const char *skip, double v)
{
    pb_ndp *p = alloc(c, sizeof(*p));

    if (p == NULL)
        return NULL;
    opentelemetry__proto__metrics__v1__number_data_point__init(p);
    p->attributes = attributes(c, s, skip, &p->n_attributes);
    p->time_unix_nano = point_time(c, s);
    p->value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_DOUBLE;
    p->as_double = v;
    return p;
}

/* Gauges, untyped, unknown: a gauge per sample name, a point per sample. */
static void convert_gauge(conv *c, const sf_prom_family *f, const uint32_t *idx, size_t n)
{
    pb_metric *m = NULL;

    for (size_t i = 0; i < n && !c->oom; i++) {
        const sf_prom_sample *s = &c->r->samples[idx[i]];
        pb_ndp *p;
        bool added;

        if (m == NULL || strcmp(m->name, s->name) != 0)
            m = number_metric(c, s->name, f, 0, false);
        if (m == NULL)
            return;
        starts_lookup(c->starts, series_key(s->name, s, NULL), 0, 0, &added);
        if (added)
            c->st->series_added++;
        p = number_point(c, s, NULL, s->value);
        if (p != NULL)
            add_number_point(c, m, p);
    }
}

/* Counters (monotonic), info and stateset (not): a sum per value name, its
 * _created read for the start time. */
static void convert_sum(conv *c, const sf_prom_family *f, const uint32_t *idx, size_t n,
                        bool monotonic)
{
    pb_metric *m = NULL;

    for (size_t i = 0; i < n && !c->oom;) {
        size_t j = i, group = 0;
        const sf_prom_sample *value = NULL, *created = NULL;

        /* a run of samples with the same labels: the value and its _created */
        for (; j < n && labels_cmp(&c->r->samples[idx[i]], &c->r->samples[idx[j]], NULL) == 0;
             j++) {
            const sf_prom_sample *s = &c->r->samples[idx[j]];

            group++;
            if (ends_with(s->name, "_created") && strcmp(s->name, f->name) != 0 &&
                f->type != SF_PROM_STATESET && f->type != SF_PROM_INFO)
                created = s;
            else if (value == NULL)
                value = s;
            else {
                /* a second value name with these labels (foo and foo_total) */
                pb_ndp *p;

                if (m == NULL || strcmp(m->name, s->name) != 0)
                    m = number_metric(c, s->name, f, 1, monotonic);
                if (m == NULL)
                    return;
                p = number_point(c, s, NULL, s->value);
                if (p == NULL)
                    return;
                p->start_time_unix_nano = start_time(c, series_key(s->name, s, NULL), s->value,
                                                     p->time_unix_nano, NULL, 1);
                add_number_point(c, m, p);
            }
        }
        if (value != NULL) {
            pb_ndp *p;

            if (m == NULL || strcmp(m->name, value->name) != 0)
                m = number_metric(c, value->name, f, 1, monotonic);
            if (m == NULL)
                return;
            p = number_point(c, value, NULL, value->value);
            if (p == NULL)
                return;
            p->start_time_unix_nano = start_time(c, series_key(value->name, value, NULL),
                                                 value->value, p->time_unix_nano, created,
                                                 group);
            add_number_point(c, m, p);
        }
        i = j;
    }
}

static void convert_histogram(conv *c, const sf_prom_family *f, const uint32_t *idx, size_t n)
{
    pb_metric *m = new_metric(c, f->name, f);

    if (m == NULL)
        return;
    m->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM;
    m->histogram = alloc(c, sizeof(*m->histogram));
    if (m->histogram == NULL)
        return;
    opentelemetry__proto__metrics__v1__histogram__init(m->histogram);
    m->histogram->aggregation_temporality = CUMULATIVE;
    for (size_t i = 0; i < n && !c->oom;) {
        point_group g = scan_point(c, f, idx, i, n, "le");
        size_t j = g.end, nb = g.parts, group = g.group;
        const sf_prom_sample *sum = g.sum, *count = g.count, *created = g.created, *first = g.first;
        pb_hdp *p;
        double prev = 0, inf_count = NAN, last_le = -INFINITY;
        bool bad = false;

        p = alloc(c, sizeof(*p));
        if (p == NULL)
            return;
        opentelemetry__proto__metrics__v1__histogram_data_point__init(p);
        p->bucket_counts = alloc(c, (nb + 1) * sizeof(*p->bucket_counts));
        p->explicit_bounds = alloc(c, (nb + 1) * sizeof(*p->explicit_bounds));
        if (p->bucket_counts == NULL || p->explicit_bounds == NULL)
            return;
        for (size_t k = i; k < j; k++) {
            const sf_prom_sample *s = &c->r->samples[idx[k]];
            double le;

            if (!is_part(f, s, "le"))
                continue;
            le = le_of(s, "le");
            if (isnan(le) || le <= last_le || !(s->value >= prev) || s->value >= 1.8e19) {
                bad = true;             /* unparsable or repeated le, decreasing counts */
                break;
            }
            last_le = le;
            if (isinf(le)) {
                inf_count = s->value;
                continue;
            }
            p->explicit_bounds[p->n_explicit_bounds++] = le;
            p->bucket_counts[p->n_bucket_counts++] = (uint64_t)(s->value - prev);
            prev = s->value;
        }
        if (count != NULL && count->value >= 0 && count->value < 1.8e19)
            p->count = (uint64_t)count->value;
        else if (!isnan(inf_count))
            p->count = (uint64_t)inf_count;
        else
            bad = true;                 /* no count: upstream drops the point */
        if (!bad && (double)p->count < prev)
            bad = true;
        if (bad || first == NULL) {
            c->st->dropped += 1;
            i = j;
            continue;
        }
        if (p->n_bucket_counts > 0 || nb > 0)
            p->bucket_counts[p->n_bucket_counts++] = p->count - (uint64_t)prev;
        else
            p->n_explicit_bounds = 0;
        if (sum != NULL) {
            p->_sum_case = OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT___SUM_SUM;
            p->sum = sum->value;
        }
        p->attributes = attributes(c, first, "le", &p->n_attributes);
        p->time_unix_nano = point_time(c, count ? count : first);
        p->start_time_unix_nano = start_time(c, series_key(f->name, first, "le"),
                                             (double)p->count, p->time_unix_nano, created, group);
        if (!room_for_one(c, &m->histogram->data_points, m->histogram->n_data_points))
            return;
        m->histogram->data_points[m->histogram->n_data_points++] = p;
        c->st->points++;
        i = j;
    }
}

static void convert_summary(conv *c, const sf_prom_family *f, const uint32_t *idx, size_t n)
{
    pb_metric *m = new_metric(c, f->name, f);

    if (m == NULL)
        return;
    m->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY;
    m->summary = alloc(c, sizeof(*m->summary));
    if (m->summary == NULL)
        return;
    opentelemetry__proto__metrics__v1__summary__init(m->summary);
    for (size_t i = 0; i < n && !c->oom;) {
        point_group g = scan_point(c, f, idx, i, n, "quantile");
        size_t j = g.end, nq = g.parts, group = g.group;
        const sf_prom_sample *sum = g.sum, *count = g.count, *created = g.created, *first = g.first;
        pb_sdp *p;

        p = alloc(c, sizeof(*p));
        if (p == NULL)
            return;
        opentelemetry__proto__metrics__v1__summary_data_point__init(p);
        p->quantile_values = alloc(c, (nq ? nq : 1) * sizeof(*p->quantile_values));
        if (p->quantile_values == NULL)
            return;
        for (size_t k = i; k < j; k++) {
            const sf_prom_sample *s = &c->r->samples[idx[k]];
            pb_vaq *q;
            double qv;

            if (!is_part(f, s, "quantile"))
                continue;
            qv = le_of(s, "quantile");
            if (isnan(qv))
                continue;               /* an unparsable quantile: left out */
            q = alloc(c, sizeof(*q));
            if (q == NULL)
                return;
            opentelemetry__proto__metrics__v1__summary_data_point__value_at_quantile__init(q);
            q->quantile = qv;
            q->value = s->value;
            p->quantile_values[p->n_quantile_values++] = q;
        }
        if (count == NULL || !(count->value >= 0 && count->value < 1.8e19)) {
            c->st->dropped += 1;        /* no count: upstream drops the point */
            i = j;
            continue;
        }
        p->count = (uint64_t)count->value;
        p->sum = sum ? sum->value : 0;
        p->attributes = attributes(c, first, "quantile", &p->n_attributes);
        p->time_unix_nano = point_time(c, count);
        p->start_time_unix_nano = start_time(c, series_key(f->name, first, "quantile"),
                                             (double)p->count, p->time_unix_nano, created, group);
        if (!room_for_one(c, &m->summary->data_points, m->summary->n_data_points))
            return;
        m->summary->data_points[m->summary->n_data_points++] = p;
        c->st->points++;
        i = j;
    }
}

/* The synthetic series of a scrape, as Prometheus adds them. */
static void synthetic(conv *c, const char *name, const char *help, double v)
{
    static const sf_prom_sample none = { 0 };
    sf_prom_family f = { .name = name, .help = help, .unit = "" };
    pb_metric *m = number_metric(c, name, &f, 0, false);
    pb_ndp *p;

    if (m == NULL)
        return;
    m->description = (char *)help;
    p = number_point(c, &none, NULL, v);
    if (p == NULL)
        return;
    p->time_unix_nano = c->info->time_ns;
    add_number_point(c, m, p);
}

sf_status sf_prom_convert(const sf_prom_result *r, const sf_prom_target *t,
                          const sf_prom_scrape_info *info, sf_prom_starts *starts,
                          sf_arena *arena, uint8_t **out, size_t *len,
                          sf_prom_convert_stats *stats)
{
    conv c = { .a = arena, .r = r, .t = t, .info = info, .starts = starts, .st = stats };
    pb_request *req;
    pb_rm *rm;
    pb_sm *sm;
    pb_resource *res;
    pb_scope *scope;
    size_t n_res = 0, scraped = 0;

    memset(stats, 0, sizeof(*stats));
    *out = NULL;
    *len = 0;
    starts->gen++;
    if (info->up && r != NULL && r->n_samples > 0) {
        size_t *first = alloc(&c, (r->n_families + 1) * sizeof(*first));
        uint32_t *idx = alloc(&c, r->n_samples * sizeof(*idx));

        if (c.oom)
            return SF_ENOMEM;
        /* counting sort of the kept samples by family, in text order */
        memset(first, 0, (r->n_families + 1) * sizeof(*first));
        for (size_t i = 0; i < r->n_samples; i++)
            if (!r->samples[i].duplicate)
                first[r->samples[i].family + 1]++;
        for (size_t f = 0; f < r->n_families; f++)
            first[f + 1] += first[f];
        for (size_t i = 0; i < r->n_samples; i++) {
            if (!r->samples[i].duplicate)
                idx[first[r->samples[i].family]++] = (uint32_t)i;
        }
        for (size_t f = r->n_families; f > 0; f--)
            first[f] = first[f - 1];
        first[0] = 0;
        for (size_t f = 0; f < r->n_families && !c.oom; f++) {
            const sf_prom_family *fam = &r->families[f];
            uint32_t *fi = idx + first[f];
            size_t n = first[f + 1] - first[f];
            sort_ctx sc = { .samples = r->samples, .skip = special_label(fam->type) };

            if (n == 0)
                continue;
            stats->samples_post += n;
            qsort_r(fi, n, sizeof(*fi), sample_cmp, &sc);
            switch (fam->type) {
            case SF_PROM_COUNTER:
                convert_sum(&c, fam, fi, n, true);
                break;
            case SF_PROM_INFO:
            case SF_PROM_STATESET:
                convert_sum(&c, fam, fi, n, false);
                break;
            case SF_PROM_HISTOGRAM:
                convert_histogram(&c, fam, fi, n);
                break;
            case SF_PROM_SUMMARY:
                convert_summary(&c, fam, fi, n);
                break;
            case SF_PROM_GAUGEHISTOGRAM:
                stats->dropped += n;    /* upstream does not convert them either */
                break;
            default:
                convert_gauge(&c, fam, fi, n);
                break;
            }
        }
        scraped = r->n_samples;
    }
    synthetic(&c, "up", "The scraping was successful", info->up ? 1 : 0);
    synthetic(&c, "scrape_duration_seconds", "Duration of the scrape", info->duration_s);
    synthetic(&c, "scrape_samples_scraped", "The number of samples the target exposed",
              (double)scraped);
    synthetic(&c, "scrape_samples_post_metric_relabeling",
              "The number of samples remaining after metric relabeling was applied",
              (double)stats->samples_post);
    synthetic(&c, "scrape_series_added", "The approximate number of new series in this scrape",
              (double)stats->series_added);
    if (c.oom)
        return SF_ENOMEM;
    if (info->up && !starts_rehash(starts, starts->n_slots, true))
        return SF_ENOMEM;

    res = alloc(&c, sizeof(*res));
    scope = alloc(&c, sizeof(*scope));
    sm = alloc(&c, sizeof(*sm));
    rm = alloc(&c, sizeof(*rm));
    req = alloc(&c, sizeof(*req));
    if (c.oom)
        return SF_ENOMEM;
    opentelemetry__proto__resource__v1__resource__init(res);
    res->attributes = alloc(&c, 5 * sizeof(*res->attributes));
    if (c.oom)
        return SF_ENOMEM;
    res->attributes[n_res++] = kv_str(&c, "service.name", t->job ? t->job : "");
    res->attributes[n_res++] = kv_str(&c, "service.instance.id", t->instance ? t->instance : "");
    res->attributes[n_res++] = kv_str(&c, "server.address", t->host ? t->host : "");
    res->attributes[n_res++] = kv_str(&c, "server.port", t->port ? t->port : "");
    res->attributes[n_res++] = kv_str(&c, "url.scheme", t->scheme ? t->scheme : "http");
    res->n_attributes = n_res;
    opentelemetry__proto__common__v1__instrumentation_scope__init(scope);
    scope->name = (char *)SF_PROM_SCOPE_NAME;
#ifdef SF_VERSION
    scope->version = (char *)SF_VERSION;
#endif
    opentelemetry__proto__metrics__v1__scope_metrics__init(sm);
    sm->scope = scope;
    sm->metrics = c.metrics;
    sm->n_metrics = c.n_metrics;
    opentelemetry__proto__metrics__v1__resource_metrics__init(rm);
    rm->resource = res;
    rm->scope_metrics = alloc(&c, sizeof(*rm->scope_metrics));
    if (c.oom)
        return SF_ENOMEM;
    rm->scope_metrics[0] = sm;
    rm->n_scope_metrics = 1;
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__init(req);
    req->resource_metrics = alloc(&c, sizeof(*req->resource_metrics));
    if (c.oom)
        return SF_ENOMEM;
    req->resource_metrics[0] = rm;
    req->n_resource_metrics = 1;
    *len = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__get_packed_size(req);
    *out = alloc(&c, *len);
    if (c.oom)
        return SF_ENOMEM;
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__pack(req, *out);
    return SF_OK;
}

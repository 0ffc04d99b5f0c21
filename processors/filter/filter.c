/* processors/filter/filter.c: the `filter` processor on the data path. Its
 * conditions on metric names become a codec edit (keep_metric_fn): the
 * codec asks once per metric, drops the ones that fail whole while still
 * reading and checking them, and counts their data points apart
 * (stats.filtered_items). consume counts those as dropped with reason
 * "filtered" and in otelcol_processor_filter_datapoints_filtered, so every
 * point received is still sent or counted. A batch left with no point
 * goes no further (the core). The edit is read-only after create: it runs
 * on receiver threads, concurrently; the match data of a call lives in the
 * edit's per-call state. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "filter.h"

#include "sf_log.h"
#include "sf_otlp_wire.h"

#include <pcre2.h>
#include <stdatomic.h>
#include <string.h>

/* The regexes' limits: a pattern that hits one counts as matching the
 * drop (fail closed: a dropped metric leaks nothing). */
#define SF_FILTER_MATCH_LIMIT 100000
#define SF_FILTER_DEPTH_LIMIT 1000

/* The type's own series (sf_counters.values). */
enum { FM_FILTERED, FM_MATCH_FAILED };

/* One name test: exact text, or a compiled pattern. */
typedef struct name_test {
    const char *text;
    size_t len;
    pcre2_code *code;           /* NULL: exact */
} name_test;

typedef struct filter_ctx {
    name_test *conds;           /* metrics.metric, with negate below */
    bool *negate;
    size_t n_conds;
    name_test *include, *exclude;
    size_t n_include, n_exclude;
    bool has_include;
    pcre2_match_context *mctx;
    _Atomic uint64_t match_failed;
    sf_otlp_edit edit;
} filter_ctx;

static void tests_free(name_test *t, size_t n)
{
    for (size_t i = 0; t != NULL && i < n; i++)
        pcre2_code_free(t[i].code);
    sf_free(t);
}

static void filter_destroy(sf_component *self)
{
    filter_ctx *f = sf_component_ctx(self);

    if (f == NULL)
        return;
    tests_free(f->conds, f->n_conds);
    tests_free(f->include, f->n_include);
    tests_free(f->exclude, f->n_exclude);
    sf_free(f->negate);
    pcre2_match_context_free(f->mctx);
    sf_free(f);
    sf_component_set_ctx(self, NULL);
}

static sf_status test_build(name_test *t, const char *text, bool regex)
{
    int err;
    PCRE2_SIZE off;

    t->text = text;
    t->len = strlen(text);
    if (!regex)
        return SF_OK;
    t->code = pcre2_compile((PCRE2_SPTR)text, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &off,
                            NULL);
    if (t->code == NULL)
        return SF_ENOMEM;       /* it compiled at load */
    (void)pcre2_jit_compile(t->code, PCRE2_JIT_COMPLETE);
    return SF_OK;
}

static sf_status names_build(const sf_filter_names *cfg, name_test **out, size_t *n)
{
    *n = 0;
    *out = sf_calloc(cfg->metric_names.n ? cfg->metric_names.n : 1, sizeof(**out));
    if (*out == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < cfg->metric_names.n; i++) {
        sf_status st = test_build(&(*out)[i], cfg->metric_names.v[i],
                                  cfg->match_type == SF_FILTER_REGEXP);

        if (st != SF_OK)
            return st;
        (*n)++;
    }
    return SF_OK;
}

/* 1: the test matches name[0, len); 0: it does not; -1: the pattern could
 * not be run (a limit, no memory). */
static int test_run(const filter_ctx *f, const name_test *t, void **state, const uint8_t *name,
                    size_t len)
{
    pcre2_match_data *md;
    int rc;

    if (t->code == NULL)
        return t->len == len && memcmp(t->text, name, len) == 0;
    md = *state;
    if (md == NULL && (md = *state = pcre2_match_data_create(1, NULL)) == NULL)
        return -1;
    rc = pcre2_match(t->code, name, len, 0, 0, md, f->mctx);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    return rc >= 0 ? 1 : -1;
}

/* Whether one of the n tests matches; a test that fails counts as `failed`. */
static bool any_match(const filter_ctx *f, const name_test *t, size_t n, void **state,
                      const uint8_t *name, size_t len, bool failed)
{
    for (size_t i = 0; i < n; i++) {
        int m = test_run(f, &t[i], state, name, len);

        if (m < 0)
            atomic_fetch_add_explicit((_Atomic uint64_t *)&f->match_failed, 1,
                                      memory_order_relaxed);
        if (m < 0 ? failed : m == 1)
            return true;
    }
    return false;
}

static bool keep_metric(const void *ctx, void **state, const uint8_t *name, size_t len)
{
    const filter_ctx *f = ctx;

    for (size_t i = 0; i < f->n_conds; i++) {
        int m = test_run(f, &f->conds[i], state, name, len);

        if (m < 0) {
            atomic_fetch_add_explicit((_Atomic uint64_t *)&f->match_failed, 1,
                                      memory_order_relaxed);
            return false;       /* fail closed */
        }
        if ((m == 1) != f->negate[i])
            return false;
    }
    /* a failed pattern: not included, or excluded (dropped either way) */
    if (f->has_include && !any_match(f, f->include, f->n_include, state, name, len, false))
        return false;
    return !any_match(f, f->exclude, f->n_exclude, state, name, len, true);
}

static void release(const void *ctx, void *state)
{
    (void)ctx;
    pcre2_match_data_free(state);
}

static sf_status filter_create(sf_component *self, const void *config)
{
    const sf_filter_config *cfg = config;
    const sf_filter_metrics *m = &cfg->metrics;
    filter_ctx *f = sf_calloc(1, sizeof(*f));
    sf_status st = SF_ENOMEM;

    if (f == NULL)
        return SF_ENOMEM;
    sf_component_set_ctx(self, f);
    f->conds = sf_calloc(m->metric.n ? m->metric.n : 1, sizeof(*f->conds));
    f->negate = sf_calloc(m->metric.n ? m->metric.n : 1, sizeof(*f->negate));
    f->mctx = pcre2_match_context_create(NULL);
    if (f->conds == NULL || f->negate == NULL || f->mctx == NULL)
        goto fail;
    pcre2_set_match_limit(f->mctx, SF_FILTER_MATCH_LIMIT);
    pcre2_set_depth_limit(f->mctx, SF_FILTER_DEPTH_LIMIT);
    for (size_t i = 0; i < m->metric.n; i++) {
        if ((st = test_build(&f->conds[i], m->metric.v[i].text, m->metric.v[i].regex)) != SF_OK)
            goto fail;
        f->negate[i] = m->metric.v[i].negate;
        f->n_conds++;
    }
    f->has_include = m->include.present;
    if ((st = names_build(&m->include, &f->include, &f->n_include)) != SF_OK ||
        (st = names_build(&m->exclude, &f->exclude, &f->n_exclude)) != SF_OK)
        goto fail;
    f->edit.ctx = f;
    f->edit.keep_metric_fn = keep_metric;
    f->edit.release = release;
    return SF_OK;

fail:
    filter_destroy(self);
    return st == SF_OK ? SF_ENOMEM : st;
}

static const sf_otlp_edit *filter_edit(const sf_component *self, sf_signal signal)
{
    const filter_ctx *f = sf_component_ctx(self);

    return signal == SF_SIGNAL_METRICS ? &f->edit : NULL;
}

static sf_status filter_consume(sf_component *self, sf_request *batch)
{
    sf_counters *counters = sf_component_counters(self);
    filter_ctx *f = sf_component_ctx(self);
    /* the core ran this processor's edit just before (sf_component.h); a
     * batch that reaches here without it goes no further (fail closed) */
    sf_status st = batch->edited_by == self ? batch->edit_status : SF_FILTER;
    const size_t filtered = st == SF_OK ? batch->stats.filtered_items : 0;
    uint64_t failed = atomic_exchange_explicit(&f->match_failed, 0, memory_order_relaxed);

    sf_count(&counters->values[FM_MATCH_FAILED], failed);
    sf_count(&counters->incoming_items, batch->spans + filtered);
    if (st != SF_OK) {
        bool memory = st == SF_ENOMEM;

        sf_count(&counters->dropped_spans[memory ? SF_REASON_MEMORY_LIMIT
                                                 : SF_REASON_FILTER_FAILED], batch->spans);
        sf_warn("processor %s: dropped a batch of %zu %s its conditions could not be run on "
                "(%s)", sf_component_id(self), batch->spans, sf_signal_items(batch->signal),
                sf_status_str(st));
        return memory ? SF_ENOMEM : SF_FILTER;
    }
    sf_count(&counters->dropped_spans[SF_REASON_FILTERED], filtered);
    sf_count(&counters->values[FM_FILTERED], filtered);
    sf_count(&counters->outgoing_items, batch->spans);
    return SF_OK;
}

static const sf_metric_row filter_metric_rows[] = {
    [FM_FILTERED] = { .name = "otelcol_processor_filter_datapoints_filtered",
      .help = "Data points of the metrics the filter dropped." },
    [FM_MATCH_FAILED] = { .name = "spanfence_processor_filter_match_failed",
      .help = "Name patterns that hit a match limit (the metric was dropped: fail closed)." },
    { 0 }
};

const sf_component_type sf_filter_processor_type = {
    .name = "filter",
    .kind = SF_KIND_PROCESSOR,
    .signals = SF_SIGNALS_METRICS,
    .description = "drops metrics by name (upstream's conditions on the name, include and "
                   "exclude), counting their data points",
    .config_size = sizeof(sf_filter_config),
    .config_map = sf_filter_config_map,
    .check = sf_filter_check,
    .create = filter_create,
    .consume = filter_consume,
    .edit = filter_edit,
    .destroy = filter_destroy,
    .metric_rows = filter_metric_rows,
};

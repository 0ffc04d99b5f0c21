/* processors/filter/filter.c: the `filter` processor on the data path. Its
 * conditions on metric names become a codec edit (keep_metric_fn): the
 * codec asks once per metric, drops the ones that fail whole while still
 * reading and checking them, and counts their data points apart
 * (stats.filtered_items). The core counts those as dropped with reason
 * "filtered" (those of a metric whose pattern hit a match limit as
 * "filter_failed"), so every point received is still sent or counted;
 * filter_edited adds them to otelcol_processor_filter_datapoints_filtered. The edit is read-only after
 * create: it runs on receiver threads, concurrently; the match data of a
 * call lives in the edit's per-call state. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "filter.h"

#include "sf_log.h"
#include "sf_otlp_wire.h"

#include <pcre2.h>
#include <string.h>

/* The regexes' limits: a metric whose pattern hits one is dropped (fail
 * closed: a dropped metric leaks nothing) and counted as filter_failed. */
#define SF_FILTER_MATCH_LIMIT 100000
#define SF_FILTER_DEPTH_LIMIT 1000

/* The type's own series (sf_counters.values). */
enum { FM_FILTERED };

/* One name to match: exact text, or a compiled pattern. */
typedef struct name_match {
    const char *text;
    size_t len;
    pcre2_code *code;           /* NULL: exact */
} name_match;

typedef struct filter_ctx {
    name_match *conds;           /* metrics.metric, with negate below */
    bool *negate;
    size_t n_conds;
    name_match *include, *exclude;
    size_t n_include, n_exclude;
    bool has_include;
    pcre2_match_context *mctx;
    sf_otlp_edit edit;
} filter_ctx;

static void matches_free(name_match *t, size_t n)
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
    matches_free(f->conds, f->n_conds);
    matches_free(f->include, f->n_include);
    matches_free(f->exclude, f->n_exclude);
    sf_free(f->negate);
    pcre2_match_context_free(f->mctx);
    sf_free(f);
    sf_component_set_ctx(self, NULL);
}

static sf_status match_build(name_match *t, const char *text, bool regex)
{
    int err;
    PCRE2_SIZE off;

    t->text = text;
    t->len = strlen(text);
    if (!regex)
        return SF_OK;
    /* $ only at the end, as Go's regexp (upstream) reads it */
    t->code = pcre2_compile((PCRE2_SPTR)text, PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &err, &off, NULL);
    if (t->code == NULL)
        return SF_ENOMEM;       /* it compiled at load */
    (void)pcre2_jit_compile(t->code, PCRE2_JIT_COMPLETE);
    return SF_OK;
}

static sf_status names_build(const sf_filter_names *cfg, name_match **out, size_t *n)
{
    *n = 0;
    *out = sf_calloc(cfg->metric_names.n ? cfg->metric_names.n : 1, sizeof(**out));
    if (*out == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < cfg->metric_names.n; i++) {
        sf_status st = match_build(&(*out)[i], cfg->metric_names.v[i],
                                  cfg->match_type == SF_FILTER_REGEXP);

        if (st != SF_OK)
            return st;
        (*n)++;
    }
    return SF_OK;
}

/* 1: the match matches name[0, len) (valid UTF-8: the codec checked it);
 * 0: it does not; -1: no memory for the match data; -2: the pattern hit a
 * limit. */
static int match_run(const filter_ctx *f, const name_match *t, void **state,
                     const uint8_t *name, size_t len)
{
    pcre2_match_data *md;
    int rc;

    if (t->code == NULL)
        return t->len == len && memcmp(t->text, name, len) == 0;
    md = *state;
    if (md == NULL && (md = *state = pcre2_match_data_create(1, NULL)) == NULL)
        return -1;
    rc = pcre2_match(t->code, name, len, 0, PCRE2_NO_UTF_CHECK, md, f->mctx);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    return rc >= 0 ? 1 : -2;
}

/* The verdict of the n matches on a metric dropped when one of them
 * matches (exclude) or when none does (include, `inverted`). */
static int names_verdict(const filter_ctx *f, const name_match *t, size_t n, bool inverted,
                         void **state, const uint8_t *name, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        int m = match_run(f, &t[i], state, name, len);

        if (m == -1)
            return SF_OTLP_METRIC_NOMEM;
        if (m == -2)
            return SF_OTLP_METRIC_FAILED;
        if (m == 1)
            return inverted ? SF_OTLP_METRIC_KEEP : SF_OTLP_METRIC_DROP;
    }
    return inverted ? SF_OTLP_METRIC_DROP : SF_OTLP_METRIC_KEEP;
}

static int keep_metric(const void *ctx, void **state, const uint8_t *name, size_t len)
{
    const filter_ctx *f = ctx;

    for (size_t i = 0; i < f->n_conds; i++) {
        int m = match_run(f, &f->conds[i], state, name, len);

        if (m == -1)
            return SF_OTLP_METRIC_NOMEM;
        if (m == -2)
            return SF_OTLP_METRIC_FAILED;   /* fail closed */
        if ((m == 1) != f->negate[i])
            return SF_OTLP_METRIC_DROP;
    }
    if (f->has_include) {
        int v = names_verdict(f, f->include, f->n_include, true, state, name, len);

        if (v != SF_OTLP_METRIC_KEEP)
            return v;
    }
    return names_verdict(f, f->exclude, f->n_exclude, false, state, name, len);
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
        goto out_destroy;
    pcre2_set_match_limit(f->mctx, SF_FILTER_MATCH_LIMIT);
    pcre2_set_depth_limit(f->mctx, SF_FILTER_DEPTH_LIMIT);
    for (size_t i = 0; i < m->metric.n; i++) {
        if ((st = match_build(&f->conds[i], m->metric.v[i].text, m->metric.v[i].regex)) != SF_OK)
            goto out_destroy;
        f->negate[i] = m->metric.v[i].negate;
        f->n_conds++;
    }
    f->has_include = m->include.present;
    if ((st = names_build(&m->include, &f->include, &f->n_include)) != SF_OK ||
        (st = names_build(&m->exclude, &f->exclude, &f->n_exclude)) != SF_OK)
        goto out_destroy;
    f->edit.ctx = f;
    f->edit.keep_metric_fn = keep_metric;
    f->edit.release = release;
    return SF_OK;

out_destroy:
    filter_destroy(self);
    return st == SF_OK ? SF_ENOMEM : st;
}

static const sf_otlp_edit *filter_edit(const sf_component *self, sf_signal signal)
{
    const filter_ctx *f = sf_component_ctx(self);

    return signal == SF_SIGNAL_METRICS ? &f->edit : NULL;
}

/* The core counted the metrics' points the edit dropped (filtered, or
 * filter_failed for a name pattern past its match limit); the filtered
 * ones are also the filter's own series, and the failed ones are said. */
static void filter_edited(sf_component *self, const sf_request *batch)
{
    const size_t failed = batch->stats.filter_failed_items;

    if (failed > 0)
        sf_warn("processor %s: dropped %zu %s whose name patterns hit a match limit",
                sf_component_id(self), failed, sf_signal_items(batch->signal));
    sf_count(&sf_component_counters(self)->values[FM_FILTERED],
             batch->stats.filtered_items - failed);
}

static const sf_metric_row filter_metric_rows[] = {
    [FM_FILTERED] = { .name = "otelcol_processor_filter_datapoints_filtered",
      .help = "Data points of the metrics the filter dropped." },
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
    .edit = filter_edit,
    .edit_failure = "its conditions could not be run on",
    .edited = filter_edited,
    .destroy = filter_destroy,
    .metric_rows = filter_metric_rows,
};

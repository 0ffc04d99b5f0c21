/* pipeline/extensions/trace_control/trace_control_latency_config.c: the
 * latency guard's config: a target's `engine_metrics` (where its engine's
 * latency histograms are scraped), auto_revert's `max_latency_increase`
 * (how far they may rise during a window), and the checks between them.
 * The guard itself is trace_control_latency.c. */
#include "trace_control.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const metric_keys[SF_TC_LAT_COUNT] = { "ttft", "itl" };

static sf_status string_of(sf_cfg_ctx *ctx, const sf_node *v, const char *sub, char **out)
{
    if (v->kind != SF_NODE_SCALAR || v->is_null || v->len == 0) {
        sf_cfg_error(ctx, v, sub, "expected a string, got %s",
                     v->kind == SF_NODE_MAP ? "a mapping" : v->kind == SF_NODE_SEQ ? "a list"
                                                                                 : "an empty value");
        return SF_CONFIG;
    }
    *out = sf_cfg_strdup(ctx, v->text, v->len);
    return *out ? SF_OK : SF_ENOMEM;
}

/* A whole decimal integer of s, within [lo, hi]. */
static bool int_in(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long v;

    if (*s == '\0' || *s == '+' || *s == '-' || *s == ' ')
        return false;
    v = strtoll(s, &end, 10);
    if (*end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static const char *const engine_metrics_keys[] = { "receiver", "job", "ttft", "itl",
                                                    "baseline_scrapes" };

static sf_status engine_metrics_key(sf_cfg_ctx *ctx, const sf_node *it, const char *sub,
                                    size_t w, void *arg)
{
    sf_tc_engine_metrics *em = arg;
    sf_status r;

    switch (w) {
    case 0:
        r = string_of(ctx, it, sub, &em->receiver);
        if (r == SF_OK && strcmp(em->receiver, "prometheus") != 0 &&
            strncmp(em->receiver, "prometheus/", 11) != 0) {
            sf_cfg_error(ctx, it, sub, "'%s' is not a prometheus receiver (engine_metrics "
                         "reads the histograms a prometheus receiver scrapes)", em->receiver);
            r = SF_CONFIG;
        }
        return r;
    case 1:
        return string_of(ctx, it, sub, &em->job);
    case 2:
        return string_of(ctx, it, sub, &em->metric[SF_TC_LAT_TTFT]);
    case 3:
        return string_of(ctx, it, sub, &em->metric[SF_TC_LAT_ITL]);
    default:
        if (it->kind != SF_NODE_SCALAR || !it->plain ||
            !int_in(it->text, 1, SF_TC_MAX_BASELINE_SCRAPES, &em->baseline_scrapes)) {
            sf_cfg_error(ctx, it, sub, "invalid value '%s' (expected an integer 1 to %d)",
                         it->kind == SF_NODE_SCALAR ? it->text : "", SF_TC_MAX_BASELINE_SCRAPES);
            return SF_CONFIG;
        }
        return SF_OK;
    }
}

/* `engine_metrics`: {receiver, job, ttft, itl, baseline_scrapes}. The
 * receiver must be a prometheus receiver (its id is `prometheus` or
 * `prometheus/<name>`); that the config has it in a metrics pipeline is
 * checked when the extension is built, as for engine_log. */
sf_status sf_tc_parse_engine_metrics(sf_cfg_ctx *ctx, const sf_node *v, const char *path,
                                     sf_tc_engine_metrics *em)
{
    sf_status st;

    em->baseline_scrapes = 5;
    st = sf_tc_parse_map(ctx, v, path, engine_metrics_keys,
                         sizeof(engine_metrics_keys) / sizeof(engine_metrics_keys[0]),
                         engine_metrics_key, em);
    if (v->kind != SF_NODE_MAP || st == SF_ENOMEM)
        return st;
    if (st == SF_OK && (em->receiver == NULL || em->job == NULL)) {
        sf_cfg_error(ctx, v, path, "missing required key '%s'",
                     em->receiver == NULL ? "receiver" : "job");
        st = SF_CONFIG;
    }
    if (em->metric[SF_TC_LAT_TTFT] == NULL)
        em->metric[SF_TC_LAT_TTFT] = SF_TC_LAT_TTFT_METRIC;
    if (em->metric[SF_TC_LAT_ITL] == NULL)
        em->metric[SF_TC_LAT_ITL] = SF_TC_LAT_ITL_METRIC;
    return st;
}

bool sf_tc_latency_limit_parse(const char *s, sf_tc_latency_limit *lim)
{
    size_t n = strlen(s);
    char num[32];
    char *end;
    double v, scale = 1;

    if (n < 2 || n >= sizeof(num))
        return false;
    if (s[n - 1] == 'x') {
        memcpy(num, s, n - 1);
        num[n - 1] = '\0';
        lim->is_ratio = true;
    } else if (s[0] == '+') {
        if (n > 3 && strcmp(s + n - 2, "ms") == 0) {
            n -= 2;
            scale = 0.001;
        } else if (s[n - 1] == 's') {
            n -= 1;
        } else {
            return false;
        }
        memcpy(num, s + 1, n - 1);
        num[n - 1] = '\0';
        lim->is_ratio = false;
    } else {
        return false;
    }
    /* digits and one point only: no "inf", "nan", signs or exponents */
    if (num[0] == '\0' || strspn(num, "0123456789.") != strlen(num) ||
        strchr(num, '.') != strrchr(num, '.') || strcmp(num, ".") == 0)
        return false;
    v = strtod(num, &end);
    if (*end != '\0' || !isfinite(v))
        return false;
    v *= scale;
    if (lim->is_ratio ? v < 1.0 : v <= 0.0)
        return false;
    lim->value = v;
    lim->set = true;
    return true;
}

/* auto_revert.max_latency_increase: {ttft: 2x, itl: '+50ms', min_samples: 20}. */
sf_status sf_tc_parse_latency_limits(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    sf_tc_latency_limits *ll = field;
    sf_status st = SF_OK;
    bool any = false;

    ll->min_samples = 20;
    if (node == NULL || (node->kind == SF_NODE_SCALAR && node->is_null))
        return SF_OK;
    ll->present = true;
    if (node->kind != SF_NODE_MAP) {
        sf_cfg_error(ctx, node, NULL, "expected a mapping (ttft, itl, min_samples), e.g. "
                     "{ttft: 2x, itl: '+50ms'}");
        return SF_CONFIG;
    }
    for (size_t j = 0; j < node->n; j++) {
        const char *k = node->keys[j]->text;
        const sf_node *it = node->items[j];
        size_t m;

        for (m = 0; m < SF_TC_LAT_COUNT; m++)
            if (strcmp(k, metric_keys[m]) == 0)
                break;
        if (m < SF_TC_LAT_COUNT) {
            if (it->kind != SF_NODE_SCALAR || it->is_null ||
                !sf_tc_latency_limit_parse(it->text, &ll->m[m])) {
                sf_cfg_error(ctx, it, k, "invalid increase '%s' (expected a ratio of at least 1 "
                             "such as '2x', or a time such as '+50ms' or '+1s')",
                             it->kind == SF_NODE_SCALAR ? it->text : "");
                st = SF_CONFIG;
                continue;
            }
            any = true;
        } else if (strcmp(k, "min_samples") == 0) {
            if (it->kind != SF_NODE_SCALAR || !it->plain ||
                !int_in(it->text, 1, 1000000000, &ll->min_samples)) {
                sf_cfg_error(ctx, it, k, "invalid value '%s' (expected an integer 1 to "
                             "1000000000)", it->kind == SF_NODE_SCALAR ? it->text : "");
                st = SF_CONFIG;
            }
        } else {
            sf_cfg_error(ctx, node->keys[j], k, "unknown key '%s' (expected ttft, itl, "
                         "min_samples)", k);
            st = SF_CONFIG;
        }
    }
    if (st == SF_OK && !any) {
        sf_cfg_error(ctx, node, NULL, "no limit is set (expected ttft, itl or both, e.g. "
                     "{ttft: 2x, itl: '+50ms'})");
        st = SF_CONFIG;
    }
    return st;
}

/* A limit on latency must have latency to read: every target then names
 * its engine's metrics (a target left out would run unguarded, silently). */
sf_status sf_tc_check_latency(sf_cfg_ctx *ctx, const sf_tc_config *c)
{
    const sf_node *ar = sf_node_get(sf_cfg_value(ctx), "auto_revert");
    const sf_node *at = sf_node_get(ar, "max_latency_increase");
    sf_status st = SF_OK;

    if (!c->auto_revert.max_latency_increase.present)
        return SF_OK;
    for (size_t i = 0; i < c->targets.n; i++) {
        if (c->targets.v[i].engine_metrics.receiver != NULL)
            continue;
        sf_cfg_error(ctx, at != NULL ? at : sf_cfg_node(ctx), "auto_revert.max_latency_increase",
                     "target '%s' has no engine_metrics: the latency guard needs its engine's "
                     "histograms (engine_metrics: {receiver: prometheus/<name>, job: <job_name>})",
                     c->targets.v[i].id);
        st = SF_CONFIG;
    }
    return st;
}

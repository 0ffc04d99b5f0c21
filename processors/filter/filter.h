/* processors/filter/filter.h: the `filter` processor's config: upstream's
 * filterprocessor for metrics by name, the one thing spanfence filters.
 * A metric is dropped (with every data point in it, counted) when one of
 * the `metrics.metric` conditions holds, or (instead of conditions, as
 * upstream) when `metrics.include` names some metrics and not it, or when
 * `metrics.exclude` names it. Conditions are
 * upstream's OTTL on the metric's name only:
 *     name == "x"    name != "x"    IsMatch(name, "re")    not IsMatch(name, "re")
 * Everything else upstream's filter does (spans, log records, data point
 * conditions, expressions, resource attributes) is refused at load with
 * what to use instead, never ignored. */
#ifndef SF_PROCESSORS_FILTER_H
#define SF_PROCESSORS_FILTER_H

#include <stdbool.h>
#include <stddef.h>

#include "sf_component.h"

/* One condition: on the metric's name, `text` exactly (==) or the PCRE2
 * pattern `text` matching anywhere in it (IsMatch, as Go's regexp does);
 * `negate`: != or not IsMatch. The metric is dropped when it holds. */
typedef struct sf_filter_cond {
    const char *text;
    bool regex;
    bool negate;
} sf_filter_cond;

typedef struct sf_filter_conds {
    size_t n;
    sf_filter_cond *v;
} sf_filter_conds;

/* The legacy `include` / `exclude`: metric names, exact or patterns. */
enum { SF_FILTER_STRICT = 0, SF_FILTER_REGEXP };

typedef struct sf_filter_names {
    bool present;
    char *match_type_text;      /* as written: required */
    int match_type;             /* SF_FILTER_STRICT, SF_FILTER_REGEXP: from the text, at check */
    sf_strlist metric_names;
} sf_filter_names;

typedef struct sf_filter_metrics {
    bool present;
    sf_filter_conds metric;
    sf_filter_names include, exclude;
} sf_filter_metrics;

typedef struct sf_filter_config {
    int error_mode;             /* propagate|ignore|silent: a name is always readable */
    sf_filter_metrics metrics;
} sf_filter_config;

extern const sf_config_row sf_filter_config_map[];
sf_status sf_filter_check(sf_cfg_ctx *ctx, void *config);

/* The component type (filter.c); the registry lists it. */
extern const sf_component_type sf_filter_processor_type;

#endif

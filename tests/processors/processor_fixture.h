/* tests/processors/processor_fixture.h: one processor made as at start from
 * a config that goes through the real loader: a minimal config around a
 * `processors:` section, the processor `id` in its traces pipeline (or
 * another signal's), created by its type (test_transform_rules,
 * test_transform_signals, test_attributes, test_signal_fence, test_filter).
 * Include after cmocka.h. */
#ifndef SF_TEST_PROCESSOR_FIXTURE_H
#define SF_TEST_PROCESSOR_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/sf_core.h"

typedef struct pfx_run {
    sf_config *cfg;
    sf_component comp;
    sf_otlp_stats stats;
    char errors[8192];          /* the loader's messages, when it refused */
} pfx_run;

/* Load the config whose processors section is `procs` (each processor
 * indented two spaces) and create processor `id`, in a pipeline of
 * `signal` ("traces", "logs", "metrics"), named `file` in messages.
 * SF_CONFIG leaves the messages in r->errors (and r->cfg NULL). */
static inline sf_status pfx_load_in(pfx_run *r, const char *file, const char *procs,
                                    const char *id, const char *signal)
{
    static const char base[] =
        "receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:4317\n"
        "exporters:\n  otlphttp:\n    endpoint: http://127.0.0.1:4319\n"
        "processors:\n%s"
        "service:\n  pipelines:\n    %s:\n      receivers: [otlp]\n"
        "      processors: [%s]\n      exporters: [otlphttp]\n";
    size_t n = sizeof(base) + strlen(procs) + strlen(id) + strlen(signal);
    char *yaml = malloc(n);
    sf_diag *d = sf_diag_create(NULL);
    sf_config_component *c;
    sf_status st;
    size_t at = 0;

    memset(r, 0, sizeof(*r));
    snprintf(yaml, n, base, procs, signal, id);
    st = sf_config_load_string(file, yaml, strlen(yaml), d, &r->cfg);
    free(yaml);
    for (size_t i = 0; i < sf_diag_count(d) && at < sizeof(r->errors); i++)
        at += (size_t)snprintf(r->errors + at, sizeof(r->errors) - at, "%s\n",
                               sf_diag_message(d, i));
    sf_diag_destroy(d);
    if (st != SF_OK) {
        if (getenv("SF_TEST_VERBOSE") != NULL)
            fprintf(stderr, "%s", r->errors);
        sf_config_destroy(r->cfg);
        r->cfg = NULL;
        return st;
    }
    c = sf_config_find(r->cfg, id);
    assert_non_null(c);
    r->comp.type = c->type;
    r->comp.id = c->id;
    r->comp.config = c->config;
    assert_int_equal(c->type->create(&r->comp, c->config), SF_OK);
    return SF_OK;
}

/* pfx_load_in a traces pipeline. */
static inline sf_status pfx_load(pfx_run *r, const char *file, const char *procs, const char *id)
{
    return pfx_load_in(r, file, procs, id, "traces");
}

/* The transform's settings `body` (indented four spaces) as processor
 * `transform`. */
static inline sf_status pfx_load_transform(pfx_run *r, const char *file, const char *body)
{
    size_t n = strlen(body) + 16;
    char *procs = malloc(n);
    sf_status st;

    snprintf(procs, n, "  transform:\n%s", body);
    st = pfx_load(r, file, procs, "transform");
    free(procs);
    return st;
}

/* The transform settings the logs and metrics tests share: a resource and
 * log allowlist, a value rule, the body kept in one shape, severity_text by
 * rule; a metric metadata and datapoint allowlist, the name, description
 * and unit rules. */
#define PFX_LOG_STATEMENTS                                                                 \
    "    log_statements:\n"                                                                \
    "      - context: resource\n"                                                          \
    "        statements:\n"                                                                \
    "          - keep_keys(attributes, [\"service.name\"])\n"                               \
    "      - context: log\n"                                                               \
    "        statements:\n"                                                                \
    "          - keep_keys(attributes, [\"code\", \"level\"])\n"                            \
    "          - delete_key(attributes, \"level\") where not IsMatch(attributes[\"level\"], " \
    "\"^(info|warn|error)$\")\n"                                                           \
    "          - set(body, nil) where not IsMatch(body, \"^request [0-9a-f]{8} done$\")\n"   \
    "          - set(severity_text, \"\") where not IsMatch(severity_text, \"^(INFO|WARN)$\")\n"
#define PFX_METRIC_STATEMENTS                                                              \
    "    metric_statements:\n"                                                             \
    "      - context: metric\n"                                                            \
    "        statements:\n"                                                                \
    "          - keep_keys(metadata, [])\n"                                                 \
    "          - set(name, \"other\") where not IsMatch(name, \"^sglang:[a-z_]{1,64}$\")\n"  \
    "          - set(description, \"\")\n"                                                  \
    "          - set(unit, \"\") where not IsMatch(unit, \"^(s|1|By)$\")\n"                  \
    "      - context: datapoint\n"                                                         \
    "        statements:\n"                                                                \
    "          - keep_keys(attributes, [\"model_name\"])\n"

static inline void pfx_unload(pfx_run *r)
{
    r->comp.type->destroy(&r->comp);
    sf_config_destroy(r->cfg);
}

#endif

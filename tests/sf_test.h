/* tests/sf_test.h: helpers shared by the cmocka tests (header-only). */
#ifndef SF_TEST_H
#define SF_TEST_H

#include <stdio.h>
#include <string.h>

#include "sf_config.h"

/* Load `yaml` as the file `name` and return every diagnostic, one per line
 * ("" when the config is clean), in a static buffer. */
static inline const char *sf_test_config_messages(const char *name, const char *yaml)
{
    static char out[8192];
    sf_diag *d = sf_diag_create(name);
    sf_config *cfg = NULL;
    size_t n = 0;

    sf_config_load_string(name, yaml, strlen(yaml), d, &cfg);
    out[0] = '\0';
    for (size_t i = 0; i < sf_diag_count(d) && n < sizeof(out); i++)
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%s\n", sf_diag_message(d, i));
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    return out;
}

/* The diagnostics of "x.yaml": an otlp receiver and exporter `id` whose
 * settings are `exporter_yaml` (indented by 4), in one traces pipeline. The
 * exporter's key is on line 6. */
static inline const char *sf_test_load_exporter(const char *id, const char *exporter_yaml)
{
    char yaml[4096];

    snprintf(yaml, sizeof(yaml),
             "receivers:\n  otlp:\n    protocols:\n      grpc:\n"
             "exporters:\n  %s:\n%s"
             "service:\n  pipelines:\n    traces:\n      receivers: [otlp]\n"
             "      exporters: [%s]\n", id, exporter_yaml, id);
    return sf_test_config_messages("x.yaml", yaml);
}

#endif

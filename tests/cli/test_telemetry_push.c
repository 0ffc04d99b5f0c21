/* tests/cli/test_telemetry_push.c: the periodic reader from YAML to the
 * components that run it: what the loader decodes (the URL upstream's SDK
 * would post to, TLS from the scheme or `insecure`, headers and
 * headers_list as otelconf merges them), the layer telemetry_push.c writes
 * and the config it gives once merged (the first metrics pipeline's
 * processors, values that survive the round trip byte for byte, ${env}
 * not expanded twice), its refusals (ids taken, no endpoint to scrape),
 * and every allocation of the whole path failing once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "internal/sf_config_int.h"
#include "internal/sf_core.h"
#include "pipeline/cli/sf_cli.h"
#include "sf_alloc.h"
#include "sf_config.h"
#include "tests/sf_torture.h"

#define BASE \
    "receivers: {otlp: {protocols: {http: {endpoint: 127.0.0.1:4318}}}}\n" \
    "processors:\n" \
    "  memory_limiter: {check_interval: 1s, limit_mib: 64}\n" \
    "  filter/fence: {metrics: {metric: ['name == \"x\"']}}\n" \
    "exporters: {debug: }\n"

#define PIPELINES \
    "  pipelines:\n" \
    "    traces: {receivers: [otlp], exporters: [debug]}\n" \
    "    metrics/first: {receivers: [otlp], processors: [memory_limiter, filter/fence], " \
    "exporters: [debug]}\n" \
    "    metrics/second: {receivers: [otlp], exporters: [debug]}\n"

static sf_config *load(const char *yaml, sf_status want)
{
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;
    sf_status st = sf_config_load_string("t.yaml", yaml, strlen(yaml), d, &cfg);

    if (st != want)
        sf_diag_print(d);
    assert_int_equal(st, want);
    sf_diag_destroy(d);
    return cfg;
}

static const char *header(const sf_config_push_reader *pr, const char *name)
{
    for (size_t i = 0; i < pr->n_headers; i++)
        if (strcmp(pr->headers[i].name, name) == 0)
            return pr->headers[i].value;
    return NULL;
}

static void test_decoded_http(void **state)
{
    static const char yaml[] = BASE
        "service:\n"
        "  telemetry:\n"
        "    metrics:\n"
        "      address: 127.0.0.1:9999\n"
        "      readers:\n"
        "        - periodic:\n"
        "            exporter:\n"
        "              otlp:\n"
        "                protocol: http/protobuf\n"
        "                endpoint: https://gw.example:4318\n"
        "                headers: [{name: x-api-key, value: from-headers}]\n"
        "                headers_list: ' x-api-key = from-list , x-tenant = vm%2D1%20a ,'\n"
        PIPELINES;
    sf_config *cfg = load(yaml, SF_OK);
    const sf_config_push_reader *pr;

    (void)state;
    assert_int_equal(cfg->n_push_readers, 1);
    pr = &cfg->push_readers[0];
    /* upstream's SDK posts to /v1/metrics when the URL has no path */
    assert_string_equal(pr->endpoint, "https://gw.example:4318/v1/metrics");
    assert_true(pr->tls);
    assert_false(pr->grpc);
    assert_false(pr->gzip);                 /* upstream's SDK: no compression by default */
    assert_int_equal(pr->interval_ms, 60000);
    assert_int_equal(pr->timeout_ms, 30000);
    assert_int_equal(pr->export_timeout_ms, 10000);
    assert_string_equal(pr->path, "service.telemetry.metrics.readers[0]");
    /* headers win over headers_list; list values trimmed and %-decoded */
    assert_int_equal(pr->n_headers, 2);
    assert_string_equal(header(pr, "x-api-key"), "from-headers");
    assert_string_equal(header(pr, "x-tenant"), "vm-1 a");
    assert_string_equal(cfg->metrics_address, "127.0.0.1:9999");
    sf_config_destroy(cfg);
    assert_int_equal(sf_alloc_in_use(), 0);
}

static void test_decoded_grpc_tls(void **state)
{
    static const struct {
        const char *endpoint, *insecure, *want;
        bool tls;
    } cases[] = {
        { "http://gw:4317", "false", "gw:4317", false },
        { "https://gw:4317/", "true", "gw:4317", true },    /* the scheme decides */
        { "gw:4317", "false", "gw:4317", true },
        { "gw:4317", "true", "gw:4317", false },
        { "[::1]:4317", "true", "[::1]:4317", false },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char yaml[2048];
        sf_config *cfg;

        snprintf(yaml, sizeof(yaml), BASE
                 "service:\n  telemetry: {metrics: {readers: [{periodic: {interval: 1000, "
                 "exporter: {otlp: {protocol: grpc, endpoint: '%s', insecure: %s, "
                 "compression: gzip}}}}]}}\n" PIPELINES, cases[i].endpoint, cases[i].insecure);
        cfg = load(yaml, SF_OK);
        assert_int_equal(cfg->n_push_readers, 1);
        assert_true(cfg->push_readers[0].grpc);
        assert_true(cfg->push_readers[0].gzip);
        assert_string_equal(cfg->push_readers[0].endpoint, cases[i].want);
        if (cfg->push_readers[0].tls != cases[i].tls)
            fail_msg("%s insecure %s: tls %d", cases[i].endpoint, cases[i].insecure,
                     cfg->push_readers[0].tls);
        sf_config_destroy(cfg);
    }
}

/* `base` merged with the layer the command makes of its reader. */
static sf_config *with_layer(const char *base, char **layer_out)
{
    sf_config *cfg = load(base, SF_OK), *merged = NULL;
    char err[512], *uri, *layer = sf_cli_push_layer(cfg, err, sizeof(err));
    sf_diag *d = sf_diag_create(NULL);
    const char *uris[1];

    if (layer == NULL)
        fail_msg("no layer: '%s'", err);
    uri = malloc(strlen(base) + 6);
    assert_non_null(uri);
    sprintf(uri, "yaml:%s", base);
    uris[0] = uri;
    if (sf_config_load_uris_extra(uris, 1, "push", layer, d, &merged) != SF_OK) {
        sf_diag_print(d);
        fail_msg("the merged config does not load:\n%s", layer);
    }
    sf_diag_destroy(d);
    free(uri);
    sf_config_destroy(cfg);
    if (layer_out != NULL)
        *layer_out = layer;
    else
        sf_free(layer);
    return merged;
}

static const sf_config_pipeline *pipeline(const sf_config *cfg, const char *id)
{
    for (size_t i = 0; i < cfg->n_pipelines; i++)
        if (strcmp(cfg->pipelines[i].id, id) == 0)
            return &cfg->pipelines[i];
    fail_msg("no pipeline '%s'", id);
    return NULL;
}

static void test_layer_runs_through_the_fence(void **state)
{
    /* a value with a quote, a backslash, a '$' the loader must not expand
     * again and a ${env} it expanded once */
    static const char yaml[] = BASE
        "service:\n"
        "  telemetry:\n"
        "    resource: {service.name: vm-collector}\n"
        "    metrics:\n"
        "      address: 0.0.0.0:9998\n"
        "      readers:\n"
        "        - periodic:\n"
        "            interval: 2500\n"
        "            exporter:\n"
        "              otlp:\n"
        "                protocol: http/protobuf\n"
        "                endpoint: http://gw:4318/custom/path\n"
        "                compression: gzip\n"
        "                timeout: 4000\n"
        "                headers: [{name: x-key, value: 'a\"b\\c$${X}${env:SPANFENCE_PUSH_T}'}]\n"
        PIPELINES;
    sf_config *cfg;
    const sf_config_pipeline *p;
    const sf_config_component *c;
    const sf_node *v;
    char *layer, line[1024];

    (void)state;
    setenv("SPANFENCE_PUSH_T", "$HOME", 1);
    cfg = with_layer(yaml, &layer);
    p = pipeline(cfg, "metrics/spanfence_telemetry");
    assert_int_equal(p->signal, SF_SIGNAL_METRICS);
    assert_int_equal(p->n_receivers, 1);
    assert_string_equal(p->receivers[0]->id, "prometheus/spanfence_telemetry");
    assert_string_equal(p->receivers[0]->type->name, "prometheus");
    /* the first metrics pipeline's processors, in its order */
    assert_int_equal(p->n_processors, 2);
    assert_string_equal(p->processors[0]->id, "memory_limiter");
    assert_string_equal(p->processors[1]->id, "filter/fence");
    assert_int_equal(p->n_exporters, 1);
    c = p->exporters[0];
    assert_string_equal(c->id, "otlphttp/spanfence_telemetry");
    assert_string_equal(c->type->name, "otlphttp");
    /* values as the reader's, byte for byte */
    v = sf_node_get(sf_node_get(cfg->root, "exporters"), c->id);
    assert_string_equal(sf_node_get(v, "metrics_endpoint")->text, "http://gw:4318/custom/path");
    assert_string_equal(sf_node_get(sf_node_get(v, "headers"), "x-key")->text,
                        "a\"b\\c${X}$HOME");
    /* the wildcard listen address is scraped on loopback, as the job of
     * the collector's service.name, every interval */
    assert_non_null(strstr(layer, "targets: [\"127.0.0.1:9998\"]"));
    assert_non_null(strstr(layer, "job_name: vm-collector\n"));
    assert_non_null(strstr(layer, "scrape_interval: 2500ms\n"));
    assert_non_null(strstr(layer, "timeout: 4000ms\n"));
    assert_non_null(strstr(layer, "compression: gzip\n"));
    /* the push is said with its fence */
    sf_cli_push_describe(cfg, line, sizeof(line));
    assert_non_null(strstr(line, "through the processors of pipeline 'metrics/first' "
                                 "(memory_limiter, filter/fence)"));
    assert_non_null(strstr(line, "every 2500 ms to http://gw:4318/custom/path"));
    sf_free(layer);
    sf_config_destroy(cfg);
    unsetenv("SPANFENCE_PUSH_T");
    assert_int_equal(sf_alloc_in_use(), 0);
}

static void test_layer_grpc_without_metrics_pipeline(void **state)
{
    static const char yaml[] =
        "receivers: {otlp: {protocols: {http: {endpoint: 127.0.0.1:4318}}}}\n"
        "exporters: {debug: }\n"
        "service:\n"
        "  telemetry: {metrics: {readers: [\n"
        "    {pull: {exporter: {prometheus: {host: '::1', port: 9464}}}},\n"
        "    {periodic: {exporter: {otlp: {protocol: grpc, endpoint: 'gw:4317', insecure: true}}}}]}}\n"
        "  pipelines: {traces: {receivers: [otlp], exporters: [debug]}}\n";
    sf_config *cfg;
    const sf_config_pipeline *p;
    char *layer, line[1024];

    (void)state;
    cfg = with_layer(yaml, &layer);
    p = pipeline(cfg, "metrics/spanfence_telemetry");
    assert_int_equal(p->n_processors, 0);
    assert_string_equal(p->exporters[0]->id, "otlp/spanfence_telemetry");
    assert_string_equal(p->exporters[0]->type->name, "otlp");
    /* the pull reader's endpoint is the one scraped */
    assert_non_null(strstr(layer, "targets: [\"[::1]:9464\"]"));
    assert_non_null(strstr(layer, "tls: {insecure: true}"));
    sf_cli_push_describe(cfg, line, sizeof(line));
    assert_non_null(strstr(line, "with no processor"));
    sf_free(layer);
    sf_config_destroy(cfg);
}

static void test_layer_refusals(void **state)
{
    static const char taken[] =
        "receivers: {otlp: {protocols: {http: {endpoint: 127.0.0.1:4318}}}}\n"
        "processors: {memory_limiter: {check_interval: 1s, limit_mib: 64}, filter/fence: "
        "{metrics: {metric: ['name == \"x\"']}}}\n"
        "exporters: {debug: , otlphttp/spanfence_telemetry: {endpoint: 'http://x'}}\n"
        "service:\n"
        "  telemetry: {metrics: {readers: [{periodic: {exporter: {otlp: {protocol: grpc, "
        "endpoint: 'gw:4317'}}}}]}}\n" PIPELINES;
    static const char no_port[] = BASE
        "service:\n"
        "  telemetry: {metrics: {address: '127.0.0.1:0', readers: [{periodic: {exporter: "
        "{otlp: {protocol: grpc, endpoint: 'gw:4317'}}}}]}}\n" PIPELINES;
    sf_config *cfg;
    char err[512];

    (void)state;
    cfg = load(taken, SF_OK);
    assert_null(sf_cli_push_layer(cfg, err, sizeof(err)));
    assert_string_equal(err, "service.telemetry.metrics.readers[0]: the id "
                        "'otlphttp/spanfence_telemetry' is taken by the periodic reader's "
                        "components: rename yours");
    sf_config_destroy(cfg);
    cfg = load(no_port, SF_OK);
    assert_null(sf_cli_push_layer(cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "a periodic reader pushes what the metrics endpoint serves"));
    sf_config_destroy(cfg);
    /* no periodic reader: no layer, no error */
    cfg = load(BASE "service:\n" PIPELINES, SF_OK);
    assert_null(sf_cli_push_layer(cfg, err, sizeof(err)));
    assert_string_equal(err, "");
    sf_config_destroy(cfg);
    assert_int_equal(sf_alloc_in_use(), 0);
}

/* The whole path (load, layer, merged load) with each allocation failing. */
static sf_status push_scenario(void *arg)
{
    static const char yaml[] = BASE
        "service:\n"
        "  telemetry: {metrics: {readers: [{periodic: {exporter: {otlp: {protocol: "
        "http/protobuf, endpoint: 'http://gw:4318', headers: [{name: a, value: b}], "
        "headers_list: 'c=d'}}}}]}}\n" PIPELINES;
    const char *uris[1] = { "yaml:" BASE "service:\n  telemetry: {metrics: {readers: "
                            "[{periodic: {exporter: {otlp: {protocol: http/protobuf, endpoint: "
                            "'http://gw:4318', headers: [{name: a, value: b}], headers_list: "
                            "'c=d'}}}}]}}\n" PIPELINES };
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL, *merged = NULL;
    char err[512], *layer = NULL;
    sf_status st;

    (void)arg;
    if (d == NULL)
        return SF_ENOMEM;
    st = sf_config_load_string("t.yaml", yaml, strlen(yaml), d, &cfg);
    if (st == SF_OK) {
        layer = sf_cli_push_layer(cfg, err, sizeof(err));
        if (layer == NULL)
            st = SF_ENOMEM;
    }
    if (st == SF_OK)
        st = sf_config_load_uris_extra(uris, 1, "push", layer, d, &merged);
    if (st == SF_OK && pipeline(merged, "metrics/spanfence_telemetry")->n_processors != 2)
        st = SF_INVALID;
    /* a failed message allocation reads as a config error */
    if (st == SF_CONFIG && sf_diag_oom(d))
        st = SF_ENOMEM;
    sf_config_destroy(merged);
    sf_config_destroy(cfg);
    sf_free(layer);
    sf_diag_destroy(d);
    return st;
}

static void test_alloc_failures(void **state)
{
    const sf_torture t = { .name = "periodic reader", .run = push_scenario };

    (void)state;
    assert_true(sf_torture_run(&t) > 10);
    assert_int_equal(sf_alloc_in_use(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decoded_http),
        cmocka_unit_test(test_decoded_grpc_tls),
        cmocka_unit_test(test_layer_runs_through_the_fence),
        cmocka_unit_test(test_layer_grpc_without_metrics_pipeline),
        cmocka_unit_test(test_layer_refusals),
        cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

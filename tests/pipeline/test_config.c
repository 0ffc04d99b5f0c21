/* tests/pipeline/test_config.c: the top-level loader (sf_config_load): the
 * corpus of invalid configs (each file states its exact messages), the
 * valid corpus, the shipped configs, what a loaded config holds, and
 * allocation failures on every allocation of a full load. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "exporters/otlp_http/otlp_http.h"
#include "internal/sf_config_int.h"
#include "internal/sf_core.h"
#include "receivers/otlp/otlp.h"
#include "sf_alloc.h"
#include "tests/sf_torture.h"

#define MAX_MSGS 64

typedef struct msgs {
    size_t n;
    char *v[MAX_MSGS];
} msgs;

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void msgs_free(msgs *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i]);
    m->n = 0;
}

/* The "# expect: L:C: ..." lines of `path`, as full messages. */
static void read_expect(const char *path, msgs *m)
{
    FILE *f = fopen(path, "r");
    char line[1024];

    assert_non_null(f);
    m->n = 0;
    while (fgets(line, sizeof(line), f)) {
        char buf[1200];

        if (strncmp(line, "# expect: ", 10) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        snprintf(buf, sizeof(buf), "%s:%s", path, line + 10);
        assert_true(m->n < MAX_MSGS);
        m->v[m->n++] = strdup(buf);
    }
    fclose(f);
}

static void assert_same(msgs *want, const sf_diag *d, const char *path)
{
    msgs got = { 0 };

    for (size_t i = 0; i < sf_diag_count(d); i++)
        got.v[got.n++] = strdup(sf_diag_message(d, i));
    qsort(got.v, got.n, sizeof(char *), cmp);
    qsort(want->v, want->n, sizeof(char *), cmp);
    for (size_t i = 0; i < want->n || i < got.n; i++) {
        const char *w = i < want->n ? want->v[i] : "(nothing)";
        const char *g = i < got.n ? got.v[i] : "(nothing)";

        if (strcmp(w, g) != 0)
            fail_msg("%s:\n  want %s\n  got  %s", path, w, g);
    }
    msgs_free(&got);
}

static size_t list_dir(const char *dir, char names[][256], size_t max)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);

        if (l > 5 && strcmp(e->d_name + l - 5, ".yaml") == 0 && n < max) {
            int w = snprintf(names[n++], 256, "%s/%s", dir, e->d_name);
            assert_true(w > 0 && w < 256);      /* a truncated path would test nothing */
        }
    }
    closedir(d);
    return n;
}

static int setup_env(void **state)
{
    (void)state;
    unsetenv("SPANFENCE_TEST_UNSET_1");
    unsetenv("SPANFENCE_TEST_UNSET_2");
    setenv("SPANFENCE_TEST_HOST", "127.0.0.1", 1);
    setenv("SPANFENCE_TEST_PORT", "4317", 1);
    setenv("SPANFENCE_TEST_TOKEN", "s3cret", 1);
    return 0;
}

static void test_invalid_corpus(void **state)
{
    static char names[128][256];
    size_t n = list_dir(SF_SOURCE_DIR "/tests/configs/invalid", names, 128);

    (void)state;
    assert_true(n >= 30);                     /* the corpus must not vanish */
    for (size_t i = 0; i < n; i++) {
        sf_diag *d = sf_diag_create(NULL);
        sf_config *cfg = (sf_config *)1;
        msgs want;

        read_expect(names[i], &want);
        if (want.n == 0)
            fail_msg("%s has no '# expect:' line", names[i]);
        assert_int_equal(sf_config_load(names[i], d, &cfg), SF_CONFIG);
        assert_null(cfg);
        assert_true(sf_diag_errors(d) > 0);
        assert_same(&want, d, names[i]);
        msgs_free(&want);
        sf_diag_destroy(d);
    }
    assert_int_equal(sf_alloc_in_use(), 0);
}

static void test_valid_corpus(void **state)
{
    static char names[64][256];
    size_t n = list_dir(SF_SOURCE_DIR "/tests/configs/valid", names, 64);

    (void)state;
    assert_true(n >= 5);
    for (size_t i = 0; i < n; i++) {
        sf_diag *d = sf_diag_create(NULL);
        sf_config *cfg = NULL;
        msgs want;

        read_expect(names[i], &want);
        if (sf_config_load(names[i], d, &cfg) != SF_OK)
            sf_diag_print(d);
        assert_non_null(cfg);
        assert_int_equal(sf_diag_errors(d), 0);
        assert_int_equal(sf_diag_warnings(d), want.n);
        assert_same(&want, d, names[i]);
        msgs_free(&want);
        sf_config_destroy(cfg);
        sf_diag_destroy(d);
    }
    assert_int_equal(sf_alloc_in_use(), 0);
}

/* The shipped configs use trace_statements, whose parser lives in the
 * transform processor: until it is merged, those are the only errors. */
/* A shipped config loads with no error and no warning, and has its
 * pipelines (`n_pipelines`), the first the traces one through the
 * allowlist into `exporter`. */
static void check_shipped(const char *path, const char *exporter, size_t n_pipelines)
{
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;
    sf_status st = sf_config_load(path, d, &cfg);

    for (size_t i = 0; i < sf_diag_count(d); i++)
        fail_msg("unexpected: %s", sf_diag_message(d, i));
    assert_int_equal(st, SF_OK);
    assert_non_null(sf_config_find(cfg, exporter));
    assert_non_null(sf_config_find(cfg, "transform/allowlist"));
    assert_int_equal(cfg->n_pipelines, n_pipelines);
    assert_int_equal(cfg->pipelines[0].n_exporters, 1);
    assert_string_equal(cfg->pipelines[0].exporters[0]->id, exporter);
    assert_string_equal(cfg->metrics_address, "127.0.0.1:8888");
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
}

static void test_shipped_configs(void **state)
{
    (void)state;
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "https://gateway.example", 1);
    setenv("SPANFENCE_GATEWAY_TOKEN", "t0ken", 1);
    setenv("SPANFENCE_PSEUDONYM_KEY", "pseudonym-key-for-the-tests", 1);
    check_shipped(SF_SOURCE_DIR "/configs/default.yaml", "debug", 1);
    /* traces, and the engine's metrics and logs through transform/fence */
    check_shipped(SF_SOURCE_DIR "/configs/cvm.yaml", "otlphttp/gateway", 3);
    unsetenv("SPANFENCE_GATEWAY_TOKEN");
    {
        sf_diag *d = sf_diag_create(NULL);
        sf_config *cfg = NULL;
        int found = 0;

        assert_int_equal(sf_config_load(SF_SOURCE_DIR "/configs/cvm.yaml", d, &cfg), SF_CONFIG);
        for (size_t i = 0; i < sf_diag_count(d); i++)
            found += strstr(sf_diag_message(d, i),
                            "exporters.otlphttp/gateway.headers.authorization: environment "
                            "variable 'SPANFENCE_GATEWAY_TOKEN' is not set") != NULL;
        assert_int_equal(found, 1);
        sf_diag_destroy(d);
    }
}

static const char full_yaml[] =
    "exporters:\n"
    "  otlphttp/b:\n"
    "    endpoint: http://b\n"
    "    sending_queue: {queue_size: 32}\n"
    "    retry_on_failure: {max_elapsed_time: 60s}\n"
    "    headers: {authorization: \"Bearer ${SPANFENCE_TEST_TOKEN}\"}\n"
    "receivers:\n"
    "  otlp:\n"
    "    protocols:\n"
    "      http:\n"
    "  otlp/2:\n"
    "    protocols: {grpc: {endpoint: \"127.0.0.1:9\"}}\n"
    "processors:\n"
    "  transform:\n"
    "    error_mode: ignore\n"
    "service:\n"
    "  telemetry:\n"
    "    logs: {level: warn}\n"
    "  pipelines:\n"
    "    traces:\n"
    "      receivers: [otlp, otlp/2]\n"
    "      processors: [transform]\n"
    "      exporters: [otlphttp/b]\n"
    "    traces/2:\n"
    "      receivers: [otlp/2]\n"
    "      exporters: [otlphttp/b]\n";

static void test_loaded_config(void **state)
{
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;
    const sf_otlphttp_config *ex;
    const sf_otlp_receiver_config *rx;

    (void)state;
    assert_int_equal(sf_config_load_string("mem.yaml", full_yaml, strlen(full_yaml), d, &cfg),
                     SF_OK);
    assert_int_equal(sf_diag_count(d), 0);
    assert_string_equal(cfg->file, "mem.yaml");
    /* components in definition order, as the file has them */
    assert_int_equal(cfg->n_components, 4);
    assert_string_equal(cfg->components[0].id, "otlphttp/b");
    assert_string_equal(cfg->components[1].id, "otlp");
    assert_string_equal(cfg->components[2].id, "otlp/2");
    assert_string_equal(cfg->components[3].id, "transform");
    assert_ptr_equal(cfg->components[1].type, sf_registry_find(SF_KIND_RECEIVER, "otlp"));
    assert_int_equal(cfg->components[1].node->line, 8);
    ex = cfg->components[0].config;
    assert_string_equal(ex->endpoint, "http://b");
    assert_int_equal(ex->headers.n, 1);
    assert_string_equal(ex->headers.values[0], "Bearer s3cret");
    assert_int_equal(ex->compression, SF_COMPRESSION_GZIP);
    assert_int_equal(ex->timeout, 30000);
    assert_true(ex->sending_queue.present);
    assert_true(ex->sending_queue.enabled);
    assert_int_equal(ex->sending_queue.queue_size, 32);
    assert_int_equal(ex->sending_queue.num_consumers, 10);
    assert_int_equal(ex->retry_on_failure.max_elapsed_time, 60000);
    assert_int_equal(ex->retry_on_failure.initial_interval, 5000);
    assert_true(ex->retry_on_failure.multiplier == 1.5);
    rx = cfg->components[1].config;
    assert_true(rx->protocols.present);
    assert_true(rx->protocols.http.present);
    assert_false(rx->protocols.grpc.present);
    assert_string_equal(rx->protocols.http.endpoint, "127.0.0.1:4318");
    assert_int_equal(rx->protocols.http.max_request_body_size, 20 << 20);
    assert_int_equal(rx->max_value_depth, 32);
    rx = cfg->components[2].config;
    assert_string_equal(rx->protocols.grpc.endpoint, "127.0.0.1:9");
    assert_int_equal(rx->protocols.grpc.workers, 0);     /* one per usable CPU */
    /* pipelines point into cfg->components */
    assert_int_equal(cfg->n_pipelines, 2);
    assert_string_equal(cfg->pipelines[0].id, "traces");
    assert_int_equal(cfg->pipelines[0].signal, SF_SIGNAL_TRACES);
    assert_int_equal(cfg->pipelines[0].n_receivers, 2);
    assert_ptr_equal(cfg->pipelines[0].receivers[0], &cfg->components[1]);
    assert_ptr_equal(cfg->pipelines[0].receivers[1], &cfg->components[2]);
    assert_int_equal(cfg->pipelines[0].n_processors, 1);
    assert_ptr_equal(cfg->pipelines[0].processors[0], sf_config_find(cfg, "transform"));
    assert_int_equal(cfg->pipelines[0].n_exporters, 1);
    assert_ptr_equal(cfg->pipelines[0].exporters[0], &cfg->components[0]);
    assert_string_equal(cfg->pipelines[1].id, "traces/2");
    assert_int_equal(cfg->pipelines[1].n_processors, 0);
    assert_null(sf_config_find(cfg, "otlp/3"));
    assert_string_equal(cfg->metrics_address, "127.0.0.1:8888");
    assert_int_equal(cfg->log_level, SF_LOG_WARN);
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    assert_int_equal(sf_alloc_in_use(), 0);
}

static void test_metrics_level_none(void **state)
{
    static const char yaml[] =
        "receivers: {otlp: {protocols: {grpc: }}}\n"
        "exporters: {otlphttp: {endpoint: \"http://x\"}}\n"
        "service:\n"
        "  telemetry: {metrics: {level: none, address: 'not checked'}}\n"
        "  pipelines: {traces: {receivers: [otlp], exporters: [otlphttp]}}\n";
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;

    (void)state;
    assert_int_equal(sf_config_load_string("m.yaml", yaml, strlen(yaml), d, &cfg), SF_OK);
    assert_null(cfg->metrics_address);
    assert_int_equal(cfg->log_level, SF_LOG_INFO);
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
}

static void test_unreadable_file(void **state)
{
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = (sf_config *)1;

    (void)state;
    assert_int_equal(sf_config_load("/nonexistent/x.yaml", d, &cfg), SF_IO);
    assert_null(cfg);
    assert_int_equal(sf_diag_count(d), 1);
    assert_string_equal(sf_diag_message(d, 0),
                        "/nonexistent/x.yaml: cannot read the file: no such file or directory");
    sf_diag_destroy(d);
}

static void test_errors_collected_not_first_only(void **state)
{
    static const char yaml[] =
        "receivers:\n  otlp:\n"
        "exporters:\n  otlphttp:\n    timeout: 5\n"
        "service:\n  pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [otlphttp, x]\n";
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;

    (void)state;
    assert_int_equal(sf_config_load_string("e.yaml", yaml, strlen(yaml), d, &cfg), SF_CONFIG);
    assert_int_equal(sf_diag_count(d), 3);
    assert_string_equal(sf_diag_message(d, 0),
                        "e.yaml:2:3: receivers.otlp.protocols: at least one protocol ('grpc' or 'http') must be configured");
    assert_string_equal(sf_diag_message(d, 1),
                        "e.yaml:5:14: exporters.otlphttp.timeout: duration needs a unit, e.g. '5s'");
    assert_string_equal(sf_diag_message(d, 2),
                        "e.yaml:10:29: service.pipelines.traces.exporters[1]: pipeline 'traces' references undefined exporter 'x'");
    sf_diag_destroy(d);
}

/* Fail each allocation of a full load in turn: every one must end in
 * SF_ENOMEM (or, when a diag message was what failed, SF_CONFIG/SF_ENOMEM),
 * never a crash or a leak. */
/* Load the full config and free it; SF_ENOMEM for a failed allocation. */
static sf_status load_scenario(void *arg)
{
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;
    sf_status st;

    (void)arg;
    if (d == NULL)
        return SF_ENOMEM;
    st = sf_config_load_string("a.yaml", full_yaml, strlen(full_yaml), d, &cfg);
    if (st != SF_OK)
        assert_null(cfg);
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    return st;
}

static void test_alloc_failures(void **state)
{
    const sf_torture t = { .name = "config load", .run = load_scenario, .expect = SF_ENOMEM };

    (void)state;
    assert_int_equal(sf_alloc_in_use(), 0);
    assert_true(sf_torture_run(&t) > 5);
    assert_int_equal(sf_alloc_in_use(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_corpus),
        cmocka_unit_test(test_valid_corpus),
        cmocka_unit_test(test_shipped_configs),
        cmocka_unit_test(test_loaded_config),
        cmocka_unit_test(test_metrics_level_none),
        cmocka_unit_test(test_unreadable_file),
        cmocka_unit_test(test_errors_collected_not_first_only),
        cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, setup_env, NULL);
}

/* tests/cli/test_cli.c: the spanfence command as CI runs it: `validate`
 * with and without --policy, exit codes 0 (valid), 1 (not valid, one line
 * per problem on stderr), 2 (usage), and the collector refusing to start
 * when the policy does not hold. Runs build/spanfence from the source tree,
 * so messages name configs/ relative paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "internal/sf_core.h"

#define TMP_CONFIG SF_BINARY_DIR "/test_cli_mutated.yaml"
#define TMP_POLICY SF_BINARY_DIR "/test_cli_policy.yaml"
#define TMP_BASE SF_BINARY_DIR "/test_cli_base.yaml"
#define TMP_OVER SF_BINARY_DIR "/test_cli_over.yaml"

typedef struct run {
    int code;
    char out[65536];        /* stdout and stderr, interleaved */
} run;

static void spanfence(run *r, const char *args)
{
    char cmd[2048];
    size_t n = 0, got;
    FILE *p;
    int status;

    snprintf(cmd, sizeof(cmd), "cd '%s' && '%s/spanfence' %s 2>&1", SF_SOURCE_DIR, SF_BINARY_DIR,
             args);
    p = popen(cmd, "r");
    assert_non_null(p);
    while ((got = fread(r->out + n, 1, sizeof(r->out) - 1 - n, p)) > 0)
        n += got;
    r->out[n] = '\0';
    status = pclose(p);
    assert_true(WIFEXITED(status));
    r->code = WEXITSTATUS(status);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* configs/cvm.yaml with `from` replaced by `to`. */
static void write_mutated(const char *from, const char *to)
{
    char *text = NULL, *at, *out;
    FILE *f = fopen(SF_SOURCE_DIR "/configs/cvm.yaml", "r");
    size_t n;

    assert_non_null(f);
    text = calloc(1, 65536);
    assert_non_null(text);
    n = fread(text, 1, 65535, f);
    fclose(f);
    assert_true(n > 0);
    at = strstr(text, from);
    assert_non_null(at);
    out = calloc(1, n + strlen(to) + 1);
    assert_non_null(out);
    memcpy(out, text, (size_t)(at - text));
    strcat(out, to);
    strcat(out, at + strlen(from));
    write_file(TMP_CONFIG, out);
    free(out);
    free(text);
}

/* `text` with `from` replaced by `to`, written to TMP_CONFIG. */
static void write_mutated_text(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    char *out;

    assert_non_null(at);
    out = calloc(1, strlen(text) + strlen(to) + 1);
    assert_non_null(out);
    memcpy(out, text, (size_t)(at - text));
    strcat(out, to);
    strcat(out, at + strlen(from));
    write_file(TMP_CONFIG, out);
    free(out);
}

static int line_in(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char buf[4096];
    int line = 0;

    assert_non_null(f);
    while (fgets(buf, sizeof(buf), f)) {
        line++;
        if (strstr(buf, needle)) {
            fclose(f);
            return line;
        }
    }
    fclose(f);
    fail_msg("'%s' not in %s", needle, path);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "https://gateway.example:4318", 1);
    setenv("SPANFENCE_GATEWAY_TOKEN", "t0ken", 1);
    setenv("SPANFENCE_PSEUDONYM_KEY", "pseudonym-key-of-the-cli-test", 1);
    /* the seed deployment's */
    setenv("VM_ID", "cvm-cli-7", 1);
    setenv("TRACES_GATEWAY_ENDPOINT", "https://traces.example:4318", 1);
    setenv("TRACES_GATEWAY_TOKEN", "t0ken", 1);
    setenv("TELEMETRY_GATEWAY_ENDPOINT", "https://telemetry.example:4318", 1);
    setenv("TELEMETRY_GATEWAY_API_KEY", "k3y", 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    remove(TMP_CONFIG);
    remove(TMP_POLICY);
    remove(TMP_BASE);
    remove(TMP_OVER);
    return 0;
}


/* A base config whose receiver endpoint is out of range, and an override
 * that fixes it: --config twice merges in order, as upstream. */
static const char base_yaml[] =
    "receivers:\n"
    "  otlp:\n"
    "    protocols:\n"
    "      grpc:\n"
    "        endpoint: 127.0.0.1:99999\n"
    "processors:\n"
    "  batch:\n"
    "    timeout: 1s\n"
    "exporters:\n"
    "  debug:\n"
    "  otlphttp:\n"
    "    endpoint: http://127.0.0.1:4319\n"
    "service:\n"
    "  pipelines:\n"
    "    traces:\n"
    "      receivers: [otlp]\n"
    "      processors: [batch]\n"
    "      exporters: [debug, otlphttp]\n";

static const char over_yaml[] =
    "receivers:\n"
    "  otlp:\n"
    "    protocols:\n"
    "      grpc:\n"
    "        endpoint: 127.0.0.1:4317\n"
    "service:\n"
    "  pipelines:\n"
    "    traces:\n"
    "      exporters: [debug]\n";

static void test_config_merge(void **state)
{
    run r;

    (void)state;
    write_file(TMP_BASE, base_yaml);
    write_file(TMP_OVER, over_yaml);
    /* the base alone: its error, at its line */
    spanfence(&r, "validate --config " TMP_BASE);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, TMP_BASE ":5:19: receivers.otlp.protocols.grpc.endpoint: "
                                  "invalid endpoint '127.0.0.1:99999': port '99999' is out of "
                                  "range 0-65535\n"));
    /* the override fixes the endpoint; its exporters list replaces the
     * base's whole (otlphttp is then unused: warned) */
    spanfence(&r, "validate --config " TMP_BASE " --config file:" TMP_OVER);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, TMP_BASE ":11:3: exporters.otlphttp: warning: exporter "
                                  "'otlphttp' is defined but not used in any pipeline\n"));
    assert_non_null(strstr(r.out, TMP_BASE ", " TMP_OVER ": configuration is valid\n"));
    /* --set comes last and names itself in its messages */
    spanfence(&r, "validate --config " TMP_BASE " --config " TMP_OVER
                  " --set processors.batch.timeout=5");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "yaml:processors::batch::timeout: 5:1:29: "
                                  "processors.batch.timeout: duration needs a unit, e.g. '5s'\n"));
    spanfence(&r, "validate --config " TMP_BASE " --config " TMP_OVER
                  " --set processors.batch.timeout=5s");
    assert_int_equal(r.code, 0);
    spanfence(&r, "validate --config " TMP_BASE " --set receivers.otlp.protocols.grpc.endpoint="
                  "127.0.0.1:4317 --set exporters.otlphttp.compression=snappy");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "yaml:exporters::otlphttp::compression: snappy:1:35: "
                                  "exporters.otlphttp.compression: 'snappy' is not supported by "
                                  "spanfence (use one of 'gzip', 'none', 'zstd')\n"));
    spanfence(&r, "validate --config " TMP_BASE " --set novalue");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "spanfence: --set 'novalue': expected KEY=VALUE"));
}

/* Upstream's periodic reader (otelconf's keys): validate accepts it and
 * says what it will push through which fence; print-config shows the
 * components it runs as, the header redacted; a bad reader is refused at
 * its line; --set can change it like any key. */
static const char push_yaml[] =
    "receivers:\n"
    "  otlp:\n"
    "    protocols: {http: {endpoint: 127.0.0.1:4318}}\n"
    "processors:\n"
    "  filter/fence:\n"
    "    metrics: {metric: ['IsMatch(name, \"^otelcol_process_\")']}\n"
    "exporters:\n"
    "  debug:\n"
    "service:\n"
    "  telemetry:\n"
    "    metrics:\n"
    "      readers:\n"
    "        - periodic:\n"
    "            interval: 5000\n"
    "            exporter:\n"
    "              otlp:\n"
    "                protocol: http/protobuf\n"
    "                endpoint: https://gw.example:4318/v1/metrics\n"
    "                headers: [{name: x-api-key, value: push-secret-1}]\n"
    "  pipelines:\n"
    "    traces: {receivers: [otlp], exporters: [debug]}\n"
    "    metrics: {receivers: [otlp], processors: [filter/fence], exporters: [debug]}\n";

static void test_periodic_reader(void **state)
{
    run r;

    (void)state;
    write_file(TMP_BASE, push_yaml);
    spanfence(&r, "validate --config " TMP_BASE);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "service.telemetry.metrics.readers[0]: pushing the "
                                  "collector's own metrics (127.0.0.1:8888) every 5000 ms to "
                                  "https://gw.example:4318/v1/metrics (http/protobuf) as pipeline "
                                  "'metrics/spanfence_telemetry', through the processors of "
                                  "pipeline 'metrics' (filter/fence)\n"));
    assert_non_null(strstr(r.out, TMP_BASE ": configuration is valid\n"));
    spanfence(&r, "print-config --config " TMP_BASE);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "  prometheus/spanfence_telemetry:\n"));
    assert_non_null(strstr(r.out, "  otlphttp/spanfence_telemetry:\n"
                                  "    metrics_endpoint: 'https://gw.example:4318/v1/metrics'\n"));
    assert_non_null(strstr(r.out, "    metrics/spanfence_telemetry:\n"
                                  "      receivers:\n      - prometheus/spanfence_telemetry\n"
                                  "      processors:\n      - filter/fence\n"
                                  "      exporters:\n      - otlphttp/spanfence_telemetry\n"));
    assert_null(strstr(r.out, "push-secret-1"));
    /* --set reaches the reader as any key (the interval, in ms) */
    spanfence(&r, "validate --config " TMP_BASE
                  " --set service.telemetry.metrics.address=127.0.0.1:9777");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "own metrics (127.0.0.1:9777) every 5000 ms"));
    /* refused at its line, with what to write */
    write_mutated_text(push_yaml, "protocol: http/protobuf", "protocol: http/json");
    spanfence(&r, "validate --config " TMP_CONFIG);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, TMP_CONFIG ":17:27: service.telemetry.metrics.readers[0]."
                                  "periodic.exporter.otlp.protocol: 'http/json' is not supported "
                                  "by spanfence (use one of 'http/protobuf', 'grpc')\n"));
    write_mutated_text(push_yaml, "interval: 5000", "interval: 500");
    spanfence(&r, "validate --config " TMP_CONFIG);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, TMP_CONFIG ":14:23: service.telemetry.metrics.readers[0]."
                                  "periodic.interval: value '500' is out of range (expected 1000 "
                                  "to 86400000)\n"));
    /* an id of the push's taken: said at the reader */
    write_mutated_text(push_yaml, "  debug:\n", "  debug:\n  otlphttp/spanfence_telemetry: "
                       "{endpoint: 'http://x'}\n");
    spanfence(&r, "validate --config " TMP_CONFIG);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, TMP_CONFIG ":14:11: service.telemetry.metrics.readers[0]: the "
                                  "id 'otlphttp/spanfence_telemetry' is taken by the periodic "
                                  "reader's components: rename yours\n"));
}

static void test_config_providers(void **state)
{
    run r;

    (void)state;
    write_file(TMP_BASE, base_yaml);
    /* env: and yaml: sources, merged like files */
    spanfence(&r, "validate --config " TMP_BASE " --config env:SF_TEST_OVER "
                  "--config 'yaml:receivers::otlp::protocols::grpc::endpoint: 127.0.0.1:4317'");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "env:SF_TEST_OVER: environment variable 'SF_TEST_OVER' is "
                                  "not set\n"));
    setenv("SF_TEST_OVER", over_yaml, 1);
    spanfence(&r, "validate --config " TMP_BASE " --config env:SF_TEST_OVER");
    assert_int_equal(r.code, 0);
    unsetenv("SF_TEST_OVER");
    spanfence(&r, "validate --config " TMP_BASE
                  " --config 'yaml:receivers::otlp::protocols::grpc::endpoint: 127.0.0.1:4317'");
    assert_int_equal(r.code, 0);
    spanfence(&r, "validate --config https://example.com/c.yaml");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.out, "spanfence: --config 'https://example.com/c.yaml': scheme 'https' "
                               "is not supported by spanfence (a file path, file:PATH, env:VAR "
                               "or yaml:TEXT)\n");
    /* --feature-gates: accepted, has no effect, says so */
    spanfence(&r, "validate --config configs/cvm.yaml --feature-gates=-component.UseLocalHostAsDefaultHost");
    assert_non_null(strstr(r.out, "spanfence: warning: --feature-gates "
                                  "'-component.UseLocalHostAsDefaultHost' has no effect"));
}

static void test_components_and_version(void **state)
{
    run r;

    (void)state;
    spanfence(&r, "components");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "buildinfo:\n    command: spanfence\n"));
    assert_non_null(strstr(r.out, "receivers:\n    - name: otlp\n"));
    assert_non_null(strstr(r.out, "    - name: health_check\n"));
    assert_non_null(strstr(r.out, "    - name: otlphttp\n      alias: otlp_http\n"));
    assert_non_null(strstr(r.out, "providers:\n    - scheme: env\n    - scheme: file\n"
                                  "    - scheme: yaml\n"));
    spanfence(&r, "--version");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "spanfence version "));
    assert_non_null(strstr(r.out, "\ncommit: "));
    assert_null(strstr(r.out, "commit: unknown"));      /* built from a git tree */
    assert_non_null(strstr(r.out, "\nbuild: "));
}

/* The texts say what the build does (issue 37): `components` gives every
 * signal a type handles a stability other than Undefined, and neither it,
 * --help-config nor the man page's NAME says a handled signal is dropped
 * or that spanfence handles traces only. */
static void test_texts_name_every_signal(void **state)
{
    static const char *const wrong[] = {
        "traces only", "accepted and dropped", "not exported", "trace collector",
    };
    static const char *const sig_names[] = { "traces", "logs", "metrics" };
    static const unsigned sig_bits[] = { SF_SIGNALS_TRACES, SF_SIGNALS_LOGS, SF_SIGNALS_METRICS };
    run r;
    char *man;
    FILE *f;
    size_t n;

    (void)state;
    spanfence(&r, "components");
    assert_int_equal(r.code, 0);
    for (const sf_component_type *const *t = sf_registry; *t != NULL; t++) {
        char head[128];
        const char *at, *end;
        unsigned sig = (*t)->signals ? (*t)->signals : SF_SIGNALS_TRACES;

        if ((*t)->kind == SF_KIND_EXTENSION)
            continue;
        snprintf(head, sizeof(head), "    - name: %s\n", (*t)->name);
        at = strstr(r.out, head);
        assert_non_null(at);
        end = strstr(at + 1, "    - name: ");
        for (size_t i = 0; i < 3; i++) {
            char line[64];
            const char *l;

            snprintf(line, sizeof(line), "        %s: ", sig_names[i]);
            l = strstr(at, line);
            assert_non_null(l);
            assert_true(end == NULL || l < end);
            print_message("%s %s: %.*s\n", (*t)->name, sig_names[i],
                          (int)strcspn(l + strlen(line), "\n"), l + strlen(line));
            assert_int_equal(strncmp(l + strlen(line), "Undefined", 9) != 0,
                             (sig & sig_bits[i]) != 0);
        }
    }
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
        assert_null(strstr(r.out, wrong[i]));
    spanfence(&r, "--help-config");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "logs_url_path"));        /* the whole text came */
    assert_non_null(strstr(r.out, "exporter debug"));
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
        assert_null(strstr(r.out, wrong[i]));
    f = fopen(SF_SOURCE_DIR "/tools/spanfence.1", "r");
    assert_non_null(f);
    man = malloc(1 << 16);
    assert_non_null(man);
    n = fread(man, 1, (1 << 16) - 1, f);
    man[n] = '\0';
    fclose(f);
    assert_non_null(strstr(man, ".SH NAME\nspanfence \\- OpenTelemetry collector fencing traces, "
                                "logs and metrics"));
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
        assert_null(strstr(man, wrong[i]));
    free(man);
}

/* print-config redacts the values of headers named like credentials (the
 * list in pipeline/cli/print_config.c) and prints the others, which are
 * identifiers (issue 37). */
static void test_print_config_headers(void **state)
{
    static const char *const secret[] = {
        "Authorization", "Proxy-Authorization", "X-Auth-Token", "X-Amz-Security-Token", "X-Api-Key",
        "api_key", "Cookie", "X-Session-Id", "X-Client-Secret", "X-Signature", "x-goog-api-key",
    };
    static const char *const shown[] = { "x-vm-id", "X-Tenant", "X-Scope-OrgID", "User-Agent" };
    char yaml[4096], want[128];
    size_t n;
    run r;

    (void)state;
    n = (size_t)snprintf(yaml, sizeof(yaml),
                         "receivers:\n  otlp:\n    protocols:\n      grpc:\n"
                         "exporters:\n  otlphttp:\n    endpoint: http://127.0.0.1:9\n"
                         "    headers:\n");
    for (size_t i = 0; i < sizeof(secret) / sizeof(secret[0]); i++)
        n += (size_t)snprintf(yaml + n, sizeof(yaml) - n, "      %s: secret-%zu\n", secret[i], i);
    for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++)
        n += (size_t)snprintf(yaml + n, sizeof(yaml) - n, "      %s: shown-%zu\n", shown[i], i);
    snprintf(yaml + n, sizeof(yaml) - n,
             "service:\n  pipelines:\n    traces:\n      receivers: [otlp]\n"
             "      exporters: [otlphttp]\n");
    write_file(TMP_CONFIG, yaml);
    spanfence(&r, "print-config --config " TMP_CONFIG);
    assert_int_equal(r.code, 0);
    assert_null(strstr(r.out, "secret-"));
    for (size_t i = 0; i < sizeof(secret) / sizeof(secret[0]); i++) {
        snprintf(want, sizeof(want), "\n      %s: '[REDACTED]'\n", secret[i]);
        assert_non_null(strstr(r.out, want));
    }
    for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++) {
        snprintf(want, sizeof(want), "\n      %s: shown-%zu\n", shown[i], i);
        print_message("%s", want + 1);
        assert_non_null(strstr(r.out, want));
    }
}

/* Without --config the collector reads one absolute path, wherever it is
 * started from (here: the source tree, which has configs/default.yaml). */
static void test_default_config(void **state)
{
    FILE *f = fopen(SF_DEFAULT_CONFIG, "r");
    run r;

    (void)state;
    if (f != NULL) {            /* installed here: nothing to tell apart */
        fclose(f);
        skip();
    }
    spanfence(&r, "");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, SF_DEFAULT_CONFIG ": cannot read the file: no such "
                                  "file or directory\n"));
}

static void test_usage(void **state)
{
    run r;

    (void)state;
    spanfence(&r, "validate");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.out, "spanfence: validate needs --config URI\n");
    spanfence(&r, "validate --config configs/cvm.yaml --policy");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "spanfence: option '--policy' needs a value\n"));
}

static void test_validate_without_policy(void **state)
{
    run r;

    (void)state;
    spanfence(&r, "validate --config configs/cvm.yaml");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "configs/cvm.yaml: configuration is valid\n");
}

static void test_validate_with_policy(void **state)
{
    run r;

    (void)state;
    spanfence(&r, "validate --config configs/cvm.yaml --policy configs/cvm-policy.yaml");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "configs/cvm.yaml: configuration is valid and holds policy "
                        "configs/cvm-policy.yaml\n");
}

static void test_validate_violation(void **state)
{
    char want[2048];
    run r;

    (void)state;
    write_mutated("queue_size: 134217728", "queue_size: 200000000");
    /* without the policy the mutated config is valid */
    spanfence(&r, "validate --config " TMP_CONFIG);
    assert_int_equal(r.code, 0);
    spanfence(&r, "validate --config " TMP_CONFIG " --policy configs/cvm-policy.yaml");
    assert_int_equal(r.code, 1);
    snprintf(want, sizeof(want),
             "%s:%d:19: policy: exporters.otlphttp/gateway.sending_queue.queue_size: is 200000000, "
             "the policy allows at most 134217728\n"
             "spanfence: %s: 1 policy violation, configuration does not hold policy "
             "configs/cvm-policy.yaml\n",
             TMP_CONFIG, line_in(TMP_CONFIG, "queue_size: 200000000"), TMP_CONFIG);
    assert_string_equal(r.out, want);
}

/* Each line of cvm.yaml the policy pins for ids and request caps: changed,
 * the config is still valid, but no longer holds the policy. */
static void test_validate_ids_and_caps_mutations(void **state)
{
    static const struct {
        const char *from, *to, *want;
    } m[] = {
        { "    pseudonymize_ids: true\n", "",
          "pseudonymize_ids is off: the client's trace and span ids leave as it chose them" },
        { "    pseudonymize_ids: true\n", "    pseudonymize_ids: false\n",
          "pseudonymize_ids is off" },
        { "    max_spans_per_request: 1024\n", "",
          "max_spans_per_request is not set: any number of request.spans leave, the policy "
          "allows 1024 a request" },
        { "    max_spans_per_request: 1024\n", "    max_spans_per_request: 4096\n",
          "max_spans_per_request is 4096, the policy allows at most 1024" },
        { "    max_resources_per_request: 2\n", "    max_resources_per_request: 64\n",
          "max_resources_per_request is 64, the policy allows at most 2" },
        { "    max_scopes_per_resource: 4\n", "",
          "max_scopes_per_resource is not set: any number of resource.scope_spans leave" },
        { "    # logs receiver's would have them) leave as the spans' pseudonyms\n"
          "    pseudonym_key: ${env:SPANFENCE_PSEUDONYM_KEY}\n    pseudonymize_ids: true\n",
          "    # logs receiver's would have them) leave as the spans' pseudonyms\n",
          "processors.transform/fence: pseudonymize_ids is off: log records' trace and span ids" },
    };
    run r;

    (void)state;
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        write_mutated(m[i].from, m[i].to);
        spanfence(&r, "validate --config " TMP_CONFIG);
        if (r.code != 0)
            fail_msg("mutation %zu: not valid alone (exit %d):\n%s", i, r.code, r.out);
        spanfence(&r, "validate --config " TMP_CONFIG " --policy configs/cvm-policy.yaml");
        if (r.code != 1 || strstr(r.out, m[i].want) == NULL ||
            strstr(r.out, ": 1 policy violation,") == NULL)
            fail_msg("mutation %zu: exit %d, want '%s' in:\n%s", i, r.code, m[i].want, r.out);
    }
    /* lower caps hold it */
    write_mutated("    max_spans_per_request: 1024\n", "    max_spans_per_request: 64\n");
    spanfence(&r, "validate --config " TMP_CONFIG " --policy configs/cvm-policy.yaml");
    assert_int_equal(r.code, 0);
}

/* cvm.yaml's trace_control, as its comment gives it (uncommented), holds
 * the policy; with a target that exports the spans it sends while it rests
 * (out_of_band: count) it does not. */
static void test_trace_control_out_of_band(void **state)
{
    static const char *const values[2] = { "drop", "count" };
    char *text = calloc(1, 65536), *from, *end, *block, *b;
    FILE *f = fopen(SF_SOURCE_DIR "/configs/cvm.yaml", "r");
    char want[512];
    run r;

    (void)state;
    assert_non_null(f);
    assert_non_null(text);
    assert_true(fread(text, 1, 65535, f) > 0);
    fclose(f);
    from = strstr(text, "# extensions:\n#   trace_control:\n");
    assert_non_null(from);
    end = strstr(from, "\n\n");
    assert_non_null(end);
    *end = '\0';
    block = calloc(1, strlen(from) + 64);
    assert_non_null(block);
    b = block;
    for (const char *l = from; *l != '\0';) {   /* "# " off every line */
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) + 1 : strlen(l);

        memcpy(b, l + 2, n - 2);
        b += n - 2;
        l += n;
    }
    setenv("SGLANG_API_KEY", "k3y", 1);
    for (int i = 0; i < 2; i++) {
        char *to = calloc(1, strlen(block) + 64), *at;

        assert_non_null(to);
        strcpy(to, block);
        at = strstr(to, "out_of_band: drop");
        assert_non_null(at);
        memmove(at + 13 + strlen(values[i]), at + 17, strlen(at + 17) + 1);
        memcpy(at + 13, values[i], strlen(values[i]));
        write_mutated(from, to);
        spanfence(&r, "validate --config " TMP_CONFIG " --policy configs/cvm-policy.yaml");
        assert_int_equal(r.code, i);
        if (i == 0) {
            assert_non_null(strstr(r.out, "configuration is valid and holds policy"));
        } else {
            snprintf(want, sizeof(want), "%s:%d:22: policy: extensions.trace_control: target "
                     "'r1' exports the spans it sends while it rests: the policy requires "
                     "'out_of_band: drop'", TMP_CONFIG, line_in(TMP_CONFIG, "out_of_band: count"));
            if (strstr(r.out, want) == NULL)
                fail_msg("want '%s' in:\n%s", want, r.out);
        }
        free(to);
    }
    unsetenv("SGLANG_API_KEY");
    free(block);
    free(text);
}

/* cvm.yaml's logs or metrics pipeline rerouted by a second --config (as an
 * operator layering a config would) around the fence, to an exporter of
 * its own, no longer holds the policy: its items would leave unfenced. (A
 * policy without the signal's section: test_policy's
 * test_exporter_in_logs_pipeline.) */
static void test_unfenced_signal_violates(void **state)
{
    static const char *const signals[] = { "logs", "metrics" };
    char yaml[512], want[256];
    run r;

    (void)state;
    for (int i = 0; i < 2; i++) {
        snprintf(yaml, sizeof(yaml),
                 "exporters:\n  otlphttp/%s:\n    endpoint: http://127.0.0.1:4320\n"
                 "service:\n  pipelines:\n    %s:\n      processors: [memory_limiter]\n"
                 "      exporters: [otlphttp/%s]\n", signals[i], signals[i], signals[i]);
        write_file(TMP_CONFIG, yaml);
        spanfence(&r, "validate --config configs/cvm.yaml --config " TMP_CONFIG);
        assert_int_equal(r.code, 0);
        spanfence(&r, "validate --config configs/cvm.yaml --config " TMP_CONFIG
                      " --policy configs/cvm-policy.yaml");
        assert_int_equal(r.code, 1);
        snprintf(want, sizeof(want), "policy: service.pipelines.%s: does not run processor "
                 "'transform/fence'\n", signals[i]);
        assert_non_null(strstr(r.out, want));
        snprintf(want, sizeof(want), "%s:8:19: policy: service.pipelines.%s: exports to "
                 "'otlphttp/%s': the policy allows only 'otlphttp/telemetry'\n", TMP_CONFIG,
                 signals[i], signals[i]);
        assert_non_null(strstr(r.out, want));
        assert_non_null(strstr(r.out, ": 3 policy violations, configuration does not hold "
                                      "policy configs/cvm-policy.yaml\n"));
    }
}

/* The seed deployment's config with spanfence's fence holds its policy;
 * the seed alone does not (its logs and metrics would leave unfenced). */
#define SEED "validate --config configs/otelcol-seed.yaml --config "
#define SEED_POLICY " --policy configs/otelcol-seed-policy.yaml"

static void test_seed_policy(void **state)
{
    run r;

    (void)state;
    spanfence(&r, SEED "configs/otelcol-seed-fence.yaml" SEED_POLICY);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "configs/otelcol-seed.yaml, configs/otelcol-seed-fence.yaml: "
                        "configuration is valid and holds policy "
                        "configs/otelcol-seed-policy.yaml\n");
    spanfence(&r, "validate --config configs/otelcol-seed.yaml" SEED_POLICY);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "policy: service.pipelines.logs: does not run processor "
                                  "'transform/fence'"));
    assert_non_null(strstr(r.out, "policy: service.pipelines.metrics: does not run processor "
                                  "'transform/fence'"));
}

/* configs/otelcol-seed-fence.yaml with `from` (exactly once in it) replaced
 * by `to`, into TMP_OVER. */
static void write_fence_mutated(const char *from, const char *to)
{
    FILE *f = fopen(SF_SOURCE_DIR "/configs/otelcol-seed-fence.yaml", "r");
    char *text = calloc(1, 65536), *at, *out;
    size_t n;

    assert_non_null(f);
    assert_non_null(text);
    n = fread(text, 1, 65535, f);
    fclose(f);
    at = strstr(text, from);
    if (at == NULL || strstr(at + 1, from) != NULL)
        fail_msg("'%s' is not in the fence exactly once", from);
    out = calloc(1, n + strlen(to) + 1);
    assert_non_null(out);
    memcpy(out, text, (size_t)(at - text));
    strcat(out, to);
    strcat(out, at + strlen(from));
    write_file(TMP_OVER, out);
    free(out);
    free(text);
}

/* Each line of the fence the policy pins: changed, the config does not
 * hold (and the lint warns where a pattern lost its bound). */
static void test_seed_fence_mutations(void **state)
{
    static const struct {
        const char *from, *to, *want;
    } m[] = {
        { "    kept_value_types: single\n", "",
          "kept_value_types is 'any' (the default), the policy requires 'single'" },
        { "    declared_fields: true\n", "", "declared_fields is not true" },
        { "      \"sglang:num_retractions\": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, "
          "50, 75, 100]\n", "", "histogram_bounds has no set for 'sglang:num_retractions'" },
        { "\"sglang:time_to_first_token_seconds\": [0.1, 0.2,",
          "\"sglang:time_to_first_token_seconds\": [0.1, 0.25,",
          "histogram_bounds of 'sglang:time_to_first_token_seconds' differ" },
        { "#queue-req: [0-9]{1,6}(, #prealloc-req", "#queue-req: [0-9]+(, #prealloc-req",
          "the log body rule is" },
        { "|time_to_first_token_seconds|", "|time_to_first_token_seconds|patient_jane_doe_has_hiv|",
          "metric.name is kept when it matches" },
        { "^(log_prefill_stats|log_decode_stats)$", "^[a-z_][a-z0-9_]{0,63}$",
          "log key 'code.function' has the value rule" },
        { "|sglang\\\\.srt\\\\.server_args)$\")\n          - delete_key(attributes, \"code.function\")",
          "|sglang(\\\\.[a-z_]+)*)$\")\n          - delete_key(attributes, \"code.function\")",
          "log key 'log.logger' has the value rule" },
    };
    run r;

    (void)state;
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        write_fence_mutated(m[i].from, m[i].to);
        spanfence(&r, SEED TMP_OVER SEED_POLICY);
        if (r.code != 1 || strstr(r.out, m[i].want) == NULL)
            fail_msg("mutation %zu: exit %d, want '%s' in:\n%s", i, r.code, m[i].want, r.out);
    }
    /* the lint: an unbounded digit run in the body rule, a word-shaped logger */
    write_fence_mutated("#queue-req: [0-9]{1,6}(, #prealloc-req", "#queue-req: [0-9]+(, #prealloc-req");
    spanfence(&r, SEED TMP_OVER);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "warning: log.body: '[0-9]+' repeats without a bound"));
    spanfence(&r, SEED "configs/otelcol-seed-fence.yaml");
    assert_int_equal(r.code, 0);
    assert_null(strstr(r.out, "warning"));
}

/* The collector itself: refuses to start, before binding anything. */
static void test_run_refuses_to_start(void **state)
{
    char want[2048];
    run r;

    (void)state;
    write_mutated("error_mode: propagate", "error_mode: ignore");
    spanfence(&r, "--config " TMP_CONFIG " --policy configs/cvm-policy.yaml");
    assert_int_equal(r.code, 1);
    snprintf(want, sizeof(want),
             "%s:%d:17: policy: processors.transform/allowlist: error_mode is 'ignore', the "
             "policy requires 'propagate'\n"
             "spanfence: %s: 1 policy violation, configuration does not hold policy "
             "configs/cvm-policy.yaml\n",
             TMP_CONFIG, line_in(TMP_CONFIG, "error_mode: ignore"), TMP_CONFIG);
    assert_string_equal(r.out, want);
}

static void test_invalid_config_with_policy(void **state)
{
    run r;

    (void)state;
    write_mutated("      queue_size: 134217728\n", "      queue_size: 134217728\n      storage: file_storage/q\n");
    spanfence(&r, "validate --config " TMP_CONFIG " --policy configs/cvm-policy.yaml");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, ": exporters.otlphttp/gateway.sending_queue.storage: "
                           "persistent queue storage is not supported"));
    assert_non_null(strstr(r.out, ": 1 error, configuration not valid\n"));
}

static void test_invalid_policy(void **state)
{
    run r;

    (void)state;
    write_file(TMP_POLICY, "allowlist:\n  processor: transform/allowlist\n  keys: {span: [a]}\n"
                           "exporter: {id: otlphttp/gateway, max_queue_size: 0, max_elapsed_time: 1m}\n"
                           "extra: 1\n");
    spanfence(&r, "validate --config configs/cvm.yaml --policy " TMP_POLICY);
    assert_int_equal(r.code, 1);
    assert_string_equal(r.out,
                        TMP_POLICY ":4:50: exporter.max_queue_size: value '0' is out of range "
                        "(expected 1 to 1099511627776)\n"
                        TMP_POLICY ":5:1: unknown key 'extra'\n"
                        "spanfence: " TMP_POLICY ": 2 errors, policy not valid\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_config_merge),
        cmocka_unit_test(test_periodic_reader),
        cmocka_unit_test(test_config_providers),
        cmocka_unit_test(test_components_and_version),
        cmocka_unit_test(test_texts_name_every_signal),
        cmocka_unit_test(test_print_config_headers),
        cmocka_unit_test(test_default_config),
        cmocka_unit_test(test_validate_without_policy),
        cmocka_unit_test(test_validate_with_policy),
        cmocka_unit_test(test_unfenced_signal_violates),
        cmocka_unit_test(test_validate_violation),
        cmocka_unit_test(test_validate_ids_and_caps_mutations),
        cmocka_unit_test(test_seed_policy),
        cmocka_unit_test(test_seed_fence_mutations),
        cmocka_unit_test(test_trace_control_out_of_band),
        cmocka_unit_test(test_run_refuses_to_start),
        cmocka_unit_test(test_invalid_config_with_policy),
        cmocka_unit_test(test_invalid_policy),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}

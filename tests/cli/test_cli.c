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

#define TMP_CONFIG SF_BINARY_DIR "/test_cli_mutated.yaml"
#define TMP_POLICY SF_BINARY_DIR "/test_cli_policy.yaml"

typedef struct run {
    int code;
    char out[16384];        /* stdout and stderr, interleaved */
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
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    remove(TMP_CONFIG);
    remove(TMP_POLICY);
    return 0;
}

static void test_usage(void **state)
{
    run r;

    (void)state;
    spanfence(&r, "validate");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.out, "spanfence: validate needs --config FILE\n");
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
    write_mutated("queue_size: 32", "queue_size: 100000");
    /* without the policy the mutated config is valid */
    spanfence(&r, "validate --config " TMP_CONFIG);
    assert_int_equal(r.code, 0);
    spanfence(&r, "validate --config " TMP_CONFIG " --policy configs/cvm-policy.yaml");
    assert_int_equal(r.code, 1);
    snprintf(want, sizeof(want),
             "%s:%d:19: policy: exporters.otlphttp/gateway.sending_queue.queue_size: is 100000, "
             "the policy allows at most 32\n"
             "spanfence: %s: 1 policy violation, configuration does not hold policy "
             "configs/cvm-policy.yaml\n",
             TMP_CONFIG, line_in(TMP_CONFIG, "queue_size: 100000"), TMP_CONFIG);
    assert_string_equal(r.out, want);
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
    write_mutated("      queue_size: 32\n", "      queue_size: 32\n      storage: file_storage/q\n");
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
                        "(expected 1 to 1000000)\n"
                        TMP_POLICY ":5:1: unknown key 'extra'\n"
                        "spanfence: " TMP_POLICY ": 2 errors, policy not valid\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_validate_without_policy),
        cmocka_unit_test(test_validate_with_policy),
        cmocka_unit_test(test_validate_violation),
        cmocka_unit_test(test_run_refuses_to_start),
        cmocka_unit_test(test_invalid_config_with_policy),
        cmocka_unit_test(test_invalid_policy),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}

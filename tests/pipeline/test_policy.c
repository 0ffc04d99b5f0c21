/* tests/pipeline/test_policy.c: the policy validator's contract: starting
 * from configs/cvm.yaml and configs/cvm-policy.yaml as shipped, the
 * unmutated config holds the policy and each single mutation of the config
 * text is rejected with exact messages naming it; the policy file itself is
 * validated strictly; allocation failures leak nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/sf_torture.h"

#include "sf_alloc.h"
#include "sf_config.h"
#include "policy/sf_policy.h"

#define CVM "configs/cvm.yaml"
#define MAX_WANT 16

/* The shipped files with declared mode turned off in both: the checks that
 * predate it (key sets, cleared fields, name rules, exporter, ...) are
 * shown without declared mode's own config errors answering first. The
 * declared-mode pins are tested on the files as shipped (cvm_shipped). */
static char *cvm_text;
static char *policy_text;
static char *cvm_shipped;
static char *policy_shipped;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    rewind(f);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static char *replace(const char *text, const char *from, const char *to);
static char *replace_first(const char *text, const char *from, const char *to);
static char *traces_only(const char *cvm);
static char *cut_lines(const char *text, const char *from, const char *to);

static int setup(void **state)
{
    (void)state;
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "https://gateway.example:4318", 1);
    setenv("SPANFENCE_GATEWAY_TOKEN", "t0ken", 1);
    setenv("SPANFENCE_PSEUDONYM_KEY", "pseudonym-key-for-the-tests", 1);
    cvm_shipped = slurp(SF_SOURCE_DIR "/configs/cvm.yaml");
    policy_shipped = slurp(SF_SOURCE_DIR "/configs/cvm-policy.yaml");
    /* The traces allowlist's mutations run on cvm.yaml without its logs and
     * metrics (their fence's own mutations: test_cli's seed fence), and with
     * the allowlist's declared mode off (the first declared_fields and
     * max_string_length of each file are the allowlist's). */
    {
        char *t = traces_only(cvm_shipped);

        cvm_text = replace_first(t, "    declared_fields: true\n", "    declared_fields: false\n");
        free(t);
    }
    {
        char *q = cut_lines(policy_shipped, "\n# The fence of the logs and metrics pipelines",
                            "\nreceivers:\n");
        char *p = replace_first(q, "\n  declared_fields: true\n", "\n  declared_fields: false\n");

        policy_text = replace_first(p, "\n  max_string_length: 256\n", "\n  max_string_length: 0\n");
        free(p);
        free(q);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(cvm_text);
    free(cvm_shipped);
    free(policy_shipped);
    free(policy_text);
    return 0;
}

/* `text` with the one occurrence of `from` replaced by `to` (malloc'd). */
static char *replace(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    size_t fl = strlen(from), tl = strlen(to), n = strlen(text);
    char *out;

    if (at == NULL) {
        fail_msg("mutation: '%s' is not in the text", from);
        return NULL;
    }
    if (strstr(at + 1, from) != NULL)
        fail_msg("mutation: '%s' is in the text more than once", from);
    out = malloc(n - fl + tl + 1);
    assert_non_null(out);
    memcpy(out, text, (size_t)(at - text));
    memcpy(out + (at - text), to, tl);
    memcpy(out + (at - text) + tl, at + fl, n - (size_t)(at - text) - fl + 1);
    return out;
}

/* `text` with the first occurrence of `from` replaced by `to` (malloc'd). */
static char *replace_first(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    size_t fl = strlen(from), tl = strlen(to), n = strlen(text);
    char *out;

    if (at == NULL) {
        fail_msg("mutation: '%s' is not in the text", from);
        return NULL;
    }
    out = malloc(n - fl + tl + 1);
    assert_non_null(out);
    memcpy(out, text, (size_t)(at - text));
    memcpy(out + (at - text), to, tl);
    memcpy(out + (at - text) + tl, at + fl, n - (size_t)(at - text) - fl + 1);
    return out;
}

/* Cut `text` from the line starting with `from` up to (not including) the
 * line starting with `to` (malloc'd); both must be there, in that order. */
static char *cut_lines(const char *text, const char *from, const char *to)
{
    const char *a = strstr(text, from), *b = a != NULL ? strstr(a, to) : NULL;
    size_t n = strlen(text);
    char *out;

    if (a == NULL || b == NULL)
        fail_msg("cut: '%s' .. '%s' is not in the text", from, to);
    out = malloc(n - (size_t)(b - a) + 1);
    assert_non_null(out);
    memcpy(out, text, (size_t)(a - text));
    memcpy(out + (a - text), b, n - (size_t)(b - text) + 1);
    return out;
}

/* configs/cvm.yaml with its traces pipeline only: the prometheus and
 * journald receivers, transform/fence, otlphttp/telemetry and the metrics
 * and logs pipelines cut. */
static char *traces_only(const char *cvm)
{
    const char *cuts[][2] = {
        { "  # SGLang's metrics: `--enable-metrics`", "\nprocessors:\n" },
        { "\n  # The fence of the logs and metrics pipelines", "\n\nexporters:\n" },
        { "  # The same gateway for the engine's logs and metrics", "\nservice:\n" },
        { "    metrics:\n      receivers: [prometheus]", "\nallowlist-end-never" },
    };
    char *t = strdup(cvm), *u;

    assert_non_null(t);
    for (size_t i = 0; i < 3; i++) {
        u = cut_lines(t, cuts[i][0], cuts[i][1]);
        free(t);
        t = u;
    }
    /* the pipelines are last in the file: cut to its end */
    u = strstr(t, cuts[3][0]);
    if (u == NULL)
        fail_msg("cut: '%s' is not in the text", cuts[3][0]);
    *u = '\0';
    return t;
}

/* 1-based line of the one occurrence of `needle` in `text`, so expected
 * messages follow the shipped file when its comments change. */
static int line_of(const char *text, const char *needle)
{
    const char *at = strstr(text, needle);
    int line = 1;

    if (at == NULL) {
        fail_msg("'%s' is not in the text", needle);
        return 0;
    }
    if (strstr(at + 1, needle) != NULL)
        fail_msg("'%s' is in the text more than once", needle);
    for (const char *p = text; p < at; p++)
        line += *p == '\n';
    return line;
}

typedef struct want {
    size_t n;
    char *v[MAX_WANT];
} want;

static void expect(want *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void expect(want *w, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    assert_true(w->n < MAX_WANT);
    w->v[w->n++] = strdup(buf);
}

static sf_policy *load_policy(const char *text)
{
    sf_diag *d = sf_diag_create(NULL);
    sf_policy *p = NULL;

    if (sf_policy_load_string("configs/cvm-policy.yaml", text, strlen(text), d, &p) != SF_OK) {
        sf_diag_print(d);
        fail_msg("the policy does not load");
    }
    assert_int_equal(sf_diag_count(d), 0);
    sf_diag_destroy(d);
    return p;
}

/* Every message of loading `yaml` and checking it against `policy`, in
 * file order, must be exactly `w` (then freed). */
static void assert_check_with(const char *policy, const char *yaml, sf_status want_status, want *w)
{
    size_t base = sf_alloc_in_use();    /* a failed test before may have leaked */
    sf_policy *p = load_policy(policy);
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;
    sf_status st = sf_config_load_string(CVM, yaml, strlen(yaml), d, &cfg);

    if (st == SF_OK)
        st = sf_policy_check(p, cfg, d);
    for (size_t i = 0; i < sf_diag_count(d) || i < w->n; i++) {
        const char *got = i < sf_diag_count(d) ? sf_diag_message(d, i) : "(nothing)";
        const char *exp = i < w->n ? w->v[i] : "(nothing)";

        if (strcmp(got, exp) != 0) {
            for (size_t j = 0; j < sf_diag_count(d); j++)
                fprintf(stderr, "got: %s\n", sf_diag_message(d, j));
            fail_msg("message %zu:\n  want %s\n  got  %s", i, exp, got);
        }
    }
    assert_int_equal(st, want_status);
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i]);
    w->n = 0;
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    sf_policy_destroy(p);
    assert_int_equal(sf_alloc_in_use(), base);
}

/* The same against the shipped policy. */
static void assert_check(const char *yaml, sf_status want_status, want *w)
{
    assert_check_with(policy_text, yaml, want_status, w);
}

#define P CVM ":%d:%d: policy: "
#define ALLOWLIST "processors.transform/allowlist: "
#define KEEP_SPAN "keep_keys(attributes, [\"gen_ai.request.id\""
#define KEEP_EVENT "keep_keys(attributes, [\"bid\""
#define LAST_SPAN_KEY "\"num_correct_drafts\", \"accepted_tokens\"]"
#define RULE_HOST "replace_pattern(name, \"host:[^ |)]*\", \"host:redacted\")"
#define RULE_PID "replace_pattern(name, \"pid:[0-9]+\", \"pid:redacted\")"
#define RULE_REQ "replace_pattern(name, \"(?s)(?<![^ ])Req .*\", \"Req redacted\")"

/* ---- the shipped pair -------------------------------------------------------- */

static void test_shipped_config_holds(void **state)
{
    want w = { 0 };

    (void)state;
    assert_check(cvm_text, SF_OK, &w);
}

/* The policy holds the compiled edit too (the processor is created as at
 * start, then destroyed): a config that loads but whose edit cannot be
 * built, here a pseudonym key file gone between the load and the check,
 * does not pass. */
static void test_compiled_edit_must_build(void **state)
{
    char path[] = "/tmp/sf_policy_key_XXXXXX";
    int fd = mkstemp(path);
    char line[300], *yaml;
    sf_policy *p = load_policy(policy_text);
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;
    int at = line_of(cvm_text, "  transform/allowlist:\n");
    bool found = false;

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "a key of at least sixteen bytes\n", 32), 32);
    close(fd);
    snprintf(line, sizeof(line), "    pseudonym_key_file: %s\n", path);
    yaml = replace(cvm_text, "    pseudonym_key: ${env:SPANFENCE_PSEUDONYM_KEY}\n", line);
    assert_int_equal(sf_config_load_string(CVM, yaml, strlen(yaml), d, &cfg), SF_OK);
    assert_int_equal(sf_policy_check(p, cfg, d), SF_OK);        /* the control */
    unlink(path);
    assert_int_equal(sf_policy_check(p, cfg, d), SF_CONFIG);
    for (size_t i = 0; i < sf_diag_count(d); i++)
        found = found || strstr(sf_diag_message(d, i), "its edit cannot be built") != NULL;
    if (!found)
        fail_msg("no message says the edit cannot be built (transform/allowlist at line %d)", at);
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    sf_policy_destroy(p);
    free(yaml);
}

/* The sets are compared, not the statements: reordering keys and
 * statements, splitting a keep_keys in two or adding a delete_key for a key
 * that is not let through anyway changes nothing. */
static void test_order_does_not_matter(void **state)
{
    char *a = replace(cvm_text, "[\"bid\", \"batch_size\", \"forward_mode\"]",
                      "[\"forward_mode\", \"bid\", \"batch_size\", \"x\"])\n"
                      "          - keep_keys(attributes, [\"batch_size\", \"bid\", \"forward_mode\"]");
    char *b = replace(a, "          - set(status.message, \"\")\n", "");
    char *c = replace(b, "      - context: span\n        statements:\n",
                      "      - context: span\n        statements:\n"
                      "          - set(status.message, \"\")\n"
                      "          - delete_key(attributes, \"user.email\")\n");
    want w = { 0 };

    (void)state;
    assert_check(c, SF_OK, &w);
    free(a);
    free(b);
    free(c);
}

/* Other processors may run beside the allowlist (a memory limiter first). */
/* The policy does not pin the memory limiter: a config without it holds. */
static void test_memory_limiter_not_pinned(void **state)
{
    char *a = replace(cvm_text, "  memory_limiter:\n    check_interval: 1s\n    limit_mib: 448\n"
                      "    spike_limit_mib: 64\n", "");
    char *y = replace(a, "processors: [memory_limiter, transform/allowlist]",
                      "processors: [transform/allowlist]");
    want w = { 0 };

    (void)state;
    assert_check(y, SF_OK, &w);
    free(a);
    free(y);
}

/* ---- one mutation each ----------------------------------------------------------- */

static void test_add_key(void **state)
{
    char *y = replace(cvm_text, LAST_SPAN_KEY, "\"num_correct_drafts\", \"accepted_tokens\", \"user.email\"]");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "span allowlist has key 'user.email' not in the policy",
           line_of(y, KEEP_SPAN), 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_remove_key(void **state)
{
    char *y = replace(cvm_text, "\"rid\", ", "");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "span allowlist is missing key 'rid' required by the policy",
           line_of(y, KEEP_SPAN), 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_remove_key_with_delete_key(void **state)
{
    char *y = replace(cvm_text, "          - set(status.message, \"\")\n",
                      "          - set(status.message, \"\")\n"
                      "          - delete_key(attributes, \"tp_rank\")\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "span allowlist is missing key 'tp_rank' required by the policy",
           line_of(y, "delete_key(attributes, \"tp_rank\")\n"), 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_move_key_between_contexts(void **state)
{
    char *a = replace(cvm_text, "[\"bid\", ", "[");
    char *y = replace(a, LAST_SPAN_KEY, "\"num_correct_drafts\", \"accepted_tokens\", \"bid\"]");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "span allowlist has key 'bid' not in the policy",
           line_of(y, KEEP_SPAN), 13);
    expect(&w, P ALLOWLIST "spanevent allowlist is missing key 'bid' required by the policy",
           line_of(y, "keep_keys(attributes, [\"batch_size\""), 13);
    assert_check(y, SF_CONFIG, &w);
    free(a);
    free(y);
}

/* A context the policy does not list must have no keep_keys. */
static void test_allowlist_in_unpinned_context(void **state)
{
    char *pt = replace(policy_text, "    spanevent: [bid, batch_size, forward_mode]\n    link: []\n",
                       "    spanevent: [bid, batch_size, forward_mode]\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "the policy pins no link allowlist, the config has one",
           line_of(cvm_text, "      - context: link\n") + 2, 13);
    assert_check_with(pt, cvm_text, SF_CONFIG, &w);
    free(pt);
}

static void test_remove_allowlist(void **state)
{
    char *y = replace(cvm_text, "          - " KEEP_EVENT ", \"batch_size\", \"forward_mode\"])\n",
                      "          - delete_key(attributes, \"bid\")\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "spanevent attributes are not bounded by keep_keys: the policy pins "
           "3 spanevent keys", line_of(y, "trace_statements:"), 5);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* ---- what the allowlist pins besides span and span event keys ---------------- */

static void test_resource_key_added(void **state)
{
    char *y = replace(cvm_text, "keep_keys(attributes, [\"service.name\"]", "keep_keys(attributes, [\"service.name\", \"host.name\"]");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "resource allowlist has key 'host.name' not in the policy",
           line_of(y, "[\"service.name\", "), 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_resource_allowlist_removed(void **state)
{
    char *y = replace(cvm_text, "          - keep_keys(attributes, [\"service.name\"])\n", "");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "resource attributes are not bounded by keep_keys: the policy pins "
           "1 resource key", line_of(y, "trace_statements:"), 5);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_scope_key_added(void **state)
{
    char *y = replace(cvm_text, "context: scope\n        statements:\n"
                      "          - keep_keys(attributes, [])",
                      "context: scope\n        statements:\n"
                      "          - keep_keys(attributes, [\"otel.library.name\"])");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "scope allowlist has key 'otel.library.name' not in the policy",
           line_of(y, "[\"otel.library.name\"]"), 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_link_allowlist_removed(void **state)
{
    char *y = replace(cvm_text, "      - context: link\n        statements:\n"
                      "          - keep_keys(attributes, [])\n",
                      "      - context: link\n        statements:\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "link attributes are not bounded by keep_keys: the policy pins "
           "0 link keys", line_of(y, "trace_statements:"), 5);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_link_key_added(void **state)
{
    char *y = replace(cvm_text, "          - keep_keys(attributes, [])\n          - set(trace_state",
                      "          - keep_keys(attributes, [\"peer\"])\n          - set(trace_state");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "link allowlist has key 'peer' not in the policy",
           line_of(y, "[\"peer\"]"), 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_kept_value_types_any(void **state)
{
    char *y = replace(cvm_text, "    kept_value_types: single\n", "    kept_value_types: any\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "kept_value_types is 'any', the policy requires 'single': a kept key "
           "could carry an array whose elements spell text", line_of(y, "kept_value_types: any"),
           23);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* scalar lets an array of doubles (8 bytes of text an element) leave. */
static void test_kept_value_types_scalar(void **state)
{
    char *y = replace(cvm_text, "    kept_value_types: single\n", "    kept_value_types: scalar\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "kept_value_types is 'scalar', the policy requires 'single': a kept "
           "key could carry an array whose elements spell text",
           line_of(y, "kept_value_types: scalar"), 23);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* A policy that asks for scalar is held by a config that says single. */
static void test_kept_value_types_single_holds_scalar(void **state)
{
    char *p = replace(policy_text, "  kept_value_types: single\n", "  kept_value_types: scalar\n");
    want w = { 0 };

    (void)state;
    assert_check_with(p, cvm_text, SF_OK, &w);
    free(p);
}

/* The processor's default is any (upstream's behaviour). */
static void test_kept_value_types_default(void **state)
{
    char *y = replace(cvm_text, "    kept_value_types: single\n", "");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "kept_value_types is 'any' (the default), the policy requires "
           "'single': a kept key could carry an array whose elements spell text",
           line_of(y, "  transform/allowlist:"), 3);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* The caps on events and links: absent, or above the policy's. */
static void test_event_cap_absent(void **state)
{
    char *y = replace(cvm_text, "    max_events_per_span: 4\n", "");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "max_events_per_span is not set: any number of span.events leave, "
           "the policy allows 4 a span", line_of(y, "  transform/allowlist:"), 3);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_link_cap_raised(void **state)
{
    char *y = replace(cvm_text, "    max_links_per_span: 1\n", "    max_links_per_span: 64\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "max_links_per_span is 64, the policy allows at most 1",
           line_of(y, "max_links_per_span: 64"), 25);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* Ids and the caps per request: pseudonymize_ids off, a cap raised. */
static void test_ids_not_pseudonymized(void **state)
{
    char *y = replace(cvm_text, "    pseudonymize_ids: true\n", "    pseudonymize_ids: false\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "pseudonymize_ids is off: the client's trace and span ids leave as it "
           "chose them, the policy requires keyed pseudonyms",
           line_of(y, "pseudonymize_ids: false"), 23);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_request_caps_raised(void **state)
{
    char *y = replace(cvm_text, "    max_resources_per_request: 2\n",
                      "    max_resources_per_request: 3\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "max_resources_per_request is 3, the policy allows at most 2",
           line_of(y, "max_resources_per_request: 3"), 32);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* A lower cap than the policy's holds it. */
static void test_event_cap_lower(void **state)
{
    char *y = replace(cvm_text, "    max_events_per_span: 4\n", "    max_events_per_span: 2\n");
    want w = { 0 };

    (void)state;
    assert_check(y, SF_OK, &w);
    free(y);
}

static void test_span_trace_state_not_cleared(void **state)
{
    char *y = replace(cvm_text, "every span\n          - set(trace_state, \"\")\n", "every span\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "span trace_state is not cleared: the policy requires "
           "set(trace_state, \"\") in the span context", line_of(y, "trace_statements:"), 5);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_link_trace_state_not_cleared(void **state)
{
    char *y = replace(cvm_text, "          - keep_keys(attributes, [])\n          - set(trace_state, \"\")\n",
                      "          - keep_keys(attributes, [])\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "link trace_state is not cleared: the policy requires "
           "set(trace_state, \"\") in the link context", line_of(y, "trace_statements:"), 5);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* ---- span-name rules: the exact ordered list ------------------------------------ */

static void test_name_rule_missing(void **state)
{
    char *y = replace(cvm_text, "          - " RULE_REQ "\n", "");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "span name rule 3 is missing: the policy requires "
           "replace_pattern(name, \"(?s)(?<![^ ])Req .*\", \"Req redacted\")",
           line_of(y, RULE_PID), 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* Removing one in the middle shifts the rest: each position is named. */
static void test_name_rule_removed_in_the_middle(void **state)
{
    char *y = replace(cvm_text, "          - " RULE_PID "\n", "");
    int l = line_of(y, RULE_REQ);
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "span name rule 2 is replace_pattern(name, \"(?s)(?<![^ ])Req .*\", "
           "\"Req redacted\"), the policy requires replace_pattern(name, \"pid:[0-9]+\", "
           "\"pid:redacted\")", l, 13);
    expect(&w, P ALLOWLIST "span name rule 3 is missing: the policy requires "
           "replace_pattern(name, \"(?s)(?<![^ ])Req .*\", \"Req redacted\")", l, 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_name_rule_extra(void **state)
{
    char *y = replace(cvm_text, "          - " RULE_REQ "\n",
                      "          - " RULE_REQ "\n"
                      "          - replace_pattern(name, \"^decode\", \"\")\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "span name rule 4 replace_pattern(name, \"^decode\", \"\") is not in "
           "the policy, which pins 3", line_of(y, "\"^decode\""), 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_name_rules_reordered(void **state)
{
    char *y = replace(cvm_text, "          - " RULE_HOST "\n          - " RULE_PID "\n",
                      "          - " RULE_PID "\n          - " RULE_HOST "\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "span name rule 1 is replace_pattern(name, \"pid:[0-9]+\", "
           "\"pid:redacted\"), the policy requires replace_pattern(name, \"host:[^ |)]*\", "
           "\"host:redacted\")", line_of(y, RULE_PID), 13);
    expect(&w, P ALLOWLIST "span name rule 2 is replace_pattern(name, \"host:[^ |)]*\", "
           "\"host:redacted\"), the policy requires replace_pattern(name, \"pid:[0-9]+\", "
           "\"pid:redacted\")", line_of(y, RULE_HOST), 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* One byte of the pattern, one of the replacement: compared as text, with
 * the config's strings shown escaped as they are written. */
static void test_name_rule_altered(void **state)
{
    char *a = replace(cvm_text, "\"pid:[0-9]+\"", "\"pid:[0-9]\"");
    char *y = replace(a, "\"host:redacted\"", "\"host:\\\\\\\"x\\\"\"");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "span name rule 1 is replace_pattern(name, \"host:[^ |)]*\", "
           "\"host:\\\\\\\"x\\\"\"), the policy requires replace_pattern(name, \"host:[^ |)]*\", "
           "\"host:redacted\")", line_of(y, "host:[^ |)]*"), 13);
    expect(&w, P ALLOWLIST "span name rule 2 is replace_pattern(name, \"pid:[0-9]\", "
           "\"pid:redacted\"), the policy requires replace_pattern(name, \"pid:[0-9]+\", "
           "\"pid:redacted\")", line_of(y, "pid:[0-9]"), 13);
    assert_check(y, SF_CONFIG, &w);
    free(a);
    free(y);
}

static void test_spanevent_name_rule(void **state)
{
    char *y = replace(cvm_text, "          - " KEEP_EVENT ", \"batch_size\", \"forward_mode\"])\n",
                      "          - " KEEP_EVENT ", \"batch_size\", \"forward_mode\"])\n"
                      "          - replace_pattern(name, \"x\", \"y\")\n");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "spanevent name rule 1 replace_pattern(name, \"x\", \"y\") is not in "
           "the policy, which pins 0", line_of(y, "replace_pattern(name, \"x\""), 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* With name_rules, a context it does not list must have no rules. */
static void test_name_rules_unpinned_context(void **state)
{
    char *pt = replace(policy_text, "    spanevent: []\n  # Declared mode", "  # Declared mode");
    char *y = replace(cvm_text, "          - " KEEP_EVENT ", \"batch_size\", \"forward_mode\"])\n",
                      "          - " KEEP_EVENT ", \"batch_size\", \"forward_mode\"])\n"
                      "          - replace_pattern(spanevent.name, \"x\", \"y\")\n");
    want w = { 0 };

    (void)state;
    assert_check_with(pt, cvm_text, SF_OK, &w);
    expect(&w, P ALLOWLIST "spanevent name rule 1 replace_pattern(name, \"x\", \"y\") is not in "
           "the policy, which pins no spanevent name rules",
           line_of(y, "replace_pattern(spanevent.name"), 13);
    assert_check_with(pt, y, SF_CONFIG, &w);
    free(pt);
    free(y);
}

/* The rules of a context run in statement order, wherever they are
 * written: split over two groups (and flat), the list is the same. */
static void test_name_rules_split_over_groups(void **state)
{
    char *a = replace(cvm_text, "          - " RULE_REQ "\n", "");
    char *y = replace(a, "      - context: spanevent\n",
                      "      - context: span\n        statements:\n          - " RULE_REQ "\n"
                      "      - context: spanevent\n");
    want w = { 0 };

    (void)state;
    assert_check(y, SF_OK, &w);
    free(a);
    free(y);
}

/* Without name_rules in the policy, names are not pinned. */
static void test_name_rules_not_pinned(void **state)
{
    const char *from = strstr(policy_text, "  name_rules:\n"), *to = strstr(policy_text, "\n\n# The one");
    char *cut, *pt, *y;
    want w = { 0 };

    (void)state;
    assert_non_null(from);
    assert_non_null(to);
    cut = strndup(from, (size_t)(to - from) + 1);
    pt = replace(policy_text, cut, "");
    y = replace(cvm_text, "          - " RULE_PID "\n", "");
    assert_check_with(pt, y, SF_OK, &w);
    free(cut);
    free(pt);
    free(y);
}

static void test_processor_removed_from_pipeline(void **state)
{
    char *y = replace(cvm_text, "processors: [memory_limiter, transform/allowlist]",
                      "processors: [memory_limiter]");
    want w = { 0 };
    int pl = line_of(y, "processors: [memory_limiter]");

    (void)state;
    expect(&w, CVM ":%d:3: processors.transform/allowlist: warning: processor "
           "'transform/allowlist' is defined but not used in any pipeline",
           line_of(y, "  transform/allowlist:"));
    expect(&w, P "service.pipelines.traces: does not run processor 'transform/allowlist'", pl, 7);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_second_traces_pipeline(void **state)
{
    char *y = replace(cvm_text, "      exporters: [otlphttp/gateway]\n",
                      "      exporters: [otlphttp/gateway]\n"
                      "    traces/2:\n"
                      "      receivers: [otlp]\n"
                      "      exporters: [otlphttp/gateway]\n");
    int l2 = line_of(y, "traces/2:");
    want w = { 0 };

    (void)state;
    expect(&w, P "service.pipelines.traces/2: a second traces pipeline: the policy allows "
           "exactly one", l2, 5);
    expect(&w, P "service.pipelines.traces/2: does not run processor 'transform/allowlist'",
           l2, 5);
    expect(&w, P "service.pipelines.traces/2: uses exporter 'otlphttp/gateway', which the "
           "policy reserves for pipeline 'traces'", l2 + 2, 19);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_exporter_in_logs_pipeline(void **state)
{
    char *y = replace(cvm_text, "      exporters: [otlphttp/gateway]\n",
                      "      exporters: [otlphttp/gateway]\n"
                      "    logs:\n"
                      "      receivers: [otlp]\n"
                      "      exporters: [otlphttp/gateway]\n");
    int l = line_of(y, "logs:");
    want w = { 0 };

    (void)state;
    expect(&w, P "service.pipelines.logs: a logs pipeline, but the policy has no 'logs' section: "
           "its log_records would leave unfenced", l, 5);
    expect(&w, P "service.pipelines.logs: uses exporter 'otlphttp/gateway', which the policy "
           "reserves for pipeline 'traces'", l + 2, 19);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* A metrics pipeline is checked as a logs one: the traces exporter is
 * not shared, whatever else the pipeline exports to. */
static void test_exporter_in_metrics_pipeline(void **state)
{
    char *y = replace(cvm_text, "      exporters: [otlphttp/gateway]\n",
                      "      exporters: [otlphttp/gateway]\n"
                      "    metrics:\n"
                      "      receivers: [otlp]\n"
                      "      exporters: [otlphttp/metrics, otlphttp/gateway]\n");
    char *z = replace(y, "\nservice:\n",
                      "  otlphttp/metrics:\n    endpoint: http://127.0.0.1:4320\n\nservice:\n");
    int l = line_of(z, "metrics:\n      receivers");
    want w = { 0 };

    (void)state;
    expect(&w, P "service.pipelines.metrics: a metrics pipeline, but the policy has no 'metrics' "
           "section: its metric_points would leave unfenced", l, 5);
    expect(&w, P "service.pipelines.metrics: uses exporter 'otlphttp/gateway', which the policy "
           "reserves for pipeline 'traces'", l + 2, 37);
    assert_check(z, SF_CONFIG, &w);
    free(y);
    free(z);
}

static void test_second_exporter_in_traces_pipeline(void **state)
{
    char *a = replace(cvm_text, "exporters: [otlphttp/gateway]", "exporters: [otlphttp/gateway, otlphttp/copy]");
    char *y = replace(a, "\nservice:\n", "  otlphttp/copy:\n    endpoint: https://elsewhere.example\n"
                      "    sending_queue: {queue_size: 32}\n\nservice:\n");
    want w = { 0 };

    (void)state;
    expect(&w, P "service.pipelines.traces: exports to 'otlphttp/copy': the policy allows only "
           "'otlphttp/gateway'", line_of(y, "exporters: [otlphttp/gateway, "), 37);
    assert_check(y, SF_CONFIG, &w);
    free(a);
    free(y);
}

static void test_error_mode_ignore(void **state)
{
    char *y = replace(cvm_text, "error_mode: propagate", "error_mode: ignore");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "error_mode is 'ignore', the policy requires 'propagate'",
           line_of(y, "error_mode: ignore"), 17);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_group_error_mode_silent(void **state)
{
    char *y = replace(cvm_text, "      - context: spanevent\n",
                      "      - context: spanevent\n        error_mode: silent\n");
    want w = { 0 };

    (void)state;
    /* every statement of the group: the keep_keys, three value rules, the name rule */
    expect(&w, P ALLOWLIST "spanevent statement runs with error_mode 'silent', the policy "
           "requires 'propagate'", line_of(y, KEEP_EVENT), 13);
    expect(&w, P ALLOWLIST "spanevent statement runs with error_mode 'silent', the policy "
           "requires 'propagate'", line_of(y, "delete_key(attributes, \"bid\")"), 13);
    expect(&w, P ALLOWLIST "spanevent statement runs with error_mode 'silent', the policy "
           "requires 'propagate'", line_of(y, "delete_key(attributes, \"batch_size\")"), 13);
    expect(&w, P ALLOWLIST "spanevent statement runs with error_mode 'silent', the policy "
           "requires 'propagate'", line_of(y, "delete_key(attributes, \"forward_mode\")"), 13);
    expect(&w, P ALLOWLIST "spanevent statement runs with error_mode 'silent', the policy "
           "requires 'propagate'", line_of(y, "(schedule|retract)"), 13);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_status_statement_removed(void **state)
{
    char *y = replace(cvm_text, "          - set(status.message, \"\")\n", "");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "span status messages are not cleared: the policy requires "
           "set(status.message, \"\")", line_of(y, "trace_statements:"), 5);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_queue_size(void **state)
{
    char *y = replace(cvm_text, "queue_size: 134217728", "queue_size: 200000000");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlphttp/gateway.sending_queue.queue_size: is 200000000, the policy "
           "allows at most 134217728", line_of(y, "queue_size: 200000000"), 19);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_queue_size_default(void **state)
{
    char *y = replace(cvm_text, "    sending_queue:\n      sizer: bytes\n      queue_size: 134217728\n      num_consumers: 16\n      batch:\n        min_size: 2048\n", "");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlphttp/gateway.sending_queue.sizer: is requests (the default), "
           "the policy bounds the queue in bytes", line_of(y, "otlphttp/gateway:"), 3);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_queue_disabled(void **state)
{
    char *y = replace(cvm_text, "      queue_size: 134217728\n", "      queue_size: 134217728\n      enabled: false\n");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlphttp/gateway.sending_queue.enabled: is false: sends would run "
           "on the receiver's thread and a slow gateway would block the engine; the policy "
           "requires the bounded queue", line_of(y, "enabled: false"), 16);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* The loader itself refuses a persistent queue (spanfence never writes spans
 * to disk), so the policy check never sees such a config. */
static void test_storage(void **state)
{
    char *y = replace(cvm_text, "      queue_size: 134217728\n",
                      "      queue_size: 134217728\n      storage: file_storage/queue\n");
    want w = { 0 };

    (void)state;
    expect(&w, CVM ":%d:7: exporters.otlphttp/gateway.sending_queue.storage: persistent queue "
           "storage is not supported: spanfence never writes spans to disk",
           line_of(y, "storage:"));
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_max_elapsed_time_zero(void **state)
{
    char *y = replace(cvm_text, "max_elapsed_time: 60s", "max_elapsed_time: 0");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlphttp/gateway.retry_on_failure.max_elapsed_time: is 0s (retry "
           "forever), the policy allows at most 1m", line_of(y, "max_elapsed_time: 0"), 25);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_max_elapsed_time_longer(void **state)
{
    char *y = replace(cvm_text, "max_elapsed_time: 60s", "max_elapsed_time: 1m1s");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlphttp/gateway.retry_on_failure.max_elapsed_time: is 1m1s, the "
           "policy allows at most 1m", line_of(y, "max_elapsed_time: 1m1s"), 25);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_receiver_all_interfaces(void **state)
{
    char *y = replace(cvm_text, "endpoint: 127.0.0.1:4317", "endpoint: 0.0.0.0:4317");
    want w = { 0 };

    (void)state;
    expect(&w, P "receivers.otlp.protocols.grpc.endpoint: '0.0.0.0:4317' is not a loopback "
           "address: the policy allows loopback only", line_of(y, "0.0.0.0:4317"), 19);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

/* The loopback rule: numeric 127.0.0.0/8, ::1 and v4-mapped 127/8 as
 * inet_pton reads them, and the exact name localhost; any other name is
 * refused, whatever it starts with (issue 37). */
static void test_receiver_loopback_names(void **state)
{
    static const struct {
        const char *endpoint;
        bool loopback;
    } cases[] = {
        { "127.0.0.1:4317", true },
        { "127.8.9.10:4317", true },
        { "localhost:4317", true },
        { "[::1]:4317", true },
        { "[::ffff:127.0.0.1]:4317", true },
        { "[0:0:0:0:0:0:0:1]:4317", true },
        { "127.attacker.example:4317", false },
        { "127.0.0.1.attacker.example:4317", false },
        { "localhost.attacker.example:4317", false },
        { "localhostx:4317", false },
        { "127.1:4317", false },
        { "128.0.0.1:4317", false },
        { "0.0.0.0:4317", false },
        { "[::]:4317", false },
        { "[::2]:4317", false },
        { "[::ffff:10.0.0.1]:4317", false },
        { "[::1.attacker.example]:4317", false },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char line[128];
        char *y;
        want w = { 0 };

        snprintf(line, sizeof(line), "endpoint: '%s'", cases[i].endpoint);
        y = replace(cvm_text, "endpoint: 127.0.0.1:4317", line);
        print_message("%s\n", cases[i].endpoint);
        if (!cases[i].loopback) {
            expect(&w, P "receivers.otlp.protocols.grpc.endpoint: '%s' is not a loopback "
                   "address: the policy allows loopback only", line_of(y, line), 19,
                   cases[i].endpoint);
        }
        assert_check(y, cases[i].loopback ? SF_OK : SF_CONFIG, &w);
        free(y);
    }
}

/* A receiver spanfence does not run, in a metrics pipeline: its endpoints
 * are found in its settings. */
static void test_foreign_receiver_all_interfaces(void **state)
{
    char *a = replace(cvm_text, "\nprocessors:\n",
                      "  zipkin:\n    endpoint: :9411\n\nprocessors:\n");
    char *z = replace(a, "\nservice:\n", "  kafka:\n\nservice:\n");
    want w = { 0 };

    (void)state;
    /* defined, listed by no pipeline (one listing them would be refused
     * as a type spanfence does not have): still held to the policy */
    expect(&w, CVM ":%d:3: receivers.zipkin: warning: receiver 'zipkin' is not run by spanfence",
           line_of(z, "zipkin:"));
    expect(&w, P "receivers.zipkin.endpoint: ':9411' is not a loopback address: the policy "
           "allows loopback only", line_of(z, ":9411"), 15);
    expect(&w, CVM ":%d:3: exporters.kafka: warning: exporter 'kafka' is not run by spanfence",
           line_of(z, "kafka:"));
    assert_check(z, SF_CONFIG, &w);
    free(a);
    free(z);
}

static void test_receiver_not_in_policy(void **state)
{
    char *a = replace(cvm_text, "\nprocessors:\n",
                      "  otlp/2:\n    protocols: {http: {endpoint: 'localhost:14318'}}\n\nprocessors:\n");
    char *y = replace(a, "receivers: [otlp]", "receivers: [otlp/2, otlp]");
    want w = { 0 };

    (void)state;
    expect(&w, P "service.pipelines.traces: receiver 'otlp/2' is not in the policy",
           line_of(y, "receivers: [otlp/2"), 19);
    assert_check(y, SF_CONFIG, &w);
    free(a);
    free(y);
}

static void test_endpoint_not_from_env(void **state)
{
    char *y = replace(cvm_text, "endpoint: ${env:SPANFENCE_GATEWAY_ENDPOINT}",
                      "endpoint: https://gateway.example:4318");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlphttp/gateway.endpoint: is not read from "
           "${env:SPANFENCE_GATEWAY_ENDPOINT} as the policy requires",
           line_of(y, "endpoint: https://gateway.example"), 15);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_traces_endpoint_override(void **state)
{
    char *y = replace(cvm_text, "    headers:\n",
                      "    traces_endpoint: https://elsewhere.example/v1/traces\n    headers:\n");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlphttp/gateway.traces_endpoint: overrides the endpoint the policy "
           "pins", line_of(y, "traces_endpoint:"), 22);
    assert_check(y, SF_CONFIG, &w);
    free(y);
}

static void test_processor_renamed(void **state)
{
    char *a = replace(cvm_text, "  transform/allowlist:\n", "  transform/other:\n");
    char *y = replace(a, "processors: [memory_limiter, transform/allowlist]",
                      "processors: [memory_limiter, transform/other]");
    want w = { 0 };

    (void)state;
    expect(&w, P ALLOWLIST "the allowlist processor is not defined", line_of(y, "\nprocessors:") + 1, 1);
    expect(&w, P "service.pipelines.traces: does not run processor 'transform/allowlist'",
           line_of(y, "processors: [memory_limiter, transform/other]"), 7);
    assert_check(y, SF_CONFIG, &w);
    free(a);
    free(y);
}

/* A policy pinning the endpoint's value instead of its variable. */
static void test_endpoint_value(void **state)
{
    char *pt = replace(policy_text, "  endpoint_env: SPANFENCE_GATEWAY_ENDPOINT\n",
                       "  endpoint: https://gateway.example:4318\n");
    sf_diag *d = sf_diag_create(NULL);
    sf_policy *p = NULL;
    sf_config *cfg = NULL;

    (void)state;
    assert_int_equal(sf_policy_load_string("p.yaml", pt, strlen(pt), d, &p), SF_OK);
    assert_int_equal(sf_config_load_string(CVM, cvm_text, strlen(cvm_text), d, &cfg), SF_OK);
    assert_int_equal(sf_policy_check(p, cfg, d), SF_OK);
    sf_config_destroy(cfg);
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "https://evil.example", 1);
    assert_int_equal(sf_config_load_string(CVM, cvm_text, strlen(cvm_text), d, &cfg), SF_OK);
    assert_int_equal(sf_policy_check(p, cfg, d), SF_CONFIG);
    assert_int_equal(sf_diag_count(d), 1);
    {
        char buf[512];

        snprintf(buf, sizeof(buf), P "exporters.otlphttp/gateway.endpoint: is "
                 "'https://evil.example', the policy pins 'https://gateway.example:4318'",
                 line_of(cvm_text, "endpoint: ${env:"), 15);
        assert_string_equal(sf_diag_message(d, 0), buf);
    }
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "https://gateway.example:4318", 1);
    sf_config_destroy(cfg);
    sf_policy_destroy(p);
    sf_diag_destroy(d);
    free(pt);
    assert_int_equal(sf_alloc_in_use(), 0);
}

/* ---- an otlp (gRPC) exporter: pinned exactly like otlphttp ------------------ */

/* `text` with every occurrence of `from` replaced by `to` (malloc'd); at
 * least one must be there. */
static char *replace_all(const char *text, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to), n = 0;
    char *out, *w;

    for (const char *p = strstr(text, from); p != NULL; p = strstr(p + fl, from))
        n++;
    if (n == 0)
        fail_msg("mutation: '%s' is not in the text", from);
    out = malloc(strlen(text) + n * tl + 1);
    assert_non_null(out);
    w = out;
    for (const char *p = text, *at; ; p = at + fl) {
        at = strstr(p, from);
        if (at == NULL) {
            strcpy(w, p);
            break;
        }
        memcpy(w, p, (size_t)(at - p));
        w += at - p;
        memcpy(w, to, tl);
        w += tl;
    }
    return out;
}

/* The shipped pair with the gateway exporter an `otlp` one: the same
 * settings (endpoint from the same variable, now host:port, the same queue
 * and retries), the policy pinning `otlp/gateway`. */
static char *grpc_cvm;
static char *grpc_policy;

static int setup_grpc(void **state)
{
    (void)state;
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "gateway.example:4317", 1);
    grpc_cvm = replace_all(cvm_text, "otlphttp/gateway", "otlp/gateway");
    grpc_policy = replace_all(policy_text, "otlphttp/gateway", "otlp/gateway");
    return 0;
}

static int teardown_grpc(void **state)
{
    (void)state;
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "https://gateway.example:4318", 1);
    free(grpc_cvm);
    free(grpc_policy);
    return 0;
}

static void test_otlp_exporter_holds(void **state)
{
    want w = { 0 };

    (void)state;
    assert_check_with(grpc_policy, grpc_cvm, SF_OK, &w);
}

static void test_otlp_queue_size(void **state)
{
    char *y = replace(grpc_cvm, "queue_size: 134217728", "queue_size: 200000000");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlp/gateway.sending_queue.queue_size: is 200000000, the policy "
           "allows at most 134217728", line_of(y, "queue_size: 200000000"), 19);
    assert_check_with(grpc_policy, y, SF_CONFIG, &w);
    free(y);
}

static void test_otlp_queue_size_default(void **state)
{
    char *y = replace(grpc_cvm, "    sending_queue:\n      sizer: bytes\n      queue_size: 134217728\n      num_consumers: 16\n      batch:\n        min_size: 2048\n", "");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlp/gateway.sending_queue.sizer: is requests (the default), "
           "the policy bounds the queue in bytes", line_of(y, "otlp/gateway:"), 3);
    assert_check_with(grpc_policy, y, SF_CONFIG, &w);
    free(y);
}

static void test_otlp_queue_disabled(void **state)
{
    char *y = replace(grpc_cvm, "      queue_size: 134217728\n",
                      "      queue_size: 134217728\n      enabled: false\n");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlp/gateway.sending_queue.enabled: is false: sends would run "
           "on the receiver's thread and a slow gateway would block the engine; the policy "
           "requires the bounded queue", line_of(y, "enabled: false"), 16);
    assert_check_with(grpc_policy, y, SF_CONFIG, &w);
    free(y);
}

static void test_otlp_max_elapsed_time(void **state)
{
    char *y = replace(grpc_cvm, "max_elapsed_time: 60s", "max_elapsed_time: 0");
    char *z = replace(grpc_cvm, "max_elapsed_time: 60s", "max_elapsed_time: 1m1s");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlp/gateway.retry_on_failure.max_elapsed_time: is 0s (retry "
           "forever), the policy allows at most 1m", line_of(y, "max_elapsed_time: 0"), 25);
    assert_check_with(grpc_policy, y, SF_CONFIG, &w);
    expect(&w, P "exporters.otlp/gateway.retry_on_failure.max_elapsed_time: is 1m1s, the "
           "policy allows at most 1m", line_of(z, "max_elapsed_time: 1m1s"), 25);
    assert_check_with(grpc_policy, z, SF_CONFIG, &w);
    free(y);
    free(z);
}

static void test_otlp_endpoint_not_from_env(void **state)
{
    char *y = replace(grpc_cvm, "endpoint: ${env:SPANFENCE_GATEWAY_ENDPOINT}",
                      "endpoint: gateway.example:4317");
    want w = { 0 };

    (void)state;
    expect(&w, P "exporters.otlp/gateway.endpoint: is not read from "
           "${env:SPANFENCE_GATEWAY_ENDPOINT} as the policy requires",
           line_of(y, "endpoint: gateway.example"), 15);
    assert_check_with(grpc_policy, y, SF_CONFIG, &w);
    free(y);
}

/* A policy pinning the value: the variable pointing elsewhere is caught. */
static void test_otlp_endpoint_value(void **state)
{
    char *pt = replace(grpc_policy, "  endpoint_env: SPANFENCE_GATEWAY_ENDPOINT\n",
                       "  endpoint: gateway.example:4317\n");
    want w = { 0 };

    (void)state;
    assert_check_with(pt, grpc_cvm, SF_OK, &w);
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "evil.example:4317", 1);
    expect(&w, P "exporters.otlp/gateway.endpoint: is 'evil.example:4317', the policy pins "
           "'gateway.example:4317'", line_of(grpc_cvm, "endpoint: ${env:"), 15);
    assert_check_with(pt, grpc_cvm, SF_CONFIG, &w);
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "gateway.example:4317", 1);
    free(pt);
}

/* The exporter is reserved for the traces pipeline whatever its type. */
static void test_otlp_exporter_in_logs_pipeline(void **state)
{
    char *y = replace(grpc_cvm, "      exporters: [otlp/gateway]\n",
                      "      exporters: [otlp/gateway]\n"
                      "    logs:\n"
                      "      receivers: [otlp]\n"
                      "      exporters: [otlp/gateway]\n");
    int l = line_of(y, "logs:");
    want w = { 0 };

    (void)state;
    expect(&w, P "service.pipelines.logs: a logs pipeline, but the policy has no 'logs' section: "
           "its log_records would leave unfenced", l, 5);
    expect(&w, P "service.pipelines.logs: uses exporter 'otlp/gateway', which the policy "
           "reserves for pipeline 'traces'", l + 2, 19);
    assert_check_with(grpc_policy, y, SF_CONFIG, &w);
    free(y);
}

/* An exporter type with no sending queue to pin (debug) is refused. */
static void test_exporter_without_queue(void **state)
{
    const char *from = strstr(cvm_text, "  otlphttp/gateway:\n");
    const char *to = strstr(cvm_text, "\nservice:\n");
    char *a, *y, *pt;
    want w = { 0 };

    (void)state;
    assert_non_null(from);
    assert_non_null(to);
    a = malloc(strlen(cvm_text) + 32);
    assert_non_null(a);
    snprintf(a, strlen(cvm_text) + 32, "%.*s  debug/gateway:\n%s", (int)(from - cvm_text),
             cvm_text, to);
    y = replace(a, "exporters: [otlphttp/gateway]", "exporters: [debug/gateway]");
    pt = replace(policy_text, "id: otlphttp/gateway", "id: debug/gateway");
    expect(&w, P "exporters.debug/gateway: is not a network exporter with a sending queue "
           "(such as otlphttp or otlp)", line_of(y, "debug/gateway:"), 3);
    assert_check_with(pt, y, SF_CONFIG, &w);
    free(a);
    free(y);
    free(pt);
}

/* ---- the policy file ---------------------------------------------------------- */

static void test_policy_file_errors(void **state)
{
    static const char yaml[] =
        "allowlist:\n"
        "  procesor: transform/x\n"
        "  error_mode: fail\n"
        "  keys:\n"
        "    span: [a, b, a]\n"
        "    spanevents: [c]\n"
        "exporter:\n"
        "  endpoint_env: 1BAD\n"
        "  max_elapsed_time: 0\n"
        "receivers:\n"
        "  loopback: true\n";
    static const char *const wantv[] = {
        "p.yaml:1:1: allowlist: 'processor' is required",
        "p.yaml:2:3: allowlist: unknown key 'procesor' (did you mean 'processor'?)",
        ("p.yaml:3:15: allowlist.error_mode: unknown value 'fail' (expected one of 'propagate', "
         "'ignore', 'silent')"),
        "p.yaml:5:18: allowlist.keys.span: 'a' is listed more than once",
        "p.yaml:6:5: allowlist.keys: unknown key 'spanevents' (did you mean 'spanevent'?)",
        "p.yaml:7:1: exporter: 'id' is required",
        "p.yaml:7:1: exporter: 'max_queue_size' is required",
        "p.yaml:8:17: exporter.endpoint_env: invalid environment variable name '1BAD'",
        "p.yaml:9:21: exporter.max_elapsed_time: duration '0' is out of range (expected 1ms to 24h)",
        "p.yaml:11:3: receivers: unknown key 'loopback'",
    };
    sf_diag *d = sf_diag_create(NULL);
    sf_policy *p = (sf_policy *)1;

    (void)state;
    assert_int_equal(sf_policy_load_string("p.yaml", yaml, strlen(yaml), d, &p), SF_CONFIG);
    assert_null(p);
    assert_int_equal(sf_diag_count(d), sizeof(wantv) / sizeof(wantv[0]));
    for (size_t i = 0; i < sizeof(wantv) / sizeof(wantv[0]); i++)
        assert_string_equal(sf_diag_message(d, i), wantv[i]);
    sf_diag_destroy(d);
    assert_int_equal(sf_alloc_in_use(), 0);
}

static void test_policy_file_new_keys_errors(void **state)
{
    static const char yaml[] =
        "allowlist:\n"
        "  processor: transform/x\n"
        "  kept_value_types: scalars\n"
        "  clear_trace_state: yes\n"
        "  keys: {span: [a]}\n"
        "  name_rules:\n"
        "    span:\n"
        "      - {pattern: a}\n"
        "      - {pattern: a, replacement: b, flags: g}\n"
        "      - x\n"
        "    spanevent: {pattern: a, replacement: b}\n"
        "    link: []\n"
        "exporter: {id: e, max_queue_size: 1, max_elapsed_time: 1s}\n";
    static const char *const wantv[] = {
        "p.yaml:3:21: allowlist.kept_value_types: unknown value 'scalars' (expected one of "
        "'any', 'scalar', 'single')",
        "p.yaml:4:22: allowlist.clear_trace_state: invalid boolean 'yes' (expected true or false)",
        "p.yaml:8:9: allowlist.name_rules.span[0]: 'replacement' is required (\"\" for none)",
        "p.yaml:9:38: allowlist.name_rules.span[1]: unknown key 'flags'",
        "p.yaml:10:9: allowlist.name_rules.span[2]: expected a mapping, got a single value",
        "p.yaml:11:16: allowlist.name_rules.spanevent: expected a list of {pattern, "
        "replacement} mappings",
        "p.yaml:12:5: allowlist.name_rules: unknown key 'link'",
    };
    sf_diag *d = sf_diag_create(NULL);
    sf_policy *p = (sf_policy *)1;

    (void)state;
    assert_int_equal(sf_policy_load_string("p.yaml", yaml, strlen(yaml), d, &p), SF_CONFIG);
    assert_null(p);
    assert_int_equal(sf_diag_count(d), sizeof(wantv) / sizeof(wantv[0]));
    for (size_t i = 0; i < sizeof(wantv) / sizeof(wantv[0]); i++)
        assert_string_equal(sf_diag_message(d, i), wantv[i]);
    sf_diag_destroy(d);
    assert_int_equal(sf_alloc_in_use(), 0);
}

static void test_policy_file_missing_sections(void **state)
{
    static const char yaml[] = "receivers: {loopback_only: true}\n";
    sf_diag *d = sf_diag_create(NULL);
    sf_policy *p = NULL;

    (void)state;
    assert_int_equal(sf_policy_load_string("p.yaml", yaml, strlen(yaml), d, &p), SF_CONFIG);
    assert_int_equal(sf_diag_count(d), 2);
    assert_string_equal(sf_diag_message(d, 0), "p.yaml:1:1: missing required section 'allowlist'");
    assert_string_equal(sf_diag_message(d, 1), "p.yaml:1:1: missing required section 'exporter'");
    sf_diag_destroy(d);
}

/* A logs or metrics section names its processor, key sets and exporter;
 * its exporter is pinned like the traces one; unknown keys are errors. */
static void test_policy_file_signal_sections(void **state)
{
    char *yaml = NULL;
    sf_diag *d = sf_diag_create(NULL);
    sf_policy *p = NULL;
    size_t n;
    static const char extra[] =
        "logs:\n  body: drop\n  keys: {log: [a, a]}\n"
        "metrics:\n  processor: transform\n  keys: {span: []}\n  exemplars: maybe\n"
        "  exporter: {id: x, endpoint_env: 1BAD}\n";

    (void)state;
    n = strlen(policy_text) + sizeof(extra) + 1;
    yaml = malloc(n);
    snprintf(yaml, n, "%s%s", policy_text, extra);
    assert_int_equal(sf_policy_load_string("p.yaml", yaml, strlen(yaml), d, &p), SF_CONFIG);
    assert_null(p);
    {
        static const char *const want[] = {
            "logs: 'processor' is required",
            "logs: 'exporter' is required",
            "logs.keys.log: 'a' is listed more than once",
            "metrics.keys: unknown key 'span'",
            "metrics.exemplars: ",
            "metrics.exporter: 'max_queue_size' is required",
            "metrics.exporter: 'max_elapsed_time' is required",
            "metrics.exporter.endpoint_env: invalid environment variable name '1BAD'",
        };

        for (size_t w = 0; w < sizeof(want) / sizeof(want[0]); w++) {
            bool found = false;

            for (size_t i = 0; i < sf_diag_count(d); i++)
                found = found || strstr(sf_diag_message(d, i), want[w]) != NULL;
            if (!found)
                fail_msg("no message has '%s'", want[w]);
        }
    }
    sf_diag_destroy(d);
    free(yaml);
}

static void test_policy_file_unreadable(void **state)
{
    sf_diag *d = sf_diag_create(NULL);
    sf_policy *p = NULL;

    (void)state;
    assert_int_equal(sf_policy_load("/nonexistent/p.yaml", d, &p), SF_IO);
    assert_null(p);
    assert_string_equal(sf_diag_message(d, 0),
                        "/nonexistent/p.yaml: cannot read the file: no such file or directory");
    sf_diag_destroy(d);
    d = sf_diag_create(NULL);
    assert_int_equal(sf_policy_load(SF_SOURCE_DIR "/configs/cvm-policy.yaml", d, &p), SF_OK);
    assert_int_equal(sf_diag_count(d), 0);
    assert_string_equal(sf_policy_file(p), SF_SOURCE_DIR "/configs/cvm-policy.yaml");
    sf_policy_destroy(p);
    sf_diag_destroy(d);
    assert_int_equal(sf_alloc_in_use(), 0);
}

/* Fail every allocation of loading the policy and checking a violating
 * config in turn: an error status, never a crash or a leak. */
/* Load the policy and check the config against it: the check finds the
 * config breaks the policy (SF_CONFIG), which is this scenario's success;
 * every failed allocation must be SF_ENOMEM instead. */
static sf_status policy_scenario(void *arg)
{
    const sf_config *cfg = arg;
    sf_diag *d = sf_diag_create(NULL);
    sf_policy *p = NULL;
    sf_status st;

    if (d == NULL)
        return SF_ENOMEM;
    st = sf_policy_load_string("p", policy_text, strlen(policy_text), d, &p);
    if (st == SF_OK)
        st = sf_policy_check(p, cfg, d);
    sf_policy_destroy(p);
    sf_diag_destroy(d);
    return st == SF_CONFIG ? SF_OK : st == SF_OK ? SF_INVALID : st;
}

static void test_alloc_failures(void **state)
{
    char *y = replace(cvm_text, "\"rid\", ", "\"user.email\", ");
    sf_config *cfg = NULL;
    sf_diag *d = sf_diag_create(NULL);
    sf_torture t = { .name = "policy", .run = policy_scenario, .expect = SF_ENOMEM };
    size_t base;

    (void)state;
    assert_int_equal(sf_config_load_string(CVM, y, strlen(y), d, &cfg), SF_OK);
    sf_diag_destroy(d);
    t.arg = cfg;
    base = sf_alloc_in_use();
    assert_true(sf_torture_run(&t) > 5);
    assert_int_equal(sf_alloc_in_use(), base);
    sf_config_destroy(cfg);
    free(y);
    assert_int_equal(sf_alloc_in_use(), 0);
}

/* ---- trace_control ---------------------------------------------------------------- */

#define TC_EXT "extensions:\n  trace_control:\n    socket: /run/tc.sock\n" \
               "    audit_log: /var/lib/tc.jsonl\n    levels: [0, 3]\n" \
               "    targets: {r1: {endpoint: \"http://127.0.0.1:30000/set_trace_level\", " \
               "match: {service.instance.id: r1}, out_of_band: drop}}\n"

/* A trace_control with the defaults (and out_of_band: drop) holds;
 * markers, auto_revert or enforcement turned off, or a target exporting its
 * out-of-band spans, is a violation each. */
static void test_trace_control(void **state)
{
    char *ok = replace(cvm_text, "\nservice:\n",
                       "\n" TC_EXT "service:\n  extensions: [trace_control]\n");
    char *off = replace(cvm_text, "\nservice:\n",
                        "\n" TC_EXT "    markers: {enabled: false}\n"
                        "    auto_revert: {enabled: false}\n    enforce_interval: 0s\n"
                        "service:\n  extensions: [trace_control]\n");
    char *off2 = replace(ok, "out_of_band: drop", "out_of_band: count");
    const char *at = strstr(off2, "out_of_band: count") + strlen("out_of_band: "), *ls = at;
    want w = { 0 };

    (void)state;
    while (ls > off2 && ls[-1] != '\n')
        ls--;
    assert_check(ok, SF_OK, &w);
    expect(&w, P "extensions.trace_control: 'markers.enabled' is false: the policy requires each "
           "window to be announced in the capture (a marker span)",
           line_of(off, "markers: {enabled"), 24);
    expect(&w, P "extensions.trace_control: 'auto_revert.enabled' is false: the policy requires "
           "a window to end when its capture loses spans", line_of(off, "auto_revert: {enabled"),
           28);
    expect(&w, P "extensions.trace_control: 'enforce_interval' is 0: the policy requires idle "
           "engines to be set to the resting level at an interval",
           line_of(off, "enforce_interval: 0s"), 23);
    assert_check(off, SF_CONFIG, &w);
    expect(&w, P "extensions.trace_control: target 'r1' exports the spans it sends while it "
           "rests: the policy requires 'out_of_band: drop' (a level raised out of band stays in "
           "the VM)", line_of(off2, "out_of_band: count"), (int)(at - ls) + 1);
    assert_check(off2, SF_CONFIG, &w);
    free(ok);
    free(off);
    free(off2);
}

/* cvm.yaml as shipped with trace_control's latency guard on its
 * prometheus receiver's sglang job (what the receiver's comment there
 * gives) loads and holds the shipped policy; without engine_metrics the
 * guard is refused, naming the target. */
static void assert_caught(const char *policy, const char *yaml, const char *needle);

static void test_trace_control_latency(void **state)
{
    static const char guard[] =
        "    auto_revert:\n"
        "      max_latency_increase: {ttft: 2x, itl: '+50ms', min_samples: 20}\n";
    static const char em[] =
        "        engine_metrics: {receiver: prometheus, job: sglang}\n";
    static const char head[] =
        "extensions:\n  trace_control:\n    socket: /run/tc.sock\n"
        "    audit_log: /var/lib/tc.jsonl\n    levels: [0, 3]\n";
    static const char r1[] =
        "    targets:\n      r1:\n        endpoint: http://127.0.0.1:30000/set_trace_level\n"
        "        match: {service.instance.id: r1}\n        out_of_band: drop\n";
    char ext[1024], *ok, *missing;
    want w = { 0 };

    (void)state;
    snprintf(ext, sizeof(ext), "\n%s%s%s%sservice:\n  extensions: [trace_control]\n", head,
             guard, r1, em);
    ok = replace(cvm_shipped, "\nservice:\n", ext);
    snprintf(ext, sizeof(ext), "\n%s%s%sservice:\n  extensions: [trace_control]\n", head, guard,
             r1);
    missing = replace(cvm_shipped, "\nservice:\n", ext);
    assert_check_with(policy_shipped, ok, SF_OK, &w);
    assert_caught(policy_shipped, missing, "extensions.trace_control.auto_revert."
                  "max_latency_increase: target 'r1' has no engine_metrics");
    free(ok);
    free(missing);
}

/* ---- declared mode's pins (the files as shipped) ------------------------------ */

/* Loading `yaml` and checking it against `policy` fails, and one message
 * has `needle`. */
static void assert_caught(const char *policy, const char *yaml, const char *needle)
{
    sf_policy *p = load_policy(policy);
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;
    sf_status st = sf_config_load_string(CVM, yaml, strlen(yaml), d, &cfg);
    bool found = false;

    if (st == SF_OK)
        st = sf_policy_check(p, cfg, d);
    for (size_t i = 0; i < sf_diag_count(d); i++)
        found = found || strstr(sf_diag_message(d, i), needle) != NULL;
    if (!found || st == SF_OK) {
        for (size_t i = 0; i < sf_diag_count(d); i++)
            fprintf(stderr, "got: %s\n", sf_diag_message(d, i));
        fail_msg("not caught: '%s'", needle);
    }
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    sf_policy_destroy(p);
}

static void test_declared_shipped_holds(void **state)
{
    want w = { 0 };

    (void)state;
    assert_check_with(policy_shipped, cvm_shipped, SF_OK, &w);
}

/* How many messages of checking `yaml` against `policy` contain `needle`;
 * the check must fail. */
static size_t count_messages(const char *policy, const char *yaml, const char *needle)
{
    sf_policy *p = load_policy(policy);
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;
    size_t n = 0;

    assert_int_equal(sf_config_load_string(CVM, yaml, strlen(yaml), d, &cfg), SF_OK);
    assert_int_equal(sf_policy_check(p, cfg, d), SF_CONFIG);
    for (size_t i = 0; i < sf_diag_count(d); i++)
        n += strstr(sf_diag_message(d, i), needle) != NULL;
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    sf_policy_destroy(p);
    return n;
}

/* What leaves is asked of the compiled edit, not of the statements: a
 * transform in declared mode with no trace_statements (transform/fence)
 * clears every span's status message and trace_state, so the policy does
 * not ask for set(...) statements it would not run, while it still refuses
 * the key sets no keep_keys bounds; out of declared mode the same
 * processor clears nothing, and the policy says so. */
static void test_cleared_fields_of_the_edit(void **state)
{
    char *y = replace(cvm_shipped, "      processors: [memory_limiter, transform/allowlist]\n",
                      "      processors: [memory_limiter, transform/fence]\n");
    char *pol = replace_first(policy_shipped, "  processor: transform/allowlist\n",
                              "  processor: transform/fence\n");
    char *off = replace(y, "    declared_fields: true\n    kept_value_types: single\n    # a log",
                        "    declared_fields: false\n    kept_value_types: single\n    # a log");

    (void)state;
    assert_int_equal(count_messages(pol, y, "not cleared"), 0);
    assert_int_equal(count_messages(pol, y, "span attributes are not bounded by keep_keys"), 1);
    assert_int_equal(count_messages(pol, off, "span status messages are not cleared"), 1);
    assert_int_equal(count_messages(pol, off, "trace_state is not cleared"), 2);
    assert_int_equal(sf_alloc_in_use(), 0);
    free(off);
    free(pol);
    free(y);
}

static void test_declared_mutations_caught(void **state)
{
    static const struct { const char *from, *to, *needle; } m[] = {
        { "    declared_fields: true\n", "    declared_fields: false\n",
          "declared_fields is not true" },
        { "    declared_fields: true\n", "    declared_fields: true\n    max_string_length: 4096\n",
          "exported strings are bounded by 4096 bytes, the policy requires at most 256" },
        { "          - pseudonymize(attributes, \"rid\")\n", "",
          "span key 'rid' is not pseudonymized" },
        { "          - pseudonymize(attributes, \"bootstrap_room\")\n", "",
          "span key 'bootstrap_room' is not pseudonymized" },
        { "          - delete_key(attributes, \"module\") where",
          "          - pseudonymize(attributes, \"module\")\n          - delete_key(attributes, \"module\") where",
          "span key 'module' is pseudonymized, the policy does not list it" },
        { "where not IsInt(attributes[\"decode_ct\"])",
          "where not IsString(attributes[\"decode_ct\"])",
          "span key 'decode_ct' has the value rule 'not IsString(attributes[\"decode_ct\"])'" },
        { "\"^[0-9a-f]{8}$\"", "\"^[0-9a-f]{8,64}$\"", "spanevent key 'bid' has the value rule" },
        { " or attributes[\"gen_ai.response.finish_reasons\"] == \"[\\\"abort\\\"]\")",
          " or attributes[\"gen_ai.response.finish_reasons\"] == \"[\\\"abort\\\"]\" or "
          "IsString(attributes[\"gen_ai.response.finish_reasons\"]))",
          "span key 'gen_ai.response.finish_reasons' has the value rule" },
        { "          - delete_key(attributes, \"tp_rank\") where not IsInt(attributes[\"tp_rank\"])\n",
          "", "declared_fields: span key 'tp_rank' is kept without a value rule" },
        { "set(name, \"other\") where not IsMatch(name, \"^(schedule|retract)$\")",
          "set(name, \"other\") where not IsMatch(name, \"^(schedule|retract|.*)$\")",
          "spanevent.name is kept when it matches '^(schedule|retract|.*)$'" },
        { "set(name, \"other\") where not IsMatch(name, \"^(schedule|retract)$\")",
          "set(name, \"x\") where not IsMatch(name, \"^(schedule|retract)$\")",
          "spanevent.name is set to 'x', the policy requires 'other'" },
        { "|run_batch_cpu)$\")", "|run_batch_cpu|.*)$\")", "span.name is kept when it matches" },
        { "          - set(name, \"\") where not IsMatch(name, \"^sglang server$\")\n",
          "          - set(name, \"\")\n", "scope.name is kept when it matches '(never: always set)'" },
        { "          - set(version, \"\")\n", "", "declared_fields: scope.version has no rule" },
        { "          - set(version, \"\")\n", "          - set(version, \"\") where not IsMatch(version, \"^1$\")\n",
          "scope.version is kept when it matches '^1$'" },
        { "          - set(entity_refs, [])\n", "", "declared_fields: resource.entity_refs has no rule" },
        { "          - set(schema_url, \"\")\n          - set(entity_refs, [])\n",
          "          - set(entity_refs, [])\n",
          "declared_fields: resource.schema_url has no rule" },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        char *t = traces_only(cvm_shipped);
        char *y = replace(t, m[i].from, m[i].to);

        assert_caught(policy_shipped, y, m[i].needle);
        free(y);
        free(t);
    }
}

/* cvm.yaml as shipped carries logs and metrics through transform/fence,
 * and cvm-policy.yaml pins that fence: a widened metric name set, another
 * histogram bound, a rewritten value rule or an unbounded digit run in the
 * body rule each fail the policy. */
static void test_cvm_fence_pinned(void **state)
{
    static const struct { const char *from, *to, *needle; } m[] = {
        { "|scrape_series_added)$\")", "|scrape_series_added|[a-z_]{1,64})$\")",
          "metric.name is kept when it matches" },
        { "\"sglang:num_retractions\": [0, 1, 2", "\"sglang:num_retractions\": [0, 1.5, 2",
          "histogram_bounds of 'sglang:num_retractions' differ" },
        { "where not attributes[\"_SYSTEMD_UNIT\"] == \"sglang.service\"",
          "where not IsMatch(attributes[\"_SYSTEMD_UNIT\"], \"^sglang[.]service$\")",
          "log key '_SYSTEMD_UNIT' has the value rule" },
        { "#running-req: [0-9]{1,6}, #token", "#running-req: [0-9]+, #token", "the log body rule is" },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        char *y = replace(cvm_shipped, m[i].from, m[i].to);

        assert_caught(policy_shipped, y, m[i].needle);
        free(y);
    }
}

/* ---- logs and metrics: the same fence --------------------------------------------- */

/* cvm.yaml (declared mode off, as policy_text) with logs and metrics
 * pipelines fenced by the allowlist processor's log_statements and
 * metric_statements, each exporting to its own bounded exporter; and the
 * policy with the sections that pin them. */
static const char sig_statements[] =
    "    log_statements:\n"
    "      - context: resource\n"
    "        statements:\n"
    "          - keep_keys(attributes, [\"service.name\"])\n"
    "      - context: log\n"
    "        statements:\n"
    "          - keep_keys(attributes, [\"code\", \"level\"])\n"
    "          - delete_key(attributes, \"level\") where not IsMatch(attributes[\"level\"], "
    "\"^(info|warn)$\")\n"
    "          - set(body, nil) where not IsMatch(body, \"^request [0-9a-f]{8} done$\")\n"
    "    metric_statements:\n"
    "      - context: resource\n"
    "        statements:\n"
    "          - keep_keys(attributes, [\"service.name\"])\n"
    "      - context: metric\n"
    "        statements:\n"
    "          - set(name, \"other\") where not IsMatch(name, \"^sglang:[a-z_]{1,64}$\")\n"
    "      - context: datapoint\n"
    "        statements:\n"
    "          - keep_keys(attributes, [\"model_name\"])\n"
    "    trace_statements:\n";
static const char sig_exporters[] =
    "  otlphttp/logs:\n"
    "    endpoint: ${env:SPANFENCE_GATEWAY_ENDPOINT}\n"
    "    sending_queue: {sizer: bytes, queue_size: 16777216}\n"
    "    retry_on_failure: {max_elapsed_time: 60s}\n"
    "  otlphttp/metrics:\n"
    "    endpoint: ${env:SPANFENCE_GATEWAY_ENDPOINT}\n"
    "    sending_queue: {sizer: bytes, queue_size: 16777216}\n"
    "    retry_on_failure: {max_elapsed_time: 60s}\n"
    "\nservice:\n";
static const char sig_pipelines[] =
    "      exporters: [otlphttp/gateway]\n"
    "    logs:\n"
    "      receivers: [otlp]\n"
    "      processors: [memory_limiter, transform/allowlist]\n"
    "      exporters: [otlphttp/logs]\n"
    "    metrics:\n"
    "      receivers: [otlp]\n"
    "      processors: [memory_limiter, transform/allowlist]\n"
    "      exporters: [otlphttp/metrics]\n";
static const char sig_policy[] =
    "logs:\n"
    "  processor: transform/allowlist\n"
    "  declared_fields: false\n"
    "  keys:\n"
    "    resource: [service.name]\n"
    "    log: [code, level]\n"
    "  body: 'not IsMatch(body, \"^request [0-9a-f]{8} done$\")'\n"
    "  value_rules:\n"
    "    log: {level: 'not IsMatch(attributes[\"level\"], \"^(info|warn)$\")'}\n"
    "  exporter:\n"
    "    id: otlphttp/logs\n"
    "    endpoint_env: SPANFENCE_GATEWAY_ENDPOINT\n"
    "    queue_sizer: bytes\n"
    "    max_queue_size: 16777216\n"
    "    max_elapsed_time: 60s\n"
    "metrics:\n"
    "  processor: transform/allowlist\n"
    "  declared_fields: false\n"
    "  keys:\n"
    "    resource: [service.name]\n"
    "    datapoint: [model_name]\n"
    "  exemplars: drop\n"
    "  field_values: {metric.name: other}\n"
    "  field_patterns: {metric.name: '^sglang:[a-z_]{1,64}$'}\n"
    "  exporter:\n"
    "    id: otlphttp/metrics\n"
    "    endpoint_env: SPANFENCE_GATEWAY_ENDPOINT\n"
    "    queue_sizer: bytes\n"
    "    max_queue_size: 16777216\n"
    "    max_elapsed_time: 60s\n";

/* The config with the three fenced pipelines (malloc'd). */
static char *sig_config(void)
{
    char *a = replace(cvm_text, "    trace_statements:\n", sig_statements);
    char *b = replace(a, "\nservice:\n", sig_exporters);
    char *c = replace(b, "      exporters: [otlphttp/gateway]\n", sig_pipelines);

    free(a);
    free(b);
    return c;
}

/* The policy with its logs and metrics sections (malloc'd). */
static char *sig_policy_text(void)
{
    size_t n = strlen(policy_text) + strlen(sig_policy) + 2;
    char *p = malloc(n);

    snprintf(p, n, "%s\n%s", policy_text, sig_policy);
    return p;
}

/* Check `y` against `pol`: the status, and no policy message (the
 * loader's warnings about pipelines it does not run yet may come). */
static void assert_holds(const char *pol, const char *y)
{
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;
    sf_policy *p = load_policy(pol);

    assert_int_equal(sf_config_load_string(CVM, y, strlen(y), d, &cfg), SF_OK);
    if (sf_policy_check(p, cfg, d) != SF_OK) {
        sf_diag_print(d);
        fail_msg("the policy does not hold");
    }
    for (size_t i = 0; i < sf_diag_count(d); i++)
        assert_non_null(strstr(sf_diag_message(d, i), "warning: "));
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    sf_policy_destroy(p);
}

static void test_logs_metrics_fence_holds(void **state)
{
    char *y = sig_config(), *pol = sig_policy_text();

    (void)state;
    assert_holds(pol, y);
    free(y);
    free(pol);
}

/* The shipped policy has no logs or metrics section: those pipelines do
 * not hold (they would leave unfenced), each named. */
static void test_logs_metrics_without_sections(void **state)
{
    char *y = sig_config();
    int l = line_of(y, "    logs:\n"), m = line_of(y, "    metrics:\n      receivers");
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;
    sf_policy *p = load_policy(policy_text);
    size_t found = 0;

    (void)state;
    assert_int_equal(sf_config_load_string(CVM, y, strlen(y), d, &cfg), SF_OK);
    assert_int_equal(sf_policy_check(p, cfg, d), SF_CONFIG);
    for (size_t i = 0; i < sf_diag_count(d); i++) {
        char a[300], b[300];

        snprintf(a, sizeof(a), CVM ":%d:5: policy: service.pipelines.logs: a logs pipeline, but "
                 "the policy has no 'logs' section: its log_records would leave unfenced", l);
        snprintf(b, sizeof(b), CVM ":%d:5: policy: service.pipelines.metrics: a metrics "
                 "pipeline, but the policy has no 'metrics' section: its metric_points would "
                 "leave unfenced", m);
        found += strcmp(sf_diag_message(d, i), a) == 0 || strcmp(sf_diag_message(d, i), b) == 0;
        if (strstr(sf_diag_message(d, i), "policy: ") != NULL &&
            strcmp(sf_diag_message(d, i), a) != 0 && strcmp(sf_diag_message(d, i), b) != 0)
            fail_msg("unexpected: %s", sf_diag_message(d, i));
    }
    assert_int_equal(found, 2);
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    sf_policy_destroy(p);
    free(y);
}

/* One mutation each of the fenced config: the policy's exact message. */
static void test_logs_metrics_mutations(void **state)
{
    static const struct {
        const char *from, *to;      /* in sig_config() */
        const char *msg;            /* after "FILE:L:C: policy: " */
        const char *at;             /* the line it is reported at (its first occurrence
                                     * after the mutation) */
        int col;
        size_t n;                   /* policy messages in all (the one above among them) */
    } cases[] = {
        { "[\"code\", \"level\"]", "[\"code\", \"level\", \"prompt\"]",
          "processors.transform/allowlist: log allowlist has key 'prompt' not in the policy",
          "[\"code\", \"level\", \"prompt\"]", 13, 1 },
        { "[\"model_name\"]", "[]",
          "processors.transform/allowlist: datapoint allowlist is missing key 'model_name' "
          "required by the policy", "keep_keys(attributes, [])\n    trace", 13, 1 },
        { "          - set(body, nil) where not IsMatch(body, \"^request [0-9a-f]{8} done$\")\n",
          "          - set(body, nil) where not IsString(body)\n",
          "processors.transform/allowlist: the log body rule is 'not IsString(body)', the policy "
          "requires set(body, nil) where not IsMatch(body, \"^request [0-9a-f]{8} done$\")",
          "set(body, nil) where not IsString", 13, 1 },
        { "          - keep_keys(attributes, [\"model_name\"])\n",
          "          - keep_keys(attributes, [\"model_name\"])\n"
          "          - keep_exemplars(exemplars)\n",
          "processors.transform/allowlist: exemplars leave (keep_exemplars), the policy requires "
          "them dropped", "    metric_statements:", 5, 1 },
        { "\"^(info|warn)$\")\n", "\"^(info|warn|.*)$\")\n",
          "processors.transform/allowlist: log key 'level' has the value rule 'not "
          "IsMatch(attributes[\"level\"], \"^(info|warn|.*)$\")', the policy requires 'not "
          "IsMatch(attributes[\"level\"], \"^(info|warn)$\")'", "^(info|warn|.*)$", 13, 1 },
        { "IsMatch(name, \"^sglang:[a-z_]{1,64}$\")", "IsMatch(name, \"^sglang:.*$\")",
          "processors.transform/allowlist: metric.name is kept when it matches '^sglang:.*$', "
          "the policy requires '^sglang:[a-z_]{1,64}$'", "^sglang:.*$", 13, 1 },
        { "      exporters: [otlphttp/logs]\n", "      exporters: [otlphttp/gateway]\n",
          "service.pipelines.logs: uses exporter 'otlphttp/gateway', which the policy reserves "
          "for pipeline 'traces'", "exporters: [otlphttp/gateway]\n    metrics", 19, 3 },
        { "      exporters: [otlphttp/metrics]\n", "      exporters: [otlphttp/logs] \n",
          "service.pipelines.metrics: uses exporter 'otlphttp/logs', which the policy reserves "
          "for logs", "exporters: [otlphttp/logs] \n", 19, 3 },
        { "      processors: [memory_limiter, transform/allowlist]\n      exporters: [otlphttp/logs]",
          "      processors: [memory_limiter]\n      exporters: [otlphttp/logs]",
          "service.pipelines.logs: does not run processor 'transform/allowlist'",
          "processors: [memory_limiter]\n", 7, 1 },
        { "    sending_queue: {sizer: bytes, queue_size: 16777216}\n"
          "    retry_on_failure: {max_elapsed_time: 60s}\n  otlphttp/metrics",
          "    sending_queue: {sizer: bytes, queue_size: 167772160}\n"
          "    retry_on_failure: {max_elapsed_time: 60s}\n  otlphttp/metrics",
          "exporters.otlphttp/logs.sending_queue.queue_size: is 167772160, the policy allows at "
          "most 16777216", "queue_size: 167772160", 47, 1 },
    };
    char *pol = sig_policy_text();

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *base0 = sig_config(), *y = replace(base0, cases[i].from, cases[i].to);
        sf_diag *d = sf_diag_create(NULL);
        sf_config *cfg = NULL;
        sf_policy *p = load_policy(pol);
        char exp[1024];
        bool found = false;
        size_t n = 0;

        snprintf(exp, sizeof(exp), CVM ":%d:%d: policy: %s", line_of(y, cases[i].at),
                 cases[i].col, cases[i].msg);
        if (sf_config_load_string(CVM, y, strlen(y), d, &cfg) != SF_OK)
            sf_diag_print(d);
        assert_non_null(cfg);
        assert_int_equal(sf_policy_check(p, cfg, d), SF_CONFIG);
        for (size_t j = 0; j < sf_diag_count(d); j++) {
            const char *m = sf_diag_message(d, j);

            found = found || strcmp(m, exp) == 0;
            n += strstr(m, "policy: ") != NULL;
        }
        if (!found || n != cases[i].n) {
            sf_diag_print(d);
            fail_msg("case %zu: want %zu messages, among them %s", i, cases[i].n, exp);
        }
        sf_config_destroy(cfg);
        sf_diag_destroy(d);
        sf_policy_destroy(p);
        free(base0);
        free(y);
    }
    free(pol);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compiled_edit_must_build),
        cmocka_unit_test(test_shipped_config_holds),
        cmocka_unit_test(test_declared_shipped_holds),
        cmocka_unit_test(test_cleared_fields_of_the_edit),
        cmocka_unit_test(test_declared_mutations_caught),
        cmocka_unit_test(test_cvm_fence_pinned),
        cmocka_unit_test(test_order_does_not_matter),
        cmocka_unit_test(test_memory_limiter_not_pinned),
        cmocka_unit_test(test_add_key),
        cmocka_unit_test(test_remove_key),
        cmocka_unit_test(test_remove_key_with_delete_key),
        cmocka_unit_test(test_move_key_between_contexts),
        cmocka_unit_test(test_allowlist_in_unpinned_context),
        cmocka_unit_test(test_remove_allowlist),
        cmocka_unit_test(test_resource_key_added),
        cmocka_unit_test(test_resource_allowlist_removed),
        cmocka_unit_test(test_scope_key_added),
        cmocka_unit_test(test_link_allowlist_removed),
        cmocka_unit_test(test_link_key_added),
        cmocka_unit_test(test_kept_value_types_any),
        cmocka_unit_test(test_kept_value_types_scalar),
        cmocka_unit_test(test_kept_value_types_single_holds_scalar),
        cmocka_unit_test(test_kept_value_types_default),
        cmocka_unit_test(test_event_cap_absent),
        cmocka_unit_test(test_link_cap_raised),
        cmocka_unit_test(test_event_cap_lower),
        cmocka_unit_test(test_ids_not_pseudonymized),
        cmocka_unit_test(test_request_caps_raised),
        cmocka_unit_test(test_span_trace_state_not_cleared),
        cmocka_unit_test(test_link_trace_state_not_cleared),
        cmocka_unit_test(test_name_rule_missing),
        cmocka_unit_test(test_name_rule_removed_in_the_middle),
        cmocka_unit_test(test_name_rule_extra),
        cmocka_unit_test(test_name_rules_reordered),
        cmocka_unit_test(test_name_rule_altered),
        cmocka_unit_test(test_spanevent_name_rule),
        cmocka_unit_test(test_name_rules_unpinned_context),
        cmocka_unit_test(test_name_rules_split_over_groups),
        cmocka_unit_test(test_name_rules_not_pinned),
        cmocka_unit_test(test_processor_removed_from_pipeline),
        cmocka_unit_test(test_second_traces_pipeline),
        cmocka_unit_test(test_exporter_in_logs_pipeline),
        cmocka_unit_test(test_exporter_in_metrics_pipeline),
        cmocka_unit_test(test_second_exporter_in_traces_pipeline),
        cmocka_unit_test(test_error_mode_ignore),
        cmocka_unit_test(test_group_error_mode_silent),
        cmocka_unit_test(test_status_statement_removed),
        cmocka_unit_test(test_queue_size),
        cmocka_unit_test(test_queue_size_default),
        cmocka_unit_test(test_queue_disabled),
        cmocka_unit_test(test_storage),
        cmocka_unit_test(test_max_elapsed_time_zero),
        cmocka_unit_test(test_max_elapsed_time_longer),
        cmocka_unit_test(test_receiver_all_interfaces),
        cmocka_unit_test(test_receiver_loopback_names),
        cmocka_unit_test(test_foreign_receiver_all_interfaces),
        cmocka_unit_test(test_receiver_not_in_policy),
        cmocka_unit_test(test_endpoint_not_from_env),
        cmocka_unit_test(test_traces_endpoint_override),
        cmocka_unit_test(test_processor_renamed),
        cmocka_unit_test(test_endpoint_value),
        cmocka_unit_test(test_policy_file_errors),
        cmocka_unit_test(test_policy_file_new_keys_errors),
        cmocka_unit_test(test_policy_file_missing_sections),
        cmocka_unit_test(test_policy_file_unreadable),
        cmocka_unit_test(test_exporter_without_queue),
        cmocka_unit_test(test_trace_control),
        cmocka_unit_test(test_trace_control_latency),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test_setup_teardown(test_otlp_exporter_holds, setup_grpc, teardown_grpc),
        cmocka_unit_test_setup_teardown(test_otlp_queue_size, setup_grpc, teardown_grpc),
        cmocka_unit_test_setup_teardown(test_otlp_queue_size_default, setup_grpc, teardown_grpc),
        cmocka_unit_test_setup_teardown(test_otlp_queue_disabled, setup_grpc, teardown_grpc),
        cmocka_unit_test_setup_teardown(test_otlp_max_elapsed_time, setup_grpc, teardown_grpc),
        cmocka_unit_test_setup_teardown(test_otlp_endpoint_not_from_env, setup_grpc,
                                        teardown_grpc),
        cmocka_unit_test_setup_teardown(test_otlp_endpoint_value, setup_grpc, teardown_grpc),
        cmocka_unit_test_setup_teardown(test_otlp_exporter_in_logs_pipeline, setup_grpc,
                                        teardown_grpc),
        cmocka_unit_test(test_policy_file_signal_sections),
        cmocka_unit_test(test_logs_metrics_fence_holds),
        cmocka_unit_test(test_logs_metrics_without_sections),
        cmocka_unit_test(test_logs_metrics_mutations),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}

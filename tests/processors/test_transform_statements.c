/* tests/processors/test_transform_statements.c: the transform processor's
 * statement parser (every supported form and every error class, with exact
 * messages), the trace_statements layouts built into a program, and the
 * read-only accessors the policy validator uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "tests/sf_torture.h"

#include "transform_fixtures.h"

typedef struct pfx {
    fx_sink s;
    sf_transform_op op;
    char err[1024];
} pfx;

static int setup(void **state)
{
    pfx *f = sf_calloc(1, sizeof(*f));

    fx_sink_init(&f->s);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    pfx *f = *state;

    fx_sink_release(&f->s);
    sf_free(f);
    return 0;
}

static sf_status parse_in(pfx *f, sf_otlp_ctx group, const char *text)
{
    f->err[0] = '\0';
    return sf_transform_parse_statement(text, strlen(text), group, &f->s.sink, &f->op, f->err,
                                        sizeof(f->err));
}

/* What every refusal ends with. */
#define SUPPORTED "; supported: keep_keys(attributes, [...]), delete_key(attributes, \"key\") " \
    "[where not <condition on attributes[\"key\"]>], pseudonymize(attributes, \"key\"), " \
    "set(status.message, \"\"), set(trace_state, \"\"), " \
    "set(<name|version|schema_url>, \"value\") [where not IsMatch(<same>, \"regex\")], " \
    "set(entity_refs, []), replace_pattern(name, \"regex\", \"replacement\")"

/* Parse must fail with exactly `msg`, then the list of supported statements. */
static void assert_parse_error(pfx *f, sf_otlp_ctx group, const char *text, const char *msg)
{
    char want[1024];

    snprintf(want, sizeof(want), "%s%s", msg, SUPPORTED);
    assert_int_equal(parse_in(f, group, text), SF_CONFIG);
    assert_string_equal(f->err, want);
}

static void assert_keys(const sf_transform_keyset *ks, size_t n, ...)
{
    va_list ap;

    assert_int_equal(ks->n, n);
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(ks->keys[i], va_arg(ap, const char *));
    va_end(ap);
}

/* ---- supported forms ---------------------------------------------------- */

static void test_keep_keys_unprefixed_in_group(void **state)
{
    pfx *f = *state;

    assert_int_equal(parse_in(f, SF_OTLP_SPAN,
                              "keep_keys(attributes, [\"gen_ai.request.model\", \"b\", \"a\", \"b\"])"),
                     SF_OK);
    assert_int_equal(f->op.kind, SF_RULE_KEEP_KEYS);
    assert_int_equal(f->op.ctx, SF_OTLP_SPAN);
    assert_int_equal(f->op.error_mode, -1);
    /* sorted bytewise, duplicates folded */
    assert_keys(&f->op.keys, 3, "a", "b", "gen_ai.request.model");
    assert_string_equal(f->op.statement,
                        "keep_keys(attributes, [\"gen_ai.request.model\", \"b\", \"a\", \"b\"])");
}

static void test_every_context_prefix(void **state)
{
    pfx *f = *state;
    static const struct { const char *stmt; sf_otlp_ctx ctx; } cases[] = {
        { "keep_keys(resource.attributes, [\"service.name\"])", SF_OTLP_RESOURCE },
        { "keep_keys(scope.attributes, [\"s\"])", SF_OTLP_SCOPE },
        { "keep_keys(span.attributes, [\"a\"])", SF_OTLP_SPAN },
        { "keep_keys(spanevent.attributes, [\"b\"])", SF_OTLP_SPANEVENT },
        { "keep_keys(link.attributes, [\"l\"])", SF_OTLP_LINK },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        /* flat: the prefix decides */
        assert_int_equal(parse_in(f, SF_TRANSFORM_CTX_NONE, cases[i].stmt), SF_OK);
        assert_int_equal(f->op.ctx, cases[i].ctx);
        assert_int_equal(f->op.keys.n, 1);
        /* in a group of the same context: accepted too */
        assert_int_equal(parse_in(f, cases[i].ctx, cases[i].stmt), SF_OK);
        assert_int_equal(f->op.ctx, cases[i].ctx);
    }
}

static void test_escapes_and_unicode(void **state)
{
    pfx *f = *state;

    assert_int_equal(parse_in(f, SF_OTLP_SPAN,
                              "keep_keys(attributes, [\"a\\\"b\", \"c\\\\d\", \"gr\xc3\xb6\xc3\x9f" "e\", \"\"])"),
                     SF_OK);
    /* strcmp order: "" < "a\"b" < "c\\d" < "größe" */
    assert_keys(&f->op.keys, 4, "", "a\"b", "c\\d", "gr\xc3\xb6\xc3\x9f" "e");
}

static void test_whitespace_between_tokens(void **state)
{
    pfx *f = *state;

    assert_int_equal(parse_in(f, SF_TRANSFORM_CTX_NONE,
                              "  keep_keys ( span . attributes ,\n\t[ \"a\" ,\"b\"\r\n ] )  "),
                     SF_OK);
    assert_int_equal(f->op.ctx, SF_OTLP_SPAN);
    assert_keys(&f->op.keys, 2, "a", "b");
    assert_int_equal(parse_in(f, SF_OTLP_SPAN, "set( status.message , \"\" )"), SF_OK);
    assert_int_equal(f->op.kind, SF_RULE_CLEAR_STATUS_MESSAGE);
}

static void test_empty_list_drops_all(void **state)
{
    pfx *f = *state;

    assert_int_equal(parse_in(f, SF_TRANSFORM_CTX_NONE, "keep_keys(resource.attributes, [])"), SF_OK);
    assert_int_equal(f->op.kind, SF_RULE_KEEP_KEYS);
    assert_int_equal(f->op.keys.n, 0);
    assert_false(sf_transform_keyset_has(&f->op.keys, ""));
    assert_int_equal(parse_in(f, SF_OTLP_SCOPE, "keep_keys(attributes,[ ])"), SF_OK);
    assert_int_equal(f->op.keys.n, 0);
}

static void test_delete_key_and_set(void **state)
{
    pfx *f = *state;

    assert_int_equal(parse_in(f, SF_TRANSFORM_CTX_NONE, "delete_key(spanevent.attributes, \"prompt\")"),
                     SF_OK);
    assert_int_equal(f->op.kind, SF_RULE_DELETE_KEY);
    assert_int_equal(f->op.ctx, SF_OTLP_SPANEVENT);
    assert_keys(&f->op.keys, 1, "prompt");

    assert_int_equal(parse_in(f, SF_TRANSFORM_CTX_NONE, "set(span.status.message, \"\")"), SF_OK);
    assert_int_equal(f->op.kind, SF_RULE_CLEAR_STATUS_MESSAGE);
    assert_int_equal(f->op.ctx, SF_OTLP_SPAN);

    assert_int_equal(parse_in(f, SF_OTLP_SPAN, "set(status.message, \"\")"), SF_OK);
    assert_int_equal(f->op.kind, SF_RULE_CLEAR_STATUS_MESSAGE);
}

static void test_keyset_is_case_sensitive_and_exact(void **state)
{
    pfx *f = *state;

    assert_int_equal(parse_in(f, SF_OTLP_SPAN,
                              "keep_keys(attributes, [\"http.method\", \"a\", \"zz\", \"m\", \"b\"])"),
                     SF_OK);
    assert_true(sf_transform_keyset_has(&f->op.keys, "http.method"));
    assert_true(sf_transform_keyset_has(&f->op.keys, "a"));
    assert_true(sf_transform_keyset_has(&f->op.keys, "zz"));
    assert_false(sf_transform_keyset_has(&f->op.keys, "HTTP.method"));
    assert_false(sf_transform_keyset_has(&f->op.keys, "http.method "));
    assert_false(sf_transform_keyset_has(&f->op.keys, "http.metho"));
    assert_false(sf_transform_keyset_has(&f->op.keys, ""));
    assert_false(sf_transform_keyset_has(&f->op.keys, "z"));
}

/* ---- errors, exact text ------------------------------------------------------ */

static void test_error_unsupported_function(void **state)
{
    pfx *f = *state;

    assert_parse_error(f, SF_OTLP_SPAN, "replace_all_patterns(attributes, \"value\", \"a\", \"b\")",
                       "unsupported function 'replace_all_patterns' in statement "
                       "'replace_all_patterns(attributes, \"value\", \"a\", \"b\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "Keep_keys(attributes, [\"a\"])",
                       "unsupported function 'Keep_keys' in statement 'Keep_keys(attributes, [\"a\"])'");
    assert_parse_error(f, SF_OTLP_SPAN, "truncate_all(attributes, 10)",
                       "unsupported function 'truncate_all' in statement 'truncate_all(attributes, 10)'");
}

static void test_error_where_clause(void **state)
{
    pfx *f = *state;

    assert_parse_error(f, SF_OTLP_SPAN, "keep_keys(attributes, [\"a\"]) where name == \"x\"",
                       "where clauses are not supported on this statement (only on "
                       "delete_key and on set of a name, version or schema_url) in statement "
                       "'keep_keys(attributes, [\"a\"]) where name == \"x\"'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "set(span.status.message, \"\") where true",
                       "where clauses are not supported on this statement (only on "
                       "delete_key and on set of a name, version or schema_url) in statement "
                       "'set(span.status.message, \"\") where true'");
}

static void test_error_paths(void **state)
{
    pfx *f = *state;

    assert_parse_error(f, SF_OTLP_SPAN, "set(attributes[\"x\"], \"\")",
                       "unsupported path 'attributes[\"x\"]' in statement 'set(attributes[\"x\"], \"\")'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "delete_key(span.attributes[\"a\"][\"b\"], \"a\")",
                       "unsupported path 'span.attributes[\"a\"][\"b\"]' in statement "
                       "'delete_key(span.attributes[\"a\"][\"b\"], \"a\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "keep_keys(attributes[\"x\", [\"a\"])",
                       "unbalanced '[' in path at column 11 in statement "
                       "'keep_keys(attributes[\"x\", [\"a\"])'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.name, [\"a\"])",
                       "unsupported path 'span.name' for keep_keys: only attributes in statement "
                       "'keep_keys(span.name, [\"a\"])'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "delete_key(link.trace_state, \"a\")",
                       "unsupported path 'link.trace_state' for delete_key: only attributes in "
                       "statement 'delete_key(link.trace_state, \"a\")'");
    /* metric is a context of metric_statements, not of trace_statements */
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(metric.attributes, [])",
                       "path 'metric.attributes': the metric context is not one of "
                       "trace_statements' contexts (resource, scope, span, spanevent or link) "
                       "in statement 'keep_keys(metric.attributes, [])'");
    assert_parse_error(f, SF_OTLP_SPAN, "keep_keys(status.message, [\"a\"])",
                       "unsupported path 'status.message' for keep_keys: only attributes in statement "
                       "'keep_keys(status.message, [\"a\"])'");
    assert_parse_error(f, SF_OTLP_SPAN, "set(attributes, \"\")",
                       "unsupported path 'attributes' for set: only status.message and trace_state "
                       "can be set in statement 'set(attributes, \"\")'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "set(link.name, \"\")",
                       "'link.name' is not a field of the link context that set can change "
                       "(span and spanevent name; scope name, version, schema_url; resource "
                       "schema_url, entity_refs) in statement 'set(link.name, \"\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "keep_keys(span., [])",
                       "expected a name after '.' at column 16 in statement 'keep_keys(span., [])'");
}

static void test_error_context_mismatch(void **state)
{
    pfx *f = *state;

    assert_parse_error(f, SF_OTLP_SPANEVENT, "keep_keys(span.attributes, [\"a\"])",
                       "path 'span.attributes' does not match context 'spanevent' in statement "
                       "'keep_keys(span.attributes, [\"a\"])'");
    assert_parse_error(f, SF_OTLP_SPAN, "keep_keys(resource.attributes, [\"a\"])",
                       "path 'resource.attributes' does not match context 'span' in statement "
                       "'keep_keys(resource.attributes, [\"a\"])'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(attributes, [\"a\"])",
                       "path 'attributes' needs a context prefix (resource, scope, span, spanevent "
                       "or link) outside a group with 'context' in statement "
                       "'keep_keys(attributes, [\"a\"])'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "set(status.message, \"\")",
                       "path 'status.message' needs a context prefix (resource, scope, span, spanevent "
                       "or link) outside a group with 'context' in statement 'set(status.message, \"\")'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "set(spanevent.status.message, \"\")",
                       "status.message exists only in the span context, not 'spanevent' in statement "
                       "'set(spanevent.status.message, \"\")'");
    assert_parse_error(f, SF_OTLP_RESOURCE, "set(status.message, \"\")",
                       "status.message exists only in the span context, not 'resource' in statement "
                       "'set(status.message, \"\")'");
}

static void test_error_set_value(void **state)
{
    pfx *f = *state;

    assert_parse_error(f, SF_OTLP_SPAN, "set(status.message, \"redacted\")",
                       "only the empty string \"\" is supported as the value of status.message in "
                       "statement 'set(status.message, \"redacted\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "set(status.message, nil)",
                       "only the empty string \"\" is supported as the value of status.message in "
                       "statement 'set(status.message, nil)'");
    assert_parse_error(f, SF_OTLP_SPAN, "set(status.message, \" \")",
                       "only the empty string \"\" is supported as the value of status.message in "
                       "statement 'set(status.message, \" \")'");
}

static void test_error_syntax(void **state)
{
    pfx *f = *state;

    /* columns: "keep_keys(" is 1-10, "span.attributes" 11-25, "," 26, " " 27, "[" 28 */
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, [\"a\"]",
                       "expected ')' at end of statement in statement "
                       "'keep_keys(span.attributes, [\"a\"]'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, [\"a\")",
                       "expected ',' or ']' at column 32 in statement "
                       "'keep_keys(span.attributes, [\"a\")'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, [a])",
                       "expected a quoted key at column 29 in statement "
                       "'keep_keys(span.attributes, [a])'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, [\"a])",
                       "unterminated string at column 29 in statement "
                       "'keep_keys(span.attributes, [\"a])'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, [\"a\\n\"])",
                       "unsupported escape '\\n' at column 31 (only \\\" and \\\\) in statement "
                       "'keep_keys(span.attributes, [\"a\\n\"])'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, [\"a\"]) junk",
                       "unexpected 'junk' after the closing ')' at column 35 in statement "
                       "'keep_keys(span.attributes, [\"a\"]) junk'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, [\"a\"]))",
                       "unexpected ')' after the closing ')' at column 34 in statement "
                       "'keep_keys(span.attributes, [\"a\"]))'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, [\"a\",])",
                       "expected a quoted key at column 33 in statement "
                       "'keep_keys(span.attributes, [\"a\",])'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes \"a\")",
                       "expected ',' at column 27 in statement 'keep_keys(span.attributes \"a\")'");
    /* with whitespace allowed between tokens, a '[' after the path indexes it */
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes [\"a\"])",
                       "unsupported path 'span.attributes [\"a\"]' in statement "
                       "'keep_keys(span.attributes [\"a\"])'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, \"a\")",
                       "expected a list of keys such as [\"a\", \"b\"] at column 28 in statement "
                       "'keep_keys(span.attributes, \"a\")'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys span.attributes",
                       "expected '(' at column 11 in statement 'keep_keys span.attributes'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "(keep_keys)",
                       "expected a function name at column 1 in statement '(keep_keys)'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, [\"a\"], \"b\")",
                       "expected ')' at column 33 in statement "
                       "'keep_keys(span.attributes, [\"a\"], \"b\")'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "delete_key(span.attributes, [\"a\"])",
                       "expected a quoted key at column 29 in statement "
                       "'delete_key(span.attributes, [\"a\"])'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, ['a'])",
                       "unexpected character ''' at column 29 in statement "
                       "'keep_keys(span.attributes, ['a'])'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "keep_keys(span.attributes, [\"a\"]",
                       "expected ')' at end of statement in statement "
                       "'keep_keys(span.attributes, [\"a\"]'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "   ", "empty statement");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "", "empty statement");
}

static void test_error_embedded_nul(void **state)
{
    pfx *f = *state;
    static const char text[] = "keep_keys(span.attributes, [\"a\0b\"])";

    assert_int_equal(sf_transform_parse_statement(text, sizeof(text) - 1, SF_TRANSFORM_CTX_NONE,
                                                  &f->s.sink, &f->op, f->err, sizeof(f->err)),
                     SF_CONFIG);
    assert_string_equal(f->err, "statement contains a NUL byte in statement "
                                "'keep_keys(span.attributes, [\"a'" SUPPORTED);
}

/* Found by tests/fuzz/fuzz_statement: text is len bytes, not a C string. A
 * blank statement in a buffer of exactly its size was scanned with strspn,
 * which reads past the end (ASan: heap-buffer-overflow under
 * SF_SANITIZE=1, or valgrind). Plain malloc so the block ends exactly
 * where the text does. */
static void test_blank_statement_not_terminated(void **state)
{
    pfx *f = *state;
    static const char blanks[] = " \t\r\n  ";
    char *text = malloc(sizeof(blanks) - 1);

    assert_non_null(text);
    memcpy(text, blanks, sizeof(blanks) - 1);
    assert_int_equal(sf_transform_parse_statement(text, sizeof(blanks) - 1, SF_OTLP_SPAN,
                                                  &f->s.sink, &f->op, f->err, sizeof(f->err)),
                     SF_CONFIG);
    assert_string_equal(f->err, "empty statement" SUPPORTED);
    free(text);
    /* Only len bytes count: the statement after the blanks is not read. */
    assert_int_equal(sf_transform_parse_statement("  set(status.message, \"\")", 2,
                                                  SF_OTLP_SPAN, &f->s.sink, &f->op,
                                                  f->err, sizeof(f->err)),
                     SF_CONFIG);
    assert_string_equal(f->err, "empty statement" SUPPORTED);
}

static void test_parse_out_of_memory(void **state)
{
    pfx *f = *state;
    const char *stmt = "keep_keys(span.attributes, [\"a\", \"b\"])";
    int allocs;

    /* Learn how many allocations a good parse makes, then fail each. */
    assert_int_equal(parse_in(f, SF_TRANSFORM_CTX_NONE, stmt), SF_OK);
    allocs = f->s.allocs;
    assert_int_equal(allocs, 4);     /* key array, two keys, the statement copy */
    for (int k = 1; k <= allocs; k++) {
        f->s.allocs = 0;
        f->s.fail_alloc_after = k;
        assert_int_equal(parse_in(f, SF_TRANSFORM_CTX_NONE, stmt), SF_ENOMEM);
        assert_string_equal(f->err, "out of memory");
    }
}

/* ---- replace_pattern and set(trace_state, "") ------------------------------------ */

static void test_replace_pattern_forms(void **state)
{
    pfx *f = *state;
    static const struct { sf_otlp_ctx group; const char *stmt; sf_otlp_ctx ctx; } cases[] = {
        { SF_OTLP_SPAN, "replace_pattern(name, \"host:[^ |)]*\", \"host:redacted\")",
          SF_OTLP_SPAN },
        { SF_TRANSFORM_CTX_NONE, "replace_pattern(span.name, \"host:[^ |)]*\", \"host:redacted\")",
          SF_OTLP_SPAN },
        { SF_OTLP_SPAN, "replace_pattern(span.name, \"host:[^ |)]*\", \"host:redacted\")",
          SF_OTLP_SPAN },
        { SF_OTLP_SPANEVENT, "replace_pattern(name, \"host:[^ |)]*\", \"host:redacted\")",
          SF_OTLP_SPANEVENT },
        { SF_TRANSFORM_CTX_NONE,
          "replace_pattern(spanevent.name, \"host:[^ |)]*\", \"host:redacted\")",
          SF_OTLP_SPANEVENT },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(parse_in(f, cases[i].group, cases[i].stmt), SF_OK);
        assert_int_equal(f->op.kind, SF_RULE_REPLACE_PATTERN);
        assert_int_equal(f->op.ctx, cases[i].ctx);
        assert_string_equal(f->op.pattern, "host:[^ |)]*");
        assert_string_equal(f->op.replacement, "host:redacted");
        assert_int_equal(f->op.keys.n, 0);
        assert_string_equal(f->op.statement, cases[i].stmt);
    }
}

/* The strings are unescaped (\\ and \" only); group references of every
 * pcre2_substitute form are accepted when the groups exist. */
static void test_replace_pattern_escapes_and_groups(void **state)
{
    pfx *f = *state;

    assert_int_equal(parse_in(f, SF_OTLP_SPAN,
                              "replace_pattern(name, \"\\\\(pid:[0-9]+\\\\) \\\"x\\\"\", \"(pid:-)\")"),
                     SF_OK);
    assert_string_equal(f->op.pattern, "\\(pid:[0-9]+\\) \"x\"");
    assert_string_equal(f->op.replacement, "(pid:-)");
    assert_int_equal(parse_in(f, SF_OTLP_SPAN,
                              "replace_pattern(name, \"(?s)(^| )(?<w>Req) (.*)\", "
                              "\"$1${w} ${3}$0 $$ $w${1}\")"), SF_OK);
    assert_string_equal(f->op.replacement, "$1${w} ${3}$0 $$ $w${1}");
    /* an empty replacement deletes what matches */
    assert_int_equal(parse_in(f, SF_OTLP_SPAN, "replace_pattern(name, \"[0-9]\", \"\")"),
                     SF_OK);
    assert_string_equal(f->op.replacement, "");
    /* UTF-8 in both */
    assert_int_equal(parse_in(f, SF_OTLP_SPANEVENT,
                              "replace_pattern(name, \"gr\xc3\xb6\xc3\x9f" "e\", \"\xe2\x80\xa6\")"),
                     SF_OK);
    assert_string_equal(f->op.pattern, "gr\xc3\xb6\xc3\x9f" "e");
}

static void test_set_trace_state(void **state)
{
    pfx *f = *state;
    static const struct { sf_otlp_ctx group; const char *stmt; sf_otlp_ctx ctx; } cases[] = {
        { SF_OTLP_SPAN, "set(trace_state, \"\")", SF_OTLP_SPAN },
        { SF_OTLP_LINK, "set(trace_state, \"\")", SF_OTLP_LINK },
        { SF_TRANSFORM_CTX_NONE, "set(span.trace_state, \"\")", SF_OTLP_SPAN },
        { SF_TRANSFORM_CTX_NONE, "set(link.trace_state, \"\")", SF_OTLP_LINK },
        { SF_OTLP_LINK, "set( link . trace_state , \"\" )", SF_OTLP_LINK },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(parse_in(f, cases[i].group, cases[i].stmt), SF_OK);
        assert_int_equal(f->op.kind, SF_RULE_CLEAR_TRACE_STATE);
        assert_int_equal(f->op.ctx, cases[i].ctx);
        assert_null(f->op.pattern);
        assert_null(f->op.replacement);
    }
}

/* Columns: "replace_pattern(" is 1-16, "name" 17-20, "," 21, " " 22, the
 * pattern's opening quote 23. */
static void test_error_bad_regex(void **state)
{
    pfx *f = *state;

    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"a(b\", \"x\")",
                       "invalid regular expression at column 27 (offset 3 of the pattern): "
                       "missing closing parenthesis in statement "
                       "'replace_pattern(name, \"a(b\", \"x\")'");
    /* the offset is in the unescaped pattern, the column in the statement */
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"\\\\d[z-a]\", \"x\")",
                       "invalid regular expression at column 30 (offset 5 of the pattern): "
                       "range out of order in character class in statement "
                       "'replace_pattern(name, \"\\\\d[z-a]\", \"x\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"*a\", \"x\")",
                       "invalid regular expression at column 24 (offset 0 of the pattern): "
                       "quantifier does not follow a repeatable item in statement "
                       "'replace_pattern(name, \"*a\", \"x\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"a\xff\", \"x\")",
                       "invalid regular expression at column 25 (offset 1 of the pattern): "
                       "UTF-8 error: illegal byte (0xfe or 0xff) in statement "
                       "'replace_pattern(name, \"a\xff\", \"x\")'");
}

static void test_error_bad_replacement(void **state)
{
    pfx *f = *state;

    /* "replace_pattern(name, \"(a)\", \"" is 1-30: the replacement's $ is column 31 */
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"(a)\", \"$9\")",
                       "the replacement refers to group '9' at column 31, which the pattern does "
                       "not have (it has 1 capture group) in statement "
                       "'replace_pattern(name, \"(a)\", \"$9\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"a\", \"x${1}\")",
                       "the replacement refers to group '1' at column 30, which the pattern does "
                       "not have (it has 0 capture groups) in statement "
                       "'replace_pattern(name, \"a\", \"x${1}\")'");
    assert_parse_error(f, SF_OTLP_SPAN,
                       "replace_pattern(name, \"(?<host>h)(p)\", \"$$$host$nope\")",
                       "the replacement refers to group 'nope' at column 48, which the pattern "
                       "does not have (it has 2 capture groups) in statement "
                       "'replace_pattern(name, \"(?<host>h)(p)\", \"$$$host$nope\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"(a)\", \"x$\")",
                       "invalid replacement at column 33 (offset 2 of the replacement): "
                       "invalid replacement string in statement "
                       "'replace_pattern(name, \"(a)\", \"x$\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"(a)\", \"${1\")",
                       "invalid replacement at column 34 (offset 3 of the replacement): "
                       "expected closing curly bracket in replacement string in statement "
                       "'replace_pattern(name, \"(a)\", \"${1\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"(a)\", \"$%\")",
                       "invalid replacement at column 32 (offset 1 of the replacement): "
                       "invalid replacement string in statement "
                       "'replace_pattern(name, \"(a)\", \"$%\")'");
}

static void test_error_replace_pattern_form(void **state)
{
    pfx *f = *state;

    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"a\", \"b\", SHA256)",
                       "replace_pattern's optional function and format arguments are not "
                       "supported in statement 'replace_pattern(name, \"a\", \"b\", SHA256)'");
    assert_parse_error(f, SF_OTLP_SPAN,
                       "replace_pattern(name, \"a\", \"b\", SHA256, \"%s\")",
                       "replace_pattern's optional function and format arguments are not "
                       "supported in statement 'replace_pattern(name, \"a\", \"b\", SHA256, \"%s\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(attributes, \"a\", \"b\")",
                       "unsupported path 'attributes' for replace_pattern: only name in "
                       "statement 'replace_pattern(attributes, \"a\", \"b\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(status.message, \"a\", \"b\")",
                       "unsupported path 'status.message' for replace_pattern: only name in "
                       "statement 'replace_pattern(status.message, \"a\", \"b\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(attributes[\"k\"], \"a\", \"b\")",
                       "unsupported path 'attributes[\"k\"]' in statement "
                       "'replace_pattern(attributes[\"k\"], \"a\", \"b\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"a\")",
                       "expected ',' at column 26 in statement 'replace_pattern(name, \"a\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, a, \"b\")",
                       "expected a quoted regular expression at column 23 in statement "
                       "'replace_pattern(name, a, \"b\")'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"a\", [\"b\"])",
                       "expected a quoted replacement at column 28 in statement "
                       "'replace_pattern(name, \"a\", [\"b\"])'");
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"a\", \"b\") where true",
                       "where clauses are not supported on this statement (only on "
                       "delete_key and on set of a name, version or schema_url) in statement "
                       "'replace_pattern(name, \"a\", \"b\") where true'");
    /* syntax before the regex: a broken statement never reaches PCRE2 */
    assert_parse_error(f, SF_OTLP_SPAN, "replace_pattern(name, \"(\", \"b\"",
                       "expected ')' at end of statement in statement "
                       "'replace_pattern(name, \"(\", \"b\"'");
}

static void test_error_new_statements_context(void **state)
{
    pfx *f = *state;

    assert_parse_error(f, SF_OTLP_RESOURCE, "replace_pattern(name, \"a\", \"b\")",
                       "replace_pattern rewrites span and span event names only, not 'resource' "
                       "names in statement 'replace_pattern(name, \"a\", \"b\")'");
    assert_parse_error(f, SF_OTLP_SCOPE, "replace_pattern(name, \"a\", \"b\")",
                       "replace_pattern rewrites span and span event names only, not 'scope' "
                       "names in statement 'replace_pattern(name, \"a\", \"b\")'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "replace_pattern(link.name, \"a\", \"b\")",
                       "replace_pattern rewrites span and span event names only, not 'link' "
                       "names in statement 'replace_pattern(link.name, \"a\", \"b\")'");
    assert_parse_error(f, SF_OTLP_SPANEVENT, "replace_pattern(span.name, \"a\", \"b\")",
                       "path 'span.name' does not match context 'spanevent' in statement "
                       "'replace_pattern(span.name, \"a\", \"b\")'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "replace_pattern(name, \"a\", \"b\")",
                       "path 'name' needs a context prefix (resource, scope, span, spanevent or "
                       "link) outside a group with 'context' in statement "
                       "'replace_pattern(name, \"a\", \"b\")'");
    assert_parse_error(f, SF_OTLP_SPANEVENT, "set(trace_state, \"\")",
                       "trace_state exists only in the span and link contexts, not 'spanevent' "
                       "in statement 'set(trace_state, \"\")'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "set(resource.trace_state, \"\")",
                       "trace_state exists only in the span and link contexts, not 'resource' "
                       "in statement 'set(resource.trace_state, \"\")'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "set(trace_state, \"\")",
                       "path 'trace_state' needs a context prefix (resource, scope, span, "
                       "spanevent or link) outside a group with 'context' in statement "
                       "'set(trace_state, \"\")'");
}

static void test_error_trace_state_value(void **state)
{
    pfx *f = *state;

    assert_parse_error(f, SF_OTLP_SPAN, "set(trace_state, \"k=v\")",
                       "only the empty string \"\" is supported as the value of trace_state in "
                       "statement 'set(trace_state, \"k=v\")'");
    assert_parse_error(f, SF_OTLP_LINK, "set(trace_state, nil)",
                       "only the empty string \"\" is supported as the value of trace_state in "
                       "statement 'set(trace_state, nil)'");
    assert_parse_error(f, SF_TRANSFORM_CTX_NONE, "set(link.trace_state, \" \")",
                       "only the empty string \"\" is supported as the value of trace_state in "
                       "statement 'set(link.trace_state, \" \")'");
    assert_parse_error(f, SF_OTLP_SPAN, "set(trace_state[\"k\"], \"\")",
                       "unsupported path 'trace_state[\"k\"]' in statement "
                       "'set(trace_state[\"k\"], \"\")'");
}

#define PATTERN_STMT "replace_pattern(name, \"(?<h>host):[^ |)]*\", \"${h}:redacted\")"

/* Parse the statement; on SF_ENOMEM the message must say so. */
static sf_status pattern_scenario(void *arg)
{
    pfx *f = arg;
    sf_status st = parse_in(f, SF_OTLP_SPAN, PATTERN_STMT);

    if (st == SF_ENOMEM)
        assert_string_equal(f->err, "out of memory");
    return st;
}

/* Every allocation replace_pattern makes fails in turn: the sink's (the
 * two strings and the statement copy) and PCRE2's scratch memory (counted
 * through sf_malloc and freed before the parse returns, also on error). */
static void test_replace_pattern_out_of_memory(void **state)
{
    pfx *f = *state;
    const char *stmt = PATTERN_STMT;
    const sf_torture t = { .name = "replace_pattern", .run = pattern_scenario, .arg = f,
                           .expect = SF_ENOMEM };
    size_t base;

    assert_int_equal(parse_in(f, SF_OTLP_SPAN, stmt), SF_OK);
    f->s.allocs = 0;
    assert_int_equal(parse_in(f, SF_OTLP_SPAN, stmt), SF_OK);
    assert_int_equal(f->s.allocs, 3);
    for (int k = 1; k <= 3; k++) {
        f->s.allocs = 0;
        f->s.fail_alloc_after = k;
        assert_int_equal(parse_in(f, SF_OTLP_SPAN, stmt), SF_ENOMEM);
        assert_string_equal(f->err, "out of memory");
    }
    f->s.fail_alloc_after = 0;
    /* the sink's arena is warm: what PCRE2 takes is all that moves */
    base = sf_alloc_in_use();
    assert_true(sf_torture_run(&t) >= 4);
    assert_int_equal(sf_alloc_in_use(), base);
    /* a bad pattern frees what it compiled too */
    assert_int_equal(parse_in(f, SF_OTLP_SPAN, "replace_pattern(name, \"(a)\", \"$2\")"),
                     SF_CONFIG);
    assert_int_equal(sf_alloc_in_use(), base);
}

/* ---- layouts: the trace_statements node into a program ------------------------ */

static void test_build_groups(void **state)
{
    pfx *f = *state;
    fx_sink *s = &f->s;
    sf_transform_program *prog = (sf_transform_program *)1;
    sf_node *node = fx_seq(s, 3,
        fx_map(s, 2, "context", fx_scalar(s, "resource"),
               "statements", fx_seq_strs(s, 1, "keep_keys(attributes, [\"service.name\"])")),
        fx_map(s, 3, "context", fx_scalar(s, "span"), "error_mode", fx_scalar(s, "ignore"),
               "statements", fx_seq_strs(s, 3, "keep_keys(attributes, [\"a\", \"b\"])",
                                         "set(status.message, \"\")",
                                         "delete_key(span.attributes, \"b\")")),
        fx_map(s, 2, "context", fx_scalar(s, "spanevent"),
               "statements", fx_seq_strs(s, 1, "keep_keys(attributes, [])")));
    sf_transform_config cfg = { .error_mode = SF_ERROR_MODE_PROPAGATE };

    assert_int_equal(sf_transform_program_build(node, &s->sink, &prog), SF_OK);
    assert_int_equal(s->n_errors, 0);
    assert_non_null(prog);
    cfg.program = prog;
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_RESOURCE), 1);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_SCOPE), 0);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_SPAN), 3);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_SPANEVENT), 1);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_LINK), 0);
    assert_null(sf_transform_op_get(prog, SF_OTLP_SPAN, 3));

    const sf_transform_op *op = sf_transform_op_get(prog, SF_OTLP_SPAN, 1);
    assert_int_equal(op->kind, SF_RULE_CLEAR_STATUS_MESSAGE);
    assert_int_equal(op->error_mode, SF_ERROR_MODE_IGNORE);
    assert_int_equal(sf_transform_op_error_mode(&cfg, op), SF_ERROR_MODE_IGNORE);
    assert_ptr_equal(op->node, node->items[1]->items[2]->items[1]);
    assert_string_equal(op->statement, "set(status.message, \"\")");

    op = sf_transform_op_get(prog, SF_OTLP_RESOURCE, 0);
    assert_int_equal(op->error_mode, -1);
    assert_int_equal(sf_transform_op_error_mode(&cfg, op), SF_ERROR_MODE_PROPAGATE);

    /* accessors */
    assert_true(sf_transform_has_allowlist(prog, SF_OTLP_RESOURCE));
    assert_false(sf_transform_has_allowlist(prog, SF_OTLP_SCOPE));
    assert_true(sf_transform_has_allowlist(prog, SF_OTLP_SPANEVENT));
    assert_true(sf_transform_keeps_key(prog, SF_OTLP_SPAN, "a"));
    assert_false(sf_transform_keeps_key(prog, SF_OTLP_SPAN, "b"));     /* deleted after */
    assert_false(sf_transform_keeps_key(prog, SF_OTLP_SPAN, "c"));
    assert_false(sf_transform_keeps_key(prog, SF_OTLP_SPANEVENT, "a"));
    assert_true(sf_transform_keeps_key(prog, SF_OTLP_SCOPE, "anything"));  /* unbounded */
    assert_true(sf_transform_clears_status_message(prog));
    assert_string_equal(sf_otlp_ctx_name(SF_OTLP_SPANEVENT), "spanevent");
}

static void test_build_flat_and_mixed(void **state)
{
    pfx *f = *state;
    fx_sink *s = &f->s;
    sf_transform_program *prog = NULL;
    sf_node *node = fx_seq(s, 7,
        fx_scalar(s, "keep_keys(span.attributes, [\"a\"])"),
        fx_scalar(s, "keep_keys(spanevent.attributes, [\"b\"])"),
        fx_scalar(s, "set(span.status.message, \"\")"),
        fx_scalar(s, "keep_keys(resource.attributes, [\"service.name\", \"k8s.pod.name\"])"),
        fx_scalar(s, "keep_keys(scope.attributes, [])"),
        fx_scalar(s, "keep_keys(link.attributes, [\"l\"])"),
        fx_map(s, 1, "statements", fx_seq_strs(s, 1, "keep_keys(span.attributes, [\"a\", \"z\"])")));

    assert_int_equal(sf_transform_program_build(node, &s->sink, &prog), SF_OK);
    assert_int_equal(s->n_errors, 0);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_RESOURCE), 1);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_SCOPE), 1);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_SPAN), 3);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_SPANEVENT), 1);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_LINK), 1);
    /* order kept within a context */
    assert_int_equal(sf_transform_op_get(prog, SF_OTLP_SPAN, 0)->kind, SF_RULE_KEEP_KEYS);
    assert_int_equal(sf_transform_op_get(prog, SF_OTLP_SPAN, 1)->kind,
                     SF_RULE_CLEAR_STATUS_MESSAGE);
    assert_keys(&sf_transform_op_get(prog, SF_OTLP_SPAN, 2)->keys, 2, "a", "z");
    assert_keys(&sf_transform_op_get(prog, SF_OTLP_RESOURCE, 0)->keys, 2,
                "k8s.pod.name", "service.name");
    /* two keep_keys intersect */
    assert_true(sf_transform_keeps_key(prog, SF_OTLP_SPAN, "a"));
    assert_false(sf_transform_keeps_key(prog, SF_OTLP_SPAN, "z"));
    assert_false(sf_transform_keeps_key(prog, SF_OTLP_SCOPE, "s"));
}

static void test_build_new_statements(void **state)
{
    pfx *f = *state;
    fx_sink *s = &f->s;
    sf_transform_program *prog = NULL;
    sf_node *node = fx_seq(s, 4,
        fx_map(s, 2, "context", fx_scalar(s, "span"),
               "statements", fx_seq_strs(s, 4, "keep_keys(attributes, [\"a\"])",
                                         "replace_pattern(name, \"host:[^ |)]*\", \"host:-\")",
                                         "set(trace_state, \"\")",
                                         "replace_pattern(name, \"pid:[0-9]+\", \"pid:-\")")),
        fx_map(s, 2, "context", fx_scalar(s, "link"),
               "statements", fx_seq_strs(s, 2, "keep_keys(attributes, [])",
                                         "set(trace_state, \"\")")),
        fx_scalar(s, "replace_pattern(span.name, \"Req .*\", \"Req -\")"),
        fx_scalar(s, "replace_pattern(spanevent.name, \"x\", \"y\")"));
    const sf_transform_op *op;

    assert_int_equal(sf_transform_program_build(node, &s->sink, &prog), SF_OK);
    assert_int_equal(s->n_errors, 0);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_SPAN), 5);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_SPANEVENT), 1);
    assert_int_equal(sf_transform_op_count(prog, SF_OTLP_LINK), 2);
    /* the replace_pattern rules of a context, in the order they run */
    op = sf_transform_op_get(prog, SF_OTLP_SPAN, 1);
    assert_int_equal(op->kind, SF_RULE_REPLACE_PATTERN);
    assert_string_equal(op->pattern, "host:[^ |)]*");
    assert_ptr_equal(op->node, node->items[0]->items[1]->items[1]);
    op = sf_transform_op_get(prog, SF_OTLP_SPAN, 3);
    assert_string_equal(op->pattern, "pid:[0-9]+");
    op = sf_transform_op_get(prog, SF_OTLP_SPAN, 4);
    assert_string_equal(op->replacement, "Req -");
    assert_string_equal(sf_transform_op_get(prog, SF_OTLP_SPANEVENT, 0)->pattern, "x");
    assert_true(sf_transform_clears_trace_state(prog, SF_OTLP_SPAN));
    assert_true(sf_transform_clears_trace_state(prog, SF_OTLP_LINK));
    assert_false(sf_transform_clears_trace_state(prog, SF_OTLP_SPANEVENT));
    assert_false(sf_transform_clears_trace_state(NULL, SF_OTLP_SPAN));
    /* none of them bounds or removes keys */
    assert_true(sf_transform_keeps_key(prog, SF_OTLP_SPAN, "a"));
    assert_false(sf_transform_keeps_key(prog, SF_OTLP_LINK, "a"));
    assert_true(sf_transform_has_allowlist(prog, SF_OTLP_LINK));
    assert_false(sf_transform_clears_status_message(prog));
}

static void test_build_null_and_empty(void **state)
{
    pfx *f = *state;
    sf_transform_program *prog = NULL;

    assert_int_equal(sf_transform_program_build(fx_null(&f->s), &f->s.sink, &prog), SF_OK);
    assert_non_null(prog);
    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++)
        assert_int_equal(sf_transform_op_count(prog, c), 0);
    assert_false(sf_transform_clears_status_message(prog));
    /* a NULL program (key absent) answers the same */
    assert_int_equal(sf_transform_op_count(NULL, SF_OTLP_SPAN), 0);
    assert_false(sf_transform_has_allowlist(NULL, SF_OTLP_SPAN));
    assert_true(sf_transform_keeps_key(NULL, SF_OTLP_SPAN, "x"));
    assert_int_equal(f->s.n_errors, 0);
}

static void test_build_reports_every_bad_statement(void **state)
{
    pfx *f = *state;
    fx_sink *s = &f->s;
    sf_transform_program *prog = (sf_transform_program *)1;
    sf_node *node = fx_seq(s, 3,
        fx_map(s, 2, "context", fx_scalar(s, "span"),
               "statements", fx_seq_strs(s, 3,
                   "replace_pattern(attributes[\"x\"], \"a\", \"b\")",
                   "keep_keys(attributes, [\"a\"])",
                   "keep_keys(spanevent.attributes, [\"b\"])")),
        fx_scalar(s, "keep_keys(span.attributes, [\"a\"]) where name == \"x\""),
        fx_scalar(s, "keep_keys(link.attributes, [\"ok\"])"));

    assert_int_equal(sf_transform_program_build(node, &s->sink, &prog), SF_CONFIG);
    assert_null(prog);
    assert_int_equal(s->n_errors, 3);
    assert_string_equal(s->msg[0], "[0].statements[0]: unsupported path 'attributes[\"x\"]' "
                        "in statement 'replace_pattern(attributes[\"x\"], \"a\", \"b\")'" SUPPORTED);
    assert_ptr_equal(s->at[0], node->items[0]->items[1]->items[0]);
    assert_string_equal(s->msg[1], "[0].statements[2]: path 'spanevent.attributes' "
                        "does not match context 'span' in statement "
                        "'keep_keys(spanevent.attributes, [\"b\"])'" SUPPORTED);
    assert_ptr_equal(s->at[1], node->items[0]->items[1]->items[2]);
    assert_string_equal(s->msg[2], "[1]: where clauses are not supported on this statement (only on "
                        "delete_key and on set of a name, version or schema_url) in "
                        "statement 'keep_keys(span.attributes, [\"a\"]) where name == \"x\"'"
                        SUPPORTED);
    assert_ptr_equal(s->at[2], node->items[1]);
}

static void test_build_group_errors(void **state)
{
    pfx *f = *state;
    fx_sink *s = &f->s;
    sf_transform_program *prog = NULL;
    sf_node *node = fx_seq(s, 6,
        fx_map(s, 3, "context", fx_scalar(s, "span"),
               "conditions", fx_seq_strs(s, 1, "name == \"x\""),
               "statements", fx_seq_strs(s, 1, "keep_keys(attributes, [\"a\"])")),
        fx_map(s, 2, "context", fx_scalar(s, "metric"),
               "statements", fx_seq_strs(s, 1, "keep_keys(attributes, [\"a\"])")),
        fx_map(s, 1, "context", fx_scalar(s, "span")),
        fx_map(s, 3, "context", fx_scalar(s, "span"), "eror_mode", fx_scalar(s, "ignore"),
               "statements", fx_seq_strs(s, 1, "keep_keys(attributes, [\"a\"])")),
        fx_map(s, 3, "context", fx_scalar(s, "span"), "error_mode", fx_scalar(s, "fail_open"),
               "statements", fx_seq_strs(s, 1, "keep_keys(attributes, [\"a\"])")),
        fx_seq_strs(s, 1, "keep_keys(span.attributes, [\"a\"])"));

    assert_int_equal(sf_transform_program_build(node, &s->sink, &prog), SF_CONFIG);
    assert_null(prog);
    assert_int_equal(s->n_errors, 6);
    assert_string_equal(s->msg[0], "[0].conditions: conditions are not supported: "
                        "spanfence applies every statement to every item");
    assert_ptr_equal(s->at[0], node->items[0]->keys[1]);
    assert_string_equal(s->msg[1], "[1].context: unsupported context 'metric' "
                        "(resource, scope, span, spanevent or link)");
    assert_ptr_equal(s->at[1], node->items[1]->items[0]);
    assert_string_equal(s->msg[2], "[2]: 'statements' is required");
    assert_string_equal(s->msg[3], "[3]: unknown key 'eror_mode'");
    assert_string_equal(s->msg[4], "[4].error_mode: unsupported error_mode "
                        "'fail_open' (propagate, ignore or silent)");
    assert_string_equal(s->msg[5], "[5]: expected a statement or a group with "
                        "'context' and 'statements'");
}

static void test_build_not_a_list(void **state)
{
    pfx *f = *state;
    sf_transform_program *prog = NULL;

    assert_int_equal(sf_transform_program_build(fx_scalar(&f->s, "keep_keys(span.attributes, [])"),
                                                &f->s.sink, &prog), SF_CONFIG);
    assert_int_equal(f->s.n_errors, 1);
    assert_string_equal(f->s.msg[0], "trace_statements: trace_statements must be a list of "
                        "statements or of groups with 'context' and 'statements'");
}

static void test_build_long_statement_quoted_whole(void **state)
{
    pfx *f = *state;
    char stmt[3000], expect[3800];
    size_t n = 0;
    sf_transform_program *prog = NULL;

    n += (size_t)snprintf(stmt + n, sizeof(stmt) - n, "keep_keys(span.attributes, [");
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(stmt + n, sizeof(stmt) - n, "\"key.%03d\", ", i);
    snprintf(stmt + n, sizeof(stmt) - n, "bad])");
    snprintf(expect, sizeof(expect), "[0]: expected a quoted key at column %zu in "
             "statement '%s'" SUPPORTED, n + 1, stmt);
    assert_int_equal(sf_transform_program_build(fx_seq_strs(&f->s, 1, stmt), &f->s.sink, &prog),
                     SF_CONFIG);
    assert_int_equal(f->s.n_errors, 1);
    /* the sink keeps 1023 bytes; the builder's message itself was whole */
    assert_int_equal(strncmp(f->s.msg[0], expect, 1023), 0);
    assert_true(strlen(expect) > 1023);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keep_keys_unprefixed_in_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_context_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escapes_and_unicode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_whitespace_between_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_list_drops_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_key_and_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keyset_is_case_sensitive_and_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_unsupported_function, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_where_clause, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_context_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_set_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_syntax, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_embedded_nul, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blank_statement_not_terminated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_out_of_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_pattern_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_pattern_escapes_and_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_trace_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_bad_regex, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_bad_replacement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_replace_pattern_form, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_new_statements_context, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_trace_state_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_pattern_out_of_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_new_statements, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_flat_and_mixed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_null_and_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_reports_every_bad_statement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_group_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_not_a_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_long_statement_quoted_whole, setup, teardown),
    };

    return cmocka_run_group_tests_name("processors/transform_statements", tests, NULL, NULL);
}

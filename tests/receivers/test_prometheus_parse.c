/* tests/receivers/test_prometheus_parse.c: the prometheus receiver's
 * exposition parser (receivers/prometheus/prom_parse.c) on the text
 * format and OpenMetrics, well-formed and hostile: escapes, NaN/Inf,
 * timestamps, exemplars, duplicate series, huge lines, no newline at the
 * end, over-limit counts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "receivers/prometheus/prom_parse.h"
#include "sf_alloc.h"

static const sf_prom_limits loose = { .max_line = 65536, .sample_limit = 1000,
                                      .label_limit = 64, .label_name_length = 256,
                                      .label_value_length = 4096 };

typedef struct fx {
    sf_arena *arena;
    sf_prom_result r;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));

    f->arena = sf_arena_create(65536, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;

    sf_arena_destroy(f->arena);
    free(f);
    assert_int_equal(sf_alloc_in_use(), 0);
    return 0;
}

static sf_prom_err parse_lim(fx *f, sf_prom_format fmt, const sf_prom_limits *lim,
                             const char *text)
{
    /* an exact-size copy without a terminator: the parser must not need one */
    size_t n = strlen(text);
    uint8_t *copy = malloc(n ? n : 1);
    sf_prom_err e;

    memcpy(copy, text, n);
    sf_arena_reset(f->arena);
    e = sf_prom_parse(copy, n, fmt, lim, f->arena, &f->r);
    free(copy);
    return e;
}

static sf_prom_err parse(fx *f, sf_prom_format fmt, const char *text)
{
    return parse_lim(f, fmt, &loose, text);
}

static const char *label(const sf_prom_sample *s, const char *name)
{
    for (uint16_t i = 0; i < s->n_labels; i++)
        if (strcmp(s->labels[i].name, name) == 0)
            return s->labels[i].value;
    return NULL;
}

static void test_text_basic(void **state)
{
    fx *f = *state;
    const sf_prom_result *r = &f->r;

    assert_int_equal(parse(f, SF_PROM_TEXT,
                           "# HELP http_requests_total The total \\\\ of \\n requests.\n"
                           "# TYPE http_requests_total counter\n"
                           "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
                           "http_requests_total{method=\"post\",code=\"400\"}    3 1395066363000\n"
                           "\n"
                           "# A comment\n"
                           "metric_without_timestamp_and_labels 12.47\n"
                           "  # TYPE g gauge\n"
                           "g\t-3e-2\n"
                           "something_weird{problem=\"division by zero\"} +Inf -3982045\n"),
                     SF_PROM_ERR_OK);
    assert_int_equal(r->n_families, 4);
    assert_string_equal(r->families[0].name, "http_requests_total");
    assert_int_equal(r->families[0].type, SF_PROM_COUNTER);
    assert_string_equal(r->families[0].help, "The total \\ of \n requests.");
    assert_int_equal(r->n_samples, 5);
    assert_string_equal(label(&r->samples[0], "code"), "200");
    /* labels come sorted by name */
    assert_string_equal(r->samples[0].labels[0].name, "code");
    assert_true(r->samples[0].has_ts);
    assert_int_equal(r->samples[0].ts_ms, 1395066363000LL);
    assert_true(r->samples[1].value == 3);
    assert_int_equal(r->families[1].type, SF_PROM_UNTYPED);
    assert_false(r->samples[2].has_ts);
    assert_true(r->samples[3].value == -0.03);
    assert_int_equal(r->families[2].type, SF_PROM_GAUGE);
    assert_true(isinf(r->samples[4].value) && r->samples[4].value > 0);
    assert_int_equal(r->samples[4].ts_ms, -3982045);
}

static void test_text_escapes_and_specials(void **state)
{
    fx *f = *state;
    const sf_prom_result *r = &f->r;

    assert_int_equal(parse(f, SF_PROM_TEXT,
                           "msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\","
                           "error=\"Cannot find file:\\n\\\"FILE.TXT\\\"\"} 1.458255915e9\n"
                           "a{x=\"\\q\"} NaN\n"
                           "b{x=\"caf\xc3\xa9\",} -Inf\n"
                           "c {y = \"1\" , z=\"\"} +inf\n"
                           "d Infinity"),
                     SF_PROM_ERR_OK);
    assert_string_equal(label(&r->samples[0], "path"), "C:\\DIR\\FILE.TXT");
    assert_string_equal(label(&r->samples[0], "error"), "Cannot find file:\n\"FILE.TXT\"");
    /* an unknown escape is kept as written in the text format */
    assert_string_equal(label(&r->samples[1], "x"), "\\q");
    assert_true(isnan(r->samples[1].value));
    assert_string_equal(label(&r->samples[2], "x"), "caf\xc3\xa9");
    assert_true(isinf(r->samples[2].value) && r->samples[2].value < 0);
    assert_string_equal(label(&r->samples[3], "z"), "");
    assert_true(isinf(r->samples[3].value));
    /* no newline at the end */
    assert_string_equal(r->samples[4].name, "d");
    assert_true(isinf(r->samples[4].value));
}

static void test_text_histogram_summary(void **state)
{
    fx *f = *state;
    const sf_prom_result *r = &f->r;

    assert_int_equal(parse(f, SF_PROM_TEXT,
                           "# TYPE h histogram\n"
                           "h_bucket{le=\"0.05\"} 24054\n"
                           "h_bucket{le=\"+Inf\"} 144320\n"
                           "h_sum 53423\n"
                           "h_count 144320\n"
                           "# TYPE s summary\n"
                           "s{quantile=\"0.5\"} 4773\n"
                           "s_sum 1.7560473e+07\n"
                           "s_count 2693\n"
                           "h_created 12\n"),   /* interleaved: still h's */
                     SF_PROM_ERR_OK);
    assert_int_equal(r->n_families, 2);
    assert_int_equal(r->families[0].n_samples, 5);
    assert_int_equal(r->families[1].type, SF_PROM_SUMMARY);
    assert_int_equal(r->families[1].n_samples, 3);
    assert_int_equal(r->n_samples, 8);
    assert_int_equal(r->samples[7].family, 0);
}

static void test_duplicates(void **state)
{
    fx *f = *state;
    const sf_prom_result *r = &f->r;

    assert_int_equal(parse(f, SF_PROM_TEXT,
                           "x{a=\"1\",b=\"2\"} 1\n"
                           "x{b=\"2\",a=\"1\"} 2\n"     /* the same series, labels reordered */
                           "x{a=\"1\"} 3\n"
                           "x{a=\"1\",b=\"2\"} 4\n"),
                     SF_PROM_ERR_OK);
    assert_int_equal(r->duplicates, 2);
    assert_false(r->samples[0].duplicate);
    assert_true(r->samples[1].duplicate);
    assert_false(r->samples[2].duplicate);
    assert_true(r->samples[3].duplicate);
}

static void test_openmetrics(void **state)
{
    fx *f = *state;
    const sf_prom_result *r = &f->r;

    assert_int_equal(parse(f, SF_PROM_OPENMETRICS,
                           "# TYPE foo counter\n"
                           "# UNIT foo seconds\n"
                           "# HELP foo Some \\\"text\\\" and \\\\.\n"
                           "foo_total{a=\"b\"} 17.0 1520879607.789 # {trace_id=\"KOO5S4vxi0o\"} 0.67 1520879602.890\n"
                           "foo_created{a=\"b\"} 1520430000.123\n"
                           "# TYPE i info\n"
                           "i_info{version=\"1\"} 1\n"
                           "# TYPE st stateset\n"
                           "st{st=\"a\"} 1\n"
                           "st{st=\"b\"} 0\n"
                           "# TYPE gh gaugehistogram\n"
                           "gh_bucket{le=\"+Inf\"} 3\n"
                           "gh_gcount 3\n"
                           "gh_gsum 2\n"
                           "# EOF"),
                     SF_PROM_ERR_OK);
    assert_string_equal(r->families[0].unit, "seconds");
    assert_string_equal(r->families[0].help, "Some \"text\" and \\.");
    assert_int_equal(r->samples[0].ts_ms, 1520879607789LL);
    assert_int_equal(r->exemplars, 1);
    assert_int_equal(r->samples[1].family, 0);
    assert_int_equal(r->families[1].type, SF_PROM_INFO);
    assert_int_equal(r->families[2].type, SF_PROM_STATESET);
    assert_int_equal(r->families[3].type, SF_PROM_GAUGEHISTOGRAM);
    assert_int_equal(r->families[3].n_samples, 3);
    /* with the final newline too */
    assert_int_equal(parse(f, SF_PROM_OPENMETRICS, "a 1\n# EOF\n"), SF_PROM_ERR_OK);
}

static void test_openmetrics_strict(void **state)
{
    fx *f = *state;
    static const char *const bad[] = {
        "a 1\n",                                    /* no # EOF */
        "a 1\n# EOF\nb 2\n",                        /* text after it */
        "a 1\n\n# EOF\n",                           /* an empty line */
        "a  1\n# EOF\n",                            /* two spaces */
        "# a comment\n# EOF\n",
        "a 1 # {x=\"y\"}\n# EOF\n",                 /* an exemplar without a value */
        ("a 1 # {x=\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"} 1\n# EOF\n"),
        "# TYPE a untyped\n# EOF\n",               /* not an OpenMetrics type */
        "a{x=\"1\",} 1\n# EOF\n",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sf_prom_err e = parse(f, SF_PROM_OPENMETRICS, bad[i]);

        if (e != SF_PROM_ERR_MALFORMED)
            fail_msg("case %zu parsed (%s): %s", i, sf_prom_err_label(e), bad[i]);
        assert_true(f->r.err_text[0] != '\0');
    }
}

static void test_text_malformed(void **state)
{
    fx *f = *state;
    static const char *const bad[] = {
        "a\n",                                      /* no value */
        "a x\n",
        "a 0x10\n",                                 /* hex: Prometheus refuses it too */
        "a 1 2 3\n",
        "a 1 1.5\n",                                /* a float timestamp */
        "a{x=\"1\" 1\n",
        "a{x=1} 1\n",
        "a{x=\"1} 1\n",
        "a{1x=\"1\"} 1\n",
        "a{x=\"1\",x=\"2\"} 1\n",                   /* a label twice */
        "a{x=\"\xff\"} 1\n",                        /* not UTF-8 */
        "a{x=\"\xc0\xaf\"} 1\n",                    /* overlong */
        "a{x=\"\xed\xa0\x80\"} 1\n",                /* a surrogate */
        "# TYPE a counter\n# TYPE a gauge\n",       /* a second TYPE */
        "# HELP a x\n# HELP a y\n",
        "a 1\n# TYPE a counter\n",                  /* TYPE after samples */
        "# TYPE a nonsense\n",
        "# TYPE h histogram\nh 1\n",                /* h itself is no histogram sample */
        "a 1 # {x=\"y\"} 1\n",                      /* exemplars are OpenMetrics' only */
        "a\x00 1\n",
        "a 1\r\n",
        "\xe2\x80\x8b 1\n",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t n = i == 19 ? 6 : strlen(bad[i]);
        uint8_t copy[128];
        sf_prom_err e;

        memcpy(copy, bad[i], n);
        sf_arena_reset(f->arena);
        e = sf_prom_parse(copy, n, SF_PROM_TEXT, &loose, f->arena, &f->r);
        if (e != SF_PROM_ERR_MALFORMED)
            fail_msg("case %zu: %s: %s", i, sf_prom_err_label(e), bad[i]);
        assert_true(strncmp(f->r.err_text, "line ", 5) == 0);
    }
}

static void test_limits(void **state)
{
    fx *f = *state;
    sf_prom_limits lim = loose;
    char *big;
    size_t n = 200000;

    /* a huge line, with and without a newline */
    big = malloc(n + 16);
    memset(big, 'a', n);
    memcpy(big + n, " 1\n", 4);
    assert_int_equal(parse(f, SF_PROM_TEXT, big), SF_PROM_ERR_LINE_TOO_LONG);
    big[n] = '\0';
    assert_int_equal(parse(f, SF_PROM_TEXT, big), SF_PROM_ERR_LINE_TOO_LONG);
    free(big);
    /* a line exactly at the limit passes */
    lim.max_line = 5;
    assert_int_equal(parse_lim(f, SF_PROM_TEXT, &lim, "abc 1\nab 22\n"), SF_PROM_ERR_OK);
    assert_int_equal(parse_lim(f, SF_PROM_TEXT, &lim, "abc 12\n"), SF_PROM_ERR_LINE_TOO_LONG);
    lim = loose;
    lim.sample_limit = 3;
    assert_int_equal(parse_lim(f, SF_PROM_TEXT, &lim, "a 1\nb 1\nc 1\n"), SF_PROM_ERR_OK);
    assert_int_equal(parse_lim(f, SF_PROM_TEXT, &lim, "a 1\nb 1\nc 1\nd 1\n"),
                     SF_PROM_ERR_SAMPLE_LIMIT);
    assert_int_equal(f->r.err_line, 4);
    lim = loose;
    lim.label_limit = 2;
    assert_int_equal(parse_lim(f, SF_PROM_TEXT, &lim, "a{x=\"1\",y=\"2\"} 1\n"), SF_PROM_ERR_OK);
    assert_int_equal(parse_lim(f, SF_PROM_TEXT, &lim, "a{x=\"1\",y=\"2\",z=\"3\"} 1\n"),
                     SF_PROM_ERR_LABEL_LIMIT);
    lim = loose;
    lim.label_name_length = 3;
    assert_int_equal(parse_lim(f, SF_PROM_TEXT, &lim, "a{abcd=\"1\"} 1\n"),
                     SF_PROM_ERR_LABEL_NAME_LENGTH);
    lim = loose;
    lim.label_value_length = 3;
    /* the unescaped length counts: \\n is one byte */
    assert_int_equal(parse_lim(f, SF_PROM_TEXT, &lim, "a{x=\"a\\nb\"} 1\n"), SF_PROM_ERR_OK);
    assert_int_equal(parse_lim(f, SF_PROM_TEXT, &lim, "a{x=\"abcd\"} 1\n"),
                     SF_PROM_ERR_LABEL_VALUE_LENGTH);
    /* metadata alone cannot grow without bound either */
    lim = loose;
    lim.sample_limit = 1;
    {
        char text[8192];
        size_t k = 0;

        for (int i = 0; i < 200; i++)
            k += (size_t)snprintf(text + k, sizeof(text) - k, "# TYPE m%d gauge\n", i);
        assert_int_equal(parse_lim(f, SF_PROM_TEXT, &lim, text), SF_PROM_ERR_SAMPLE_LIMIT);
    }
}

static void test_empty_and_comments(void **state)
{
    fx *f = *state;

    assert_int_equal(parse(f, SF_PROM_TEXT, ""), SF_PROM_ERR_OK);
    assert_int_equal(f->r.n_samples, 0);
    assert_int_equal(parse(f, SF_PROM_TEXT, "#\n# \n#HELP\n# HELP\n\n\n"), SF_PROM_ERR_OK);
    assert_int_equal(parse(f, SF_PROM_OPENMETRICS, "# EOF"), SF_PROM_ERR_OK);
    assert_int_equal(parse(f, SF_PROM_OPENMETRICS, ""), SF_PROM_ERR_MALFORMED);
}

static void test_format_of(void **state)
{
    (void)state;
    assert_int_equal(sf_prom_format_of("application/openmetrics-text; version=1.0.0; "
                                       "charset=utf-8"), SF_PROM_OPENMETRICS);
    assert_int_equal(sf_prom_format_of("text/plain; version=0.0.4"), SF_PROM_TEXT);
    assert_int_equal(sf_prom_format_of(NULL), SF_PROM_TEXT);
    assert_true(sf_prom_name_in_family("h_bucket", "h", SF_PROM_HISTOGRAM));
    assert_false(sf_prom_name_in_family("h", "h", SF_PROM_HISTOGRAM));
    assert_true(sf_prom_name_in_family("c_total", "c", SF_PROM_COUNTER));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_text_basic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_escapes_and_specials, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_histogram_summary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_openmetrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_openmetrics_strict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_and_comments, setup, teardown),
        cmocka_unit_test(test_format_of),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/pipeline/test_log.c: the collector's own log (pipeline/sf_log.c),
 * read back from stderr redirected into a file: the line format (UTC
 * timestamp to the millisecond, the level padded, the message, one newline),
 * the level filter and OFF, a line longer than the buffer cut but still
 * ended, and threads logging at once never interleaving a line; JSON lines
 * (logs.encoding: json) escaped and closed even when cut, to stderr and a
 * file at once (output_paths). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sf_log.h"
#include "tests/sf_test_stderr.h"

static size_t count_lines(const char *s)
{
    size_t n = 0;

    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_format(void **state)
{
    regex_t re;
    size_t len;
    char *text;

    (void)state;
    sf_log_set_level(SF_LOG_DEBUG);
    sf_test_stderr_begin();
    sf_debug("d %d", 1);
    sf_info("i %s", "two");
    sf_warn("w");
    sf_error("e %c", '4');
    text = sf_test_stderr_end(&len);
    assert_int_equal(regcomp(&re,
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z debug d 1\n"
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z info  i two\n"
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z warn  w\n"
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z error e 4\n$",
        REG_EXTENDED), 0);
    if (regexec(&re, text, 0, NULL, 0) != 0)
        fail_msg("unexpected log text:\n%s", text);
    regfree(&re);
    free(text);
}

static void test_level_filter(void **state)
{
    size_t len;
    char *text;

    (void)state;
    sf_log_set_level(SF_LOG_WARN);
    assert_int_equal(sf_log_get_level(), SF_LOG_WARN);
    sf_test_stderr_begin();
    sf_debug("hidden debug");
    sf_info("hidden info");
    sf_warn("shown warn");
    sf_error("shown error");
    sf_log(SF_LOG_OFF, "never: OFF is not a level to log at");
    text = sf_test_stderr_end(&len);
    assert_null(strstr(text, "hidden"));
    assert_null(strstr(text, "never"));
    assert_non_null(strstr(text, "warn  shown warn\n"));
    assert_non_null(strstr(text, "error shown error\n"));
    assert_int_equal(count_lines(text), 2);
    free(text);

    sf_log_set_level(SF_LOG_OFF);
    sf_test_stderr_begin();
    sf_error("silenced");
    text = sf_test_stderr_end(&len);
    assert_int_equal(len, 0);
    free(text);
    sf_log_set_level(SF_LOG_INFO);
}

static void test_long_line_cut(void **state)
{
    char big[5000];
    size_t len;
    char *text, *msg;

    (void)state;
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    sf_log_set_level(SF_LOG_INFO);
    sf_test_stderr_begin();
    sf_info("%s", big);
    sf_info("after");
    text = sf_test_stderr_end(&len);
    assert_int_equal(count_lines(text), 2);
    msg = strchr(text, '\n');
    assert_non_null(msg);
    assert_true((size_t)(msg - text) + 1 <= 2048);     /* cut to the line buffer */
    assert_true((size_t)(msg - text) > 2000);          /* not cut short either */
    assert_int_equal(msg[-1], 'x');
    assert_non_null(strstr(msg + 1, "info  after\n"));
    free(text);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 65536);
    size_t n;

    assert_non_null(f);
    assert_non_null(buf);
    n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_json_outputs(void **state)
{
    char path[] = "/tmp/sf_test_log_XXXXXX";
    const char *paths[2] = { "stderr", path };
    char big[5000];
    size_t len;
    char *text, *file;
    regex_t re;
    int fd = mkstemp(path);

    (void)state;
    assert_true(fd >= 0);
    close(fd);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    sf_log_set_level(SF_LOG_INFO);
    assert_int_equal(sf_log_configure(true, paths, 2), 0);
    sf_test_stderr_begin();
    sf_warn("say \"%s\"\tnow\n", "hi\\");
    sf_info("%s", big);
    text = sf_test_stderr_end(&len);
    assert_int_equal(sf_log_configure(false, NULL, 0), 0);
    assert_int_equal(regcomp(&re, "^\\{\"level\":\"warn\",\"ts\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T"
                                  "[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z\",\"msg\":\"say "
                                  "\\\\\"hi\\\\\\\\\\\\\"\\\\u0009now\\\\u000a\"\\}\n",
                             REG_EXTENDED), 0);
    assert_int_equal(regexec(&re, text, 0, NULL, 0), 0);
    regfree(&re);
    assert_int_equal(count_lines(text), 2);
    assert_non_null(strstr(text, "xxx\"}\n"));          /* cut, and still closed */
    file = read_all(path);
    assert_string_equal(file, text);                    /* the same lines in the file */
    /* a file that cannot be opened changes nothing */
    paths[1] = "/nonexistent/dir/log";
    assert_int_equal(sf_log_configure(true, paths, 2), -1);
    sf_test_stderr_begin();
    sf_info("plain");
    free(text);
    text = sf_test_stderr_end(&len);
    assert_non_null(strstr(text, " info  plain\n"));
    free(text);
    free(file);
    unlink(path);
}

#define THREADS 4
#define LINES 200

static void *logger(void *arg)
{
    int id = (int)(intptr_t)arg;
    char pad[300];

    memset(pad, 'a' + id, sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    for (int i = 0; i < LINES; i++)
        sf_info("t%d %s", id, pad);
    return NULL;
}

/* The one JSON string escaper (log lines, health_check, trace_control):
 * quote, backslash and control characters escaped; false when cut. */
static void test_json_escape(void **state)
{
    char s[16];

    (void)state;
    assert_true(sf_json_escape("a\"b\\c\x01", s, sizeof(s)));
    assert_string_equal(s, "a\\\"b\\\\c\\u0001");
    assert_false(sf_json_escape("0123456789abcdef", s, sizeof(s)));
}

static void test_threads_never_interleave(void **state)
{
    pthread_t th[THREADS];
    size_t len, lines = 0;
    char *text, *line, *save = NULL;

    (void)state;
    sf_log_set_level(SF_LOG_INFO);
    sf_test_stderr_begin();
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, logger, (void *)(intptr_t)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    text = sf_test_stderr_end(&len);
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char *m = strstr(line, "info  t");
        int id;

        assert_non_null(m);
        id = m[7] - '0';
        assert_true(id >= 0 && id < THREADS);
        /* the whole message is the one thread's: 299 of its letter */
        assert_int_equal(strspn(m + 9, (char[]){ (char)('a' + id), 0 }), 299);
        assert_int_equal(m[9 + 299], '\0');
        lines++;
    }
    assert_int_equal(lines, THREADS * LINES);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_level_filter),
        cmocka_unit_test(test_long_line_cut),
        cmocka_unit_test(test_threads_never_interleave),
        cmocka_unit_test(test_json_outputs),
        cmocka_unit_test(test_json_escape),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

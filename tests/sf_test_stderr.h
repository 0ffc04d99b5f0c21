/* tests/sf_test_stderr.h: read back what the code under test writes to
 * stderr (sf_log's lines, gRPC's routed through it): stderr goes to a
 * temporary file between sf_test_stderr_begin() and _end(). Header-only;
 * include it after <cmocka.h>. Not nestable. */
#ifndef SF_TEST_STDERR_H
#define SF_TEST_STDERR_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int sf_test_stderr_saved = -1;
static FILE *sf_test_stderr_file;

static inline void sf_test_stderr_begin(void)
{
    sf_test_stderr_file = tmpfile();
    assert_non_null(sf_test_stderr_file);
    fflush(stderr);
    sf_test_stderr_saved = dup(STDERR_FILENO);
    assert_true(sf_test_stderr_saved >= 0);
    assert_true(dup2(fileno(sf_test_stderr_file), STDERR_FILENO) >= 0);
}

/* Restore stderr and return what was written meanwhile, NUL-terminated and
 * malloc'd (the caller frees it); its length in *len when len is not NULL. */
static inline char *sf_test_stderr_end(size_t *len)
{
    long n;
    char *text;

    fflush(stderr);
    assert_true(dup2(sf_test_stderr_saved, STDERR_FILENO) >= 0);
    close(sf_test_stderr_saved);
    sf_test_stderr_saved = -1;
    n = ftell(sf_test_stderr_file);
    assert_true(n >= 0);
    text = malloc((size_t)n + 1);
    assert_non_null(text);
    rewind(sf_test_stderr_file);
    assert_int_equal(fread(text, 1, (size_t)n, sf_test_stderr_file), (size_t)n);
    text[n] = '\0';
    fclose(sf_test_stderr_file);
    sf_test_stderr_file = NULL;
    if (len != NULL)
        *len = (size_t)n;
    return text;
}

#endif

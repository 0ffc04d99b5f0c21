/* tests/pipeline/test_process.c: the core's process-wide set-up
 * (pipeline/sf_process.c): SF_OK, done once however many threads ask at
 * the same time, libcurl usable after it, and gRPC's log routed into
 * sf_log's lines (prefixed "grpc: ", at the matching level, gRPC's debug
 * lines kept out unless spanfence logs at debug). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include <curl/curl.h>
#include <grpc/support/log.h>

#include "sf_log.h"
#include "sf_process.h"
#include "tests/sf_test_stderr.h"

#define THREADS 8

static void *init_thread(void *arg)
{
    *(sf_status *)arg = sf_process_init();
    return NULL;
}

static void test_once_from_many_threads(void **state)
{
    pthread_t th[THREADS];
    sf_status st[THREADS];

    (void)state;
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, init_thread, &st[i]), 0);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(st[i], SF_OK);
    }
    assert_int_equal(sf_process_init(), SF_OK);         /* and again: idempotent */
}

static void test_curl_ready(void **state)
{
    CURL *h;

    (void)state;
    assert_int_equal(sf_process_init(), SF_OK);
    h = curl_easy_init();
    assert_non_null(h);
    assert_int_equal(curl_easy_setopt(h, CURLOPT_URL, "http://127.0.0.1:1/"), CURLE_OK);
    curl_easy_cleanup(h);
}

static void test_grpc_log_routed(void **state)
{
    char *text;

    (void)state;
    sf_log_set_level(SF_LOG_INFO);
    assert_int_equal(sf_process_init(), SF_OK);
    sf_test_stderr_begin();
    gpr_log(GPR_ERROR, "routed %d", 7);
    gpr_log(GPR_DEBUG, "not at info");
    text = sf_test_stderr_end(NULL);
    /* one sf_log line, at error, with gRPC's message after "grpc: " */
    assert_non_null(strstr(text, "Z error grpc: routed 7\n"));
    assert_null(strstr(text, "not at info"));
    assert_int_equal(strchr(text, '\n') - text + 1, (long)strlen(text));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_once_from_many_threads),
        cmocka_unit_test(test_curl_ready),
        cmocka_unit_test(test_grpc_log_routed),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

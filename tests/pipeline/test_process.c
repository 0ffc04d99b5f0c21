/* tests/pipeline/test_process.c: the core's process-wide set-up
 * (pipeline/sf_process.c): SF_OK, done once however many threads ask at
 * the same time, and libcurl usable after it. gRPC's log routing is the
 * `otlp` exporter's (tests/exporters/test_grpc_core.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include <curl/curl.h>

#include "sf_process.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_once_from_many_threads),
        cmocka_unit_test(test_curl_ready),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

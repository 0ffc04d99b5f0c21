/* tests/pipeline/test_time.c: the clock helpers (sf_time.h): monotonic now in
 * three units that agree, deadlines and what is left of them, and condvar
 * waits that are really on the monotonic clock (a deadline from
 * sf_deadline_ms() seconds ahead must not look long past, as it would to a
 * condvar on the wall clock), and the UTC timestamp of log lines and audit
 * records. No assertion on how long anything took. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "sf_time.h"

static void test_units_agree(void **state)
{
    int64_t ms0, us, ns, ms1;

    (void)state;
    ms0 = sf_now_ms();
    us = sf_now_us();
    ns = sf_now_ns();
    ms1 = sf_now_ms();
    assert_true(ms0 <= us / 1000 && us / 1000 <= ns / 1000000 && ns / 1000000 <= ms1);
    /* the wall clock counts from 1970 (past 2020 here); the monotonic one
     * from boot, far below it */
    assert_true(sf_wall_ms() > (int64_t)1600000000 * 1000);
    assert_true(sf_now_ms() < sf_wall_ms() / 2);
    for (int i = 0; i < 1000; i++) {
        int64_t a = sf_now_ns(), b = sf_now_ns();

        assert_true(b >= a);
    }
}

static void test_deadlines(void **state)
{
    int64_t now = sf_now_ms(), d = sf_deadline_ms(60000);
    struct timespec ts = sf_timespec_at_ms(1234567);

    (void)state;
    assert_true(d >= now + 60000);
    assert_true(sf_remaining_ms(d) <= 60000 && sf_remaining_ms(d) > 0);
    assert_true(sf_deadline_ms(-5) >= now);     /* negative: now */
    assert_int_equal(sf_remaining_ms(now - 1), 0);
    assert_int_equal(ts.tv_sec, 1234);
    assert_int_equal(ts.tv_nsec, 567000000L);
}

static void test_wait_until_past_deadline(void **state)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv;
    int64_t d = sf_deadline_ms(1);

    (void)state;
    assert_int_equal(sf_cond_init(&cv), 0);
    pthread_mutex_lock(&mu);
    while (sf_cond_wait_until(&cv, &mu, d))
        ;                           /* spurious wake-ups only */
    pthread_mutex_unlock(&mu);
    assert_true(sf_now_ms() >= d);
    pthread_cond_destroy(&cv);
}

typedef struct waker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_bool waiting;
    bool flag;
} waker;

static void *wake_later(void *arg)
{
    waker *w = arg;

    while (!atomic_load(&w->waiting))
        usleep(1000);
    usleep(20000);
    pthread_mutex_lock(&w->mu);
    w->flag = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Signalled before a 30 s monotonic deadline: the wait returns true. On a
 * condvar left on CLOCK_REALTIME the same deadline (seconds since boot)
 * lies decades in the past and the wait would time out at once. */
static void test_wait_is_monotonic(void **state)
{
    waker w = { .mu = PTHREAD_MUTEX_INITIALIZER };
    int64_t d = sf_deadline_ms(30000);
    bool timed_out = false;
    pthread_t t;

    (void)state;
    assert_int_equal(sf_cond_init(&w.cv), 0);
    assert_int_equal(pthread_create(&t, NULL, wake_later, &w), 0);
    pthread_mutex_lock(&w.mu);
    atomic_store(&w.waiting, true);
    while (!w.flag && !timed_out)
        timed_out = !sf_cond_wait_until(&w.cv, &w.mu, d);
    pthread_mutex_unlock(&w.mu);
    pthread_join(t, NULL);
    assert_false(timed_out);
    assert_true(w.flag);
    pthread_cond_destroy(&w.cv);
}

static void test_format_utc(void **state)
{
    char buf[SF_TIME_UTC_LEN + 1], small[11];

    (void)state;
    assert_int_equal(sf_time_format_utc(0, buf, sizeof(buf)), SF_TIME_UTC_LEN);
    assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
    assert_int_equal(sf_time_format_utc(1796013054123LL, buf, sizeof(buf)), SF_TIME_UTC_LEN);
    assert_string_equal(buf, "2026-11-30T04:30:54.123Z");
    sf_time_format_utc(1796013054007LL, buf, sizeof(buf));
    assert_string_equal(buf, "2026-11-30T04:30:54.007Z");   /* ms padded */
    sf_time_format_utc(-1, buf, sizeof(buf));
    assert_string_equal(buf, "1969-12-31T23:59:59.999Z");
    /* cut to the buffer, still terminated */
    assert_int_equal(sf_time_format_utc(0, small, sizeof(small)), 10);
    assert_string_equal(small, "1970-01-01");
    assert_int_equal(sf_time_format_utc(0, small, 0), 0);
    /* now reads as a time of this century */
    sf_time_format_utc(sf_wall_ms(), buf, sizeof(buf));
    assert_int_equal(strlen(buf), SF_TIME_UTC_LEN);
    assert_true(strncmp(buf, "20", 2) == 0 && buf[10] == 'T' && buf[23] == 'Z');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_agree),
        cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_wait_until_past_deadline),
        cmocka_unit_test(test_wait_is_monotonic),
        cmocka_unit_test(test_format_utc),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

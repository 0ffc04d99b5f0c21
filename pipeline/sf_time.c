/* sf_time.c: monotonic now, deadlines and monotonic condvar waits
 * (sf_time.h); the one wall-clock read for timestamps. */
#include "sf_time.h"

#include <errno.h>
#include <stdio.h>

static int64_t now_ns(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t sf_now_ns(void)
{
    return now_ns(CLOCK_MONOTONIC);
}

int64_t sf_now_us(void)
{
    return now_ns(CLOCK_MONOTONIC) / 1000;
}

int64_t sf_now_ms(void)
{
    return now_ns(CLOCK_MONOTONIC) / 1000000;
}

int64_t sf_wall_ms(void)
{
    return now_ns(CLOCK_REALTIME) / 1000000;
}

size_t sf_time_format_utc(int64_t epoch_ms, char *buf, size_t size)
{
    int64_t secs = epoch_ms / 1000, ms = epoch_ms % 1000;
    time_t t;
    struct tm tm;
    int n;

    if (ms < 0) {                   /* before 1970: still a time of day */
        ms += 1000;
        secs--;
    }
    t = (time_t)secs;
    if (size == 0)
        return 0;
    if (gmtime_r(&t, &tm) == NULL) {
        buf[0] = '\0';
        return 0;
    }
    n = snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)ms);
    if (n < 0) {
        buf[0] = '\0';
        return 0;
    }
    return (size_t)n < size ? (size_t)n : size - 1;
}

int64_t sf_deadline_ms(int64_t ms)
{
    return sf_now_ms() + (ms > 0 ? ms : 0);
}

int64_t sf_remaining_ms(int64_t deadline_ms)
{
    int64_t left = deadline_ms - sf_now_ms();

    return left > 0 ? left : 0;
}

struct timespec sf_timespec_at_ms(int64_t at_ms)
{
    struct timespec ts = { .tv_sec = at_ms / 1000, .tv_nsec = (at_ms % 1000) * 1000000L };

    return ts;
}

int sf_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);

    if (rc != 0)
        return rc;
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cond, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}

bool sf_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t deadline_ms)
{
    struct timespec ts = sf_timespec_at_ms(deadline_ms);

    return pthread_cond_timedwait(cond, mu, &ts) != ETIMEDOUT;
}

/* sf_time.h: the one set of clock helpers. Durations, deadlines and timed
 * waits are on CLOCK_MONOTONIC, so a wall-clock step (NTP, a VM resumed,
 * settimeofday) can neither stretch nor cut a wait short; only timestamps
 * meant for people or peers (log lines, audit records, file names) read the
 * wall clock, through sf_wall_ms().
 *
 * A condition variable that is waited on with a deadline must be created
 * with sf_cond_init(), which puts it on the monotonic clock; then
 * sf_cond_wait_until() takes a deadline from sf_deadline_ms(). */
#ifndef SF_TIME_H
#define SF_TIME_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Monotonic time since an arbitrary start (boot), in ms, us or ns. */
int64_t sf_now_ms(void);
int64_t sf_now_us(void);
int64_t sf_now_ns(void);
/* Wall-clock time (CLOCK_REALTIME) in ms since the Unix epoch: for
 * timestamps only, never for measuring or waiting. */
int64_t sf_wall_ms(void);
/* The wall-clock time `epoch_ms` (from sf_wall_ms) in UTC as log lines and
 * audit records print it, "2026-11-30T04:50:54.123Z" (SF_TIME_UTC_LEN
 * characters); always terminated, cut to `size`. The length written. */
#define SF_TIME_UTC_LEN 24
size_t sf_time_format_utc(int64_t epoch_ms, char *buf, size_t size);

/* The monotonic time `ms` from now (ms <= 0: now). */
int64_t sf_deadline_ms(int64_t ms);
/* Milliseconds left until the monotonic `deadline_ms`, 0 when past. */
int64_t sf_remaining_ms(int64_t deadline_ms);
/* A monotonic time in ms as the absolute timespec that
 * pthread_cond_timedwait() takes on a monotonic condvar. */
struct timespec sf_timespec_at_ms(int64_t at_ms);

/* pthread_cond_init() on CLOCK_MONOTONIC; 0 or an errno value. */
int sf_cond_init(pthread_cond_t *cond);
/* Wait on `cond` (made by sf_cond_init; `mu` held) until signalled or the
 * monotonic `deadline_ms` passes. False when the deadline passed; like
 * pthread_cond_timedwait(), a wake-up may be spurious, so the caller
 * re-checks its condition in a loop. */
bool sf_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t deadline_ms);

#endif

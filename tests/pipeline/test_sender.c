/* tests/pipeline/test_sender.c: the sending queue and retry engine driven by
 * a scripted fake send function: outcomes and counters, backoff and
 * retry-after, a full queue, draining and prompt shutdown, the synchronous
 * (queue disabled) mode, and the accounting invariant after each scenario:
 *   spans submitted OK == sent + send_failed (all reasons) + queued_spans.
 * No timing assertion is tight: waits poll generously; the only bounds are
 * lower bounds (a retry not before the server's hint) or far above the work
 * (shutdown well inside a 30 s backoff). */
#define _GNU_SOURCE             /* gettid, pthread_getname_np */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/sf_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "sf_alloc.h"
#include "sf_log.h"
#include "sf_sender.h"
#include "sf_share.h"
#include "sf_thread.h"
#include "sf_time.h"
#include "tests/sf_torture.h"

#define MAX_CALLS 256

typedef struct fake {
    pthread_mutex_t mu;
    sf_sender *sender;
    int calls;
    sf_status script[16];       /* outcome of call i; `dflt` after the script */
    int64_t retry_after[16];
    int n_script;
    sf_status dflt;
    int64_t rejected;           /* reported with every SF_OK */
    int64_t times[MAX_CALLS];   /* monotonic ms of each call */
    const sf_buf *bufs[MAX_CALLS];   /* compare only: freed after the send */
    int tags[MAX_CALLS];             /* first data byte, read during the call */
    pthread_t threads[MAX_CALLS];
    unsigned workers[MAX_CALLS];
    int nice[MAX_CALLS];        /* the calling thread's nice value */
    int policy[MAX_CALLS];      /* and its scheduling policy */
    pid_t tids[MAX_CALLS];      /* and its thread id */
    _Atomic int hold;           /* calls wait while set */
    char thread_name[16];       /* of the first call's thread */
    int sleep_ms;               /* each call takes this long */
    int odd_permanent;          /* buffers with an odd span count fail for good */
    int stuck;                  /* block until shutdown aborts */
} fake;

static void fake_send(void *exporter, unsigned worker, const sf_buf *buf, sf_send_result *res)
{
    fake *f = exporter;
    int i;

    pthread_mutex_lock(&f->mu);
    i = f->calls++;
    if (i < MAX_CALLS) {
        f->times[i] = sf_now_ms();
        f->bufs[i] = buf;
        f->tags[i] = buf->data[0];
        f->threads[i] = pthread_self();
        f->workers[i] = worker;
        f->nice[i] = getpriority(PRIO_PROCESS, (id_t)gettid());
        f->policy[i] = sched_getscheduler(0);
        f->tids[i] = gettid();
        if (i == 0)
            pthread_getname_np(pthread_self(), f->thread_name, sizeof(f->thread_name));
    }
    res->status = i < f->n_script ? f->script[i] : f->dflt;
    res->retry_after_ms = i < f->n_script ? f->retry_after[i] : 0;
    if (f->odd_permanent)
        res->status = (buf->spans % 2) ? SF_PERMANENT : SF_OK;
    if (res->status == SF_OK)
        res->rejected_spans = f->rejected;
    pthread_mutex_unlock(&f->mu);
    snprintf(res->detail, sizeof(res->detail), "fake %s", sf_status_name(res->status));
    if (f->sleep_ms)
        usleep((useconds_t)f->sleep_ms * 1000);
    while (atomic_load(&f->hold))
        usleep(1000);
    if (f->stuck) {
        while (!sf_sender_aborting(f->sender))
            usleep(1000);
        res->status = SF_RETRY;
    }
}

static int fake_calls(fake *f)
{
    int n;

    pthread_mutex_lock(&f->mu);
    n = f->calls;
    pthread_mutex_unlock(&f->mu);
    return n;
}

typedef struct fixture {
    fake f;
    sf_counters k;
    sf_queue_config q;
    sf_retry_config r;
    sf_sender *s;
    uint64_t submitted_ok;
} fixture;

static int setup(void **state)
{
    fixture *x = calloc(1, sizeof(*x));

    pthread_mutex_init(&x->f.mu, NULL);
    x->f.dflt = SF_OK;
    x->q = (sf_queue_config){ .present = true, .enabled = true, .queue_size = 10,
                              .num_consumers = 2 };
    x->r = (sf_retry_config){ .present = true, .enabled = true, .initial_interval = 10,
                              .multiplier = 1.5, .randomization_factor = 0.5,
                              .max_interval = 100, .max_elapsed_time = 10000 };
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fixture *x = *state;

    sf_sender_destroy(x->s);
    pthread_mutex_destroy(&x->f.mu);
    free(x);
    return 0;
}

static void make_sender(fixture *x)
{
    x->s = sf_sender_create("otlphttp/test", &x->q, &x->r, fake_send, &x->f, &x->k);
    assert_non_null(x->s);
    x->f.sender = x->s;
}

static sf_status submit(fixture *x, size_t spans)
{
    sf_buf *b = sf_buf_create(8);
    sf_status st;

    assert_non_null(b);
    memset(b->data, (int)spans, 8);
    b->spans = spans;
    st = sf_sender_submit(x->s, b);
    if (st == SF_OK)
        x->submitted_ok += spans;
    sf_buf_unref(b);
    return st;
}

static uint64_t failed(sf_counters *k, sf_reason r)
{
    return sf_counter_get(&k->send_failed_spans[r]);
}

static uint64_t failed_all(sf_counters *k)
{
    uint64_t n = 0;

    for (int r = 0; r < SF_REASON_COUNT; r++)
        n += failed(k, (sf_reason)r);
    return n;
}

static void assert_invariant(fixture *x)
{
    sf_test_assert_accounted(&x->k, x->submitted_ok);
}

/* ---- scenarios --------------------------------------------------------- */

static void test_success_counts(void **state)
{
    fixture *x = *state;
    int seen[6] = { 0 };

    make_sender(x);
    assert_int_equal(sf_sender_workers(x->s), 2);
    assert_int_equal(atomic_load(&x->k.queue_capacity), 10);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    for (size_t n = 1; n <= 5; n++)
        assert_int_equal(submit(x, n), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 15 && atomic_load(&x->k.queued_spans) == 0);
    assert_invariant(x);
    sf_sender_shutdown(x->s, 1000);
    assert_int_equal(fake_calls(&x->f), 5);
    for (int i = 0; i < 5; i++) {
        assert_in_range(x->f.tags[i], 1, 5);
        assert_true(x->f.workers[i] < 2);
        seen[x->f.tags[i]]++;
    }
    for (int n = 1; n <= 5; n++)
        assert_int_equal(seen[n], 1);
    assert_int_equal(failed_all(&x->k), 0);
    assert_int_equal(sf_counter_get(&x->k.retries), 0);
    assert_int_equal(atomic_load(&x->k.queue_size), 0);
    assert_int_equal(submit(x, 1), SF_STOPPED);
    assert_invariant(x);
}

/* Consumers send at a lower priority than the threads that submit (the
 * receivers answering the engine), and say what they are in `top -H`. */
static void test_consumers_yield_to_receivers(void **state)
{
    fixture *x = *state;
    int nice_here = getpriority(PRIO_PROCESS, (id_t)gettid());

    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    for (size_t n = 1; n <= 4; n++)
        assert_int_equal(submit(x, n), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 10);
    sf_sender_shutdown(x->s, 1000);
    for (int i = 0; i < 4; i++)
        assert_int_equal(x->f.nice[i], nice_here + 5 > 19 ? 19 : nice_here + 5);
    assert_string_equal(x->f.thread_name, "sf-export");
    assert_invariant(x);
}

static void test_retry_then_success_no_duplicates(void **state)
{
    fixture *x = *state;

    x->f.script[0] = SF_RETRY;
    x->f.script[1] = SF_RETRY;
    x->f.script[2] = SF_OK;
    x->f.n_script = 3;
    x->f.dflt = SF_PERMANENT;  /* a 4th call would show up as a failure */
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 7), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 7 && atomic_load(&x->k.queued_spans) == 0);
    sf_sender_shutdown(x->s, 1000);
    assert_int_equal(fake_calls(&x->f), 3);
    assert_int_equal(sf_counter_get(&x->k.retries), 2);
    assert_int_equal(failed_all(&x->k), 0);
    assert_ptr_equal(x->f.bufs[0], x->f.bufs[2]);
    assert_int_equal(x->f.tags[0], 7);
    assert_int_equal(x->f.tags[2], 7);
    assert_invariant(x);
}

static void test_permanent_failure(void **state)
{
    fixture *x = *state;

    x->f.dflt = SF_PERMANENT;
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 4), SF_OK);
    SF_TEST_WAIT_FOR(failed(&x->k, SF_REASON_PERMANENT_ERROR) == 4);
    SF_TEST_WAIT_FOR(atomic_load(&x->k.queued_spans) == 0);
    sf_sender_shutdown(x->s, 1000);
    assert_int_equal(fake_calls(&x->f), 1);
    assert_int_equal(sf_counter_get(&x->k.retries), 0);
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 0);
    assert_int_equal(failed_all(&x->k), 4);
    assert_invariant(x);
}

static void test_partial_success_splits_counts(void **state)
{
    fixture *x = *state;

    x->f.rejected = 2;
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 5), SF_OK);
    SF_TEST_WAIT_FOR(atomic_load(&x->k.queued_spans) == 0 && fake_calls(&x->f) == 1);
    sf_sender_shutdown(x->s, 1000);
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 3);
    assert_int_equal(failed(&x->k, SF_REASON_PERMANENT_ERROR), 2);
    assert_invariant(x);
}

static void test_retries_exhausted(void **state)
{
    fixture *x = *state;
    int calls;

    /* waits 10, 20, 40, 80, 100 ms (no jitter): the sixth would end past
     * 300 ms, so at most 6 calls; at least 2 unless the host stalls 290 ms */
    x->f.dflt = SF_RETRY;
    x->r.multiplier = 2.0;
    x->r.randomization_factor = 0.0;
    x->r.max_elapsed_time = 300;
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 3), SF_OK);
    SF_TEST_WAIT_FOR(failed(&x->k, SF_REASON_RETRIES_EXHAUSTED) == 3);
    SF_TEST_WAIT_FOR(atomic_load(&x->k.queued_spans) == 0);
    sf_sender_shutdown(x->s, 1000);
    calls = fake_calls(&x->f);
    assert_in_range(calls, 2, 6);
    assert_int_equal(sf_counter_get(&x->k.retries), (uint64_t)calls - 1);
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 0);
    assert_int_equal(failed_all(&x->k), 3);
    for (int i = 1; i < calls; i++)
        assert_true(x->f.times[i] - x->f.times[i - 1] >= 10);
    assert_invariant(x);
}

static void test_retry_disabled_first_failure_final(void **state)
{
    fixture *x = *state;

    x->f.dflt = SF_RETRY;
    x->r.enabled = false;
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 2), SF_OK);
    SF_TEST_WAIT_FOR(failed(&x->k, SF_REASON_RETRIES_EXHAUSTED) == 2);
    sf_sender_shutdown(x->s, 1000);
    assert_int_equal(fake_calls(&x->f), 1);
    assert_int_equal(sf_counter_get(&x->k.retries), 0);
    assert_invariant(x);
}

static void test_retry_after_honoured(void **state)
{
    fixture *x = *state;

    x->f.script[0] = SF_RETRY;
    x->f.retry_after[0] = 300;
    x->f.n_script = 1;
    x->f.dflt = SF_OK;
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 1), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 1);
    sf_sender_shutdown(x->s, 1000);
    assert_int_equal(fake_calls(&x->f), 2);
    /* not before the hint (computed backoff alone would be 5-15 ms);
     * 1 ms of slack for the millisecond truncation of both stamps */
    assert_true(x->f.times[1] - x->f.times[0] >= 299);
    assert_int_equal(sf_counter_get(&x->k.retries), 1);
    assert_invariant(x);
}

static void test_retry_after_capped_by_max_elapsed(void **state)
{
    fixture *x = *state;

    /* a 100 s hint with 200 ms left: one last attempt at the limit, then
     * give up, instead of holding the batch for 100 s */
    for (int i = 0; i < 16; i++)
        x->f.retry_after[i] = 100000;
    x->f.n_script = 16;
    for (int i = 0; i < 16; i++)
        x->f.script[i] = SF_RETRY;
    x->r.max_elapsed_time = 200;
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 6), SF_OK);
    SF_TEST_WAIT_FOR(failed(&x->k, SF_REASON_RETRIES_EXHAUSTED) == 6);
    sf_sender_shutdown(x->s, 1000);
    assert_int_equal(fake_calls(&x->f), 2);
    assert_true(x->f.times[1] - x->f.times[0] >= 199);
    assert_invariant(x);
}

static void test_full_queue_refuses_and_counts(void **state)
{
    fixture *x = *state;

    x->q.queue_size = 2;
    make_sender(x);
    /* not started: nothing leaves the queue */
    assert_int_equal(submit(x, 3), SF_OK);
    assert_int_equal(submit(x, 4), SF_OK);
    assert_int_equal(submit(x, 5), SF_FULL);
    assert_int_equal(sf_counter_get(&x->k.enqueue_failed_spans), 5);
    assert_int_equal(atomic_load(&x->k.queue_size), 2);
    assert_int_equal(atomic_load(&x->k.queued_spans), 7);
    assert_invariant(x);
    sf_sender_shutdown(x->s, 0);
    assert_int_equal(failed(&x->k, SF_REASON_SHUTDOWN), 7);
    assert_int_equal(atomic_load(&x->k.queue_size), 0);
    assert_int_equal(atomic_load(&x->k.queued_spans), 0);
    assert_int_equal(fake_calls(&x->f), 0);
    assert_int_equal(submit(x, 1), SF_STOPPED);
    assert_int_equal(sf_counter_get(&x->k.enqueue_failed_spans), 5);
    assert_invariant(x);
}

static sf_status submit_from(fixture *x, uint64_t client, size_t spans)
{
    sf_buf *b = sf_buf_create(8);
    sf_status st;

    assert_non_null(b);
    memset(b->data, (int)spans, 8);
    b->spans = spans;
    b->client = client;
    st = sf_sender_submit(x->s, b);
    if (st == SF_OK)
        x->submitted_ok += spans;
    sf_buf_unref(b);
    return st;
}

/* The queue's room is shared between clients (sf_share.h): over half full
 * a client holding its share (20 / 2 clients) is refused, counted as
 * enqueue-failed, while the other still gets in up to the capacity; the
 * gauges show two clients and a share of 10; once the queue drains the
 * first client's room is back. */
static void test_queue_shares_between_clients(void **state)
{
    fixture *x = *state;

    x->q.queue_size = 20;       /* a share of 10: enough units to divide (SF_SHARE_MIN) */
    make_sender(x);             /* not started: nothing leaves the queue */
    for (int i = 0; i < 10; i++)
        assert_int_equal(submit_from(x, 7, 1), SF_OK);
    assert_int_equal(submit_from(x, 9, 1), SF_OK);      /* 11: over half full */
    assert_int_equal(submit_from(x, 7, 1), SF_FULL);    /* 7 holds 10 of 20 / 2 */
    assert_int_equal(sf_counter_get(&x->k.enqueue_failed_spans), 1);
    for (int i = 0; i < 9; i++)
        assert_int_equal(submit_from(x, 9, 1), SF_OK);
    assert_int_equal(submit_from(x, 9, 1), SF_FULL);    /* the queue is full */
    assert_int_equal(submit_from(x, 0, 1), SF_FULL);    /* nobody's: the queue is full */
    assert_int_equal(atomic_load(&x->k.queue_size), 20);
    assert_non_null(x->k.share);
    assert_int_equal(sf_share_clients(x->k.share), 2);
    assert_int_equal(sf_share_fair(x->k.share), 10);
    assert_invariant(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    SF_TEST_WAIT_FOR(atomic_load(&x->k.queued_spans) == 0);
    assert_int_equal(submit_from(x, 7, 1), SF_OK);
    SF_TEST_WAIT_FOR(atomic_load(&x->k.queued_spans) == 0);
    assert_invariant(x);
    sf_sender_destroy(x->s);
    x->s = NULL;
    assert_null(x->k.share);
}

static void test_shutdown_drains_queue(void **state)
{
    fixture *x = *state;

    x->q.num_consumers = 1;
    x->f.sleep_ms = 20;
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    for (size_t n = 1; n <= 6; n++)
        assert_int_equal(submit(x, n), SF_OK);
    sf_sender_shutdown(x->s, 10000);
    assert_int_equal(fake_calls(&x->f), 6);
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 21);
    assert_int_equal(failed_all(&x->k), 0);
    assert_int_equal(atomic_load(&x->k.queued_spans), 0);
    assert_int_equal(atomic_load(&x->k.queue_size), 0);
    assert_invariant(x);
}

/* One consumer over a 64-request queue, held in its first call (batch 1),
 * for the scheduling-policy tests; skipped where consumers never idle. */
static void start_one_held_consumer(fixture *x)
{
    if (!sf_thread_lumps_may_idle()) {
        print_message("no CAP_SYS_NICE and RLIMIT_NICE too low: consumers never idle\n");
        skip();
    }
    x->q.num_consumers = 1;
    x->q.queue_size = 64;
    make_sender(x);
    atomic_store(&x->f.hold, 1);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 1), SF_OK);
    SF_TEST_WAIT_FOR(fake_calls(&x->f) == 1);
}

/* Consumers run behind the receivers (SCHED_IDLE) while the queue has
 * room, as normal threads from a sixteenth full until it is below a
 * sixty-fourth (sf_thread.h). One consumer held in its first call while
 * six more batches fill a 64-request queue past 4; then each call records
 * the policy it ran at, the queue's length after its batch was taken
 * being 5, 4, 3, 2, 1 (urgent: not yet below 1), then 0. Shown to fail
 * with consumer_mind_backlog not called (all idle) and with no way back
 * from urgent (the last normal). */
static void test_consumer_policy_follows_backlog(void **state)
{
    fixture *x = *state;
    const int idle = SCHED_IDLE, normal = SCHED_OTHER;
    const int want[7] = { idle, normal, normal, normal, normal, normal, idle };

    start_one_held_consumer(x);
    for (size_t n = 2; n <= 7; n++)
        assert_int_equal(submit(x, n), SF_OK);
    atomic_store(&x->f.hold, 0);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 28);
    assert_int_equal(fake_calls(&x->f), 7);
    for (int i = 0; i < 7; i++) {
        assert_int_equal(x->f.tags[i], i + 1);
        assert_int_equal(x->f.policy[i], want[i]);
    }
    assert_invariant(x);
}

/* A producer takes a consumer out of SCHED_IDLE when its batch leaves a
 * backlog queued: a consumer at SCHED_IDLE beside busy receivers does not
 * run to see it (sf_thread.h). Held in its first call, at SCHED_IDLE (the
 * queue empty after its take), the consumer stays there while three
 * batches wait behind it and is a normal thread at its nice once the
 * fourth (64 / 16) is queued, before it takes again. Shown to fail
 * without wake_consumers (SCHED_IDLE until its next take). */
static void test_producer_wakes_idle_consumer(void **state)
{
    fixture *x = *state;
    int before, after, nice_after, calls;
    pid_t tid;

    start_one_held_consumer(x);
    tid = x->f.tids[0];
    assert_int_equal(x->f.policy[0], SCHED_IDLE);
    for (size_t n = 2; n <= 4; n++)
        assert_int_equal(submit(x, n), SF_OK);
    before = sched_getscheduler(tid);
    assert_int_equal(submit(x, 5), SF_OK);
    after = sched_getscheduler(tid);
    nice_after = getpriority(PRIO_PROCESS, (id_t)tid);
    calls = fake_calls(&x->f);
    atomic_store(&x->f.hold, 0);        /* before any assertion: teardown joins it */
    assert_int_equal(calls, 1);
    assert_int_equal(before, SCHED_IDLE);
    assert_int_equal(after, SCHED_OTHER);
    assert_int_equal(nice_after, x->f.nice[0]);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 15);
    assert_invariant(x);
}

static void test_shutdown_interrupts_backoff(void **state)
{
    fixture *x = *state;
    int64_t t0, took;

    x->q.num_consumers = 1;
    x->f.dflt = SF_RETRY;
    x->r.initial_interval = SF_TEST_HOUR_MS;
    x->r.max_interval = SF_TEST_HOUR_MS;
    x->r.max_elapsed_time = 0;
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 3), SF_OK);
    assert_int_equal(submit(x, 2), SF_OK);   /* waits behind it */
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.retries) == 1);
    assert_invariant(x);
    t0 = sf_now_ms();
    sf_sender_shutdown(x->s, 50);
    took = sf_now_ms() - t0;
    /* the backoff is 30-90 min: a return before its shortest end can only be
     * the cut (a bound that is the backoff itself, not a guess at speed) */
    assert_true(took < SF_TEST_HOUR_MS / 2);
    assert_int_equal(fake_calls(&x->f), 1);
    assert_int_equal(failed(&x->k, SF_REASON_SHUTDOWN), 5);
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 0);
    assert_int_equal(atomic_load(&x->k.queued_spans), 0);
    assert_int_equal(atomic_load(&x->k.queue_size), 0);
    assert_invariant(x);
}

static void test_shutdown_with_stuck_send(void **state)
{
    fixture *x = *state;

    x->q.num_consumers = 1;
    x->f.stuck = 1;
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 4), SF_OK);
    assert_int_equal(submit(x, 1), SF_OK);
    SF_TEST_WAIT_FOR(fake_calls(&x->f) == 1);
    assert_false(sf_sender_aborting(x->s));
    sf_sender_shutdown(x->s, 50);
    assert_true(sf_sender_aborting(x->s));
    assert_int_equal(fake_calls(&x->f), 1);
    assert_int_equal(failed(&x->k, SF_REASON_SHUTDOWN), 5);
    assert_int_equal(atomic_load(&x->k.queued_spans), 0);
    assert_invariant(x);
}

/* The watchdog's question: a consumer in one send past the exporter's
 * timeout (by more than the slack) is stuck; one waiting for work, or a
 * sender no longer running, is not. */
static void test_stalled_send_is_seen(void **state)
{
    fixture *x = *state;
    char why[256] = "";

    x->q.num_consumers = 1;
    x->f.stuck = 1;
    make_sender(x);
    sf_sender_set_send_timeout(x->s, 20);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_false(sf_sender_stalled(0, why, sizeof(why)));      /* waiting for work */
    assert_int_equal(submit(x, 3), SF_OK);
    SF_TEST_WAIT_FOR(fake_calls(&x->f) == 1);
    /* a slack far above any run's length: not stuck yet, whatever the machine */
    assert_false(sf_sender_stalled(3600 * 1000, why, sizeof(why)));
    SF_TEST_WAIT_FOR(sf_sender_stalled(20, why, sizeof(why)));
    assert_non_null(strstr(why, "exporter otlphttp/test: consumer 0 is "));
    sf_sender_shutdown(x->s, 50);
    assert_false(sf_sender_stalled(0, why, sizeof(why)));      /* not running any more */
    assert_invariant(x);
}

/* A backoff is held to its own wait, not to the send's timeout: a consumer
 * in a 1 h backoff after a 10 ms send is not stuck. (The pause gives a
 * consumer wrongly held to its send's bound time to show as stuck; a
 * correct one is not stuck at any moment of the backoff, however slow the
 * machine.) */
static void test_backoff_is_not_stalled(void **state)
{
    fixture *x = *state;
    char why[256] = "";

    x->q.num_consumers = 1;
    x->f.dflt = SF_RETRY;
    x->r.initial_interval = 3600 * 1000;
    x->r.max_interval = 3600 * 1000;
    x->r.randomization_factor = 0;
    x->r.max_elapsed_time = 0;
    make_sender(x);
    sf_sender_set_send_timeout(x->s, 10);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 2), SF_OK);
    SF_TEST_WAIT_FOR(fake_calls(&x->f) == 1);
    usleep(300 * 1000);
    assert_false(sf_sender_stalled(100, why, sizeof(why)));
    sf_sender_shutdown(x->s, 0);        /* cuts the backoff short */
    assert_int_equal(failed(&x->k, SF_REASON_SHUTDOWN), 2);
    assert_invariant(x);
}

static void test_queue_disabled_sends_on_caller(void **state)
{
    fixture *x = *state;

    x->q.enabled = false;
    x->f.script[0] = SF_OK;
    x->f.script[1] = SF_RETRY;
    x->f.script[2] = SF_PERMANENT;
    x->f.n_script = 3;
    make_sender(x);
    assert_int_equal(sf_sender_workers(x->s), 1);
    assert_int_equal(atomic_load(&x->k.queue_capacity), 0);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 2), SF_OK);
    assert_int_equal(fake_calls(&x->f), 1);
    assert_true(pthread_equal(x->f.threads[0], pthread_self()));
    assert_int_equal(x->f.workers[0], 0);
    /* a refused synchronous send was still attempted: it is counted as
     * failed here and the caller is told whether the client may retry */
    assert_int_equal(submit(x, 3), SF_RETRY);
    assert_int_equal(submit(x, 4), SF_PERMANENT);
    assert_int_equal(fake_calls(&x->f), 3);
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 2);
    assert_int_equal(failed(&x->k, SF_REASON_RETRIES_EXHAUSTED), 3);
    assert_int_equal(failed(&x->k, SF_REASON_PERMANENT_ERROR), 4);
    assert_int_equal(sf_counter_get(&x->k.retries), 0);
    assert_int_equal(atomic_load(&x->k.queued_spans), 0);
    x->submitted_ok += 3 + 4;   /* attempted, hence accounted */
    assert_invariant(x);
    sf_sender_shutdown(x->s, 0);
    assert_int_equal(submit(x, 1), SF_STOPPED);
    assert_int_equal(fake_calls(&x->f), 3);
}

#define SUBMITTERS 4
#define PER_SUBMITTER 150

typedef struct submitter {
    fixture *x;
    uint64_t ok, full;
} submitter;

static void *submit_many(void *arg)
{
    submitter *t = arg;

    for (int i = 0; i < PER_SUBMITTER; i++) {
        size_t spans = (size_t)(i % 7) + 1;
        sf_buf *b = sf_buf_create(1);
        sf_status st;

        b->spans = spans;
        st = sf_sender_submit(t->x->s, b);
        if (st == SF_OK)
            t->ok += spans;
        else if (st == SF_FULL)
            t->full += spans;
        sf_buf_unref(b);
        if (i % 16 == 0)
            usleep(500);
    }
    return NULL;
}

static void test_concurrent_mixed_outcomes(void **state)
{
    fixture *x = *state;
    submitter t[SUBMITTERS];
    pthread_t th[SUBMITTERS];
    uint64_t full = 0, ok_odd;

    x->q.queue_size = 8;
    x->f.odd_permanent = 1;
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    for (int i = 0; i < SUBMITTERS; i++) {
        t[i] = (submitter){ .x = x };
        assert_int_equal(pthread_create(&th[i], NULL, submit_many, &t[i]), 0);
    }
    for (int i = 0; i < SUBMITTERS; i++) {
        pthread_join(th[i], NULL);
        x->submitted_ok += t[i].ok;
        full += t[i].full;
    }
    sf_sender_shutdown(x->s, 10000);
    assert_int_equal(sf_counter_get(&x->k.enqueue_failed_spans), full);
    assert_int_equal(failed(&x->k, SF_REASON_SHUTDOWN), 0);
    assert_int_equal(atomic_load(&x->k.queued_spans), 0);
    assert_int_equal(atomic_load(&x->k.queue_size), 0);
    ok_odd = failed(&x->k, SF_REASON_PERMANENT_ERROR);
    assert_int_equal(sf_counter_get(&x->k.sent_spans) + ok_odd, x->submitted_ok);
    assert_invariant(x);
}

/* Reload: a batch in a 30 s backoff and one queued behind it are kept (not
 * sent, not counted failed), handed to a second sender whose sends succeed,
 * and sent there first, oldest first; the counts move with them. */
static void test_suspend_hands_batches_over(void **state)
{
    fixture *x = *state;
    fake g;
    sf_counters k2;
    sf_sender *s2;
    sf_sender_parcel *p;
    int64_t t0;

    memset(&g, 0, sizeof(g));
    memset(&k2, 0, sizeof(k2));
    pthread_mutex_init(&g.mu, NULL);
    g.dflt = SF_OK;
    x->q.num_consumers = 1;
    x->f.dflt = SF_RETRY;
    x->r.initial_interval = SF_TEST_HOUR_MS;
    x->r.max_interval = SF_TEST_HOUR_MS;
    x->r.max_elapsed_time = 0;
    make_sender(x);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 3), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.retries) == 1);
    assert_int_equal(submit(x, 2), SF_OK);   /* queued behind it */
    t0 = sf_now_ms();
    p = sf_sender_suspend(x->s, 5000);
    assert_true(sf_now_ms() - t0 < SF_TEST_HOUR_MS / 2);  /* the 30-90 min backoff was cut */
    assert_non_null(p);
    assert_int_equal(submit(x, 1), SF_STOPPED);
    assert_int_equal(fake_calls(&x->f), 1);
    assert_int_equal(failed_all(&x->k), 0);
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 0);
    /* still queued as far as this sender's counts go: they add up */
    assert_int_equal(atomic_load(&x->k.queued_spans), 5);
    assert_int_equal(atomic_load(&x->k.queue_size), 0);
    assert_invariant(x);

    s2 = sf_sender_create("otlphttp/test", &x->q, &x->r, fake_send, &g, &k2);
    assert_non_null(s2);
    g.sender = s2;
    sf_sender_adopt(s2, p);
    assert_int_equal(atomic_load(&k2.queued_spans), 5);
    assert_int_equal(atomic_load(&k2.queue_size), 2);
    assert_int_equal(sf_sender_start(s2), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&k2.sent_spans) == 5);
    sf_sender_shutdown(s2, 1000);
    assert_int_equal(fake_calls(&g), 2);
    assert_int_equal(g.tags[0], 3);          /* the older one first */
    assert_int_equal(g.tags[1], 2);
    assert_int_equal(atomic_load(&k2.queued_spans), 0);
    assert_int_equal(atomic_load(&k2.queue_size), 0);
    sf_test_assert_accounted(&k2, 5);
    sf_sender_destroy(s2);
    pthread_mutex_destroy(&g.mu);
}

/* A parcel nobody can send (the new config disables the queue) is counted
 * as dropped at shutdown there, not lost uncounted. */
static void test_adopt_without_queue_counts_drop(void **state)
{
    fixture *x = *state;
    sf_counters k2;
    sf_queue_config q2 = { .present = true, .enabled = false };
    sf_sender *s2;
    sf_sender_parcel *p;

    memset(&k2, 0, sizeof(k2));
    x->q.num_consumers = 1;
    make_sender(x);             /* never started: what is queued stays */
    assert_int_equal(submit(x, 4), SF_OK);
    p = sf_sender_suspend(x->s, 0);
    assert_non_null(p);
    s2 = sf_sender_create("otlphttp/test", &q2, &x->r, fake_send, &x->f, &k2);
    assert_non_null(s2);
    sf_sender_adopt(s2, p);
    assert_int_equal(failed(&k2, SF_REASON_SHUTDOWN), 4);
    assert_int_equal(atomic_load(&k2.queued_spans), 0);
    sf_sender_destroy(s2);
}

static sf_status create_scenario(void *arg)
{
    fixture *x = arg;
    sf_sender *s = sf_sender_create("e", &x->q, &x->r, fake_send, &x->f, &x->k);

    if (s == NULL)
        return SF_ENOMEM;
    sf_sender_destroy(s);
    return SF_OK;
}

static void test_create_survives_allocation_failure(void **state)
{
    const sf_torture t = { .name = "sender create", .run = create_scenario, .arg = *state,
                           .sticky = true, .expect = SF_ENOMEM };

    assert_true(sf_torture_run(&t) >= 3);
}

/* A sender's whole life with one batch: create, start, submit, drain,
 * destroy. A failure on a consumer thread is absorbed (the batch counts as
 * failed), so a run may succeed; none may leak. */
static sf_status life_scenario(void *arg)
{
    fixture *x = arg;
    sf_sender *s = sf_sender_create("e", &x->q, &x->r, fake_send, &x->f, &x->k);
    sf_status st;
    sf_buf *b;

    if (s == NULL)
        return SF_ENOMEM;
    x->f.sender = s;
    st = sf_sender_start(s);
    if (st == SF_OK && (b = sf_buf_create(8)) == NULL)
        st = SF_ENOMEM;
    else if (st == SF_OK) {
        memset(b->data, 3, 8);
        b->spans = 3;
        st = sf_sender_submit(s, b);
        sf_buf_unref(b);
    }
    sf_sender_shutdown(s, 1000);
    sf_sender_destroy(s);
    x->f.sender = NULL;
    return st;
}

static void test_life_survives_allocation_failure(void **state)
{
    const sf_torture t = { .name = "sender life", .run = life_scenario, .arg = *state,
                           .sticky = true, .may_succeed = true };

    assert_true(sf_torture_run(&t) >= 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_success_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consumer_policy_follows_backlog, setup, teardown),
        cmocka_unit_test_setup_teardown(test_producer_wakes_idle_consumer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consumers_yield_to_receivers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_then_success_no_duplicates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_permanent_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_success_splits_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retries_exhausted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_disabled_first_failure_final, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_honoured, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_capped_by_max_elapsed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_queue_refuses_and_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_shares_between_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_drains_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_interrupts_backoff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_with_stuck_send, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stalled_send_is_seen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backoff_is_not_stalled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_disabled_sends_on_caller, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_mixed_outcomes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_survives_allocation_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_life_survives_allocation_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_suspend_hands_batches_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adopt_without_queue_counts_drop, setup, teardown),
    };

    sf_log_set_level(SF_LOG_OFF);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

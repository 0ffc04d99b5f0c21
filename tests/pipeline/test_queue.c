/* tests/pipeline/test_queue.c: the bounded MPMC queue: capacity, refusal
 * when full, FIFO order, close waking a blocked pop, waiting for a length,
 * and many producers and consumers losing or duplicating nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "sf_alloc.h"
#include "sf_queue.h"
#include "tests/sf_torture.h"

static void test_create_refuses_zero_capacity(void **state)
{
    (void)state;
    assert_null(sf_queue_create(0));
}

static void test_capacity_and_full(void **state)
{
    sf_queue *q = sf_queue_create(3);
    int a, b, c, d;
    void *out = NULL;

    (void)state;
    assert_non_null(q);
    assert_int_equal(sf_queue_capacity(q), 3);
    assert_int_equal(sf_queue_push(q, &a), SF_OK);
    assert_int_equal(sf_queue_push(q, &b), SF_OK);
    assert_int_equal(sf_queue_push(q, &c), SF_OK);
    assert_int_equal(sf_queue_len(q), 3);
    assert_int_equal(sf_queue_push(q, &d), SF_FULL);
    assert_int_equal(sf_queue_len(q), 3);
    /* one out, one in again: the ring wraps */
    assert_int_equal(sf_queue_pop(q, 0, &out), SF_OK);
    assert_ptr_equal(out, &a);
    assert_int_equal(sf_queue_push(q, &d), SF_OK);
    assert_int_equal(sf_queue_push(q, &a), SF_FULL);
    sf_queue_destroy(q);
}

/* Sized items: the bound is on their sizes, not their number; the ring
 * grows past its first 64 entries in order; a popped item frees its size;
 * an item larger than the whole capacity is refused. */
static void test_sized_items(void **state)
{
    sf_queue *q = sf_queue_create(1000);
    int v[300];
    void *out = NULL;

    (void)state;
    assert_non_null(q);
    assert_int_equal(sf_queue_push_sized(q, &v[0], 1001), SF_FULL);
    assert_int_equal(sf_queue_push_sized(q, &v[0], 600), SF_OK);
    assert_int_equal(sf_queue_push_sized(q, &v[1], 401), SF_FULL);
    assert_int_equal(sf_queue_push_sized(q, &v[1], 400), SF_OK);
    assert_int_equal(sf_queue_used(q), 1000);
    assert_int_equal(sf_queue_push_sized(q, &v[2], 1), SF_FULL);
    assert_int_equal(sf_queue_pop(q, 0, &out), SF_OK);
    assert_ptr_equal(out, &v[0]);
    assert_int_equal(sf_queue_used(q), 400);
    /* 300 items of 2 with one already in: the ring doubles, order holds */
    for (int i = 2; i < 300; i++)
        assert_int_equal(sf_queue_push_sized(q, &v[i], 2), SF_OK);
    assert_int_equal(sf_queue_len(q), 299);
    assert_int_equal(sf_queue_used(q), 400 + 2 * 298);
    for (int i = 1; i < 300; i++) {
        assert_int_equal(sf_queue_pop(q, 0, &out), SF_OK);
        assert_ptr_equal(out, &v[i]);
    }
    assert_int_equal(sf_queue_used(q), 0);
    sf_queue_destroy(q);
}

static void test_fifo_and_empty(void **state)
{
    sf_queue *q = sf_queue_create(4);
    int v[10];
    void *out = NULL;

    (void)state;
    /* several laps around the ring keep the order */
    for (int lap = 0; lap < 3; lap++) {
        for (int i = 0; i < 4; i++)
            assert_int_equal(sf_queue_push(q, &v[i + lap]), SF_OK);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(sf_queue_pop(q, 0, &out), SF_OK);
            assert_ptr_equal(out, &v[i + lap]);
        }
    }
    out = NULL;
    assert_int_equal(sf_queue_pop(q, 0, &out), SF_RETRY);
    assert_null(out);
    assert_int_equal(sf_queue_pop(q, 20, &out), SF_RETRY);
    assert_null(out);
    sf_queue_destroy(q);
}

static void test_close_keeps_items_then_stops(void **state)
{
    sf_queue *q = sf_queue_create(2);
    int a;
    void *out = NULL;

    (void)state;
    assert_int_equal(sf_queue_push(q, &a), SF_OK);
    sf_queue_close(q);
    sf_queue_close(q);
    assert_int_equal(sf_queue_push(q, &a), SF_STOPPED);
    assert_int_equal(sf_queue_pop(q, -1, &out), SF_OK);
    assert_ptr_equal(out, &a);
    assert_int_equal(sf_queue_pop(q, -1, &out), SF_STOPPED);
    sf_queue_destroy(q);
}

struct popper {
    sf_queue *q;
    _Atomic int entered;
    sf_status st;
};

static void *pop_forever(void *arg)
{
    struct popper *p = arg;
    void *out;

    atomic_store(&p->entered, 1);
    p->st = sf_queue_pop(p->q, -1, &out);
    return NULL;
}

static void test_close_wakes_blocked_pops(void **state)
{
    struct popper p[3];
    pthread_t t[3];
    sf_queue *q = sf_queue_create(1);

    (void)state;
    for (int i = 0; i < 3; i++) {
        p[i].q = q;
        atomic_init(&p[i].entered, 0);
        p[i].st = SF_OK;
        assert_int_equal(pthread_create(&t[i], NULL, pop_forever, &p[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        while (!atomic_load(&p[i].entered))
            usleep(1000);
    }
    usleep(20000);  /* let them block; correctness does not depend on it */
    sf_queue_close(q);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(p[i].st, SF_STOPPED);
    }
    sf_queue_destroy(q);
}

/* wait_len: a waiter for 3 items of a queue of 16 returns once the third
 * is pushed (not at the first or second: it reads the length as it
 * returns), takes nothing, times out with fewer, and close wakes it. */
struct len_waiter {
    sf_queue *q;
    size_t n;
    int64_t timeout_ms;
    _Atomic int entered;
    bool enough;
    size_t len_at_return;
};

static void *wait_len_main(void *arg)
{
    struct len_waiter *w = arg;

    atomic_store(&w->entered, 1);
    w->enough = sf_queue_wait_len(w->q, w->n, w->timeout_ms);
    w->len_at_return = sf_queue_len(w->q);
    return NULL;
}

static void test_wait_len(void **state)
{
    sf_queue *q = sf_queue_create(16);
    struct len_waiter w = { .q = q, .n = 3, .timeout_ms = 3600 * 1000 };
    int items[3] = { 1, 2, 3 };
    pthread_t t;
    void *out;

    (void)state;
    assert_int_equal(pthread_create(&t, NULL, wait_len_main, &w), 0);
    while (!atomic_load(&w.entered))
        usleep(1000);
    for (int i = 0; i < 3; i++) {
        usleep(20000);  /* an early return would read a length below 3 */
        assert_int_equal(sf_queue_push(q, &items[i]), SF_OK);
    }
    pthread_join(t, NULL);
    assert_true(w.enough);
    assert_true(w.len_at_return >= 3);
    assert_int_equal(sf_queue_len(q), 3);       /* nothing taken */

    /* Already there: at once. */
    assert_true(sf_queue_wait_len(q, 2, 3600 * 1000));
    /* Fewer than asked, and nobody pushes: the time runs out. */
    assert_false(sf_queue_wait_len(q, 4, 30));
    for (int i = 0; i < 3; i++)
        assert_int_equal(sf_queue_pop(q, 0, &out), SF_OK);

    /* Close wakes a waiter. */
    w = (struct len_waiter){ .q = q, .n = 2, .timeout_ms = 3600 * 1000 };
    assert_int_equal(pthread_create(&t, NULL, wait_len_main, &w), 0);
    while (!atomic_load(&w.entered))
        usleep(1000);
    sf_queue_close(q);
    pthread_join(t, NULL);
    assert_true(w.enough);
    assert_int_equal(w.len_at_return, 0);
    sf_queue_destroy(q);
}

/* wait_len never waits for more than the queue can hold: a waiter asking
 * for 100 items of a queue of 16 returns once it is a quarter full (the
 * 4th push, not the 3rd), and in a queue sized in units (1000, items of
 * 100) once a quarter of the units are held (the 3rd push). Before, it
 * slept to its deadline while the queue filled and every push was
 * refused. */
static void test_wait_len_capped_by_capacity(void **state)
{
    struct { size_t cap, size, returns_at; } cases[] = { { 16, 1, 4 }, { 1000, 100, 3 }, { 13, 1, 4 }, { 1, 1, 1 } };
    int items[8] = { 0 };

    (void)state;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        sf_queue *q = sf_queue_create(cases[c].cap);
        struct len_waiter w = { .q = q, .n = 100, .timeout_ms = 30000 };
        pthread_t t;
        void *out;

        assert_non_null(q);
        assert_int_equal(pthread_create(&t, NULL, wait_len_main, &w), 0);
        while (!atomic_load(&w.entered))
            usleep(1000);
        for (size_t i = 0; i < cases[c].returns_at; i++) {
            usleep(20000);  /* an early return would read a shorter length */
            assert_int_equal(sf_queue_push_sized(q, &items[i], cases[c].size), SF_OK);
        }
        pthread_join(t, NULL);
        assert_true(w.enough);
        assert_int_equal(w.len_at_return, cases[c].returns_at);
        /* Below a quarter: the time runs out. */
        assert_int_equal(sf_queue_pop(q, 0, &out), SF_OK);
        if (cases[c].cap > 1)
            assert_false(sf_queue_wait_len(q, 100, 30));
        while (sf_queue_pop(q, 0, &out) == SF_OK)
            ;
        sf_queue_destroy(q);
    }
}

/* A reserve lets pushes pass the capacity by that much, no more; once it
 * is taken back, what it let in stays (nothing is lost) and pushes are
 * refused until the queue is below its capacity again. */
static void test_reserve_bounds_the_overflow(void **state)
{
    sf_queue *q = sf_queue_create(4);
    int items[16] = { 0 };
    void *out;
    int n = 0;

    (void)state;
    assert_non_null(q);
    while (sf_queue_push(q, &items[n]) == SF_OK)
        n++;
    assert_int_equal(n, 4);
    sf_queue_set_reserve(q, 5);
    while (sf_queue_push(q, &items[n]) == SF_OK)
        n++;
    assert_int_equal(n, 9);
    assert_int_equal(sf_queue_used(q), 9);
    sf_queue_set_reserve(q, 0);
    assert_int_equal(sf_queue_push(q, &items[n]), SF_FULL);
    for (int i = 0; i < 5; i++)
        assert_int_equal(sf_queue_pop(q, 0, &out), SF_OK);
    assert_int_equal(sf_queue_push(q, &items[n]), SF_FULL);     /* at capacity */
    assert_int_equal(sf_queue_pop(q, 0, &out), SF_OK);
    assert_int_equal(sf_queue_push(q, &items[n]), SF_OK);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sf_queue_pop(q, 0, &out), SF_OK);
        assert_ptr_equal(out, &items[6 + i]);                   /* FIFO throughout */
    }
    sf_queue_destroy(q);
}

#define PRODUCERS 4
#define CONSUMERS 3
#define PER_PRODUCER 5000

struct mpmc {
    sf_queue *q;
    int base;
    _Atomic uint64_t sum, count, full;
};

static int values[PRODUCERS * PER_PRODUCER];

static void *produce(void *arg)
{
    struct mpmc *m = ((struct mpmc **)arg)[0];
    int base = (int)(intptr_t)((void **)arg)[1];

    for (int i = 0; i < PER_PRODUCER; i++) {
        int *v = &values[base + i];

        while (sf_queue_push(m->q, v) == SF_FULL) {
            atomic_fetch_add(&m->full, 1);
            sched_yield();
        }
    }
    return NULL;
}

static void *consume(void *arg)
{
    struct mpmc *m = arg;
    void *out;

    while (sf_queue_pop(m->q, -1, &out) == SF_OK) {
        atomic_fetch_add(&m->sum, (uint64_t)*(int *)out);
        atomic_fetch_add(&m->count, 1);
    }
    return NULL;
}

static void test_many_producers_and_consumers(void **state)
{
    struct mpmc m = { .q = sf_queue_create(16) };
    pthread_t prod[PRODUCERS], cons[CONSUMERS];
    void *args[PRODUCERS][2];
    uint64_t expect = 0;

    (void)state;
    for (int i = 0; i < PRODUCERS * PER_PRODUCER; i++) {
        values[i] = i + 1;
        expect += (uint64_t)(i + 1);
    }
    for (int i = 0; i < CONSUMERS; i++)
        assert_int_equal(pthread_create(&cons[i], NULL, consume, &m), 0);
    for (int i = 0; i < PRODUCERS; i++) {
        args[i][0] = &m;
        args[i][1] = (void *)(intptr_t)(i * PER_PRODUCER);
        assert_int_equal(pthread_create(&prod[i], NULL, produce, args[i]), 0);
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(prod[i], NULL);
    sf_queue_close(m.q);
    for (int i = 0; i < CONSUMERS; i++)
        pthread_join(cons[i], NULL);
    assert_int_equal(atomic_load(&m.count), PRODUCERS * PER_PRODUCER);
    assert_int_equal(atomic_load(&m.sum), expect);
    assert_int_equal(sf_queue_len(m.q), 0);
    sf_queue_destroy(m.q);
}

/* Create, push, pop, close, destroy. */
static sf_status queue_scenario(void *arg)
{
    sf_queue *q = sf_queue_create(8);
    void *out = NULL;
    int a;

    (void)arg;
    if (q == NULL)
        return SF_ENOMEM;
    assert_int_equal(sf_queue_push(q, &a), SF_OK);
    assert_int_equal(sf_queue_pop(q, 0, &out), SF_OK);
    assert_ptr_equal(out, &a);
    sf_queue_close(q);
    sf_queue_destroy(q);
    return SF_OK;
}

static void test_create_survives_allocation_failure(void **state)
{
    const sf_torture t = { .name = "queue", .run = queue_scenario, .sticky = true,
                           .expect = SF_ENOMEM };

    (void)state;
    assert_true(sf_torture_run(&t) >= 1);
}

/* pop_if: a declined head stays first (SF_FULL), an accepted one is taken;
 * an empty queue still times out or reports closed as pop does. */
static bool take_small(void *item, void *arg)
{
    return *(int *)item <= *(int *)arg;
}

static void test_pop_if_declines_without_taking(void **state)
{
    sf_queue *q = sf_queue_create(4);
    int big = 9, small = 1, limit = 5;
    void *out = NULL;

    (void)state;
    assert_non_null(q);
    assert_int_equal(sf_queue_pop_if(q, 0, take_small, &limit, &out), SF_RETRY);
    assert_int_equal(sf_queue_push(q, &big), SF_OK);
    assert_int_equal(sf_queue_push(q, &small), SF_OK);
    assert_int_equal(sf_queue_pop_if(q, 0, take_small, &limit, &out), SF_FULL);
    assert_null(out);
    assert_int_equal(sf_queue_len(q), 2);
    /* the declined item is still the oldest: FIFO order is kept */
    assert_int_equal(sf_queue_pop(q, 0, &out), SF_OK);
    assert_ptr_equal(out, &big);
    assert_int_equal(sf_queue_pop_if(q, 0, take_small, &limit, &out), SF_OK);
    assert_ptr_equal(out, &small);
    assert_int_equal(sf_queue_len(q), 0);
    assert_int_equal(sf_queue_pop_if(q, 10, take_small, &limit, &out), SF_RETRY);
    sf_queue_close(q);
    assert_int_equal(sf_queue_pop_if(q, -1, take_small, &limit, &out), SF_STOPPED);
    sf_queue_destroy(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_refuses_zero_capacity),
        cmocka_unit_test(test_capacity_and_full),
        cmocka_unit_test(test_sized_items),
        cmocka_unit_test(test_fifo_and_empty),
        cmocka_unit_test(test_close_keeps_items_then_stops),
        cmocka_unit_test(test_close_wakes_blocked_pops),
        cmocka_unit_test(test_many_producers_and_consumers),
        cmocka_unit_test(test_pop_if_declines_without_taking),
        cmocka_unit_test(test_wait_len),
        cmocka_unit_test(test_wait_len_capped_by_capacity),
        cmocka_unit_test(test_reserve_bounds_the_overflow),
        cmocka_unit_test(test_create_survives_allocation_failure),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* sf_queue.c: the bounded MPMC queue: a ring of pointers and their sizes
 * under one mutex, one condvar for "not empty or closed" and one for "at
 * least `want` items, a quarter full, or closed" (sf_queue_wait_len). Producers never
 * wait (a full queue is refused), so no "not full" condvar is needed. The
 * bound is on the sizes; the ring doubles when it is full of entries, so a
 * queue sized in bytes does not hold a pointer per byte up front.
 * The condvar is on CLOCK_MONOTONIC (sf_time.h) so a wall-clock jump cannot
 * stretch or cut a pop timeout. */
#include "sf_queue.h"
#include "sf_alloc.h"
#include "sf_time.h"

#include <pthread.h>
#include <stdbool.h>

/* The ring's first size: grown by doubling, up to the capacity. */
#define SF_QUEUE_RING_MIN 64

typedef struct slot {
    void *item;
    size_t size;
} slot;

struct sf_queue {
    pthread_mutex_t mu;
    pthread_cond_t nonempty;
    pthread_cond_t enough;      /* enough() (len >= want or a quarter full), or closed */
    size_t want;                /* 0: no one waits on `enough` */
    size_t cap;                 /* bound on the sizes held */
    size_t reserve;             /* more allowed while a gatherer waits (sf_queue_set_reserve) */
    size_t used;                /* sizes held (may pass cap by what the reserve let in) */
    size_t ring, head, len;     /* entries: allocated, first, held */
    bool closed;
    slot *slots;
};

sf_queue *sf_queue_create(size_t capacity)
{
    sf_queue *q;

    if (capacity == 0)
        return NULL;
    q = sf_calloc(1, sizeof(*q));
    if (q == NULL)
        return NULL;
    q->cap = capacity;
    q->ring = capacity < SF_QUEUE_RING_MIN ? capacity : SF_QUEUE_RING_MIN;
    q->slots = sf_calloc(q->ring, sizeof(*q->slots));
    if (q->slots == NULL)
        goto out_free_queue;
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        goto out_free_slots;
    if (sf_cond_init(&q->nonempty) != 0)
        goto out_destroy_mutex;
    if (sf_cond_init(&q->enough) != 0)
        goto out_destroy_nonempty;
    return q;

out_destroy_nonempty:
    pthread_cond_destroy(&q->nonempty);
out_destroy_mutex:
    pthread_mutex_destroy(&q->mu);
out_free_slots:
    sf_free(q->slots);
out_free_queue:
    sf_free(q);
    return NULL;
}

void sf_queue_destroy(sf_queue *q)
{
    if (q == NULL)
        return;
    pthread_cond_destroy(&q->enough);
    pthread_cond_destroy(&q->nonempty);
    pthread_mutex_destroy(&q->mu);
    sf_free(q->slots);
    sf_free(q);
}

/* Under the lock: double the ring (entries unwrapped to the start); false
 * on no memory. */
static bool grow(sf_queue *q)
{
    size_t most = q->cap + q->reserve;
    size_t ring = q->ring > most / 2 ? most : q->ring * 2;
    slot *s;

    if (ring <= q->ring)
        return false;
    s = sf_calloc(ring, sizeof(*s));
    if (s == NULL)
        return false;
    for (size_t i = 0; i < q->len; i++)
        s[i] = q->slots[(q->head + i) % q->ring];
    sf_free(q->slots);
    q->slots = s;
    q->ring = ring;
    q->head = 0;
    return true;
}

/* Under the lock: is what sf_queue_wait_len waits for there? `want`
 * items, or a quarter of the capacity in use, whichever comes first: a
 * waiter asking for more than the queue can hold (a merge's min_size of
 * 8192 spans over a queue of 32 requests of 8) would otherwise sleep while
 * the queue fills and every push is refused. A quarter, not a half, leaves
 * the waiter three quarters of the queue's time to be scheduled: at 2,500
 * calls/s a queue of 32 fills in 13 ms, and a wake-up beside a busy engine
 * can take several. */
static bool enough(const sf_queue *q)
{
    return q->len >= q->want || q->used >= (q->cap + 3) / 4;
}

sf_status sf_queue_push_sized(sf_queue *q, void *item, size_t size)
{
    sf_status st = SF_OK;

    if (size == 0)
        size = 1;
    pthread_mutex_lock(&q->mu);
    if (q->closed) {
        st = SF_STOPPED;
    } else if (q->used > q->cap + q->reserve || size > q->cap + q->reserve - q->used ||
               (q->len == q->ring && !grow(q))) {
        st = SF_FULL;
    } else {
        q->slots[(q->head + q->len) % q->ring] = (slot){ .item = item, .size = size };
        q->len++;
        q->used += size;
        pthread_cond_signal(&q->nonempty);
        if (q->want > 0 && enough(q))
            pthread_cond_signal(&q->enough);
    }
    pthread_mutex_unlock(&q->mu);
    return st;
}

sf_status sf_queue_push(sf_queue *q, void *item)
{
    return sf_queue_push_sized(q, item, 1);
}

sf_status sf_queue_pop(sf_queue *q, int64_t timeout_ms, void **out)
{
    return sf_queue_pop_if(q, timeout_ms, NULL, NULL, out);
}

sf_status sf_queue_pop_if(sf_queue *q, int64_t timeout_ms, bool (*take)(void *item, void *arg),
                          void *arg, void **out)
{
    int64_t deadline = timeout_ms > 0 ? sf_deadline_ms(timeout_ms) : 0;
    sf_status st = SF_OK;

    pthread_mutex_lock(&q->mu);
    while (q->len == 0 && !q->closed) {
        if (timeout_ms == 0)
            break;
        if (timeout_ms < 0) {
            pthread_cond_wait(&q->nonempty, &q->mu);
        } else if (!sf_cond_wait_until(&q->nonempty, &q->mu, deadline)) {
            break;
        }
    }
    if (q->len > 0 && take != NULL && !take(q->slots[q->head].item, arg)) {
        st = SF_FULL;
    } else if (q->len > 0) {
        *out = q->slots[q->head].item;
        q->used -= q->slots[q->head].size;
        q->slots[q->head] = (slot){ 0 };
        q->head = (q->head + 1) % q->ring;
        q->len--;
    } else {
        st = q->closed ? SF_STOPPED : SF_RETRY;
    }
    pthread_mutex_unlock(&q->mu);
    return st;
}

bool sf_queue_wait_len(sf_queue *q, size_t n, int64_t timeout_ms)
{
    int64_t deadline = sf_deadline_ms(timeout_ms);
    bool done;

    pthread_mutex_lock(&q->mu);
    q->want = n > 0 ? n : 1;
    while (!enough(q) && !q->closed) {
        if (!sf_cond_wait_until(&q->enough, &q->mu, deadline))
            break;
    }
    done = enough(q) || q->closed;
    q->want = 0;
    pthread_mutex_unlock(&q->mu);
    return done;
}

void sf_queue_set_reserve(sf_queue *q, size_t reserve)
{
    pthread_mutex_lock(&q->mu);
    q->reserve = reserve <= SIZE_MAX - q->cap ? reserve : SIZE_MAX - q->cap;
    pthread_mutex_unlock(&q->mu);
}

void sf_queue_close(sf_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->nonempty);
    pthread_cond_broadcast(&q->enough);
    pthread_mutex_unlock(&q->mu);
}

/* One of the queue's counts, read under its lock. */
static size_t read_locked(sf_queue *q, const size_t *count)
{
    size_t n;

    pthread_mutex_lock(&q->mu);
    n = *count;
    pthread_mutex_unlock(&q->mu);
    return n;
}

size_t sf_queue_len(sf_queue *q)
{
    return read_locked(q, &q->len);
}

size_t sf_queue_used(sf_queue *q)
{
    return read_locked(q, &q->used);
}

size_t sf_queue_capacity(const sf_queue *q)
{
    return q->cap;
}

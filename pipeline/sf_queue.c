/* sf_queue.c: the bounded MPMC queue: a ring of pointers under one mutex,
 * one condvar for "not empty or closed". Producers never wait (a full queue
 * is refused), so no "not full" condvar is needed.
 * The condvar is on CLOCK_MONOTONIC (sf_time.h) so a wall-clock jump cannot
 * stretch or cut a pop timeout. */
#include "sf_queue.h"
#include "sf_alloc.h"
#include "sf_time.h"

#include <pthread.h>
#include <stdbool.h>

struct sf_queue {
    pthread_mutex_t mu;
    pthread_cond_t nonempty;
    size_t cap, head, len;
    bool closed;
    void *items[];
};

sf_queue *sf_queue_create(size_t capacity)
{
    sf_queue *q;

    if (capacity == 0 || capacity > (SIZE_MAX - sizeof(*q)) / sizeof(void *))
        return NULL;
    q = sf_calloc(1, sizeof(*q) + capacity * sizeof(void *));
    if (q == NULL)
        return NULL;
    q->cap = capacity;
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        goto out_free_queue;
    if (sf_cond_init(&q->nonempty) != 0)
        goto out_destroy_mutex;
    return q;

out_destroy_mutex:
    pthread_mutex_destroy(&q->mu);
out_free_queue:
    sf_free(q);
    return NULL;
}

void sf_queue_destroy(sf_queue *q)
{
    if (q == NULL)
        return;
    pthread_cond_destroy(&q->nonempty);
    pthread_mutex_destroy(&q->mu);
    sf_free(q);
}

sf_status sf_queue_push(sf_queue *q, void *item)
{
    sf_status st = SF_OK;

    pthread_mutex_lock(&q->mu);
    if (q->closed) {
        st = SF_STOPPED;
    } else if (q->len == q->cap) {
        st = SF_FULL;
    } else {
        q->items[(q->head + q->len) % q->cap] = item;
        q->len++;
        pthread_cond_signal(&q->nonempty);
    }
    pthread_mutex_unlock(&q->mu);
    return st;
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
    if (q->len > 0 && take != NULL && !take(q->items[q->head], arg)) {
        st = SF_FULL;
    } else if (q->len > 0) {
        *out = q->items[q->head];
        q->items[q->head] = NULL;
        q->head = (q->head + 1) % q->cap;
        q->len--;
    } else {
        st = q->closed ? SF_STOPPED : SF_RETRY;
    }
    pthread_mutex_unlock(&q->mu);
    return st;
}

void sf_queue_close(sf_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->nonempty);
    pthread_mutex_unlock(&q->mu);
}

size_t sf_queue_len(sf_queue *q)
{
    size_t n;

    pthread_mutex_lock(&q->mu);
    n = q->len;
    pthread_mutex_unlock(&q->mu);
    return n;
}

size_t sf_queue_capacity(const sf_queue *q)
{
    return q->cap;
}

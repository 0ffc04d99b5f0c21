/* sf_queue.h: a bounded multi-producer, multi-consumer FIFO of pointers.
 * Bounded at creation, in units the caller chooses (items, spans, bytes):
 * each item is pushed with its size in those units, and the sizes held
 * never pass the capacity. Push never blocks and says SF_FULL; pop waits
 * with a timeout; close wakes every waiter. The queue never owns what the
 * items point at: whoever pops an item owns it. */
#ifndef SF_QUEUE_H
#define SF_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_status.h"

typedef struct sf_queue sf_queue;

/* A queue whose items' sizes add up to at most `capacity` (>= 1); NULL on
 * no memory or a zero capacity. Its ring of pointers grows as items come
 * (never past `capacity` entries: every size is >= 1). */
sf_queue *sf_queue_create(size_t capacity);
/* Free the queue. Items still in it are not touched: pop them first. No
 * thread may be waiting in sf_queue_pop. NULL ok. */
void sf_queue_destroy(sf_queue *q);

/* Append `item` without blocking. On SF_OK the queue holds the pointer;
 * SF_FULL when at capacity, SF_STOPPED after sf_queue_close (the caller
 * keeps `item` on error). */
sf_status sf_queue_push(sf_queue *q, void *item);
/* The same for an item of `size` units (>= 1): SF_FULL also when the ring
 * cannot grow for want of memory, and for an item larger than the whole
 * capacity. */
sf_status sf_queue_push_sized(sf_queue *q, void *item, size_t size);
/* Take the oldest item into *out, waiting up to `timeout_ms` (0: do not
 * wait, < 0: wait until an item arrives or the queue is closed). SF_OK with
 * *out set; SF_RETRY when the time ran out; SF_STOPPED when the queue is
 * closed and empty (items pushed before close are still handed out). */
sf_status sf_queue_pop(sf_queue *q, int64_t timeout_ms, void **out);
/* Like sf_queue_pop, but take the oldest item only if `take(item, arg)`
 * says so, decided under the queue lock (so no other consumer can slip in
 * between the look and the take). SF_FULL when the oldest item was declined:
 * it stays first in the queue. `take` must not call into the queue. */
sf_status sf_queue_pop_if(sf_queue *q, int64_t timeout_ms, bool (*take)(void *item, void *arg),
                          void *arg, void **out);
/* Wait until the queue holds at least `n` items (n >= 1) or is a quarter
 * full (sizes held >= a quarter of the capacity, rounded up), is closed, or
 * `timeout_ms` (> 0) has passed; take nothing. true when one of the first
 * three holds. For a consumer that gathers many items into one request:
 * pushes below n do not wake it, where each would wake a pop (a futex
 * wake and a context switch per item), yet it never waits for more than
 * the queue can hold while pushes are refused. One such waiter at a time. */
bool sf_queue_wait_len(sf_queue *q, size_t n, int64_t timeout_ms);
/* Room beyond the capacity, in the queue's units, that pushes may use
 * until it is set again (0: none): granted by a consumer that gathers
 * items into one request while it waits for them, for what it will take
 * (its request's room). The bound is then capacity + reserve, so a burst
 * that comes while the gatherer waits to be scheduled is held, not
 * refused. Items let in by a larger reserve stay counted after it shrinks:
 * the queue may hold more than capacity + reserve until they are taken
 * (pushes are refused until it is below again). */
void sf_queue_set_reserve(sf_queue *q, size_t reserve);
/* Refuse further pushes and wake every waiting pop. Idempotent. */
void sf_queue_close(sf_queue *q);

/* Items in the queue now, and their sizes added up. */
size_t sf_queue_len(sf_queue *q);
size_t sf_queue_used(sf_queue *q);
size_t sf_queue_capacity(const sf_queue *q);

#endif

/* sf_sender.c: the sending queue and retry engine behind every network
 * exporter (sf_sender.h): a bounded sf_queue of encoded batches, consumer
 * threads, exponential backoff, and the counting that makes every span end
 * as sent or send-failed with a reason.
 *
 * DESIGN
 * Threads: sf_sender_start spawns `num_consumers` consumers. Each owns its
 *   loop: pop a batch (blocking), call send() with its own worker index,
 *   wait out a backoff and call again until the batch is done. Producers
 *   (receiver threads, through the exporter's consume) only push; nothing
 *   else is shared with the consumers but the queue, the counters
 *   (relaxed atomics) and the shutdown state under `mu`.
 * Backoff waits are timed waits on `abort_cv`, so shutdown cuts them short:
 *   SIGTERM never waits out a 30 s backoff.
 * Shutdown: close the queue (submit says SF_STOPPED, consumers drain what is
 *   left and exit), wait for the consumers up to the drain deadline, then
 *   set `aborting` and wake every backoff: a batch not yet sent is dropped
 *   and counted with reason shutdown; a send already in flight ends when the
 *   exporter's own timeout does (or earlier if it polls sf_sender_aborting).
 * Sizes: the queue is bounded in the sizer's units (requests, spans or
 *   encoded bytes: sf_queue_push_sized), and so is the queue_size gauge.
 * Merging without a batch processor (sending_queue.batch, on by default):
 *   the gatherer takes every batch already queued that fits, and waits for
 *   more (to min_size, flush_timeout at most) only while the exporter is
 *   busy: another consumer delivering (`in_flight`), or the last request
 *   formed less than flush_timeout ago (`last_sent_ms`). An idle exporter
 *   sends a lone batch at once; a busy one, or one behind a slow gateway,
 *   merges what arrives meanwhile. The receiver was answered when the
 *   batch was queued. While it waits the gatherer sleeps until enough
 *   batches for min_size are queued, or the queue is a quarter full, whichever
 *   comes first (sf_queue_wait_len), not once per batch: at 1,000 calls/s
 *   a wake-up per call cost a futex wake in the receiver and two context
 *   switches. The quarter-full bound is what keeps a min_size larger than
 *   the queue from refusing calls: a gatherer that waited for 8192 spans
 *   of 8-span batches over a queue of 32 requests slept to flush_timeout
 *   while the full queue refused 93 % of the calls (issue 36).
 * Batching (sf_sender_set_batching): a consumer gathers several queued
 *   batches into one request before delivering it. Gathering is serialised
 *   by `gather_mu`, so there is one gatherer at a time, as upstream has one
 *   batcher, while the others send: batches are not spread over consumers
 *   that each wait out the timeout. The next batch is taken only if it fits
 *   (sf_queue_pop_if decides under the queue lock), so FIFO order holds.
 *   Closing the queue ends a gather at once: shutdown drains, merged or not.
 *   The parts stay counted in queued_spans until the merged request is sent
 *   or failed; if the merged buffer cannot be allocated the parts are sent
 *   one by one instead: nothing is lost for want of memory. Each request
 *   formed is counted once for the batch processor (sf_batching.stats:
 *   what ended the gathering, its spans and bytes), never per span.
 * Counting order: queued_spans goes up before a batch becomes visible to a
 *   consumer and down only after sent/send_failed went up, so at any
 *   quiescent point  submitted OK = sent + send_failed + queued_spans.
 *   The decrement is a release and /metrics reads queued_spans (acquire)
 *   before sent and send_failed, so no scrape misses a finished send.
 * Priority: a consumer's work comes in lumps (a merged request of
 *   thousands of spans compressed in one go), the receivers' in small
 *   pieces the engine waits on. Consumers run at SCHED_IDLE while the
 *   queue holds no backlog, as normal threads at nice +5 from a sixteenth
 *   full until it is below a sixty-fourth (sf_thread.h): on a collector
 *   short of CPU the receivers run first and the lump finishes in the
 *   gaps, where the bounded queue absorbs the delay, and a backlog is
 *   still worked off beside a busy engine before calls are refused.
 * Reload (sf_sender_suspend): `parking` makes consumers keep what they
 *   have instead of sending or failing it (a backoff is cut short, a send
 *   in flight finishes); the kept batches and the queue's go to the next
 *   instance (sf_sender_adopt), which counts them queued and sends them
 *   before its own queue. Here they stay counted queued: this sender's
 *   counts still add up until it is destroyed. */
#define _GNU_SOURCE
#include "sf_sender.h"
#include "sf_alloc.h"
#include "sf_log.h"
#include "sf_queue.h"
#include "sf_share.h"
#include "sf_thread.h"
#include "sf_time.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct sf_consumer {
    struct sf_sender *sender;
    unsigned index;
    pthread_t thread;
    /* sf_now_ms() by which the send or backoff this consumer is in will
     * be over (0: waiting for work): sf_sender_stalled reads it */
    _Atomic int64_t due_ms;
    sf_buf **parts;             /* batches gathered for one request; `single` */
    size_t max_parts;           /*   when not batching, else sf_calloc'd and grown */
    sf_buf *single;
    bool urgent;                /* working off a backlog: not at SCHED_IDLE (consumer_mind_backlog) */
    sf_lumps lumps;             /* its scheduling, under the sender's `mu` (sf_thread.h) */
    bool pressed;               /* the queue filled to a quarter while it gathered (take_parts) */
} sf_consumer;

struct sf_sender {
    char *id;
    sf_queue_config q;
    sf_retry_config r;
    sf_send_fn send;
    void *exporter;
    sf_counters *counters;
    sf_queue *queue;            /* NULL with the queue disabled */
    sf_share *share;            /* the queue's room by client; with `queue` */
    unsigned n_workers;
    unsigned n_started;
    sf_consumer *consumers;
    pthread_mutex_t mu;         /* guards live, the consumers' lumps and the waits below */
    _Atomic unsigned idle_consumers;    /* consumers at SCHED_IDLE (wake_consumers) */
    pthread_cond_t abort_cv;    /* signalled when `aborting` is set */
    pthread_cond_t done_cv;     /* signalled when a consumer exits */
    unsigned live;              /* consumers still running */
    _Atomic bool stopping;      /* shutdown began: refuse submits */
    _Atomic bool aborting;      /* drain deadline passed: no more sends */
    pthread_mutex_t sync_mu;    /* queue disabled: callers take turns on worker 0 */
    bool batching;              /* set before start, read-only after */
    sf_batching batch;          /* sizes in `merge_sizer` units */
    int merge_sizer;            /* sf_sizer of batch's sizes */
    bool merge_in_flight;       /* sending_queue.batch: wait only while exports are in flight */
    _Atomic unsigned in_flight; /* consumers delivering (sending or in a backoff) */
    _Atomic int64_t last_sent_ms;   /* when the last request left the gatherer (sf_now_ms) */
    pthread_mutex_t gather_mu;  /* one consumer gathers at a time */
    /* merged requests' buffers between requests, the last given back on
     * top (under `mu`; at most one per consumer) */
    sf_buf **merge_idle;
    size_t n_merge_idle;
    /* reload (sf_sender_suspend / sf_sender_adopt), under `mu` */
    _Atomic bool parking;       /* suspending: batches are kept, not sent or failed */
    sf_buf **parked;            /* kept so far (one reference each) */
    size_t n_parked, cap_parked;
    sf_sender_parcel *adopted;  /* from the previous instance: sent before the queue */
    size_t next_adopted;
    int64_t send_timeout_ms;    /* the longest one send may take (0: not known) */
    /* the running senders (watch_mu): from start until shutdown or suspend */
    struct sf_sender *watch_prev, *watch_next;
    bool watched;
};

/* ---- the watchdog's view ---------------------------------------------------
 * Every running sender is on one list, so that the thread that feeds
 * systemd's watchdog can ask whether a consumer is stuck: in one send past
 * the exporter's timeout, or in one backoff past its wait, by more than a
 * slack. A consumer waiting for work is never stuck. Intrusive: no
 * allocation, so start cannot fail for it. */
#define SEND_BOUND_UNKNOWN_MS (5 * 60 * 1000)   /* a send whose exporter gave no timeout */

static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sf_sender *watch_head;

static void watch_add(struct sf_sender *s)
{
    pthread_mutex_lock(&watch_mu);
    if (!s->watched) {
        s->watch_prev = NULL;
        s->watch_next = watch_head;
        if (watch_head != NULL)
            watch_head->watch_prev = s;
        watch_head = s;
        s->watched = true;
    }
    pthread_mutex_unlock(&watch_mu);
}

static void watch_remove(struct sf_sender *s)
{
    pthread_mutex_lock(&watch_mu);
    if (s->watched) {
        if (s->watch_prev != NULL)
            s->watch_prev->watch_next = s->watch_next;
        else
            watch_head = s->watch_next;
        if (s->watch_next != NULL)
            s->watch_next->watch_prev = s->watch_prev;
        s->watched = false;
    }
    pthread_mutex_unlock(&watch_mu);
}

struct sf_sender_parcel {
    size_t n;
    sf_buf **bufs;
    uint64_t spans;
};

/* ---- jitter --------------------------------------------------------------- */

/* xorshift64*: jitter only needs to spread consumers apart, not be secret. */
static double rand_unit(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) / (double)(1ULL << 53);
}

/* ---- counting --------------------------------------------------------------- */

/* What `buf` counts for in the queue, in `sizer` units (never 0). */
static size_t size_in(int sizer, const sf_buf *buf)
{
    size_t n = sizer == SF_SIZER_ITEMS ? buf->spans : sizer == SF_SIZER_BYTES ? buf->len : 1;

    return n > 0 ? n : 1;
}

/* A batch left the queue (the otelcol_exporter_queue_size gauge, in the
 * queue's sizer units). */
static void count_dequeued(sf_sender *s, const sf_buf *buf)
{
    size_t size = size_in(s->q.sizer, buf);

    atomic_fetch_sub_explicit(&s->counters->queue_size, (int64_t)size, memory_order_relaxed);
    sf_share_give(s->share, buf->client, size);
}

static void finish_sent(sf_sender *s, const sf_buf *buf, int64_t rejected)
{
    uint64_t n = buf->spans;

    if (rejected < 0)
        rejected = 0;
    if ((uint64_t)rejected > n)
        rejected = (int64_t)n;
    sf_count(&s->counters->sent_spans, n - (uint64_t)rejected);
    if (rejected > 0)
        sf_count(&s->counters->send_failed_spans[SF_REASON_PERMANENT_ERROR], (uint64_t)rejected);
    atomic_fetch_sub_explicit(&s->counters->queued_spans, (int64_t)n, memory_order_release);
}

static void finish_failed(sf_sender *s, const sf_buf *buf, sf_reason reason)
{
    sf_count(&s->counters->send_failed_spans[reason], buf->spans);
    atomic_fetch_sub_explicit(&s->counters->queued_spans, (int64_t)buf->spans,
                              memory_order_release);
}

/* ---- reload: keeping batches --------------------------------------------- */

/* Suspending: keep `buf` for the next instance (takes a reference). False
 * when there is no memory to keep it: the caller fails it as at shutdown. */
static bool park(sf_sender *s, sf_buf *buf)
{
    bool ok = true;

    pthread_mutex_lock(&s->mu);
    if (s->n_parked == s->cap_parked) {
        size_t cap = s->cap_parked ? s->cap_parked * 2 : 64;
        sf_buf **p = sf_realloc(s->parked, cap * sizeof(*p));

        if (p == NULL) {
            ok = false;
        } else {
            s->parked = p;
            s->cap_parked = cap;
        }
    }
    if (ok) {
        sf_buf_ref(buf);
        s->parked[s->n_parked++] = buf;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* The next batch handed over by the previous instance, or NULL. */
static sf_buf *take_adopted(sf_sender *s)
{
    sf_buf *buf = NULL;

    pthread_mutex_lock(&s->mu);
    if (s->adopted != NULL && s->next_adopted < s->adopted->n) {
        buf = s->adopted->bufs[s->next_adopted];
        s->adopted->bufs[s->next_adopted++] = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (buf != NULL)
        count_dequeued(s, buf);
    return buf;
}

/* ---- the retry loop ------------------------------------------------------ */

/* Wait `ms` unless shutdown aborts first; false when aborted. */
static bool backoff_wait(sf_sender *s, int64_t ms)
{
    int64_t until = sf_deadline_ms(ms);
    bool aborted;

    pthread_mutex_lock(&s->mu);
    while (!atomic_load(&s->aborting) && !atomic_load(&s->parking)) {
        if (!sf_cond_wait_until(&s->abort_cv, &s->mu, until))
            break;
    }
    aborted = atomic_load(&s->aborting);
    pthread_mutex_unlock(&s->mu);
    return !aborted;
}

/* The consumer `worker` starts a send or a backoff that will be over in
 * `ms` (its due time for the watchdog), or is done with it (ms < 0). */
static void phase(sf_sender *s, unsigned worker, int64_t ms)
{
    if (s->queue == NULL || worker >= s->n_workers)
        return;     /* synchronous sends: the caller's thread, not watched */
    atomic_store_explicit(&s->consumers[worker].due_ms, ms < 0 ? 0 : sf_now_ms() + ms,
                          memory_order_relaxed);
}

bool sf_sender_stalled(int64_t slack_ms, char *why, size_t size)
{
    int64_t now = sf_now_ms();
    bool stalled = false;

    pthread_mutex_lock(&watch_mu);
    for (sf_sender *s = watch_head; s != NULL && !stalled; s = s->watch_next) {
        for (unsigned i = 0; i < s->n_started && !stalled; i++) {
            int64_t due = atomic_load_explicit(&s->consumers[i].due_ms, memory_order_relaxed);

            if (due != 0 && now > due + slack_ms) {
                snprintf(why, size, "exporter %s: consumer %u is %" PRId64 " ms past the end "
                         "of its send or backoff", s->id, i, now - due);
                stalled = true;
            }
        }
    }
    pthread_mutex_unlock(&watch_mu);
    return stalled;
}

void sf_sender_set_send_timeout(sf_sender *s, int64_t ms)
{
    s->send_timeout_ms = ms;
}

/* Send `buf` until it is sent, refused for good, out of retries or
 * aborted by shutdown; counts the outcome. Suspending (a reload), a batch
 * not sent is kept for the next instance instead (still counted queued). */
static void deliver(sf_sender *s, unsigned worker, uint64_t *rng, sf_buf *buf)
{
    const sf_retry_config *r = &s->r;
    int64_t start = sf_now_ms();
    double interval = (double)r->initial_interval;
    unsigned attempts = 0;
    sf_send_result res;

    for (;;) {
        int64_t wait, elapsed;
        bool ok;

        if (atomic_load(&s->parking) && park(s, buf))
            return;
        if (atomic_load(&s->aborting)) {
            finish_failed(s, buf, SF_REASON_SHUTDOWN);
            return;
        }
        memset(&res, 0, sizeof(res));
        phase(s, worker, s->send_timeout_ms > 0 ? s->send_timeout_ms : SEND_BOUND_UNKNOWN_MS);
        s->send(s->exporter, worker, buf, &res);
        phase(s, worker, -1);
        attempts++;
        res.detail[sizeof(res.detail) - 1] = '\0';
        if (res.status == SF_OK) {
            finish_sent(s, buf, res.rejected_spans);
            return;
        }
        sf_failure_note(&s->counters->failures,
                        res.detail[0] ? res.detail : sf_status_str(res.status));
        if (!sf_status_retryable(res.status)) {
            sf_error("exporter %s: dropping %zu spans: %s (permanent error)", s->id, buf->spans,
                     res.detail[0] ? res.detail : sf_status_str(res.status));
            finish_failed(s, buf, SF_REASON_PERMANENT_ERROR);
            return;
        }
        if (atomic_load(&s->parking) && park(s, buf))
            return;
        if (atomic_load(&s->aborting)) {
            finish_failed(s, buf, SF_REASON_SHUTDOWN);
            return;
        }
        elapsed = sf_now_ms() - start;
        if (res.retry_after_ms > 0) {
            /* The server's hint replaces the computed interval, but never
             * outlives max_elapsed_time: one last attempt at the limit. */
            wait = res.retry_after_ms;
            if (r->max_elapsed_time > 0 && wait > r->max_elapsed_time - elapsed)
                wait = r->max_elapsed_time - elapsed;
        } else {
            double delta = r->randomization_factor * interval;

            wait = (int64_t)(interval - delta + 2.0 * delta * rand_unit(rng));
            if (wait > r->max_interval)
                wait = r->max_interval;
            if (wait < 1)
                wait = 1;
            if (r->max_elapsed_time > 0 && elapsed + wait > r->max_elapsed_time)
                wait = 0;
        }
        if (!r->enabled || wait <= 0) {
            sf_error("exporter %s: dropping %zu spans after %u attempts in %" PRId64
                     " ms: %s (retries exhausted)", s->id, buf->spans, attempts, elapsed,
                     res.detail[0] ? res.detail : sf_status_str(res.status));
            finish_failed(s, buf, SF_REASON_RETRIES_EXHAUSTED);
            return;
        }
        interval *= r->multiplier;
        if (interval > (double)r->max_interval)
            interval = (double)r->max_interval;
        sf_count(&s->counters->retries, 1);
        sf_debug("exporter %s: send failed (%s), retry %u in %" PRId64 " ms", s->id,
                 res.detail[0] ? res.detail : sf_status_str(res.status), attempts, wait);
        phase(s, worker, wait);
        ok = backoff_wait(s, wait);
        phase(s, worker, -1);
        if (!ok) {
            if (atomic_load(&s->parking) && park(s, buf))
                return;
            finish_failed(s, buf, SF_REASON_SHUTDOWN);
            return;
        }
    }
}

/* ---- gathering (batching) ------------------------------------------------ */

typedef struct gather_state {
    int sizer;                  /* what min and max count (sf_sizer) */
    uint64_t n, spans, bytes;   /* gathered so far */
    uint64_t max;               /* most, in `sizer` units; 0: none */
} gather_state;

static uint64_t gathered(const gather_state *g)
{
    return g->sizer == SF_SIZER_ITEMS ? g->spans : g->sizer == SF_SIZER_BYTES ? g->bytes : g->n;
}

static void gather_add(gather_state *g, const sf_buf *b)
{
    g->n++;
    g->spans += b->spans;
    g->bytes += b->len;
}

/* Under the queue lock: may the next batch join the request? */
static bool fits(void *item, void *arg)
{
    const gather_state *g = arg;
    const sf_buf *b = item;
    gather_state after = *g;

    gather_add(&after, b);
    return after.bytes <= SF_SENDER_MERGE_MAX_BYTES && (g->max == 0 || gathered(&after) <= g->max);
}

/* How many more batches would bring the request to `trigger` units, at
 * the size of those gathered so far (at least 1). An estimate: fewer make
 * the gatherer wake early and wait again, more make it wait to the
 * deadline, as upstream's batcher does when min_size is not reached. */
static size_t batches_wanted(const gather_state *g, uint64_t trigger)
{
    const uint64_t have = gathered(g);
    uint64_t per, need;

    if (g->n == 0 || have >= trigger)
        return 1;
    per = have / g->n > 0 ? have / g->n : 1;
    need = (trigger - have + per - 1) / per;
    return need > 0 && need < SIZE_MAX ? (size_t)need : 1;
}

/* The room a waiting gatherer grants the queue beyond its capacity
 * (sf_queue_set_reserve), in the queue's sizer units: what a request can
 * still take, at the size of the batches gathered so far, up to the
 * trigger, the max_size and the merge's byte cap: the one in the making
 * (`next` false), or with `next` the whole room of the next one, granted
 * when a gathering ends, for what comes before the next gatherer runs. So
 * the bound is the queue plus one request in the making, and a burst that
 * comes before a gatherer is scheduled (a busy engine beside the
 * collector, a catch-up after a stall, the hand-over from one gatherer to
 * the next) waits in the queue instead of being refused. */
static size_t gather_reserve(const sf_sender *s, const gather_state *g, uint64_t trigger, bool next)
{
    uint64_t per_bytes, per_spans, per, have, bytes, batches;

    if (g->n == 0)
        return 0;
    per_bytes = g->bytes / g->n > 0 ? g->bytes / g->n : 1;
    per_spans = g->spans / g->n > 0 ? g->spans / g->n : 1;
    per = gathered(g) / g->n > 0 ? gathered(g) / g->n : 1;
    have = next ? 0 : gathered(g);
    bytes = next ? 0 : g->bytes;
    batches = have >= trigger ? 0 : (trigger - have + per - 1) / per;
    if (bytes >= SF_SENDER_MERGE_MAX_BYTES)
        return 0;
    if (batches > (SF_SENDER_MERGE_MAX_BYTES - bytes) / per_bytes)
        batches = (SF_SENDER_MERGE_MAX_BYTES - bytes) / per_bytes;
    if (g->max > 0)
        batches = have >= g->max ? 0 : batches > (g->max - have) / per ? (g->max - have) / per : batches;
    switch (s->q.sizer) {
    case SF_SIZER_ITEMS: return (size_t)(batches * per_spans);
    case SF_SIZER_BYTES: return (size_t)(batches * per_bytes);
    default:             return (size_t)batches;
    }
}

/* Grant the queue `reserve` units past its capacity (gather_reserve), and
 * the clients' shares the same room: a burst the queue holds is not
 * refused for a share of the capacity alone. */
static void grant_reserve(sf_sender *s, size_t reserve)
{
    sf_queue_set_reserve(s->queue, reserve);
    sf_share_set_reserve(s->share, reserve);
}

/* Room for one more part; false when it cannot be had (send what is
 * gathered). */
static bool parts_room(sf_consumer *c, size_t n)
{
    sf_buf **p;

    if (n < c->max_parts)
        return true;
    if (c->parts == &c->single)
        return false;
    p = sf_realloc(c->parts, c->max_parts * 2 * sizeof(*p));
    if (p == NULL)
        return false;
    c->parts = p;
    c->max_parts *= 2;
    return true;
}

static void consumer_urgent(sf_sender *s, sf_consumer *c, bool urgent, bool *woken);

/* Take the next request's batches into c->parts: one, or with batching
 * as many as the settings allow (sf_batching), and say what ended the
 * gathering, as upstream's batch processor counts it (*why): the size
 * (send_batch_size reached, the next batch would pass send_batch_max_size
 * or the byte cap, or no wait is configured: upstream has no timer then),
 * the timeout (also when shutdown closed the queue: upstream flushes then
 * as on a timeout), or none (a batch handed over by a reload, sent alone).
 * SF_OK with *n >= 1; SF_STOPPED once the queue is closed and empty. */
static sf_status take_parts(sf_sender *s, sf_consumer *c, size_t *n, sf_batch_trigger *why)
{
    const sf_batching *b = &s->batch;
    gather_state g = { .sizer = s->merge_sizer,
                       .max = b->send_batch_max_size > 0 ? (uint64_t)b->send_batch_max_size : 0 };
    uint64_t trigger = b->send_batch_size > 0 ? (uint64_t)b->send_batch_size : 0;
    bool wait = trigger > 0 && b->timeout_ms > 0;
    int64_t deadline;
    void *item;
    sf_status st, ended = SF_OK;

    *n = 0;
    *why = SF_BATCH_TRIGGER_NONE;
    if (atomic_load(&s->parking))
        return SF_STOPPED;      /* what is queued is kept for the next instance */
    if ((item = take_adopted(s)) != NULL) {
        c->parts[(*n)++] = item;    /* older than anything queued: first, alone */
        return SF_OK;
    }
    if (s->batching) {
        /* Gathering is cheap (pointers) and the queue waits on it, so a
         * gatherer waits and takes as a normal thread: at SCHED_IDLE
         * beside a busy engine its wake-up came late enough for a small
         * queue (32 requests) to fill and refuse calls. The request it
         * forms is then a lump like any other (consumer_mind_backlog). */
        consumer_urgent(s, c, true, NULL);
        pthread_mutex_lock(&s->gather_mu);
    }
    st = sf_queue_pop(s->queue, -1, &item);
    if (st != SF_OK)
        goto out_unlock;
    count_dequeued(s, item);
    c->parts[(*n)++] = item;
    gather_add(&g, item);
    deadline = sf_now_ms() + b->timeout_ms;
    if (s->batching && s->merge_in_flight) {
        /* Everything already queued that fits, then, under min_size and
         * while the exporter is busy (another export in flight, or one
         * left less than flush_timeout ago: batches keep coming), what
         * comes until the deadline. An idle exporter sends at once. */
        bool busy = atomic_load_explicit(&s->in_flight, memory_order_relaxed) > 0 ||
                    sf_now_ms() - atomic_load_explicit(&s->last_sent_ms, memory_order_relaxed) <
                    b->timeout_ms;

        for (;;) {
            int64_t left;

            if (!parts_room(c, *n))
                break;
            ended = sf_queue_pop_if(s->queue, 0, fits, &g, &item);
            if (ended == SF_OK) {
                count_dequeued(s, item);
                c->parts[(*n)++] = item;
                gather_add(&g, item);
                continue;
            }
            if (ended != SF_RETRY)
                break;          /* closed and empty, or the next does not fit */
            left = wait && busy && gathered(&g) < trigger ? deadline - sf_now_ms() : 0;
            if (left <= 0)
                break;
            /* Sleep until enough batches for min_size are queued, the
             * queue is a quarter full, or the deadline: not one wake-up per
             * batch, and never while the queue refuses. */
            grant_reserve(s, gather_reserve(s, &g, trigger, false));
            (void)sf_queue_wait_len(s->queue, batches_wanted(&g, trigger), left);
            if (4 * sf_queue_used(s->queue) >= sf_queue_capacity(s->queue))
                c->pressed = true;
        }
        /* The next request's room, for what comes before the next
         * gatherer runs, also when this one did not wait (an idle
         * exporter sends at once): before, a collector's first export
         * (its connection to the gateway made) had the bare capacity, the
         * seed's 32 requests, 13 ms of 8-span calls at 20 k spans/s, and
         * e2e/merge_small_queue saw a call refused now and then when the
         * consumers waited for a CPU. But only while another consumer is
         * free to gather: with every one delivering (a slow or dead
         * gateway) the queue's capacity is the bound. */
        grant_reserve(s, atomic_load(&s->in_flight) + 1 < s->n_started ?
                         gather_reserve(s, &g, trigger, true) : 0);
        atomic_store_explicit(&s->last_sent_ms, sf_now_ms(), memory_order_relaxed);
        st = SF_OK;
        goto out_unlock;
    }
    while (s->batching && (trigger == 0 || gathered(&g) < trigger) && parts_room(c, *n)) {
        int64_t left = wait ? deadline - sf_now_ms() : 0;

        /* Past the deadline still take what is already queued: no wait. */
        ended = sf_queue_pop_if(s->queue, left > 0 ? left : 0, fits, &g, &item);
        if (ended != SF_OK)
            break;      /* timed out, closed and empty, or the next does not fit */
        count_dequeued(s, item);
        c->parts[(*n)++] = item;
        gather_add(&g, item);
    }
    *why = !wait || gathered(&g) >= trigger || ended == SF_OK || ended == SF_FULL ?
           SF_BATCH_TRIGGER_SIZE : SF_BATCH_TRIGGER_TIMEOUT;
    st = SF_OK;

out_unlock:
    if (s->batching)
        pthread_mutex_unlock(&s->gather_mu);
    return st;
}

/* Room kept for merged requests: the next MiB up, at least; a fresh
 * buffer of megabytes per request cost a page fault per 4 KiB page and an
 * munmap each time (on the benchmark's VM, 25% of the collector's CPU at
 * 512-span calls: 70 faults per call against 6 without merging). */
#define MERGE_ROOM_STEP ((size_t)1 << 20)

/* Merged requests' buffers are the sender's, not each consumer's: the
 * consumer forming a request takes the one given back last, whose pages
 * are mapped and likely still in cache, so a burst with few exports in
 * flight warms one or two buffers instead of faulting in one per
 * consumer (16 in configs/cvm.yaml, megabytes each, page by page). */
static sf_buf *merge_buf_take(sf_sender *s, size_t len)
{
    sf_buf *m = NULL;

    pthread_mutex_lock(&s->mu);
    if (s->n_merge_idle > 0)
        m = s->merge_idle[--s->n_merge_idle];
    pthread_mutex_unlock(&s->mu);
    if (m != NULL && m->cap < len) {
        sf_buf_unref(m);
        m = NULL;
    }
    if (m == NULL)
        m = sf_buf_create((len + MERGE_ROOM_STEP - 1) / MERGE_ROOM_STEP * MERGE_ROOM_STEP);
    return m;
}

/* After its request: kept for the next one unless a reload's parcel holds
 * it too (then the parcel's reference is the last). */
static void merge_buf_give(sf_sender *s, sf_buf *m)
{
    if (atomic_load(&m->refs) == 1) {
        pthread_mutex_lock(&s->mu);
        if (s->n_merge_idle < s->n_workers) {
            s->merge_idle[s->n_merge_idle++] = m;
            m = NULL;
        }
        pthread_mutex_unlock(&s->mu);
    }
    sf_buf_unref(m);
}

/* One buffer holding c->parts[0..n) back to back (merge_buf_take: give it
 * back with merge_buf_give), or NULL on no memory. */
static sf_buf *merge_parts(sf_sender *s, sf_consumer *c, size_t n)
{
    sf_buf *const *parts = c->parts;
    size_t len = 0, spans = 0, at = 0;
    sf_buf *m;

    for (size_t i = 0; i < n; i++) {
        len += parts[i]->len;
        spans += parts[i]->spans;
    }
    m = merge_buf_take(s, len);
    if (m == NULL)
        return NULL;
    m->len = len;
    for (size_t i = 0; i < n; i++) {
        memcpy(m->data + at, parts[i]->data, parts[i]->len);
        at += parts[i]->len;
    }
    m->spans = spans;
    return m;
}

/* A backlog (a sixteenth of the queue still queued after this request
 * was taken) is worked off as a normal thread until the queue is below a
 * sixty-fourth, then the consumer goes back behind the receivers
 * (sf_thread.h). A merged request takes what has gathered, so the queue
 * is near empty after each take unless exports fall behind. A request
 * whose gathering saw the queue a quarter full (`pressed`) is also
 * worked off as a normal thread: that queue is too small for the
 * calls' rate to absorb a lump's delay (32 requests fill in 13 ms at
 * 2,500 calls/s), and consumers starved at SCHED_IDLE beside busy cores
 * left none to gather, so the queue filled and refused calls. */
#define BACKLOG_URGENT_DIV 16
#define BACKLOG_CALM_DIV 64

static size_t backlog_urgent_at(const sf_sender *s)
{
    size_t cap = sf_queue_capacity(s->queue);

    return cap / BACKLOG_URGENT_DIV > 0 ? cap / BACKLOG_URGENT_DIV : 1;
}

/* The consumer's own change of scheduling; *woken: whether a producer
 * had taken it out of SCHED_IDLE since it last looked. */
static void consumer_urgent(sf_sender *s, sf_consumer *c, bool urgent, bool *woken)
{
    bool was;

    pthread_mutex_lock(&s->mu);
    if (woken != NULL) {
        *woken = c->lumps.woken;
        c->lumps.woken = false;
        urgent = urgent || *woken;
    }
    was = c->lumps.idle;
    sf_thread_lumps_urgent(&c->lumps, urgent);
    if (c->lumps.idle != was)
        atomic_fetch_add_explicit(&s->idle_consumers, c->lumps.idle ? 1u : (unsigned)-1,
                                  memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
}

/* By a producer, after its batch was queued or refused: with a backlog
 * queued, consumers at SCHED_IDLE leave it now. Starved there beside
 * receivers that keep the CPU busy, they never ran to see the backlog
 * themselves, and the queue filled (sf_thread.h). No lock and no system
 * call while none is idle or the queue has no backlog. */
static void wake_consumers(sf_sender *s)
{
    if (atomic_load_explicit(&s->idle_consumers, memory_order_relaxed) == 0 ||
        sf_queue_used(s->queue) < backlog_urgent_at(s))
        return;
    pthread_mutex_lock(&s->mu);
    for (unsigned i = 0; i < s->n_workers; i++)
        if (s->consumers[i].lumps.tid != 0 && sf_thread_lumps_wake(&s->consumers[i].lumps))
            atomic_fetch_sub_explicit(&s->idle_consumers, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
}

static void consumer_mind_backlog(sf_sender *s, sf_consumer *c)
{
    size_t used, cap, urgent_at;
    bool pressed = c->pressed, woken = false;

    if (s->queue == NULL)
        return;
    c->pressed = false;
    used = sf_queue_used(s->queue);
    cap = sf_queue_capacity(s->queue);
    urgent_at = backlog_urgent_at(s);
    if (!c->urgent && (used >= urgent_at || pressed))
        c->urgent = true;
    else if (c->urgent && used < cap / BACKLOG_CALM_DIV)
        c->urgent = false;
    /* woken by a producer: urgent until the queue is calm, as if it had
     * seen the backlog itself */
    consumer_urgent(s, c, c->urgent, &woken);
    c->urgent = c->urgent || woken;
}

static void *consumer_main(void *arg)
{
    sf_consumer *c = arg;
    sf_sender *s = c->sender;
    uint64_t rng = ((uint64_t)(uintptr_t)s ^ (uint64_t)sf_now_ms()) + 0x9E3779B97F4A7C15ULL * (c->index + 1);
    sf_batch_stats *stats = s->batching ? s->batch.stats : NULL;
    sf_batch_trigger why;
    size_t n;

    if (rng == 0)
        rng = 1;
    pthread_mutex_lock(&s->mu);
    sf_thread_lumps_begin(&c->lumps, "sf-export");
    if (c->lumps.idle)
        atomic_fetch_add_explicit(&s->idle_consumers, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
    while (take_parts(s, c, &n, &why) == SF_OK) {
        consumer_mind_backlog(s, c);
        sf_buf *merged = n > 1 ? merge_parts(s, c, n) : NULL;

        /* one request formed: counted once, never per span */
        if (n == 1 || merged != NULL)
            sf_batch_stats_record(stats, why, merged ? merged->spans : c->parts[0]->spans,
                                  merged ? merged->len : c->parts[0]->len);
        if (merged != NULL) {
            /* The parts' spans move to `merged`: queued_spans is unchanged
             * until deliver() counts the merged request's outcome. */
            for (size_t i = 0; i < n; i++)
                sf_buf_unref(c->parts[i]);
            atomic_fetch_add(&s->in_flight, 1);
            deliver(s, c->index, &rng, merged);
            atomic_fetch_sub(&s->in_flight, 1);
            merge_buf_give(s, merged);
            continue;
        }
        if (n > 1)
            sf_warn("exporter %s: no memory to merge %zu batches: sending them one by one",
                    s->id, n);
        for (size_t i = 0; i < n; i++) {
            if (n > 1)
                sf_batch_stats_record(stats, i == 0 ? why : SF_BATCH_TRIGGER_NONE,
                                      c->parts[i]->spans, c->parts[i]->len);
            atomic_fetch_add(&s->in_flight, 1);
            deliver(s, c->index, &rng, c->parts[i]);
            atomic_fetch_sub(&s->in_flight, 1);
            sf_buf_unref(c->parts[i]);
        }
    }
    pthread_mutex_lock(&s->mu);
    if (c->lumps.idle)          /* nobody wakes a thread that is gone */
        atomic_fetch_sub_explicit(&s->idle_consumers, 1, memory_order_relaxed);
    c->lumps.idle = false;
    c->lumps.tid = 0;
    s->live--;
    pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- public ------------------------------------------------------------- */

sf_sender *sf_sender_create(const char *id, const sf_queue_config *q, const sf_retry_config *r,
                            sf_send_fn send, void *exporter, sf_counters *counters)
{
    sf_sender *s;

    s = sf_calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->id = sf_strdup(id ? id : "exporter");
    if (s->id == NULL)
        goto out_free_sender;
    s->q = (q == NULL || (!q->present && q->queue_size == 0)) ? sf_sending_queue_defaults : *q;
    s->r = (r == NULL || (!r->present && r->initial_interval == 0)) ? sf_retry_defaults : *r;
    if (s->q.queue_size < 1)
        s->q.queue_size = sf_sending_queue_defaults.queue_size;
    if (s->q.sizer < SF_SIZER_REQUESTS || s->q.sizer > SF_SIZER_BYTES)
        s->q.sizer = SF_SIZER_REQUESTS;
    if (s->q.num_consumers < 1)
        s->q.num_consumers = 1;
    if (s->r.initial_interval < 1)
        s->r.initial_interval = 1;
    if (s->r.max_interval < s->r.initial_interval)
        s->r.max_interval = s->r.initial_interval;
    if (s->r.multiplier < 1.0)
        s->r.multiplier = 1.0;
    s->send = send;
    s->exporter = exporter;
    s->counters = counters;
    s->n_workers = s->q.enabled ? (unsigned)s->q.num_consumers : 1;

    if (s->q.enabled && s->q.batch.enabled) {
        /* sending_queue.batch: merge while exports are in flight (a batch
         * processor's settings replace these, sf_sender_set_batching) */
        s->batching = true;
        s->merge_in_flight = true;
        s->merge_sizer = s->q.batch.sizer >= SF_SIZER_REQUESTS && s->q.batch.sizer <= SF_SIZER_BYTES ?
                         s->q.batch.sizer : SF_SIZER_ITEMS;
        s->batch = (sf_batching){ .send_batch_size = s->q.batch.min_size > 0 ? s->q.batch.min_size : 0,
                                  .send_batch_max_size = s->q.batch.max_size > 0 ? s->q.batch.max_size : 0,
                                  .timeout_ms = s->q.batch.flush_timeout > 0 ? s->q.batch.flush_timeout : 0 };
    }
    if (s->q.enabled) {
        s->queue = sf_queue_create((size_t)s->q.queue_size);
        if (s->queue == NULL)
            goto out_free_id;
        s->share = sf_share_create((size_t)s->q.queue_size);
        if (s->share == NULL)
            goto out_destroy_queue;
        s->consumers = sf_calloc(s->n_workers, sizeof(*s->consumers));
        if (s->consumers == NULL)
            goto out_destroy_queue;
    }
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        goto out_free_consumers;
    if (pthread_mutex_init(&s->sync_mu, NULL) != 0)
        goto out_destroy_mu;
    if (pthread_mutex_init(&s->gather_mu, NULL) != 0)
        goto out_destroy_sync_mu;
    if (sf_cond_init(&s->abort_cv) != 0)
        goto out_destroy_gather_mu;
    if (sf_cond_init(&s->done_cv) != 0)
        goto out_destroy_abort_cv;
    atomic_store(&counters->queue_capacity, s->q.enabled ? s->q.queue_size : 0);
    counters->share = s->share;
    return s;

out_destroy_abort_cv:
    pthread_cond_destroy(&s->abort_cv);
out_destroy_gather_mu:
    pthread_mutex_destroy(&s->gather_mu);
out_destroy_sync_mu:
    pthread_mutex_destroy(&s->sync_mu);
out_destroy_mu:
    pthread_mutex_destroy(&s->mu);
out_free_consumers:
    sf_free(s->consumers);
out_destroy_queue:
    sf_share_destroy(s->share);
    sf_queue_destroy(s->queue);
out_free_id:
    sf_free(s->id);
out_free_sender:
    sf_free(s);
    return NULL;
}

void sf_sender_set_batching(sf_sender *s, const sf_batching *b)
{
    if (s->n_started > 0 || b == NULL)
        return;
    if (s->queue == NULL) {
        sf_warn("exporter %s: batching needs the sending queue: with it disabled every batch "
                "is sent as it comes", s->id);
        return;
    }
    s->batching = true;
    s->merge_in_flight = false;
    s->merge_sizer = SF_SIZER_ITEMS;
    s->batch.send_batch_size = b->send_batch_size > 0 ? b->send_batch_size : 0;
    s->batch.send_batch_max_size = b->send_batch_max_size > 0 ? b->send_batch_max_size : 0;
    s->batch.timeout_ms = b->timeout_ms > 0 ? b->timeout_ms : 0;
    s->batch.stats = b->stats;
}

/* Each consumer's room for the batches of one request (grown while
 * gathering: a request is never capped by how small its batches were). */
static sf_status alloc_parts(sf_sender *s)
{
    size_t max = s->batching ? 64 : 1;

    if (s->batching) {
        s->merge_idle = sf_calloc(s->n_workers, sizeof(*s->merge_idle));
        if (s->merge_idle == NULL)
            return SF_ENOMEM;
    }

    for (unsigned i = 0; i < s->n_workers; i++) {
        sf_consumer *c = &s->consumers[i];

        c->max_parts = max;
        c->parts = &c->single;
        if (max > 1) {
            c->parts = sf_calloc(max, sizeof(*c->parts));
            if (c->parts == NULL) {
                c->parts = &c->single;
                return SF_ENOMEM;
            }
        }
    }
    return SF_OK;
}

static void free_parts(sf_sender *s)
{
    for (unsigned i = 0; s->consumers != NULL && i < s->n_workers; i++) {
        sf_consumer *c = &s->consumers[i];

        if (c->parts != &c->single)
            sf_free(c->parts);
        c->parts = &c->single;
    }
    while (s->n_merge_idle > 0)
        sf_buf_unref(s->merge_idle[--s->n_merge_idle]);
    sf_free(s->merge_idle);
    s->merge_idle = NULL;
}

sf_status sf_sender_start(sf_sender *s)
{
    if (s->queue == NULL || s->n_started > 0)
        return SF_OK;
    if (alloc_parts(s) != SF_OK) {
        sf_error("exporter %s: no memory for batching buffers", s->id);
        free_parts(s);
        sf_sender_shutdown(s, 0);   /* as after a failed thread start */
        return SF_ENOMEM;
    }
    if (s->merge_in_flight)
        sf_info("exporter %s: merging queued batches while exports are in flight, up to %" PRId64
                " %s or %" PRId64 " ms", s->id, s->batch.send_batch_size,
                s->merge_sizer == SF_SIZER_BYTES ? "bytes" : s->merge_sizer == SF_SIZER_ITEMS ?
                "spans" : "batches", s->batch.timeout_ms);
    else if (s->batching && s->batch.send_batch_max_size > 0)
        sf_info("exporter %s: merging queued batches up to %" PRId64 " spans or %" PRId64
                " ms, at most %" PRId64 " spans per request", s->id, s->batch.send_batch_size,
                s->batch.timeout_ms, s->batch.send_batch_max_size);
    else if (s->batching)
        sf_info("exporter %s: merging queued batches up to %" PRId64 " spans or %" PRId64 " ms",
                s->id, s->batch.send_batch_size, s->batch.timeout_ms);
    for (unsigned i = 0; i < s->n_workers; i++) {
        sf_consumer *c = &s->consumers[i];

        c->sender = s;
        c->index = i;
        pthread_mutex_lock(&s->mu);
        s->live++;
        pthread_mutex_unlock(&s->mu);
        if (pthread_create(&c->thread, NULL, consumer_main, c) != 0) {
            pthread_mutex_lock(&s->mu);
            s->live--;
            pthread_mutex_unlock(&s->mu);
            sf_error("exporter %s: cannot start consumer thread %u of %u", s->id, i + 1,
                     s->n_workers);
            /* The threads already running drain the (still empty) queue
             * and exit at shutdown, like after a normal start. */
            sf_sender_shutdown(s, 0);
            return SF_ENOMEM;
        }
        s->n_started++;
    }
    watch_add(s);
    return SF_OK;
}

/* sf_sender_submit, saying whether a refusal (SF_FULL) was for the
 * client's share of the queue rather than the queue's capacity. */
static sf_status submit(sf_sender *s, sf_buf *buf, bool *over_share)
{
    sf_counters *k = s->counters;
    size_t size;
    sf_status st;

    if (atomic_load(&s->stopping))
        return SF_STOPPED;
    if (s->queue == NULL) {
        sf_send_result res;

        atomic_fetch_add_explicit(&k->queued_spans, (int64_t)buf->spans, memory_order_relaxed);
        memset(&res, 0, sizeof(res));
        pthread_mutex_lock(&s->sync_mu);
        s->send(s->exporter, 0, buf, &res);
        pthread_mutex_unlock(&s->sync_mu);
        res.detail[sizeof(res.detail) - 1] = '\0';
        if (res.status == SF_OK) {
            finish_sent(s, buf, res.rejected_spans);
            return SF_OK;
        }
        sf_failure_note(&k->failures, res.detail[0] ? res.detail : sf_status_str(res.status));
        if (sf_status_retryable(res.status)) {
            sf_warn("exporter %s: send of %zu spans failed: %s (queue disabled, not retried)",
                    s->id, buf->spans, res.detail[0] ? res.detail : sf_status_str(res.status));
            finish_failed(s, buf, SF_REASON_RETRIES_EXHAUSTED);
            return SF_RETRY;
        }
        sf_error("exporter %s: dropping %zu spans: %s (permanent error)", s->id, buf->spans,
                 res.detail[0] ? res.detail : sf_status_str(res.status));
        finish_failed(s, buf, SF_REASON_PERMANENT_ERROR);
        return SF_PERMANENT;
    }

    size = size_in(s->q.sizer, buf);
    if (!sf_share_take(s->share, buf->client, size, sf_queue_used(s->queue))) {
        /* over half full, and this client holds more than its share: it
         * waits for its own batches to drain, the others still get in */
        *over_share = true;
        sf_count(&k->enqueue_failed_spans, buf->spans);
        sf_debug("exporter %s: a client over its share of the sending queue, refusing %zu spans",
                 s->id, buf->spans);
        return SF_FULL;
    }
    sf_buf_ref(buf);
    atomic_fetch_add_explicit(&k->queued_spans, (int64_t)buf->spans, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->queue_size, (int64_t)size, memory_order_relaxed);
    st = sf_queue_push_sized(s->queue, buf, size);
    wake_consumers(s);
    if (st != SF_OK) {
        sf_share_give(s->share, buf->client, size);
        atomic_fetch_sub_explicit(&k->queue_size, (int64_t)size, memory_order_relaxed);
        atomic_fetch_sub_explicit(&k->queued_spans, (int64_t)buf->spans, memory_order_relaxed);
        if (st == SF_FULL) {
            sf_count(&k->enqueue_failed_spans, buf->spans);
            sf_debug("exporter %s: sending queue full, refusing %zu spans", s->id, buf->spans);
        }
        sf_buf_unref(buf);
    }
    return st;
}

sf_status sf_sender_submit(sf_sender *s, sf_buf *buf)
{
    bool over_share = false;

    return submit(s, buf, &over_share);
}

/* Close the queue, give the consumers up to wait_ms to finish what they
 * hold, then abort what is still in flight and join them. */
static void stop_consumers(sf_sender *s, int64_t wait_ms)
{
    int64_t until;

    sf_queue_close(s->queue);
    until = sf_deadline_ms(wait_ms);
    pthread_mutex_lock(&s->mu);
    while (s->live > 0) {
        if (!sf_cond_wait_until(&s->done_cv, &s->mu, until))
            break;
    }
    atomic_store(&s->aborting, true);
    pthread_cond_broadcast(&s->abort_cv);
    pthread_mutex_unlock(&s->mu);
    for (unsigned i = 0; i < s->n_started; i++)
        pthread_join(s->consumers[i].thread, NULL);
    s->n_started = 0;
}

void sf_sender_shutdown(sf_sender *s, int64_t drain_ms)
{
    _Atomic uint64_t *shut = &s->counters->send_failed_spans[SF_REASON_SHUTDOWN];
    uint64_t before;
    void *item;

    watch_remove(s);        /* its consumers stop now: no longer watched */
    if (atomic_exchange(&s->stopping, true))
        return;
    if (s->queue == NULL)
        return;
    before = sf_counter_get(shut);
    stop_consumers(s, drain_ms);
    /* Only when no consumer ever ran (not started) is anything left. */
    while ((item = take_adopted(s)) != NULL) {
        finish_failed(s, item, SF_REASON_SHUTDOWN);
        sf_buf_unref(item);
    }
    while (sf_queue_pop(s->queue, 0, &item) == SF_OK) {
        sf_buf *buf = item;

        count_dequeued(s, buf);
        finish_failed(s, buf, SF_REASON_SHUTDOWN);
        sf_buf_unref(buf);
    }
    if (sf_counter_get(shut) > before)
        sf_warn("exporter %s: dropped %" PRIu64 " spans at shutdown (drain time %" PRId64 " ms)",
                s->id, sf_counter_get(shut) - before, drain_ms);
}

void sf_sender_destroy(sf_sender *s)
{
    if (s == NULL)
        return;
    sf_sender_shutdown(s, 0);
    for (size_t i = 0; i < s->n_parked; i++)
        sf_buf_unref(s->parked[i]);
    sf_free(s->parked);
    sf_sender_parcel_drop(s->adopted, NULL);
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->abort_cv);
    pthread_mutex_destroy(&s->gather_mu);
    pthread_mutex_destroy(&s->sync_mu);
    pthread_mutex_destroy(&s->mu);
    free_parts(s);
    sf_free(s->consumers);
    if (s->counters->share == s->share)
        s->counters->share = NULL;
    sf_share_destroy(s->share);
    sf_queue_destroy(s->queue);
    sf_free(s->id);
    sf_free(s);
}

unsigned sf_sender_workers(const sf_sender *s)
{
    return s->n_workers;
}

size_t sf_sender_idle_merge_buffers(sf_sender *s)
{
    size_t n;

    pthread_mutex_lock(&s->mu);
    n = s->n_merge_idle;
    pthread_mutex_unlock(&s->mu);
    return n;
}

bool sf_sender_aborting(const sf_sender *s)
{
    return atomic_load(&((sf_sender *)s)->aborting);
}

sf_status sf_sender_submit_request(sf_sender *s, sf_request *batch)
{
    sf_buf *buf;
    sf_status st;

    if (batch->spans == 0)
        return SF_OK;           /* nothing to deliver: no empty request */
    st = sf_request_encode(batch, &buf);
    if (st != SF_OK)
        return st;
    st = submit(s, buf, &batch->over_share);
    sf_buf_unref(buf);
    return st;
}

/* ---- reload ---------------------------------------------------------------- */

sf_sender_parcel *sf_sender_suspend(sf_sender *s, int64_t wait_ms)
{
    sf_sender_parcel *p;
    void *item;

    watch_remove(s);
    if (s->queue == NULL || atomic_load(&s->stopping)) {
        sf_sender_shutdown(s, wait_ms);     /* nothing queued to keep */
        return NULL;
    }
    p = sf_calloc(1, sizeof(*p));
    if (p == NULL) {
        sf_sender_shutdown(s, wait_ms);
        return NULL;
    }
    atomic_store(&s->stopping, true);
    /* Consumers take nothing more; those in a backoff or about to send
     * keep their batch; sends in flight end on their own (bounded by the
     * timeout), or at the wait's end as at shutdown. */
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->parking, true);
    pthread_cond_broadcast(&s->abort_cv);
    pthread_mutex_unlock(&s->mu);
    stop_consumers(s, wait_ms);
    /* Oldest first: what was handed over to us, what was in a retry, then
     * the queue in order. (Batches in a retry are older than the queue's.) */
    while ((item = take_adopted(s)) != NULL) {
        if (!park(s, item))
            finish_failed(s, item, SF_REASON_SHUTDOWN);
        sf_buf_unref(item);
    }
    while (sf_queue_pop(s->queue, 0, &item) == SF_OK) {
        count_dequeued(s, item);
        if (!park(s, item))
            finish_failed(s, item, SF_REASON_SHUTDOWN);
        sf_buf_unref(item);
    }
    p->bufs = s->parked;
    p->n = s->n_parked;
    for (size_t i = 0; i < p->n; i++)
        p->spans += p->bufs[i]->spans;
    s->parked = NULL;
    s->n_parked = s->cap_parked = 0;
    /* They stay in this instance's queued_spans (its metrics may still be
     * read until the service is gone, and must add up); the next instance
     * counts them as queued from sf_sender_adopt, and gauges are not
     * carried over a reload. */
    if (p->n > 0)
        sf_info("exporter %s: keeping %zu batches (%" PRIu64 " spans) for the reloaded "
                "configuration", s->id, p->n, p->spans);
    return p;
}

void sf_sender_adopt(sf_sender *s, sf_sender_parcel *p)
{
    if (p == NULL)
        return;
    if (s->queue == NULL || s->n_started > 0 || s->adopted != NULL) {
        /* queue disabled in the new config: nobody to send them later */
        sf_sender_parcel_drop(p, s->counters);
        return;
    }
    atomic_fetch_add_explicit(&s->counters->queued_spans, (int64_t)p->spans,
                              memory_order_relaxed);
    for (size_t i = 0; i < p->n; i++) {
        size_t size = size_in(s->q.sizer, p->bufs[i]);

        atomic_fetch_add_explicit(&s->counters->queue_size, (int64_t)size, memory_order_relaxed);
        sf_share_charge(s->share, p->bufs[i]->client, size);
    }
    s->adopted = p;
    s->next_adopted = 0;
}

void sf_sender_parcel_drop(sf_sender_parcel *p, sf_counters *counters)
{
    size_t left = 0;
    uint64_t spans = 0;

    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++) {
        if (p->bufs[i] == NULL)
            continue;
        left++;
        spans += p->bufs[i]->spans;
        sf_buf_unref(p->bufs[i]);
    }
    if (counters != NULL && spans > 0) {
        sf_count(&counters->send_failed_spans[SF_REASON_SHUTDOWN], spans);
        sf_warn("exporter: %zu kept batches (%" PRIu64 " spans) cannot be sent by the reloaded "
                "configuration (its sending queue is disabled): dropped", left, spans);
    }
    sf_free(p->bufs);
    sf_free(p);
}

/* ---- the component side of every network exporter ------------------------- */

/* The exporter's context begins with its sf_sender_export (sf_sender.h). */
static sf_sender_export *export_of(const sf_component *self)
{
    return sf_component_ctx(self);
}

sf_status sf_sender_export_start(sf_component *self)
{
    sf_sender_export *e = export_of(self);
    sf_batching b;

    if (sf_component_batching(self, &b))
        sf_sender_set_batching(e->sender, &b);
    sf_sender_set_send_timeout(e->sender, e->send_timeout_ms);
    return sf_sender_start(e->sender);
}

sf_status sf_sender_export_consume(sf_component *self, sf_request *batch)
{
    return sf_sender_submit_request(export_of(self)->sender, batch);
}

void sf_sender_export_shutdown(sf_component *self)
{
    sf_sender_export *e = export_of(self);

    if (e != NULL)
        sf_sender_shutdown(e->sender, e->drain_ms);
}

void *sf_sender_export_suspend(sf_component *self)
{
    sf_sender_export *e = export_of(self);

    return e != NULL ? sf_sender_suspend(e->sender, e->drain_ms) : NULL;
}

void sf_sender_export_resume(sf_component *self, void *parcel)
{
    sf_sender_export *e = self != NULL ? export_of(self) : NULL;

    if (e == NULL)
        sf_sender_parcel_drop(parcel, NULL);
    else
        sf_sender_adopt(e->sender, parcel);
}

/* tests/pipeline/test_sender_batching.c: the sending queue merging queued
 * batches into fewer requests (sf_sender_set_batching), driven by a fake
 * send function that keeps a copy of every request's bytes. Each request is
 * decoded with protobuf-c: its span count must match what the sender says
 * it holds, and every span id submitted must arrive exactly once.
 * Batches are mostly queued before start so the way they are grouped is
 * deterministic; timing bounds are generous upper bounds only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/sf_test.h"
#include "tests/sf_torture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sf_alloc.h"
#include "sf_request.h"
#include "sf_sender.h"
#include "sf_time.h"

#define MAX_CALLS 64
#define MAX_IDS 8192

typedef struct call {
    uint8_t *bytes;             /* malloc'd copy of the request */
    size_t len;
    size_t spans;               /* what the sender said the request holds */
    sf_status status;           /* what the fake answered */
    const sf_buf *buf;          /* the buffer sent: compared only, never read */
} call;

typedef struct fake {
    pthread_mutex_t mu;
    int n_calls;
    call calls[MAX_CALLS];
    sf_status script[8];        /* outcome of call i; SF_OK after the script */
    int n_script;
    _Atomic int gate_closed;    /* sends wait while set */
    _Atomic int at_gate;        /* sends waiting at the gate now */
} fake;

typedef struct fixture {
    fake f;
    sf_counters k;
    sf_queue_config q;
    sf_retry_config r;
    sf_batching b;
    sf_batch_stats stats;       /* the batch processor's counts (b.stats) */
    sf_sender *s;
    uint32_t next_id;           /* span ids handed out so far */
    uint64_t submitted_ok;
    size_t mem_before;
} fixture;

static void fake_send(void *exporter, unsigned worker, const sf_buf *buf, sf_send_result *res)
{
    fake *f = exporter;
    int i;

    (void)worker;
    atomic_fetch_add(&f->at_gate, 1);
    while (atomic_load(&f->gate_closed))
        usleep(1000);
    atomic_fetch_sub(&f->at_gate, 1);
    pthread_mutex_lock(&f->mu);
    i = f->n_calls++;
    res->status = i < f->n_script ? f->script[i] : SF_OK;
    if (i < MAX_CALLS) {
        f->calls[i].bytes = malloc(buf->len ? buf->len : 1);
        assert_non_null(f->calls[i].bytes);
        memcpy(f->calls[i].bytes, buf->data, buf->len);
        f->calls[i].len = buf->len;
        f->calls[i].buf = buf;
        f->calls[i].spans = buf->spans;
        f->calls[i].status = res->status;
    }
    pthread_mutex_unlock(&f->mu);
    snprintf(res->detail, sizeof(res->detail), "fake %s", sf_status_name(res->status));
}

static int n_calls(fake *f)
{
    int n;

    pthread_mutex_lock(&f->mu);
    n = f->n_calls;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static int setup(void **state)
{
    fixture *x = calloc(1, sizeof(*x));

    pthread_mutex_init(&x->f.mu, NULL);
    x->q = (sf_queue_config){ .present = true, .enabled = true, .queue_size = 32,
                              .num_consumers = 2 };
    x->r = (sf_retry_config){ .present = true, .enabled = true, .initial_interval = 5,
                              .multiplier = 1.5, .randomization_factor = 0.5,
                              .max_interval = 20, .max_elapsed_time = 10000 };
    x->b = (sf_batching){ .send_batch_size = 500, .send_batch_max_size = 0,
                          .timeout_ms = SF_TEST_HOUR_MS, .stats = &x->stats };
    x->mem_before = sf_alloc_in_use();
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fixture *x = *state;

    atomic_store(&x->f.gate_closed, 0);     /* a failed test may leave it shut */
    sf_sender_destroy(x->s);
    assert_int_equal(sf_alloc_in_use(), x->mem_before);
    for (int i = 0; i < x->f.n_calls && i < MAX_CALLS; i++)
        free(x->f.calls[i].bytes);
    pthread_mutex_destroy(&x->f.mu);
    free(x);
    return 0;
}

/* The requests the batch processor's series counted: by trigger, in all
 * (the histogram's count) and their spans and bytes (its sums), checked
 * against what the fake was sent. */
static void assert_batch_stats(fixture *x, uint64_t size, uint64_t timeout)
{
    uint64_t count = 0, bytes_count = 0, spans = 0, bytes = 0;

    for (int i = 0; i <= SF_BATCH_SIZE_BOUNDS; i++)
        count += sf_counter_get(&x->stats.items[i]);
    for (int i = 0; i <= SF_BATCH_BYTES_BOUNDS; i++)
        bytes_count += sf_counter_get(&x->stats.bytes[i]);
    for (int i = 0; i < x->f.n_calls && i < MAX_CALLS; i++) {
        spans += x->f.calls[i].spans;
        bytes += x->f.calls[i].len;
    }
    assert_int_equal(sf_counter_get(&x->stats.size_trigger), size);
    assert_int_equal(sf_counter_get(&x->stats.timeout_trigger), timeout);
    assert_int_equal(count, (uint64_t)x->f.n_calls);
    assert_int_equal(bytes_count, count);
    assert_int_equal(sf_counter_get(&x->stats.items_sum), spans);
    assert_int_equal(sf_counter_get(&x->stats.bytes_sum), bytes);
}

static void make_sender(fixture *x, bool batching)
{
    x->s = sf_sender_create("otlphttp/batching", &x->q, &x->r, fake_send, &x->f, &x->k);
    assert_non_null(x->s);
    if (batching)
        sf_sender_set_batching(x->s, &x->b);
}

/* Submit one encoded request of `spans` spans with fresh span ids. */
static sf_status submit(fixture *x, size_t spans)
{
    size_t len;
    uint8_t *req = sf_test_pack_spans(spans, x->next_id, "op", 1, &len);
    sf_buf *b = sf_buf_create(len);
    sf_status st;

    assert_non_null(b);
    memcpy(b->data, req, len);
    free(req);
    b->spans = spans;
    x->next_id += (uint32_t)spans;
    st = sf_sender_submit(x->s, b);
    if (st == SF_OK)
        x->submitted_ok += spans;
    else
        x->next_id -= (uint32_t)spans;      /* refused: these ids never count */
    sf_buf_unref(b);
    return st;
}

/* Decode request `i`: its span count must be what the sender counted;
 * its span ids are added to seen[]. Returns the span count. */
static size_t decode_call(fixture *x, int i, unsigned *seen)
{
    call *c = &x->f.calls[i];
    sf_otlp_request *req;
    size_t n = 0;

    req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        NULL, c->len, c->bytes);
    assert_non_null(req);
    for (size_t r = 0; r < req->n_resource_spans; r++)
        for (size_t s = 0; s < req->resource_spans[r]->n_scope_spans; s++) {
            sf_otlp_scope_spans *ss = req->resource_spans[r]->scope_spans[s];

            for (size_t k = 0; k < ss->n_spans; k++) {
                uint32_t id;

                assert_int_equal(ss->spans[k]->span_id.len, 8);
                memcpy(&id, ss->spans[k]->span_id.data, sizeof(id));
                assert_true(id < x->next_id);
                if (seen != NULL)
                    seen[id]++;
                n++;
            }
        }
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(req, NULL);
    assert_int_equal(n, c->spans);
    return n;
}

/* Every span id submitted is in exactly one successful request. */
static void assert_each_span_once(fixture *x)
{
    unsigned *seen = calloc(MAX_IDS, sizeof(*seen));
    int n = n_calls(&x->f);

    assert_non_null(seen);
    assert_true(x->next_id <= MAX_IDS);
    assert_true(n <= MAX_CALLS);
    for (int i = 0; i < n; i++)
        if (x->f.calls[i].status == SF_OK)
            decode_call(x, i, seen);
    for (uint32_t id = 0; id < x->next_id; id++)
        assert_int_equal(seen[id], 1);
    free(seen);
}

static uint64_t failed_all(sf_counters *k)
{
    uint64_t n = 0;

    for (int r = 0; r < SF_REASON_COUNT; r++)
        n += sf_counter_get(&k->send_failed_spans[r]);
    return n;
}

/* submitted OK == sent + send_failed + queued_spans, at any moment. */
static void assert_invariant(fixture *x)
{
    sf_test_assert_accounted(&x->k, x->submitted_ok);
}

/* ---- scenarios --------------------------------------------------------- */

/* 10 x 100 spans, send_batch_size 500: two requests of 500, each span once.
 * Two consumers: gathering is one at a time, so they do not split it. */
static void test_merges_to_send_batch_size(void **state)
{
    fixture *x = *state;

    make_sender(x, true);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(submit(x, 100), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 1000);
    assert_int_equal(n_calls(&x->f), 2);
    assert_int_equal(decode_call(x, 0, NULL), 500);
    assert_int_equal(decode_call(x, 1, NULL), 500);
    assert_each_span_once(x);
    assert_int_equal(atomic_load(&x->k.queued_spans), 0);
    assert_int_equal(atomic_load(&x->k.queue_size), 0);
    assert_invariant(x);
    /* both reached send_batch_size; 500 is in the bucket le="500" (the 7th) */
    assert_batch_stats(x, 2, 0);
    assert_int_equal(sf_counter_get(&x->stats.items[6]), 2);
}

/* send_batch_max_size 300: no request over 300 spans; the last 100 go
 * when the timeout runs out. A single batch over the maximum goes whole. */
static void test_max_size_caps_requests(void **state)
{
    fixture *x = *state;
    size_t total = 0;

    x->b.send_batch_max_size = 300;
    x->b.timeout_ms = 50;
    x->q.num_consumers = 1;
    make_sender(x, true);
    for (int i = 0; i < 10; i++)
        assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(submit(x, 400), SF_OK);
    assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 1500);
    /* 300, 300, 300, 100 (the 400 does not fit), 400 (too big alone, sent
     * whole), 100 (after the timeout) */
    assert_int_equal(n_calls(&x->f), 6);
    assert_int_equal(decode_call(x, 0, NULL), 300);
    assert_int_equal(decode_call(x, 1, NULL), 300);
    assert_int_equal(decode_call(x, 2, NULL), 300);
    assert_int_equal(decode_call(x, 3, NULL), 100);
    assert_int_equal(decode_call(x, 4, NULL), 400);
    assert_int_equal(decode_call(x, 5, NULL), 100);
    for (int i = 0; i < 6; i++)
        total += x->f.calls[i].spans;
    assert_int_equal(total, 1500);
    assert_each_span_once(x);
    assert_invariant(x);
    /* the next batch would pass the maximum: the size triggers; the last
     * 100 waited out the timeout */
    assert_batch_stats(x, 5, 1);
}

/* Fewer spans than send_batch_size: the timeout sends what was gathered,
 * as one request, without a shutdown to push it out. */
static void test_timeout_flushes_partial_batch(void **state)
{
    fixture *x = *state;

    x->b.timeout_ms = 100;
    make_sender(x, true);
    for (int i = 0; i < 3; i++)
        assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 300);
    assert_int_equal(n_calls(&x->f), 1);
    assert_int_equal(decode_call(x, 0, NULL), 300);
    assert_each_span_once(x);
    assert_int_equal(atomic_load(&x->k.queued_spans), 0);
    assert_invariant(x);
    assert_batch_stats(x, 0, 1);
}

/* send_batch_size 0: merge what is queued, never wait (the 1 h timeout
 * would outlast WAIT_FOR). */
static void test_size_zero_takes_what_is_queued(void **state)
{
    fixture *x = *state;

    x->b.send_batch_size = 0;
    x->q.num_consumers = 1;
    make_sender(x, true);
    for (int i = 0; i < 4; i++)
        assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 400);
    assert_int_equal(n_calls(&x->f), 1);
    assert_int_equal(decode_call(x, 0, NULL), 400);
    /* and a lone batch later is sent at once too */
    assert_int_equal(submit(x, 7), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 407);
    assert_int_equal(n_calls(&x->f), 2);
    assert_each_span_once(x);
    assert_invariant(x);
    assert_batch_stats(x, 2, 0);    /* no wait: upstream has no timer, a size trigger */
}

/* A merged request that fails retryably is sent again whole: the same 500
 * spans in both attempts, delivered once, counted once. */
static void test_retry_of_merged_request(void **state)
{
    fixture *x = *state;
    unsigned *seen = calloc(MAX_IDS, sizeof(*seen));

    assert_non_null(seen);
    x->f.script[0] = SF_RETRY;
    x->f.n_script = 1;
    make_sender(x, true);
    for (int i = 0; i < 5; i++)
        assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 500);
    assert_int_equal(n_calls(&x->f), 2);
    assert_int_equal(x->f.calls[0].status, SF_RETRY);
    assert_int_equal(x->f.calls[1].len, x->f.calls[0].len);
    assert_memory_equal(x->f.calls[1].bytes, x->f.calls[0].bytes, x->f.calls[0].len);
    assert_int_equal(decode_call(x, 0, seen), 500);
    for (uint32_t id = 0; id < x->next_id; id++)
        assert_int_equal(seen[id], 1);
    free(seen);
    assert_each_span_once(x);
    assert_int_equal(sf_counter_get(&x->k.retries), 1);
    assert_int_equal(failed_all(&x->k), 0);
    assert_invariant(x);
}

/* A merged request refused for good fails all its parts' spans. */
static void test_permanent_failure_counts_every_part(void **state)
{
    fixture *x = *state;

    x->f.script[0] = SF_PERMANENT;
    x->f.n_script = 1;
    make_sender(x, true);
    for (int i = 0; i < 5; i++)
        assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.send_failed_spans[SF_REASON_PERMANENT_ERROR]) == 500);
    assert_int_equal(n_calls(&x->f), 1);
    assert_int_equal(decode_call(x, 0, NULL), 500);
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 0);
    assert_int_equal(atomic_load(&x->k.queued_spans), 0);
    assert_invariant(x);
}

/* While a merged request is in flight its parts are out of the queue
 * (queue_size) but still queued spans; batches behind it are counted in
 * both. */
static void test_gauges_exact_while_in_flight(void **state)
{
    fixture *x = *state;

    x->q.num_consumers = 1;
    atomic_store(&x->f.gate_closed, 1);
    make_sender(x, true);
    for (int i = 0; i < 5; i++)
        assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(atomic_load(&x->k.queue_size), 5);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    SF_TEST_WAIT_FOR(atomic_load(&x->k.queue_size) == 0);
    assert_int_equal(atomic_load(&x->k.queued_spans), 500);
    assert_invariant(x);
    assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(atomic_load(&x->k.queue_size), 2);
    assert_int_equal(atomic_load(&x->k.queued_spans), 700);
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 0);
    assert_invariant(x);
    atomic_store(&x->f.gate_closed, 0);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 500);
    /* the two behind it wait out the (1 h) timeout: shutdown sends them */
    sf_sender_shutdown(x->s, 5000);
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 700);
    assert_int_equal(n_calls(&x->f), 2);
    assert_int_equal(decode_call(x, 1, NULL), 200);
    assert_int_equal(atomic_load(&x->k.queue_size), 0);
    assert_int_equal(atomic_load(&x->k.queued_spans), 0);
    assert_each_span_once(x);
    assert_invariant(x);
}

/* Shutdown does not wait out the timeout of a gather in progress: what was
 * gathered and what is still queued is sent, nothing dropped. */
static void test_shutdown_drains_without_waiting(void **state)
{
    fixture *x = *state;
    int64_t t0;

    make_sender(x, true);
    for (int i = 0; i < 3; i++)
        assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    SF_TEST_WAIT_FOR(atomic_load(&x->k.queue_size) == 0);    /* gathered, now waiting */
    assert_int_equal(n_calls(&x->f), 0);
    t0 = sf_now_ms();
    sf_sender_shutdown(x->s, 30000);
    assert_true(sf_now_ms() - t0 < SF_TEST_HOUR_MS / 2);   /* the 1 h timeout was not waited out */
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 300);
    assert_int_equal(sf_counter_get(&x->k.send_failed_spans[SF_REASON_SHUTDOWN]), 0);
    assert_int_equal(n_calls(&x->f), 1);
    assert_int_equal(decode_call(x, 0, NULL), 300);
    assert_int_equal(submit(x, 5), SF_STOPPED);
    assert_each_span_once(x);
    assert_invariant(x);
    assert_batch_stats(x, 0, 1);    /* upstream flushes at shutdown as on a timeout */
}

/* No memory for the merged buffer: the parts are sent one by one, none
 * lost. Once start has allocated the sender's stack of idle merge buffers
 * (allocation 1) and the consumer's parts array (allocation 2) the only
 * counted allocation left is the merge (allocation 3). */
static void test_merge_without_memory_sends_parts(void **state)
{
    fixture *x = *state;

    x->q.num_consumers = 1;
    x->b.timeout_ms = 0;
    make_sender(x, true);
    for (int i = 0; i < 3; i++)
        assert_int_equal(submit(x, 100), SF_OK);
    sf_alloc_fail_at(3, 1);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 300);
    sf_alloc_fail_at(0, 0);
    assert_int_equal(n_calls(&x->f), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(decode_call(x, i, NULL), 100);
    assert_each_span_once(x);
    assert_invariant(x);
    /* three requests went out; the gathering ended once (size: no wait) */
    assert_batch_stats(x, 1, 0);
}

/* The consumers' batching buffers: a failed allocation in start leaves
 * nothing behind and the sender refuses batches, as after a failed thread
 * start. The torture scenario makes a batching sender and starts it; a
 * failing run must fail in create or start, and a sender whose start
 * failed must refuse a batch. */
static sf_status start_scenario(void *arg)
{
    fixture *x = arg;
    sf_status st;

    x->s = sf_sender_create("otlphttp/batching", &x->q, &x->r, fake_send, &x->f, &x->k);
    if (x->s == NULL)
        return SF_ENOMEM;
    sf_sender_set_batching(x->s, &x->b);
    st = sf_sender_start(x->s);
    if (st != SF_OK && submit(x, 1) != SF_STOPPED)
        fail_msg("start failed (%s) but the sender took a batch", sf_status_name(st));
    if (st == SF_OK)
        sf_sender_shutdown(x->s, 1000);
    sf_sender_destroy(x->s);
    x->s = NULL;
    return st;
}

static void test_start_survives_allocation_failure(void **state)
{
    fixture *x = *state;
    const sf_torture t = { .name = "batching sender start", .run = start_scenario, .arg = x,
                           .expect = SF_ENOMEM };

    /* create's allocations, then start's: the parts arrays and merge
     * buffers of both consumers */
    assert_true(sf_torture_run(&t) >= 5);
    /* and with every allocation there, it starts */
    x->b.timeout_ms = 10;
    make_sender(x, true);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 1), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 1);
    assert_int_equal(failed_all(&x->k), 0);
}

/* Queue disabled: batching cannot apply; each submit is one request. */
static void test_queue_disabled_ignores_batching(void **state)
{
    fixture *x = *state;

    x->q.enabled = false;
    make_sender(x, true);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(n_calls(&x->f), 2);
    assert_int_equal(sf_counter_get(&x->k.sent_spans), 200);
    assert_each_span_once(x);
    assert_invariant(x);
}

/* ---- sending_queue.batch and the sizer (no batch processor) ------------- */

static void merge_in_flight_config(fixture *x, int64_t min_size)
{
    x->q.batch = (sf_queue_batch_config){ .present = true, .enabled = true,
                                          .flush_timeout = 60000, .min_size = min_size,
                                          .sizer = SF_SIZER_ITEMS };
}

/* A lone batch on an idle exporter goes at once (no flush_timeout wait);
 * what arrives while that export is in flight is merged into the next
 * request, up to min_size: 1 + 50 batches make two requests, 10 and 500
 * spans, each span once. Shown to fail with the in-flight check removed
 * (the first batch then waits the 60 s flush_timeout). */
static void test_merges_while_in_flight(void **state)
{
    fixture *x = *state;
    size_t a, b;

    x->q.queue_size = 100;
    merge_in_flight_config(x, 500);
    make_sender(x, false);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    atomic_store(&x->f.gate_closed, 1);
    assert_int_equal(submit(x, 10), SF_OK);
    SF_TEST_WAIT_FOR(atomic_load(&x->f.at_gate) == 1);     /* in flight, alone */
    for (int i = 0; i < 50; i++)
        assert_int_equal(submit(x, 10), SF_OK);
    SF_TEST_WAIT_FOR(atomic_load(&x->f.at_gate) == 2);     /* the merged one */
    assert_int_equal(atomic_load(&x->k.queue_size), 0);
    assert_int_equal(atomic_load(&x->k.queued_spans), 510);
    atomic_store(&x->f.gate_closed, 0);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 510);
    assert_int_equal(n_calls(&x->f), 2);
    a = decode_call(x, 0, NULL);
    b = decode_call(x, 1, NULL);
    assert_true((a == 10 && b == 500) || (a == 500 && b == 10));
    assert_each_span_once(x);
    assert_invariant(x);
    /* no batch processor: its series stay untouched */
    assert_int_equal(sf_counter_get(&x->stats.size_trigger), 0);
}

/* Merged requests' buffers are the sender's, not each consumer's: six
 * merged requests formed one after another by four consumers (whichever
 * takes the gathering) all use one buffer, mapped and warm. Shown to fail
 * with a fresh buffer per request (six distinct) and, before this, with a
 * buffer kept per consumer (one per consumer that formed a request). */
static void test_merged_requests_share_one_warm_buffer(void **state)
{
    fixture *x = *state;
    const sf_buf *seen[8];
    size_t n_seen = 0;

    x->q.queue_size = 100;
    x->q.num_consumers = 4;
    merge_in_flight_config(x, 20);
    make_sender(x, false);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 10), SF_OK);     /* idle exporter: alone, at once */
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 10);
    for (uint64_t r = 1; r <= 6; r++) {
        assert_int_equal(submit(x, 10), SF_OK);
        assert_int_equal(submit(x, 10), SF_OK);
        SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 10 + 20 * r &&
                         sf_sender_idle_merge_buffers(x->s) == 1);
    }
    assert_int_equal(n_calls(&x->f), 7);
    for (int i = 1; i < 7; i++) {
        bool known = false;

        assert_int_equal(decode_call(x, i, NULL), 20);
        for (size_t k = 0; k < n_seen; k++)
            known |= seen[k] == x->f.calls[i].buf;
        if (!known)
            seen[n_seen++] = x->f.calls[i].buf;
    }
    assert_int_equal(n_seen, 1);
    assert_each_span_once(x);
    assert_invariant(x);
}

/* A steady stream merges with nothing in flight: once a request has left,
 * batches coming within flush_timeout of it wait for min_size. A lone
 * batch goes at once (idle), then 5 x 10 spans submitted one by one, the
 * first taken by the gatherer before the next comes, share one request.
 * Shown to fail with the last_sent_ms check removed (the first of the five
 * goes alone). The later four stay queued until all are there: the
 * gatherer sleeps until min_size can be met (sf_queue_wait_len). */
static void test_merges_a_steady_stream(void **state)
{
    fixture *x = *state;

    x->q.queue_size = 100;
    merge_in_flight_config(x, 50);
    make_sender(x, false);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    assert_int_equal(submit(x, 10), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 10);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(submit(x, 10), SF_OK);
        if (i == 0)
            SF_TEST_WAIT_FOR(atomic_load(&x->k.queue_size) == 0);   /* taken, gathering */
        assert_int_equal(atomic_load(&x->f.at_gate), 0);        /* nothing in flight */
    }
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 60);
    assert_int_equal(n_calls(&x->f), 2);
    assert_int_equal(decode_call(x, 0, NULL), 10);
    assert_int_equal(decode_call(x, 1, NULL), 50);
    assert_each_span_once(x);
    assert_invariant(x);
}

/* Merging is not capped by how small the batches were: 2000 one-span
 * batches queued before start leave in ONE request (before, at most
 * min(queue_size, 1024) batches could share one). Shown to fail with the
 * parts array not grown (64 per request). */
static void test_merge_not_capped_by_batch_count(void **state)
{
    fixture *x = *state;

    x->q.sizer = SF_SIZER_ITEMS;
    x->q.queue_size = 2000;
    merge_in_flight_config(x, 0);
    make_sender(x, false);
    for (int i = 0; i < 2000; i++)
        assert_int_equal(submit(x, 1), SF_OK);
    assert_int_equal(submit(x, 1), SF_FULL);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 2000);
    assert_int_equal(n_calls(&x->f), 1);
    assert_int_equal(decode_call(x, 0, NULL), 2000);
    assert_each_span_once(x);
    assert_invariant(x);
}

/* The merge's wait never outgrows the queue (issue 36): min_size 800
 * spans of 8-span batches over a queue of 32 requests (the seed's), 256
 * spans or 32 batches' bytes, one export in flight. The gatherer must take
 * what is queued whenever the queue is a quarter full, so a client that
 * sends once the queue is below a quarter again is never refused: 1 + 100 batches,
 * every one accepted, in two requests (8 spans alone, then 800 merged).
 * Shown to fail before the fix: the gatherer slept to its 60 s deadline
 * waiting for 99 batches while the queue held 32, and every later batch
 * was refused. */
static void test_merge_wait_never_outgrows_the_queue(void **state)
{
    fixture *x = *state;
    size_t len;
    uint8_t *one = sf_test_pack_spans(8, 0, "op", 1, &len);
    const struct { int sizer; int64_t size; } queues[] = {
        { SF_SIZER_REQUESTS, 32 }, { SF_SIZER_ITEMS, 256 }, { SF_SIZER_BYTES, (int64_t)(32 * len) },
    };

    free(one);
    for (size_t q = 0; q < sizeof(queues) / sizeof(queues[0]); q++) {
        if (q > 0) {
            sf_sender_destroy(x->s);
            for (int i = 0; i < x->f.n_calls && i < MAX_CALLS; i++)
                free(x->f.calls[i].bytes);
            x->f.n_calls = 0;
            memset(&x->k, 0, sizeof(x->k));
            x->submitted_ok = 0;
            x->next_id = 0;
        }
        x->q.sizer = queues[q].sizer;
        x->q.queue_size = queues[q].size;
        merge_in_flight_config(x, 800);
        make_sender(x, false);
        assert_int_equal(sf_sender_start(x->s), SF_OK);
        atomic_store(&x->f.gate_closed, 1);
        assert_int_equal(submit(x, 8), SF_OK);
        SF_TEST_WAIT_FOR(atomic_load(&x->f.at_gate) == 1);     /* in flight: busy */
        for (int i = 0; i < 100; i++) {
            /* the client sends again once the queue is below a quarter */
            SF_TEST_WAIT_FOR(4 * atomic_load(&x->k.queue_size) < queues[q].size);
            assert_int_equal(submit(x, 8), SF_OK);
        }
        assert_int_equal(sf_counter_get(&x->k.enqueue_failed_spans), 0);
        atomic_store(&x->f.gate_closed, 0);
        SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 808);
        assert_int_equal(n_calls(&x->f), 2);    /* both at the gate: either order */
        assert_int_equal(decode_call(x, 0, NULL) + decode_call(x, 1, NULL), 808);
        assert_true(decode_call(x, 0, NULL) == 8 || decode_call(x, 1, NULL) == 8);
        assert_each_span_once(x);
        assert_invariant(x);
    }
}

/* The bound while merging is the queue plus one request in the making,
 * and it holds: one export in flight, then a merged request of at least
 * min_size (800 spans: 100 batches) stuck at the gate too, so both
 * consumers wait on a gateway that does not answer. A client pushing
 * 8-span batches back to back is then refused once the queue (32
 * requests) is full, and what the last gatherer's reserve let in while it
 * waited (at most the 100 batches of its request's room): a gatherer that
 * ends with no consumer free to gather next grants no room past the
 * capacity. Every batch accepted is sent, once, when the gateway answers. */
static void test_merge_reserve_is_bounded(void **state)
{
    fixture *x = *state;
    int held = 0;

    x->q.queue_size = 32;
    merge_in_flight_config(x, 800);
    x->q.batch.flush_timeout = 300;     /* what is left at the end goes at its deadline */
    make_sender(x, false);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    atomic_store(&x->f.gate_closed, 1);
    assert_int_equal(submit(x, 8), SF_OK);
    SF_TEST_WAIT_FOR(atomic_load(&x->f.at_gate) == 1);
    /* Until the merged request is at the gate: a refusal here only means
     * the gatherer has not run yet, so try again a moment later. */
    for (int w = 0; atomic_load(&x->f.at_gate) < 2; w++) {
        assert_true(w < 100000);
        if (submit(x, 8) != SF_OK)
            usleep(100);
    }
    while (submit(x, 8) == SF_OK)
        ;
    /* refused: the queue holds its 32 and at most the reserve's 100 more
     * (a request's whole room: 800 spans of 8-span batches) */
    held = (int)atomic_load(&x->k.queue_size);
    assert_true(held >= 32);
    assert_true(held <= 32 + 100);
    assert_true(sf_counter_get(&x->k.enqueue_failed_spans) > 0);
    atomic_store(&x->f.gate_closed, 0);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == x->submitted_ok);
    assert_each_span_once(x);
    assert_invariant(x);
}

/* sizer items: queue_size counts spans, the gauges say spans, and a batch
 * that would pass the bound is refused (counted) while a smaller one still
 * fits. sizer bytes: the same in encoded bytes. */
static void test_sizer_bounds_what_is_held(void **state)
{
    fixture *x = *state;
    int64_t held;

    x->q.sizer = SF_SIZER_ITEMS;
    x->q.queue_size = 250;
    make_sender(x, false);
    assert_int_equal(atomic_load(&x->k.queue_capacity), 250);
    assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(submit(x, 100), SF_OK);
    assert_int_equal(submit(x, 100), SF_FULL);
    assert_int_equal(sf_counter_get(&x->k.enqueue_failed_spans), 100);
    assert_int_equal(submit(x, 50), SF_OK);
    assert_int_equal(submit(x, 1), SF_FULL);
    assert_int_equal(atomic_load(&x->k.queue_size), 250);
    assert_int_equal(sf_sender_start(x->s), SF_OK);
    SF_TEST_WAIT_FOR(sf_counter_get(&x->k.sent_spans) == 250);
    assert_int_equal(atomic_load(&x->k.queue_size), 0);
    assert_each_span_once(x);
    sf_sender_destroy(x->s);

    /* bytes: room for two 100-span batches' bytes, not three */
    memset(&x->k, 0, sizeof(x->k));
    x->submitted_ok = 0;
    {
        size_t len;
        uint8_t *one = sf_test_pack_spans(100, 0, "op", 1, &len);

        free(one);
        x->q.sizer = SF_SIZER_BYTES;
        x->q.queue_size = (int64_t)(2 * len + len / 2);
        x->s = sf_sender_create("otlphttp/bytes", &x->q, &x->r, fake_send, &x->f, &x->k);
        assert_non_null(x->s);
        assert_int_equal(submit(x, 100), SF_OK);
        assert_int_equal(submit(x, 100), SF_OK);
        assert_int_equal(submit(x, 100), SF_FULL);
        held = atomic_load(&x->k.queue_size);
        assert_true(held > 0 && held <= x->q.queue_size);
        assert_true(held >= (int64_t)(2 * len) - 64);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_merges_to_send_batch_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_wait_never_outgrows_the_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_reserve_is_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_size_caps_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_flushes_partial_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_zero_takes_what_is_queued, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_of_merged_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merged_requests_share_one_warm_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_permanent_failure_counts_every_part, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gauges_exact_while_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_drains_without_waiting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_without_memory_sends_parts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_survives_allocation_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_disabled_ignores_batching, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merges_while_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merges_a_steady_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_not_capped_by_batch_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sizer_bounds_what_is_held, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

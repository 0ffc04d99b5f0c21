/* tests/pipeline/test_request.c: the request moving through a pipeline
 * (pipeline/sf_request.c): the reference-counted sf_buf, a batch's states
 * (raw, canonical bytes, decoded tree), the codec pass recorded in it (and
 * a failed pass leaving it as it was), decode without an arena, encode's
 * reference, release, the span count of a tree; the pool of warm output
 * buffers (taken again warm, counted while idle, bounded, let go under
 * pressure, resized); and all of it under the torture helper. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sf_alloc.h"
#include "sf_arena.h"
#include "sf_request.h"
#include "sf_otlp_count.h"
#include "tests/sf_test.h"
#include "tests/sf_torture.h"

/* A request of `n_rs` resource spans, resource i holding i + 1 spans named
 * `name` in one scope, packed into `buf`; its length. */
static size_t pack_request_named(uint8_t *buf, size_t size, size_t n_rs, const char *name)
{
    sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    sf_otlp_resource_spans rs[4], *rsp[4];
    sf_otlp_scope_spans ss[4], *ssp[4];
    sf_otlp_span spans[10], *sp[10];
    uint8_t trace_id[16] = { 0x11, 0x22 };
    uint8_t span_id[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    size_t k = 0, len;

    assert_true(n_rs <= 4);
    for (size_t i = 0; i < n_rs; i++) {
        sf_otlp_resource_spans rinit = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
        sf_otlp_scope_spans sinit = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;

        rs[i] = rinit;
        ss[i] = sinit;
        ss[i].spans = &sp[k];
        for (size_t j = 0; j <= i; j++, k++) {
            sf_otlp_span init = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;

            spans[k] = init;
            spans[k].trace_id = (ProtobufCBinaryData){ 16, trace_id };
            spans[k].span_id = (ProtobufCBinaryData){ 8, span_id };
            spans[k].name = (char *)name;
            spans[k].start_time_unix_nano = 10;
            spans[k].end_time_unix_nano = 20;
            sp[k] = &spans[k];
            ss[i].n_spans++;
        }
        ssp[i] = &ss[i];
        rs[i].n_scope_spans = 1;
        rs[i].scope_spans = &ssp[i];
        rsp[i] = &rs[i];
    }
    req.n_resource_spans = n_rs;
    req.resource_spans = rsp;
    len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
    assert_true(len <= size);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, buf);
    return len;
}

static size_t pack_request(uint8_t *buf, size_t size, size_t n_rs)
{
    return pack_request_named(buf, size, n_rs, "op");
}

static void test_buf_refs(void **state)
{
    size_t before = sf_alloc_in_use();
    sf_buf *b;

    (void)state;
    b = sf_buf_create(100);
    assert_non_null(b);
    assert_int_equal(b->len, 100);
    assert_int_equal(b->spans, 0);
    assert_true(sf_alloc_in_use() >= before + 100);     /* counted */
    memset(b->data, 0xa5, 100);                         /* all of it is writable */
    assert_ptr_equal(sf_buf_ref(b), b);
    assert_ptr_equal(sf_buf_ref(b), b);
    sf_buf_unref(b);
    sf_buf_unref(b);
    assert_true(sf_alloc_in_use() > before);            /* one reference left */
    assert_int_equal(b->data[99], 0xa5);
    sf_buf_unref(b);
    assert_int_equal(sf_alloc_in_use(), before);
    sf_buf_unref(NULL);

    b = sf_buf_create(0);                               /* empty is a buffer too */
    assert_non_null(b);
    sf_buf_unref(b);
    assert_int_equal(sf_alloc_in_use(), before);

    sf_alloc_fail_at(1, false);
    assert_null(sf_buf_create(8));
    sf_alloc_fail_at(0, 0);
    assert_int_equal(sf_alloc_in_use(), before);
}

static void test_init_reads_nothing(void **state)
{
    static const uint8_t junk[] = { 0xff, 0xff, 0xff };
    sf_request b;

    (void)state;
    memset(&b, 0x5a, sizeof(b));
    assert_int_equal(sf_request_init(&b, NULL, junk, sizeof(junk), 7), SF_OK);
    assert_ptr_equal(b.raw, junk);
    assert_int_equal(b.raw_len, sizeof(junk));
    assert_int_equal(b.max_depth, 7);
    assert_null(b.arena);
    assert_null(b.wire);
    assert_null(b.req);
    assert_null(b.edited_by);
    assert_int_equal(b.spans, 0);
    sf_request_release(&b);
}

static void test_rewrite_records_the_pass(void **state)
{
    uint8_t buf[2048];
    size_t len = pack_request(buf, sizeof(buf), 3);
    size_t before = sf_alloc_in_use();
    int who, other;
    sf_request b;
    sf_buf *first;

    (void)state;
    sf_request_init(&b, NULL, buf, len, SF_OTLP_DEFAULT_MAX_DEPTH);
    assert_int_equal(sf_request_rewrite(&b, NULL, &who), SF_OK);
    assert_non_null(b.wire);
    assert_int_equal(b.spans, 6);
    assert_int_equal(b.stats.spans, 6);
    assert_ptr_equal(b.edited_by, &who);
    assert_int_equal(b.edit_status, SF_OK);
    assert_int_equal(b.wire->len, len);         /* already canonical: same bytes */
    assert_memory_equal(b.wire->data, buf, len);

    /* a second pass reads the batch's own bytes and replaces them */
    first = sf_buf_ref(b.wire);
    memset(buf, 0, len);                        /* the raw bytes are not read again */
    assert_int_equal(sf_request_rewrite(&b, NULL, &other), SF_OK);
    assert_ptr_not_equal(b.wire, first);
    assert_int_equal(b.wire->len, first->len);
    assert_memory_equal(b.wire->data, first->data, first->len);
    assert_ptr_equal(b.edited_by, &other);
    assert_int_equal(b.spans, 6);
    sf_buf_unref(first);
    sf_request_release(&b);
    assert_null(b.wire);
    assert_int_equal(sf_alloc_in_use(), before);
}

static void test_rewrite_failure_leaves_batch(void **state)
{
    uint8_t buf[2048];
    size_t len = pack_request(buf, sizeof(buf), 2);
    size_t before = sf_alloc_in_use();
    int who, first;
    sf_request b;
    sf_buf *wire;

    (void)state;
    /* cut inside the second resource: invalid, the spans before it seen */
    sf_request_init(&b, NULL, buf, len - 3, SF_OTLP_DEFAULT_MAX_DEPTH);
    assert_int_equal(sf_request_rewrite(&b, NULL, &who), SF_INVALID);
    assert_null(b.wire);
    assert_null(b.edited_by);
    assert_non_null(b.stats.error);
    assert_true(b.spans <= 3);

    /* with canonical bytes already made, a failing pass keeps them and
     * the counts that describe them */
    sf_request_init(&b, NULL, buf, len, SF_OTLP_DEFAULT_MAX_DEPTH);
    assert_int_equal(sf_request_rewrite(&b, NULL, &first), SF_OK);
    wire = b.wire;
    sf_alloc_fail_at(1, true);
    assert_int_equal(sf_request_rewrite(&b, NULL, &who), SF_ENOMEM);
    sf_alloc_fail_at(0, 0);
    assert_ptr_equal(b.wire, wire);
    assert_ptr_equal(b.edited_by, &first);
    assert_int_equal(b.spans, 3);
    sf_request_release(&b);
    assert_int_equal(sf_alloc_in_use(), before);
}

static void test_decode_and_count(void **state)
{
    uint8_t buf[2048];
    size_t len = pack_request(buf, sizeof(buf), 4);
    sf_arena *arena = sf_arena_create(4096, 0);
    const sf_otlp_request *req;
    sf_request b;

    (void)state;
    assert_non_null(arena);
    assert_int_equal(sf_request_decode(&b, arena, buf, len, SF_OTLP_DEFAULT_MAX_DEPTH), SF_OK);
    req = b.req;
    assert_non_null(req);
    assert_non_null(b.wire);                    /* decoding ran the codec first */
    assert_int_equal(b.spans, 10);
    assert_int_equal(sf_otlp_count_spans(req), 10);
    assert_int_equal(req->n_resource_spans, 4);
    assert_int_equal(req->resource_spans[3]->scope_spans[0]->n_spans, 4);
    assert_string_equal(req->resource_spans[3]->scope_spans[0]->spans[3]->name, "op");
    assert_int_equal(sf_request_tree(&b), SF_OK);      /* decoded once */
    assert_ptr_equal(b.req, req);

    /* a rewrite makes new bytes: the tree no longer describes them */
    assert_int_equal(sf_request_rewrite(&b, NULL, NULL), SF_OK);
    assert_null(b.req);
    assert_int_equal(sf_request_tree(&b), SF_OK);
    assert_int_equal(sf_otlp_count_spans(b.req), 10);
    sf_request_release(&b);
    assert_null(b.req);
    sf_arena_destroy(arena);

    /* an empty request: valid, no spans */
    {
        sf_otlp_request empty = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;

        assert_int_equal(sf_otlp_count_spans(&empty), 0);
    }
}

static void test_request_needs_arena(void **state)
{
    uint8_t buf[2048];
    size_t len = pack_request(buf, sizeof(buf), 1);
    static const uint8_t bad[] = { 0x0a, 0x05, 0x01 };     /* length past the end */
    sf_arena *arena = sf_arena_create(4096, 0);
    sf_request b;

    (void)state;
    /* no arena: no tree, but the codec's bytes are kept */
    sf_request_init(&b, NULL, buf, len, SF_OTLP_DEFAULT_MAX_DEPTH);
    assert_int_equal(sf_request_tree(&b), SF_ENOMEM);
    assert_non_null(b.wire);
    assert_null(b.req);
    sf_request_release(&b);

    /* invalid bytes never reach protobuf-c */
    assert_int_equal(sf_request_decode(&b, arena, bad, sizeof(bad), SF_OTLP_DEFAULT_MAX_DEPTH),
                     SF_INVALID);
    assert_null(b.req);
    assert_null(b.wire);
    sf_request_release(&b);
    sf_arena_destroy(arena);
}

static void test_encode_gives_a_reference(void **state)
{
    uint8_t buf[2048];
    size_t len = pack_request(buf, sizeof(buf), 2);
    size_t before = sf_alloc_in_use();
    sf_buf *out = NULL, *again = NULL;
    sf_request b;

    (void)state;
    sf_request_init(&b, NULL, buf, len, SF_OTLP_DEFAULT_MAX_DEPTH);
    assert_int_equal(sf_request_encode(&b, &out), SF_OK);  /* runs the codec */
    assert_ptr_equal(out, b.wire);
    assert_int_equal(out->spans, 3);
    assert_int_equal(sf_request_encode(&b, &again), SF_OK);
    assert_ptr_equal(again, out);
    sf_buf_unref(again);
    sf_request_release(&b);                       /* the exporter's reference lives on */
    assert_null(b.wire);
    assert_true(sf_alloc_in_use() > before);
    assert_memory_equal(out->data, buf, len);
    sf_buf_unref(out);
    assert_int_equal(sf_alloc_in_use(), before);

    /* bad bytes: nothing to hand out */
    out = NULL;
    sf_request_init(&b, NULL, buf, 3, SF_OTLP_DEFAULT_MAX_DEPTH);
    assert_int_equal(sf_request_encode(&b, &out), SF_INVALID);
    assert_null(out);
    sf_request_release(&b);
    assert_int_equal(sf_alloc_in_use(), before);
}

/* ---- torture: a receiver's whole use of a batch ----------------------- */

typedef struct life {
    uint8_t buf[2048];
    size_t len;
} life;

static sf_status batch_life(void *arg)
{
    life *l = arg;
    sf_arena *arena = sf_arena_create(4096, 0);
    sf_buf *out = NULL;
    sf_request b;
    sf_status st;

    if (arena == NULL)
        return SF_ENOMEM;
    sf_request_init(&b, arena, l->buf, l->len, SF_OTLP_DEFAULT_MAX_DEPTH);
    if ((st = sf_request_rewrite(&b, NULL, NULL)) != SF_OK)
        goto out;
    if ((st = sf_request_tree(&b)) != SF_OK)
        goto out;
    if (sf_otlp_count_spans(b.req) != 6) {
        st = SF_INVALID;
        goto out;
    }
    if ((st = sf_request_encode(&b, &out)) != SF_OK)
        goto out;
    sf_buf_unref(out);
out:
    sf_request_release(&b);
    sf_arena_destroy(arena);
    return st;
}

static void test_torture(void **state)
{
    life l;
    sf_torture t = { .name = "batch life", .run = batch_life, .arg = &l, .expect = SF_ENOMEM };

    (void)state;
    l.len = pack_request(l.buf, sizeof(l.buf), 3);
    assert_true(sf_torture_run(&t) >= 3);   /* the arena, the codec's bytes, the tree */
}


/* ---- the pool of warm buffers ---------------------------------------------- */

#define BIG ((size_t)300 * 1024)

static void *unref_elsewhere(void *b)
{
    sf_buf_unref(b);
    return NULL;
}

static void test_pool_takes_back_warm(void **state)
{
    size_t before = sf_alloc_in_use();
    sf_buf *a, *b, *c;
    pthread_t t;

    (void)state;
    /* A thread that does not use the pool gets plain buffers. */
    a = sf_buf_take(BIG);
    assert_non_null(a);
    assert_false(a->pooled);
    assert_int_equal(a->len, BIG);
    sf_buf_unref(a);
    assert_int_equal(sf_alloc_in_use(), before);
    assert_int_equal(sf_buf_pool_idle_bytes(), 0);

    sf_buf_pool_use(true);
    a = sf_buf_take(1000);                          /* small: malloc's heap serves it */
    assert_false(a->pooled);
    sf_buf_unref(a);
    a = sf_buf_take(BIG);
    assert_true(a->pooled);
    assert_true(a->cap >= BIG);
    assert_int_equal(a->len, BIG);
    memset(a->data, 0x5a, BIG);
    a->spans = 7;
    /* Given back by its last owner, on another thread (an exporter's). */
    sf_buf_ref(a);
    sf_buf_unref(a);
    assert_int_equal(sf_buf_pool_idle_bytes(), 0);   /* still held */
    assert_int_equal(pthread_create(&t, NULL, unref_elsewhere, a), 0);
    pthread_join(t, NULL);
    assert_int_equal(sf_buf_pool_idle_bytes(), a->cap);
    assert_true(sf_alloc_in_use() >= before + BIG); /* idle, still counted */
    /* The next call of about that size gets it back, as new. */
    b = sf_buf_take(BIG - 1000);
    assert_ptr_equal(b, a);
    assert_int_equal(b->len, BIG - 1000);
    assert_int_equal(b->spans, 0);
    assert_int_equal(sf_buf_pool_idle_bytes(), 0);
    /* One much smaller does not hold it (it would be counted at 4x). */
    sf_buf_unref(b);
    c = sf_buf_take(BIG / 4);
    assert_ptr_not_equal(c, a);
    assert_true(c->cap < BIG / 2);
    sf_buf_unref(c);
    sf_buf_pool_trim();
    assert_int_equal(sf_buf_pool_idle_bytes(), 0);
    assert_int_equal(sf_alloc_in_use(), before);
    sf_buf_pool_use(false);
}

static void test_pool_bounded(void **state)
{
    size_t before = sf_alloc_in_use();
    sf_buf *b[20];

    (void)state;
    sf_buf_pool_use(true);
    /* At most 16 idle buffers, the most recently given back. */
    for (int i = 0; i < 20; i++)
        b[i] = sf_buf_take(BIG);
    for (int i = 0; i < 20; i++)
        sf_buf_unref(b[i]);
    assert_int_equal(sf_buf_pool_idle_bytes(), 16 * b[19]->cap);
    assert_ptr_equal(sf_buf_take(BIG), b[19]);
    sf_buf_unref(b[19]);
    sf_buf_pool_trim();
    assert_int_equal(sf_alloc_in_use(), before);

    /* At most a sixteenth of the hard limit (64 MiB: 4 MiB, 13 of these). */
    sf_alloc_set_limits(0, (size_t)64 << 20);
    for (int i = 0; i < 20; i++)
        b[i] = sf_buf_take(BIG);
    for (int i = 0; i < 20; i++)
        sf_buf_unref(b[i]);
    assert_true(sf_buf_pool_idle_bytes() <= ((size_t)4 << 20));
    assert_true(sf_buf_pool_idle_bytes() > ((size_t)3 << 20));
    sf_buf_pool_trim();
    assert_int_equal(sf_alloc_in_use(), before);

    /* None is kept while memory is short. */
    sf_alloc_set_limits(1, (size_t)64 << 20);
    b[0] = sf_buf_take(BIG);
    assert_non_null(b[0]);
    sf_buf_unref(b[0]);
    assert_int_equal(sf_buf_pool_idle_bytes(), 0);
    assert_int_equal(sf_alloc_in_use(), before);
    sf_alloc_set_limits(0, 0);

    /* No memory: NULL, nothing held. */
    sf_alloc_fail_at(1, false);
    assert_null(sf_buf_take(BIG));
    sf_alloc_fail_at(0, 0);
    assert_int_equal(sf_alloc_in_use(), before);
    sf_buf_pool_use(false);
}

static void test_pool_resize(void **state)
{
    size_t before = sf_alloc_in_use();
    sf_buf *a, *b, *c;

    (void)state;
    sf_buf_pool_use(true);
    a = sf_buf_take(BIG);
    for (size_t i = 0; i < BIG; i++)
        a->data[i] = (uint8_t)(i * 7);
    a->spans = 3;
    /* Within a quarter: kept as it is. */
    assert_ptr_equal(sf_buf_resize(a, BIG, BIG - BIG / 8), a);
    /* Smaller by more: copied into a fitting buffer; the large one goes
     * back to the pool for the next call. */
    b = sf_buf_resize(a, BIG / 3, BIG / 3);
    assert_non_null(b);
    assert_ptr_not_equal(b, a);
    assert_true(b->cap >= BIG / 3 && b->cap < BIG / 2);
    assert_int_equal(b->spans, 3);
    for (size_t i = 0; i < BIG / 3; i++)
        if (b->data[i] != (uint8_t)(i * 7))
            fail_msg("byte %zu not kept", i);
    assert_int_equal(sf_buf_pool_idle_bytes(), a->cap);
    /* Growing: copied into a larger one. */
    c = sf_buf_resize(b, BIG / 3, 2 * BIG);
    assert_non_null(c);
    assert_true(c->cap >= 2 * BIG);
    for (size_t i = 0; i < BIG / 3; i++)
        if (c->data[i] != (uint8_t)(i * 7))
            fail_msg("byte %zu not kept", i);
    /* No memory for the copy (and none idle): the buffer stays as it was. */
    sf_buf_pool_trim();
    sf_alloc_fail_at(1, false);
    assert_null(sf_buf_resize(c, BIG / 3, BIG / 3));
    sf_alloc_fail_at(0, 0);
    assert_int_equal(c->data[BIG / 3 - 1], (uint8_t)((BIG / 3 - 1) * 7));
    sf_buf_unref(c);
    sf_buf_pool_trim();
    assert_int_equal(sf_alloc_in_use(), before);

    /* A plain buffer is reallocated as before. */
    sf_buf_pool_use(false);
    a = sf_buf_create(BIG);
    a->data[0] = 42;
    a = sf_buf_resize(a, 1, 10);
    assert_non_null(a);
    assert_int_equal(a->cap, 10);
    assert_int_equal(a->data[0], 42);
    sf_buf_unref(a);
    assert_int_equal(sf_alloc_in_use(), before);
}

/* The codec's output from the pool is the same bytes, and its buffer comes
 * back for the next pass. */
static void test_codec_output_pooled(void **state)
{
    static char name[BIG];
    size_t before = sf_alloc_in_use(), len;
    uint8_t *in = malloc(BIG + 1024);
    sf_buf *plain, *pooled, *again;

    (void)state;
    assert_non_null(in);
    memset(name, 'n', sizeof(name) - 1);
    len = pack_request_named(in, BIG + 1024, 1, name);
    assert_int_equal(sf_otlp_rewrite(in, len, 32, NULL, &plain, NULL), SF_OK);
    assert_false(plain->pooled);
    sf_buf_pool_use(true);
    assert_int_equal(sf_otlp_rewrite(in, len, 32, NULL, &pooled, NULL), SF_OK);
    assert_true(pooled->pooled);
    assert_int_equal(pooled->len, plain->len);
    assert_int_equal(pooled->spans, 1);
    assert_memory_equal(pooled->data, plain->data, plain->len);
    sf_buf_unref(pooled);
    assert_int_equal(sf_otlp_rewrite(in, len, 32, NULL, &again, NULL), SF_OK);
    assert_ptr_equal(again, pooled);                /* warm */
    assert_memory_equal(again->data, plain->data, plain->len);
    sf_buf_unref(again);
    sf_buf_unref(plain);
    sf_buf_pool_trim();
    sf_buf_pool_use(false);
    free(in);
    assert_int_equal(sf_alloc_in_use(), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_refs),
        cmocka_unit_test(test_init_reads_nothing),
        cmocka_unit_test(test_rewrite_records_the_pass),
        cmocka_unit_test(test_rewrite_failure_leaves_batch),
        cmocka_unit_test(test_decode_and_count),
        cmocka_unit_test(test_request_needs_arena),
        cmocka_unit_test(test_encode_gives_a_reference),
        cmocka_unit_test(test_torture),
        cmocka_unit_test(test_pool_takes_back_warm),
        cmocka_unit_test(test_pool_bounded),
        cmocka_unit_test(test_pool_resize),
        cmocka_unit_test(test_codec_output_pooled),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/pipeline/test_component.c: the component API on an instance
 * (pipeline/sf_component.c: the accessors components use on their opaque
 * sf_component), and what the rest of sf_component.h promises for an
 * instance outside a service (a component made by hand in a test): totals
 * all zero, no span tap, no batching asked (and *out untouched), refusals
 * counted per transport, memory limits and pressure handed to the counted
 * allocator as they are, a stopped limiter pressing no more; and the
 * core's consume for a processor that gives an edit and no consume. Inside
 * a service these are tests/pipeline/test_service's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "internal/sf_core.h"
#include "sf_alloc.h"
#include "sf_sender.h"

static const sf_component_type probe_type = {
    .name = "probe", .kind = SF_KIND_RECEIVER, .description = "test only",
};

static void test_accessors(void **state)
{
    sf_component c;
    int ctx;

    (void)state;
    memset(&c, 0, sizeof(c));
    c.type = &probe_type;
    c.id = "probe/one";
    assert_string_equal(sf_component_id(&c), "probe/one");
    assert_ptr_equal(sf_component_type_of(&c), &probe_type);
    assert_null(sf_component_ctx(&c));
    sf_component_set_ctx(&c, &ctx);
    assert_ptr_equal(sf_component_ctx(&c), &ctx);
    assert_ptr_equal(c.ctx, &ctx);
    sf_component_set_ctx(&c, NULL);
    assert_null(sf_component_ctx(&c));
    assert_false(sf_component_is_successor(&c));
    c.successor = true;
    assert_true(sf_component_is_successor(&c));
    assert_ptr_equal(sf_component_counters(&c), &c.counters);
    sf_component_set_transports(&c, 1u << SF_TRANSPORT_HTTP);
    assert_int_equal(c.transports, 1u << SF_TRANSPORT_HTTP);
    sf_component_set_transports(&c, (1u << SF_TRANSPORT_GRPC) | (1u << SF_TRANSPORT_HTTP));
    assert_int_equal(c.transports, 3);
}

static void tap(void *ctx, const uint8_t *raw, size_t len, size_t spans, bool accepted)
{
    (void)ctx; (void)raw; (void)len; (void)spans; (void)accepted;
}

static void test_outside_a_service(void **state)
{
    sf_component c;
    sf_totals t;
    sf_batching b;

    (void)state;
    memset(&c, 0, sizeof(c));
    c.type = &probe_type;
    c.id = "probe";
    c.counters.sent_spans = 5;                  /* its own counters are not totals */
    memset(&t, 0xff, sizeof(t));
    sf_component_totals(&c, &t);
    assert_int_equal(t.accepted, 0);
    assert_int_equal(t.exported, 0);
    assert_int_equal(t.enqueue_failed, 0);
    for (int r = 0; r < SF_REASON_COUNT; r++)
        assert_true(t.refused[r] == 0 && t.dropped[r] == 0 && t.send_failed[r] == 0);

    sf_component_set_span_tap(&c, tap, &c);     /* no service: no effect, no crash */
    sf_component_set_log_tap(&c, NULL, &c);
    sf_component_set_span_gate(&c, NULL);
    sf_component_set_span_gate(&c, &(sf_span_gate){ 0 });
    assert_false(sf_component_has_receiver(&c, "journald", SF_SIGNAL_LOGS));
    memset(&b, 0x5a, sizeof(b));
    assert_false(sf_component_batching(&c, &b));
    for (size_t i = 0; i < sizeof(b); i++)
        assert_int_equal(((unsigned char *)&b)[i], 0x5a);

    sf_component_refuse(&c, SF_TRANSPORT_HTTP, SF_SIGNAL_TRACES, 7, SF_REASON_MALFORMED);
    sf_component_refuse(&c, SF_TRANSPORT_HTTP, SF_SIGNAL_TRACES, 2, SF_REASON_MALFORMED);
    assert_int_equal(c.transport[SF_SIGNAL_TRACES][SF_TRANSPORT_HTTP].requests, 2);
    assert_int_equal(
        c.transport[SF_SIGNAL_TRACES][SF_TRANSPORT_HTTP].refused_requests[SF_REASON_MALFORMED], 2);
    assert_int_equal(
        c.transport[SF_SIGNAL_TRACES][SF_TRANSPORT_HTTP].refused_spans[SF_REASON_MALFORMED], 9);
    assert_int_equal(c.transport[SF_SIGNAL_TRACES][SF_TRANSPORT_GRPC].requests, 0);
    /* each signal's refusals are its own: log records are not spans */
    sf_component_refuse(&c, SF_TRANSPORT_HTTP, SF_SIGNAL_LOGS, 5, SF_REASON_TOO_LARGE);
    assert_int_equal(
        c.transport[SF_SIGNAL_LOGS][SF_TRANSPORT_HTTP].refused_spans[SF_REASON_TOO_LARGE], 5);
    assert_int_equal(
        c.transport[SF_SIGNAL_TRACES][SF_TRANSPORT_HTTP].refused_spans[SF_REASON_TOO_LARGE], 0);
    assert_int_equal(c.transport[SF_SIGNAL_METRICS][SF_TRANSPORT_HTTP].requests, 0);
}

static void test_memory_outside_a_service(void **state)
{
    sf_component c;
    size_t soft, hard;

    (void)state;
    memset(&c, 0, sizeof(c));
    c.type = &probe_type;
    assert_true(sf_component_may_accept(&c));
    sf_component_set_memory_limits(&c, 1u << 30, 2u << 30);
    sf_alloc_limits(&soft, &hard);
    assert_int_equal(soft, 1u << 30);
    assert_int_equal(hard, 2u << 30);
    assert_true(sf_component_may_accept(&c));
    sf_component_set_memory_pressure(&c, true);
    assert_false(sf_component_may_accept(&c));
    sf_component_set_memory_pressure(&c, false);
    assert_true(sf_component_may_accept(&c));
    sf_component_set_memory_pressure(&c, true);
    /* a limiter that stops (0, 0) presses no more */
    sf_component_set_memory_limits(&c, 0, 0);
    sf_alloc_limits(&soft, &hard);
    assert_int_equal(soft, 0);
    assert_int_equal(hard, 0);
    assert_false(c.mem_pressure);
    assert_true(sf_component_may_accept(&c));
}

/* A processor type that gives an edit (for logs only) and no consume: the
 * core's accounting (sf_component_consume). */
static const sf_otlp_edit editor_edit;
static unsigned edited_calls;

static const sf_otlp_edit *editor_edit_of(const sf_component *self, sf_signal signal)
{
    (void)self;
    return signal == SF_SIGNAL_LOGS ? &editor_edit : NULL;
}

static void editor_edited(sf_component *self, const sf_request *batch)
{
    edited_calls++;
    sf_count(&sf_component_counters(self)->values[0], batch->stats.inserted);
}

static const sf_component_type editor_type = {
    .name = "editor", .kind = SF_KIND_PROCESSOR, .description = "test only",
    .signals = SF_SIGNALS_ALL, .edit = editor_edit_of,
    .edit_failure = "that could not be edited", .edited = editor_edited,
};

static void test_edit_consume(void **state)
{
    sf_component c;
    sf_counters *n = &c.counters;
    sf_request b;

    (void)state;
    memset(&c, 0, sizeof(c));
    c.type = &editor_type;
    c.id = "editor";
    edited_calls = 0;

    /* edited: the items the pass took out are incoming and dropped
     * (filtered, or filter_failed), the rest go out */
    memset(&b, 0, sizeof(b));
    b.signal = SF_SIGNAL_LOGS;
    b.spans = 4;
    b.edited_by = &c;
    b.edit_status = SF_OK;
    b.stats.filtered_items = 3;
    b.stats.filter_failed_items = 1;
    b.stats.capped_items = 2;
    b.stats.removed_attributes = 5;
    b.stats.inserted = 6;
    assert_int_equal(sf_component_consume(&c, &b), SF_OK);
    assert_int_equal(atomic_load(&n->incoming_items), 4 + 3 + 2);
    assert_int_equal(atomic_load(&n->outgoing_items), 4);
    assert_int_equal(atomic_load(&n->dropped_spans[SF_REASON_FILTERED]), 2 + 2);
    assert_int_equal(atomic_load(&n->dropped_spans[SF_REASON_FILTER_FAILED]), 1);
    assert_int_equal(atomic_load(&n->removed_attributes), 5);
    assert_int_equal(atomic_load(&n->values[0]), 6);
    assert_int_equal(edited_calls, 1);

    /* the edit failed for want of memory: dropped whole, nothing of its
     * stats counted, the type not asked */
    b.edit_status = SF_ENOMEM;
    assert_int_equal(sf_component_consume(&c, &b), SF_ENOMEM);
    assert_int_equal(atomic_load(&n->incoming_items), 9 + 4);
    assert_int_equal(atomic_load(&n->dropped_spans[SF_REASON_MEMORY_LIMIT]), 4);
    assert_int_equal(atomic_load(&n->outgoing_items), 4);
    assert_int_equal(edited_calls, 1);

    /* the core did not run the edit: fail closed */
    b.edited_by = NULL;
    assert_int_equal(sf_component_consume(&c, &b), SF_FILTER);
    assert_int_equal(atomic_load(&n->dropped_spans[SF_REASON_FILTER_FAILED]), 1 + 4);
    assert_int_equal(edited_calls, 1);

    /* a signal the edit leaves alone passes as it came */
    b.signal = SF_SIGNAL_TRACES;
    assert_int_equal(sf_component_consume(&c, &b), SF_OK);
    assert_int_equal(atomic_load(&n->incoming_items), 13 + 4 + 4);
    assert_int_equal(atomic_load(&n->outgoing_items), 4 + 4);
    assert_int_equal(edited_calls, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accessors),
        cmocka_unit_test(test_outside_a_service),
        cmocka_unit_test(test_memory_outside_a_service),
        cmocka_unit_test(test_edit_consume),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

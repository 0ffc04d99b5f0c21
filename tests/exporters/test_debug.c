/* tests/exporters/test_debug.c: the `debug` exporter's exact output at each
 * verbosity, captured by putting a pipe on stderr; escaping of client
 * strings; counting; the config map through the real loader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exporters/debug/debug.h"
#include "internal/sf_core.h"
#include "tests/sf_torture.h"

extern const sf_component_type sf_debug_exporter_type;

/* ---- a request with every kind of field ---------------------------------- */

typedef struct packed {
    uint8_t data[4096];
    size_t len;
} packed;

static void make_request(packed *out, const char *name1)
{
    sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    sf_otlp_resource_spans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    sf_otlp_resource res = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    sf_otlp_scope_spans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    sf_otlp_scope scope = OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
    sf_otlp_kv kv[6];
    sf_otlp_any av[8];
    sf_otlp_kv *res_kvs[1] = { &kv[0] }, *span_kvs[3] = { &kv[1], &kv[2], &kv[3] };
    sf_otlp_kv *ev_kvs[1] = { &kv[4] }, *link_kvs[1] = { &kv[5] };
    sf_otlp_any *arr_items[2] = { &av[6], &av[7] };
    Opentelemetry__Proto__Common__V1__ArrayValue arr =
        OPENTELEMETRY__PROTO__COMMON__V1__ARRAY_VALUE__INIT;
    sf_otlp_event ev = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__EVENT__INIT, *evp = &ev;
    sf_otlp_link ln = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__LINK__INIT, *lnp = &ln;
    sf_otlp_status status = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__INIT;
    sf_otlp_span s0 = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    sf_otlp_span s1 = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    sf_otlp_span *sp[2] = { &s0, &s1 };
    sf_otlp_resource_spans *rsp = &rs;
    sf_otlp_scope_spans *ssp = &ss;
    static uint8_t trace_id[16] = { 0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
                                    0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36 };
    static uint8_t id0[8] = { 0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7 };
    static uint8_t id1[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    static uint8_t bytes[3] = { 0xde, 0xad, 0x01 };

    for (int i = 0; i < 6; i++) {
        sf_otlp_kv init = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;

        kv[i] = init;
        kv[i].value = &av[i];
    }
    for (int i = 0; i < 8; i++) {
        sf_otlp_any init = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;

        av[i] = init;
    }
    kv[0].key = "service.name";
    av[0].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    av[0].string_value = "sglang";
    kv[1].key = "gen_ai.request.model";
    av[1].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    av[1].string_value = "llama-3";
    kv[2].key = "gen_ai.usage.output_tokens";
    av[2].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
    av[2].int_value = 512;
    kv[3].key = "list";
    av[3].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE;
    av[3].array_value = &arr;
    arr.n_values = 2;
    arr.values = arr_items;
    av[6].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
    av[6].bool_value = 1;
    av[7].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
    av[7].double_value = 0.25;
    kv[4].key = "ttft";
    av[4].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE;
    av[4].bytes_value = (ProtobufCBinaryData){ 3, bytes };
    kv[5].key = "why";
    av[5].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    av[5].string_value = "batch";

    res.n_attributes = 1;
    res.attributes = res_kvs;
    scope.name = "sglang.tracing";
    scope.version = "0.4";
    ev.name = "first_token";
    ev.time_unix_nano = 1700000000000250000ull;
    ev.n_attributes = 1;
    ev.attributes = ev_kvs;
    ln.trace_id = (ProtobufCBinaryData){ 16, trace_id };
    ln.span_id = (ProtobufCBinaryData){ 8, id1 };
    ln.n_attributes = 1;
    ln.attributes = link_kvs;
    status.code = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
    status.message = "oom";

    s0.trace_id = (ProtobufCBinaryData){ 16, trace_id };
    s0.span_id = (ProtobufCBinaryData){ 8, id0 };
    s0.name = (char *)name1;
    s0.kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
    s0.start_time_unix_nano = 1700000000000000000ull;
    s0.end_time_unix_nano = 1700000001500000000ull;
    s0.n_attributes = 3;
    s0.attributes = span_kvs;
    s0.n_events = 1;
    s0.events = &evp;
    s0.n_links = 1;
    s0.links = &lnp;
    s0.status = &status;
    s0.dropped_attributes_count = 2;

    s1.trace_id = (ProtobufCBinaryData){ 16, trace_id };
    s1.span_id = (ProtobufCBinaryData){ 8, id1 };
    s1.parent_span_id = (ProtobufCBinaryData){ 8, id0 };
    s1.name = "prefill";
    s1.kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL;
    s1.start_time_unix_nano = 1700000000000000000ull;
    s1.end_time_unix_nano = 1700000000000012500ull;

    ss.scope = &scope;
    ss.n_spans = 2;
    ss.spans = sp;
    rs.resource = &res;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    out->len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
    assert_true(out->len <= sizeof(out->data));
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, out->data);
}

/* ---- running the exporter with stderr captured ------------------------------ */

/* Output of one consume() of the request at `verbosity` (status in *st). */
static char *run(int verbosity, const char *id, const char *name1, sf_status *st,
                 uint64_t *sent)
{
    static char out[16384];
    sf_debug_config cfg = { .verbosity = verbosity };
    struct sf_component comp;
    packed p;
    sf_arena *arena = sf_arena_create(4096, 0);
    sf_request b;
    int fds[2], saved;
    ssize_t n;
    size_t len = 0;

    memset(&comp, 0, sizeof(comp));
    comp.type = &sf_debug_exporter_type;
    comp.id = id;
    comp.config = &cfg;
    make_request(&p, name1);
    assert_int_equal(sf_request_init(&b, arena, p.data, p.len, SF_OTLP_DEFAULT_MAX_DEPTH), SF_OK);
    /* what the core does before any exporter sees a batch */
    assert_int_equal(sf_request_rewrite(&b, NULL, NULL), SF_OK);
    assert_int_equal(comp.type->create(&comp, &cfg), SF_OK);
    assert_int_equal(comp.type->start(&comp), SF_OK);

    assert_int_equal(pipe(fds), 0);
    saved = dup(STDERR_FILENO);
    dup2(fds[1], STDERR_FILENO);
    *st = comp.type->consume(&comp, &b);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fds[1]);
    while ((n = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
        len += (size_t)n;
    close(fds[0]);
    out[len] = '\0';

    *sent = sf_counter_get(&comp.counters.sent_spans);
    comp.type->shutdown(&comp);
    comp.type->destroy(&comp);
    assert_null(sf_component_ctx(&comp));
    sf_request_release(&b);
    sf_arena_destroy(arena);
    return out;
}

static void test_basic(void **state)
{
    sf_status st;
    uint64_t sent;
    const char *out = run(SF_DEBUG_BASIC, "debug", "llm.generate", &st, &sent);

    (void)state;
    assert_int_equal(st, SF_OK);
    assert_string_equal(out, "debug: 2 spans\n");
    assert_int_equal(sent, 2);
}

static void test_normal(void **state)
{
    sf_status st;
    uint64_t sent;
    const char *out = run(SF_DEBUG_NORMAL, "debug/spans", "llm.generate", &st, &sent);

    (void)state;
    assert_int_equal(st, SF_OK);
    assert_string_equal(out,
        "debug/spans: trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7 "
        "name=\"llm.generate\" kind=SERVER duration=1.500s status=ERROR attributes=3\n"
        "debug/spans: trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=0102030405060708 "
        "name=\"prefill\" kind=INTERNAL duration=12.500us status=UNSET attributes=0\n");
    assert_int_equal(sent, 2);
}

static void test_detailed(void **state)
{
    sf_status st;
    uint64_t sent;
    const char *out = run(SF_DEBUG_DETAILED, "debug", "llm.generate", &st, &sent);

    (void)state;
    assert_int_equal(st, SF_OK);
    assert_string_equal(out,
        "debug: 2 spans\n"
        "resource_spans #0 schema_url \"\"\n"
        "  resource attributes: 1\n"
        "    -> \"service.name\": Str(\"sglang\")\n"
        "  scope_spans #0 scope \"sglang.tracing\" version \"0.4\" schema_url \"\"\n"
        "    scope attributes: 0\n"
        "    span #0\n"
        "      trace_id: 4bf92f3577b34da6a3ce929d0e0e4736\n"
        "      span_id: 00f067aa0ba902b7\n"
        "      parent_span_id: \n"
        "      trace_state: \"\"\n"
        "      flags: 0x00000000\n"
        "      name: \"llm.generate\"\n"
        "      kind: SERVER\n"
        "      start_time_unix_nano: 1700000000000000000\n"
        "      end_time_unix_nano: 1700000001500000000\n"
        "      duration: 1.500s\n"
        "      status: ERROR \"oom\"\n"
        "      attributes: 3 (dropped 2)\n"
        "        -> \"gen_ai.request.model\": Str(\"llama-3\")\n"
        "        -> \"gen_ai.usage.output_tokens\": Int(512)\n"
        "        -> \"list\": Slice([Bool(true), Double(0.25)])\n"
        "      events: 1 (dropped 0)\n"
        "        event #0: name \"first_token\" time_unix_nano 1700000000000250000 attributes 1\n"
        "          -> \"ttft\": Bytes(dead01)\n"
        "      links: 1 (dropped 0)\n"
        "        link #0: trace_id 4bf92f3577b34da6a3ce929d0e0e4736 span_id 0102030405060708 "
        "trace_state \"\" attributes 1\n"
        "          -> \"why\": Str(\"batch\")\n"
        "    span #1\n"
        "      trace_id: 4bf92f3577b34da6a3ce929d0e0e4736\n"
        "      span_id: 0102030405060708\n"
        "      parent_span_id: 00f067aa0ba902b7\n"
        "      trace_state: \"\"\n"
        "      flags: 0x00000000\n"
        "      name: \"prefill\"\n"
        "      kind: INTERNAL\n"
        "      start_time_unix_nano: 1700000000000000000\n"
        "      end_time_unix_nano: 1700000000000012500\n"
        "      duration: 12.500us\n"
        "      status: UNSET \"\"\n"
        "      attributes: 0 (dropped 0)\n"
        "      events: 0 (dropped 0)\n"
        "      links: 0 (dropped 0)\n");
    assert_int_equal(sent, 2);
}

/* A span name from a client cannot forge a line or send terminal escapes. */
static void test_client_strings_escaped(void **state)
{
    sf_status st;
    uint64_t sent;
    const char *out = run(SF_DEBUG_NORMAL, "debug", "x\n\x1b[31mfake\"\\", &st, &sent);

    (void)state;
    assert_int_equal(st, SF_OK);
    assert_non_null(strstr(out, " name=\"x\\n\\x1b[31mfake\\\"\\\\\" kind=SERVER"));
    assert_null(strchr(out, '\x1b'));
    assert_int_equal(strchr(out, '\n') - out, strstr(out, "\ndebug: trace_id=") - out);
}

static void test_create_survives_allocation_failure(void **state)
{
    sf_debug_config cfg = { .verbosity = SF_DEBUG_DETAILED };
    struct sf_component comp;

    (void)state;
    memset(&comp, 0, sizeof(comp));
    comp.type = &sf_debug_exporter_type;
    comp.id = "debug";
    assert_true(sf_torture_create(&comp, &cfg, false) >= 1);
}

/* ---- config through the loader --------------------------------------------- */

static const char *load_exporter(const char *exporter_yaml)
{
    static char out[2048];
    char yaml[2048];
    sf_diag *d = sf_diag_create("x.yaml");
    sf_config *cfg = NULL;
    size_t n = 0;

    snprintf(yaml, sizeof(yaml),
             "receivers:\n  otlp:\n    protocols:\n      grpc:\n"
             "exporters:\n  debug:\n%s"
             "service:\n  pipelines:\n    traces:\n      receivers: [otlp]\n"
             "      exporters: [debug]\n", exporter_yaml);
    sf_config_load_string("x.yaml", yaml, strlen(yaml), d, &cfg);
    out[0] = '\0';
    for (size_t i = 0; i < sf_diag_count(d); i++)
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%s\n", sf_diag_message(d, i));
    if (cfg != NULL) {
        const sf_debug_config *c = sf_config_find(cfg, "debug")->config;

        n += (size_t)snprintf(out + n, sizeof(out) - n, "verbosity=%d\n", c->verbosity);
    }
    sf_config_destroy(cfg);
    sf_diag_destroy(d);
    return out;
}

static void test_config(void **state)
{
    (void)state;
    assert_string_equal(load_exporter(""), "verbosity=0\n");
    assert_string_equal(load_exporter("    verbosity: detailed\n"), "verbosity=2\n");
    assert_string_equal(load_exporter("    verbosity: loud\n"),
                        "x.yaml:7:16: exporters.debug.verbosity: unknown value 'loud' "
                        "(expected one of 'basic', 'normal', 'detailed')\n");
    assert_string_equal(load_exporter("    verbosity: normal\n"
                                      "    sampling_initial: 5\n"),
                        "x.yaml:8:5: exporters.debug.sampling_initial: warning: "
                        "'sampling_initial' has no effect in spanfence\n"
                        "verbosity=1\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_normal),
        cmocka_unit_test(test_detailed),
        cmocka_unit_test(test_client_strings_escaped),
        cmocka_unit_test(test_create_survives_allocation_failure),
        cmocka_unit_test(test_config),
    };

    sf_log_set_level(SF_LOG_OFF);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/extensions/test_trace_control_engine_log.c: a target's engine_log:
 * its config (SGLang's two drop messages by default, PCRE2 patterns checked
 * at validate, the receiver required), the matching of one logs request
 * (the engine's records only, one event per message, the trace ops a
 * message says), and the counting the log tap does for a window (only
 * while it counts, only from the named receiver). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extensions/trace_control/trace_control_int.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "tests/sf_test.h"

#define HEAD                                                                               \
    "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:4318\n" \
    "  journald:\n    units: [sglang]\n"                                                   \
    "exporters:\n  debug:\n"                                                               \
    "extensions:\n  trace_control:\n    socket: /tmp/x.sock\n    audit_log: /tmp/x.jsonl\n" \
    "    levels: [0, 3]\n    targets:\n      r1:\n"                                        \
    "        endpoint: http://127.0.0.1:1/set_trace_level\n"
#define TAIL                                                                               \
    "service:\n  extensions: [trace_control]\n  pipelines:\n"                              \
    "    traces:\n      receivers: [otlp]\n      exporters: [debug]\n"                     \
    "    logs:\n      receivers: [journald]\n      exporters: [debug]\n"

static sf_config *load(const char *yaml, const char **messages)
{
    sf_diag *d = sf_diag_create("x.yaml");
    sf_config *cfg = NULL;

    sf_config_load_string("x.yaml", yaml, strlen(yaml), d, &cfg);
    *messages = sf_diag_count(d) > 0 ? sf_test_config_messages("x.yaml", yaml) : "";
    sf_diag_destroy(d);
    return cfg;
}

static void test_config(void **state)
{
    const char *msg;
    sf_config *cfg;
    const sf_tc_target *t;

    (void)state;
    /* defaults: SGLang's two messages */
    cfg = load(HEAD "        engine_log: {receiver: journald, match: {_SYSTEMD_UNIT: "
               "sglang.service}}\n" TAIL, &msg);
    assert_string_equal(msg, "");
    assert_non_null(cfg);
    t = sf_tc_find_target(sf_tc_config_of(cfg), "r1");
    assert_string_equal(t->engine_log.receiver, "journald");
    assert_int_equal(t->engine_log.n_drops, 2);
    assert_string_equal(t->engine_log.drops[0], SF_TC_DROP_SDK_QUEUE);
    assert_string_equal(t->engine_log.drops[1], SF_TC_DROP_ZMQ);
    assert_int_equal(t->engine_log.match.n, 1);
    sf_config_destroy(cfg);

    /* no engine_log: none */
    cfg = load(HEAD TAIL, &msg);
    assert_string_equal(msg, "");
    assert_null(sf_tc_find_target(sf_tc_config_of(cfg), "r1")->engine_log.receiver);
    sf_config_destroy(cfg);

    /* patterns of one's own replace the defaults */
    cfg = load(HEAD "        engine_log:\n          receiver: journald\n"
               "          drops: ['lost (?<ops>\\d+) spans']\n" TAIL, &msg);
    assert_string_equal(msg, "");
    t = sf_tc_find_target(sf_tc_config_of(cfg), "r1");
    assert_int_equal(t->engine_log.n_drops, 1);
    sf_config_destroy(cfg);

    /* errors name the place */
    cfg = load(HEAD "        engine_log: {receiver: journald, drops: ['lost (']}\n" TAIL, &msg);
    assert_non_null(strstr(msg, "r1.engine_log.drops[0]: invalid pattern 'lost (' at offset"));
    sf_config_destroy(cfg);
    cfg = load(HEAD "        engine_log: {match: {a: b}}\n" TAIL, &msg);
    assert_non_null(strstr(msg, "r1.engine_log: missing required key 'receiver'"));
    sf_config_destroy(cfg);
    cfg = load(HEAD "        engine_log: {receiver: journald, unit: x}\n" TAIL, &msg);
    assert_non_null(strstr(msg, "unknown key 'unit' (expected receiver, match, drops)"));
    sf_config_destroy(cfg);
    cfg = load(HEAD "        engine_log: {receiver: journald, drops: []}\n" TAIL, &msg);
    assert_non_null(strstr(msg, "expected a list of 1 to 8 patterns"));
    sf_config_destroy(cfg);
}

/* ---- a logs request as the journald receiver makes it -------------------- */

typedef struct line {
    const char *unit;           /* _SYSTEMD_UNIT, NULL: none */
    const char *body;           /* NULL: no body */
} line;

static uint8_t *logs_request(const line *lines, size_t n, size_t *len)
{
    Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest req =
        OPENTELEMETRY__PROTO__COLLECTOR__LOGS__V1__EXPORT_LOGS_SERVICE_REQUEST__INIT;
    Opentelemetry__Proto__Logs__V1__ResourceLogs rl =
        OPENTELEMETRY__PROTO__LOGS__V1__RESOURCE_LOGS__INIT, *rlp = &rl;
    Opentelemetry__Proto__Logs__V1__ScopeLogs sl =
        OPENTELEMETRY__PROTO__LOGS__V1__SCOPE_LOGS__INIT, *slp = &sl;
    Opentelemetry__Proto__Logs__V1__LogRecord r[8], *rp[8];
    Opentelemetry__Proto__Common__V1__AnyValue body[8], uv[8];
    Opentelemetry__Proto__Common__V1__KeyValue kv[8], *kvp[8];
    uint8_t *out;

    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++) {
        opentelemetry__proto__logs__v1__log_record__init(&r[i]);
        opentelemetry__proto__common__v1__any_value__init(&body[i]);
        opentelemetry__proto__common__v1__any_value__init(&uv[i]);
        opentelemetry__proto__common__v1__key_value__init(&kv[i]);
        if (lines[i].body != NULL) {
            body[i].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
            body[i].string_value = (char *)lines[i].body;
            r[i].body = &body[i];
        }
        if (lines[i].unit != NULL) {
            uv[i].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
            uv[i].string_value = (char *)lines[i].unit;
            kv[i].key = "_SYSTEMD_UNIT";
            kv[i].value = &uv[i];
            kvp[i] = &kv[i];
            r[i].n_attributes = 1;
            r[i].attributes = &kvp[i];
        }
        rp[i] = &r[i];
    }
    sl.n_log_records = n;
    sl.log_records = rp;
    rl.n_scope_logs = 1;
    rl.scope_logs = &slp;
    req.n_resource_logs = 1;
    req.resource_logs = &rlp;
    *len = opentelemetry__proto__collector__logs__v1__export_logs_service_request__get_packed_size(
        &req);
    out = malloc(*len + 1);
    assert_non_null(out);
    opentelemetry__proto__collector__logs__v1__export_logs_service_request__pack(&req, out);
    return out;
}

static const line sglang_lines[] = {
    { "sglang.service", "[2026-12-06 07:00:00] Prefill batch. #new-seq: 1" },
    { "sglang.service", "Queue is full, likely spans will be dropped." },
    { "sglang.service", "ZMQ send buffer full, dropping 37 trace ops for rid-1" },
    { "other.service", "ZMQ send buffer full, dropping 5 trace ops for rid-9" },
    { NULL, "Queue is full, likely spans will be dropped." },
    { "sglang.service", NULL },
    { "sglang.service", "ZMQ send buffer full, dropping 4 trace ops for rid-2" },
};

static void sglang_log(sf_tc_engine_log *el)
{
    static char *keys[] = { "_SYSTEMD_UNIT" }, *values[] = { "sglang.service" };

    memset(el, 0, sizeof(*el));
    el->receiver = "journald";
    el->match = (sf_strmap){ .n = 1, .keys = keys, .values = values };
    el->n_drops = 2;
    el->drops[0] = SF_TC_DROP_SDK_QUEUE;
    el->drops[1] = SF_TC_DROP_ZMQ;
}

static void test_scan(void **state)
{
    sf_tc_engine_log el;
    tc_drops d;
    tc_engine_drops got;
    size_t len;
    uint8_t *req = logs_request(sglang_lines, 7, &len);

    (void)state;
    sglang_log(&el);
    assert_int_equal(sf_tc_drops_compile(&el, &d), SF_OK);
    assert_int_equal(d.n, 2);
    assert_int_equal(d.ops_group[0], 0);        /* the SDK's: no number */
    assert_int_equal(d.ops_group[1], 1);
    assert_int_equal(sf_tc_engine_log_scan(&el, &d, req, len, &got), SF_OK);
    /* the engine's three drop messages; not another unit's, not a record
     * without the unit */
    assert_int_equal(got.events, 3);
    assert_int_equal(got.sized, 2);
    assert_int_equal(got.ops, 41);

    /* without a match: every record of the receiver */
    el.match.n = 0;
    assert_int_equal(sf_tc_engine_log_scan(&el, &d, req, len, &got), SF_OK);
    assert_int_equal(got.events, 5);
    assert_int_equal(got.ops, 46);

    /* bytes that are not a logs request: refused, nothing counted */
    req[0] ^= 0xff;
    assert_int_equal(sf_tc_engine_log_scan(&el, &d, req, len, &got), SF_INVALID);
    assert_int_equal(got.events, 0);
    assert_int_equal(sf_tc_engine_log_scan(&el, &d, (const uint8_t *)"\x0a\x05\x12", 3, &got),
                     SF_INVALID);
    sf_tc_drops_free(&d);
    free(req);
}

/* A number longer than 18 digits is taken no further (never overflows). */
static void test_scan_large_number(void **state)
{
    static const line l[] = {
        { "sglang.service",
          "ZMQ send buffer full, dropping 99999999999999999999999 trace ops for rid-1" },
    };
    sf_tc_engine_log el;
    tc_drops d;
    tc_engine_drops got;
    size_t len;
    uint8_t *req = logs_request(l, 1, &len);

    (void)state;
    sglang_log(&el);
    assert_int_equal(sf_tc_drops_compile(&el, &d), SF_OK);
    assert_int_equal(sf_tc_engine_log_scan(&el, &d, req, len, &got), SF_OK);
    assert_int_equal(got.events, 1);
    assert_int_equal(got.ops, 999999999999999999ull);
    sf_tc_drops_free(&d);
    free(req);
}

/* The log tap counts into a window only while it counts, and only what
 * the target's receiver emitted. */
static void test_tap_counts(void **state)
{
    sf_tc_config cfg;
    sf_tc_target t;
    tc_window w;
    tc_ctx x;
    size_t len;
    uint8_t *req = logs_request(sglang_lines, 7, &len);

    (void)state;
    memset(&cfg, 0, sizeof(cfg));
    memset(&t, 0, sizeof(t));
    memset(&w, 0, sizeof(w));
    memset(&x, 0, sizeof(x));
    t.id = "r1";
    sglang_log(&t.engine_log);
    cfg.targets.n = 1;
    cfg.targets.v = &t;
    w.target = &t;
    x.cfg = &cfg;
    x.w = &w;
    assert_int_equal(sf_tc_drops_compile(&t.engine_log, &w.drops), SF_OK);

    /* no window: nothing read */
    sf_tc_log_tap(&x, "journald", req, len, true);
    assert_int_equal(atomic_load(&w.engine[TC_ENG_EVENTS]), 0);

    sf_tc_window_count_start(&x, &w);
    assert_int_equal(atomic_load(&x.log_counting), 1);
    assert_false(atomic_load(&w.counting));     /* no match: spans are not counted */
    sf_tc_log_tap(&x, "journald", req, len, true);
    sf_tc_log_tap(&x, "journald", req, len, false);     /* refused: the engine said it */
    sf_tc_log_tap(&x, "otlp", req, len, true);          /* another receiver */
    sf_tc_log_tap(&x, "journald", (const uint8_t *)"\xff", 1, true);
    assert_int_equal(atomic_load(&w.engine[TC_ENG_EVENTS]) - w.engine_at_start[TC_ENG_EVENTS], 6);
    assert_int_equal(atomic_load(&w.engine[TC_ENG_SIZED]), 4);
    assert_int_equal(atomic_load(&w.engine[TC_ENG_OPS]), 82);
    assert_int_equal(atomic_load(&w.engine[TC_ENG_UNREAD]), 1);
    sf_tc_window_count_stop(&x, &w);
    assert_int_equal(atomic_load(&x.log_counting), 0);
    sf_tc_log_tap(&x, "journald", req, len, true);
    assert_int_equal(atomic_load(&w.engine[TC_ENG_EVENTS]), 6);

    /* the next window starts from what the last one left */
    sf_tc_window_count_start(&x, &w);
    assert_int_equal(w.engine_at_start[TC_ENG_EVENTS], 6);
    sf_tc_log_tap(&x, "journald", req, len, true);
    assert_int_equal(atomic_load(&w.engine[TC_ENG_EVENTS]) - w.engine_at_start[TC_ENG_EVENTS], 3);
    sf_tc_window_count_stop(&x, &w);
    sf_tc_drops_free(&w.drops);
    free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_scan_large_number),
        cmocka_unit_test(test_tap_counts),
    };

    sf_log_set_level(SF_LOG_ERROR);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/receivers/test_journald.c: the `journald` receiver's parts that do
 * not need a journal: the config (units mangled as journalctl does,
 * matches as sd_journal terms, priority levels and ranges, defaults), the
 * UTF-8 repair, PRIORITY as upstream maps it, and the record builder
 * (body, severity, time, the three attributes; bodies cut and repaired,
 * fields left out, all counted; the batch bound), decoded back with
 * protobuf-c. Reading real journal files is tests/e2e/journald_read.test.js;
 * refused keys are in tests/configs/invalid/journald.yaml. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/sf_core.h"
#include "receivers/journald/journald.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest logs_req;
typedef Opentelemetry__Proto__Logs__V1__LogRecord log_record;

static sf_config *load(const char *settings, sf_journald_config **out)
{
    static const char base[] =
        "receivers:\n  journald:\n%s"
        "exporters:\n  debug:\n"
        "service:\n  pipelines:\n    logs:\n      receivers: [journald]\n"
        "      exporters: [debug]\n";
    char yaml[4096];
    sf_diag *d = sf_diag_create(NULL);
    sf_config *cfg = NULL;

    snprintf(yaml, sizeof(yaml), base, settings);
    if (sf_config_load_string("jd.yaml", yaml, strlen(yaml), d, &cfg) != SF_OK) {
        sf_diag_print(d);
        fail();
    }
    sf_diag_destroy(d);
    *out = sf_config_find(cfg, "journald")->config;
    return cfg;
}

/* Upstream's keys become sd_journal terms at load time. */
static void test_config(void **state)
{
    sf_journald_config *c;
    sf_config *cfg;

    (void)state;
    cfg = load("    units: [sglang, dcgm-exporter.service, user@1000.slice]\n"
               "    identifiers: [python3]\n"
               "    matches:\n      - _SYSTEMD_UNIT: ssh.service\n"
               "      - _SYSTEMD_UNIT: kubelet.service\n        _UID: \"1000\"\n"
               "    priority: err..notice\n    start_at: beginning\n"
               "    directory: /var/lib/x/journal\n    cursor_file: /var/lib/x/cursor\n", &c);
    assert_int_equal(c->units.n, 3);
    assert_string_equal(c->units.v[0], "_SYSTEMD_UNIT=sglang.service");
    assert_string_equal(c->units.v[1], "_SYSTEMD_UNIT=dcgm-exporter.service");
    assert_string_equal(c->units.v[2], "_SYSTEMD_UNIT=user@1000.slice");
    assert_string_equal(c->identifiers.v[0], "SYSLOG_IDENTIFIER=python3");
    assert_int_equal(c->matches.n, 2);
    assert_int_equal(c->matches.v[0].n, 1);
    assert_string_equal(c->matches.v[0].terms[0], "_SYSTEMD_UNIT=ssh.service");
    assert_int_equal(c->matches.v[1].n, 2);
    assert_string_equal(c->matches.v[1].terms[1], "_UID=1000");
    assert_int_equal(c->priority.most, 3);
    assert_int_equal(c->priority.least, 5);
    assert_int_equal(c->start_at, SF_JD_START_BEGINNING);
    assert_string_equal(c->directory, "/var/lib/x/journal");
    assert_string_equal(c->cursor_file, "/var/lib/x/cursor");
    sf_config_destroy(cfg);

    /* upstream's defaults: info and more urgent, from the end; our bounds */
    cfg = load("", &c);
    assert_int_equal(c->priority.most, 0);
    assert_int_equal(c->priority.least, 6);
    assert_int_equal(c->start_at, SF_JD_START_END);
    assert_null(c->directory);
    assert_null(c->cursor_file);
    assert_int_equal(c->units.n, 0);
    assert_int_equal(c->max_message_size, 16384);
    assert_int_equal(c->max_batch_records, 256);
    sf_config_destroy(cfg);

    cfg = load("    priority: 7\n", &c);
    assert_int_equal(c->priority.least, 7);
    sf_config_destroy(cfg);
    cfg = load("    priority: warning\n", &c);
    assert_int_equal(c->priority.least, 4);
    sf_config_destroy(cfg);
}

static void test_utf8_repair(void **state)
{
    uint8_t out[64];
    size_t bad, n;
    bool cut;

    (void)state;
    /* valid text, multi-byte included, passes as it is */
    n = sf_jd_utf8_repair((const uint8_t *)"d\xc3\xa9j\xc3\xa0 \xf0\x9f\x99\x82", 11, out,
                          sizeof(out), &bad, &cut);
    assert_int_equal(n, 11);
    assert_memory_equal(out, "d\xc3\xa9j\xc3\xa0 \xf0\x9f\x99\x82", 11);
    assert_int_equal(bad, 0);
    assert_false(cut);
    /* a lone continuation byte, an overlong, a surrogate, past U+10FFFF, a
     * truncated sequence: each bad byte one U+FFFD */
    n = sf_jd_utf8_repair((const uint8_t *)"a\x80" "b\xc0\xaf" "c\xed\xa0\x80" "d\xf4\x90\x80\x80"
                          "e\xe2\x82", 17, out, sizeof(out), &bad, &cut);
    assert_int_equal(bad, 12);
    assert_int_equal(n, 5 + 12 * 3);
    assert_false(cut);
    assert_true(sf_otlp_utf8_valid(out, n));
    assert_memory_equal(out, "a\xef\xbf\xbd" "b", 5);
    /* a NUL is a character; the cut is at a character boundary */
    n = sf_jd_utf8_repair((const uint8_t *)"ab\xc3\xa9", 4, out, 3, &bad, &cut);
    assert_int_equal(n, 2);
    assert_true(cut);
    n = sf_jd_utf8_repair((const uint8_t *)"a\0b", 3, out, sizeof(out), &bad, &cut);
    assert_int_equal(n, 3);
    assert_int_equal(bad, 0);
}

static void test_severity(void **state)
{
    static const int want[8] = { 21, 19, 18, 17, 13, 10, 9, 5 };
    int num;
    const char *text;
    char p[2] = "0";

    (void)state;
    for (int i = 0; i < 8; i++) {
        p[0] = (char)('0' + i);
        assert_true(sf_jd_severity((const uint8_t *)p, 1, &num, &text));
        assert_int_equal(num, want[i]);
    }
    assert_true(sf_jd_severity((const uint8_t *)"6", 1, &num, &text));
    assert_string_equal(text, "info");
    assert_true(sf_jd_severity((const uint8_t *)"3", 1, &num, &text));
    assert_string_equal(text, "error");
    assert_false(sf_jd_severity((const uint8_t *)"8", 1, &num, &text));
    assert_false(sf_jd_severity((const uint8_t *)"66", 2, &num, &text));
    assert_false(sf_jd_severity(NULL, 0, &num, &text));
}

static const char *attr(log_record *r, const char *key)
{
    for (size_t i = 0; i < r->n_attributes; i++)
        if (strcmp(r->attributes[i]->key, key) == 0)
            return r->attributes[i]->value->string_value;
    return "(absent)";
}

#define SET(e, f, s) ((e).f = (const uint8_t *)(s), (e).f##_len = sizeof(s) - 1)

/* Entries into one request: what a record keeps and what it does not. */
static void test_builder(void **state)
{
    sf_arena *a = sf_arena_create(4096, 0);
    sf_jd_builder *b = sf_jd_builder_create(a, 3, 64);
    sf_jd_notes notes = { 0 };
    uint8_t longmsg[200], longunit[SF_JD_MAX_FIELD + 1];
    sf_jd_entry e1 = { .realtime_us = 1700000000123456ull }, e2 = { .realtime_us = 1 },
                e3 = { .realtime_us = 2 };
    uint8_t *bytes = NULL;
    size_t len = 0;
    logs_req *req;
    log_record **r;

    (void)state;
    assert_non_null(b);
    e1.message = (const uint8_t *)"Decode batch. #running-req: 1, #token: 24, token usage: 0.00, "
                                  "gen throughput (token/s): 35.12, #queue-req: 0";
    e1.message_len = strlen((const char *)e1.message);  /* longer than 64: cut */
    SET(e1, priority, "6");
    SET(e1, unit, "sglang.service");
    SET(e1, identifier, "python3");
    SET(e1, pid, "4242");
    assert_int_equal(sf_jd_builder_add(b, &e1, 99, &notes), SF_OK);
    /* no MESSAGE, no PRIORITY; a unit that is not UTF-8, an identifier too long */
    memset(longunit, 'x', sizeof(longunit));
    SET(e2, unit, "bad\xff");
    e2.identifier = longunit;
    e2.identifier_len = sizeof(longunit);
    assert_int_equal(sf_jd_builder_add(b, &e2, 99, &notes), SF_OK);
    /* a binary message: replaced bytes, within the bound */
    memset(longmsg, 0xfe, sizeof(longmsg));
    e3.message = longmsg;
    e3.message_len = 10;
    SET(e3, priority, "2");
    assert_int_equal(sf_jd_builder_add(b, &e3, 99, &notes), SF_OK);
    assert_int_equal(sf_jd_builder_add(b, &e3, 99, &notes), SF_FULL);
    assert_int_equal(sf_jd_builder_count(b), 3);
    assert_int_equal(notes.truncated, 1);
    assert_int_equal(notes.invalid_utf8, 1);
    assert_int_equal(notes.dropped_fields, 2);
    assert_int_equal(sf_jd_builder_encode(b, &bytes, &len), SF_OK);
    /* the codec takes it as a valid request of 3 log records */
    {
        size_t items = 0;

        assert_int_equal(sf_otlp_scan_signal(SF_SIGNAL_LOGS, bytes, len, 32, &items), SF_OK);
        assert_int_equal(items, 3);
    }
    req = opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
        NULL, len, bytes);
    assert_non_null(req);
    assert_int_equal(req->n_resource_logs, 1);
    r = req->resource_logs[0]->scope_logs[0]->log_records;
    assert_int_equal(req->resource_logs[0]->scope_logs[0]->n_log_records, 3);
    assert_int_equal(r[0]->time_unix_nano, 1700000000123456000ull);
    assert_int_equal(r[0]->observed_time_unix_nano, 99);
    assert_int_equal(r[0]->severity_number, 9);
    assert_string_equal(r[0]->severity_text, "info");
    assert_int_equal(strlen(r[0]->body->string_value), 64);
    assert_memory_equal(r[0]->body->string_value, "Decode batch. #running-req: 1", 29);
    assert_string_equal(attr(r[0], "_SYSTEMD_UNIT"), "sglang.service");
    assert_string_equal(attr(r[0], "SYSLOG_IDENTIFIER"), "python3");
    assert_string_equal(attr(r[0], "_PID"), "4242");
    assert_int_equal(r[0]->n_attributes, 3);
    assert_null(r[1]->body);
    assert_int_equal(r[1]->severity_number, 0);
    assert_string_equal(r[1]->severity_text, "");
    assert_int_equal(r[1]->n_attributes, 0);
    assert_int_equal(r[2]->severity_number, 18);
    assert_int_equal(strlen(r[2]->body->string_value), 30);    /* ten U+FFFD */
    opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(req,
                                                                                        NULL);
    sf_free(bytes);
    /* reset: a new batch */
    sf_jd_builder_reset(b);
    assert_int_equal(sf_jd_builder_count(b), 0);
    assert_int_equal(sf_jd_builder_add(b, &e2, 1, &notes), SF_OK);
    sf_jd_builder_destroy(b);
    sf_arena_destroy(a);
    assert_int_equal(sf_alloc_in_use(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_utf8_repair),
        cmocka_unit_test(test_severity),
        cmocka_unit_test(test_builder),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

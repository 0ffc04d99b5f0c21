/* tests/processors/test_resourcedetection.c: the `resourcedetection`
 * processor: upstream's keys through the real loader; detection at start
 * (env's OTEL_RESOURCE_ATTRIBUTES, system's host.name from its sources,
 * os.type, host.id from /etc/machine-id when enabled) into the edit's
 * resource inserts (upsert with override, insert without); the first
 * detector listed wins a key; a malformed variable sets nothing of it; and
 * the edit run by the codec on a logs request sets the resource. Refused
 * keys are in tests/configs/invalid/resourcedetection.yaml. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/sf_core.h"
#include "sf_otlp_wire.h"
#include "tests/pipeline/sf_pb_build.h"
#include "processor_fixture.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"

typedef pfx_run run;
typedef Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest logs_req;

static void load(run *r, const char *procs)
{
    if (pfx_load_in(r, "rd.yaml", procs, "resourcedetection", "logs") != SF_OK)
        fail_msg("%s", r->errors);
    assert_int_equal(r->comp.type->start(&r->comp), SF_OK);
}

static const sf_otlp_insert *insert_of(const sf_otlp_edit *e, const char *key)
{
    for (size_t i = 0; i < e->n_inserts[SF_OTLP_RESOURCE]; i++)
        if (strcmp(e->inserts[SF_OTLP_RESOURCE][i].key, key) == 0)
            return &e->inserts[SF_OTLP_RESOURCE][i];
    return NULL;
}

static const char *value_of(const sf_otlp_edit *e, const char *key)
{
    const sf_otlp_insert *in = insert_of(e, key);

    return in != NULL ? in->value : "(absent)";
}

/* system with the os source: host.name is gethostname(), os.type linux,
 * no host.id unless asked; upserts (override defaults to true); nothing
 * on any other context. */
static void test_system_defaults(void **state)
{
    run r;
    const sf_otlp_edit *e;
    char host[256] = "";

    (void)state;
    assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
    load(&r, "  resourcedetection:\n    detectors: [system]\n"
             "    system:\n      hostname_sources: [os]\n");
    e = r.comp.type->edit(&r.comp, SF_SIGNAL_LOGS);
    assert_ptr_equal(e, r.comp.type->edit(&r.comp, SF_SIGNAL_TRACES));
    assert_int_equal(e->n_inserts[SF_OTLP_RESOURCE], 2);
    assert_string_equal(value_of(e, "host.name"), host);
    assert_string_equal(value_of(e, "os.type"), "linux");
    assert_string_equal(value_of(e, "host.id"), "(absent)");
    assert_true(insert_of(e, "host.name")->upsert);
    for (int c = SF_OTLP_SCOPE; c < SF_OTLP_CTX_COUNT; c++)
        assert_int_equal(e->n_inserts[c], 0);
    assert_null(e->keys[SF_OTLP_RESOURCE]);
    pfx_unload(&r);
}

/* The env detector first: its host.name wins over system's, values are
 * percent-decoded and trimmed, empty members skipped; override: false
 * makes inserts (a value the data has is kept); host.id when enabled,
 * host.name off when disabled. */
static void test_env_first_and_options(void **state)
{
    run r;
    const sf_otlp_edit *e;
    FILE *f = fopen("/etc/machine-id", "r");
    char id[64] = "";

    (void)state;
    if (f != NULL) {
        if (fgets(id, sizeof(id), f) == NULL)
            id[0] = '\0';
        fclose(f);
        id[strcspn(id, "\n")] = '\0';
    }
    setenv("OTEL_RESOURCE_ATTRIBUTES",
           "host.name=from-env, deployment.environment = prod%2Cblue ,,service.version=1.2", 1);
    load(&r, "  resourcedetection:\n    detectors: [env, system]\n    override: false\n"
             "    system:\n      hostname_sources: [os]\n"
             "      resource_attributes:\n        host.id:\n          enabled: true\n");
    e = r.comp.type->edit(&r.comp, SF_SIGNAL_METRICS);
    assert_string_equal(value_of(e, "host.name"), "from-env");
    assert_string_equal(value_of(e, "deployment.environment"), "prod,blue");
    assert_string_equal(value_of(e, "service.version"), "1.2");
    assert_string_equal(value_of(e, "os.type"), "linux");
    if (strlen(id) == 32)
        assert_string_equal(value_of(e, "host.id"), id);
    assert_false(insert_of(e, "host.name")->upsert);
    assert_false(insert_of(e, "os.type")->upsert);
    pfx_unload(&r);

    /* system first: its host.name wins; host.name can be turned off */
    load(&r, "  resourcedetection:\n    detectors: [system, env]\n"
             "    system:\n      hostname_sources: [os]\n"
             "      resource_attributes:\n        host.name: {enabled: false}\n"
             "        os.type: {enabled: false}\n");
    e = r.comp.type->edit(&r.comp, SF_SIGNAL_METRICS);
    assert_string_equal(value_of(e, "host.name"), "from-env");
    assert_string_equal(value_of(e, "os.type"), "(absent)");
    pfx_unload(&r);
    unsetenv("OTEL_RESOURCE_ATTRIBUTES");
}

/* A malformed OTEL_RESOURCE_ATTRIBUTES sets nothing of it (not its good
 * half); the other detectors still run. */
static void test_env_malformed(void **state)
{
    static const char *const bad[] = { "a=1,b", "a=1,=2", "a=%zz", "a=%4", "a=1,b=\xff" };
    run r;
    const sf_otlp_edit *e;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("OTEL_RESOURCE_ATTRIBUTES", bad[i], 1);
        load(&r, "  resourcedetection:\n    detectors: [env, system]\n"
                 "    system: {hostname_sources: [os]}\n");
        e = r.comp.type->edit(&r.comp, SF_SIGNAL_LOGS);
        assert_string_equal(value_of(e, "a"), "(absent)");
        assert_string_equal(value_of(e, "os.type"), "linux");
        assert_int_equal(e->n_inserts[SF_OTLP_RESOURCE], 2);
        pfx_unload(&r);
    }
    unsetenv("OTEL_RESOURCE_ATTRIBUTES");
}

/* The dns source answers within the timeout or is passed over: either
 * way host.name is set (os answers after it). */
static void test_dns_then_os(void **state)
{
    run r;
    const sf_otlp_edit *e;

    (void)state;
    load(&r, "  resourcedetection:\n    detectors: [system]\n    timeout: 2s\n");
    e = r.comp.type->edit(&r.comp, SF_SIGNAL_LOGS);
    assert_string_not_equal(value_of(e, "host.name"), "(absent)");
    assert_true(strlen(value_of(e, "host.name")) > 0);
    pfx_unload(&r);
}

/* The codec runs the edit: a logs request without the attributes gets
 * them; one with host.name keeps its own under override: false and gets
 * the detected one under override: true. */
static void test_edit_on_logs(void **state)
{
    for (int override = 0; override < 2; override++) {
        run r;
        pb in;
        sf_buf *out = NULL;
        logs_req *req;
        Opentelemetry__Proto__Resource__V1__Resource *res;
        const char *host = NULL, *os = NULL, *svc = NULL;

        (void)state;
        setenv("OTEL_RESOURCE_ATTRIBUTES", "host.name=detected-host", 1);
        load(&r, override ? "  resourcedetection:\n    detectors: [env, system]\n"
                          : "  resourcedetection:\n    detectors: [env, system]\n"
                            "    override: false\n");
        pb_init(&in);
        pb_open(&in, 1);                    /* resource_logs */
        pb_open(&in, 1);                    /* resource */
        kv_str(&in, 1, "service.name", "sglang");
        kv_str(&in, 1, "host.name", "sent-host");
        pb_close(&in);
        pb_open(&in, 2);                    /* scope_logs */
        pb_open(&in, 2);                    /* log_records */
        pb_fix64(&in, 1, 1700000000000000000ull);
        pb_open(&in, 5);
        pb_str(&in, 1, "Decode batch. #running-req: 1");
        pb_closen(&in, 4);
        assert_int_equal(sf_otlp_rewrite_signal(SF_SIGNAL_LOGS, in.d, in.n, 32,
                                                r.comp.type->edit(&r.comp, SF_SIGNAL_LOGS),
                                                &out, &r.stats), SF_OK);
        req = opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
            NULL, out->len, out->data);
        assert_non_null(req);
        res = req->resource_logs[0]->resource;
        for (size_t i = 0; i < res->n_attributes; i++) {
            if (strcmp(res->attributes[i]->key, "host.name") == 0) {
                assert_null(host);              /* one entry of the key */
                host = res->attributes[i]->value->string_value;
            } else if (strcmp(res->attributes[i]->key, "os.type") == 0) {
                os = res->attributes[i]->value->string_value;
            } else if (strcmp(res->attributes[i]->key, "service.name") == 0) {
                svc = res->attributes[i]->value->string_value;
            }
        }
        assert_non_null(host);
        assert_string_equal(host, override ? "detected-host" : "sent-host");
        assert_string_equal(os, "linux");
        assert_string_equal(svc, "sglang");
        assert_int_equal(r.stats.inserted, override ? 2 : 1);
        opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(
            req, NULL);
        sf_buf_unref(out);
        pfx_unload(&r);
    }
    unsetenv("OTEL_RESOURCE_ATTRIBUTES");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_system_defaults),
        cmocka_unit_test(test_env_first_and_options),
        cmocka_unit_test(test_env_malformed),
        cmocka_unit_test(test_dns_then_os),
        cmocka_unit_test(test_edit_on_logs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

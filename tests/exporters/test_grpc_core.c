/* tests/exporters/test_grpc_core.c: the gRPC core references the tools
 * and benches that speak gRPC core hold (tools/grpc_core.h; the collector's
 * `otlp` exporter no longer uses gRPC core): sf_grpc_init routes gRPC's log
 * into sf_log (once, one line per message), takes a reference (gRPC
 * initialised while any is held, nested references counted), picks up a
 * log level set since (debug shows gRPC's debug lines, otherwise errors
 * only), the last sf_grpc_shutdown lets gRPC go, and every gRPC status code
 * has its name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/support/log.h>

#include "tools/grpc_core.h"
#include "sf_log.h"
#include "tests/sf_test_stderr.h"

static void test_references(void **state)
{
    (void)state;
    sf_grpc_init();
    assert_true(grpc_is_initialized());
    sf_grpc_init();                                 /* a second user */
    sf_grpc_shutdown();
    assert_true(grpc_is_initialized());             /* the first still holds one */
    sf_grpc_shutdown();
    /* the last reference gone: gRPC shuts down (its clean-up may finish
     * on another thread; wait for it, bounded) */
    for (int i = 0; i < 5000 && grpc_is_initialized(); i++)
        usleep(2000);
    assert_false(grpc_is_initialized());
    sf_grpc_init();                                 /* and can be had again */
    assert_true(grpc_is_initialized());
    sf_grpc_shutdown();
}

static void test_log_level_followed(void **state)
{
    char *text;

    (void)state;
    /* first use: sf_grpc_init routes gRPC's log without anyone calling
     * sf_process_init before it */
    sf_log_set_level(SF_LOG_INFO);
    sf_grpc_init();
    sf_test_stderr_begin();
    gpr_log(GPR_ERROR, "an error");
    gpr_log(GPR_DEBUG, "debug at info");
    text = sf_test_stderr_end(NULL);
    sf_grpc_shutdown();
    assert_non_null(strstr(text, "error grpc: an error\n"));
    assert_null(strstr(text, "debug at info"));
    free(text);

    /* the level changed since (a reload): the next reference follows it */
    sf_log_set_level(SF_LOG_DEBUG);
    sf_grpc_init();
    sf_test_stderr_begin();
    gpr_log(GPR_DEBUG, "debug at debug");
    text = sf_test_stderr_end(NULL);
    sf_grpc_shutdown();
    assert_non_null(strstr(text, "debug grpc: debug at debug\n"));
    free(text);

    sf_log_set_level(SF_LOG_WARN);
    sf_grpc_init();
    sf_test_stderr_begin();
    gpr_log(GPR_DEBUG, "debug at warn");
    gpr_log(GPR_INFO, "info at warn");
    text = sf_test_stderr_end(NULL);
    sf_grpc_shutdown();
    assert_null(strstr(text, "at warn"));
    free(text);
    sf_log_set_level(SF_LOG_INFO);
}

static void test_grpc_log_routed(void **state)
{
    char *text;

    (void)state;
    sf_log_set_level(SF_LOG_INFO);
    sf_grpc_init();
    sf_test_stderr_begin();
    gpr_log(GPR_ERROR, "routed %d", 7);
    gpr_log(GPR_DEBUG, "not at info");
    text = sf_test_stderr_end(NULL);
    sf_grpc_shutdown();
    /* one sf_log line, at error, with gRPC's message after "grpc: " */
    assert_non_null(strstr(text, "Z error grpc: routed 7\n"));
    assert_null(strstr(text, "not at info"));
    assert_int_equal(strchr(text, '\n') - text + 1, (long)strlen(text));
    free(text);
}

static void test_status_names(void **state)
{
    static const char *const names[] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
        "UNAUTHENTICATED",
    };

    (void)state;
    /* gRPC's codes are 0..16 in this order (grpc/status.h, the spec's table) */
    assert_int_equal(GRPC_STATUS_UNAUTHENTICATED, 16);
    for (int c = 0; c < 17; c++)
        assert_string_equal(sf_grpc_status_name(c), names[c]);
    assert_string_equal(sf_grpc_status_name(GRPC_STATUS_RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
    assert_string_equal(sf_grpc_status_name(17), "status");
    assert_string_equal(sf_grpc_status_name(-1), "status");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_level_followed),
        cmocka_unit_test(test_grpc_log_routed),
        cmocka_unit_test(test_references),
        cmocka_unit_test(test_status_names),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

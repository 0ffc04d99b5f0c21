/* receivers/otlp/otlp_answer.c: the sf_status -> client answer table both
 * OTLP servers use (otlp_answer.h). One row per sf_status, in the order of
 * SF_STATUS_MAP; tests/receivers/test_otlp_answer.c walks every status and
 * checks the gRPC and HTTP halves agree in kind. */
#include "otlp_answer.h"

#include <stddef.h>

#define RETRYABLE(msg) { SF_RPC_UNAVAILABLE, 503, msg }
#define PERMANENT(msg) { SF_RPC_INTERNAL, 500, msg }

static const struct {
    sf_status status;
    sf_otlp_answer answer;
} answers[] = {
    { SF_OK,          { SF_RPC_OK, 200, "" } },
    { SF_ENOMEM,      RETRYABLE("out of memory, retry later") },
    { SF_RETRY,       RETRYABLE("temporarily unavailable, retry later") },
    { SF_FULL,        RETRYABLE("export queue is full, retry later") },
    { SF_MEMLIMIT,    RETRYABLE("memory limit reached, retry later") },
    { SF_PERMANENT,   PERMANENT("permanent failure") },
    { SF_INVALID,     { SF_RPC_INVALID_ARGUMENT, 400,
                        "request is not a valid ExportTraceServiceRequest" } },
    { SF_TOOBIG,      { SF_RPC_RESOURCE_EXHAUSTED, 413, "request too large" } },
    { SF_FILTER,      PERMANENT("batch dropped: it could not be filtered (fail closed)") },
    { SF_IO,          RETRYABLE("i/o error, retry later") },
    { SF_CONFIG,      PERMANENT("invalid configuration") },
    { SF_STOPPED,     RETRYABLE("collector is shutting down, retry later") },
    { SF_UNSUPPORTED, PERMANENT("not supported") },
};

#define SF_STATUS_ONE(name, val, retry, msg) +1
_Static_assert(sizeof(answers) / sizeof(answers[0]) == 0 SF_STATUS_MAP(SF_STATUS_ONE),
               "every sf_status needs its answer");
#undef SF_STATUS_ONE

static const sf_otlp_answer unknown = PERMANENT("unknown status");

const char *sf_otlp_request_name(sf_signal signal)
{
    switch (signal) {
    case SF_SIGNAL_LOGS:    return "ExportLogsServiceRequest";
    case SF_SIGNAL_METRICS: return "ExportMetricsServiceRequest";
    default:                return "ExportTraceServiceRequest";
    }
}

const sf_otlp_answer *sf_otlp_answer_of(sf_status st)
{
    for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
        if (answers[i].status == st)
            return &answers[i].answer;
    return &unknown;
}

/* receivers/otlp/otlp_answer.h: the one table from an sf_status to what the
 * `otlp` receiver tells its client: the gRPC status code, the HTTP status
 * code (with a google.rpc.Status carrying the same gRPC code) and a message.
 * Both protocol servers (receiver_grpc.c, receiver_http.c) answer from it, so a
 * client hears the same kind of answer whichever protocol it used:
 *   OK        -> gRPC OK                 / HTTP 200
 *   malformed -> gRPC INVALID_ARGUMENT   / HTTP 400   (do not retry)
 *   too large -> gRPC RESOURCE_EXHAUSTED / HTTP 413   (do not retry as is)
 *   retryable -> gRPC UNAVAILABLE        / HTTP 503 + Retry-After
 *   permanent -> gRPC INTERNAL           / HTTP 500
 * "Retryable" is sf_status_retryable(). Answers that belong to one protocol
 * only (HTTP 404/405/415, gRPC UNIMPLEMENTED for another method) are not
 * statuses and stay with their server. */
#ifndef SF_RECEIVERS_OTLP_ANSWER_H
#define SF_RECEIVERS_OTLP_ANSWER_H

#include "sf_signal.h"
#include "sf_status.h"

/* gRPC status codes (grpc/status.h, the same numbers in google.rpc.Code),
 * spelled here so the table needs no gRPC header. */
enum {
    SF_RPC_OK = 0,
    SF_RPC_INVALID_ARGUMENT = 3,
    SF_RPC_NOT_FOUND = 5,
    SF_RPC_RESOURCE_EXHAUSTED = 8,
    SF_RPC_UNIMPLEMENTED = 12,
    SF_RPC_INTERNAL = 13,
    SF_RPC_UNAVAILABLE = 14
};

typedef struct sf_otlp_answer {
    int grpc;               /* gRPC status code (SF_RPC_*) */
    unsigned http;          /* HTTP status code */
    const char *message;    /* for the client: lowercase, no full stop */
} sf_otlp_answer;

/* The answer for `st`; never NULL (a value outside sf_status answers as a
 * permanent failure). */
const sf_otlp_answer *sf_otlp_answer_of(sf_status st);

/* The export request message of `signal`, for refusals of a malformed one:
 * "ExportTraceServiceRequest", "ExportLogsServiceRequest",
 * "ExportMetricsServiceRequest". */
const char *sf_otlp_request_name(sf_signal signal);

#endif

/* sf_signal.h: the three OTLP signals spanfence carries (traces, logs,
 * metrics): one table of their names as configs and metrics spell them,
 * what each counts (upstream's metric suffixes, and the words for people),
 * and where OTLP sends them (the gRPC method, the HTTP path). */
#ifndef SF_SIGNAL_H
#define SF_SIGNAL_H

#include <stdbool.h>

/* Zero is traces, so a zeroed sf_request or counter is a trace one. */
typedef enum sf_signal {
    SF_SIGNAL_TRACES = 0,
    SF_SIGNAL_LOGS,
    SF_SIGNAL_METRICS,
    SF_SIGNAL_COUNT
} sf_signal;

/* "traces", "logs", "metrics"; "?" out of range. */
const char *sf_signal_name(sf_signal s);
/* "spans", "log_records", "metric_points" (otelcol_receiver_accepted_<items>);
 * "?" out of range. */
const char *sf_signal_items(sf_signal s);
/* "span"/"spans", "log record"/"log records", "metric point"/"metric
 * points": for log lines and screens. */
const char *sf_signal_noun(sf_signal s, bool plural);
/* "/opentelemetry.proto.collector.trace.v1.TraceService/Export", ... */
const char *sf_signal_grpc_method(sf_signal s);
/* OTLP/HTTP's default path: "/v1/traces", "/v1/logs", "/v1/metrics". */
const char *sf_signal_http_path(sf_signal s);

#endif

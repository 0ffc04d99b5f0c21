/* sf_signal.h: the three OTLP signals spanfence carries (traces, logs,
 * metrics), their names as configs and metrics spell them, and the name of
 * what each counts (upstream's metric suffixes: spans, log records, metric
 * data points). */
#ifndef SF_SIGNAL_H
#define SF_SIGNAL_H

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

#endif

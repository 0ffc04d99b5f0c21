/* sf_signal.c: the signals' table (sf_signal.h). */
#include "sf_signal.h"

static const struct {
    const char *name, *items, *noun, *nouns, *method, *path;
} signals[SF_SIGNAL_COUNT] = {
    [SF_SIGNAL_TRACES] = { "traces", "spans", "span", "spans",
                           "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                           "/v1/traces" },
    [SF_SIGNAL_LOGS] = { "logs", "log_records", "log record", "log records",
                         "/opentelemetry.proto.collector.logs.v1.LogsService/Export", "/v1/logs" },
    [SF_SIGNAL_METRICS] = { "metrics", "metric_points", "metric point", "metric points",
                            "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
                            "/v1/metrics" },
};

#define FIELD(s, f) ((unsigned)(s) < SF_SIGNAL_COUNT ? signals[s].f : "?")

const char *sf_signal_name(sf_signal s)
{
    return FIELD(s, name);
}

const char *sf_signal_items(sf_signal s)
{
    return FIELD(s, items);
}

const char *sf_signal_noun(sf_signal s, bool plural)
{
    return plural ? FIELD(s, nouns) : FIELD(s, noun);
}

const char *sf_signal_grpc_method(sf_signal s)
{
    return FIELD(s, method);
}

const char *sf_signal_http_path(sf_signal s)
{
    return FIELD(s, path);
}

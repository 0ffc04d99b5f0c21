/* sf_signal.c: the signals' names (sf_signal.h). */
#include "sf_signal.h"

const char *sf_signal_name(sf_signal s)
{
    static const char *const names[SF_SIGNAL_COUNT] = {
        [SF_SIGNAL_TRACES] = "traces",
        [SF_SIGNAL_LOGS] = "logs",
        [SF_SIGNAL_METRICS] = "metrics",
    };

    return (unsigned)s < SF_SIGNAL_COUNT ? names[s] : "?";
}

const char *sf_signal_items(sf_signal s)
{
    static const char *const items[SF_SIGNAL_COUNT] = {
        [SF_SIGNAL_TRACES] = "spans",
        [SF_SIGNAL_LOGS] = "log_records",
        [SF_SIGNAL_METRICS] = "metric_points",
    };

    return (unsigned)s < SF_SIGNAL_COUNT ? items[s] : "?";
}

/* sf_log.h: the collector's own log, one line per event on stderr:
 *   2026-11-30T04:50:54.123Z warn  exporter otlphttp/gateway: send failed: 503
 * Thread-safe. Never pass secrets (header values, attribute values). */
#ifndef SF_LOG_H
#define SF_LOG_H

typedef enum sf_log_level {
    SF_LOG_DEBUG = 0,
    SF_LOG_INFO,
    SF_LOG_WARN,
    SF_LOG_ERROR,
    SF_LOG_OFF
} sf_log_level;

void sf_log_set_level(sf_log_level level);
sf_log_level sf_log_get_level(void);
void sf_log(sf_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define sf_debug(...) sf_log(SF_LOG_DEBUG, __VA_ARGS__)
#define sf_info(...)  sf_log(SF_LOG_INFO, __VA_ARGS__)
#define sf_warn(...)  sf_log(SF_LOG_WARN, __VA_ARGS__)
#define sf_error(...) sf_log(SF_LOG_ERROR, __VA_ARGS__)

#endif

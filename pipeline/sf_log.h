/* sf_log.h: the collector's own log, one line per event, on stderr unless
 * service.telemetry.logs.output_paths says otherwise:
 *   2026-11-30T04:50:54.123Z warn  exporter otlphttp/gateway: send failed: 503
 * or, with logs.encoding: json, upstream's (zap's) keys:
 *   {"level":"warn","ts":"2026-11-30T04:50:54.123Z","msg":"exporter ..."}
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

#include <stdbool.h>
#include <stddef.h>

void sf_log_set_level(sf_log_level level);
/* Where lines go from now on and how they look: `paths` ("stderr",
 * "stdout", or files, opened for appending, created 0600), n == 0:
 * stderr. A file stays open for the life of the process, so a reload that
 * names it again appends to the same one. -1 (with errno) when a file
 * cannot be opened, or past SF_LOG_MAX_SINKS distinct files: nothing is
 * changed then. */
#define SF_LOG_MAX_SINKS 8
int sf_log_configure(bool json, const char *const *paths, size_t n);
sf_log_level sf_log_get_level(void);
void sf_log(sf_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Escape `in` as the inside of a JSON string into out: quote, backslash
 * and control characters (and DEL) escaped, an escape never cut in two.
 * Always terminated; false when it did not all fit. */
bool sf_json_escape(const char *in, char *out, size_t out_size);

#define sf_debug(...) sf_log(SF_LOG_DEBUG, __VA_ARGS__)
#define sf_info(...)  sf_log(SF_LOG_INFO, __VA_ARGS__)
#define sf_warn(...)  sf_log(SF_LOG_WARN, __VA_ARGS__)
#define sf_error(...) sf_log(SF_LOG_ERROR, __VA_ARGS__)

#endif

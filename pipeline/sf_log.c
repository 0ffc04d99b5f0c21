/* sf_log.c: timestamped, level-filtered lines on stderr; one write() per line
 * so lines from different threads never interleave. */
#include "sf_log.h"
#include "sf_time.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Atomic int cur_level = SF_LOG_INFO;

static const char *const level_names[] = { "debug", "info", "warn", "error" };

void sf_log_set_level(sf_log_level level)
{
    atomic_store(&cur_level, (int)level);
}

sf_log_level sf_log_get_level(void)
{
    return (sf_log_level)atomic_load(&cur_level);
}

void sf_log(sf_log_level level, const char *fmt, ...)
{
    char line[2048];
    size_t n;
    int w;
    va_list ap;

    if ((int)level < atomic_load(&cur_level) || level >= SF_LOG_OFF)
        return;
    n = sf_time_format_utc(sf_wall_ms(), line, sizeof(line));
    w = snprintf(line + n, sizeof(line) - n, " %-5s ", level_names[level]);
    if (w > 0)
        n += (size_t)w;
    va_start(ap, fmt);
    w = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    if (w > 0)
        n += (size_t)w < sizeof(line) - n - 1 ? (size_t)w : sizeof(line) - n - 2;
    line[n++] = '\n';
    (void)!write(STDERR_FILENO, line, n);
}

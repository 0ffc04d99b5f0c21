/* sf_log.c: timestamped, level-filtered lines, as text or JSON, on stderr,
 * stdout or files; one write() per line and sink, so lines from different
 * threads never interleave.
 *
 * DESIGN: the sinks in use are one `sinks` value swapped atomically by
 * sf_log_configure (main thread); files opened are never closed (at most
 * SF_LOG_MAX_SINKS), so a thread writing with the previous set never
 * writes to a descriptor reused for something else. */
#include "sf_log.h"
#include "sf_time.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Atomic int cur_level = SF_LOG_INFO;

typedef struct sinks {
    bool json;
    size_t n;
    int fds[SF_LOG_MAX_SINKS + 2];
} sinks;

/* Two slots, written by sf_log_configure only (the main thread), read by
 * any thread through `current`. */
static sinks slots[2] = { { .json = false, .n = 1, .fds = { STDERR_FILENO } } };
static _Atomic(sinks *) current = &slots[0];
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { char path[256]; int fd; } files[SF_LOG_MAX_SINKS];
static size_t n_files;

static int file_fd(const char *path)
{
    int fd;

    for (size_t i = 0; i < n_files; i++)
        if (strcmp(files[i].path, path) == 0)
            return files[i].fd;
    if (n_files == SF_LOG_MAX_SINKS || strlen(path) >= sizeof(files[0].path)) {
        errno = n_files == SF_LOG_MAX_SINKS ? EMFILE : ENAMETOOLONG;
        return -1;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    snprintf(files[n_files].path, sizeof(files[n_files].path), "%s", path);
    files[n_files++].fd = fd;
    return fd;
}

int sf_log_configure(bool json, const char *const *paths, size_t n)
{
    sinks *next;
    int rc = 0;

    pthread_mutex_lock(&files_lock);
    next = atomic_load(&current) == &slots[0] ? &slots[1] : &slots[0];
    next->json = json;
    next->n = 0;
    if (n == 0)
        next->fds[next->n++] = STDERR_FILENO;
    for (size_t i = 0; i < n && rc == 0; i++) {
        int fd = strcmp(paths[i], "stderr") == 0 ? STDERR_FILENO
               : strcmp(paths[i], "stdout") == 0 ? STDOUT_FILENO : file_fd(paths[i]);

        if (fd < 0)
            rc = -1;
        else if (next->n < sizeof(next->fds) / sizeof(next->fds[0]))
            next->fds[next->n++] = fd;
    }
    if (rc == 0)
        atomic_store(&current, next);
    pthread_mutex_unlock(&files_lock);
    return rc;
}

bool sf_json_escape(const char *in, char *out, size_t out_size)
{
    size_t n = 0;

    if (out_size == 0)
        return false;
    for (; *in; in++) {
        unsigned char ch = (unsigned char)*in;
        char esc[8];
        size_t el;

        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            el = 2;
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof(esc), "\\u%04x", ch);
            el = 6;
        } else {
            esc[0] = (char)ch;
            el = 1;
        }
        if (n + el >= out_size) {       /* an escape is never cut in two */
            out[n] = '\0';
            return false;
        }
        memcpy(out + n, esc, el);
        n += el;
    }
    out[n] = '\0';
    return true;
}

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
    char line[2048], msg[2048], ts_text[40];
    const sinks *out;
    size_t n;
    int w;
    va_list ap;

    if ((int)level < atomic_load(&cur_level) || level >= SF_LOG_OFF)
        return;
    out = atomic_load(&current);
    sf_time_format_utc(sf_wall_ms(), ts_text, sizeof(ts_text));
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (out->json) {
        /* room for the keys around it, so the line always closes */
        char esc[sizeof(line) - 64];

        sf_json_escape(msg, esc, sizeof(esc));
        w = snprintf(line, sizeof(line) - 1, "{\"level\":\"%s\",\"ts\":\"%s\",\"msg\":\"%s\"}",
                     level_names[level], ts_text, esc);
    } else {
        w = snprintf(line, sizeof(line) - 1, "%s %-5s %s", ts_text, level_names[level], msg);
    }
    n = w < 0 ? 0 : (size_t)w < sizeof(line) - 1 ? (size_t)w : sizeof(line) - 2;
    line[n++] = '\n';
    for (size_t i = 0; i < out->n; i++)
        (void)!write(out->fds[i], line, n);
}

/* sf_libsystemd.c: the sd_journal_* (and sd_id128_*) functions spanfence calls, forwarded to
 * libsystemd.so.0 loaded on first use, and sd_notify on its own
 * (sf_libsystemd.h says why). A function not defined here is an undefined
 * reference at link time, not a surprise at run time; the definitions do
 * not interpose on libsystemd's own calls (no linked library refers to
 * them, so the program does not export them; the library is opened
 * RTLD_LOCAL). */
#define _GNU_SOURCE             /* vasprintf */
#include "sf_libsystemd.h"

#include "sf_dl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-id128.h>
#include <systemd/sd-journal.h>

#define SF_LIBSYSTEMD_SONAME "libsystemd.so.0"

/* name, parameters, arguments */
#define SF_JOURNAL_FUNCS(X)                                                                   \
    X(sd_journal_open, (sd_journal **ret, int flags), (ret, flags))                           \
    X(sd_journal_open_directory, (sd_journal **ret, const char *path, int flags),             \
      (ret, path, flags))                                                                     \
    X(sd_journal_open_files, (sd_journal **ret, const char **paths, int flags),               \
      (ret, paths, flags))                                                                    \
    X(sd_journal_add_match, (sd_journal *j, const void *data, size_t size), (j, data, size))  \
    X(sd_journal_add_conjunction, (sd_journal *j), (j))                                       \
    X(sd_journal_add_disjunction, (sd_journal *j), (j))                                       \
    X(sd_journal_set_data_threshold, (sd_journal *j, size_t sz), (j, sz))                     \
    X(sd_journal_seek_head, (sd_journal *j), (j))                                             \
    X(sd_journal_seek_tail, (sd_journal *j), (j))                                             \
    X(sd_journal_seek_cursor, (sd_journal *j, const char *cursor), (j, cursor))               \
    X(sd_journal_test_cursor, (sd_journal *j, const char *cursor), (j, cursor))               \
    X(sd_journal_get_cursor, (sd_journal *j, char **cursor), (j, cursor))                     \
    X(sd_journal_next, (sd_journal *j), (j))                                                  \
    X(sd_journal_previous, (sd_journal *j), (j))                                              \
    X(sd_journal_get_data,                                                                    \
      (sd_journal *j, const char *field, const void **data, size_t *l), (j, field, data, l))  \
    X(sd_journal_get_realtime_usec, (sd_journal *j, uint64_t *ret), (j, ret))                 \
    X(sd_journal_get_fd, (sd_journal *j), (j))                                                \
    X(sd_journal_get_events, (sd_journal *j), (j))                                            \
    X(sd_journal_get_timeout, (sd_journal *j, uint64_t *timeout_usec), (j, timeout_usec))     \
    X(sd_journal_process, (sd_journal *j), (j))                                               \
    X(sd_id128_get_boot, (sd_id128_t *ret), (ret))

struct sf_journal_fns {
#define SF_JOURNAL_FIELD(name, params, args) SF_DL_FIELD(name)
    SF_JOURNAL_FUNCS(SF_JOURNAL_FIELD)
#undef SF_JOURNAL_FIELD
    SF_DL_FIELD(sd_journal_close)
    SF_DL_FIELD(sd_id128_to_string)
};
#define SF_DL_FNS struct sf_journal_fns

static struct sf_journal_fns fns;

static const sf_dl_sym syms[] = {
#define SF_JOURNAL_ROW(name, params, args) SF_DL_ROW(name)
    SF_JOURNAL_FUNCS(SF_JOURNAL_ROW)
#undef SF_JOURNAL_ROW
    SF_DL_ROW(sd_journal_close)
    SF_DL_ROW(sd_id128_to_string)
    { NULL, 0 }
};

static sf_dl_lib lib = SF_DL_LIB(SF_LIBSYSTEMD_SONAME, "libsystemd0", syms, &fns, NULL);

static const struct sf_journal_fns *api(void)
{
    return sf_dl_api(&lib);
}

sf_status sf_libsystemd_load(void)
{
    return api() != NULL ? SF_OK : SF_IO;
}

const char *sf_libsystemd_error(void)
{
    return lib.error;
}

#define SF_JOURNAL_FORWARD(name, params, args)              \
    int name params                                         \
    {                                                       \
        const struct sf_journal_fns *f = api();             \
        return f != NULL ? f->name args : -ELIBACC;         \
    }
SF_JOURNAL_FUNCS(SF_JOURNAL_FORWARD)
#undef SF_JOURNAL_FORWARD

void sd_journal_close(sd_journal *j)
{
    const struct sf_journal_fns *f = api();
    if (f != NULL)
        f->sd_journal_close(j);
}

char *sd_id128_to_string(sd_id128_t id, char s[SD_ID128_STRING_MAX])
{
    const struct sf_journal_fns *f = api();
    if (f == NULL) {
        s[0] = '\0';
        return s;
    }
    return f->sd_id128_to_string(id, s);
}

/* ---- sd_notify(3)'s protocol: the state as one datagram to the AF_UNIX
 * socket $NOTIFY_SOCKET names, a path or, after '@', an abstract name.
 * 0 without the variable, > 0 once sent, -errno when it cannot be. */
int sd_notify(int unset_environment, const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t n;
    int fd, rc = 1;

    if (path == NULL || path[0] == '\0')
        goto out;
    n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n < 2 || n > sizeof(sa.sun_path)) {
        rc = -EAFNOSUPPORT;     /* vsock: and the like: not spoken here */
        goto out;
    }
    memcpy(sa.sun_path, path, n);
    if (sa.sun_path[0] == '@')
        sa.sun_path[0] = '\0';
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    if (connect(fd, (struct sockaddr *)&sa,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) != 0 ||
        send(fd, state, strlen(state), MSG_NOSIGNAL) < 0)
        rc = -errno;
    close(fd);
out:
    if (unset_environment)
        unsetenv("NOTIFY_SOCKET");
    return rc;
}

int sd_notifyf(int unset_environment, const char *format, ...)
{
    char *state = NULL;
    va_list ap;
    int n, rc;

    va_start(ap, format);
    n = vasprintf(&state, format, ap);
    va_end(ap);
    if (n < 0)
        return -ENOMEM;
    rc = sd_notify(unset_environment, state);
    free(state);
    return rc;
}

/* > 0 and *usec when $WATCHDOG_USEC asks this process ($WATCHDOG_PID, when
 * set, is its pid) for keep-alives, 0 when not, -EINVAL when malformed. */
int sd_watchdog_enabled(int unset_environment, uint64_t *usec)
{
    const char *s = getenv("WATCHDOG_USEC"), *p = getenv("WATCHDOG_PID");
    char *end;
    int rc = 0;

    if (s == NULL)
        goto out;
    errno = 0;
    uint64_t u = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || u == 0 || s[0] == '-') {
        rc = -EINVAL;
        goto out;
    }
    if (p != NULL) {
        long pid = strtol(p, &end, 10);
        if (end == p || *end != '\0' || pid <= 0) {
            rc = -EINVAL;
            goto out;
        }
        if (pid != (long)getpid())
            goto out;
    }
    if (usec != NULL)
        *usec = u;
    rc = 1;
out:
    if (unset_environment) {
        unsetenv("WATCHDOG_USEC");
        unsetenv("WATCHDOG_PID");
    }
    return rc;
}

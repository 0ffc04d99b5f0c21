/* receivers/journald/journald.c: the `journald` receiver: reads the systemd
 * journal with libsystemd's sd_journal API (no journalctl child) and feeds
 * the logs pipelines, one request per batch of records
 * (journald_record.c), through sf_component_emit().
 *
 * DESIGN. Threads: one reader thread per receiver owns the sd_journal
 * handle from start to shutdown (start opens it on the main thread, which
 * closes it again after the join); it reads, builds, emits and waits on the
 * journal's inotify fd and an eventfd that shutdown writes to. Nothing of
 * its state is read by another thread while it runs.
 * No loss, no duplicate: the cursor of a batch's last record is committed
 * (kept in memory, and written to cursor_file as a temp file renamed over
 * the old one) only once the pipeline accepted the batch, or refused it
 * for good (counted as refused, with its reason: retrying could not help).
 * A retryable refusal (memory short, a queue full) keeps the batch and
 * sends it again after a backoff (100 ms doubling to 5 s), reading nothing
 * more meanwhile. A restart resumes after the cursor in cursor_file, a
 * reload (SIGHUP) after the one handed over by suspend/resume; a batch not
 * accepted when either comes is read again. A crash between the pipeline's
 * acceptance and the cursor's rename can repeat that one batch.
 * Bounds: a body is at most max_message_size bytes (longer ones cut at a
 * character boundary, counted; the library is asked for no more than that
 * of a compressed field), bytes that are not UTF-8 are replaced by U+FFFD
 * (counted), a batch holds at most max_batch_records records and about
 * 1 MiB. */
#include "journald.h"

#include "sf_libsystemd.h"
#include "sf_time.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-id128.h>
#include <systemd/sd-journal.h>

#define BATCH_BYTES (1u << 20)
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define WAIT_MAX_MS 1000        /* the journal is polled at least this often */
#define CURSOR_MAX 1024

/* The type's own series (sf_counters.values). */
enum {
    JM_TRUNCATED,
    JM_INVALID_UTF8,
    JM_DROPPED_FIELDS,
    JM_RETRIES,
    JM_READ_ERRORS,
    JM_CURSOR_FAILURES
};

typedef struct jd_batch {
    uint8_t *bytes;             /* the encoded request; NULL: none pending */
    size_t len;
    size_t records;
    char *cursor;               /* of its last record */
} jd_batch;

typedef struct journald_receiver {
    sf_component *self;
    const sf_journald_config *cfg;
    sd_journal *j;
    int wake_fd;
    pthread_t thread;
    bool running;
    _Atomic bool stop;
    bool have_current;          /* the journal is on an entry not yet in a batch */
    char *committed;            /* cursor of the last record done with */
    char *resumed;              /* handed over by a reload (resume), used at start */
    sf_arena *build_arena;
    sf_arena *req_arena;
    sf_jd_builder *builder;
    uint8_t *message;           /* scratch: MESSAGE copied out of the library */
    jd_batch pending;
    int64_t backoff_ms;
    bool cursor_failing;        /* the last write of cursor_file failed (said once) */
    bool read_failing;          /* the last read of the journal failed (said once) */
} journald_receiver;

static void batch_clear(jd_batch *b)
{
    sf_free(b->bytes);
    free(b->cursor);            /* libsystemd's malloc */
    memset(b, 0, sizeof(*b));
}

static void count(journald_receiver *r, int row, uint64_t n)
{
    if (n > 0)
        sf_count(&sf_component_counters(r->self)->values[row], n);
}

/* ---- the cursor ----------------------------------------------------------- */

/* The cursor in cursor_file, or NULL (none yet, or unreadable: said). */
static char *cursor_read(journald_receiver *r)
{
    char buf[CURSOR_MAX + 2];
    FILE *f;
    size_t n;
    char *c;

    if (r->cfg->cursor_file == NULL)
        return NULL;
    f = fopen(r->cfg->cursor_file, "re");
    if (f == NULL) {
        if (errno != ENOENT)
            sf_log(SF_LOG_WARN, "receiver %s: cannot read cursor_file '%s': %s; starting at "
                   "start_at", sf_component_id(r->self), r->cfg->cursor_file, strerror(errno));
        return NULL;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    if (n == 0 || n > CURSOR_MAX || strspn(buf, "0123456789abcdefghijklmnopqrstuvwxyz"
                                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ=;_-") != n) {
        sf_log(SF_LOG_WARN, "receiver %s: cursor_file '%s' does not hold a journal cursor; "
               "starting at start_at", sf_component_id(r->self), r->cfg->cursor_file);
        return NULL;
    }
    c = malloc(n + 1);
    if (c != NULL)
        memcpy(c, buf, n + 1);
    return c;
}

/* cursor_file := cursor, atomically: a temp file beside it, synced, renamed. */
static bool cursor_write(journald_receiver *r, const char *cursor)
{
    const char *path = r->cfg->cursor_file;
    size_t plen = strlen(path), clen = strlen(cursor);
    char *tmp = sf_malloc(plen + 8);
    bool ok = false;
    int fd;

    if (tmp == NULL)
        return false;
    snprintf(tmp, plen + 8, "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        ok = write(fd, cursor, clen) == (ssize_t)clen && write(fd, "\n", 1) == 1 &&
             fsync(fd) == 0;
        ok = close(fd) == 0 && ok;
        ok = ok && rename(tmp, path) == 0;
        if (!ok)
            unlink(tmp);
    }
    if (!ok && !r->cursor_failing)
        sf_log(SF_LOG_WARN, "receiver %s: cannot write cursor_file '%s': %s; the cursor is "
               "kept in memory (a restart would read again from the last one written)",
               sf_component_id(r->self), path, strerror(errno));
    else if (ok && r->cursor_failing)
        sf_log(SF_LOG_INFO, "receiver %s: cursor_file '%s' written again",
               sf_component_id(r->self), path);
    r->cursor_failing = !ok;
    sf_free(tmp);
    return ok;
}

/* Done with the pending batch: its cursor becomes the committed one. */
static void commit(journald_receiver *r)
{
    free(r->committed);
    r->committed = r->pending.cursor;
    r->pending.cursor = NULL;
    if (r->committed != NULL && r->cfg->cursor_file != NULL && !cursor_write(r, r->committed))
        count(r, JM_CURSOR_FAILURES, 1);
    batch_clear(&r->pending);
}

/* ---- reading ------------------------------------------------------------- */

/* A field of the current entry, "NAME=" stripped, copied into buf (at most
 * `cap` bytes: enough to see it is too long); NULL when absent. */
static const uint8_t *field(journald_receiver *r, const char *name, uint8_t *buf, size_t cap,
                            size_t *len)
{
    const void *data;
    size_t n, skip = strlen(name) + 1;

    if (sd_journal_get_data(r->j, name, &data, &n) < 0 || n < skip)
        return NULL;
    n -= skip;
    *len = n < cap ? n : cap;
    memcpy(buf, (const uint8_t *)data + skip, *len);
    return buf;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Read records into a new pending batch: until max_batch_records, about
 * BATCH_BYTES, or the end of the journal (*caught_up). SF_ENOMEM. */
static sf_status fill(journald_receiver *r, bool *caught_up)
{
    uint8_t unit[SF_JD_MAX_FIELD + 1], ident[SF_JD_MAX_FIELD + 1], pid[SF_JD_MAX_FIELD + 1];
    uint8_t prio[8];
    sf_jd_notes notes = { 0 };
    char *last = NULL;
    sf_status st = SF_OK;

    *caught_up = false;
    sf_jd_builder_reset(r->builder);
    while (sf_jd_builder_count(r->builder) < (size_t)r->cfg->max_batch_records) {
        sf_jd_entry e = { 0 };
        char *cursor = NULL;
        int rc;

        if (!r->have_current) {
            rc = sd_journal_next(r->j);
            if (rc < 0) {
                count(r, JM_READ_ERRORS, 1);
                if (!r->read_failing)
                    sf_log(SF_LOG_WARN, "receiver %s: reading the journal: %s; trying again",
                           sf_component_id(r->self), strerror(-rc));
            }
            r->read_failing = rc < 0;
            if (rc <= 0) {
                *caught_up = true;
                break;
            }
        }
        r->have_current = false;
        if (sd_journal_get_realtime_usec(r->j, &e.realtime_us) < 0 ||
            sd_journal_get_cursor(r->j, &cursor) < 0) {
            count(r, JM_READ_ERRORS, 1);        /* a damaged entry: passed over */
            continue;
        }
        e.message = field(r, "MESSAGE", r->message, (size_t)r->cfg->max_message_size + 1,
                          &e.message_len);
        if (sf_jd_builder_count(r->builder) > 0 &&
            sf_jd_builder_bytes(r->builder) + e.message_len > BATCH_BYTES) {
            r->have_current = true;             /* the next batch's first */
            free(cursor);
            break;
        }
        e.priority = field(r, "PRIORITY", prio, sizeof(prio), &e.priority_len);
        e.unit = field(r, "_SYSTEMD_UNIT", unit, sizeof(unit), &e.unit_len);
        e.identifier = field(r, "SYSLOG_IDENTIFIER", ident, sizeof(ident), &e.identifier_len);
        e.pid = field(r, "_PID", pid, sizeof(pid), &e.pid_len);
        st = sf_jd_builder_add(r->builder, &e, now_ns(), &notes);
        if (st != SF_OK) {
            /* read again next time */
            free(cursor);
            sd_journal_previous(r->j);
            break;
        }
        free(last);
        last = cursor;
    }
    count(r, JM_TRUNCATED, notes.truncated);
    count(r, JM_INVALID_UTF8, notes.invalid_utf8);
    count(r, JM_DROPPED_FIELDS, notes.dropped_fields);
    if (sf_jd_builder_count(r->builder) > 0 && st == SF_OK) {
        st = sf_jd_builder_encode(r->builder, &r->pending.bytes, &r->pending.len);
        if (st == SF_OK) {
            r->pending.records = sf_jd_builder_count(r->builder);
            r->pending.cursor = last;
            last = NULL;
        }
    }
    if (st != SF_OK && last != NULL) {
        /* nothing of this batch is sent: read it again from the committed
         * cursor (or the journal's start for a first batch) */
        if (r->committed != NULL && sd_journal_seek_cursor(r->j, r->committed) >= 0 &&
            sd_journal_next(r->j) > 0)
            r->have_current = sd_journal_test_cursor(r->j, r->committed) <= 0;
        else
            sd_journal_seek_head(r->j);
    }
    free(last);
    sf_jd_builder_reset(r->builder);
    return st;
}

/* The pending batch into the pipelines. */
static sf_status send_pending(journald_receiver *r)
{
    sf_request b;
    sf_status st;

    sf_request_init_signal(&b, r->req_arena, SF_SIGNAL_LOGS, r->pending.bytes, r->pending.len,
                           SF_OTLP_DEFAULT_MAX_DEPTH);
    st = sf_component_emit(r->self, SF_TRANSPORT_NONE, &b);
    sf_request_release(&b);
    sf_arena_reset(r->req_arena);
    return st;
}

/* Sleep up to `ms`, or until shutdown. */
static void wait_ms(journald_receiver *r, int64_t ms)
{
    struct pollfd p = { .fd = r->wake_fd, .events = POLLIN };

    if (!atomic_load(&r->stop))
        poll(&p, 1, (int)ms);
}

/* Until the journal changes, WAIT_MAX_MS pass, or shutdown. */
static void wait_journal(journald_receiver *r)
{
    struct pollfd p[2] = { { .fd = sd_journal_get_fd(r->j), .events = POLLIN },
                           { .fd = r->wake_fd, .events = POLLIN } };
    uint64_t until = (uint64_t)-1;
    int ms = WAIT_MAX_MS, ev = sd_journal_get_events(r->j);

    if (ev > 0)
        p[0].events = (short)ev;
    if (sd_journal_get_timeout(r->j, &until) >= 0 && until != (uint64_t)-1) {
        uint64_t now = (uint64_t)sf_now_us();
        uint64_t left = until > now ? (until - now + 999) / 1000 : 0;

        if (left < (uint64_t)ms)
            ms = (int)left;
    }
    if (atomic_load(&r->stop))
        return;
    if (p[0].fd < 0)
        poll(&p[1], 1, ms);
    else
        poll(p, 2, ms);
    sd_journal_process(r->j);
}

static void backoff(journald_receiver *r)
{
    r->backoff_ms = r->backoff_ms == 0 ? BACKOFF_MIN_MS
                  : r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
    wait_ms(r, r->backoff_ms);
}

static void *reader_main(void *arg)
{
    journald_receiver *r = arg;

    while (!atomic_load(&r->stop)) {
        bool caught_up = false;
        sf_status st;

        if (r->pending.bytes == NULL) {
            if (!sf_component_may_accept(r->self)) {
                backoff(r);                 /* memory is short: read nothing */
                continue;
            }
            if (fill(r, &caught_up) != SF_OK) {
                backoff(r);
                continue;
            }
        }
        if (r->pending.bytes != NULL) {
            st = send_pending(r);
            if (st != SF_OK && sf_status_retryable(st)) {
                count(r, JM_RETRIES, 1);
                backoff(r);
                continue;
            }
            if (st != SF_OK)
                sf_log(SF_LOG_WARN, "receiver %s: %zu records refused by the pipeline (%s); "
                       "not sent again", sf_component_id(r->self), r->pending.records,
                       sf_status_str(st));
            commit(r);
            r->backoff_ms = 0;
        }
        if (caught_up)
            wait_journal(r);
    }
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------ */

static sf_status add_match(journald_receiver *r, const char *t)
{
    int rc = sd_journal_add_match(r->j, t, 0);

    if (rc < 0) {
        sf_log(SF_LOG_ERROR, "receiver %s: the journal refused the match '%s': %s",
               sf_component_id(r->self), t, strerror(-rc));
        return SF_CONFIG;
    }
    return SF_OK;
}

/* ( units ) AND ( identifiers ) AND ( priorities ) AND ( dmesg ) AND
 * ( matches[0] OR matches[1] ... ), as upstream's journalctl command line. */
static sf_status add_matches(journald_receiver *r)
{
    const sf_journald_config *c = r->cfg;
    const sf_strlist *lists[] = { &c->units, &c->identifiers };
    char t[64];

    for (size_t l = 0; l < 2; l++) {
        for (size_t i = 0; i < lists[l]->n; i++)
            if (add_match(r, lists[l]->v[i]) != SF_OK)
                return SF_CONFIG;
        if (lists[l]->n > 0)
            sd_journal_add_conjunction(r->j);
    }
    for (int p = c->priority.most; p <= c->priority.least; p++) {
        snprintf(t, sizeof(t), "PRIORITY=%d", p);
        if (add_match(r, t) != SF_OK)
            return SF_CONFIG;
    }
    sd_journal_add_conjunction(r->j);
    if (c->dmesg) {
        sd_id128_t boot;
        char id[SD_ID128_STRING_MAX];

        if (add_match(r, "_TRANSPORT=kernel") != SF_OK)
            return SF_CONFIG;
        if (sd_id128_get_boot(&boot) >= 0) {
            snprintf(t, sizeof(t), "_BOOT_ID=%s", sd_id128_to_string(boot, id));
            if (add_match(r, t) != SF_OK)
                return SF_CONFIG;
        }
        sd_journal_add_conjunction(r->j);
    }
    for (size_t m = 0; m < c->matches.n; m++) {
        for (size_t i = 0; i < c->matches.v[m].n; i++)
            if (add_match(r, c->matches.v[m].terms[i]) != SF_OK)
                return SF_CONFIG;
        if (m + 1 < c->matches.n)
            sd_journal_add_disjunction(r->j);
    }
    if (c->matches.n > 0)
        sd_journal_add_conjunction(r->j);
    return SF_OK;
}

static sf_status open_journal(journald_receiver *r)
{
    const sf_journald_config *c = r->cfg;
    int rc;

    if (c->directory != NULL) {
        rc = sd_journal_open_directory(&r->j, c->directory, 0);
    } else if (c->files.n > 0) {
        const char **paths = sf_calloc(c->files.n + 1, sizeof(*paths));

        if (paths == NULL)
            return SF_ENOMEM;
        for (size_t i = 0; i < c->files.n; i++)
            paths[i] = c->files.v[i];
        rc = sd_journal_open_files(&r->j, paths, 0);
        sf_free(paths);
    } else {
        rc = sd_journal_open(&r->j, SD_JOURNAL_LOCAL_ONLY);
    }
    if (rc < 0) {
        r->j = NULL;
        sf_log(SF_LOG_ERROR, "receiver %s: cannot open the journal%s%s%s: %s",
               sf_component_id(r->self), c->directory ? " in '" : "",
               c->directory ? c->directory : "", c->directory ? "'" : "", strerror(-rc));
        return SF_IO;
    }
    return SF_OK;
}

/* Where reading starts: after the handed-over or saved cursor, else at
 * start_at. Returns a word for the log line. */
static const char *position(journald_receiver *r)
{
    char *cursor = r->resumed != NULL ? r->resumed : cursor_read(r);
    const char *from = r->resumed != NULL ? "after the cursor handed over by the reload"
                                          : "after the cursor in cursor_file";

    r->resumed = NULL;
    if (cursor != NULL && sd_journal_seek_cursor(r->j, cursor) >= 0) {
        int rc = sd_journal_next(r->j);

        /* on the cursor's entry: done with it; on a later one (the
         * cursor's is gone, or filtered out): that one is new */
        r->have_current = rc > 0 && sd_journal_test_cursor(r->j, cursor) <= 0;
        free(r->committed);
        r->committed = cursor;
        return from;
    }
    if (cursor != NULL)
        sf_log(SF_LOG_WARN, "receiver %s: the journal refused the saved cursor; starting at "
               "start_at", sf_component_id(r->self));
    free(cursor);
    if (r->cfg->start_at == SF_JD_START_BEGINNING) {
        sd_journal_seek_head(r->j);
        return "at the beginning";
    }
    /* on the last entry, so that the next one read is new; an empty
     * journal is read from its head: whatever comes is new */
    sd_journal_seek_tail(r->j);
    if (sd_journal_previous(r->j) <= 0)
        sd_journal_seek_head(r->j);
    return "at the end";
}

static sf_status jd_create(sf_component *self, const void *config)
{
    journald_receiver *r;

    /* libsystemd is loaded when a component needs it (sf_libsystemd.h): a
     * missing one is a config-time error */
    if (sf_libsystemd_load() != SF_OK) {
        sf_error("receiver %s: %s", sf_component_id(self), sf_libsystemd_error());
        return SF_IO;
    }
    if ((r = sf_calloc(1, sizeof(*r))) == NULL)
        return SF_ENOMEM;
    r->self = self;
    r->cfg = config;
    r->wake_fd = -1;
    sf_component_set_transports(self, 1u << SF_TRANSPORT_NONE);
    sf_component_set_ctx(self, r);
    return SF_OK;
}

static void jd_stop(journald_receiver *r)
{
    if (r->running) {
        uint64_t one = 1;

        atomic_store(&r->stop, true);
        if (write(r->wake_fd, &one, sizeof(one)) < 0) {
            /* an eventfd write fails only past 2^64-2: the flag is set */
        }
        pthread_join(r->thread, NULL);
        r->running = false;
    }
    if (r->j != NULL) {
        sd_journal_close(r->j);
        r->j = NULL;
    }
    if (r->wake_fd >= 0) {
        close(r->wake_fd);
        r->wake_fd = -1;
    }
    batch_clear(&r->pending);           /* not accepted: read again after the cursor */
    sf_jd_builder_destroy(r->builder);
    r->builder = NULL;
    sf_arena_destroy(r->build_arena);
    sf_arena_destroy(r->req_arena);
    r->build_arena = r->req_arena = NULL;
    sf_free(r->message);
    r->message = NULL;
}

static sf_status jd_start(sf_component *self)
{
    journald_receiver *r = sf_component_ctx(self);
    const char *where;
    sf_status st;

    if (!sf_component_receives(self, SF_SIGNAL_LOGS)) {
        /* nothing could take the records: read none, so the cursor stays */
        sf_log(SF_LOG_WARN, "receiver %s: no logs pipeline lists it: the journal is not read",
               sf_component_id(self));
        return SF_OK;
    }
    r->message = sf_malloc((size_t)r->cfg->max_message_size + 1);
    r->build_arena = sf_arena_create(64 * 1024, 0);
    r->req_arena = sf_arena_create(4096, 0);
    r->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->message == NULL || r->build_arena == NULL || r->req_arena == NULL) {
        st = SF_ENOMEM;
        goto out_stop;
    }
    r->builder = sf_jd_builder_create(r->build_arena, (size_t)r->cfg->max_batch_records,
                                      (size_t)r->cfg->max_message_size);
    if (r->builder == NULL || r->wake_fd < 0) {
        st = r->builder == NULL ? SF_ENOMEM : SF_IO;
        goto out_stop;
    }
    st = open_journal(r);
    if (st != SF_OK)
        goto out_stop;
    /* the inotify watches before anything is read, so no change is missed */
    sd_journal_get_fd(r->j);
    /* a compressed field is decompressed only as far as a body can use */
    sd_journal_set_data_threshold(r->j, (size_t)r->cfg->max_message_size + 16);
    st = add_matches(r);
    if (st != SF_OK)
        goto out_stop;
    where = position(r);
    atomic_store(&r->stop, false);
    if (pthread_create(&r->thread, NULL, reader_main, r) != 0) {
        st = SF_ENOMEM;
        goto out_stop;
    }
    r->running = true;
    sf_log(SF_LOG_INFO, "receiver %s: reading the journal%s%s%s %s",
           sf_component_id(self), r->cfg->directory ? " in '" : "",
           r->cfg->directory ? r->cfg->directory : "", r->cfg->directory ? "'" : "", where);
    return SF_OK;

out_stop:
    jd_stop(r);
    return st;
}

static void jd_shutdown(sf_component *self)
{
    journald_receiver *r = sf_component_ctx(self);

    if (r != NULL)
        jd_stop(r);
}

static void jd_destroy(sf_component *self)
{
    journald_receiver *r = sf_component_ctx(self);

    if (r == NULL)
        return;
    jd_stop(r);
    free(r->committed);
    free(r->resumed);
    sf_free(r);
    sf_component_set_ctx(self, NULL);
}

/* A reload: stop reading and hand the committed cursor to the successor
 * (a batch not yet accepted is read again by it). */
static void *jd_suspend(sf_component *self)
{
    journald_receiver *r = sf_component_ctx(self);
    char *parcel;

    jd_stop(r);
    parcel = r->committed;
    r->committed = NULL;
    return parcel;
}

static void jd_resume(sf_component *self, void *parcel)
{
    journald_receiver *r = self != NULL ? sf_component_ctx(self) : NULL;

    if (r == NULL) {
        free(parcel);                   /* cursor_file, if any, has it already */
        return;
    }
    free(r->resumed);
    r->resumed = parcel;
}

static const sf_metric_row jd_metric_rows[] = {
    [JM_TRUNCATED] = { .name = "spanfence_receiver_journald_truncated_messages",
      .help = "Journal messages cut to max_message_size." },
    [JM_INVALID_UTF8] = { .name = "spanfence_receiver_journald_invalid_utf8_messages",
      .help = "Journal messages with bytes that were not UTF-8, each replaced by U+FFFD." },
    [JM_DROPPED_FIELDS] = { .name = "spanfence_receiver_journald_dropped_fields",
      .help = "Journal fields left out of a record's attributes: not UTF-8, or longer than "
              "256 bytes." },
    [JM_RETRIES] = { .name = "spanfence_receiver_journald_retries",
      .help = "Batches the pipeline refused with a retryable status, kept and sent again." },
    [JM_READ_ERRORS] = { .name = "spanfence_receiver_journald_read_errors",
      .help = "Journal entries or reads that failed (damaged entries are passed over)." },
    [JM_CURSOR_FAILURES] = { .name = "spanfence_receiver_journald_cursor_write_failures",
      .help = "Writes of cursor_file that failed." },
    { 0 }
};

const sf_component_type sf_journald_receiver_type = {
    .name = "journald",
    .kind = SF_KIND_RECEIVER,
    .description = "reads the systemd journal (sd_journal): logs, body MESSAGE, severity from "
                   "PRIORITY, a cursor kept across restarts and reloads",
    .signals = SF_SIGNALS_LOGS,
    .config_size = sizeof(sf_journald_config),
    .config_map = sf_journald_config_map,
    .check = sf_journald_check,
    .create = jd_create,
    .start = jd_start,
    .shutdown = jd_shutdown,
    .destroy = jd_destroy,
    .suspend = jd_suspend,
    .resume = jd_resume,
    .metric_rows = jd_metric_rows,
};

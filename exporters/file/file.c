/* exporters/file/file.c: the `file` exporter: writes every request that
 * leaves the pipeline (after the allowlist) to one file, as OTLP/JSON lines
 * or length-prefixed protobuf, optionally gzip, with rotation by size and
 * by line count. Operators use it to capture a window of traffic, tests to
 * read back exactly what left.
 *
 * DESIGN
 * Threads: consume() runs on receiver threads; it only encodes the record
 *   (JSON text, or the batch's packed bytes) and pushes it onto a bounded
 *   queue: it never touches the disk, so a slow disk cannot stall a
 *   receiver (a full queue refuses with SF_FULL). One writer thread owns the
 *   file descriptor, the gzip stream, the rotation state and the flush timer;
 *   nothing else is written after start.
 * Records: a queued item is an sf_buf holding one whole record (a JSON line
 *   with its newline, or the protobuf bytes, whose 4-byte big-endian length
 *   the writer puts in front). A plain file gets each record with one
 *   writev(); if that falls short, the file is truncated back to where the
 *   record began, so the file never holds half a record. A gzip file gets
 *   each record into zlib's gz stream; every flush_interval the stream is
 *   Z_SYNC_FLUSHed so a reader decompressing the live file sees whole lines,
 *   and closing a segment (rotation, shutdown) ends its gzip member, so every
 *   file is a complete .gz stream.
 * Counting: a span is in queued_spans from consume until it is on disk
 *   (plain: written; gzip: flushed out of zlib's buffers), then sent_spans,
 *   or send_failed_spans[permanent_error] when writing failed. After a write
 *   error the file is closed and reopened (appending) for the next record;
 *   the error is logged once per streak of failures. A regular file that is
 *   no longer at its path (unlinked, its directory removed, or replaced) is
 *   detected before each record (stat of the path against fstat of the fd)
 *   and opened again; a record written (plain) or flushed (gzip) into a file
 *   found gone afterwards is counted failed, never sent.
 * Rotation (regular files only): before a record would take the live file
 *   past rotation.max_megabytes (gzip: once the compressed size has reached
 *   it), or once it holds max_lines records, the file is finished, fsynced
 *   and renamed to <path-without-ext>-<UTC yyyy-mm-ddThh-mm-ss.mmm><ext>, a
 *   new one is started and the oldest backups beyond max_backups deleted.
 *   Timestamps in names are strictly increasing, so names sort by age.
 * Shutdown: the queue is closed, the writer writes everything queued,
 *   flushes, ends the gzip member, fsyncs and closes, then is joined. */
#include "file.h"

#include "sf_otlp_json.h"
#include "sf_queue.h"
#include "sf_time.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* zlib level 1: the gzip of the exporters is the most expensive stage of
 * the pipeline (field notes), and a capture file is read rarely. */
#define FILE_GZIP_MODE "ab1"
/* "-yyyy-mm-ddThh-mm-ss.mmm" */
#define FILE_STAMP_LEN 24

typedef struct fileexp {
    const char *id;
    sf_counters *counters;
    char *path;
    char *dir;                  /* where backups live */
    char *prefix;               /* backup basename before the stamp: "spans" */
    char *ext;                  /* ".json", or "" */
    bool json;
    bool gzip;
    bool append;
    int64_t flush_ms;
    uint64_t max_bytes;         /* 0: no size rotation */
    uint64_t max_lines;         /* 0: no line rotation */
    uint64_t max_backups;       /* 0: keep all */
    sf_queue *queue;
    pthread_t writer;
    bool started;
    _Atomic bool stopped;

    /* ---- the writer thread's own state ---- */
    int fd;                     /* -1: closed (reopened for the next record) */
    gzFile gz;
    bool regular;               /* a regular file: rotation, truncation, fsync */
    uint64_t bytes;             /* size of the live file */
    uint64_t lines;             /* records in the live file */
    uint64_t pending_spans;     /* gzip: written into zlib, not yet flushed */
    int64_t flush_due;          /* monotonic ms; 0: nothing to flush */
    int64_t last_stamp;         /* ms of the newest backup name */
    bool failing;               /* in a streak of write errors */
    uint64_t failed_in_streak;
} fileexp;

/* ---- counting ------------------------------------------------------------- */

static void count_sent(fileexp *f, uint64_t spans)
{
    sf_count(&f->counters->sent_spans, spans);
    atomic_fetch_sub_explicit(&f->counters->queued_spans, (int64_t)spans, memory_order_relaxed);
    if (f->failing) {
        sf_info("exporter %s: writing '%s' again (%" PRIu64 " spans lost)", f->id, f->path,
                f->failed_in_streak);
        f->failing = false;
    }
}

static void count_failed(fileexp *f, uint64_t spans, sf_reason reason, const char *what,
                         int err)
{
    sf_count(&f->counters->send_failed_spans[reason], spans);
    atomic_fetch_sub_explicit(&f->counters->queued_spans, (int64_t)spans, memory_order_relaxed);
    if (reason != SF_REASON_PERMANENT_ERROR)
        return;
    if (!f->failing) {
        sf_error("exporter %s: cannot %s '%s': %s; dropping spans until it works again", f->id,
                 what, f->path, err ? strerror(err) : "gzip stream error");
        f->failing = true;
        f->failed_in_streak = 0;
    }
    f->failed_in_streak += spans;
}

/* ---- the live file ---------------------------------------------------------- */

static sf_status open_live(fileexp *f, bool truncate)
{
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0);
    struct stat st;
    int fd = open(f->path, flags, 0600);

    if (fd < 0)
        return SF_IO;
    if (fstat(fd, &st) != 0)
        goto out_close;
    f->regular = S_ISREG(st.st_mode);
    /* An existing file keeps its mode on open: spans stay private even
     * after filtering. */
    if (f->regular && (st.st_mode & 07777) != 0600 && fchmod(fd, 0600) != 0)
        goto out_close;
    f->bytes = f->regular ? (uint64_t)st.st_size : 0;
    f->lines = 0;
    if (f->gzip) {
        f->gz = gzdopen(fd, FILE_GZIP_MODE);    /* a new gzip member at the end */
        if (f->gz == NULL) {
            errno = ENOMEM;
            goto out_close;
        }
    }
    f->fd = fd;
    return SF_OK;

out_close:
    {
        int err = errno;

        close(fd);
        errno = err;
    }
    return SF_IO;
}

static void close_live(fileexp *f, bool ok);

/* A regular file still reachable at its path: not unlinked (its directory
 * removed, or the file itself), and not replaced by another file there.
 * Data written into a file that is gone is lost, so it must never count as
 * sent. False with errno set (ENOENT when it was removed). */
static bool still_linked(fileexp *f)
{
    struct stat fd_st, path_st;

    if (!f->regular)
        return true;
    if (fstat(f->fd, &fd_st) != 0)
        return false;
    if (fd_st.st_nlink == 0) {
        errno = ENOENT;
        return false;
    }
    if (stat(f->path, &path_st) != 0)
        return false;
    if (path_st.st_dev != fd_st.st_dev || path_st.st_ino != fd_st.st_ino) {
        errno = ESTALE;
        return false;
    }
    return true;
}

/* Before a record goes into the live file: if the file is no longer at its
 * path, close it and open the path again (a new file when the directory is
 * still there). SF_IO with errno when it cannot be opened. */
static sf_status check_live(fileexp *f)
{
    if (f->fd >= 0 && !still_linked(f)) {
        int err = errno;

        sf_warn("exporter %s: '%s' is no longer there (%s): opening it again", f->id, f->path,
                strerror(err));
        close_live(f, true);    /* what zlib still holds is counted in flush_live */
    }
    if (f->fd < 0 && open_live(f, false) != SF_OK)
        return SF_IO;
    return SF_OK;
}

/* Push zlib's buffered output to the file; the spans it held become sent. */
static sf_status flush_live(fileexp *f)
{
    uint64_t spans = f->pending_spans;

    f->flush_due = 0;
    if (f->gz == NULL || spans == 0)
        return SF_OK;
    f->pending_spans = 0;
    errno = 0;
    if (gzflush(f->gz, Z_SYNC_FLUSH) != Z_OK) {
        count_failed(f, spans, SF_REASON_PERMANENT_ERROR, "write", errno);
        close_live(f, false);   /* the stream is broken: reopen for the next record */
        return SF_IO;
    }
    if (!still_linked(f)) {
        /* flushed into a file that is gone: lost */
        count_failed(f, spans, SF_REASON_PERMANENT_ERROR, "write", errno);
        close_live(f, false);
        return SF_IO;
    }
    count_sent(f, spans);
    return SF_OK;
}

/* Finish the segment: flush, end the gzip member, fsync, close. `ok`
 * false: the file is being abandoned after an error. */
static void close_live(fileexp *f, bool ok)
{
    if (f->fd < 0)
        return;
    if (f->gz != NULL) {
        if (ok && flush_live(f) == SF_OK && gzflush(f->gz, Z_FINISH) != Z_OK)
            sf_warn("exporter %s: could not end the gzip stream of '%s'", f->id, f->path);
        if (f->fd < 0)
            return;             /* flush_live found it broken or gone, and closed it */
        if (f->pending_spans > 0) {
            count_failed(f, f->pending_spans, SF_REASON_PERMANENT_ERROR, "write", errno);
            f->pending_spans = 0;
        }
    }
    if (ok && f->regular && fsync(f->fd) != 0)
        sf_warn("exporter %s: fsync of '%s' failed: %s", f->id, f->path, strerror(errno));
    if (f->gz != NULL)
        gzclose(f->gz);         /* closes fd; the member already ended */
    else
        close(f->fd);
    f->gz = NULL;
    f->fd = -1;
    f->flush_due = 0;
}

/* ---- rotation ----------------------------------------------------------------- */

static bool is_backup_name(const fileexp *f, const char *name)
{
    static const char pattern[] = "-dddd-dd-ddTdd-dd-dd.ddd";
    size_t np = strlen(f->prefix), ne = strlen(f->ext), n = strlen(name);

    if (n != np + FILE_STAMP_LEN + ne || strncmp(name, f->prefix, np) != 0 ||
        strcmp(name + np + FILE_STAMP_LEN, f->ext) != 0)
        return false;
    for (size_t i = 0; i < FILE_STAMP_LEN; i++) {
        char c = name[np + i];

        if (pattern[i] == 'd' ? (c < '0' || c > '9') : c != pattern[i])
            return false;
    }
    return true;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Delete the oldest backups beyond max_backups. Stamps sort by age. */
static void prune_backups(fileexp *f)
{
    DIR *d;
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;

    if (f->max_backups == 0)
        return;
    d = opendir(f->dir);
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (!is_backup_name(f, e->d_name))
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **p = sf_realloc(names, ncap * sizeof(*names));

            if (p == NULL)
                goto out_free_names;
            names = p;
            cap = ncap;
        }
        names[n] = sf_strdup(e->d_name);
        if (names[n] == NULL)
            goto out_free_names;
        n++;
    }
    if (n > f->max_backups) {
        qsort(names, n, sizeof(*names), cmp_names);
        for (size_t i = 0; i < n - f->max_backups; i++) {
            if (unlinkat(dirfd(d), names[i], 0) != 0)
                sf_warn("exporter %s: cannot delete old backup '%s': %s", f->id, names[i],
                        strerror(errno));
        }
    }

out_free_names:
    for (size_t i = 0; i < n; i++)
        sf_free(names[i]);
    sf_free(names);
    closedir(d);
}

/* "<dir>/<prefix>-yyyy-mm-ddThh-mm-ss.mmm<ext>" for a stamp later than
 * every earlier one and not taken by an existing file. */
static char *backup_name(fileexp *f)
{
    int64_t ms = sf_wall_ms();
    char *name = NULL;

    if (ms <= f->last_stamp)
        ms = f->last_stamp + 1;
    for (int tries = 0; tries < 1000; tries++, ms++) {
        time_t secs = (time_t)(ms / 1000);
        struct tm tm;
        char stamp[32];
        size_t len;
        struct stat st;

        gmtime_r(&secs, &tm);
        strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H-%M-%S", &tm);
        len = strlen(f->dir) + 1 + strlen(f->prefix) + FILE_STAMP_LEN + strlen(f->ext) + 1;
        name = sf_malloc(len);
        if (name == NULL)
            return NULL;
        snprintf(name, len, "%s/%s-%s.%03d%s", f->dir, f->prefix, stamp, (int)(ms % 1000),
                 f->ext);
        if (lstat(name, &st) != 0 && errno == ENOENT) {
            f->last_stamp = ms;
            return name;
        }
        sf_free(name);
        name = NULL;
    }
    return NULL;
}

static void rotate(fileexp *f)
{
    char *name = backup_name(f);
    bool moved = false;

    close_live(f, true);
    if (name == NULL)
        sf_error("exporter %s: no name for a backup of '%s': not rotating", f->id, f->path);
    else if (rename(f->path, name) != 0)
        sf_error("exporter %s: cannot rename '%s' to '%s': %s", f->id, f->path, name,
                 strerror(errno));
    else
        moved = true;
    sf_free(name);
    /* Never truncate a file that was not moved away. */
    if (open_live(f, moved) != SF_OK)
        return;         /* the next record reports it, and tries again */
    if (moved)
        prune_backups(f);
}

static bool needs_rotation(fileexp *f, size_t len)
{
    if (!f->regular)
        return false;
    if (f->max_lines > 0 && f->lines >= f->max_lines)
        return true;
    if (f->max_bytes == 0 || f->bytes == 0)
        return false;
    if (f->gzip) {
        struct stat st;

        return fstat(f->fd, &st) == 0 && (uint64_t)st.st_size >= f->max_bytes;
    }
    return f->bytes + len > f->max_bytes;
}

/* ---- writing one record ---------------------------------------------------------- */

static sf_status write_plain(fileexp *f, const struct iovec *iov, int n, size_t len)
{
    ssize_t w;
    int err;

    do
        w = writev(f->fd, iov, n);
    while (w < 0 && errno == EINTR);
    if (w >= 0 && (size_t)w == len)
        return SF_OK;
    err = w < 0 ? errno : ENOSPC;
    /* Take back a partial record. */
    if (w > 0 && f->regular && ftruncate(f->fd, (off_t)f->bytes) != 0)
        sf_warn("exporter %s: cannot remove a partial record from '%s'", f->id, f->path);
    errno = err;
    return SF_IO;
}

static void write_record(fileexp *f, sf_buf *buf)
{
    uint8_t prefix[4] = {
        (uint8_t)(buf->len >> 24), (uint8_t)(buf->len >> 16), (uint8_t)(buf->len >> 8),
        (uint8_t)buf->len,
    };
    struct iovec iov[2];
    int n = 0;
    size_t len = 0;

    if (!f->json) {
        iov[n++] = (struct iovec){ prefix, sizeof(prefix) };
        len += sizeof(prefix);
    }
    iov[n++] = (struct iovec){ buf->data, buf->len };
    len += buf->len;

    if (check_live(f) != SF_OK) {
        count_failed(f, buf->spans, SF_REASON_PERMANENT_ERROR, "open", errno);
        return;
    }
    if (needs_rotation(f, len)) {
        rotate(f);
        if (f->fd < 0) {
            count_failed(f, buf->spans, SF_REASON_PERMANENT_ERROR, "open", errno);
            return;
        }
    }
    errno = 0;
    if (f->gzip) {
        bool ok = true;

        for (int i = 0; i < n && ok; i++)
            ok = gzwrite(f->gz, iov[i].iov_base, (unsigned)iov[i].iov_len) ==
                 (int)iov[i].iov_len;
        if (!ok) {
            int err = errno;

            count_failed(f, buf->spans, SF_REASON_PERMANENT_ERROR, "write", err);
            close_live(f, false);
            return;
        }
        f->pending_spans += buf->spans;
        if (f->flush_due == 0)
            f->flush_due = sf_now_ms() + f->flush_ms;
    } else {
        if (write_plain(f, iov, n, len) != SF_OK) {
            count_failed(f, buf->spans, SF_REASON_PERMANENT_ERROR, "write", errno);
            close_live(f, false);
            return;
        }
        if (!still_linked(f)) {
            /* removed while being written: the record went nowhere */
            count_failed(f, buf->spans, SF_REASON_PERMANENT_ERROR, "write", errno);
            close_live(f, false);
            return;
        }
        count_sent(f, buf->spans);
    }
    f->bytes += len;
    f->lines++;
}

/* ---- the writer thread ----------------------------------------------------------- */

static void *writer_main(void *arg)
{
    fileexp *f = arg;

    for (;;) {
        int64_t wait = -1;
        void *item;
        sf_status st;

        if (f->flush_due != 0) {
            wait = f->flush_due - sf_now_ms();
            if (wait < 0)
                wait = 0;
        }
        st = sf_queue_pop(f->queue, wait, &item);
        if (st == SF_OK) {
            sf_buf *buf = item;

            atomic_fetch_sub_explicit(&f->counters->queue_size, 1, memory_order_relaxed);
            write_record(f, buf);
            sf_buf_unref(buf);
            if (f->flush_due != 0 && sf_now_ms() >= f->flush_due)
                flush_live(f);
        } else if (st == SF_RETRY) {
            flush_live(f);
        } else {
            break;      /* closed and drained */
        }
    }
    close_live(f, true);
    return NULL;
}

/* ---- lifecycle --------------------------------------------------------------------- */

/* Split `path` into the backup directory, the name before the extension,
 * and the extension of its last component. */
static sf_status split_path(fileexp *f, const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');

    if (dot == NULL || dot == base)
        dot = base + strlen(base);
    if (slash == NULL)
        f->dir = sf_strdup(".");
    else
        f->dir = sf_strndup(path, slash == path ? 1 : (size_t)(slash - path));
    f->prefix = sf_strndup(base, (size_t)(dot - base));
    f->ext = sf_strdup(dot);
    return f->dir && f->prefix && f->ext ? SF_OK : SF_ENOMEM;
}

static void free_ctx(fileexp *f)
{
    sf_queue_destroy(f->queue);
    sf_free(f->path);
    sf_free(f->dir);
    sf_free(f->prefix);
    sf_free(f->ext);
    sf_free(f);
}

static sf_status file_create(sf_component *self, const void *config)
{
    const sf_file_config *c = config;
    fileexp *f = sf_calloc(1, sizeof(*f));

    if (f == NULL)
        return SF_ENOMEM;
    f->id = sf_component_id(self);
    f->counters = sf_component_counters(self);
    f->fd = -1;
    f->json = c->format == SF_FILE_FORMAT_JSON;
    f->gzip = c->compression == SF_FILE_COMPRESSION_GZIP;
    f->append = c->append;
    f->flush_ms = c->flush_interval > 0 ? c->flush_interval : 1000;
    if (c->rotation.present)
        f->max_bytes = (uint64_t)c->rotation.max_megabytes << 20;
    f->max_backups = (uint64_t)c->rotation.max_backups;
    f->max_lines = (uint64_t)c->max_lines;
    f->path = sf_strdup(c->path ? c->path : "");
    if (f->path == NULL || split_path(f, f->path) != SF_OK)
        goto out_free_ctx;
    f->queue = sf_queue_create(c->queue_size > 0 ? (size_t)c->queue_size : 64);
    if (f->queue == NULL)
        goto out_free_ctx;
    atomic_store(&f->counters->queue_capacity, (int64_t)sf_queue_capacity(f->queue));
    sf_component_set_ctx(self, f);
    return SF_OK;

out_free_ctx:
    free_ctx(f);
    return SF_ENOMEM;
}

/* Open (or truncate) the file here, not in create: `spanfence validate`
 * must not touch it. */
static sf_status file_start(sf_component *self)
{
    fileexp *f = sf_component_ctx(self);
    int err;

    /* After a reload the file holds what the previous instance wrote:
     * never truncate it then. */
    if (open_live(f, !f->append && !sf_component_is_successor(self)) != SF_OK) {
        sf_error("exporter %s: cannot open '%s': %s", f->id, f->path, strerror(errno));
        return SF_IO;
    }
    err = pthread_create(&f->writer, NULL, writer_main, f);
    if (err != 0) {
        close_live(f, true);
        sf_error("exporter %s: cannot start the writer thread: %s", f->id, strerror(err));
        return SF_ENOMEM;
    }
    f->started = true;
    return SF_OK;
}

/* Receiver threads: encode the record and queue it; never touches the
 * disk. SF_FULL when the writer is behind by queue_size requests. */
static sf_status file_consume(sf_component *self, sf_request *batch)
{
    fileexp *f = sf_component_ctx(self);
    sf_counters *k = f->counters;
    sf_buf *buf;
    sf_status st;

    if (batch->spans == 0)
        return SF_OK;
    if (atomic_load(&f->stopped))
        return SF_STOPPED;
    if (f->json) {
        char *text;
        size_t len;

        st = sf_request_tree(batch);
        if (st != SF_OK)
            return st;
        st = sf_otlp_json_encode(batch->req, &text, &len);
        if (st != SF_OK)
            return st;
        buf = sf_buf_create(len + 1);
        if (buf == NULL) {
            sf_free(text);
            return SF_ENOMEM;
        }
        memcpy(buf->data, text, len);
        buf->data[len] = '\n';
        buf->spans = batch->spans;
        sf_free(text);
    } else {
        st = sf_request_encode(batch, &buf);     /* buf->spans is set */
        if (st != SF_OK)
            return st;
    }
    /* the length prefix is 32 bits; gzwrite takes an int */
    if (buf->len > INT32_MAX) {
        sf_buf_unref(buf);
        return SF_TOOBIG;
    }
    atomic_fetch_add_explicit(&k->queued_spans, (int64_t)buf->spans, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->queue_size, 1, memory_order_relaxed);
    st = sf_queue_push(f->queue, buf);
    if (st != SF_OK) {
        atomic_fetch_sub_explicit(&k->queue_size, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&k->queued_spans, (int64_t)buf->spans, memory_order_relaxed);
        if (st == SF_FULL) {
            sf_count(&k->enqueue_failed_spans, buf->spans);
            sf_debug("exporter %s: queue full, refusing %zu spans", f->id, buf->spans);
        }
        sf_buf_unref(buf);
    }
    return st;
}

/* Stop taking records; the writer writes everything queued, then closes
 * the file properly. Without a writer (never started) what was queued is
 * dropped and counted. */
static void file_shutdown(sf_component *self)
{
    fileexp *f = sf_component_ctx(self);
    void *item;

    if (f == NULL || atomic_exchange(&f->stopped, true))
        return;
    sf_queue_close(f->queue);
    if (f->started) {
        pthread_join(f->writer, NULL);
        f->started = false;
    }
    while (sf_queue_pop(f->queue, 0, &item) == SF_OK) {
        sf_buf *buf = item;

        atomic_fetch_sub_explicit(&f->counters->queue_size, 1, memory_order_relaxed);
        count_failed(f, buf->spans, SF_REASON_SHUTDOWN, NULL, 0);
        sf_buf_unref(buf);
    }
}

static void file_destroy(sf_component *self)
{
    fileexp *f = sf_component_ctx(self);

    if (f == NULL)
        return;
    file_shutdown(self);
    free_ctx(f);
    sf_component_set_ctx(self, NULL);
}

const sf_component_type sf_file_exporter_type = {
    .name = "file",
    .kind = SF_KIND_EXPORTER,
    .description = "OTLP/JSON lines or length-prefixed protobuf to a local file, with rotation",
    .config_size = sizeof(sf_file_config),
    .config_map = sf_file_config_map,
    .check = sf_file_check,
    .create = file_create,
    .start = file_start,
    .consume = file_consume,
    .shutdown = file_shutdown,
    .destroy = file_destroy,
};

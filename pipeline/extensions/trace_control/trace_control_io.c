/* pipeline/extensions/trace_control/trace_control_io.c: what the collector
 * and `spanfence trace-level` both do to the outside world: append audit
 * records (built with json-c, fsync'd, never left half-written), ask an engine for a trace level (libcurl), talk to the
 * control socket, and read/write the few flat JSON objects they exchange
 * (read with json-c, strictly: one object, members of the expected type). */
#include "trace_control.h"
#include "sf_time.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- JSON (json-c) ------------------------------------------------------------ */

/* Whether a string anywhere in `o` holds a NUL (it would cut a C string
 * short, so a key or value could hide what follows). */
static bool has_nul(json_object *o)
{
    switch (json_object_get_type(o)) {
    case json_type_string:
        return strlen(json_object_get_string(o)) != (size_t)json_object_get_string_len(o);
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(o); i++)
            if (has_nul(json_object_array_get_idx(o, i)))
                return true;
        return false;
    case json_type_object: {
        json_object_object_foreach(o, k, v) {
            (void)k;
            if (has_nul(v))
                return true;
        }
        return false;
    }
    default:
        return false;
    }
}

/* The one top-level object of `json`, or NULL: strict mode, nesting capped,
 * nothing but white space after it. The caller puts the object. */
static json_object *parse_object(const char *json, size_t len)
{
    json_tokener *tok;
    json_object *o;
    size_t end;

    if (len > INT32_MAX || (tok = json_tokener_new_ex(8)) == NULL)
        return NULL;
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    o = json_tokener_parse_ex(tok, json, (int)len);
    end = json_tokener_get_parse_end(tok);
    if (o != NULL && (json_tokener_get_error(tok) != json_tokener_success ||
                      !json_object_is_type(o, json_type_object) || has_nul(o))) {
        json_object_put(o);
        o = NULL;
    }
    json_tokener_free(tok);
    for (; o != NULL && end < len; end++) {
        if (json[end] != ' ' && json[end] != '\t' && json[end] != '\n' && json[end] != '\r') {
            json_object_put(o);
            o = NULL;
        }
    }
    return o;
}

/* Member `key` of `json` if it has type `type` (the object in *holder, to put). */
static json_object *member(const char *json, size_t len, const char *key, json_type type,
                           json_object **holder)
{
    json_object *v = NULL;

    *holder = parse_object(json, len);
    if (*holder == NULL || !json_object_object_get_ex(*holder, key, &v) ||
        !json_object_is_type(v, type))
        return NULL;
    return v;
}

bool sf_tc_json_valid(const char *json, size_t len)
{
    json_object *o = parse_object(json, len);

    json_object_put(o);
    return o != NULL;
}

sf_status sf_tc_json_str(const char *json, size_t len, const char *key, char *out,
                         size_t out_size)
{
    json_object *o, *v = member(json, len, key, json_type_string, &o);
    sf_status st = SF_INVALID;

    if (v != NULL) {
        const char *str = json_object_get_string(v);
        size_t n = (size_t)json_object_get_string_len(v);

        if (n < out_size) {
            memcpy(out, str, n + 1);
            st = SF_OK;
        }
    }
    json_object_put(o);
    return st;
}

sf_status sf_tc_json_int(const char *json, size_t len, const char *key, int64_t *out)
{
    json_object *o, *v = member(json, len, key, json_type_int, &o);

    if (v != NULL) {
        errno = 0;
        *out = json_object_get_int64(v);
        if (errno != 0)
            v = NULL;               /* out of the int64 range */
    }
    json_object_put(o);
    return v != NULL ? SF_OK : SF_INVALID;
}

sf_status sf_tc_json_bool(const char *json, size_t len, const char *key, bool *out)
{
    json_object *o, *v = member(json, len, key, json_type_boolean, &o);

    if (v != NULL)
        *out = json_object_get_boolean(v);
    json_object_put(o);
    return v != NULL ? SF_OK : SF_INVALID;
}

/* ---- the audit log ----------------------------------------------------------- */

json_object *sf_tc_record_new(const char *event, const char *window, const char *target)
{
    json_object *o = json_object_new_object();

    if (o == NULL)
        return NULL;
    json_object_object_add(o, "event", json_object_new_string(event));
    if (window != NULL)
        json_object_object_add(o, "window", json_object_new_string(window));
    json_object_object_add(o, "target", json_object_new_string(target));
    return o;
}

void sf_tc_record_time(json_object *rec, const char *key, int64_t epoch_ms)
{
    char t[32];

    sf_time_format_utc(epoch_ms, t, sizeof(t));
    json_object_object_add(rec, key, json_object_new_string(t));
}

void sf_tc_record_answer(json_object *rec, long status, const char *detail)
{
    if (status != 0)
        json_object_object_add(rec, "status", json_object_new_int64(status));
    json_object_object_add(rec, "error", json_object_new_string(detail));
}

char *sf_tc_record_text(json_object *rec)
{
    const char *s;
    char *copy = NULL;

    if (rec == NULL)
        return NULL;
    /* one line: json-c escapes control characters, so no newline is in it */
    s = json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN |
                                                JSON_C_TO_STRING_NOSLASHESCAPE);
    if (s != NULL)
        copy = sf_strdup(s);
    json_object_put(rec);
    return copy;
}

/* Whether the file ends in a newline (or is empty): a line left cut short
 * by a crash mid-write gets one before the next record, so that record is
 * a line of its own. */
static bool at_line_start(int fd, off_t size)
{
    char last;

    return size == 0 || pread(fd, &last, 1, size - 1) != 1 || last == '\n';
}

sf_status sf_tc_audit_append(const char *path, const char *record)
{
    size_t len = strlen(record);
    char *line = sf_malloc(len + 3);
    sf_status st = SF_IO;
    struct stat before;
    size_t off = 0, n;
    ssize_t w;
    int fd;

    if (line == NULL)
        return SF_ENOMEM;
    /* O_NOFOLLOW: a symlink planted at the path does not redirect the log;
     * O_RDWR: at_line_start reads the last byte */
    fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        sf_error("trace_control: cannot open audit log '%s': %s", path,
                 errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        goto out_free_line;
    }
    if (fstat(fd, &before) != 0 || !S_ISREG(before.st_mode)) {
        sf_error("trace_control: cannot write audit log '%s': not a regular file", path);
        goto out_close;
    }
    if (!at_line_start(fd, before.st_size))
        line[off++] = '\n';
    memcpy(line + off, record, len);
    off += len;
    line[off++] = '\n';
    n = off;
    /* One write() of the whole line: with O_APPEND, records of the collector
     * and of a --direct CLI never interleave. */
    w = write(fd, line, n);
    if (w == (ssize_t)n && fsync(fd) == 0) {
        st = SF_OK;
        goto out_close;
    }
    sf_error("trace_control: cannot write audit log '%s': %s", path,
             w >= 0 && w < (ssize_t)n ? "short write (file system full?)" : strerror(errno));
    /* A part of the line may be in the file: cut it off again (the record
     * stays pending and is written whole later), so every line is one
     * record. If someone appended behind it meanwhile, the next record
     * starts on a fresh line instead. */
    if (w > 0) {
        struct stat now;

        if (fstat(fd, &now) == 0 && now.st_size == before.st_size + w &&
            ftruncate(fd, before.st_size) != 0)
            sf_error("trace_control: cannot cut the partial record off '%s': %s", path,
                     strerror(errno));
    }
out_close:
    close(fd);
out_free_line:
    sf_free(line);
    return st;
}

/* ---- the engine --------------------------------------------------------------- */

/* The first bytes of the engine's answer, for the message. */
typedef struct excerpt {
    char buf[160];
    size_t len;
} excerpt;

static size_t keep_excerpt(char *p, size_t size, size_t n, void *ud)
{
    excerpt *e = ud;
    size_t take = size * n;

    if (take > sizeof(e->buf) - 1 - e->len)
        take = sizeof(e->buf) - 1 - e->len;
    memcpy(e->buf + e->len, p, take);
    e->len += take;
    return size * n;
}

/* The excerpt as one printable ASCII line: control bytes become spaces and
 * other bytes '?' (a cut could split a UTF-8 sequence; the text goes into
 * JSON records and marker spans, which must be valid UTF-8). */
static const char *excerpt_text(excerpt *e)
{
    bool cut = e->len == sizeof(e->buf) - 1;

    while (e->len > 0 && (e->buf[e->len - 1] == '\n' || e->buf[e->len - 1] == '\r' ||
                          e->buf[e->len - 1] == ' '))
        e->len--;
    for (size_t i = 0; i < e->len; i++)
        if ((unsigned char)e->buf[i] < 0x20 || e->buf[i] == 0x7f)
            e->buf[i] = ' ';
        else if ((unsigned char)e->buf[i] >= 0x80)
            e->buf[i] = '?';
    if (cut && e->len >= 3)
        memcpy(e->buf + e->len - 3, "...", 3);   /* an excerpt, not the whole body */
    e->buf[e->len] = '\0';
    return e->buf;
}

static bool tls_failure(CURLcode rc)
{
    return rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CERTPROBLEM ||
           rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CIPHER ||
           rc == CURLE_SSL_ISSUER_ERROR || rc == CURLE_SSL_PINNEDPUBKEYNOTMATCH;
}

sf_status sf_tc_engine_set(const sf_tc_target *t, int64_t level, int64_t timeout_ms,
                           sf_tc_answer *ans)
{
    CURL *curl;
    struct curl_slist *hdr = NULL;
    char *url = NULL;
    excerpt body = { .len = 0 };
    CURLcode rc;
    sf_status st = SF_PERMANENT;
    size_t ulen = strlen(t->endpoint) + strlen(t->field) + 32;

    ans->status = 0;
    ans->detail[0] = '\0';
    curl = curl_easy_init();
    if (curl == NULL) {
        snprintf(ans->detail, sizeof(ans->detail), "out of memory");
        return SF_ENOMEM;
    }
    url = sf_malloc(ulen);
    if (url == NULL) {
        snprintf(ans->detail, sizeof(ans->detail), "out of memory");
        st = SF_ENOMEM;
        goto out_cleanup_curl;
    }
    snprintf(url, ulen, "%s%c%s=%" PRId64, t->endpoint, strchr(t->endpoint, '?') ? '&' : '?',
             t->field, level);
    for (size_t i = 0; i < t->headers.n; i++) {
        size_t hl = strlen(t->headers.keys[i]) + strlen(t->headers.values[i]) + 3;
        char *line = sf_malloc(hl);
        struct curl_slist *nh = NULL;

        if (line != NULL) {
            snprintf(line, hl, "%s: %s", t->headers.keys[i], t->headers.values[i]);
            nh = curl_slist_append(hdr, line);
            /* the header holds a secret: wipe our copy */
            memset(line, 0, hl);
            sf_free(line);
        }
        if (nh == NULL) {
            snprintf(ans->detail, sizeof(ans->detail), "out of memory");
            st = SF_ENOMEM;
            goto out_free_headers;
        }
        hdr = nh;
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_excerpt);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    if (hdr != NULL)
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdr);
    if (t->method == SF_TC_POST) {
        /* SGLang reads the query only; an empty body keeps POST well formed */
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
    }
    if (t->ca_file != NULL)
        curl_easy_setopt(curl, CURLOPT_CAINFO, t->ca_file);
    if (t->cert_file != NULL) {
        curl_easy_setopt(curl, CURLOPT_SSLCERT, t->cert_file);
        curl_easy_setopt(curl, CURLOPT_SSLKEY, t->key_file);
    }
    if (t->insecure_skip_verify) {
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    rc = curl_easy_perform(curl);
    if (rc != CURLE_OK) {
        snprintf(ans->detail, sizeof(ans->detail), "%s: %s", tls_failure(rc)
                 ? "TLS with the engine failed (check tls.ca_file)" : "the engine did not answer",
                 curl_easy_strerror(rc));
        st = tls_failure(rc) ? SF_PERMANENT : SF_RETRY;
        goto out_free_headers;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &ans->status);
    if (ans->status >= 200 && ans->status < 300) {
        st = SF_OK;
        snprintf(ans->detail, sizeof(ans->detail), "the engine answered %ld", ans->status);
    } else {
        const char *ex = excerpt_text(&body);

        st = ans->status >= 500 || ans->status == 429 || ans->status == 408 ? SF_RETRY
                                                                              : SF_PERMANENT;
        snprintf(ans->detail, sizeof(ans->detail), "the engine answered %ld%s%s", ans->status,
                 ex[0] ? ": " : "", ex);
    }
out_free_headers:
    curl_slist_free_all(hdr);
    sf_free(url);
out_cleanup_curl:
    curl_easy_cleanup(curl);
    return st;
}

/* ---- the control socket client ------------------------------------------------- */

sf_status sf_tc_client_request(const char *socket_path, const char *request, char **reply,
                               char *err, size_t err_size)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t cap = SF_TC_MAX_REQUEST * 4, len = 0, rl = strlen(request);
    char *buf = NULL;
    sf_status st = SF_IO;
    int fd;

    *reply = NULL;
    if (strlen(socket_path) >= sizeof(sa.sun_path)) {
        snprintf(err, err_size, "socket path '%s' is too long", socket_path);
        return SF_INVALID;
    }
    strcpy(sa.sun_path, socket_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, err_size, "socket: %s", strerror(errno));
        return SF_IO;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        snprintf(err, err_size, "cannot reach the collector at '%s': %s", socket_path,
                 strerror(errno));
        goto out_close;
    }
    if (send(fd, request, rl, MSG_NOSIGNAL) != (ssize_t)rl || send(fd, "\n", 1, MSG_NOSIGNAL) != 1) {
        snprintf(err, err_size, "cannot send to '%s': %s", socket_path, strerror(errno));
        goto out_close;
    }
    shutdown(fd, SHUT_WR);
    buf = sf_malloc(cap + 1);
    if (buf == NULL) {
        snprintf(err, err_size, "out of memory");
        st = SF_ENOMEM;
        goto out_close;
    }
    for (;;) {
        /* The collector answers after at most one engine request. */
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ssize_t n;

        if (poll(&p, 1, 120000) <= 0) {
            snprintf(err, err_size, "no answer from the collector");
            goto out_free_buf;
        }
        n = recv(fd, buf + len, cap - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, err_size, "cannot read from '%s': %s", socket_path, strerror(errno));
            goto out_free_buf;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == cap) {
            snprintf(err, err_size, "the collector's answer is too long");
            goto out_free_buf;
        }
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    buf[len] = '\0';
    if (!sf_tc_json_valid(buf, len)) {
        snprintf(err, err_size, "the collector's answer is not a JSON object");
        st = SF_INVALID;
        goto out_free_buf;
    }
    *reply = buf;
    buf = NULL;
    st = SF_OK;
out_free_buf:
    sf_free(buf);
out_close:
    close(fd);
    return st;
}

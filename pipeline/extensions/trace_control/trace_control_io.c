/* pipeline/extensions/trace_control/trace_control_io.c: what the collector
 * and `spanfence trace-level` both do to the outside world: append audit
 * records (fsync'd), ask an engine for a trace level (libcurl), talk to the
 * control socket, and read/write the few flat JSON objects they exchange
 * (read with json-c, strictly: one object, members of the expected type). */
#include "trace_control.h"

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

bool sf_tc_json_escape(const char *in, char *out, size_t out_size)
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
        if (n + el >= out_size) {
            out[n] = '\0';
            return false;
        }
        memcpy(out + n, esc, el);
        n += el;
    }
    out[n] = '\0';
    return true;
}

void sf_tc_format_time(int64_t epoch_ms, char *buf, size_t size)
{
    time_t s = (time_t)(epoch_ms / 1000);
    struct tm tm;

    gmtime_r(&s, &tm);
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(epoch_ms % 1000));
}

/* ---- the audit log ----------------------------------------------------------- */

sf_status sf_tc_audit_append(const char *path, const char *record)
{
    size_t len = strlen(record);
    char *line = sf_malloc(len + 2);
    sf_status st = SF_IO;
    int fd;

    if (line == NULL)
        return SF_ENOMEM;
    memcpy(line, record, len);
    line[len] = '\n';
    line[len + 1] = '\0';
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        sf_error("trace_control: cannot open audit log '%s': %s", path, strerror(errno));
        goto out_free_line;
    }
    /* One write() of the whole line: with O_APPEND, records of the collector
     * and of a --direct CLI never interleave. */
    if (write(fd, line, len + 1) != (ssize_t)(len + 1) || fsync(fd) != 0)
        sf_error("trace_control: cannot write audit log '%s': %s", path, strerror(errno));
    else
        st = SF_OK;
    close(fd);
out_free_line:
    sf_free(line);
    return st;
}

/* ---- the engine --------------------------------------------------------------- */

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

sf_status sf_tc_engine_set(const sf_tc_target *t, int64_t level, int64_t timeout_ms, char *err,
                           size_t err_size)
{
    static const char *const methods[] = { "GET", "POST", "PUT" };
    CURL *curl;
    struct curl_slist *hdr = NULL;
    char *url = NULL;
    char body[160];
    long code = 0;
    CURLcode rc;
    sf_status st = SF_PERMANENT;
    size_t ulen = strlen(t->endpoint) + strlen(t->field) + 32;

    curl = curl_easy_init();
    if (curl == NULL) {
        snprintf(err, err_size, "out of memory");
        return SF_ENOMEM;
    }
    url = sf_malloc(ulen);
    if (url == NULL) {
        snprintf(err, err_size, "out of memory");
        st = SF_ENOMEM;
        goto out_cleanup_curl;
    }
    if (t->level_in == SF_TC_QUERY)
        snprintf(url, ulen, "%s%c%s=%" PRId64, t->endpoint, strchr(t->endpoint, '?') ? '&' : '?',
                 t->field, level);
    else
        snprintf(url, ulen, "%s", t->endpoint);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, methods[t->method]);
    if (t->level_in == SF_TC_JSON) {
        char field[96];

        sf_tc_json_escape(t->field, field, sizeof(field));
        snprintf(body, sizeof(body), "{\"%s\":%" PRId64 "}", field, level);
        hdr = curl_slist_append(NULL, "Content-Type: application/json");
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    } else if (t->method != SF_TC_GET) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
    }
    rc = curl_easy_perform(curl);
    if (rc != CURLE_OK) {
        snprintf(err, err_size, "%s", curl_easy_strerror(rc));
        st = SF_RETRY;
        goto out_free_headers;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 200 && code < 300) {
        st = SF_OK;
        snprintf(err, err_size, "http %ld", code);
    } else {
        st = code >= 500 || code == 429 ? SF_RETRY : SF_PERMANENT;
        snprintf(err, err_size, "the engine answered http %ld", code);
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

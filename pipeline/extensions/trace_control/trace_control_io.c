/* pipeline/extensions/trace_control/trace_control_io.c: what the collector
 * and `spanfence trace-level` both do to the outside world: append audit
 * records (fsync'd), ask an engine for a trace level (libcurl), talk to the
 * control socket, and read/write the few flat JSON objects they exchange.
 * The JSON reader is deliberately tiny and strict: one object, string,
 * integer and boolean members, nested values only skipped. */
#include "trace_control.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- JSON ------------------------------------------------------------------ */

typedef struct jcur {
    const char *p, *end;
} jcur;

static void ws(jcur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* A string at c->p; unescaped into out when out != NULL (UTF-8 for \u,
 * surrogate pairs not combined: each half is refused). */
static bool jstring(jcur *c, char *out, size_t size, size_t *olen)
{
    size_t n = 0;
    bool fits = true;

    if (c->p >= c->end || *c->p != '"')
        return false;
    c->p++;
    while (c->p < c->end && *c->p != '"') {
        unsigned char ch = (unsigned char)*c->p++;
        char buf[4];
        size_t bl = 1;

        if (ch < 0x20)
            return false;
        buf[0] = (char)ch;
        if (ch == '\\') {
            if (c->p >= c->end)
                return false;
            ch = (unsigned char)*c->p++;
            switch (ch) {
            case '"': case '\\': case '/': buf[0] = (char)ch; break;
            case 'b': buf[0] = '\b'; break;
            case 'f': buf[0] = '\f'; break;
            case 'n': buf[0] = '\n'; break;
            case 'r': buf[0] = '\r'; break;
            case 't': buf[0] = '\t'; break;
            case 'u': {
                unsigned cp = 0;
                if (c->end - c->p < 4)
                    return false;
                for (int i = 0; i < 4; i++) {
                    int h = hexval(c->p[i]);
                    if (h < 0)
                        return false;
                    cp = cp * 16 + (unsigned)h;
                }
                c->p += 4;
                if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF))
                    return false;
                if (cp < 0x80) {
                    buf[0] = (char)cp;
                } else if (cp < 0x800) {
                    buf[0] = (char)(0xC0 | (cp >> 6));
                    buf[1] = (char)(0x80 | (cp & 0x3F));
                    bl = 2;
                } else {
                    buf[0] = (char)(0xE0 | (cp >> 12));
                    buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    buf[2] = (char)(0x80 | (cp & 0x3F));
                    bl = 3;
                }
                break;
            }
            default:
                return false;
            }
        }
        if (out != NULL) {
            if (n + bl < size)
                memcpy(out + n, buf, bl);
            else
                fits = false;
        }
        n += bl;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    if (out != NULL) {
        if (!fits)
            return false;
        out[n] = '\0';
    }
    if (olen)
        *olen = n;
    return true;
}

static bool jnumber(jcur *c, int64_t *v, bool *integer)
{
    const char *s = c->p;
    bool frac = false;

    if (c->p < c->end && *c->p == '-')
        c->p++;
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return false;
    if (*c->p == '0')
        c->p++;
    else
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
            c->p++;
    if (c->p < c->end && *c->p == '.') {
        frac = true;
        c->p++;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return false;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
            c->p++;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        frac = true;
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
            c->p++;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return false;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
            c->p++;
    }
    *integer = false;
    if (!frac && v != NULL && c->p - s < 19) {
        char tmp[24];
        memcpy(tmp, s, (size_t)(c->p - s));
        tmp[c->p - s] = '\0';
        *v = strtoll(tmp, NULL, 10);
        *integer = true;
    }
    return true;
}

static bool jword(jcur *c, const char *w)
{
    size_t n = strlen(w);

    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool jvalue(jcur *c, int depth);

static bool jcontainer(jcur *c, int depth, bool object)
{
    if (depth > 8)
        return false;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == (object ? '}' : ']')) {
        c->p++;
        return true;
    }
    for (;;) {
        ws(c);
        if (object) {
            if (!jstring(c, NULL, 0, NULL))
                return false;
            ws(c);
            if (c->p >= c->end || *c->p != ':')
                return false;
            c->p++;
            ws(c);
        }
        if (!jvalue(c, depth + 1))
            return false;
        ws(c);
        if (c->p >= c->end)
            return false;
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p == (object ? '}' : ']')) {
            c->p++;
            return true;
        }
        return false;
    }
}

static bool jvalue(jcur *c, int depth)
{
    bool integer;

    if (c->p >= c->end)
        return false;
    switch (*c->p) {
    case '{': return jcontainer(c, depth, true);
    case '[': return jcontainer(c, depth, false);
    case '"': return jstring(c, NULL, 0, NULL);
    case 't': return jword(c, "true");
    case 'f': return jword(c, "false");
    case 'n': return jword(c, "null");
    default:  return jnumber(c, NULL, &integer);
    }
}

bool sf_tc_json_valid(const char *json, size_t len)
{
    jcur c = { json, json + len };

    ws(&c);
    if (c.p >= c.end || *c.p != '{' || !jcontainer(&c, 1, true))
        return false;
    ws(&c);
    return c.p == c.end;
}

/* Position c at the value of top-level member `key` (json already valid). */
static bool jfind(const char *json, size_t len, const char *key, jcur *c)
{
    char name[64];

    if (!sf_tc_json_valid(json, len))
        return false;
    c->p = json;
    c->end = json + len;
    ws(c);
    c->p++;
    for (;;) {
        ws(c);
        if (*c->p == '}')
            return false;
        const char *at = c->p;

        if (!jstring(c, name, sizeof(name), NULL)) {
            /* a longer name than any we look up: skip it */
            c->p = at;
            if (!jstring(c, NULL, 0, NULL))
                return false;
            name[0] = '\0';
        }
        ws(c);
        c->p++;     /* ':' */
        ws(c);
        if (strcmp(name, key) == 0)
            return true;
        jvalue(c, 2);
        ws(c);
        if (*c->p == ',')
            c->p++;
    }
}

sf_status sf_tc_json_str(const char *json, size_t len, const char *key, char *out,
                         size_t out_size)
{
    jcur c;

    if (!jfind(json, len, key, &c) || !jstring(&c, out, out_size, NULL))
        return SF_INVALID;
    return SF_OK;
}

sf_status sf_tc_json_int(const char *json, size_t len, const char *key, int64_t *out)
{
    jcur c;
    bool integer = false;

    if (!jfind(json, len, key, &c) || !jnumber(&c, out, &integer) || !integer)
        return SF_INVALID;
    return SF_OK;
}

sf_status sf_tc_json_bool(const char *json, size_t len, const char *key, bool *out)
{
    jcur c;

    if (!jfind(json, len, key, &c))
        return SF_INVALID;
    if (jword(&c, "true"))
        *out = true;
    else if (jword(&c, "false"))
        *out = false;
    else
        return SF_INVALID;
    return SF_OK;
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

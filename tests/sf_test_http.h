/* tests/sf_test_http.h: a libmicrohttpd server on 127.0.0.1 and an
 * ephemeral port, for tests that need a real HTTP peer, and a libcurl
 * client for tests that talk to one (header-only; include it after
 * <cmocka.h>). */
#ifndef SF_TEST_HTTP_H
#define SF_TEST_HTTP_H

#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <microhttpd.h>
#include <sys/socket.h>
#include <unistd.h>

/* Start serving `handler` (with `completed` called after each request);
 * *port gets the bound port. The caller stops it with MHD_stop_daemon. */
static inline struct MHD_Daemon *sf_test_http_start(MHD_AccessHandlerCallback handler, void *cls,
                                                    MHD_RequestCompletedCallback completed,
                                                    uint16_t *port)
{
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = 0 };
    const union MHD_DaemonInfo *info;
    struct MHD_Daemon *d;

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler,
                         cls, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                         MHD_OPTION_NOTIFY_COMPLETED, completed, cls, MHD_OPTION_END);
    assert_non_null(d);
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(info);
    assert_true(info->port > 0);
    *port = info->port;
    return d;
}

/* A request body as libmicrohttpd hands it over, in pieces: a handler
 * calls sf_test_http_upload_more() first and returns MHD_YES while it says
 * true (the body is still coming); after that the whole body is in
 * *con_cls, an sf_test_http_upload. Start the daemon with
 * sf_test_http_upload_done as the completed callback, which frees it. */
typedef struct sf_test_http_upload {
    uint8_t *data;
    size_t len;
} sf_test_http_upload;

static inline bool sf_test_http_upload_more(void **con_cls, const char *data, size_t *size)
{
    sf_test_http_upload *u = *con_cls;

    if (u == NULL) {
        *con_cls = calloc(1, sizeof(*u));
        assert_non_null(*con_cls);
        return true;
    }
    if (*size > 0) {
        uint8_t *nd = realloc(u->data, u->len + *size);

        assert_non_null(nd);
        memcpy(nd + u->len, data, *size);
        u->data = nd;
        u->len += *size;
        *size = 0;
        return true;
    }
    return false;
}

static inline void sf_test_http_upload_done(void *cls, struct MHD_Connection *conn,
                                            void **con_cls, enum MHD_RequestTerminationCode toe)
{
    sf_test_http_upload *u = *con_cls;

    (void)cls, (void)conn, (void)toe;
    if (u != NULL) {
        free(u->data);
        free(u);
        *con_cls = NULL;
    }
}

/* An HTTP answer: status code and body (malloc'd, NUL-terminated). */
typedef struct sf_test_http_answer {
    long code;
    char *body;
    size_t len;
    bool retry_after;
} sf_test_http_answer;

static inline size_t sf_test_http_body_(char *p, size_t sz, size_t n, void *cls)
{
    sf_test_http_answer *a = cls;
    char *nb = realloc(a->body, a->len + sz * n + 1);

    assert_non_null(nb);
    memcpy(nb + a->len, p, sz * n);
    a->body = nb;
    a->len += sz * n;
    a->body[a->len] = '\0';
    return sz * n;
}

static inline size_t sf_test_http_header_(char *p, size_t sz, size_t n, void *cls)
{
    sf_test_http_answer *a = cls;

    if (sz * n >= 12 && strncasecmp(p, "Retry-After:", 12) == 0)
        a->retry_after = true;
    return sz * n;
}

/* `method` (NULL: POST) `body` to `url` with Content-Type `type` (and
 * Content-Encoding `encoding` unless NULL); a 20 s bound on the whole call.
 * Returns the answer; the caller frees its body. */
static inline sf_test_http_answer sf_test_http_request(const char *method, const char *url,
                                                       const char *type, const char *encoding,
                                                       const void *body, size_t len)
{
    sf_test_http_answer a = { 0 };
    struct curl_slist *hdrs = NULL;
    char h[256];
    CURL *c = curl_easy_init();

    assert_non_null(c);
    snprintf(h, sizeof(h), "Content-Type: %s", type);
    hdrs = curl_slist_append(hdrs, h);
    if (encoding != NULL) {
        snprintf(h, sizeof(h), "Content-Encoding: %s", encoding);
        hdrs = curl_slist_append(hdrs, h);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (method != NULL)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sf_test_http_body_);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, sf_test_http_header_);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.code);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    if (a.body == NULL)
        a.body = calloc(1, 1);
    return a;
}

#endif

/* sf_net.c: endpoint parsing and resolution; the HTTP endpoints' sockets
 * and their daemons' starts. */
#include "sf_net.h"
#include "sf_libmicrohttpd.h"
#include "sf_log.h"
#include "sf_time.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

sf_status sf_net_split(const char *endpoint, char *host, size_t host_size, uint16_t *port)
{
    const char *colon, *h = endpoint;
    size_t hlen;
    char *end;
    long p;

    if (endpoint[0] == '[') {
        const char *close = strchr(endpoint, ']');
        if (close == NULL || close[1] != ':')
            return SF_INVALID;
        h = endpoint + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(endpoint, ':');
        if (colon == NULL)
            return SF_INVALID;
        hlen = (size_t)(colon - endpoint);
    }
    if (hlen == 0 || hlen >= host_size || colon[1] == '\0')
        return SF_INVALID;
    for (end = (char *)colon + 1; *end; end++)
        if (*end < '0' || *end > '9' || end - colon > 5)
            return SF_INVALID;      /* no sign, no spaces: strtol would take them */
    p = strtol(colon + 1, &end, 10);
    if (*end != '\0' || p < 0 || p > 65535)
        return SF_INVALID;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (uint16_t)p;
    return SF_OK;
}

const char *sf_net_endpoint_problem(const char *endpoint, char *buf, size_t size)
{
    const char *colon, *port;
    size_t digits = 0;

    if (endpoint[0] == '[') {
        const char *close = strchr(endpoint, ']');

        if (close == NULL || close == endpoint + 1 || close[1] != ':')
            return "expected host:port, with an IPv6 host in brackets ('[::1]:4317')";
        colon = close + 1;
    } else {
        colon = strrchr(endpoint, ':');
        if (colon == NULL)
            return "expected host:port ('127.0.0.1:4317'), found no port";
        if (colon == endpoint)
            return "expected host:port ('127.0.0.1:4317'), found no host";
        if (memchr(endpoint, ':', (size_t)(colon - endpoint)) != NULL)
            return "an IPv6 host needs brackets ('[::1]:4317')";
    }
    port = colon + 1;
    if (*port == '\0')
        return "expected host:port ('127.0.0.1:4317'), found no port";
    for (const char *p = port; *p; p++, digits++)
        if (*p < '0' || *p > '9') {
            snprintf(buf, size, "port '%s' is not a number", port);
            return buf;
        }
    if (digits > 5 || strtol(port, NULL, 10) > 65535) {
        snprintf(buf, size, "port '%s' is out of range 0-65535", port);
        return buf;
    }
    return NULL;
}

sf_status sf_net_resolve(const char *endpoint, struct sockaddr_storage *addr, socklen_t *len)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    char host[256], port_s[8];
    uint16_t port;

    if (sf_net_split(endpoint, host, sizeof(host), &port) != SF_OK)
        return SF_INVALID;
    snprintf(port_s, sizeof(port_s), "%u", port);
    if (getaddrinfo(host, port_s, &hints, &res) != 0 || res == NULL)
        return SF_INVALID;
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return SF_OK;
}

const char *sf_net_bind_problem(const char *endpoint, char *buf, size_t size)
{
    struct sockaddr_storage addr;
    socklen_t alen;
    int fd, one = 1, err = 0;

    if (sf_net_resolve(endpoint, &addr, &alen) != SF_OK) {
        snprintf(buf, size, "does not resolve");
        return buf;
    }
    fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;            /* let the server say */
    /* as the servers do: a port in TIME_WAIT is free */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&addr, alen) != 0)
        err = errno;
    close(fd);
    if (err == 0)
        return NULL;
    return sf_net_errno_text(err, buf, size);
}

const char *sf_net_errno_text(int err, char *buf, size_t size)
{
    snprintf(buf, size, "%s", strerror(err));
    for (char *p = buf; *p; p++)    /* lowercase, as config errors are */
        *p = (char)tolower((unsigned char)*p);
    return buf;
}

sf_status sf_net_http_bind(const char *endpoint, int *fd_out, char *why, size_t why_size)
{
    struct sockaddr_storage addr;
    socklen_t alen;
    int fd, one = 1;

    *fd_out = -1;
    if (sf_net_resolve(endpoint, &addr, &alen) != SF_OK) {
        snprintf(why, why_size, "does not resolve");
        return SF_INVALID;
    }
    fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        goto fail;
    /* what libmicrohttpd does with a socket of its own: a port in
     * TIME_WAIT is free, an IPv6 address is IPv6 alone */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (addr.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&addr, alen) != 0 || listen(fd, SOMAXCONN) != 0)
        goto fail;
    *fd_out = fd;
    return SF_OK;
fail:
    sf_net_errno_text(errno, why, why_size);
    if (fd >= 0)
        close(fd);
    return SF_IO;
}

/* ---- starts after READY (sf_net.h). The queue and the starts it runs
 * are under later_lock: a stop (sf_net_http_cancel) waits for a start the
 * deferral thread is running, then finds it done. */
#define LATER_MAX 16
/* how long a start may hold the HTTP endpoints back: past it (a start
 * waiting on a FIFO, a slow exporter) they serve anyway, health_check's 503
 * "while starting" included */
#define LATER_WAIT_MS 100

typedef struct {
    struct MHD_Daemon **daemon;     /* where the daemon goes: the entry's key */
    int fd;
    sf_net_http_start_fn start;     /* a receiver's own start, or NULL: */
    void *arg;
    const char *what;               /* a small endpoint's (sf_net_http_listen) */
    MHD_AccessHandlerCallback handler;
    void *cls;
} later;

static pthread_mutex_t later_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t later_cv;
static later laters[LATER_MAX];
static size_t n_later;
static bool deferring, ready, later_running;
static int64_t later_deadline;
static sf_status later_status = SF_OK;
static pthread_t later_thread;

static sf_status small_start(const later *l)
{
    *l->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL_INTERNAL_THREAD,
                                  0, NULL, NULL, l->handler, l->cls,
                                  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)l->fd,
                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned)16,
                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
    if (*l->daemon == NULL) {
        const char *why = sf_libmicrohttpd_error();

        sf_error("%s: cannot serve HTTP%s%s", l->what, why[0] ? ": " : "", why);
        close(l->fd);       /* a daemon that failed to start leaves it open */
        return SF_IO;
    }
    return SF_OK;
}

static sf_status run_one(const later *l)
{
    return l->start != NULL ? l->start(l->arg, l->fd) : small_start(l);
}

/* Ends the deferral and runs the queue in order (later_lock held). */
static sf_status run_queue(void)
{
    sf_status st = SF_OK;

    deferring = false;
    for (size_t i = 0; i < n_later; i++) {
        if (st == SF_OK && sf_libmicrohttpd_load() != SF_OK) {
            sf_error("%s: %s", laters[i].what, sf_libmicrohttpd_error());
            st = SF_IO;
        }
        if (st == SF_OK)
            st = run_one(&laters[i]);
        else
            close(laters[i].fd);    /* never started: nobody else holds it */
    }
    n_later = 0;
    return st;
}

/* The deferral thread, started by the first start queued: runs the queue
 * LATER_WAIT_MS after the deferral began unless READY came first (then the
 * main thread runs it, in sf_net_http_run_deferred: its CPU is the main
 * thread's, and the thread ends having done nothing). */
static void *later_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&later_lock);
    while (!ready && sf_cond_wait_until(&later_cv, &later_lock, later_deadline))
        ;
    if (!ready)
        later_status = run_queue();
    pthread_mutex_unlock(&later_lock);
    return NULL;
}

void sf_net_http_defer(void)
{
    pthread_mutex_lock(&later_lock);
    if (!later_running) {
        deferring = true;
        ready = false;
        later_status = SF_OK;
        later_deadline = sf_deadline_ms(LATER_WAIT_MS);
    }
    pthread_mutex_unlock(&later_lock);
}

sf_status sf_net_http_run_deferred(void)
{
    bool joined;
    sf_status st;

    pthread_mutex_lock(&later_lock);
    ready = true;
    joined = later_running;
    if (joined)
        pthread_cond_signal(&later_cv);
    st = run_queue();       /* empty when the thread ran it */
    pthread_mutex_unlock(&later_lock);
    if (!joined)
        return st;
    pthread_join(later_thread, NULL);
    pthread_mutex_lock(&later_lock);
    later_running = false;
    if (later_status != SF_OK)
        st = later_status;
    pthread_mutex_unlock(&later_lock);
    return st;
}

/* Queue `l` when deferring (true), else false: the caller starts now. The
 * first queued start starts the deferral thread; without it, or with the
 * queue full, every start runs at once. */
static bool queue_later(const later *l)
{
    bool queued = false;

    pthread_mutex_lock(&later_lock);
    if (deferring && !later_running && sf_cond_init(&later_cv) == 0)
        later_running = pthread_create(&later_thread, NULL, later_main, NULL) == 0;
    if (deferring && later_running && n_later < LATER_MAX) {
        laters[n_later++] = *l;
        queued = true;
    }
    pthread_mutex_unlock(&later_lock);
    return queued;
}

bool sf_net_http_cancel(struct MHD_Daemon **daemon)
{
    bool found = false;

    pthread_mutex_lock(&later_lock);
    for (size_t i = 0; i < n_later; i++) {
        if (laters[i].daemon != daemon)
            continue;
        close(laters[i].fd);
        memmove(laters + i, laters + i + 1, (n_later - i - 1) * sizeof(laters[0]));
        n_later--;
        found = true;
        break;
    }
    pthread_mutex_unlock(&later_lock);
    return found;
}

sf_status sf_net_http_start_on(struct MHD_Daemon **daemon, const char *what,
                               sf_net_http_start_fn start, void *arg, int fd)
{
    later l = { .daemon = daemon, .fd = fd, .start = start, .arg = arg, .what = what };

    *daemon = NULL;
    if (queue_later(&l))
        return SF_OK;
    return run_one(&l);
}

sf_status sf_net_http_listen(const char *what, const char *endpoint,
                             MHD_AccessHandlerCallback handler, void *cls,
                             struct MHD_Daemon **out)
{
    later l = { .daemon = out, .what = what, .handler = handler, .cls = cls };
    char why[128];
    sf_status st;

    *out = NULL;
    st = sf_net_http_bind(endpoint, &l.fd, why, sizeof(why));
    if (st == SF_INVALID)
        sf_error("%s: cannot resolve '%s'", what, endpoint);
    else if (st != SF_OK)
        sf_error("%s: cannot listen on '%s': %s", what, endpoint, why);
    if (st != SF_OK || queue_later(&l))
        return st;
    return small_start(&l);
}

void sf_net_http_stop(struct MHD_Daemon **daemon)
{
    if (sf_net_http_cancel(daemon) || *daemon == NULL)
        return;
    MHD_stop_daemon(*daemon);       /* joins its thread: no request after this */
    *daemon = NULL;
}

const char *sf_net_url_redacted(const char *url, char *buf, size_t size)
{
    const char *sep = strstr(url, "://"), *at, *slash;

    if (sep == NULL || (at = strchr(sep + 3, '@')) == NULL ||
        ((slash = strchr(sep + 3, '/')) != NULL && slash < at))
        return url;
    snprintf(buf, size, "%.*s[REDACTED]%s", (int)(sep + 3 - url), url, at);
    return buf;
}

/* ---- clients -------------------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

uint64_t sf_net_client_key(const struct sockaddr *peer)
{
    static const uint8_t mapped_loopback[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    uint64_t h = 14695981039346656037ull;
    const uint8_t *addr;
    size_t n;
    uint16_t port;
    bool loopback;

    if (peer == NULL)
        return 0;
    if (peer->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)peer;

        addr = (const uint8_t *)&in->sin_addr;
        n = 4;
        port = in->sin_port;
        loopback = addr[0] == 127;
    } else if (peer->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)peer;

        addr = in6->sin6_addr.s6_addr;
        n = 16;
        port = in6->sin6_port;
        loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
                   (memcmp(addr, mapped_loopback, 12) == 0 && addr[12] == 127);
    } else {
        return 0;
    }
    h = fnv1a(h, &peer->sa_family, sizeof(peer->sa_family));
    h = fnv1a(h, addr, n);
    if (loopback)
        h = fnv1a(h, &port, sizeof(port));
    return h != 0 ? h : 1;
}

uint64_t sf_net_client_of_fd(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    return sf_net_client_key((const struct sockaddr *)&ss);
}

enum MHD_Result sf_net_http_respond(struct MHD_Connection *conn, unsigned code, const char *type,
                                    const char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
                                                             MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret;

    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

bool sf_net_http_get_begin(struct MHD_Connection *conn, const char *method, size_t *upload_size,
                           void **req_cls, void *cls, enum MHD_Result *ret)
{
    *ret = MHD_YES;
    if (*req_cls == NULL) {         /* headers only so far */
        *req_cls = cls;
        return false;
    }
    if (*upload_size != 0) {        /* any body is ignored */
        *upload_size = 0;
        return false;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        *ret = sf_net_http_respond(conn, 405, "text/plain", "method not allowed\n", 19);
        return false;
    }
    return true;
}

/* sf_metrics.c: reason labels and the /metrics endpoint (libmicrohttpd with
 * its own polling thread; each scrape renders the counters afresh). */
#include "sf_metrics.h"
#include "sf_alloc.h"
#include "sf_log.h"
#include "sf_net.h"
#include "internal/sf_metrics_server.h"

#include <microhttpd.h>
#include <string.h>

const char *sf_reason_label(sf_reason r)
{
    switch (r) {
#define SF_REASON_LABEL(e, label) case SF_REASON_##e: return label;
    SF_REASON_MAP(SF_REASON_LABEL)
#undef SF_REASON_LABEL
    case SF_REASON_COUNT:
        break;
    }
    return "unknown";
}

struct sf_metrics_server {
    struct MHD_Daemon *daemon;
    sf_service *svc;
};

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned code, const char *type,
                               char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    enum MHD_Result ret;

    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **req_cls)
{
    sf_metrics_server *m = cls;
    char *body;
    size_t len;
    enum MHD_Result ret;

    (void)version;
    (void)upload_data;
    if (*req_cls == NULL) {         /* headers only so far */
        *req_cls = m;
        return MHD_YES;
    }
    if (*upload_size != 0) {        /* ignore any body */
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return respond(conn, 405, "text/plain", "method not allowed\n", 19,
                       MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/healthz") == 0)
        return respond(conn, 200, "text/plain", "ok\n", 3, MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/metrics") != 0)
        return respond(conn, 404, "text/plain", "not found\n", 10, MHD_RESPMEM_PERSISTENT);
    if (sf_service_render_metrics(m->svc, &body, &len) != SF_OK)
        return respond(conn, 500, "text/plain", "out of memory\n", 14, MHD_RESPMEM_PERSISTENT);
    ret = respond(conn, 200, "text/plain; version=0.0.4", body, len, MHD_RESPMEM_MUST_COPY);
    sf_free(body);
    return ret;
}

sf_status sf_metrics_server_start(const char *address, sf_service *svc, sf_metrics_server **out)
{
    struct sockaddr_storage addr;
    socklen_t alen;
    sf_metrics_server *m;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL_INTERNAL_THREAD;

    *out = NULL;
    if (sf_net_resolve(address, &addr, &alen) != SF_OK) {
        sf_error("metrics: cannot resolve address '%s'", address);
        return SF_INVALID;
    }
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    m = sf_calloc(1, sizeof(*m));
    if (m == NULL)
        return SF_ENOMEM;
    m->svc = svc;
    m->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, m,
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)16,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
                                 MHD_OPTION_END);
    if (m->daemon == NULL) {
        sf_error("metrics: cannot listen on '%s'", address);
        sf_free(m);
        return SF_IO;
    }
    sf_info("metrics: serving /metrics on %s", address);
    *out = m;
    return SF_OK;
}

void sf_metrics_server_stop(sf_metrics_server *m)
{
    if (m == NULL)
        return;
    MHD_stop_daemon(m->daemon);
    sf_free(m);
}

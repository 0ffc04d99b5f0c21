/* sf_monitor.c: the monitoring server (internal/sf_monitor.h). */
#include "internal/sf_monitor.h"
#include "sf_alloc.h"
#include "sf_log.h"
#include "sf_net.h"

#include <string.h>

#include <json-c/json.h>
#include <microhttpd.h>

struct sf_monitor {
    struct MHD_Daemon *daemon;
    sf_monitor_source src;
};

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **req_cls)
{
    sf_monitor *m = cls;
    char *body;
    size_t len;
    enum MHD_Result ret;

    (void)version;
    (void)upload_data;
    if (!sf_net_http_get_begin(conn, method, upload_size, req_cls, m, &ret))
        return ret;
    if (strcmp(url, "/healthz") == 0)
        return sf_net_http_respond(conn, 200, "text/plain", "ok\n", 3);
    if (strcmp(url, "/status") == 0) {
        /* `spanfence status`: the same counters as one JSON document */
        json_object *doc = m->src.status(m->src.ctx);
        const char *text = doc != NULL ? json_object_to_json_string_ext(
                               doc, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
                                       : NULL;

        ret = text != NULL
                  ? sf_net_http_respond(conn, 200, "application/json", text, strlen(text))
                  : sf_net_http_respond(conn, 500, "text/plain", "out of memory\n", 14);
        json_object_put(doc);
        return ret;
    }
    if (strcmp(url, "/metrics") != 0)
        return sf_net_http_respond(conn, 404, "text/plain", "not found\n", 10);
    if (m->src.metrics(m->src.ctx, &body, &len) != SF_OK)
        return sf_net_http_respond(conn, 500, "text/plain", "out of memory\n", 14);
    ret = sf_net_http_respond(conn, 200, "text/plain; version=0.0.4", body, len);
    sf_free(body);
    return ret;
}

sf_status sf_monitor_start(const char *address, const sf_monitor_source *src, sf_monitor **out)
{
    sf_monitor *m;
    sf_status st;

    *out = NULL;
    m = sf_calloc(1, sizeof(*m));
    if (m == NULL)
        return SF_ENOMEM;
    m->src = *src;
    st = sf_net_http_listen("metrics", address, on_request, m, &m->daemon);
    if (st != SF_OK) {
        sf_free(m);
        return st;
    }
    sf_info("metrics: serving /metrics on %s", address);
    *out = m;
    return SF_OK;
}

void sf_monitor_stop(sf_monitor *m)
{
    if (m == NULL)
        return;
    sf_net_http_stop(&m->daemon);
    sf_free(m);
}

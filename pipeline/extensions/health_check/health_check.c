/* pipeline/extensions/health_check/health_check.c: the `health_check`
 * extension: an HTTP endpoint (upstream default localhost:13133, path "/")
 * that answers 200 only while every component of the running service has
 * started, and 503 while the service starts, reloads (SIGHUP) or shuts
 * down, with the upstream collector's JSON body
 *   {"status":"Server available","upSince":"...","uptime":"1m2.5s"}
 * (upSince: when the service became ready, not when first asked)
 * so a docker HEALTHCHECK or a probe written for otelcol works unchanged.
 * With check_collector_pipeline enabled it also answers 503 while an
 * exporter has failed exporter_failure_threshold sends within `interval`
 * (sf_component_failing_exporter), naming it in an "error" key.
 *
 * DESIGN: the listening socket and its thread (libmicrohttpd, one internal
 * polling thread) live in an hc_server that outlives a reload: suspend
 * detaches it from the instance (it answers 503 meanwhile) and hands it
 * over; the next instance takes it at start, or binds a new one when its
 * endpoint changed. The server reads its owner's state
 * (sf_component_service_state) under its lock, which suspend and start
 * take to change the owner, so a request never reads a service that is
 * gone. Nothing else is shared with the data path. */
#include "health_check.h"
#include "sf_net.h"
#include "sf_time.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct hc_server {
    struct MHD_Daemon *daemon;
    char *endpoint;
    pthread_mutex_t lock;
    /* under lock */
    sf_component *owner;        /* NULL while a reload hands the server over */
    char *path, *healthy, *unhealthy;   /* the owner's config, copied */
    sf_hc_pipeline_check pipeline;      /* the owner's check_collector_pipeline */
    bool failing;               /* the last answer said an exporter is failing */
    /* upSince: the service's readiness (sf_component_service_running_since),
     * or, after an unhealthy spell, the first answer healthy again; 0: not
     * ready */
    int64_t up_since_wall_ms;
    int64_t up_since_ms;        /* the same, monotonic, for uptime */
    bool was_unhealthy;         /* this owner has been unhealthy while running */
    struct hc_server *next;     /* in `stopped` */
} hc_server;

typedef struct hc_ctx {
    const sf_hc_config *cfg;
    hc_server *server;          /* started, or taken over from the previous instance */
    hc_server *stopped;         /* after shutdown: answering 503 until destroy */
} hc_ctx;

/* Servers of instances that were shut down but not destroyed yet: they go
 * on answering 503 through the exporters' drain. A health_check starting
 * on the same endpoint meanwhile (a reload that renamed it) takes the
 * server over instead of failing to bind. */
static pthread_mutex_t stopped_lock = PTHREAD_MUTEX_INITIALIZER;
static hc_server *stopped;

/* Go's time.Duration String() for the uptime: "1h2m3.5s", "850ms". */
static void format_uptime(int64_t ms, char *out, size_t size)
{
    int64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, frac = ms % 1000;
    int n = 0;

    if (ms < 1000) {
        snprintf(out, size, "%lldms", (long long)ms);
        return;
    }
    if (h > 0)
        n = snprintf(out, size, "%lldh", (long long)h);
    if ((h > 0 || m > 0) && n >= 0 && (size_t)n < size)
        n += snprintf(out + n, size - (size_t)n, "%lldm", (long long)m);
    if (n >= 0 && (size_t)n < size) {
        if (frac != 0) {
            char f[8];
            int fl = snprintf(f, sizeof(f), "%03lld", (long long)frac);

            while (fl > 0 && f[fl - 1] == '0')
                f[--fl] = '\0';
            snprintf(out + n, size - (size_t)n, "%lld.%ss", (long long)s, f);
        } else {
            snprintf(out + n, size - (size_t)n, "%llds", (long long)s);
        }
    }
}

static void format_rfc3339(int64_t wall_ms, char *out, size_t size)
{
    time_t t = (time_t)(wall_ms / 1000);
    struct tm tm;
    char base[32];

    gmtime_r(&t, &tm);
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, size, "%s.%03lldZ", base, (long long)(wall_ms % 1000));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **req_cls)
{
    hc_server *s = cls;
    char body[1024], since[48], uptime[48], why[384] = "", why_json[512] = "";
    const char *fixed;
    bool ready, known, failing = false;
    unsigned code;
    enum MHD_Result ret;

    (void)version;
    (void)upload_data;
    if (!sf_net_http_get_begin(conn, method, upload_size, req_cls, s, &ret))
        return ret;

    pthread_mutex_lock(&s->lock);
    known = s->path != NULL && strcmp(url, s->path) == 0;
    ready = s->owner != NULL && sf_component_service_state(s->owner) == SF_SERVICE_RUNNING;
    /* A receiver that cannot accept (fds or memory exhausted) always
     * counts; failing exporters only with check_collector_pipeline. */
    if (ready)
        failing = sf_component_unhealthy_receiver(s->owner, why, sizeof(why));
    if (ready && !failing && s->pipeline.enabled)
        failing = sf_component_failing_exporter(s->owner,
                                                (unsigned)s->pipeline.exporter_failure_threshold,
                                                s->pipeline.interval, why, sizeof(why));
    if (failing != s->failing) {
        if (failing)
            sf_warn("health_check: unhealthy: %s", why);
        else if (ready)
            sf_info("health_check: healthy again");
        s->failing = failing;
    }
    ready = ready && !failing;
    if (failing)
        s->was_unhealthy = true;
    if (ready && s->up_since_wall_ms == 0 &&
        (s->was_unhealthy ||
         !sf_component_service_running_since(s->owner, &s->up_since_wall_ms, &s->up_since_ms))) {
        s->up_since_wall_ms = sf_wall_ms();
        s->up_since_ms = sf_now_ms();
    } else if (!ready) {
        s->up_since_wall_ms = 0;
    }
    fixed = ready ? s->healthy : s->unhealthy;
    code = ready ? 200 : 503;
    if (!known) {
        ret = sf_net_http_respond(conn, 404, "text/plain", "not found\n", 10);
    } else if (fixed != NULL) {
        ret = sf_net_http_respond(conn, code, "text/plain", fixed, strlen(fixed));
    } else {
        if (ready) {
            format_rfc3339(s->up_since_wall_ms, since, sizeof(since));
            format_uptime(sf_now_ms() - s->up_since_ms, uptime, sizeof(uptime));
        } else {
            snprintf(since, sizeof(since), "0001-01-01T00:00:00Z");
            uptime[0] = '\0';
        }
        if (failing)
            sf_json_escape(why, why_json, sizeof(why_json));
        snprintf(body, sizeof(body), "{\"status\":\"%s\",\"upSince\":\"%s\",\"uptime\":\"%s\"%s%s%s}",
                 ready ? "Server available" : "Server not available", since, uptime,
                 failing ? ",\"error\":\"" : "", why_json, failing ? "\"" : "");
        ret = sf_net_http_respond(conn, code, "application/json", body, strlen(body));
    }
    pthread_mutex_unlock(&s->lock);
    return ret;
}

static void server_stop(hc_server *s)
{
    if (s == NULL)
        return;
    sf_net_http_stop(&s->daemon);   /* joins its thread: no request after this */
    pthread_mutex_destroy(&s->lock);
    sf_free(s->endpoint);
    sf_free(s->path);
    sf_free(s->healthy);
    sf_free(s->unhealthy);
    sf_free(s);
}

static sf_status server_start(const char *endpoint, hc_server **out)
{
    hc_server *s;
    sf_status st;

    *out = NULL;
    s = sf_calloc(1, sizeof(*s));
    if (s == NULL)
        return SF_ENOMEM;
    pthread_mutex_init(&s->lock, NULL);
    s->endpoint = sf_strdup(endpoint);
    if (s->endpoint == NULL) {
        server_stop(s);
        return SF_ENOMEM;
    }
    st = sf_net_http_listen("health_check", endpoint, on_request, s, &s->daemon);
    if (st != SF_OK) {
        server_stop(s);
        return st;
    }
    sf_info("health_check: answering on http://%s", endpoint);
    *out = s;
    return SF_OK;
}

/* Make `self` the server's owner, with its config's path and bodies. */
static sf_status server_attach(hc_server *s, sf_component *self, const sf_hc_config *cfg)
{
    char *path = sf_strdup(cfg->path);
    char *healthy = cfg->response_body.healthy ? sf_strdup(cfg->response_body.healthy) : NULL;
    char *unhealthy = cfg->response_body.unhealthy ? sf_strdup(cfg->response_body.unhealthy)
                                                   : NULL;

    if (path == NULL || (cfg->response_body.healthy && healthy == NULL) ||
        (cfg->response_body.unhealthy && unhealthy == NULL)) {
        sf_free(path);
        sf_free(healthy);
        sf_free(unhealthy);
        return SF_ENOMEM;
    }
    pthread_mutex_lock(&s->lock);
    sf_free(s->path);
    sf_free(s->healthy);
    sf_free(s->unhealthy);
    s->path = path;
    s->healthy = healthy;
    s->unhealthy = unhealthy;
    s->owner = self;
    s->pipeline = cfg->check_collector_pipeline;
    s->failing = false;
    s->was_unhealthy = false;
    s->up_since_wall_ms = 0;            /* ready again is a new upSince */
    pthread_mutex_unlock(&s->lock);
    return SF_OK;
}

static void server_detach(hc_server *s)
{
    pthread_mutex_lock(&s->lock);
    s->owner = NULL;
    s->up_since_wall_ms = 0;
    pthread_mutex_unlock(&s->lock);
}

/* Take `s` out of `stopped`; false when it was not there (taken over). */
static bool stopped_remove(hc_server *s)
{
    bool found = false;

    pthread_mutex_lock(&stopped_lock);
    for (hc_server **p = &stopped; *p != NULL; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            found = true;
            break;
        }
    pthread_mutex_unlock(&stopped_lock);
    return found;
}

/* The stopped server on `endpoint`, taken out of `stopped`, or NULL. */
static hc_server *stopped_take(const char *endpoint)
{
    hc_server *s = NULL;

    pthread_mutex_lock(&stopped_lock);
    for (hc_server **p = &stopped; *p != NULL; p = &(*p)->next)
        if (strcmp((*p)->endpoint, endpoint) == 0) {
            s = *p;
            *p = s->next;
            break;
        }
    pthread_mutex_unlock(&stopped_lock);
    return s;
}

static sf_status hc_create(sf_component *self, const void *config)
{
    hc_ctx *x = sf_calloc(1, sizeof(*x));

    if (x == NULL)
        return SF_ENOMEM;
    x->cfg = config;
    sf_component_set_ctx(self, x);
    return SF_OK;
}

static sf_status hc_start(sf_component *self)
{
    hc_ctx *x = sf_component_ctx(self);
    sf_status st;

    if (x->server != NULL && strcmp(x->server->endpoint, x->cfg->endpoint) != 0) {
        server_stop(x->server);         /* the reload moved the endpoint */
        x->server = NULL;
    }
    if (x->server == NULL)
        x->server = stopped_take(x->cfg->endpoint);
    if (x->server == NULL) {
        st = server_start(x->cfg->endpoint, &x->server);
        if (st != SF_OK)
            return st;
    }
    return server_attach(x->server, self, x->cfg);
}

/* Receivers have stopped; exporters are still to drain: go on answering,
 * 503 (the service is STOPPING), until destroy. */
static void hc_shutdown(sf_component *self)
{
    hc_ctx *x = sf_component_ctx(self);
    hc_server *s = x->server;

    if (s == NULL)
        return;
    x->server = NULL;
    server_detach(s);
    pthread_mutex_lock(&stopped_lock);
    s->next = stopped;
    stopped = s;
    pthread_mutex_unlock(&stopped_lock);
    x->stopped = s;
}

static void hc_destroy(sf_component *self)
{
    hc_ctx *x = sf_component_ctx(self);

    if (x == NULL)
        return;
    server_stop(x->server);
    if (x->stopped != NULL && stopped_remove(x->stopped))
        server_stop(x->stopped);
    sf_free(x);
}

/* Reload: keep listening (answering 503) while the next service starts. */
static void *hc_suspend(sf_component *self)
{
    hc_ctx *x = sf_component_ctx(self);
    hc_server *s = x->server;

    x->server = NULL;
    if (s != NULL)
        server_detach(s);
    return s;
}

static void hc_resume(sf_component *self, void *parcel)
{
    hc_ctx *x;

    if (self == NULL) {                 /* the new config has no such health_check */
        server_stop(parcel);
        return;
    }
    x = sf_component_ctx(self);
    server_stop(x->server);
    x->server = parcel;
}

const sf_component_type sf_health_check_extension_type = {
    .name = "health_check",
    .kind = SF_KIND_EXTENSION,
    .description = "HTTP health endpoint: 200 while every pipeline component runs (and, with "
                   "check_collector_pipeline, no exporter keeps failing), else 503",
    .config_size = sizeof(sf_hc_config),
    .config_map = sf_hc_config_map,
    .check = sf_hc_check,
    .create = hc_create,
    .start = hc_start,
    .shutdown = hc_shutdown,
    .destroy = hc_destroy,
    .suspend = hc_suspend,
    .resume = hc_resume,
};

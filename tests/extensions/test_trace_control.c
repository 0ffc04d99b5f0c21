/* tests/extensions/test_trace_control.c: the `trace_control` extension with
 * a stand-in engine (libmicrohttpd on 127.0.0.1, recording every level it
 * is set to; like SGLang it reads ?level=N only, r1 by GET, r2 by POST) that also
 * plays the OTLP gateway (/v1/traces -> 200). Covers: a window opening and
 * closing on time, an early reset, refused levels/targets/windows, an engine
 * down at the window's end and back later, reset on shutdown, the closing
 * record's collector-wide counts and a matched target's own counts
 * (accepted and refused through the real receiver path), --direct, and the
 * real binary killed with -9 during a window then restarted (it resets the
 * engine). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "extensions/trace_control/trace_control.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "sf_service.h"
#include "tests/sf_test.h"

/* ---- the stand-in engine --------------------------------------------------- */

typedef struct engine {
    struct MHD_Daemon *d;
    uint16_t port;
    pthread_mutex_t mu;
    int n;
    int64_t levels[64];
    int traces;                 /* /v1/traces requests */
    int traces_code;            /* answer to /v1/traces (0: 200) */
} engine;

typedef struct upload {
    char buf[512];
    size_t len;
} upload;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *data, size_t *size, void **con_cls)
{
    engine *e = cls;
    upload *u = *con_cls;
    struct MHD_Response *resp;
    enum MHD_Result ret;
    int code = 200;

    (void)version;
    (void)method;
    if (u == NULL) {
        *con_cls = calloc(1, sizeof(upload));
        return MHD_YES;
    }
    if (*size > 0) {
        size_t n = *size < sizeof(u->buf) - 1 - u->len ? *size : sizeof(u->buf) - 1 - u->len;
        memcpy(u->buf + u->len, data, n);
        u->len += n;
        *size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&e->mu);
    if (strcmp(url, "/v1/traces") == 0) {
        e->traces++;
        if (e->traces_code != 0)
            code = e->traces_code;
    } else if (strcmp(url, "/set_trace_level") == 0) {
        const char *q = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "level");

        if (q != NULL && e->n < 64)
            e->levels[e->n++] = atoll(q);
        else
            code = 400;
    } else {
        code = 404;
    }
    pthread_mutex_unlock(&e->mu);
    resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    ret = MHD_queue_response(conn, (unsigned)code, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode t)
{
    (void)cls;
    (void)c;
    (void)t;
    free(*con_cls);
    *con_cls = NULL;
}

static void engine_up(engine *e)
{
    e->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, e->port, NULL, NULL, on_request, e,
                            MHD_OPTION_NOTIFY_COMPLETED, on_done, e,
                            MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, MHD_OPTION_END);
    assert_non_null(e->d);
    e->port = MHD_get_daemon_info(e->d, MHD_DAEMON_INFO_BIND_PORT)->port;
}

static void engine_down(engine *e)
{
    MHD_stop_daemon(e->d);
    e->d = NULL;
}

static int engine_count(engine *e)
{
    int n;

    pthread_mutex_lock(&e->mu);
    n = e->n;
    pthread_mutex_unlock(&e->mu);
    return n;
}

/* Forget the levels seen so far. */
static void engine_clear(engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->n = 0;
    pthread_mutex_unlock(&e->mu);
}

/* Wait (bounded, never asserted on time) until the engine has seen n levels. */
static void wait_levels(engine *e, int n)
{
    for (int i = 0; i < 1500 && engine_count(e) < n; i++)
        usleep(20000);
    assert_int_equal(engine_count(e), n);
}

/* ---- fixture ----------------------------------------------------------------- */

typedef struct fx {
    engine eng;
    char dir[64];
    char sock[128], audit[128], conf[128];
    const char *exporter_extra;     /* more otlphttp settings, or NULL */
    const char *r1_extra;           /* more settings of target r1, or NULL */
    bool live;                      /* markers and auto_revert as configured by `extra` */
    uint16_t otlp_port;
    sf_config *cfg;
    sf_service *svc;
} fx;

static void write_config(fx *f, const char *extra)
{
    FILE *o = fopen(f->conf, "w");

    assert_non_null(o);
    fprintf(o,
            "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%u\n"
            "exporters:\n  otlphttp:\n    endpoint: http://127.0.0.1:%u\n"
            "    compression: none\n%s"
            "extensions:\n  trace_control:\n    socket: %s\n    audit_log: %s\n"
            "    levels: [0, 3]\n    max_window: 10m\n    shutdown_timeout: 2s\n"
            "    retry_on_failure: {initial_interval: 50ms, max_interval: 200ms}\n"
            "    enforce_interval: 0s\n    grace_period: 0s\n%s%s"
            "    targets:\n"
            "      r1:\n        endpoint: http://127.0.0.1:%u/set_trace_level\n"
            "        match: {service.instance.id: r1}\n%s"
            "      r2:\n        endpoint: http://127.0.0.1:%u/set_trace_level\n"
            "        method: POST\n        level_in: query\n        field: level\n"
            "service:\n  extensions: [trace_control]\n"
            "  telemetry: {metrics: {level: none}, logs: {level: error}}\n"
            "  pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [otlphttp]\n",
            f->otlp_port, f->eng.port, f->exporter_extra ? f->exporter_extra : "", f->sock,
            f->audit, f->live ? "" : "    markers: {enabled: false}\n    auto_revert: {enabled: false}\n",
            extra, f->eng.port, f->r1_extra ? f->r1_extra : "", f->eng.port);
    fclose(o);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/sf_tc_XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->sock, sizeof(f->sock), "%s/ctl.sock", f->dir);
    snprintf(f->audit, sizeof(f->audit), "%s/audit.jsonl", f->dir);
    snprintf(f->conf, sizeof(f->conf), "%s/spanfence.yaml", f->dir);
    pthread_mutex_init(&f->eng.mu, NULL);
    engine_up(&f->eng);
    f->otlp_port = (uint16_t)sf_test_free_port();
    write_config(f, "");
    *state = f;
    return 0;
}

/* Start the service; at start trace_control sets both targets to the
 * resting level: wait for that, then forget it. */
static void start(fx *f)
{
    sf_diag *d = sf_diag_create(f->conf);

    assert_int_equal(sf_config_load(f->conf, d, &f->cfg), SF_OK);
    assert_int_equal(sf_service_create(f->cfg, d, &f->svc), SF_OK);
    sf_diag_destroy(d);
    assert_int_equal(sf_service_start(f->svc), SF_OK);
    wait_levels(&f->eng, 2);
    assert_int_equal(f->eng.levels[0], 0);
    assert_int_equal(f->eng.levels[1], 0);
    engine_clear(&f->eng);
}

static void stop(fx *f)
{
    if (f->svc) {
        sf_service_shutdown(f->svc);
        sf_service_destroy(f->svc);
        f->svc = NULL;
    }
    sf_config_destroy(f->cfg);
    f->cfg = NULL;
}

static int teardown(void **state)
{
    fx *f = *state;
    char cmd[128];

    stop(f);
    if (f->eng.d)
        engine_down(&f->eng);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

/* ---- helpers -------------------------------------------------------------------- */

/* Send a request line; return ok and copy the message. */
static bool ask(fx *f, const char *req, char *msg, size_t size)
{
    char err[256], *reply = NULL;
    bool ok = false;

    assert_int_equal(sf_tc_client_request(f->sock, req, &reply, err, sizeof(err)), SF_OK);
    assert_int_equal(sf_tc_json_bool(reply, strlen(reply), "ok", &ok), SF_OK);
    assert_int_equal(sf_tc_json_str(reply, strlen(reply), "message", msg, size), SF_OK);
    sf_free(reply);
    return ok;
}

typedef struct records {
    int n;
    int enforce;                /* "enforce" records (resting level at start), not in line[] */
    char line[32][4096];
} records;

/* The audit log's window records; the resting-level records are counted
 * apart (each start writes one per target). */
static void read_audit(fx *f, records *r)
{
    FILE *in = fopen(f->audit, "r");

    r->n = 0;
    r->enforce = 0;
    if (in == NULL)
        return;
    while (r->n < 32 && fgets(r->line[r->n], sizeof(r->line[0]), in) != NULL) {
        size_t l = strlen(r->line[r->n]);
        assert_true(l > 0 && r->line[r->n][l - 1] == '\n');
        r->line[r->n][l - 1] = '\0';
        assert_true(sf_tc_json_valid(r->line[r->n], l - 1));
        if (strstr(r->line[r->n], "{\"event\":\"enforce\",") == r->line[r->n]) {
            r->enforce++;
            continue;
        }
        /* spans from a resting target (posted between windows): how soon
         * the control thread sees it rest is not the point here (e2e
         * operator_day '8' is) */
        if (strstr(r->line[r->n], "{\"event\":\"out_of_band\",") == r->line[r->n])
            continue;
        r->n++;
    }
    fclose(in);
}

static void assert_field(const char *rec, const char *key, const char *want)
{
    char v[512];

    assert_int_equal(sf_tc_json_str(rec, strlen(rec), key, v, sizeof(v)), SF_OK);
    assert_string_equal(v, want);
}

static int64_t int_field(const char *rec, const char *key)
{
    int64_t v = -1;

    assert_int_equal(sf_tc_json_int(rec, strlen(rec), key, &v), SF_OK);
    return v;
}

/* Wait until the audit log has n records. */
static void wait_records(fx *f, records *r, int n)
{
    for (int i = 0; i < 1500; i++) {
        read_audit(f, r);
        if (r->n >= n)
            break;
        usleep(20000);
    }
    assert_int_equal(r->n, n);
}

/* ---- tests ------------------------------------------------------------------------- */

static void test_window_opens_and_closes(void **state)
{
    fx *f = *state;
    char msg[1024];
    records r;
    struct stat st;

    start(f);
    assert_int_equal(stat(f->sock, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":300,"
                       "\"reason\":\"decode \\\"capture\\\"\"}", msg, sizeof(msg)));
    assert_non_null(strstr(msg, "target 'r1' is at level 3 for 1s, until "));
    assert_int_equal(engine_count(&f->eng), 1);
    assert_int_equal(f->eng.levels[0], 3);
    wait_levels(&f->eng, 2);
    assert_int_equal(f->eng.levels[1], 0);
    wait_records(f, &r, 3);
    assert_field(r.line[0], "event", "open");
    assert_field(r.line[0], "target", "r1");
    assert_field(r.line[0], "reason", "decode \"capture\"");
    assert_int_equal(int_field(r.line[0], "level"), 3);
    assert_int_equal(int_field(r.line[0], "uid"), (int64_t)getuid());
    assert_field(r.line[1], "event", "close");
    assert_field(r.line[1], "cause", "expired");
    assert_field(r.line[1], "scope", "collector");
    assert_int_equal(int_field(r.line[1], "accepted"), 0);
    assert_int_equal(int_field(r.line[1], "lost"), 0);
    assert_field(r.line[2], "event", "reset");
    assert_int_equal(int_field(r.line[2], "level"), 0);
    assert_int_equal(int_field(r.line[2], "attempts"), 1);
    /* the same window id on all three */
    char id[128];
    assert_int_equal(sf_tc_json_str(r.line[0], strlen(r.line[0]), "window", id, sizeof(id)), SF_OK);
    assert_field(r.line[1], "window", id);
    assert_field(r.line[2], "window", id);
    /* the POST target */
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r2\",\"level\":3,\"for_ms\":200,"
                       "\"reason\":\"r2\"}", msg, sizeof(msg)));
    wait_levels(&f->eng, 4);
    assert_int_equal(f->eng.levels[2], 3);
    assert_int_equal(f->eng.levels[3], 0);
}

static void test_reset_and_status(void **state)
{
    fx *f = *state;
    char msg[1024];
    records r;

    start(f);
    assert_true(ask(f, "{\"op\":\"status\"}", msg, sizeof(msg)));
    assert_non_null(strstr(msg, "r1: level 0 (set "));     /* enforced at start */
    assert_non_null(strstr(msg, "\nr2: level 0 (set "));
    assert_null(strstr(msg, "window"));
    read_audit(f, &r);
    assert_int_equal(r.n, 0);
    assert_int_equal(r.enforce, 2);                       /* one per target */
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":600000,"
                       "\"reason\":\"x\"}", msg, sizeof(msg)));
    assert_true(ask(f, "{\"op\":\"status\"}", msg, sizeof(msg)));
    assert_non_null(strstr(msg, "r1: level 3 (set "));
    assert_non_null(strstr(msg, "; window at level 3, "));
    assert_non_null(strstr(msg, " left (until "));
    /* a second window on the same target is refused */
    assert_false(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":1000,"
                        "\"reason\":\"x\"}", msg, sizeof(msg)));
    assert_non_null(strstr(msg, "target 'r1' already has a window at level 3"));
    assert_true(ask(f, "{\"op\":\"reset\",\"target\":\"r1\"}", msg, sizeof(msg)));
    assert_string_equal(msg, "target 'r1' is back at level 0");
    assert_int_equal(engine_count(&f->eng), 2);
    assert_int_equal(f->eng.levels[1], 0);
    assert_false(ask(f, "{\"op\":\"reset\",\"target\":\"r1\"}", msg, sizeof(msg)));
    assert_string_equal(msg, "target 'r1' has no open window");
    read_audit(f, &r);
    assert_int_equal(r.n, 3);
    assert_field(r.line[1], "cause", "reset");
    assert_true(ask(f, "{\"op\":\"status\"}", msg, sizeof(msg)));
    assert_non_null(strstr(msg, "r1: level 0 (set "));
    /* no open window; what the last one's close said (issue 24, 6) */
    assert_null(strstr(msg, "window at level"));
    assert_null(strstr(msg, "left (until"));
    assert_non_null(strstr(msg, "; last window 'r1-"));
    assert_non_null(strstr(msg, "' closed (reset): "));
}

static void test_refused(void **state)
{
    fx *f = *state;
    char msg[1024];
    records r;

    start(f);
    assert_false(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":2,\"for_ms\":1000,"
                        "\"reason\":\"x\"}", msg, sizeof(msg)));
    assert_string_equal(msg, "level 2 is not allowed (allowed: 0, 3)");
    assert_false(ask(f, "{\"op\":\"set\",\"target\":\"r9\",\"level\":3,\"for_ms\":1000,"
                        "\"reason\":\"x\"}", msg, sizeof(msg)));
    assert_string_equal(msg, "unknown target 'r9' (known: 'r1', 'r2')");
    assert_false(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":600001,"
                        "\"reason\":\"x\"}", msg, sizeof(msg)));
    assert_string_equal(msg, "a window of 600001ms is longer than max_window (600000ms)");
    assert_false(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":0,\"for_ms\":1000,"
                        "\"reason\":\"x\"}", msg, sizeof(msg)));
    assert_string_equal(msg, "level 0 is the resting level: use 'reset'");
    assert_false(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":1000}", msg,
                     sizeof(msg)));
    assert_string_equal(msg, "a set request needs a 'reason' of 1 to 256 bytes");
    assert_false(ask(f, "{\"op\":\"format\"}", msg, sizeof(msg)));
    assert_string_equal(msg, "unknown op 'format' (expected set, reset, status)");
    assert_false(ask(f, "not json", msg, sizeof(msg)));
    assert_string_equal(msg, "expected one JSON object with an 'op'");
    assert_int_equal(engine_count(&f->eng), 0);      /* nothing was sent */
    read_audit(f, &r);
    assert_int_equal(r.n, 0);                        /* nor recorded */
}

static bool metric_value(fx *f, const char *series, uint64_t *v)
{
    char *text, *p;
    size_t len;
    bool found = false;

    assert_int_equal(sf_service_render_metrics(f->svc, &text, &len), SF_OK);
    p = strstr(text, series);
    if (p != NULL) {
        *v = strtoull(p + strlen(series), NULL, 10);
        found = true;
    }
    sf_free(text);
    return found;
}

/* Wait (bounded) until the exporter counted n spans as sent. */
static void wait_sent(fx *f, uint64_t n)
{
    uint64_t sent = 0;

    for (int i = 0; i < 1500 && sent < n; i++) {
        assert_true(metric_value(f, "otelcol_exporter_sent_spans{exporter=\"otlphttp\"} ", &sent));
        if (sent < n)
            usleep(20000);
    }
    assert_int_equal(sent, n);
}

static void test_engine_down_then_back(void **state)
{
    fx *f = *state;
    char msg[1024];
    records r;
    uint64_t failures = 0, open = 0;

    start(f);
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":200,"
                       "\"reason\":\"x\"}", msg, sizeof(msg)));
    engine_down(&f->eng);
    for (int i = 0; i < 1500 && failures < 2; i++) {
        usleep(20000);
        assert_true(metric_value(f, "spanfence_trace_control_engine_failures{extension=\"trace_control\"} ",
                                 &failures));
    }
    assert_true(failures >= 2);
    assert_true(metric_value(f, "spanfence_trace_control_open_windows{extension=\"trace_control\"} ",
                             &open));
    assert_int_equal(open, 1);
    assert_true(ask(f, "{\"op\":\"status\"}", msg, sizeof(msg)));
    assert_non_null(strstr(msg, "r1: level not known; window closed, reset to level 0 pending ("));
    read_audit(f, &r);
    assert_int_equal(r.n, 2);                        /* open, close: no reset yet */
    assert_field(r.line[1], "cause", "expired");
    engine_up(&f->eng);                              /* same port */
    wait_levels(&f->eng, 2);
    assert_int_equal(f->eng.levels[1], 0);
    wait_records(f, &r, 3);
    assert_field(r.line[2], "event", "reset");
    assert_true(int_field(r.line[2], "attempts") >= 3);
    assert_true(metric_value(f, "spanfence_trace_control_open_windows{extension=\"trace_control\"} ",
                             &open));
    assert_int_equal(open, 0);
}

static void test_shutdown_resets(void **state)
{
    fx *f = *state;
    char msg[1024];
    records r;

    start(f);
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r2\",\"level\":3,\"for_ms\":600000,"
                       "\"reason\":\"x\"}", msg, sizeof(msg)));
    stop(f);
    assert_int_equal(engine_count(&f->eng), 2);
    assert_int_equal(f->eng.levels[1], 0);
    read_audit(f, &r);
    assert_int_equal(r.n, 3);
    assert_field(r.line[1], "cause", "shutdown");
    assert_field(r.line[2], "event", "reset");
    assert_int_equal(access(f->sock, F_OK), -1);    /* socket removed */
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

/* One OTLP/HTTP request of `spans` spans (or a malformed body) to the receiver. */
static void post_spans(fx *f, int spans, bool malformed)
{
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest req =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    Opentelemetry__Proto__Trace__V1__ResourceSpans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    Opentelemetry__Proto__Trace__V1__ScopeSpans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    Opentelemetry__Proto__Trace__V1__Span sp[4], *spp[4];
    Opentelemetry__Proto__Trace__V1__ResourceSpans *rsp = &rs;
    Opentelemetry__Proto__Trace__V1__ScopeSpans *ssp = &ss;
    uint8_t tid[16] = { 1 }, sid[8] = { 2 }, buf[1024];
    size_t len;
    char url[64];
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/x-protobuf");
    long code = 0;

    for (int i = 0; i < spans; i++) {
        opentelemetry__proto__trace__v1__span__init(&sp[i]);
        sp[i].trace_id = (ProtobufCBinaryData){ 16, tid };
        sp[i].span_id = (ProtobufCBinaryData){ 8, sid };
        sp[i].name = "decode";
        spp[i] = &sp[i];
    }
    ss.n_spans = (size_t)spans;
    ss.spans = spp;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, buf);
    if (malformed)
        buf[0] = 0xff, len = 3;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/v1/traces", f->otlp_port);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, buf);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    assert_int_equal(code, malformed ? 400 : 200);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

static void test_closing_record_counts(void **state)
{
    fx *f = *state;
    char msg[1024], sub[512];
    records r;

    start(f);
    post_spans(f, 1, false);            /* before the window: not counted */
    wait_sent(f, 1);
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":600000,"
                       "\"reason\":\"counts\"}", msg, sizeof(msg)));
    post_spans(f, 3, false);
    post_spans(f, 2, false);
    post_spans(f, 1, true);
    wait_sent(f, 6);
    assert_true(ask(f, "{\"op\":\"reset\",\"target\":\"r1\"}", msg, sizeof(msg)));
    read_audit(f, &r);
    assert_int_equal(r.n, 3);
    assert_field(r.line[1], "scope", "collector");
    assert_int_equal(int_field(r.line[1], "accepted"), 5);
    assert_int_equal(int_field(r.line[1], "exported"), 5);
    assert_int_equal(int_field(r.line[1], "enqueue_failed"), 0);
    assert_int_equal(int_field(r.line[1], "lost"), 0);  /* a malformed body has no span count */
    assert_non_null(strstr(r.line[1], "\"refused\":{\"malformed\":0,"));
    snprintf(sub, sizeof(sub), "\"send_failed\":{\"malformed\":0,\"too_large\":0,"
             "\"filter_failed\":0,\"memory_limit\":0,\"queue_full\":0,\"retries_exhausted\":0,"
             "\"permanent_error\":0,\"shutdown\":0,\"internal\":0,\"filtered\":0,\"out_of_band\":0},"
             "\"target_scope\":\"match\",\"match\":{\"service.instance.id\":\"r1\"},"
             "\"accepted_from_target\":0,\"refused_from_target\":0,\"complete\":false,"
             "\"capture\":\"empty\",\"marker\":\"off\"}");
    /* these spans carry no resource: none came from r1, the window is empty */
    assert_non_null(strstr(r.line[1], sub));
}

/* One OTLP/HTTP request of up to 4 resources, each with `spans[i]` spans and
 * service.instance.id = ids[i] (NULL: no resource), answered with `code`. */
static void post_resources(fx *f, size_t n, const char *const *ids, const int *spans, long code)
{
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest req =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    Opentelemetry__Proto__Trace__V1__ResourceSpans rs[4], *rsp[4];
    Opentelemetry__Proto__Resource__V1__Resource res[4];
    Opentelemetry__Proto__Common__V1__KeyValue kv[4][2], *kvp[4][2];
    Opentelemetry__Proto__Common__V1__AnyValue av[4][2];
    Opentelemetry__Proto__Trace__V1__ScopeSpans ss[4], *ssp[4];
    Opentelemetry__Proto__Trace__V1__Span sp[4][8], *spp[4][8];
    uint8_t tid[16] = { 1 }, sid[8] = { 2 }, buf[4096];
    size_t len;
    char url[64];
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/x-protobuf");
    long got = 0;

    assert_true(n <= 4);
    for (size_t i = 0; i < n; i++) {
        opentelemetry__proto__trace__v1__resource_spans__init(&rs[i]);
        opentelemetry__proto__resource__v1__resource__init(&res[i]);
        opentelemetry__proto__trace__v1__scope_spans__init(&ss[i]);
        for (int a = 0; a < 2; a++) {
            opentelemetry__proto__common__v1__key_value__init(&kv[i][a]);
            opentelemetry__proto__common__v1__any_value__init(&av[i][a]);
            av[i][a].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
            kv[i][a].value = &av[i][a];
            kvp[i][a] = &kv[i][a];
        }
        kv[i][0].key = "service.name";
        av[i][0].string_value = "sglang";
        kv[i][1].key = "service.instance.id";
        av[i][1].string_value = (char *)ids[i];
        res[i].n_attributes = 2;
        res[i].attributes = kvp[i];
        assert_true(spans[i] <= 8);
        for (int j = 0; j < spans[i]; j++) {
            opentelemetry__proto__trace__v1__span__init(&sp[i][j]);
            sp[i][j].trace_id = (ProtobufCBinaryData){ 16, tid };
            sp[i][j].span_id = (ProtobufCBinaryData){ 8, sid };
            sp[i][j].name = "decode";
            spp[i][j] = &sp[i][j];
        }
        ss[i].n_spans = (size_t)spans[i];
        ss[i].spans = spp[i];
        ssp[i] = &ss[i];
        rs[i].resource = ids[i] ? &res[i] : NULL;
        rs[i].n_scope_spans = 1;
        rs[i].scope_spans = &ssp[i];
        rsp[i] = &rs[i];
    }
    req.n_resource_spans = n;
    req.resource_spans = rsp;
    len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, buf);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/v1/traces", f->otlp_port);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, buf);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &got);
    assert_int_equal(got, code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

static void post_one(fx *f, const char *id, int spans, long code)
{
    post_resources(f, 1, &id, &spans, code);
}

/* Windows on r1 (match {service.instance.id: r1}) count r1's spans only,
 * accepted and refused; r2 (no match) keeps the collector-wide record. The
 * exporter sends synchronously (no queue), so a gateway answering 503 makes
 * the receiver refuse the batch through the real emit path. */
static void test_closing_record_per_target(void **state)
{
    fx *f = *state;
    char msg[1024];
    records r;
    static const char *const mixed_ids[3] = { "r2", "r1", NULL };
    static const int mixed_spans[3] = { 4, 1, 2 };
    uint64_t accepted = 0;

    f->exporter_extra = "    sending_queue: {enabled: false}\n";
    write_config(f, "");
    start(f);
    post_one(f, "r1", 2, 200);                      /* before the window */
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":600000,"
                       "\"reason\":\"per engine\"}", msg, sizeof(msg)));
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r2\",\"level\":3,\"for_ms\":600000,"
                       "\"reason\":\"no match\"}", msg, sizeof(msg)));
    post_one(f, "r1", 3, 200);
    post_one(f, "r2", 2, 200);
    post_one(f, "r10", 5, 200);                     /* not r1: exact match */
    post_resources(f, 3, mixed_ids, mixed_spans, 200);
    post_one(f, NULL, 1, 200);                      /* no resource */
    pthread_mutex_lock(&f->eng.mu);
    f->eng.traces_code = 503;                       /* the gateway refuses */
    pthread_mutex_unlock(&f->eng.mu);
    post_one(f, "r1", 2, 503);
    post_one(f, "r2", 1, 503);
    pthread_mutex_lock(&f->eng.mu);
    f->eng.traces_code = 0;
    pthread_mutex_unlock(&f->eng.mu);
    assert_true(metric_value(f, "otelcol_receiver_accepted_spans{receiver=\"otlp\","
                                "transport=\"http\"} ", &accepted));
    assert_int_equal(accepted, 2 + 3 + 2 + 5 + 7 + 1);
    assert_true(ask(f, "{\"op\":\"reset\",\"target\":\"r1\"}", msg, sizeof(msg)));
    assert_true(ask(f, "{\"op\":\"reset\",\"target\":\"r2\"}", msg, sizeof(msg)));
    read_audit(f, &r);
    assert_int_equal(r.n, 6);                       /* open r1, open r2, close+reset each */
    assert_field(r.line[2], "event", "close");
    assert_field(r.line[2], "target", "r1");
    assert_field(r.line[2], "scope", "collector");
    assert_int_equal(int_field(r.line[2], "accepted"), 3 + 2 + 5 + 7 + 1);
    assert_field(r.line[2], "target_scope", "match");
    assert_non_null(strstr(r.line[2], ",\"match\":{\"service.instance.id\":\"r1\"},"));
    assert_int_equal(int_field(r.line[2], "accepted_from_target"), 3 + 1);
    assert_int_equal(int_field(r.line[2], "refused_from_target"), 2);
    assert_field(r.line[4], "event", "close");
    assert_field(r.line[4], "target", "r2");
    assert_field(r.line[4], "scope", "collector");
    assert_int_equal(int_field(r.line[4], "accepted"), 3 + 2 + 5 + 7 + 1);
    assert_null(strstr(r.line[4], "target_scope"));
    assert_null(strstr(r.line[4], "from_target"));

    /* a second window counts from its own start */
    post_one(f, "r1", 4, 200);                      /* between windows */
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":600000,"
                       "\"reason\":\"again\"}", msg, sizeof(msg)));
    post_one(f, "r1", 1, 200);
    post_one(f, "r2", 3, 200);
    stop(f);                                        /* closes it: cause shutdown */
    read_audit(f, &r);
    assert_int_equal(r.n, 9);
    assert_field(r.line[7], "cause", "shutdown");
    assert_int_equal(int_field(r.line[7], "accepted"), 4);
    assert_int_equal(int_field(r.line[7], "accepted_from_target"), 1);
    assert_int_equal(int_field(r.line[7], "refused_from_target"), 0);
}

/* out_of_band: drop: r1's spans while it rests go nowhere, counted on the
 * receiver as dropped (reason out_of_band) and not accepted; another
 * resource in the same request still leaves. The next window counts its
 * own spans only: nothing of the dropped ones is charged to it. */
static void test_out_of_band_dropped(void **state)
{
    fx *f = *state;
    char msg[1024];
    records r;
    static const char *const mixed_ids[2] = { "r2", "r1" };
    static const int mixed_spans[2] = { 4, 1 };
    uint64_t dropped = 0, accepted = 0, posted = 0;

    f->r1_extra = "        out_of_band: drop\n        arrival_timeout: 1s\n";
    write_config(f, "");
    start(f);
    /* r1 rests once its resting level is recorded: from then on its spans
     * are dropped (bounded; what was sent before that was exported) */
    for (int i = 0; i < 500 && dropped == 0; i++) {
        post_one(f, "r1", 1, 200);
        posted++;
        assert_true(metric_value(f, "spanfence_receiver_dropped_spans{receiver=\"otlp\","
                                    "transport=\"http\",reason=\"out_of_band\"} ", &dropped));
        if (dropped == 0)
            usleep(20000);
    }
    assert_int_equal(dropped, 1);
    assert_true(metric_value(f, "otelcol_receiver_accepted_spans{receiver=\"otlp\","
                                "transport=\"http\"} ", &accepted));
    assert_int_equal(accepted, posted - 1);
    post_resources(f, 2, mixed_ids, mixed_spans, 200);  /* r2's 4 leave, r1's 1 does not */
    assert_true(metric_value(f, "spanfence_receiver_dropped_spans{receiver=\"otlp\","
                                "transport=\"http\",reason=\"out_of_band\"} ", &dropped));
    assert_int_equal(dropped, 2);
    assert_true(metric_value(f, "otelcol_receiver_accepted_spans{receiver=\"otlp\","
                                "transport=\"http\"} ", &accepted));
    assert_int_equal(accepted, posted - 1 + 4);
    wait_sent(f, accepted);
    /* a window: r1's spans leave again, and its record is its own */
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":600000,"
                       "\"reason\":\"after out of band\"}", msg, sizeof(msg)));
    post_one(f, "r1", 3, 200);
    wait_sent(f, accepted + 3);
    assert_true(ask(f, "{\"op\":\"reset\",\"target\":\"r1\"}", msg, sizeof(msg)));
    assert_true(metric_value(f, "spanfence_receiver_dropped_spans{receiver=\"otlp\","
                                "transport=\"http\",reason=\"out_of_band\"} ", &dropped));
    assert_int_equal(dropped, 2);
    read_audit(f, &r);
    assert_int_equal(r.n, 3);                       /* open, close, reset */
    assert_field(r.line[1], "event", "close");
    assert_int_equal(int_field(r.line[1], "accepted"), 3);
    assert_int_equal(int_field(r.line[1], "exported"), 3);
    assert_int_equal(int_field(r.line[1], "lost"), 0);
    assert_int_equal(int_field(r.line[1], "accepted_from_target"), 3);
    assert_non_null(strstr(r.line[1], "\"complete\":true"));
}

/* A window whose engine sends nothing: its arrival turns none after
 * arrival_timeout, written once to the audit log (no_arrival); spans then
 * arriving flip it back. */
static void test_arrival_none(void **state)
{
    fx *f = *state;
    char msg[1024];
    records r;
    bool none = false;

    f->r1_extra = "        arrival_timeout: 1s\n";
    write_config(f, "");
    start(f);
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":600000,"
                       "\"reason\":\"silent engine\"}", msg, sizeof(msg)));
    for (int i = 0; i < 1500 && !none; i++) {
        read_audit(f, &r);
        for (int k = 0; k < r.n; k++)
            none = none || strstr(r.line[k], "{\"event\":\"no_arrival\",") == r.line[k];
        if (!none)
            usleep(20000);
    }
    assert_true(none);
    assert_int_equal(r.n, 2);                       /* open, no_arrival */
    assert_field(r.line[1], "target", "r1");
    assert_true(int_field(r.line[1], "since_open_ms") >= 1000);
    post_one(f, "r1", 2, 200);
    wait_sent(f, 2);
    assert_true(ask(f, "{\"op\":\"reset\",\"target\":\"r1\"}", msg, sizeof(msg)));
    read_audit(f, &r);
    assert_int_equal(r.n, 4);                       /* said once: open, no_arrival, close, reset */
    assert_field(r.line[2], "event", "close");
    assert_int_equal(int_field(r.line[2], "accepted_from_target"), 2);
}

/* auto_revert on the target's own losses: r1 (match) loses 3 of its 5
 * spans while the collector as a whole loses 3 of 25, under max_loss_ratio
 * 0.5: the window ends on r1's ratio. Its marker span goes to the exporter,
 * which refuses it (the gateway still answers 503): counted as refused on
 * the extension, and the closing record says so. */
static void test_auto_revert_on_target_loss(void **state)
{
    fx *f = *state;
    char msg[1024], *text;
    size_t len;
    records r;

    f->exporter_extra = "    sending_queue: {enabled: false}\n";
    f->live = true;
    write_config(f, "    auto_revert: {max_lost_spans: 1000, max_loss_ratio: 0.5, "
                    "check_interval: 20ms}\n");
    start(f);
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":600000,"
                       "\"reason\":\"target loss\"}", msg, sizeof(msg)));
    for (int i = 0; i < 4; i++)
        post_one(f, "r2", 5, 200);
    post_one(f, "r1", 2, 200);
    pthread_mutex_lock(&f->eng.mu);
    f->eng.traces_code = 503;
    pthread_mutex_unlock(&f->eng.mu);
    post_one(f, "r1", 3, 503);
    wait_records(f, &r, 3);                         /* open, close, reset */
    assert_field(r.line[1], "event", "close");
    assert_field(r.line[1], "cause", "loss");
    assert_field(r.line[1], "revert_reason", "3 of the target's 5 spans refused (more than "
                                             "max_loss_ratio 50.00%)");
    assert_int_equal(int_field(r.line[1], "accepted"), 22);
    /* the 3 are refused by the receiver and send_failed by the queue-less
     * exporter, with the same reason: lost once, not twice */
    assert_int_equal(int_field(r.line[1], "lost"), 3);
    assert_int_equal(int_field(r.line[1], "accepted_from_target"), 2);
    assert_int_equal(int_field(r.line[1], "refused_from_target"), 3);
    assert_non_null(strstr(r.line[1], ",\"complete\":false,\"capture\":\"incomplete\",\"marker\":\"not sent\"}"));
    assert_field(r.line[2], "event", "reset");
    wait_levels(&f->eng, 2);
    assert_int_equal(f->eng.levels[1], 0);
    assert_int_equal(sf_service_render_metrics(f->svc, &text, &len), SF_OK);
    assert_non_null(strstr(text, "spanfence_extension_injected_spans{extension=\"trace_control\"} 0\n"));
    /* the receiver says why it refused them: the exporter's reason */
    assert_non_null(strstr(text, "otelcol_receiver_refused_spans{receiver=\"otlp\","
                                 "transport=\"http\",reason=\"retries_exhausted\"} 3\n"));
    assert_non_null(strstr(text, "otelcol_receiver_refused_spans{receiver=\"otlp\","
                                 "transport=\"http\",reason=\"internal\"} 0\n"));
    assert_non_null(strstr(text, "spanfence_extension_refused_spans{extension=\"trace_control\","
                                 "reason=\"memory_limit\"} 0\n"));
    assert_non_null(strstr(text, "spanfence_trace_control_target_level{extension=\"trace_control\","
                                 "target=\"r1\"} 0\n"));
    assert_non_null(strstr(text, "spanfence_trace_control_target_level{extension=\"trace_control\","
                                 "target=\"r2\"} 0\n"));
    {
        /* the marker's one span is refused with some reason */
        uint64_t sum = 0;
        const char *p = text;

        while ((p = strstr(p, "spanfence_extension_refused_spans{extension=\"trace_control\",")) != NULL) {
            p = strchr(p, '}') + 2;
            sum += strtoull(p, NULL, 10);
        }
        assert_int_equal(sum, 1);
    }
    sf_free(text);
    pthread_mutex_lock(&f->eng.mu);
    f->eng.traces_code = 0;
    pthread_mutex_unlock(&f->eng.mu);
}

/* ---- the real binary ------------------------------------------------------------------ */

static pid_t spawn(fx *f)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        if (freopen("/dev/null", "w", stderr) == NULL)
            _exit(126);
        execl(SF_BINARY_DIR "/spanfence", "spanfence", "--config", f->conf, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1500 && access(f->sock, F_OK) != 0; i++)
        usleep(20000);
    assert_int_equal(access(f->sock, F_OK), 0);
    return pid;
}

static void test_crash_then_restart_resets(void **state)
{
    fx *f = *state;
    char msg[1024];
    records r;
    int status;
    pid_t pid = spawn(f);

    wait_levels(&f->eng, 2);                         /* both targets set to 0 at start */
    engine_clear(&f->eng);
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r1\",\"level\":3,\"for_ms\":600000,"
                       "\"reason\":\"crash\"}", msg, sizeof(msg)));
    assert_int_equal(engine_count(&f->eng), 1);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    read_audit(f, &r);
    assert_int_equal(r.n, 1);                        /* open, never closed */
    assert_int_equal(r.enforce, 2);
    assert_int_equal(engine_count(&f->eng), 1);      /* the engine is still at 3 */

    pid = spawn(f);                                  /* the stale socket is replaced */
    wait_levels(&f->eng, 3);                         /* r1 reset, r2 enforced */
    assert_int_equal(f->eng.levels[1], 0);
    assert_int_equal(f->eng.levels[2], 0);
    wait_records(f, &r, 3);
    assert_field(r.line[1], "event", "close");
    assert_field(r.line[1], "cause", "recovered");
    assert_field(r.line[1], "scope", "none");
    assert_field(r.line[2], "event", "reset");
    engine_clear(&f->eng);

    /* and a window open at SIGTERM is reset before the process exits */
    assert_true(ask(f, "{\"op\":\"set\",\"target\":\"r2\",\"level\":3,\"for_ms\":600000,"
                       "\"reason\":\"term\"}", msg, sizeof(msg)));
    kill(pid, SIGTERM);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(engine_count(&f->eng), 2);
    assert_int_equal(f->eng.levels[1], 0);
    read_audit(f, &r);
    assert_int_equal(r.n, 6);
    assert_field(r.line[4], "cause", "shutdown");
    /* a third start finds nothing to recover: only the resting levels */
    engine_clear(&f->eng);
    pid = spawn(f);
    wait_levels(&f->eng, 2);
    kill(pid, SIGTERM);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(engine_count(&f->eng), 2);
    read_audit(f, &r);
    assert_int_equal(r.n, 6);
}

static int run_cli(fx *f, const char *args, char *err, size_t size)
{
    char cmd[1024], path[160];
    FILE *in;
    size_t n;
    int rc;

    snprintf(path, sizeof(path), "%s/stderr", f->dir);
    snprintf(cmd, sizeof(cmd), "%s/spanfence trace-level %s >/dev/null 2>%s", SF_BINARY_DIR, args,
             path);
    rc = system(cmd);
    in = fopen(path, "r");
    n = in ? fread(err, 1, size - 1, in) : 0;
    err[n] = '\0';
    if (in)
        fclose(in);
    return WEXITSTATUS(rc);
}

static void test_cli(void **state)
{
    fx *f = *state;
    char args[512], err[2048];
    records r;

    /* --direct: the same checks and audit, straight to the engine */
    snprintf(args, sizeof(args), "set --direct --config %s --target r1 --level 3 --for 5m "
             "--reason 'no collector'", f->conf);
    assert_int_equal(run_cli(f, args, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "spanfence: warning: target 'r1' is at level 3 and NOTHING will "
                                "set it back"));
    assert_int_equal(engine_count(&f->eng), 1);
    read_audit(f, &r);
    assert_int_equal(r.n, 2);
    assert_field(r.line[0], "event", "direct_set");
    assert_field(r.line[1], "event", "direct_outcome");
    assert_field(r.line[1], "outcome", "applied");
    snprintf(args, sizeof(args), "set --direct --config %s --target r1 --level 2 --for 5m "
             "--reason x", f->conf);
    assert_int_equal(run_cli(f, args, err, sizeof(err)), 1);
    assert_string_equal(err, "spanfence: refused: level 2 is not allowed (allowed: 0, 3)\n");
    snprintf(args, sizeof(args), "reset --direct --config %s --target r1", f->conf);
    assert_int_equal(run_cli(f, args, err, sizeof(err)), 0);
    assert_int_equal(engine_count(&f->eng), 2);
    assert_int_equal(f->eng.levels[1], 0);
    /* usage errors */
    snprintf(args, sizeof(args), "set --socket %s --target r1 --level 3 --reason x", f->sock);
    assert_int_equal(run_cli(f, args, err, sizeof(err)), 2);
    assert_string_equal(err, "spanfence: trace-level set needs --for\n");
    /* no collector on the socket */
    snprintf(args, sizeof(args), "status --config %s", f->conf);
    assert_int_equal(run_cli(f, args, err, sizeof(err)), 1);
    assert_non_null(strstr(err, "cannot reach the collector at '"));
    /* through a running collector */
    engine_clear(&f->eng);
    start(f);
    snprintf(args, sizeof(args), "set --config %s --target r2 --level 3 --for 10m --reason cli",
             f->conf);
    assert_int_equal(run_cli(f, args, err, sizeof(err)), 0);
    snprintf(args, sizeof(args), "set --socket %s --target r2 --level 3 --for 11m --reason cli",
             f->sock);
    assert_int_equal(run_cli(f, args, err, sizeof(err)), 1);
    assert_string_equal(err, "spanfence: refused: a window of 660000ms is longer than max_window "
                             "(600000ms)\n");
    snprintf(args, sizeof(args), "reset --socket %s --target r2", f->sock);
    assert_int_equal(run_cli(f, args, err, sizeof(err)), 0);
    assert_int_equal(engine_count(&f->eng), 2);
}

/* trace-level --config with the socket written as ${env:...}: only the
 * socket's own reference is expanded, so a shell without the config's other
 * variables (the gateway's token here) still reaches the collector, and an
 * unset socket variable is the one error (issue 37). */
static void test_cli_socket_from_env(void **state)
{
    fx *f = *state;
    char args[512], err[2048], conf[160], line[200], text[8192], *at, *out;
    FILE *in;
    size_t n;

    in = fopen(f->conf, "r");
    assert_non_null(in);
    n = fread(text, 1, sizeof(text) - 1, in);
    fclose(in);
    text[n] = '\0';
    snprintf(line, sizeof(line), "    socket: %s\n", f->sock);
    at = strstr(text, line);
    assert_non_null(at);
    snprintf(conf, sizeof(conf), "%s/env.yaml", f->dir);
    in = fopen(conf, "w");
    assert_non_null(in);
    out = strstr(text, "    compression: none\n");
    assert_non_null(out);
    out += strlen("    compression: none\n");
    fprintf(in, "%.*s    headers: {Authorization: \"Bearer ${env:SF_TEST_TC_TOKEN}\"}\n%.*s"
            "    socket: ${env:SF_TEST_TC_DIR}/ctl.sock\n%s",
            (int)(out - text), text, (int)(at - out), out, at + strlen(line));
    fclose(in);
    unsetenv("SF_TEST_TC_TOKEN");
    setenv("SF_TEST_TC_DIR", f->dir, 1);
    /* no collector yet: the expanded path is the one tried */
    snprintf(args, sizeof(args), "status --config %s", conf);
    assert_int_equal(run_cli(f, args, err, sizeof(err)), 1);
    snprintf(line, sizeof(line), "spanfence: cannot reach the collector at '%s': ", f->sock);
    assert_non_null(strstr(err, line));
    assert_null(strstr(err, "not set"));
    start(f);
    assert_int_equal(run_cli(f, args, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    unsetenv("SF_TEST_TC_DIR");
    assert_int_equal(run_cli(f, args, err, sizeof(err)), 1);
    assert_non_null(strstr(err, "extensions.trace_control.socket: environment variable "
                                "'SF_TEST_TC_DIR' is not set\n"));
    assert_null(strstr(err, "SF_TEST_TC_TOKEN"));
}

static void test_json_reader(void **state)
{
    const char *j = "{\"a\":\"x\\u00e9\\n\",\"n\":-42,\"nest\":{\"k\":[1,2,{\"z\":null}]},"
                    "\"b\":true,\"f\":1.5}";
    char s[16];
    int64_t v;
    bool b;

    (void)state;
    assert_true(sf_tc_json_valid(j, strlen(j)));
    assert_int_equal(sf_tc_json_str(j, strlen(j), "a", s, sizeof(s)), SF_OK);
    assert_string_equal(s, "x\xc3\xa9\n");
    assert_int_equal(sf_tc_json_int(j, strlen(j), "n", &v), SF_OK);
    assert_int_equal(v, -42);
    assert_int_equal(sf_tc_json_bool(j, strlen(j), "b", &b), SF_OK);
    assert_true(b);
    assert_int_equal(sf_tc_json_int(j, strlen(j), "f", &v), SF_INVALID);
    assert_int_equal(sf_tc_json_str(j, strlen(j), "n", s, sizeof(s)), SF_INVALID);
    assert_int_equal(sf_tc_json_str(j, strlen(j), "k", s, sizeof(s)), SF_INVALID);
    assert_int_equal(sf_tc_json_str(j, strlen(j), "a", s, 3), SF_INVALID);
    assert_false(sf_tc_json_valid("{\"a\":1,}", 8));
    assert_false(sf_tc_json_valid("{\"a\":1} x", 9));
    assert_false(sf_tc_json_valid("{\"a\":\"\\u0000\"}", 14));
    assert_false(sf_tc_json_valid("[1]", 3));
}

/* The audit log is never written through a symbolic link (O_NOFOLLOW),
 * and a line a crash left cut short gets a newline before the next record,
 * so that record is a line of its own. */
static void test_audit_append_nofollow_fresh_line(void **state)
{
    char dir[] = "/tmp/sf_tc_audit_XXXXXX", real[128], link[128], buf[256];
    FILE *f;
    size_t n;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(real, sizeof(real), "%s/real.jsonl", dir);
    snprintf(link, sizeof(link), "%s/audit.jsonl", dir);
    f = fopen(real, "w");
    assert_non_null(f);
    fputs("{\"event\":\"cut", f);          /* a record a crash cut short */
    fclose(f);
    assert_int_equal(symlink(real, link), 0);
    assert_int_equal(sf_tc_audit_append(link, "{\"event\":\"x\"}"), SF_IO);
    assert_int_equal(sf_tc_audit_append(real, "{\"event\":\"y\"}"), SF_OK);
    f = fopen(real, "r");
    assert_non_null(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_string_equal(buf, "{\"event\":\"cut\n{\"event\":\"y\"}\n");
    unlink(link);
    unlink(real);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_reader),
        cmocka_unit_test(test_audit_append_nofollow_fresh_line),
        cmocka_unit_test_setup_teardown(test_window_opens_and_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_and_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_down_then_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_resets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_closing_record_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_closing_record_per_target, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auto_revert_on_target_loss, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_band_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_arrival_none, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_then_restart_resets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_socket_from_env, setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* pipeline/cli/status.c: `spanfence status`, the runbook's one screen: asks
 * the running collector for GET /status on its metrics endpoint (the
 * document sf_overview.c builds) and prints what leaves, what was lost by
 * reason, queue fill, every trace-level window with its own counts and time
 * left, and the last reload's result; --json prints the document as it
 * came. The endpoint is read from the config file with libyaml alone
 * (${env:...} values it cannot expand, such as the gateway's token, need
 * not be set: only service.telemetry.metrics is read), or given with
 * --metrics. Also `spanfence reload`: SIGHUP, then wait for the outcome. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "internal/sf_config_int.h"
#include "sf_alloc.h"
#include "sf_arena.h"
#include "sf_cli.h"
#include "sf_signal.h"
#include "sf_dynbuf.h"

enum { ST_OK = 0, ST_FAILED = 1, ST_USAGE = 2 };

#define STATUS_MAX (4 * 1024 * 1024)
#define RELOAD_WAIT_MAX 1200        /* 100 ms steps: 2 min */

/* ---- where the collector serves /status --------------------------------- */

/* host:port of the metrics endpoint of config file `path`, as the loader
 * would decide it (sf_config.c: a pull reader's prometheus host and port,
 * else metrics.address, default 127.0.0.1:8888), into buf; false with the
 * reason on stderr. */
static bool endpoint_of_file(const char *path, char *buf, size_t size)
{
    sf_diag *diag = sf_diag_create(path);
    sf_arena *arena = sf_arena_create(64 * 1024, 64 * 1024 * 1024);
    const sf_node *metrics, *level, *readers, *prom, *host, *port, *address;
    sf_node *root = NULL;
    char *text = NULL;
    size_t len;
    bool ok = false;

    if (diag == NULL || arena == NULL) {
        fputs("spanfence: out of memory\n", stderr);
        goto out_free;
    }
    if (sf_config_read_file(path, 16 * 1024 * 1024, diag, &text, &len) != SF_OK) {
        sf_diag_print(diag);
        goto out_free;
    }
    /* an unset ${env:...} elsewhere is reported in diag and left alone */
    (void)sf_yaml_load(text, len, arena, diag, &root);
    if (root == NULL) {
        sf_diag_print(diag);
        fprintf(stderr, "spanfence: %s: not a collector config\n", path);
        goto out_free;
    }
    metrics = sf_node_get(sf_node_get(sf_node_get(root, "service"), "telemetry"), "metrics");
    level = sf_node_get(metrics, "level");
    readers = sf_node_get(metrics, "readers");
    address = sf_node_get(metrics, "address");
    if (level != NULL && level->kind == SF_NODE_SCALAR && strcmp(level->text, "none") == 0) {
        fprintf(stderr, "spanfence: %s: service.telemetry.metrics.level is none: the collector "
                "serves no metrics endpoint, and status reads it\n", path);
        goto out_free;
    }
    prom = readers != NULL && readers->kind == SF_NODE_SEQ && readers->n > 0
           ? sf_node_get(sf_node_get(sf_node_get(readers->items[0], "pull"), "exporter"),
                         "prometheus") : NULL;
    host = sf_node_get(prom, "host");
    port = sf_node_get(prom, "port");
    if ((prom != NULL && ((host && host->invalid) || (port && port->invalid))) ||
        (prom == NULL && address != NULL && address->invalid)) {
        fprintf(stderr, "spanfence: %s: the metrics endpoint comes from an environment variable "
                "this shell does not have: give --metrics HOST:PORT\n", path);
        goto out_free;
    }
    if (prom != NULL) {
        const char *h = host && host->kind == SF_NODE_SCALAR ? host->text : "localhost";

        snprintf(buf, size, strchr(h, ':') ? "[%s]:%s" : "%s:%s", h,
                 port && port->kind == SF_NODE_SCALAR ? port->text : "9464");
    } else {
        snprintf(buf, size, "%s", address && address->kind == SF_NODE_SCALAR ? address->text
                                                                               : "127.0.0.1:8888");
    }
    ok = true;
out_free:
    sf_free(text);
    sf_arena_destroy(arena);
    sf_diag_destroy(diag);
    return ok;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    sf_dynbuf *b = arg;

    return sf_dynbuf_add(b, p, size * n) == SF_OK ? size * n : 0;
}

/* GET http://endpoint/status, parsed; NULL with the reason on stderr
 * (unless quiet). */
static json_object *fetch_status(const char *endpoint, bool quiet)
{
    char url[600], err[CURL_ERROR_SIZE] = "";
    CURL *h = curl_easy_init();
    sf_dynbuf body;
    json_object *doc = NULL;
    long code = 0;
    CURLcode rc;

    if (h == NULL) {
        fputs("spanfence: out of memory\n", stderr);
        return NULL;
    }
    sf_dynbuf_init(&body, STATUS_MAX);
    snprintf(url, sizeof(url), "http://%s/status", endpoint);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    rc = curl_easy_perform(h);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (!quiet && rc != CURLE_OK)
        fprintf(stderr, "spanfence: cannot read the collector's status at %s: %s (is it "
                "running, with this config?)\n", url, err[0] ? err : curl_easy_strerror(rc));
    else if (!quiet && code != 200)
        fprintf(stderr, "spanfence: %s answered %ld (a collector older than this command, or "
                "not spanfence?)\n", url, code);
    if (rc == CURLE_OK && code == 200 &&
        ((doc = json_tokener_parse(sf_dynbuf_ptr(&body))) == NULL ||
         !json_object_is_type(doc, json_type_object))) {
        fprintf(stderr, "spanfence: %s: the answer is not a status document\n", url);
        json_object_put(doc);
        doc = NULL;
    }
    sf_dynbuf_release(&body);
    curl_easy_cleanup(h);
    return doc;
}

/* ---- the screen ---------------------------------------------------------- */

static uint64_t u64(json_object *o, const char *key)
{
    json_object *v;

    return json_object_object_get_ex(o, key, &v) ? (uint64_t)json_object_get_int64(v) : 0;
}

/* The string at key, "" when there is none. */
static const char *str(json_object *o, const char *key)
{
    json_object *v;

    return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
           ? json_object_get_string(v) : "";
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v;

    return o != NULL && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* ", what: reason n, reason n" for the non-zero reasons of map (all with
 * all); nothing when every one is 0. */
static void print_reasons(const char *what, json_object *map, bool all)
{
    bool first = true;

    if (map == NULL || !json_object_is_type(map, json_type_object))
        return;
    json_object_object_foreach(map, k, v) {
        int64_t n = json_object_get_int64(v);

        if (n == 0 && !all)
            continue;
        printf("%s%s %" PRId64, first ? what : ", ", k, n);
        first = false;
    }
}

/* Whether a map of counts (refused, dropped) has one that is not 0. */
static bool any_nonzero(json_object *map)
{
    if (map == NULL || !json_object_is_type(map, json_type_object))
        return false;
    json_object_object_foreach(map, k, v) {
        (void)k;
        if (json_object_get_int64(v) != 0)
            return true;
    }
    return false;
}

static void print_ids(json_object *a)
{
    size_t n = a != NULL ? json_object_array_length(a) : 0;

    for (size_t i = 0; i < n; i++)
        printf("%s%s", i ? ", " : "", json_object_get_string(json_object_array_get_idx(a, i)));
    if (n == 0)
        printf("(none)");
}

static void print_left(int64_t ms)
{
    int64_t s = (ms + 999) / 1000;

    if (s >= 3600)
        printf("%" PRId64 "h%02" PRId64 "m%02" PRId64 "s", s / 3600, s / 60 % 60, s % 60);
    else if (s >= 60)
        printf("%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
    else
        printf("%" PRId64 "s", s);
}

/* "<= 50ms", "<= 1.5s", "> top bucket", "-": a bucket-bounded figure. */
static void print_le(json_object *v)
{
    double d;

    if (v == NULL) {
        printf("-");
        return;
    }
    if (json_object_is_type(v, json_type_string)) {
        printf("> top bucket");
        return;
    }
    d = json_object_get_double(v);
    if (d < 1.0)
        printf("<= %gms", d * 1000.0);
    else
        printf("<= %gs", d);
}

/* " p50 <= 50ms -> <= 80ms": quantile `q` ("p50") before and during. */
static void print_le_change(const char *q, json_object *before, json_object *during)
{
    char key[16];

    snprintf(key, sizeof(key), "%s_le", q);
    printf(" %s ", q);
    print_le(get(before, key));
    printf(" -> ");
    print_le(get(during, key));
}

/* A window's engine latency (trace_control's engine_metrics): each
 * metric's p50 and p99 before the window and during it, bucket-bounded. */
static void print_latency(json_object *lat)
{
    static const char *const keys[] = { "ttft", "itl" };

    if (lat == NULL)
        return;
    printf("\n    latency (bucket-bounded, before -> during, %" PRIu64 " scrapes%s):",
           u64(lat, "scrapes"), u64(lat, "restarts") > 0 ? ", engine restarted" : "");
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_object *m = get(lat, keys[i]), *b = get(m, "before"), *d = get(m, "during");

        if (m == NULL)
            continue;
        printf("%s %s", i ? ";" : "", keys[i]);
        print_le_change("p50", b, d);
        printf(",");
        print_le_change("p99", b, d);
        printf(" (%" PRIu64 " -> %" PRIu64 " samples)", u64(b, "samples"), u64(d, "samples"));
    }
}

/* An open window's other three questions, one line each (the arrival is
 * said above): did the engine say it dropped spans, what did the whole
 * collector lose meanwhile, and how did the engine's latency move. Each
 * says so when it cannot be seen. */
static void print_window_sides(json_object *t, json_object *w)
{
    if (get(w, "engine_log") == NULL)
        printf("\n    the engine's own drops: not watched (no engine_log): complete at the "
               "collector at best");
    else if (u64(w, "engine_dropped") == 0)
        printf("\n    the engine's own drops: none in its log (engine_log %s)",
               str(w, "engine_log"));
    else
        printf("\n    the engine's own drops: it said %" PRIu64 " time%s in its log that it "
               "dropped spans (%" PRIu64 " trace ops counted; engine_log %s): NOT complete",
               u64(w, "engine_dropped"), u64(w, "engine_dropped") == 1 ? "" : "s",
               u64(w, "engine_dropped_ops"), str(w, "engine_log"));
    printf("\n    the collector: %" PRIu64 " of the window's spans lost, %" PRIu64
           " collector-wide since it opened", u64(w, "lost"), u64(w, "lost_collector"));
    if (get(w, "latency") != NULL)
        print_latency(get(w, "latency"));
    else if (get(t, "engine_metrics") == NULL)
        printf("\n    latency: not watched (no engine_metrics)");
}

static void print_windows(json_object *ext)
{
    json_object *targets = get(get(ext, "status"), "targets");
    size_t n = targets != NULL ? json_object_array_length(targets) : 0;

    if (targets == NULL)
        return;
    printf("%s: %zu target%s\n", str(ext, "id"), n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        json_object *t = json_object_array_get_idx(targets, i), *w = get(t, "window");
        json_object *last = get(t, "last_window"), *lv = get(t, "level");

        printf("  %s: ", str(t, "target"));
        if (lv != NULL)
            printf("level %" PRId64 " (set %s), ", json_object_get_int64(lv),
                   str(t, "level_set"));
        else
            printf("level not known, ");
        printf("%s", str(t, "state"));
        if (w != NULL) {
            printf("\n    window %s at level %" PRId64 ", ", str(w, "id"), (int64_t)u64(w, "level"));
            if (strcmp(str(t, "state"), "open") == 0) {
                print_left((int64_t)u64(w, "left_ms"));
                printf(" left (until %s)", str(w, "planned_end"));
            } else {
                printf("ended, in its grace period");
            }
            printf(": %" PRIu64 " spans accepted, %" PRIu64 " exported, %" PRIu64 " lost, %"
                   PRIu64 " queued", u64(w, "accepted"), u64(w, "exported"), u64(w, "lost"),
                   u64(w, "queued"));
            if (get(w, "accepted_from_target") != NULL)
                printf("; from the target %" PRIu64 " accepted, %" PRIu64 " refused",
                       u64(w, "accepted_from_target"), u64(w, "refused_from_target"));
            /* whether the raised level shows at all, said within the window */
            if (strcmp(str(w, "arrival"), "none") == 0) {
                json_object *em = get(t, "engine_metrics");
                double running = json_object_get_double(get(em, "running_reqs"));

                printf("\n    no spans from %s since the level was raised ", str(t, "target"));
                print_left((int64_t)u64(w, "since_open_ms") / 1000 * 1000);  /* whole s ago */
                if (running > 0)    /* the engine is busy: its requests make no spans */
                    printf(" ago, while it runs %.0f requests (%.0f queued): the level did not "
                           "take, or check the engine's exporter", running,
                           json_object_get_double(get(em, "queued_reqs")));
                else
                    printf(" ago: check the engine's exporter");
            } else if (strcmp(str(w, "arrival"), "arriving") == 0) {
                printf("\n    spans from %s arriving", str(t, "target"));
            }
        }
        if (w != NULL)
            print_window_sides(t, w);
        if (u64(t, "out_of_band_spans") > 0)
            printf("\n    %" PRIu64 " spans out of band (level raised by someone else), %s",
                   u64(t, "out_of_band_spans"), strcmp(str(t, "out_of_band"), "drop") == 0
                   ? "dropped in the VM" : "exported (out_of_band: count)");
        if (last != NULL)
            printf("\n    last window %s (%s, closed %s): %" PRIu64 " accepted, %" PRIu64
                   " exported, %" PRIu64 " lost, %" PRIu64 " queued: capture %s",
                   str(last, "id"), str(last, "cause"), str(last, "closed"), u64(last, "accepted"),
                   u64(last, "exported"), u64(last, "lost"), u64(last, "queued"),
                   get(last, "capture") != NULL ? str(last, "capture")
                   : json_object_get_boolean(get(last, "complete")) ? "complete" : "NOT complete");
        if (last != NULL)
            print_latency(get(last, "latency"));
        printf("\n");
    }
}

static void print_screen(json_object *doc, const char *endpoint, bool all)
{
    json_object *spans = get(doc, "spans"), *reload = get(doc, "reload"), *a;
    json_object *un = get(doc, "unexported_requests");
    size_t n;

    printf("spanfence %s at %s, config %s (%s)\n", str(doc, "version"), endpoint,
           str(doc, "config"), str(doc, "time"));
    if (str(doc, "policy")[0] != '\0')
        printf("policy: %s (the running config holds it)\n", str(doc, "policy"));
    if (u64(reload, "count") == 0)
        printf("reload: none since start\n");
    else
        printf("reload: %s at %s (%" PRIu64 " since start): %s\n",
               json_object_get_boolean(get(reload, "ok")) ? "ok" : "FAILED", str(reload, "time"),
               u64(reload, "count"), str(reload, "message"));
    /* each signal's accounting: spans always, log records and metric
     * points when a pipeline carries them */
    for (int k = 0; k < SF_SIGNAL_COUNT; k++) {
        json_object *it = k == 0 ? spans : get(doc, sf_signal_items((sf_signal)k));

        if (it == NULL && k > 0)
            continue;
        printf("%s since start: %" PRIu64 " accepted, %" PRIu64 " exported, %" PRIu64
               " queued, %" PRIu64 " lost", sf_signal_noun((sf_signal)k, true),
               u64(it, "accepted"), u64(it, "exported"),
               u64(it, "queued"), u64(it, "lost"));
        print_reasons("; refused: ", get(it, "refused"), all);
        print_reasons("; dropped: ", get(it, "dropped"), all);
        print_reasons("; send failed: ", get(it, "send_failed"), all);
        printf("\n");
    }
    if (get(doc, "recent") != NULL)
        printf("spans in the last %" PRIu64 " s: %" PRIu64 " accepted, %" PRIu64 " exported, %"
               PRIu64 " lost\n", u64(get(doc, "recent"), "seconds"),
               u64(get(doc, "recent"), "accepted"), u64(get(doc, "recent"), "exported"),
               u64(get(doc, "recent"), "lost"));
    if (all || u64(un, "metrics") + u64(un, "logs") > 0)
        printf("refused (no pipeline of the signal lists the receiver): %" PRIu64
               " metrics requests, %" PRIu64 " logs requests\n", u64(un, "metrics"),
               u64(un, "logs"));
    a = get(doc, "pipelines");
    n = a != NULL ? json_object_array_length(a) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(a, i);

        printf("pipeline %s: ", str(p, "id"));
        print_ids(get(p, "receivers"));
        printf(" -> ");
        print_ids(get(p, "processors"));
        printf(" -> ");
        print_ids(get(p, "exporters"));
        printf("\n");
    }
    a = get(doc, "receivers");
    n = a != NULL ? json_object_array_length(a) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(a, i), *refused = get(r, "refused");
        bool any = any_nonzero(refused), transport = str(r, "transport")[0] != '\0';
        json_object *next = i + 1 < n ? json_object_array_get_idx(a, i + 1) : NULL;

        /* every receiver has a spans row; an empty one of a receiver whose
         * other rows say what it takes (journald: logs, prometheus:
         * metrics) is noise */
        if (!all && get(r, "signal") == NULL && u64(r, "accepted") == 0 && !any &&
            next != NULL && get(next, "signal") != NULL && strcmp(str(next, "id"), str(r, "id")) == 0)
            continue;
        printf("  receiver %s (%s%s%s): %" PRIu64 " accepted", str(r, "id"),
               str(r, "transport"), transport && get(r, "signal") != NULL ? ", " : "",
               str(r, "signal"), u64(r, "accepted"));
        print_reasons(", refused: ", refused, all);
        printf("\n");
    }
    a = get(doc, "processors");
    n = a != NULL ? json_object_array_length(a) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(a, i), *d = get(p, "dropped");
        bool any = any_nonzero(d);

        if (!any && !all && get(p, "allowlist") == NULL)
            continue;
        printf("  processor %s%s%s%s:", str(p, "id"), get(p, "signal") != NULL ? " (" : "",
               str(p, "signal"), get(p, "signal") != NULL ? ")" : "");
        if (get(p, "allowlist") != NULL)
            printf(" allowlist sha256 %.16s... (%" PRIu64 " rule%s%s)",
                   str(get(p, "allowlist"), "sha256"), u64(get(p, "allowlist"), "rules"),
                   u64(get(p, "allowlist"), "rules") == 1 ? "" : "s",
                   json_object_get_boolean(get(get(p, "allowlist"), "declared_fields"))
                   ? ", declared fields" : "");
        print_reasons(any || all ? ", dropped: " : "", d, all);
        printf("\n");
    }
    a = get(doc, "exporters");
    n = a != NULL ? json_object_array_length(a) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(a, i);

        printf("  exporter %s%s%s%s", str(e, "id"), get(e, "signal") != NULL ? " (" : "",
               str(e, "signal"), get(e, "signal") != NULL ? ")" : "");
        if (str(e, "endpoint")[0] != '\0')
            printf(" -> %s", str(e, "endpoint"));
        printf(": %" PRIu64 " sent, %" PRIu64 " queued", u64(e, "sent"), u64(e, "queued_spans"));
        if (u64(e, "queue_capacity") > 0)
            printf(" (queue %" PRIu64 "/%" PRIu64 ")", u64(e, "queue_size"),
                   u64(e, "queue_capacity"));
        if (all || u64(e, "enqueue_failed") > 0)
            printf(", %" PRIu64 " refused by a full queue", u64(e, "enqueue_failed"));
        if (all || u64(e, "retries") > 0)
            printf(", %" PRIu64 " retries", u64(e, "retries"));
        print_reasons(", send failed: ", get(e, "send_failed"), all);
        printf("\n");
    }
    a = get(doc, "extensions");
    n = a != NULL ? json_object_array_length(a) : 0;
    for (size_t i = 0; i < n; i++)
        print_windows(json_object_array_get_idx(a, i));
}

/* ---- the verbs ------------------------------------------------------------ */

typedef struct st_args {
    const char *config, *metrics;
    bool json, all;
    long pid;
    int64_t wait_ms;
} st_args;

static int parse(int argc, char **argv, st_args *a, bool reload)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "metrics", required_argument, NULL, 'm' },
        { "json", no_argument, NULL, 'j' },
        { "all", no_argument, NULL, 'a' },
        { "pid", required_argument, NULL, 'p' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int opt;
    char *end;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":c:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'c': a->config = optarg; break;
        case 'm': a->metrics = optarg; break;
        case 'j': if (reload) goto unknown; a->json = true; break;
        case 'a': if (reload) goto unknown; a->all = true; break;
        case 'p':
            if (!reload)
                goto unknown;
            a->pid = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || a->pid <= 1) {
                fprintf(stderr, "spanfence: invalid pid '%s'\n", optarg);
                return ST_USAGE;
            }
            break;
        case 'h':
            return -2;
        case ':':
            fprintf(stderr, "spanfence: option '%s' needs a value\n", argv[optind - 1]);
            return ST_USAGE;
        default:
        unknown:
            fprintf(stderr, "spanfence: unknown option '%s'\n", argv[optind - 1]);
            return ST_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "spanfence: unexpected argument '%s'\n", argv[optind]);
        return ST_USAGE;
    }
    if (reload && a->pid == 0) {
        fputs("spanfence: reload needs --pid PID (systemd: --pid $MAINPID)\n", stderr);
        return ST_USAGE;
    }
    return -1;
}

static bool endpoint_of(const st_args *a, const char *default_config, char *buf, size_t size)
{
    if (a->metrics != NULL) {
        snprintf(buf, size, "%s", a->metrics);
        return true;
    }
    return endpoint_of_file(a->config ? a->config : default_config, buf, size);
}

static void usage(bool reload, const char *default_config)
{
    if (reload)
        printf("usage: spanfence reload --pid PID [--config FILE | --metrics HOST:PORT]\n"
               "  send the collector SIGHUP and wait for the reload's outcome (GET /status on\n"
               "  its metrics endpoint, default config %s); for systemd's ExecReload\n"
               "exit status: 0 the new config runs, 1 it was refused or could not start (the\n"
               "previous one runs), or the outcome could not be read; 2 usage error\n",
               default_config);
    else
        printf("usage: spanfence status [--config FILE | --metrics HOST:PORT] [--json] [--all]\n"
               "  what the running collector exports and lost (by reason), queue fill, every\n"
               "  trace-level window with its own counts and time left, the last reload's\n"
               "  result; only non-zero counts unless --all. Read from GET /status on its\n"
               "  metrics endpoint (service.telemetry.metrics of FILE, default %s):\n"
               "  no secret of the config is needed\n"
               "  --json   the status document as the collector serves it (stable keys)\n"
               "exit status: 0 shown, 1 the collector could not be asked, 2 usage error\n",
               default_config);
}

/* The verb's arguments and the endpoint it asks; -1 to go on, else the
 * exit status (--help, a usage error, no endpoint). */
static int begin(int argc, char **argv, bool reload, const char *default_config, st_args *a,
                 char *endpoint, size_t size)
{
    int rc = parse(argc, argv, a, reload);

    if (rc == -2) {
        usage(reload, default_config);
        return ST_OK;
    }
    if (rc >= 0)
        return rc;
    return endpoint_of(a, default_config, endpoint, size) ? -1 : ST_FAILED;
}

int sf_cli_status(int argc, char **argv, const char *default_config)
{
    st_args a = { 0 };
    char endpoint[512];
    json_object *doc;
    int rc = begin(argc, argv, false, default_config, &a, endpoint, sizeof(endpoint));

    if (rc >= 0)
        return rc;
    doc = fetch_status(endpoint, false);
    if (doc == NULL)
        return ST_FAILED;
    if (a.json)
        printf("%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
    else
        print_screen(doc, endpoint, a.all);
    json_object_put(doc);
    return ST_OK;
}

/* The reload count of the running collector, or -1 (reason on stderr). */
static int64_t reload_count(const char *endpoint, bool quiet, json_object **doc)
{
    *doc = fetch_status(endpoint, quiet);
    return *doc != NULL ? (int64_t)u64(get(*doc, "reload"), "count") : -1;
}

int sf_cli_reload(int argc, char **argv, const char *default_config)
{
    st_args a = { 0 };
    char endpoint[512];
    json_object *doc = NULL, *r;
    int64_t before, now;
    int rc = begin(argc, argv, true, default_config, &a, endpoint, sizeof(endpoint));
    struct timespec pause = { .tv_sec = 0, .tv_nsec = 100 * 1000 * 1000 };

    if (rc >= 0)
        return rc;
    before = reload_count(endpoint, false, &doc);
    json_object_put(doc);
    if (before < 0)
        return ST_FAILED;
    if (kill((pid_t)a.pid, SIGHUP) != 0) {
        fprintf(stderr, "spanfence: cannot signal pid %ld: %s\n", a.pid, strerror(errno));
        return ST_FAILED;
    }
    /* A reload stops the receivers and starts the new ones: the endpoint
     * may not answer for a moment; the outcome is the next count. */
    for (int tries = 0;; tries++) {
        if (tries == RELOAD_WAIT_MAX) {
            fprintf(stderr, "spanfence: no outcome of the reload from %s within %d s\n",
                    endpoint, RELOAD_WAIT_MAX / 10);
            return ST_FAILED;
        }
        nanosleep(&pause, NULL);
        if (kill((pid_t)a.pid, 0) != 0 && errno == ESRCH) {
            fprintf(stderr, "spanfence: the collector (pid %ld) exited during the reload\n",
                    a.pid);
            return ST_FAILED;
        }
        now = reload_count(endpoint, true, &doc);    /* quiet while it restarts */
        if (now > before)
            break;
        json_object_put(doc);
        doc = NULL;
    }
    r = get(doc, "reload");
    rc = json_object_get_boolean(get(r, "ok")) ? ST_OK : ST_FAILED;
    fprintf(rc == ST_OK ? stdout : stderr, "%s%s\n", rc == ST_OK ? "" : "spanfence: reload "
            "failed: ", str(r, "message"));
    json_object_put(doc);
    return rc;
}

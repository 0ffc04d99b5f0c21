/* pipeline/cli/main.c: the spanfence command: runs the collector, or one of
 * its subcommands (validate; those component types bring, such as
 * trace_control's trace-level, found through the registry). Signals are blocked before any thread exists
 * (gRPC starts several) and taken in one place, the main thread's sigwait:
 *   SIGINT, SIGTERM  stop: receivers finish their calls, exporters drain
 *   SIGHUP           reload the config (reload() below)
 *   SIGUSR1          log the collector-wide counts
 *   SIGUSR2          logged and ignored
 * SIGPIPE and SIGXFSZ are ignored (a closed peer, a file over RLIMIT_FSIZE:
 * the write fails and is counted, the process does not die). No signal
 * whose default action ends the process is left to it except SIGQUIT
 * (core dump on request) and the ones that cannot be caught. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <systemd/sd-daemon.h>

#include "internal/sf_core.h"
#include "sf_cli.h"
#include "sf_config.h"
#include "sf_log.h"
#include "sf_net.h"
#include "sf_overview.h"
#include "policy/sf_policy.h"
#include "sf_sender.h"
#include "sf_service.h"
#include "sf_time.h"

#ifndef SF_VERSION
#define SF_VERSION "0.0.0"
#endif
#ifndef SF_DEFAULT_CONFIG
#define SF_DEFAULT_CONFIG "/etc/spanfence/config.yaml"
#endif
#ifndef SF_BUILD_TYPE
#define SF_BUILD_TYPE "unknown"
#endif
#if __has_include("sf_build_info.h")
#include "sf_build_info.h"          /* SF_COMMIT, written at each build */
#endif
#ifndef SF_COMMIT
#define SF_COMMIT "unknown"
#endif

#define SF_MAX_SOURCES 64

enum { EXIT_OK = 0, EXIT_INVALID = 1, EXIT_USAGE = 2 };

/* What `run` has seen across reloads (the last reload's result, the
 * config's sources, the last minute): the status document shows it, and
 * it outlives every service a reload replaces. */
static sf_history history = SF_HISTORY_INIT;

/* The command's own verbs; component types bring theirs
 * (sf_component_type.verbs). One table: spanfence --help lists both, and
 * a verb is looked up in the command's first. */
static int verb_validate(int argc, char **argv);
static int verb_print_config(int argc, char **argv);
static int verb_status(int argc, char **argv);
static int verb_reload(int argc, char **argv);
static int verb_components(int argc, char **argv);

static const sf_cli_verb command_verbs[] = {
    { "validate", "--config URI... [--set K=V]... [--policy FILE]",
      "check a config and exit", verb_validate },
    { "print-config", "--config URI... [--set K=V]...",
      "the effective config, secrets redacted", verb_print_config },
    { "status", "[--config FILE | --metrics HOST:PORT] [--json] [--all]",
      "the running collector at a glance", verb_status },
    { "reload", "--pid PID [--config FILE | --metrics HOST:PORT]",
      "SIGHUP and wait for the outcome", verb_reload },
    { "components", "", "list the component types (YAML)", verb_components },
    { NULL, NULL, NULL, NULL },
};

static void usage_verbs(FILE *f, const sf_cli_verb *v)
{
    for (; v != NULL && v->name != NULL; v++) {
        int w = 31 - (int)strlen(v->name);     /* the help starts in column 50 */

        if ((int)strlen(v->usage) < w - 1)
            fprintf(f, "       spanfence %s %-*s%s\n", v->name, w, v->usage, v->help);
        else
            fprintf(f, "       spanfence %s %s\n%49s%s\n", v->name, v->usage, "", v->help);
    }
}

static void usage(FILE *f)
{
    fputs("usage: spanfence [--config URI]... [--set K=V]... [--policy FILE]   run the collector\n",
          f);
    usage_verbs(f, command_verbs);
    for (const sf_component_type *const *t = sf_registry; *t != NULL; t++)
        usage_verbs(f, (*t)->verbs);
    fputs("       spanfence --help-config                   list every component's keys\n", f);
    fputs("       spanfence --help | --version\n"
          "\n"
          "options:\n"
          "  -c, --config URI    collector config (OpenTelemetry Collector layout): a file\n"
          "                      path, file:PATH, env:VAR or yaml:TEXT; repeatable, merged\n"
          "                      in order as upstream (mappings key by key, later wins,\n"
          "                      lists replaced); default: " SF_DEFAULT_CONFIG "\n"
          "      --set K=V       one setting over the configs, as upstream: dots in K\n"
          "                      separate keys (--set processors.batch.timeout=2s)\n"
          "      --feature-gates G  accepted for upstream's command lines; no effect\n"
          "  -p, --policy FILE   policy the config must hold (configs/POLICY.md);\n"
          "                      the collector refuses to start when it does not\n"
          "  -h, --help          this help\n"
          "  -V, --version       print the version, commit and build type\n"
          "\n"
          "exit status: 0 ok (validate: valid, and holds the policy); 1 the config is\n"
          "not valid (every problem on stderr as FILE:LINE:COL: key: message, every\n"
          "policy violation as FILE:LINE:COL: policy: subject: message), could not\n"
          "start, or work was lost at shutdown (accepted spans dropped when the drain\n"
          "time ran out, audit records not written); 2 usage errors.\n",
          f);
}

typedef struct cli {
    const char *sources[SF_MAX_SOURCES];    /* --config values, then --set as yaml: */
    size_t n_sources, n_sets;
    char *sets[SF_MAX_SOURCES];             /* the yaml: texts --set made (freed at exit) */
    char name[1024];                        /* the sources, for messages */
    const char *policy;
    const char *feature_gates;              /* --feature-gates, warned about once loaded */
    bool validate;
    bool print_config;                      /* validate, then print the effective config */
} cli;

static void cli_release(cli *c)
{
    for (size_t i = 0; i < c->n_sets; i++)
        sf_free(c->sets[i]);
}

/* --set K=V as upstream: "yaml:" + K with '.' as "::" + ": " + V. */
static int add_set(cli *c, const char *kv)
{
    const char *eq = strchr(kv, '=');
    size_t kl;
    char *y, *w;

    if (eq == NULL || eq == kv) {
        fprintf(stderr, "spanfence: --set '%s': expected KEY=VALUE "
                "(--set processors.batch.timeout=2s)\n", kv);
        return EXIT_USAGE;
    }
    if (c->n_sets == SF_MAX_SOURCES) {
        fprintf(stderr, "spanfence: more than %d --set options\n", SF_MAX_SOURCES);
        return EXIT_USAGE;
    }
    kl = (size_t)(eq - kv);
    y = sf_malloc(5 + 2 * kl + 2 + strlen(eq + 1) + 1);
    if (y == NULL) {
        fputs("spanfence: out of memory\n", stderr);
        return EXIT_USAGE;
    }
    w = y + sprintf(y, "yaml:");
    for (size_t i = 0; i < kl; i++) {
        if (kv[i] == '.') {
            *w++ = ':';
            *w++ = ':';
        } else {
            *w++ = kv[i];
        }
    }
    sprintf(w, ": %s", eq + 1);
    c->sets[c->n_sets++] = y;
    return -1;
}

static int add_config(cli *c, const char *uri)
{
    char scheme[32];

    if (sf_config_uri_unsupported(uri, scheme, sizeof(scheme)) != NULL) {
        fprintf(stderr, "spanfence: --config '%s': scheme '%s' is not supported by spanfence "
                "(a file path, file:PATH, env:VAR or yaml:TEXT)\n", uri, scheme);
        return EXIT_USAGE;
    }
    if (c->n_sources == SF_MAX_SOURCES) {
        fprintf(stderr, "spanfence: more than %d --config options\n", SF_MAX_SOURCES);
        return EXIT_USAGE;
    }
    c->sources[c->n_sources++] = uri;
    return -1;
}

/* `spanfence components`: the types of this build, in the layout of
 * upstream's `otelcol components` (YAML; stability per signal). */
static int print_components(void)
{
    static const struct { sf_kind kind; const char *key; } kinds[] = {
        { SF_KIND_RECEIVER, "receivers" }, { SF_KIND_PROCESSOR, "processors" },
        { SF_KIND_EXPORTER, "exporters" }, { SF_KIND_EXTENSION, "extensions" },
    };

    printf("buildinfo:\n"
           "    command: spanfence\n"
           "    description: OpenTelemetry collector for confidential VMs: traces, logs and metrics "
           "through an allowlist\n"
           "    version: %s\n", SF_VERSION);
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        printf("%s:\n", kinds[k].key);
        for (const sf_component_type *const *t = sf_registry; *t != NULL; t++) {
            if ((*t)->kind != kinds[k].kind)
                continue;
            printf("    - name: %s\n", (*t)->name);
            if ((*t)->alias != NULL)
                printf("      alias: %s\n", (*t)->alias);
            printf("      description: \"%s\"\n", (*t)->description ? (*t)->description : "");
            if (kinds[k].kind == SF_KIND_EXTENSION) {
                printf("      stability:\n        extension: Beta\n");
            } else {
                /* Undefined: the type does not handle the signal (a
                 * pipeline of it listing the type is refused); logs and
                 * metrics, newer here than traces, are Alpha */
                unsigned sig = (*t)->signals ? (*t)->signals : SF_SIGNALS_TRACES;

                printf("      stability:\n        logs: %s\n        metrics: %s\n"
                       "        traces: %s\n",
                       sig & SF_SIGNALS_LOGS ? "Alpha" : "Undefined",
                       sig & SF_SIGNALS_METRICS ? "Alpha" : "Undefined",
                       sig & SF_SIGNALS_TRACES ? "Beta" : "Undefined");
            }
        }
    }
    printf("connectors: []\n"
           "providers:\n"
           "    - scheme: env\n"
           "    - scheme: file\n"
           "    - scheme: yaml\n");
    return EXIT_OK;
}

/* Parse argv; returns -1 to continue, else an exit code. */
static int parse_args(int argc, char **argv, cli *c)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "set", required_argument, NULL, 's' },
        { "feature-gates", required_argument, NULL, 'F' },
        { "policy", required_argument, NULL, 'p' },
        { "help", no_argument, NULL, 'h' },
        { "help-config", no_argument, NULL, 'H' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    int opt, rc;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":c:p:hV", opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            if ((rc = add_config(c, optarg)) >= 0)
                return rc;
            break;
        case 's':
            if ((rc = add_set(c, optarg)) >= 0)
                return rc;
            break;
        case 'F':
            c->feature_gates = optarg;
            break;
        case 'p':
            c->policy = optarg;
            break;
        case 'h':
            usage(stdout);
            return EXIT_OK;
        case 'H':
            sf_config_print_help();
            return EXIT_OK;
        case 'V':
            printf("spanfence version %s\n"
                   "commit: %s\n"
                   "build: %s, %s\n", SF_VERSION, SF_COMMIT, SF_BUILD_TYPE,
#ifdef __VERSION__
                   "cc " __VERSION__
#else
                   "cc unknown"
#endif
                   );
            return EXIT_OK;
        case ':':
            fprintf(stderr, "spanfence: option '%s' needs a value\n", argv[optind - 1]);
            usage(stderr);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "spanfence: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "spanfence: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (c->n_sources == 0) {
        if (c->validate) {
            fprintf(stderr, "spanfence: %s needs --config URI\n",
                    c->print_config ? "print-config" : "validate");
            return EXIT_USAGE;
        }
        c->sources[c->n_sources++] = SF_DEFAULT_CONFIG;
    }
    /* the --set values come after every --config, as upstream */
    for (size_t i = 0; i < c->n_sets; i++) {
        if (c->n_sources == SF_MAX_SOURCES) {
            fprintf(stderr, "spanfence: more than %d --config and --set options\n",
                    SF_MAX_SOURCES);
            return EXIT_USAGE;
        }
        c->sources[c->n_sources++] = c->sets[i];
    }
    c->name[0] = '\0';
    for (size_t i = 0; i < c->n_sources; i++) {
        size_t used = strlen(c->name);
        const char *u = c->sources[i];

        if (strncmp(u, "file:", 5) == 0)
            u += 5;
        snprintf(c->name + used, sizeof(c->name) - used, "%s%s", i ? ", " : "", u);
    }
    return -1;
}

/* service.telemetry.logs: encoding and output_paths. False (logged) when
 * an output cannot be opened: the log stays where it was. */
static bool configure_log(const sf_config *cfg)
{
    if (sf_log_configure(cfg->log_json, (const char *const *)cfg->log_outputs.v,
                         cfg->log_outputs.n) == 0)
        return true;
    sf_error("service.telemetry.logs.output_paths: cannot open: %s", strerror(errno));
    return false;
}

/* Read the policy file; NULL (its problems printed) when it is not valid. */
static sf_policy *load_policy(const char *path)
{
    sf_diag *diag = sf_diag_create(path);
    sf_policy *policy = NULL;

    if (diag == NULL) {
        fputs("spanfence: out of memory\n", stderr);
        return NULL;
    }
    sf_status st = sf_policy_load(path, diag, &policy);

    sf_diag_print(diag);
    if (st != SF_OK)
        fprintf(stderr, "spanfence: %s: %zu error%s, policy not valid\n", path,
                sf_diag_errors(diag), sf_diag_errors(diag) == 1 ? "" : "s");
    sf_diag_destroy(diag);
    return policy;
}

/* Load the sources; when they hold a periodic reader, load them again with
 * the layer that runs it (telemetry_push.c) merged last, so its components
 * are checked, printed and built as any other. `*diag` is replaced by the
 * second load's (which says all the first one did). */
static sf_status load_config(const cli *c, sf_diag **diag, sf_config **cfg)
{
    sf_diag *again;
    char err[512], *layer;
    sf_status st = sf_config_load_uris(c->sources, c->n_sources, *diag, cfg);

    if (st != SF_OK || (*cfg)->n_push_readers == 0)
        return st;
    layer = sf_cli_push_layer(*cfg, err, sizeof(err));
    if (layer == NULL) {
        sf_diag_error(*diag, (*cfg)->push_readers[0].node, NULL, "%s", err);
        sf_config_destroy(*cfg);
        *cfg = NULL;
        return SF_CONFIG;
    }
    sf_config_destroy(*cfg);
    *cfg = NULL;
    again = sf_diag_create(c->name);
    if (again == NULL) {
        sf_free(layer);
        return SF_ENOMEM;
    }
    sf_diag_destroy(*diag);
    *diag = again;
    st = sf_config_load_uris_extra(c->sources, c->n_sources,
                                   "service.telemetry.metrics.readers (periodic, synthesized)",
                                   layer, again, cfg);
    sf_free(layer);
    return st;
}

/* Load, validate, check the policy (when given) and build: the path the
 * daemon and `validate` share. */
static int load(const cli *c, sf_config **cfg, sf_service **svc)
{
    const char *path = c->name, *policy_path = c->policy;
    sf_diag *diag;
    sf_policy *policy = NULL;
    bool violated = false;
    int rc = EXIT_INVALID;

    *cfg = NULL;
    *svc = NULL;
    if (policy_path != NULL && (policy = load_policy(policy_path)) == NULL)
        return EXIT_INVALID;
    diag = sf_diag_create(path);
    if (diag == NULL) {
        fputs("spanfence: out of memory\n", stderr);
        sf_policy_destroy(policy);
        return EXIT_INVALID;
    }
    if (load_config(c, &diag, cfg) == SF_OK) {
        violated = policy != NULL && sf_policy_check(policy, *cfg, diag) != SF_OK;
        if (!violated && sf_service_create(*cfg, diag, svc) == SF_OK)
            rc = EXIT_OK;
    }
    /* The collector's own warnings about a config that loads are log
     * records: in its encoding and outputs (validate prints them as they
     * are, for CI). */
    if (rc == EXIT_OK && !c->validate && configure_log(*cfg) && (*cfg)->log_json) {
        for (size_t i = 0; i < sf_diag_count(diag); i++)
            sf_warn("%s", sf_diag_message(diag, i));
    } else {
        sf_diag_print(diag);
    }
    if (violated)
        fprintf(stderr, "spanfence: %s: %zu policy violation%s, configuration does not hold "
                "policy %s\n", path, sf_diag_errors(diag),
                sf_diag_errors(diag) == 1 ? "" : "s", policy_path);
    else if (rc != EXIT_OK)
        fprintf(stderr, "spanfence: %s: %zu error%s, configuration not valid\n", path,
                sf_diag_errors(diag), sf_diag_errors(diag) == 1 ? "" : "s");
    if (rc != EXIT_OK) {
        sf_service_destroy(*svc);
        sf_config_destroy(*cfg);
        *svc = NULL;
        *cfg = NULL;
    }
    sf_diag_destroy(diag);
    sf_policy_destroy(policy);
    return rc;
}

/* SIGUSR1: one line with the collector-wide counts. */
static void log_totals(const sf_service *svc)
{
    sf_totals t;
    uint64_t refused = 0, dropped = 0, failed = 0;

    sf_service_totals(svc, &t);
    for (int r = 0; r < SF_REASON_COUNT; r++) {
        refused += t.refused[r];
        dropped += t.dropped[r];
        failed += t.send_failed[r];
    }
    sf_info("received SIGUSR1: spans accepted %llu, refused %llu, dropped by processors %llu, "
            "exported %llu, send failed %llu, enqueue failed %llu",
            (unsigned long long)t.accepted, (unsigned long long)refused,
            (unsigned long long)dropped, (unsigned long long)t.exported,
            (unsigned long long)failed, (unsigned long long)t.enqueue_failed);
}

/* SIGHUP, as the upstream collector: load and validate the config file
 * again (the same path as at start, with --policy when given). Invalid:
 * log it and keep running the previous config, untouched. Valid: stop the
 * running service (receivers finish their calls and are answered), carry
 * every count over, hand trace_control's open windows and socket, and the
 * batches the network exporters have not sent (merged ones included), to
 * their successors in the new service untouched, and start it on its
 * ports (sf_service_stop_for_reload / sf_service_start_from). If it cannot
 * start (a port taken), the previous config is built and started again
 * with the same handover. False only when neither runs: the collector
 * must exit. */
/* ---- systemd (sd_notify; nothing happens without NOTIFY_SOCKET) --------------
 * READY=1 once sf_service_start returned (every receiver listens), RELOADING=1
 * with MONOTONIC_USEC (systemd 253's Type=notify-reload wants it; 252 reads
 * RELOADING=1 alone) then READY=1 around a reload, STOPPING=1 at shutdown,
 * STATUS= every STATUS_EVERY_S with the last minute's span counts and the
 * open trace-level windows, and WATCHDOG=1 from a thread of its own that
 * pings only while the collector makes progress (watchdog_main below). */
#define STATUS_EVERY_S 10
#define STATUS_SAMPLES 7            /* a minute of STATUS_EVERY_S samples, and now */

typedef struct minute {
    sf_totals s[STATUS_SAMPLES];
    int64_t at[STATUS_SAMPLES];     /* sf_now_ms() of each sample */
    size_t n, next;
} minute;

static uint64_t lost_of(const sf_totals *t)
{
    return sf_reasons_sum(t->refused) + sf_reasons_sum(t->dropped) +
           sf_reasons_sum(t->send_failed);
}

/* Keep `now` as a sample when the last one is STATUS_EVERY_S old (or there
 * is none), however often the loop turns (every second under a short
 * WatchdogSec): the samples span a minute. */
static void minute_sample(minute *m, const sf_totals *now, int64_t t)
{
    size_t last = (m->next + STATUS_SAMPLES - 1) % STATUS_SAMPLES;

    if (m->n > 0 && t - m->at[last] < STATUS_EVERY_S * 1000 - 500)
        return;
    m->s[m->next] = *now;
    m->at[m->next] = t;
    m->next = (m->next + 1) % STATUS_SAMPLES;
    if (m->n < STATUS_SAMPLES)
        m->n++;
}

/* "; windows: r1 level 3 4m05s left (120 accepted, 0 lost)": every open
 * trace-level window, from the status document's extensions; "" when none. */
static void windows_note(sf_service *svc, char *buf, size_t size)
{
    json_object *doc = sf_service_overview(svc), *exts, *v = NULL;
    size_t len = 0, n = 0;

    buf[0] = '\0';
    if (doc == NULL || !json_object_object_get_ex(doc, "extensions", &exts)) {
        json_object_put(doc);
        return;
    }
    for (size_t e = 0; e < json_object_array_length(exts); e++) {
        json_object *st, *targets;

        if (!json_object_object_get_ex(json_object_array_get_idx(exts, e), "status", &st) ||
            !json_object_object_get_ex(st, "targets", &targets) ||
            !json_object_is_type(targets, json_type_array))
            continue;
        for (size_t i = 0; i < json_object_array_length(targets) && len < size; i++) {
            json_object *t = json_object_array_get_idx(targets, i), *w;
            int64_t left;

            if (!json_object_object_get_ex(t, "window", &w) || w == NULL)
                continue;
            json_object_object_get_ex(w, "left_ms", &v);
            left = (json_object_get_int64(v) + 999) / 1000;
            len += (size_t)snprintf(buf + len, size - len, "%s%s level %" PRId64 " %" PRId64
                                    "m%02" PRId64 "s left (",
                                    n++ ? ", " : "; windows: ",
                                    json_object_get_string(json_object_object_get(t, "target")),
                                    json_object_get_int64(json_object_object_get(w, "level")),
                                    left / 60, left % 60);
            if (len < size)
                len += (size_t)snprintf(buf + len, size - len, "%" PRId64 " accepted, %" PRId64
                                        " lost)",
                                        json_object_get_int64(json_object_object_get(w, "accepted")),
                                        json_object_get_int64(json_object_object_get(w, "lost")));
        }
    }
    json_object_put(doc);
}

/* STATUS=: spans accepted, exported and lost in the last minute, and the
 * open trace-level windows. */
static void notify_status(sf_service *svc, minute *m, const char *note)
{
    sf_totals now, *old;
    char windows[512];

    int64_t t = sf_now_ms(), since;
    size_t oldest;

    sf_service_totals(svc, &now);
    minute_sample(m, &now, t);
    oldest = m->n < STATUS_SAMPLES ? 0 : m->next;
    old = &m->s[oldest];
    since = m->at[oldest];
    /* the same figures for `spanfence status` */
    sf_history_note_recent(&history, t - since, now.accepted - old->accepted,
                            now.exported - old->exported, lost_of(&now) - lost_of(old));
    windows_note(svc, windows, sizeof(windows));
    sd_notifyf(0, "STATUS=%s%slast minute: %" PRIu64 " spans accepted, %" PRIu64 " exported, %"
               PRIu64 " lost; since start: %" PRIu64 " accepted, %" PRIu64 " lost%s",
               note ? note : "", note ? "; " : "", now.accepted - old->accepted,
               now.exported - old->exported, lost_of(&now) - lost_of(old), now.accepted,
               lost_of(&now), windows);
}

/* The watchdog's thread: WATCHDOG=1 at half WatchdogSec=, but only while
 * the collector makes progress: the main loop (signals, reloads) turned
 * within WatchdogSec or is in a reload (whose every step is bounded: the
 * exporters' drain, trace_control's shutdown_timeout), and no exporter's
 * consumer is stuck in one send or
 * one backoff for WatchdogSec past its bound (sf_sender_stalled: the
 * exporter's timeout, the backoff's wait). Otherwise it says why, in the
 * log and STATUS= (once per episode), and stops pinging: systemd restarts
 * a collector whose pipeline is stuck, not only one whose process is. */
typedef struct watchdog {
    pthread_t thread;
    bool running;
    _Atomic bool stop;
    _Atomic int64_t beat;           /* sf_now_ms() of the main loop's last turn */
    _Atomic bool reloading;         /* the main loop is in a reload (bounded: its drains) */
    int64_t every_ms, slack_ms;
    pthread_mutex_t mu;             /* guards why */
    char why[300];                  /* "stuck: ..." while not pinging, else "" */
} watchdog;

/* The note STATUS= lines carry while the watchdog is not fed, or NULL. */
static const char *watchdog_note(watchdog *wd, char *buf, size_t size)
{
    if (!wd->running)
        return NULL;
    pthread_mutex_lock(&wd->mu);
    snprintf(buf, size, "%s", wd->why);
    pthread_mutex_unlock(&wd->mu);
    return buf[0] != '\0' ? buf : NULL;
}

static void *watchdog_main(void *arg)
{
    watchdog *wd = arg;
    bool stuck = false;
    char why[256];

    while (!atomic_load(&wd->stop)) {
        int64_t next = sf_now_ms() + wd->every_ms, idle;

        while (!atomic_load(&wd->stop) && sf_now_ms() < next) {
            struct timespec step = { .tv_sec = 0, .tv_nsec = 50 * 1000 * 1000 };

            nanosleep(&step, NULL);
        }
        if (atomic_load(&wd->stop))
            break;
        idle = atomic_load(&wd->reloading) ? 0 : sf_now_ms() - atomic_load(&wd->beat);
        if (idle > wd->slack_ms)
            snprintf(why, sizeof(why), "the main loop has not turned for %" PRId64 " ms", idle);
        else if (!sf_sender_stalled(wd->slack_ms, why, sizeof(why))) {
            if (stuck) {
                sf_info("watchdog: the pipeline makes progress again; pinging systemd again");
                pthread_mutex_lock(&wd->mu);
                wd->why[0] = '\0';
                pthread_mutex_unlock(&wd->mu);
            }
            stuck = false;
            sd_notify(0, "WATCHDOG=1");
            continue;
        }
        if (!stuck) {
            sf_error("watchdog: %s: not pinging systemd's watchdog (it restarts the collector "
                     "after WatchdogSec)", why);
            sd_notifyf(0, "STATUS=stuck: %s", why);
            pthread_mutex_lock(&wd->mu);
            snprintf(wd->why, sizeof(wd->why), "stuck: %s", why);
            pthread_mutex_unlock(&wd->mu);
        }
        stuck = true;
    }
    return NULL;
}

static void watchdog_start(watchdog *wd, uint64_t usec)
{
    atomic_store(&wd->beat, sf_now_ms());
    pthread_mutex_init(&wd->mu, NULL);
    wd->every_ms = (int64_t)(usec / 2000u) > 0 ? (int64_t)(usec / 2000u) : 1;
    wd->slack_ms = (int64_t)(usec / 1000u);
    wd->running = pthread_create(&wd->thread, NULL, watchdog_main, wd) == 0;
    if (!wd->running)
        sf_error("watchdog: cannot start its thread: systemd's watchdog will restart the "
                 "collector");
}

static void watchdog_stop(watchdog *wd)
{
    if (!wd->running)
        return;
    atomic_store(&wd->stop, true);
    pthread_join(wd->thread, NULL);
    wd->running = false;
}

static uint64_t monotonic_usec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static bool reload(const cli *c, sf_config **cfg, sf_service **svc)
{
    sf_config *ncfg;
    sf_service *nsvc, *again = NULL;
    sf_handover *h;
    sf_diag *diag;
    bool ok = false;

    sf_info("received SIGHUP: reloading %s", c->name);
    sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading %s",
               monotonic_usec(), c->name);
    if (load(c, &ncfg, &nsvc) != EXIT_OK) {
        sf_error("reload: %s is not valid (see above); still running the previous "
                 "configuration", c->name);
        sd_notifyf(0, "READY=1\nSTATUS=reload refused: %s is not valid; running the previous "
                   "configuration", c->name);
        sf_history_note_reload(&history, false, "the new configuration is not valid (see the log); "
                                "running the previous one");
        return true;
    }
    if (sf_service_stop_for_reload(*svc, nsvc, &h) != SF_OK) {
        sf_error("reload: out of memory; still running the previous configuration");
        sf_service_destroy(nsvc);
        sf_config_destroy(ncfg);
        sd_notify(0, "READY=1\nSTATUS=reload failed: out of memory; running the previous "
                  "configuration");
        sf_history_note_reload(&history, false, "out of memory; running the previous configuration");
        return true;
    }
    sf_log_set_level((sf_log_level)ncfg->log_level);
    (void)configure_log(ncfg);
    sf_service_set_history(nsvc, &history);
    if (sf_service_start_from(nsvc, h) == SF_OK) {
        sf_handover_release(h);
        sf_service_destroy(*svc);
        sf_config_destroy(*cfg);
        *svc = nsvc;
        *cfg = ncfg;
        sf_info("reloaded: running with %s", c->name);
        {
            char push[1024];

            sf_cli_push_describe(ncfg, push, sizeof(push));
            if (push[0] != '\0')
                sf_info("%s", push);
        }
        sd_notifyf(0, "READY=1\nSTATUS=reloaded: running with %s", c->name);
        sf_history_note_reload(&history, true, "running the new configuration");
        return true;
    }
    sf_error("reload: the new configuration could not start; starting the previous one again");
    sf_log_set_level((sf_log_level)(*cfg)->log_level);
    (void)configure_log(*cfg);
    diag = sf_diag_create(c->name);
    if (diag != NULL && sf_service_create(*cfg, diag, &again) == SF_OK &&
        (sf_service_set_history(again, &history), sf_service_start_from(again, h) == SF_OK))
        ok = true;
    if (diag != NULL) {
        sf_diag_print(diag);
        sf_diag_destroy(diag);
    }
    sf_handover_release(h);     /* before the services and configs it came from */
    sf_service_destroy(nsvc);
    sf_config_destroy(ncfg);
    if (!ok) {
        sf_error("reload: the previous configuration could not start again either");
        sf_service_destroy(again);
        return false;
    }
    sf_service_destroy(*svc);
    *svc = again;
    sd_notifyf(0, "READY=1\nSTATUS=reload refused: the new configuration could not start; "
               "running the previous one");
    sf_history_note_reload(&history, false, "the new configuration could not start (see the log); "
                            "running the previous one");
    sf_info("running with the previous configuration of %s", c->name);
    return true;
}

/* The process, before any thread exists: glibc's malloc tuned for a
 * collector, and the signals main's loop waits for blocked, so every
 * thread inherits the mask and they reach sigtimedwait(), not a library's
 * thread. */
static void process_setup(sigset_t *sigs)
{
    /* Keep glibc from hoarding what a flood freed (RSS is what the VM
     * pays for; the memory limiter trims too, see memory_limiter.c):
     * - blocks from 128 KiB up (request bodies, queued batches, arena
     *   chunks) are mmaps, returned to the system on free instead of
     *   fragmenting the heap between long-lived queued batches (measured:
     *   flood peak RSS 93-97 MiB with 1 MiB, 87-89 with 128 KiB, limit 64);
     * - the heap top is given back past 8 MiB of free space, not 64;
     * - one malloc arena, not eight per core: each arena keeps its own free
     *   memory, and the threads here mostly wait. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 8 * 1024 * 1024);
    mallopt(M_ARENA_MAX, 1);

    sigemptyset(sigs);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGHUP);
    sigaddset(sigs, SIGUSR1);
    sigaddset(sigs, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
}

/* validate and print-config: say what load() found. */
static int report_validation(const cli *c, int rc, sf_config *cfg, sf_service *svc)
{
    char push[1024];

    if (rc == EXIT_OK && c->print_config)
        rc = sf_print_config(cfg, stdout) == 0 ? EXIT_OK : EXIT_INVALID;
    else if (rc == EXIT_OK) {
        sf_cli_push_describe(cfg, push, sizeof(push));
        if (push[0] != '\0')
            printf("%s\n", push);
        if (c->policy != NULL)
            printf("%s: configuration is valid and holds policy %s\n", c->name, c->policy);
        else
            printf("%s: configuration is valid\n", c->name);
    }
    sf_service_destroy(svc);
    sf_config_destroy(cfg);
    return rc;
}

/* Runs the started service until SIGINT or SIGTERM (returned), reloading
 * on SIGHUP; -1 when a reload left nothing running. */
static int serve(cli *c, const sigset_t *sigs, sf_config **cfg, sf_service **svc)
{
    static minute status;
    static watchdog wd;
    uint64_t watchdog_usec = 0;
    long every_s = STATUS_EVERY_S;
    int sig;

    {
        sf_totals zero;     /* the last minute starts at start */

        sf_service_totals(*svc, &zero);
        minute_sample(&status, &zero, sf_now_ms());
    }
    sd_notifyf(0, "READY=1\nMAINPID=%ld\nSTATUS=running with %s", (long)getpid(), c->name);
    /* the HTTP endpoints, listening since the start, get their daemons now
     * (sf_libmicrohttpd.h: loading it was half of a start) */
    if (sf_net_http_run_deferred() != SF_OK) {
        sf_error("spanfence: could not start the HTTP endpoints; exiting");
        return -1;
    }
    /* the main loop turns at least every half watchdog interval (whole
     * seconds, at least 1), so the watchdog's thread sees it alive */
    if (sd_watchdog_enabled(0, &watchdog_usec) > 0) {
        if ((long)(watchdog_usec / 2000000u) < every_s)
            every_s = watchdog_usec / 2000000u > 0 ? (long)(watchdog_usec / 2000000u) : 1;
        watchdog_start(&wd, watchdog_usec);
    }
    for (;;) {
        struct timespec wait = { .tv_sec = every_s };
        bool ok;

        atomic_store(&wd.beat, sf_now_ms());
        sig = sigtimedwait(sigs, NULL, &wait);
        atomic_store(&wd.beat, sf_now_ms());
        if (sig < 0 && (errno == EAGAIN || errno == EINTR)) {
            char note[320];

            notify_status(*svc, &status, watchdog_note(&wd, note, sizeof(note)));
            continue;
        }
        if (sig < 0)
            sig = SIGTERM;
        if (sig == SIGINT || sig == SIGTERM)
            break;
        atomic_store(&wd.reloading, sig == SIGHUP);
        ok = sig != SIGHUP || reload(c, cfg, svc);
        atomic_store(&wd.beat, sf_now_ms());
        atomic_store(&wd.reloading, false);
        if (!ok) {
            watchdog_stop(&wd);
            return -1;
        }
        if (sig == SIGUSR1)
            log_totals(*svc);
        if (sig == SIGUSR2)
            sf_info("received SIGUSR2: ignored");
    }
    watchdog_stop(&wd);     /* systemd does not watch a stopping service */
    return sig;
}

/* Stops the service after `sig` and says what was lost: items (spans, log
 * records, metric points) the receivers acknowledged but the exporters
 * could not send before their drain time ran out are lost work too, each
 * signal said on its own. */
static int stop(sf_service *svc, sf_config *cfg, int sig)
{
    sf_totals before[SF_SIGNAL_COUNT], after[SF_SIGNAL_COUNT];
    char what[512];
    size_t lost;

    sf_info("received %s: stopping receivers, draining exporters",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    sd_notify(0, "STOPPING=1\nSTATUS=stopping: draining the exporters");
    for (int s = 0; s < SF_SIGNAL_COUNT; s++)
        sf_service_totals_signal(svc, (sf_signal)s, &before[s]);
    sf_service_shutdown(svc);
    for (int s = 0; s < SF_SIGNAL_COUNT; s++)
        sf_service_totals_signal(svc, (sf_signal)s, &after[s]);
    lost = sf_service_lost(svc, what, sizeof(what));
    sf_service_destroy(svc);
    sf_config_destroy(cfg);
    for (int s = 0; s < SF_SIGNAL_COUNT; s++) {
        uint64_t shut = after[s].send_failed[SF_REASON_SHUTDOWN] -
                        before[s].send_failed[SF_REASON_SHUTDOWN];

        if (shut > 0) {
            sf_error("stopped, but %" PRIu64 " accepted %s could not be exported before the "
                     "drain time ran out (dropped at shutdown)", shut,
                     sf_signal_noun((sf_signal)s, shut != 1));
            lost += (size_t)shut;
        }
    }
    if (lost > 0) {
        if (what[0] != '\0')
            sf_error("stopped, but %s", what);
        return EXIT_INVALID;
    }
    sf_info("stopped");
    return EXIT_OK;
}

static int run(cli *cp, int argc, char **argv)
{
    cli c;
    sigset_t sigs;
    sf_config *cfg;
    sf_service *svc;
    int rc, sig;

    rc = parse_args(argc, argv, cp);
    if (rc >= 0)
        return rc;
    c = *cp;
    process_setup(&sigs);
    rc = load(&c, &cfg, &svc);
    if (c.feature_gates != NULL && (rc != EXIT_OK || c.validate))
        fprintf(stderr, "spanfence: warning: --feature-gates '%s' has no effect: spanfence "
                "has no feature gates\n", c.feature_gates);
    else if (c.feature_gates != NULL)
        sf_warn("--feature-gates '%s' has no effect: spanfence has no feature gates",
                c.feature_gates);
    if (rc != EXIT_OK || c.validate)
        return report_validation(&c, rc, cfg, svc);

    sf_log_set_level((sf_log_level)cfg->log_level);
    if (!configure_log(cfg)) {
        sf_service_destroy(svc);
        sf_config_destroy(cfg);
        return EXIT_INVALID;
    }
    sf_service_set_history(svc, &history);
    sf_net_http_defer();    /* until READY: see serve() */
    if (sf_service_start(svc) != SF_OK) {
        sf_error("spanfence: could not start; exiting");
        sf_service_destroy(svc);
        sf_config_destroy(cfg);
        return EXIT_INVALID;
    }
    sf_history_note_config(&history, c.name, c.policy);
    sf_info("spanfence %s running with %s", SF_VERSION, c.name);
    {
        char push[1024];

        sf_cli_push_describe(cfg, push, sizeof(push));
        if (push[0] != '\0')
            sf_info("%s", push);
    }
    sig = serve(&c, &sigs, &cfg, &svc);
    if (sig < 0) {
        sf_service_destroy(svc);
        sf_config_destroy(cfg);
        return EXIT_INVALID;
    }
    return stop(svc, cfg, sig);
}

/* run, validate and print-config: the collector's own command line. */
static int collector(int argc, char **argv, bool validate, bool print_config)
{
    static cli c;           /* static: the --set texts it owns, freed below */
    int rc;

    c.validate = validate;
    c.print_config = print_config;
    rc = run(&c, argc, argv);
    cli_release(&c);
    return rc;
}

static int verb_validate(int argc, char **argv)
{
    return collector(argc, argv, true, false);
}

static int verb_print_config(int argc, char **argv)
{
    return collector(argc, argv, true, true);
}

static int verb_status(int argc, char **argv)
{
    return sf_cli_status(argc, argv, SF_DEFAULT_CONFIG);
}

static int verb_reload(int argc, char **argv)
{
    return sf_cli_reload(argc, argv, SF_DEFAULT_CONFIG);
}

static int verb_components(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "spanfence: components takes no argument (got '%s')\n", argv[1]);
        return EXIT_USAGE;
    }
    return print_components();
}

int main(int argc, char **argv)
{
    const sf_cli_verb *verb = NULL;

    for (const sf_cli_verb *v = command_verbs; argc > 1 && v->name != NULL; v++)
        if (strcmp(argv[1], v->name) == 0)
            verb = v;
    if (verb == NULL && argc > 1)
        verb = sf_registry_find_verb(argv[1]);
    if (verb != NULL)
        return verb->run(argc - 1, argv + 1);
    return collector(argc, argv, false, false);
}

/* pipeline/cli/main.c: the spanfence command: runs the collector, or one of
 * its subcommands (validate; trace-level, in trace_level.c). Signals are blocked before any thread exists
 * (gRPC starts several) and taken in one place, the main thread's sigwait. */
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sf_config.h"
#include "sf_log.h"
#include "sf_policy.h"
#include "sf_service.h"

#ifndef SF_VERSION
#define SF_VERSION "0.0.0"
#endif

enum { EXIT_OK = 0, EXIT_INVALID = 1, EXIT_USAGE = 2 };

int sf_cli_trace_level(int argc, char **argv);   /* trace_level.c */

static void usage(FILE *f)
{
    fputs("usage: spanfence [--config FILE] [--policy FILE]          run the collector\n"
          "       spanfence validate --config FILE [--policy FILE]   check a config and exit\n"
          "       spanfence --help-config                            list every component's keys\n"
          "       spanfence trace-level set|status|reset ...         trace-level windows (--help)\n"
          "       spanfence --help | --version\n"
          "\n"
          "options:\n"
          "  -c, --config FILE   collector config (OpenTelemetry Collector layout)\n"
          "                      default: configs/default.yaml\n"
          "  -p, --policy FILE   policy the config must hold (configs/POLICY.md);\n"
          "                      the collector refuses to start when it does not\n"
          "  -h, --help          this help\n"
          "  -V, --version       print the version\n"
          "\n"
          "validate exits 0 when the config is valid (and holds the policy), 1 when\n"
          "it is not (every problem on stderr as FILE:LINE:COL: key: message, every\n"
          "policy violation as FILE:LINE:COL: policy: subject: message), 2 on usage\n"
          "errors.\n",
          f);
}

typedef struct cli {
    const char *config;
    const char *policy;
    bool validate;
} cli;

/* Parse argv; returns -1 to continue, else an exit code. */
static int parse_args(int argc, char **argv, cli *c)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "policy", required_argument, NULL, 'p' },
        { "help", no_argument, NULL, 'h' },
        { "help-config", no_argument, NULL, 'H' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    int opt;

    if (argc > 1 && strcmp(argv[1], "validate") == 0) {
        c->validate = true;
        argc--;
        argv++;
    }
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":c:p:hV", opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            c->config = optarg;
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
            printf("spanfence %s\n", SF_VERSION);
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
    if (c->config == NULL) {
        if (c->validate) {
            fputs("spanfence: validate needs --config FILE\n", stderr);
            return EXIT_USAGE;
        }
        c->config = "configs/default.yaml";
    }
    return -1;
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

/* Load, validate, check the policy (when given) and build: the path the
 * daemon and `validate` share. */
static int load(const char *path, const char *policy_path, sf_config **cfg, sf_service **svc)
{
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
    if (sf_config_load(path, diag, cfg) == SF_OK) {
        violated = policy != NULL && sf_policy_check(policy, *cfg, diag) != SF_OK;
        if (!violated && sf_service_create(*cfg, diag, svc) == SF_OK)
            rc = EXIT_OK;
    }
    sf_diag_print(diag);
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

int main(int argc, char **argv)
{
    cli c = { 0 };
    sigset_t sigs;
    sf_config *cfg;
    sf_service *svc;
    int rc, sig;

    if (argc > 1 && strcmp(argv[1], "trace-level") == 0)
        return sf_cli_trace_level(argc - 1, argv + 1);
    rc = parse_args(argc, argv, &c);
    if (rc >= 0)
        return rc;

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

    /* Before any thread exists, so every thread inherits the mask and the
     * signals reach sigwait() below, not a gRPC thread. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    rc = load(c.config, c.policy, &cfg, &svc);
    if (rc != EXIT_OK || c.validate) {
        if (rc == EXIT_OK && c.policy != NULL)
            printf("%s: configuration is valid and holds policy %s\n", c.config, c.policy);
        else if (rc == EXIT_OK)
            printf("%s: configuration is valid\n", c.config);
        sf_service_destroy(svc);
        sf_config_destroy(cfg);
        return rc;
    }

    sf_log_set_level((sf_log_level)cfg->log_level);
    if (sf_service_start(svc) != SF_OK) {
        sf_error("spanfence: could not start; exiting");
        sf_service_destroy(svc);
        sf_config_destroy(cfg);
        return EXIT_INVALID;
    }
    sf_info("spanfence %s running with %s", SF_VERSION, c.config);

    do {
        if (sigwait(&sigs, &sig) != 0)
            sig = SIGTERM;
    } while (sig != SIGINT && sig != SIGTERM);

    sf_info("received %s: stopping receivers, draining exporters",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    sf_service_shutdown(svc);
    sf_service_destroy(svc);
    sf_config_destroy(cfg);
    sf_info("stopped");
    return EXIT_OK;
}

/* trace_control/trace_control_cli.c: `spanfence trace-level set|status|reset`, the
 * operator's side of the trace_control extension: asks the running
 * collector over its control socket, or with --direct (no collector) checks,
 * audits and sends the request to the engine itself. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <yaml.h>

#include "trace_control.h"
#include "sf_config.h"
#include "sf_log.h"
#include "sf_time.h"

enum { TL_OK = 0, TL_FAILED = 1, TL_USAGE = 2 };

int sf_cli_trace_level(int argc, char **argv);

static void tl_usage(FILE *f)
{
    fputs("usage: spanfence trace-level set --target ID --level N --for DURATION --reason TEXT\n"
          "                                 [--direct] (--socket PATH | --config FILE)\n"
          "       spanfence trace-level status (--socket PATH | --config FILE)\n"
          "           each target's level as last set, open windows and time left,\n"
          "           resets pending or failed\n"
          "       spanfence trace-level reset --target ID [--direct] (--socket PATH | --config FILE)\n"
          "           ends a window now; on a failed reset, tries the engine again\n"
          "\n"
          "  --for       how long the level holds, e.g. 10m (capped by max_window)\n"
          "  --socket    the collector's control socket\n"
          "  --config    the collector's config: its trace_control socket, targets and levels\n"
          "  --direct    no collector runs: check, audit and send the request to the engine\n"
          "              yourself (needs --config); nothing will set the level back\n"
          "\n"
          "exit status: 0 done, 1 refused or failed (reason on stderr), 2 usage error\n",
          f);
}

typedef struct tl_args {
    const char *cmd, *target, *reason, *socket, *config;
    int64_t level, for_ms;
    bool has_level, has_for, direct;
} tl_args;

static int parse(int argc, char **argv, tl_args *a)
{
    static const struct option opts[] = {
        { "target", required_argument, NULL, 't' },
        { "level", required_argument, NULL, 'l' },
        { "for", required_argument, NULL, 'f' },
        { "reason", required_argument, NULL, 'r' },
        { "socket", required_argument, NULL, 's' },
        { "config", required_argument, NULL, 'c' },
        { "direct", no_argument, NULL, 'd' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int opt;
    char *end;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        tl_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? TL_USAGE : TL_OK;
    }
    a->cmd = argv[1];
    if (strcmp(a->cmd, "set") != 0 && strcmp(a->cmd, "status") != 0 &&
        strcmp(a->cmd, "reset") != 0) {
        fprintf(stderr, "spanfence: unknown trace-level command '%s'\n", a->cmd);
        tl_usage(stderr);
        return TL_USAGE;
    }
    argc--;
    argv++;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case 't': a->target = optarg; break;
        case 'r': a->reason = optarg; break;
        case 's': a->socket = optarg; break;
        case 'c': a->config = optarg; break;
        case 'd': a->direct = true; break;
        case 'h': tl_usage(stdout); return TL_OK;
        case 'l':
            a->level = strtoll(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0') {
                fprintf(stderr, "spanfence: invalid level '%s'\n", optarg);
                return TL_USAGE;
            }
            a->has_level = true;
            break;
        case 'f':
            if (sf_parse_duration(optarg, &a->for_ms) != SF_OK) {
                fprintf(stderr, "spanfence: invalid duration '%s' (e.g. 30s, 10m, 1h)\n", optarg);
                return TL_USAGE;
            }
            a->has_for = true;
            break;
        case ':':
            fprintf(stderr, "spanfence: option '%s' needs a value\n", argv[optind - 1]);
            return TL_USAGE;
        default:
            fprintf(stderr, "spanfence: unknown option '%s'\n", argv[optind - 1]);
            return TL_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "spanfence: unexpected argument '%s'\n", argv[optind]);
        return TL_USAGE;
    }
    if (strcmp(a->cmd, "set") == 0) {
        const char *missing = !a->target ? "--target" : !a->has_level ? "--level"
                              : !a->has_for ? "--for" : !a->reason ? "--reason" : NULL;
        if (missing) {
            fprintf(stderr, "spanfence: trace-level set needs %s\n", missing);
            return TL_USAGE;
        }
        if (a->reason[0] == '\0' || strlen(a->reason) > SF_TC_MAX_REASON) {
            fprintf(stderr, "spanfence: --reason must be 1 to %d bytes\n", SF_TC_MAX_REASON);
            return TL_USAGE;
        }
    } else if (strcmp(a->cmd, "reset") == 0 && a->target == NULL) {
        fputs("spanfence: trace-level reset needs --target\n", stderr);
        return TL_USAGE;
    }
    if (a->direct && (a->config == NULL || strcmp(a->cmd, "status") == 0)) {
        fputs(a->config == NULL ? "spanfence: --direct needs --config FILE\n"
                                : "spanfence: status has no --direct mode\n", stderr);
        return TL_USAGE;
    }
    if (!a->direct && (a->socket == NULL) == (a->config == NULL)) {
        fputs("spanfence: give either --socket PATH or --config FILE\n", stderr);
        return TL_USAGE;
    }
    return -1;
}

static int load_tc(const char *path, sf_config **cfg, const sf_tc_config **tc)
{
    sf_diag *diag = sf_diag_create(path);

    *cfg = NULL;
    if (diag == NULL) {
        fputs("spanfence: out of memory\n", stderr);
        return TL_FAILED;
    }
    if (sf_config_load(path, diag, cfg) != SF_OK) {
        sf_diag_print(diag);
        fprintf(stderr, "spanfence: %s: configuration not valid\n", path);
        sf_diag_destroy(diag);
        return TL_FAILED;
    }
    sf_diag_destroy(diag);
    *tc = sf_tc_config_of(*cfg);
    if (*tc == NULL) {
        fprintf(stderr, "spanfence: %s defines no trace_control extension\n", path);
        sf_config_destroy(*cfg);
        *cfg = NULL;
        return TL_FAILED;
    }
    return TL_OK;
}

/* --direct: the collector's checks and audit record (the intent, written
 * before the engine is asked: fail closed), then the engine, then the
 * outcome as its own record: applied, refused (the engine answered, with
 * its status) or failed (no answer: the level is not known). */
/* Write one record built with json-c; false when it is not in the log. */
static bool direct_record(const sf_tc_config *tc, json_object *o)
{
    char *rec = sf_tc_record_text(o);
    bool ok = rec != NULL && sf_tc_audit_append(tc->audit_log, rec) == SF_OK;

    sf_free(rec);
    return ok;
}

static int direct(const tl_args *a, const sf_tc_config *tc)
{
    const sf_tc_target *t = sf_tc_find_target(tc, a->target);
    bool set = strcmp(a->cmd, "set") == 0;
    int64_t level = set ? a->level : tc->resting_level;
    int64_t start = 0, end;
    char err[512], id[128];
    sf_tc_answer ans;
    json_object *o;
    sf_status st;
    const char *outcome;

    if (set && sf_tc_check_set(tc, a->target, a->level, a->for_ms, err, sizeof(err)) != SF_OK) {
        fprintf(stderr, "spanfence: refused: %s\n", err);
        return TL_FAILED;
    }
    if (t == NULL) {
        fprintf(stderr, "spanfence: refused: unknown target '%s'\n", a->target);
        return TL_FAILED;
    }
    start = sf_wall_ms();
    end = start + (set ? a->for_ms : 0);
    snprintf(id, sizeof(id), "%s-%" PRId64, t->id, start);
    o = sf_tc_record_new(set ? "direct_set" : "direct_reset", id, t->id);
    if (o != NULL) {
        json_object_object_add(o, "level", json_object_new_int64(level));
        json_object_object_add(o, "uid", json_object_new_int64(getuid()));
        json_object_object_add(o, "reason", json_object_new_string(a->reason ? a->reason : ""));
        sf_tc_record_time(o, "start", start);
        sf_tc_record_time(o, "planned_end", end);
        json_object_object_add(o, "note",
                               json_object_new_string("sent directly; nothing resets this level"));
    }
    if (!direct_record(tc, o)) {
        fprintf(stderr, "spanfence: the audit log '%s' cannot be written; nothing was changed\n",
                tc->audit_log);
        return TL_FAILED;
    }
    st = sf_tc_engine_set(t, level, tc->request_timeout, &ans);
    outcome = st == SF_OK ? "applied" : ans.status != 0 ? "refused" : "failed";
    o = sf_tc_record_new("direct_outcome", id, t->id);
    if (o != NULL) {
        json_object_object_add(o, "level", json_object_new_int64(level));
        json_object_object_add(o, "uid", json_object_new_int64(getuid()));
        json_object_object_add(o, "outcome", json_object_new_string(outcome));
        if (st != SF_OK)
            sf_tc_record_answer(o, ans.status, ans.detail);
        else if (ans.status != 0)
            json_object_object_add(o, "status", json_object_new_int64(ans.status));
        sf_tc_record_time(o, "time", sf_wall_ms());
    }
    if (!direct_record(tc, o))
        fprintf(stderr, "spanfence: warning: the outcome record (%s) could not be written to "
                "'%s'\n", outcome, tc->audit_log);
    if (st != SF_OK) {
        fprintf(stderr, "spanfence: engine '%s' %s level %" PRId64 ": %s\n", t->id,
                ans.status != 0 ? "refused" : "did not take", level, ans.detail);
        return TL_FAILED;
    }
    sf_time_format_utc(end, err, sizeof(err));
    if (set)
        fprintf(stderr, "spanfence: warning: target '%s' is at level %" PRId64 " and NOTHING will "
                "set it back: run 'spanfence trace-level reset --direct --target %s --config %s' "
                "before %s\n", t->id, level, t->id, a->config, err);
    printf("target '%s' is at level %" PRId64 "\n", t->id, level);
    return TL_OK;
}

static int ask(const tl_args *a, const char *socket_path)
{
    char req[SF_TC_MAX_REQUEST], reason[SF_TC_MAX_REASON * 6 + 1], target[200];
    char err[512], *reply = NULL, *msg;
    bool ok = false;
    size_t len;
    int rc;

    if (a->target)
        sf_json_escape(a->target, target, sizeof(target));
    if (strcmp(a->cmd, "set") == 0) {
        sf_json_escape(a->reason, reason, sizeof(reason));
        snprintf(req, sizeof(req),
                 "{\"op\":\"set\",\"target\":\"%s\",\"level\":%" PRId64 ",\"for_ms\":%" PRId64
                 ",\"reason\":\"%s\"}", target, a->level, a->for_ms, reason);
    } else if (strcmp(a->cmd, "reset") == 0) {
        snprintf(req, sizeof(req), "{\"op\":\"reset\",\"target\":\"%s\"}", target);
    } else {
        snprintf(req, sizeof(req), "{\"op\":\"status\"}");
    }
    if (sf_tc_client_request(socket_path, req, &reply, err, sizeof(err)) != SF_OK) {
        fprintf(stderr, "spanfence: %s\n", err);
        return TL_FAILED;
    }
    len = strlen(reply);
    msg = sf_malloc(len + 1);
    if (msg == NULL || sf_tc_json_bool(reply, len, "ok", &ok) != SF_OK ||
        sf_tc_json_str(reply, len, "message", msg, len + 1) != SF_OK) {
        fprintf(stderr, "spanfence: unexpected answer from the collector: %s\n", reply);
        rc = TL_FAILED;
    } else if (ok) {
        size_t ml = strlen(msg);

        fputs(msg, stdout);
        if (ml == 0 || msg[ml - 1] != '\n')
            fputc('\n', stdout);
        rc = TL_OK;
    } else {
        fprintf(stderr, "spanfence: refused: %s\n", msg);
        rc = TL_FAILED;
    }
    sf_free(msg);
    sf_free(reply);
    return rc;
}

/* A mapping's value for `key` (exact, or `key/...` when prefix), or NULL. */
static yaml_node_t *yaml_get(yaml_document_t *doc, yaml_node_t *map, const char *key, bool prefix)
{
    size_t kl = strlen(key);

    if (map == NULL || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        const char *t;

        if (k == NULL || k->type != YAML_SCALAR_NODE)
            continue;
        t = (const char *)k->data.scalar.value;
        if (strcmp(t, key) == 0 || (prefix && strncmp(t, key, kl) == 0 && t[kl] == '/'))
            return yaml_document_get_node(doc, p->value);
    }
    return NULL;
}

/* extensions.trace_control[/name].socket of the config file, read with
 * libyaml alone and its ${env:...} expanded: the control verbs need only the
 * socket, not the rest of the config (whose ${env:...} values, such as the
 * gateway's token, the operator's shell does not have). *sock is NULL when
 * it is not there as a plain scalar; the caller then loads the whole config.
 * TL_FAILED (said on stderr) when its expansion fails. */
static int socket_of_file(const char *path, char **sock)
{
    FILE *f = fopen(path, "re");
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_node_t *node;
    char *err = NULL;
    int rc = TL_OK;

    *sock = NULL;
    if (f == NULL)
        return TL_OK;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return TL_OK;
    }
    yaml_parser_set_input_file(&parser, f);
    if (yaml_parser_load(&parser, &doc)) {
        node = yaml_get(&doc, yaml_get(&doc, yaml_get(&doc, yaml_document_get_root_node(&doc),
                                                      "extensions", false),
                                       "trace_control", true),
                        "socket", false);
        if (node != NULL && node->type == YAML_SCALAR_NODE) {
            sf_status st = sf_config_expand_env((const char *)node->data.scalar.value, sock, &err);

            if (st != SF_OK) {
                fprintf(stderr, "spanfence: %s:%zu:%zu: extensions.trace_control.socket: %s\n",
                        path, node->start_mark.line + 1, node->start_mark.column + 1,
                        err ? err : "out of memory");
                rc = TL_FAILED;
            } else if ((*sock)[0] != '/') {
                sf_free(*sock);         /* the full load says what is wrong */
                *sock = NULL;
            }
            sf_free(err);
        }
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    fclose(f);
    return rc;
}

int sf_cli_trace_level(int argc, char **argv)
{
    tl_args a = { 0 };
    sf_config *cfg = NULL;
    const sf_tc_config *tc = NULL;
    int rc = parse(argc, argv, &a);

    if (rc >= 0)
        return rc;
    if (a.config != NULL && !a.direct) {
        char *sock;

        if (socket_of_file(a.config, &sock) != TL_OK)
            return TL_FAILED;
        if (sock != NULL) {
            rc = ask(&a, sock);
            sf_free(sock);
            return rc;
        }
    }
    if (a.config != NULL) {
        rc = load_tc(a.config, &cfg, &tc);
        if (rc != TL_OK)
            return rc;
    }
    rc = a.direct ? direct(&a, tc) : ask(&a, a.socket ? a.socket : tc->socket);
    sf_config_destroy(cfg);
    return rc;
}

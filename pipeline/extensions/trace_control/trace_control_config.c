/* pipeline/extensions/trace_control/trace_control_config.c: the
 * `trace_control` extension's config map (targets, allowed levels, resting
 * level, longest window, audit log, control socket), its cross-field
 * checks, and the set-request check the collector and the CLI share. */
#include "trace_control.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>
#include <strings.h>
#include <ctype.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

static const sf_config_row retry_rows[] = {
    { .key = "initial_interval", .type = SF_CFG_DURATION, .def = "1s",
      .offset = offsetof(sf_tc_retry, initial_interval), .min = 1, .max = 3600000,
      .help = "first wait before asking an engine that did not answer again" },
    { .key = "max_interval", .type = SF_CFG_DURATION, .def = "30s",
      .offset = offsetof(sf_tc_retry, max_interval), .min = 1, .max = 3600000,
      .help = "longest wait between attempts (the wait doubles up to it), until reset_timeout" },
    { 0 }
};

static const sf_config_row auto_revert_rows[] = {
    { .key = "enabled", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(sf_tc_auto_revert, enabled),
      .help = "end a window early, and reset its engine, when the capture is losing spans" },
    { .key = "max_lost_spans", .type = SF_CFG_INT, .def = "100",
      .offset = offsetof(sf_tc_auto_revert, max_lost_spans), .min = 0, .max = INT64_MAX / 2,
      .help = "spans lost (refused, dropped, failed) while the window is open before it ends" },
    { .key = "max_loss_ratio", .type = SF_CFG_DOUBLE, .def = "0.01",
      .offset = offsetof(sf_tc_auto_revert, max_loss_ratio), .dmin = 0, .dmax = 1,
      .help = "lost / received while the window is open before it ends (0.01: 1%)" },
    { .key = "check_interval", .type = SF_CFG_DURATION, .def = "1s",
      .offset = offsetof(sf_tc_auto_revert, check_interval), .min = 1, .max = 60000,
      .help = "how often an open window's losses are checked" },
    { .key = "max_latency_increase", .type = SF_CFG_CUSTOM,
      .offset = offsetof(sf_tc_auto_revert, max_latency_increase),
      .parse = sf_tc_parse_latency_limits,
      .help = "{ttft: 2x, itl: '+50ms', min_samples: 20}: end a window (cause latency) when a "
              "metric's p50 or p99 (bucket-bounded) during it rises above its baseline by the "
              "ratio or the time given; needs every target's engine_metrics" },
    { 0 }
};

static const sf_config_row markers_rows[] = {
    { .key = "enabled", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(sf_tc_markers, enabled),
      .help = "emit one span per window (service.name spanfence) into the traces pipeline, "
              "after its processors, saying whether the capture is complete" },
    { .key = "pipeline", .type = SF_CFG_STR, .offset = offsetof(sf_tc_markers, pipeline),
      .help = "the traces pipeline that gets them; unset: every traces pipeline" },
    { 0 }
};

static bool is_null(const sf_node *n)
{
    return n == NULL || (n->kind == SF_NODE_SCALAR && n->is_null);
}

static const char *kind_text(const sf_node *n)
{
    return n->kind == SF_NODE_MAP ? "a mapping" : n->kind == SF_NODE_SEQ ? "a list" : "a value";
}

static bool parse_i64(const char *s, int64_t *out)
{
    char *end;
    long long v;

    if (*s == '\0')
        return false;
    v = strtoll(s, &end, 10);
    if (*end != '\0')
        return false;
    *out = v;
    return true;
}

static sf_status parse_levels(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    sf_tc_levels *lv = field;
    sf_status st = SF_OK;

    if (is_null(node))
        return SF_OK;
    if (node->kind != SF_NODE_SEQ) {
        sf_cfg_error(ctx, node, NULL, "expected a list of integers, got %s", kind_text(node));
        return SF_CONFIG;
    }
    lv->v = sf_cfg_alloc(ctx, (node->n ? node->n : 1) * sizeof(*lv->v));
    if (lv->v == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < node->n; i++) {
        const sf_node *it = node->items[i];
        char sub[32];
        int64_t v;

        snprintf(sub, sizeof(sub), "[%zu]", i);
        if (it->kind != SF_NODE_SCALAR || !it->plain || !parse_i64(it->text, &v) || v < 0 ||
            v > 1000) {
            sf_cfg_error(ctx, it, sub, "invalid level '%s' (expected an integer 0 to 1000)",
                         it->kind == SF_NODE_SCALAR ? it->text : "");
            st = SF_CONFIG;
            continue;
        }
        for (size_t j = 0; j < lv->n; j++)
            if (lv->v[j] == v) {
                sf_cfg_error(ctx, it, sub, "level %" PRId64 " is listed more than once", v);
                st = SF_CONFIG;
            }
        lv->v[lv->n++] = v;
    }
    return st;
}

static const char *const target_keys[] = { "endpoint", "method", "level_in", "field", "match",
                                           "headers", "tls", "engine_log", "engine_metrics",
                                           "out_of_band", "arrival_timeout" };
static const char *const tls_keys[] = { "ca_file", "cert_file", "key_file",
                                        "insecure_skip_verify" };
/* Headers libcurl sets from the request itself. */
static const char *const reserved_headers[] = { "host", "content-length", "transfer-encoding",
                                                "connection", "content-type", NULL };

static sf_status scalar_of(sf_cfg_ctx *ctx, const sf_node *v, const char *sub, char **out)
{
    if (v->kind != SF_NODE_SCALAR || v->is_null) {
        sf_cfg_error(ctx, v, sub, "expected a string, got %s",
                     v->kind == SF_NODE_SCALAR ? "an empty value" : kind_text(v));
        return SF_CONFIG;
    }
    *out = sf_cfg_strdup(ctx, v->text, v->len);
    return *out ? SF_OK : SF_ENOMEM;
}

/* What a plain YAML scalar resolves to when it is not a string (core
 * schema: null, booleans, numbers), or NULL for a string. */
static const char *non_string(const sf_node *v)
{
    static const char *const bools[] = { "true", "True", "TRUE", "false", "False", "FALSE" };
    const char *t = v->text;
    char *end;

    if (!v->plain)
        return NULL;
    if (v->is_null)
        return "an empty value";
    for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++)
        if (strcmp(t, bools[i]) == 0)
            return "a boolean";
    if (strcmp(t, ".inf") == 0 || strcmp(t, "-.inf") == 0 || strcmp(t, "+.inf") == 0 ||
        strcasecmp(t, ".nan") == 0)
        return "a number";
    /* strtod would also take "inf" and "nan", strings to YAML */
    if (strchr("0123456789+-.", t[0]) != NULL && t[0] != '\0') {
        (void)strtod(t, &end);
        if (*end == '\0')
            return "a number";
    }
    if (strncmp(t, "0o", 2) == 0 && t[2] != '\0' && strspn(t + 2, "01234567") == strlen(t + 2))
        return "a number";
    return NULL;
}

/* `match`: resource attribute -> string value, compared with the string
 * value of the attribute in each request (an unquoted 1 or true would never
 * equal one, so it must be quoted). At most SF_TC_MAX_MATCH pairs of at
 * most SF_TC_MAX_MATCH_LEN bytes each (they go into every closing record). */
static sf_status parse_match(sf_cfg_ctx *ctx, const sf_node *v, const char *path,
                             sf_strmap *m)
{
    sf_status st = SF_OK;
    char sub[512];

    if (v->kind != SF_NODE_MAP || v->n == 0) {
        sf_cfg_error(ctx, v, path, "expected a mapping of resource attributes to string values");
        return SF_CONFIG;
    }
    if (v->n > SF_TC_MAX_MATCH) {
        sf_cfg_error(ctx, v, path, "%zu attributes (at most %d)", v->n, SF_TC_MAX_MATCH);
        return SF_CONFIG;
    }
    if (sf_cfg_strmap_alloc(ctx, m, v->n) != SF_OK)
        return SF_ENOMEM;
    for (size_t j = 0; j < v->n; j++) {
        const sf_node *k = v->keys[j], *it = v->items[j];
        const char *what = it->kind == SF_NODE_SCALAR ? non_string(it) : kind_text(it);

        snprintf(sub, sizeof(sub), "%s.%s", path, k->text);
        if (what != NULL) {
            if (it->kind == SF_NODE_SCALAR && !it->is_null)
                sf_cfg_error(ctx, it, sub, "expected a string, got %s ('%s'); quote it: \"%s\"",
                             what, it->text, it->text);
            else
                sf_cfg_error(ctx, it, sub, "expected a string, got %s", what);
            st = SF_CONFIG;
            continue;
        }
        if (k->len == 0 || k->len > SF_TC_MAX_MATCH_LEN || it->len > SF_TC_MAX_MATCH_LEN) {
            sf_cfg_error(ctx, k->len == 0 || k->len > SF_TC_MAX_MATCH_LEN ? k : it, sub,
                         "attribute names and values must be 1 to %d and 0 to %d bytes",
                         SF_TC_MAX_MATCH_LEN, SF_TC_MAX_MATCH_LEN);
            st = SF_CONFIG;
            continue;
        }
        if (sf_cfg_strmap_add(ctx, m, k, it) != SF_OK)
            return SF_ENOMEM;
    }
    return st;
}

static bool header_name_ok(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || strchr("!#$%&'*+-.^_`|~", *s) != NULL))
            return false;
    return true;
}

/* `headers`: name -> value, sent with every request to the engine. Values
 * usually come from ${env:...} (the YAML reader expands them); they are
 * never logged nor written to the audit log, so no message here quotes one. */
static sf_status parse_headers(sf_cfg_ctx *ctx, const sf_node *v, const char *path,
                               sf_strmap *m)
{
    sf_status st = SF_OK;
    char sub[256];

    if (v->kind != SF_NODE_MAP) {
        sf_cfg_error(ctx, v, path, "expected a mapping of header names to values");
        return SF_CONFIG;
    }
    if (sf_cfg_strmap_alloc(ctx, m, v->n) != SF_OK)
        return SF_ENOMEM;
    for (size_t j = 0; j < v->n; j++) {
        const sf_node *k = v->keys[j], *it = v->items[j];
        bool reserved = false;

        snprintf(sub, sizeof(sub), "%s.%s", path, k->text);
        for (const char *const *r = reserved_headers; *r; r++)
            reserved |= strcasecmp(k->text, *r) == 0;
        if (!header_name_ok(k->text) || reserved) {
            sf_cfg_error(ctx, k, sub, reserved ? "'%s' is set by spanfence itself"
                         : "'%s' is not a valid header name", k->text);
            st = SF_CONFIG;
            continue;
        }
        if (it->kind != SF_NODE_SCALAR || it->is_null) {
            sf_cfg_error(ctx, it, sub, "expected a string value");
            st = SF_CONFIG;
            continue;
        }
        if (memchr(it->text, '\r', it->len) || memchr(it->text, '\n', it->len) ||
            strlen(it->text) != it->len) {
            sf_cfg_error(ctx, k, sub, "value of '%s' contains a line break or NUL", k->text);
            st = SF_CONFIG;
            continue;
        }
        if (sf_cfg_strmap_add(ctx, m, k, it) != SF_OK)
            return SF_ENOMEM;
    }
    return st;
}

static sf_status tls_key(sf_cfg_ctx *ctx, const sf_node *it, const char *sub, size_t w,
                         void *arg)
{
    sf_tc_target *t = arg;

    switch (w) {
    case 0: return scalar_of(ctx, it, sub, &t->ca_file);
    case 1: return scalar_of(ctx, it, sub, &t->cert_file);
    case 2: return scalar_of(ctx, it, sub, &t->key_file);
    default:
        if (it->kind == SF_NODE_SCALAR && it->plain && strcmp(it->text, "true") == 0) {
            t->insecure_skip_verify = true;
        } else if (!(it->kind == SF_NODE_SCALAR && it->plain && strcmp(it->text, "false") == 0)) {
            sf_cfg_error(ctx, it, sub, "expected true or false");
            return SF_CONFIG;
        }
        return SF_OK;
    }
}

static sf_status parse_tls(sf_cfg_ctx *ctx, const sf_node *v, const char *path, sf_tc_target *t)
{
    return sf_tc_parse_map(ctx, v, path, tls_keys, sizeof(tls_keys) / sizeof(tls_keys[0]),
                           tls_key, t);
}

/* One drop pattern: it must compile (PCRE2), and a group `ops`, when it
 * has one, is the number the message says was dropped. */
static sf_status drop_pattern(sf_cfg_ctx *ctx, const sf_node *it, const char *sub, char **out)
{
    sf_status st = scalar_of(ctx, it, sub, out);
    pcre2_code *code;
    int err;
    PCRE2_SIZE at;
    PCRE2_UCHAR msg[160];

    if (st != SF_OK)
        return st;
    code = pcre2_compile((PCRE2_SPTR)*out, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &at, NULL);
    if (code != NULL) {
        pcre2_code_free(code);
        return SF_OK;
    }
    pcre2_get_error_message(err, msg, sizeof(msg));
    sf_cfg_error(ctx, it, sub, "invalid pattern '%s' at offset %zu: %s", *out, (size_t)at,
                 (const char *)msg);
    return SF_CONFIG;
}

static const char *const engine_log_keys[] = { "receiver", "match", "drops" };

typedef struct engine_log_read {
    sf_tc_engine_log *el;
    bool drops;                 /* `drops` given: no default patterns */
} engine_log_read;

static sf_status engine_log_key(sf_cfg_ctx *ctx, const sf_node *it, const char *sub, size_t w,
                                void *arg)
{
    engine_log_read *rd = arg;
    sf_tc_engine_log *el = rd->el;
    sf_status st = SF_OK;

    if (w == 0)
        return scalar_of(ctx, it, sub, &el->receiver);
    if (w == 1)
        return parse_match(ctx, it, sub, &el->match);
    rd->drops = true;
    if (it->kind != SF_NODE_SEQ || it->n == 0 || it->n > SF_TC_MAX_DROP_PATTERNS) {
        sf_cfg_error(ctx, it, sub, "expected a list of 1 to %d patterns",
                     SF_TC_MAX_DROP_PATTERNS);
        return SF_CONFIG;
    }
    for (size_t i = 0; i < it->n; i++) {
        char isub[300];
        sf_status pr;

        snprintf(isub, sizeof(isub), "%s[%zu]", sub, i);
        pr = drop_pattern(ctx, it->items[i], isub, &el->drops[el->n_drops]);
        if (pr == SF_ENOMEM)
            return pr;
        if (pr == SF_OK)
            el->n_drops++;
        else
            st = pr;
    }
    return st;
}

/* `engine_log`: {receiver, match, drops}: where the engine's log comes
 * from and which of its messages say it dropped spans. */
static sf_status parse_engine_log(sf_cfg_ctx *ctx, const sf_node *v, const char *path,
                                  sf_tc_engine_log *el)
{
    engine_log_read rd = { .el = el };
    sf_status st;

    st = sf_tc_parse_map(ctx, v, path, engine_log_keys,
                         sizeof(engine_log_keys) / sizeof(engine_log_keys[0]), engine_log_key,
                         &rd);
    if (v->kind != SF_NODE_MAP || st == SF_ENOMEM)
        return st;
    if (el->receiver == NULL && st == SF_OK) {
        sf_cfg_error(ctx, v, path, "missing required key 'receiver'");
        st = SF_CONFIG;
    }
    if (!rd.drops) {
        el->drops[el->n_drops++] = SF_TC_DROP_SDK_QUEUE;
        el->drops[el->n_drops++] = SF_TC_DROP_ZMQ;
    }
    return st;
}

/* One key of a target (target_keys[w]). */
static sf_status target_setting(sf_cfg_ctx *ctx, const sf_node *v, const char *sub, size_t w,
                                void *arg)
{
    sf_tc_target *t = arg;
    char *s = NULL;
    sf_status r = SF_OK;

    switch (w) {
    case 0:
        r = scalar_of(ctx, v, sub, &t->endpoint);
        break;
    case 1:
    case 2:
        r = scalar_of(ctx, v, sub, &s);
        if (r != SF_OK)
            break;
        if (w == 1 && strcasecmp(s, "GET") == 0)
            t->method = SF_TC_GET;
        else if (w == 1 && strcasecmp(s, "POST") == 0)
            t->method = SF_TC_POST;
        else if (w == 2 && strcmp(s, "query") == 0)
            ;
        else if (w == 2 && strcmp(s, "json") == 0) {
            /* SGLang's handler reads the query only and answers a body-only
             * request 400; no engine spanfence supports reads a body. */
            sf_cfg_error(ctx, v, sub, "'json' is not supported: SGLang's /set_trace_level "
                         "reads the level from the query parameter only (level_in: query)");
            r = SF_CONFIG;
        } else {
            sf_cfg_error(ctx, v, sub, "invalid value '%s' (expected one of %s)", s,
                         w == 1 ? "GET, POST" : "query");
            r = SF_CONFIG;
        }
        break;
    case 3:
        r = scalar_of(ctx, v, sub, &t->field);
        break;
    case 4:
        r = parse_match(ctx, v, sub, &t->match);
        break;
    case 5:
        r = parse_headers(ctx, v, sub, &t->headers);
        break;
    case 6:
        r = parse_tls(ctx, v, sub, t);
        break;
    case 7:
        r = parse_engine_log(ctx, v, sub, &t->engine_log);
        break;
    case 8:
        r = sf_tc_parse_engine_metrics(ctx, v, sub, &t->engine_metrics);
        break;
    case 9:
        r = scalar_of(ctx, v, sub, &s);
        if (r == SF_OK && strcmp(s, "drop") == 0) {
            t->out_of_band = SF_TC_OOB_DROP;
        } else if (r == SF_OK && strcmp(s, "count") != 0) {
            sf_cfg_error(ctx, v, sub, "invalid value '%s' (expected one of drop, count)", s);
            r = SF_CONFIG;
        }
        break;
    case 10:
        r = scalar_of(ctx, v, sub, &s);
        if (r == SF_OK && (sf_parse_duration(s, &t->arrival_timeout) != SF_OK ||
                           t->arrival_timeout < 1000 || t->arrival_timeout > 3600000)) {
            sf_cfg_error(ctx, v, sub, "invalid duration '%s' (expected 1s to 1h)", s);
            r = SF_CONFIG;
        }
        break;
    }
    return r;
}

static sf_status parse_target(sf_cfg_ctx *ctx, const sf_node *key, const sf_node *map,
                              sf_tc_target *t)
{
    sf_status st;
    char sub[192];

    t->id = sf_cfg_strdup(ctx, key->text, key->len);
    if (t->id == NULL)
        return SF_ENOMEM;
    if (map->kind != SF_NODE_MAP) {
        snprintf(sub, sizeof(sub), "%s", key->text);
        sf_cfg_error(ctx, map, sub, "expected a mapping, got %s",
                     is_null(map) ? "an empty value" : kind_text(map));
        return SF_CONFIG;
    }
    st = sf_tc_parse_map(ctx, map, key->text, target_keys,
                         sizeof(target_keys) / sizeof(target_keys[0]), target_setting, t);
    if (st == SF_ENOMEM)
        return st;
    if (t->field == NULL)
        t->field = "level";
    if (t->arrival_timeout == 0)
        t->arrival_timeout = 10000;
    if (t->out_of_band == SF_TC_OOB_DROP && t->match.n == 0 && st == SF_OK) {
        snprintf(sub, sizeof(sub), "%s.out_of_band", key->text);
        sf_cfg_error(ctx, sf_node_get(map, "out_of_band"), sub, "'drop' needs a 'match' (the "
                     "attributes that tell the target's spans from the others')");
        st = SF_CONFIG;
    }
    if (t->endpoint == NULL && st == SF_OK) {
        snprintf(sub, sizeof(sub), "%s", key->text);
        sf_cfg_error(ctx, key, sub, "missing required key 'endpoint'");
        st = SF_CONFIG;
    }
    return st;
}

static sf_status parse_targets(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    sf_tc_targets *tg = field;
    sf_status st = SF_OK;

    if (is_null(node))
        return SF_OK;
    if (node->kind != SF_NODE_MAP) {
        sf_cfg_error(ctx, node, NULL, "expected a mapping of replica ids to engines, got %s",
                     kind_text(node));
        return SF_CONFIG;
    }
    tg->v = sf_cfg_alloc(ctx, (node->n ? node->n : 1) * sizeof(*tg->v));
    if (tg->v == NULL)
        return SF_ENOMEM;
    memset(tg->v, 0, (node->n ? node->n : 1) * sizeof(*tg->v));
    for (size_t i = 0; i < node->n; i++) {
        sf_status r = parse_target(ctx, node->keys[i], node->items[i], &tg->v[tg->n++]);
        if (r == SF_ENOMEM)
            return r;
        if (r != SF_OK)
            st = r;
    }
    return st;
}

const sf_config_row sf_tc_config_map[] = {
    { .key = "socket", .type = SF_CFG_STR, .offset = offsetof(sf_tc_config, socket),
      .help = "path of the control socket (its file permissions are the access control)" },
    { .key = "socket_group", .type = SF_CFG_STR, .offset = offsetof(sf_tc_config, socket_group),
      .help = "group allowed to use the socket (mode 0660); unset: owner only (0600)" },
    { .key = "audit_log", .type = SF_CFG_STR, .offset = offsetof(sf_tc_config, audit_log),
      .help = "append-only audit log, one JSON record per line (0600)" },
    { .key = "levels", .type = SF_CFG_CUSTOM, .offset = offsetof(sf_tc_config, levels),
      .parse = parse_levels, .help = "trace levels an operator may set, e.g. [0, 3]" },
    { .key = "resting_level", .type = SF_CFG_INT, .def = "0",
      .offset = offsetof(sf_tc_config, resting_level), .min = 0, .max = 1000,
      .help = "level every engine goes back to when a window ends" },
    { .key = "max_window", .type = SF_CFG_DURATION, .def = "30m",
      .offset = offsetof(sf_tc_config, max_window), .min = 1, .max = 24 * 3600000LL,
      .help = "longest window `trace-level set --for` may ask for" },
    { .key = "request_timeout", .type = SF_CFG_DURATION, .def = "5s",
      .offset = offsetof(sf_tc_config, request_timeout), .min = 1, .max = 600000,
      .help = "time limit of one request to an engine" },
    { .key = "shutdown_timeout", .type = SF_CFG_DURATION, .def = "10s",
      .offset = offsetof(sf_tc_config, shutdown_timeout), .min = 1, .max = 600000,
      .help = "time spent resetting open windows when the collector stops" },
    { .key = "enforce_interval", .type = SF_CFG_DURATION, .def = "1m",
      .offset = offsetof(sf_tc_config, enforce_interval), .min = 0, .max = 24 * 3600000LL,
      .help = "how often every engine without an open window is set to the resting level "
              "(also at start); 0: at start only" },
    { .key = "grace_period", .type = SF_CFG_DURATION, .def = "5s",
      .offset = offsetof(sf_tc_config, grace_period), .min = 0, .max = 600000,
      .help = "after a window ends, how long its spans (of requests admitted during it) are "
              "still counted before the closing record" },
    { .key = "reset_timeout", .type = SF_CFG_DURATION, .def = "5m",
      .offset = offsetof(sf_tc_config, reset_timeout), .min = 1, .max = 24 * 3600000LL,
      .help = "how long a reset the engine does not answer is retried before it is recorded "
              "as failed (an engine refusing it, e.g. 401, fails it at once)" },
    { .key = "retry_on_failure", .type = SF_CFG_SECTION, .offset = offsetof(sf_tc_config, retry),
      .sub = retry_rows, .help = "backoff for engines that do not answer" },
    { .key = "auto_revert", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_tc_config, auto_revert), .sub = auto_revert_rows,
      .help = "end a window early when the capture is losing spans" },
    { .key = "markers", .type = SF_CFG_SECTION, .offset = offsetof(sf_tc_config, markers),
      .sub = markers_rows, .help = "a span per window where the capture is read" },
    { .key = "targets", .type = SF_CFG_CUSTOM, .offset = offsetof(sf_tc_config, targets),
      .parse = parse_targets,
      .help = "replica id -> {endpoint, method: GET|POST, level_in: query, field, headers, tls, "
              "match, engine_log}; headers: sent to the engine (values from ${env:...}, never "
              "logged); match: resource attributes (strings) of the engine's spans, counted per "
              "window; engine_log: {receiver: a logs receiver's id, match: attributes of the "
              "engine's records, drops: PCRE2 patterns of its drop messages (group `ops`: the "
              "number; default SGLang's two)}, counted per window as engine_dropped; engine_metrics: "
              "{receiver: a prometheus receiver's id, job: its job_name, ttft, itl: histogram "
              "names (default SGLang's), baseline_scrapes: 5}: the engine's latency before and "
              "during each window; "
              "out_of_band: count|drop, what becomes of the target's spans (by match) while it "
              "rests (count: exported; drop: dropped by the receivers, reason out_of_band); "
              "arrival_timeout (default 10s): after a window opens, how long without a span "
              "from the target before its arrival is 'none' (warned and audited)" },
    { 0 }
};

static bool http_url(const char *u)
{
    return (strncasecmp(u, "http://", 7) == 0 && u[7] != '\0') ||
           (strncasecmp(u, "https://", 8) == 0 && u[8] != '\0');
}

static const sf_node *target_key(sf_cfg_ctx *ctx, const char *id, const char *key)
{
    const sf_node *tn = sf_node_get(sf_cfg_value(ctx), "targets");
    const sf_node *t = sf_node_get(tn, id);

    return key ? sf_node_get(t, key) : tn;
}

/* The collector gives its socket to socket_group (chown): that works for
 * root, or for a user in the group. Said at validate (ExecStartPre runs as
 * the service user), naming the group, rather than 'Operation not
 * permitted' at start. */
static bool socket_group_ok(sf_cfg_ctx *ctx, const sf_node *at, const char *name)
{
    struct group *g = getgrnam(name);
    struct passwd *pw;
    gid_t groups[256];
    int n;

    if (g == NULL) {
        sf_cfg_error(ctx, at, "socket_group", "group '%s' does not exist", name);
        return false;
    }
    if (geteuid() == 0 || getegid() == g->gr_gid)
        return true;
    n = getgroups((int)(sizeof(groups) / sizeof(groups[0])), groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == g->gr_gid)
            return true;
    pw = getpwuid(geteuid());
    sf_cfg_error(ctx, at, "socket_group", "the collector's user '%s' (uid %u) is not in group "
                 "'%s', so it cannot give the control socket to it: add the user to the group "
                 "(the unit: SupplementaryGroups=%s)", pw ? pw->pw_name : "?",
                 (unsigned)geteuid(), name, name);
    return false;
}

sf_status sf_tc_check(sf_cfg_ctx *ctx, void *config)
{
    sf_tc_config *c = config;
    const sf_node *v = sf_cfg_value(ctx);
    sf_status st = SF_OK;
    bool resting = false;

    if (c->socket == NULL || c->socket[0] != '/') {
        sf_cfg_error(ctx, c->socket ? sf_node_get(v, "socket") : sf_cfg_node(ctx),
                     c->socket ? "socket" : NULL, c->socket ? "'%s' is not an absolute path"
                     : "missing required key 'socket'%s", c->socket ? c->socket : "");
        st = SF_CONFIG;
    } else if (strlen(c->socket) >= 108) {
        sf_cfg_error(ctx, sf_node_get(v, "socket"), "socket",
                     "path is longer than a unix socket allows (107 bytes)");
        st = SF_CONFIG;
    }
    if (c->audit_log == NULL || c->audit_log[0] != '/') {
        sf_cfg_error(ctx, c->audit_log ? sf_node_get(v, "audit_log") : sf_cfg_node(ctx),
                     c->audit_log ? "audit_log" : NULL, c->audit_log
                     ? "'%s' is not an absolute path" : "missing required key 'audit_log'%s",
                     c->audit_log ? c->audit_log : "");
        st = SF_CONFIG;
    }
    if (c->socket_group != NULL && !socket_group_ok(ctx, sf_node_get(v, "socket_group"),
                                                     c->socket_group))
        st = SF_CONFIG;
    if (c->levels.n == 0) {
        sf_cfg_error(ctx, sf_node_get(v, "levels") ? sf_node_get(v, "levels") : sf_cfg_node(ctx),
                     sf_node_get(v, "levels") ? "levels" : NULL,
                     "%s", sf_node_get(v, "levels") ? "no levels are allowed"
                     : "missing required key 'levels'");
        st = SF_CONFIG;
    }
    for (size_t i = 0; i < c->levels.n; i++)
        resting |= c->levels.v[i] == c->resting_level;
    if (c->levels.n > 0 && !resting) {
        const sf_node *rn = sf_node_get(v, "resting_level");
        sf_cfg_error(ctx, rn ? rn : sf_node_get(v, "levels"), rn ? "resting_level" : "levels",
                     "resting level %" PRId64 " is not one of the allowed levels", c->resting_level);
        st = SF_CONFIG;
    }
    if (c->targets.n == 0) {
        const sf_node *tn = target_key(ctx, NULL, NULL);
        sf_cfg_error(ctx, tn ? tn : sf_cfg_node(ctx), tn ? "targets" : NULL, "%s",
                     tn ? "no targets are defined" : "missing required key 'targets'");
        st = SF_CONFIG;
    }
    for (size_t i = 0; i < c->targets.n; i++) {
        const sf_tc_target *t = &c->targets.v[i];
        char sub[192];

        snprintf(sub, sizeof(sub), "targets.%s.endpoint", t->id);
        if (t->endpoint && !http_url(t->endpoint)) {
            sf_cfg_error(ctx, target_key(ctx, t->id, "endpoint"), sub,
                         "'%s' is not an http:// or https:// URL", t->endpoint);
            st = SF_CONFIG;
        }
        snprintf(sub, sizeof(sub), "targets.%s.tls", t->id);
        if (t->endpoint && strncasecmp(t->endpoint, "https://", 8) != 0 &&
            (t->ca_file || t->cert_file || t->insecure_skip_verify)) {
            sf_cfg_error(ctx, target_key(ctx, t->id, "tls"), sub,
                         "tls settings need an https:// endpoint");
            st = SF_CONFIG;
        }
        if ((t->cert_file == NULL) != (t->key_file == NULL)) {
            sf_cfg_error(ctx, target_key(ctx, t->id, "tls"), sub,
                         "'cert_file' and 'key_file' go together");
            st = SF_CONFIG;
        }
        if (strchr(t->id, '"') || strchr(t->id, '\\') || strlen(t->id) > 64) {
            snprintf(sub, sizeof(sub), "targets");
            sf_cfg_error(ctx, sf_node_get(target_key(ctx, NULL, NULL), t->id), sub,
                         "invalid target id '%s' (at most 64 characters, no quotes or backslashes)",
                         t->id);
            st = SF_CONFIG;
        }
    }
    if (sf_tc_check_latency(ctx, c) != SF_OK)
        st = SF_CONFIG;
    if (c->retry.initial_interval > c->retry.max_interval) {
        sf_cfg_error(ctx, sf_node_get(v, "retry_on_failure"), "retry_on_failure",
                     "'initial_interval' is longer than 'max_interval'");
        st = SF_CONFIG;
    }
    return st;
}

const sf_tc_target *sf_tc_find_target(const sf_tc_config *c, const char *id)
{
    for (size_t i = 0; i < c->targets.n; i++)
        if (strcmp(c->targets.v[i].id, id) == 0)
            return &c->targets.v[i];
    return NULL;
}

sf_status sf_tc_check_set(const sf_tc_config *c, const char *target, int64_t level,
                          int64_t for_ms, char *err, size_t err_size)
{
    bool allowed = false;
    char list[256] = "";
    size_t len = 0;

    if (sf_tc_find_target(c, target) == NULL) {
        for (size_t i = 0; i < c->targets.n && len < sizeof(list); i++)
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s'%s'", i ? ", " : "",
                                    c->targets.v[i].id);
        snprintf(err, err_size, "unknown target '%s' (known: %s)", target, list);
        return SF_INVALID;
    }
    for (size_t i = 0; i < c->levels.n; i++) {
        allowed |= c->levels.v[i] == level;
        if (len < sizeof(list))
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%" PRId64, i ? ", " : "",
                                    c->levels.v[i]);
    }
    if (!allowed) {
        snprintf(err, err_size, "level %" PRId64 " is not allowed (allowed: %s)", level, list);
        return SF_INVALID;
    }
    if (level == c->resting_level) {
        snprintf(err, err_size, "level %" PRId64 " is the resting level: use 'reset'", level);
        return SF_INVALID;
    }
    if (for_ms <= 0) {
        snprintf(err, err_size, "the window must last longer than 0");
        return SF_INVALID;
    }
    if (for_ms > c->max_window) {
        snprintf(err, err_size, "a window of %" PRId64 "ms is longer than max_window (%" PRId64
                 "ms)", for_ms, c->max_window);
        return SF_INVALID;
    }
    return SF_OK;
}

const sf_tc_config *sf_tc_config_of(const sf_config *cfg)
{
    for (size_t i = 0; cfg && i < cfg->n_extensions; i++)
        if (cfg->extensions[i]->type == &sf_trace_control_extension_type)
            return cfg->extensions[i]->config;
    for (size_t i = 0; cfg && i < cfg->n_components; i++)
        if (cfg->components[i].type == &sf_trace_control_extension_type)
            return cfg->components[i].config;
    return NULL;
}

/* sf_confmap.c: the config map decoder: one function fills any component's
 * config struct from its YAML mapping and its rows (key, type, default,
 * offset, help), rejects unknown keys with a did-you-mean, checks ranges and
 * reports every problem with its key path and position.
 *
 * Rules: a null value (`key:` or `key: ~`) of a scalar type counts as absent
 * (the default applies); a null list or map is empty; a null section is
 * present and empty. Defaults are YAML text decoded like any value. */
#include "internal/sf_config_int.h"
#include "sf_alloc.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Where values of rows with SF_CFG_NO_FIELD go: validated, then dropped. */
typedef union scratch {
    char *s;
    bool b;
    int64_t i;
    double d;
    int e;
    sf_strlist l;
    sf_strmap m;
    unsigned char bytes[1024];
} scratch;

void sf_cfg_ctx_init(sf_cfg_ctx *ctx, sf_diag *diag, sf_arena *arena)
{
    memset(ctx, 0, sizeof(*ctx));
    ctx->diag = diag;
    ctx->arena = arena;
    ctx->path = "";
}

const char *sf_cfg_path_join(sf_cfg_ctx *ctx, const char *base, const char *key)
{
    size_t bl = strlen(base), kl = strlen(key);
    char *p = sf_arena_alloc(ctx->arena, bl + kl + 2);

    if (p == NULL) {
        ctx->oom = true;
        return NULL;
    }
    memcpy(p, base, bl);
    if (bl > 0 && key[0] != '[')
        p[bl++] = '.';
    memcpy(p + bl, key, kl + 1);
    return p;
}

sf_status sf_cfg_path_item(sf_cfg_ctx *ctx, const char *base, size_t i)
{
    char idx[32];
    const char *path;

    snprintf(idx, sizeof(idx), "[%zu]", i);
    path = sf_cfg_path_join(ctx, base, idx);
    ctx->path = path != NULL ? path : base;
    return path != NULL ? SF_OK : SF_ENOMEM;
}

static void report(sf_cfg_ctx *ctx, bool warning, const sf_node *at, const char *subpath,
                   const char *fmt, va_list ap)
{
    char msg[1024];
    const char *path = ctx->path;

    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (subpath && *subpath) {
        path = sf_cfg_path_join(ctx, ctx->path, subpath);
        if (path == NULL)
            path = ctx->path;
    }
    if (warning)
        sf_diag_warn(ctx->diag, at, path, "%s", msg);
    else
        sf_diag_error(ctx->diag, at, path, "%s", msg);
}

void sf_cfg_error(sf_cfg_ctx *ctx, const sf_node *at, const char *subpath, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    report(ctx, false, at, subpath, fmt, ap);
    va_end(ap);
}

void sf_cfg_warn(sf_cfg_ctx *ctx, const sf_node *at, const char *subpath, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    report(ctx, true, at, subpath, fmt, ap);
    va_end(ap);
}

sf_status sf_cfg_check_server_name(sf_cfg_ctx *ctx, const sf_node *tls, const char *name,
                                    bool insecure)
{
    const sf_node *at = sf_node_get(tls, "server_name_override");

    if (name == NULL)
        return SF_OK;
    if (!sf_is_host_name(name)) {
        sf_cfg_error(ctx, at, "tls.server_name_override", "'%s' is not a host name (letters, "
                     "digits, '-' and '.'; no port or spaces)", name);
        return SF_CONFIG;
    }
    if (insecure) {
        sf_cfg_error(ctx, at, "tls.server_name_override", "needs TLS, but 'tls.insecure' is true");
        return SF_CONFIG;
    }
    return SF_OK;
}

const sf_node *sf_cfg_value(const sf_cfg_ctx *ctx)
{
    return ctx->value;
}

void *sf_cfg_alloc(sf_cfg_ctx *ctx, size_t size)
{
    void *p = sf_arena_alloc(ctx->arena, size ? size : 1);

    if (p == NULL) {
        ctx->oom = true;
        return NULL;
    }
    memset(p, 0, size);
    return p;
}

void *sf_cfg_list_alloc(sf_cfg_ctx *ctx, const sf_node *node, const char *what, size_t size,
                        sf_status *st)
{
    void *items;

    *st = SF_OK;
    if (node->kind == SF_NODE_SCALAR && node->is_null)
        return NULL;
    if (node->kind != SF_NODE_SEQ) {
        sf_cfg_error(ctx, node, NULL, "expected a list of %s", what);
        *st = SF_CONFIG;
        return NULL;
    }
    items = sf_cfg_alloc(ctx, (node->n ? node->n : 1) * size);
    if (items == NULL)
        *st = SF_ENOMEM;
    return items;
}

char *sf_cfg_strdup(sf_cfg_ctx *ctx, const char *s, size_t len)
{
    char *p = sf_arena_strndup(ctx->arena, s, len);

    if (p == NULL)
        ctx->oom = true;
    return p;
}

sf_status sf_cfg_strmap_alloc(sf_cfg_ctx *ctx, sf_strmap *m, size_t n)
{
    m->keys = sf_cfg_alloc(ctx, (n ? n : 1) * sizeof(*m->keys));
    m->values = sf_cfg_alloc(ctx, (n ? n : 1) * sizeof(*m->values));
    return m->keys != NULL && m->values != NULL ? SF_OK : SF_ENOMEM;
}

sf_status sf_cfg_strmap_add(sf_cfg_ctx *ctx, sf_strmap *m, const sf_node *key,
                            const sf_node *value)
{
    m->keys[m->n] = sf_cfg_strdup(ctx, key->text, key->len);
    m->values[m->n] = sf_cfg_strdup(ctx, value->text, value->len);
    if (m->keys[m->n] == NULL || m->values[m->n] == NULL)
        return SF_ENOMEM;
    m->n++;
    return SF_OK;
}

const sf_node *sf_cfg_node(const sf_cfg_ctx *ctx)
{
    return ctx->node;
}

/* The index of `key` in a MAP node, or -1. */
static ssize_t node_index(const sf_node *map, const char *key)
{
    if (map == NULL || map->kind != SF_NODE_MAP)
        return -1;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i]->text, key) == 0)
            return (ssize_t)i;
    return -1;
}

const sf_node *sf_node_get(const sf_node *map, const char *key)
{
    ssize_t i = node_index(map, key);

    return i < 0 ? NULL : map->items[i];
}

const sf_node *sf_node_key(const sf_node *map, const char *key)
{
    ssize_t i = node_index(map, key);

    return i < 0 ? NULL : map->keys[i];
}

/* ---- did you mean -------------------------------------------------------- */

size_t sf_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t rows[3][65];
    size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];

    if (la > 64 || lb > 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = prev[j] + 1;

            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (prev[j - 1] + cost < best)
                best = prev[j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
        size_t *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

const char *sf_cfg_suggest(const char *word, const char *const *cands, size_t n)
{
    const char *best = NULL;
    size_t best_d = 3, wl = strlen(word);

    for (size_t i = 0; i < n; i++)
        if (strcasecmp(word, cands[i]) == 0)
            return cands[i];
    for (size_t i = 0; i < n; i++) {
        size_t d = sf_edit_distance(word, cands[i]);

        if (d < best_d && d < wl && d < strlen(cands[i])) {
            best = cands[i];
            best_d = d;
        }
    }
    return best;
}

/* ---- values ---------------------------------------------------------------- */

static const char *kind_text(const sf_node *n)
{
    switch (n->kind) {
    case SF_NODE_MAP: return "a mapping";
    case SF_NODE_SEQ: return "a list";
    case SF_NODE_SCALAR: break;
    }
    return "a value";
}

static bool is_decimal(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    if (!isdigit((unsigned char)*s))
        return false;
    while (isdigit((unsigned char)*s))
        s++;
    return *s == '\0';
}

static bool is_number_text(const char *s)
{
    bool digit = false;

    if (*s == '-' || *s == '+')
        s++;
    for (; *s; s++) {
        if (isdigit((unsigned char)*s))
            digit = true;
        else if (*s != '.' && *s != 'e' && *s != 'E' && *s != '-' && *s != '+')
            return false;
    }
    return digit;
}

/* The choice index of `text` in "a|b|c", or -1. */
static int enum_index(const char *choices, const char *text)
{
    size_t tl = strlen(text);
    int idx = 0;

    for (const char *p = choices;; idx++) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);

        if (l == tl && strncmp(p, text, l) == 0)
            return idx;
        if (bar == NULL)
            return -1;
        p = bar + 1;
    }
}

static void enum_list(const char *choices, char *buf, size_t size)
{
    size_t off = 0;

    buf[0] = '\0';
    for (const char *p = choices; *p && off + 1 < size;) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);

        off += (size_t)snprintf(buf + off, size - off, "%s'%.*s'", off ? ", " : "", (int)l, p);
        if (bar == NULL)
            break;
        p = bar + 1;
    }
}

static sf_status decode_row(sf_cfg_ctx *ctx, const sf_config_row *row, const sf_node *key,
                            const sf_node *v, void *field);

static sf_status decode_scalar_value(sf_cfg_ctx *ctx, const sf_config_row *row, const sf_node *v,
                                     void *field)
{
    char a[48], b[48];

    switch (row->type) {
    case SF_CFG_STR:
        if (v->kind != SF_NODE_SCALAR) {
            sf_cfg_error(ctx, v, NULL, "expected a string, got %s", kind_text(v));
            return SF_CONFIG;
        }
        *(char **)field = sf_cfg_strdup(ctx, v->text, v->len);
        return ctx->oom ? SF_ENOMEM : SF_OK;
    case SF_CFG_BOOL:
        if (v->kind != SF_NODE_SCALAR) {
            sf_cfg_error(ctx, v, NULL, "expected true or false, got %s", kind_text(v));
            return SF_CONFIG;
        }
        if (v->plain && (!strcmp(v->text, "true") || !strcmp(v->text, "True") ||
                         !strcmp(v->text, "TRUE"))) {
            *(bool *)field = true;
            return SF_OK;
        }
        if (v->plain && (!strcmp(v->text, "false") || !strcmp(v->text, "False") ||
                         !strcmp(v->text, "FALSE"))) {
            *(bool *)field = false;
            return SF_OK;
        }
        sf_cfg_error(ctx, v, NULL, "invalid boolean '%s' (expected true or false%s)", v->text,
                     v->plain ? "" : ", unquoted");
        return SF_CONFIG;
    case SF_CFG_INT: {
        long long x;
        char *end;

        if (v->kind != SF_NODE_SCALAR) {
            sf_cfg_error(ctx, v, NULL, "expected an integer, got %s", kind_text(v));
            return SF_CONFIG;
        }
        if (!v->plain || !is_decimal(v->text)) {
            sf_cfg_error(ctx, v, NULL, "invalid integer '%s'", v->text);
            return SF_CONFIG;
        }
        errno = 0;
        x = strtoll(v->text, &end, 10);
        if (errno == ERANGE ||
            (row->min < row->max && (x < row->min || x > row->max))) {
            if (row->min < row->max)
                sf_cfg_error(ctx, v, NULL, "value '%s' is out of range (expected %lld to %lld)",
                             v->text, (long long)row->min, (long long)row->max);
            else
                sf_cfg_error(ctx, v, NULL, "value '%s' is out of range", v->text);
            return SF_CONFIG;
        }
        *(int64_t *)field = x;
        return SF_OK;
    }
    case SF_CFG_DOUBLE: {
        double x;
        char *end;

        if (v->kind != SF_NODE_SCALAR) {
            sf_cfg_error(ctx, v, NULL, "expected a number, got %s", kind_text(v));
            return SF_CONFIG;
        }
        errno = 0;
        x = strtod(v->text, &end);
        if (!v->plain || !is_number_text(v->text) || *end != '\0' || errno == ERANGE ||
            !isfinite(x)) {
            sf_cfg_error(ctx, v, NULL, "invalid number '%s'", v->text);
            return SF_CONFIG;
        }
        if (row->dmin < row->dmax && (x < row->dmin || x > row->dmax)) {
            sf_cfg_error(ctx, v, NULL, "value '%s' is out of range (expected %g to %g)",
                         v->text, row->dmin, row->dmax);
            return SF_CONFIG;
        }
        *(double *)field = x;
        return SF_OK;
    }
    case SF_CFG_DURATION: {
        int64_t ms;

        if (v->kind != SF_NODE_SCALAR) {
            sf_cfg_error(ctx, v, NULL, "expected a duration, e.g. '5s', got %s", kind_text(v));
            return SF_CONFIG;
        }
        if (sf_parse_duration(v->text, &ms) != SF_OK) {
            if (is_decimal(v->text) && v->text[0] != '-')
                sf_cfg_error(ctx, v, NULL, "duration needs a unit, e.g. '5s'");
            else
                sf_cfg_error(ctx, v, NULL,
                             "invalid duration '%s' (expected e.g. '5s', '250ms' or '1m30s')",
                             v->text);
            return SF_CONFIG;
        }
        if (row->min < row->max && (ms < row->min || ms > row->max)) {
            sf_format_duration(row->min, a, sizeof(a));
            sf_format_duration(row->max, b, sizeof(b));
            sf_cfg_error(ctx, v, NULL, "duration '%s' is out of range (expected %s to %s)",
                         v->text, a, b);
            return SF_CONFIG;
        }
        *(int64_t *)field = ms;
        return SF_OK;
    }
    case SF_CFG_SIZE: {
        int64_t bytes;

        if (v->kind != SF_NODE_SCALAR) {
            sf_cfg_error(ctx, v, NULL, "expected a size, e.g. '64KiB', got %s", kind_text(v));
            return SF_CONFIG;
        }
        if (sf_parse_size(v->text, &bytes) != SF_OK) {
            sf_cfg_error(ctx, v, NULL,
                         "invalid size '%s' (expected e.g. '512MiB', '64KiB', '10MB' or a number of bytes)",
                         v->text);
            return SF_CONFIG;
        }
        if (row->min < row->max && (bytes < row->min || bytes > row->max)) {
            sf_format_size(row->min, a, sizeof(a));
            sf_format_size(row->max, b, sizeof(b));
            sf_cfg_error(ctx, v, NULL, "size '%s' is out of range (expected %s to %s)", v->text,
                         a, b);
            return SF_CONFIG;
        }
        *(int64_t *)field = bytes;
        return SF_OK;
    }
    case SF_CFG_ENUM: {
        char list[256];
        int idx;

        enum_list(row->choices ? row->choices : "", list, sizeof(list));
        if (v->kind != SF_NODE_SCALAR) {
            sf_cfg_error(ctx, v, NULL, "expected one of %s, got %s", list, kind_text(v));
            return SF_CONFIG;
        }
        idx = enum_index(row->choices ? row->choices : "", v->text);
        if (idx < 0 && row->upstream != NULL && enum_index(row->upstream, v->text) >= 0) {
            sf_cfg_error(ctx, v, NULL, "'%s' is not supported by spanfence (use one of %s)",
                         v->text, list);
            return SF_CONFIG;
        }
        if (idx < 0) {
            sf_cfg_error(ctx, v, NULL, "unknown value '%s' (expected one of %s)", v->text, list);
            return SF_CONFIG;
        }
        *(int *)field = idx;
        return SF_OK;
    }
    default:
        break;
    }
    return SF_OK;
}

static sf_status decode_strlist(sf_cfg_ctx *ctx, const sf_node *v, sf_strlist *out)
{
    sf_status st = SF_OK;

    memset(out, 0, sizeof(*out));
    if (v->kind == SF_NODE_SCALAR && v->is_null)
        return SF_OK;
    if (v->kind != SF_NODE_SEQ) {
        sf_cfg_error(ctx, v, NULL, "expected a list of strings, got %s",
                     v->kind == SF_NODE_SCALAR ? "a single value" : kind_text(v));
        return SF_CONFIG;
    }
    out->v = sf_cfg_alloc(ctx, (v->n ? v->n : 1) * sizeof(*out->v));
    if (out->v == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < v->n; i++) {
        const sf_node *it = v->items[i];
        char idx[32];

        snprintf(idx, sizeof(idx), "[%zu]", i);
        if (it->kind != SF_NODE_SCALAR || it->is_null) {
            sf_cfg_error(ctx, it, idx, "expected a string, got %s",
                         it->kind == SF_NODE_SCALAR ? "an empty value" : kind_text(it));
            st = SF_CONFIG;
            continue;
        }
        out->v[out->n] = sf_cfg_strdup(ctx, it->text, it->len);
        if (out->v[out->n] == NULL)
            return SF_ENOMEM;
        out->n++;
    }
    return st;
}

static sf_status decode_strmap(sf_cfg_ctx *ctx, const sf_node *v, sf_strmap *out)
{
    sf_status st = SF_OK;

    memset(out, 0, sizeof(*out));
    if (v->kind == SF_NODE_SCALAR && v->is_null)
        return SF_OK;
    if (v->kind != SF_NODE_MAP) {
        sf_cfg_error(ctx, v, NULL, "expected a mapping of names to strings, got %s",
                     v->kind == SF_NODE_SCALAR ? "a single value" : kind_text(v));
        return SF_CONFIG;
    }
    if (sf_cfg_strmap_alloc(ctx, out, v->n) != SF_OK)
        return SF_ENOMEM;
    for (size_t i = 0; i < v->n; i++) {
        const sf_node *it = v->items[i];

        if (it->kind != SF_NODE_SCALAR) {
            sf_cfg_error(ctx, it, v->keys[i]->text, "expected a string, got %s", kind_text(it));
            st = SF_CONFIG;
            continue;
        }
        if (sf_cfg_strmap_add(ctx, out, v->keys[i], it) != SF_OK)
            return SF_ENOMEM;
    }
    return st;
}

static sf_status decode_map(sf_cfg_ctx *ctx, const sf_config_row *rows, const sf_node *map,
                            void *base, const sf_node *at_default);

/* A LIST row: every item a mapping decoded with the row's rows into its
 * element, under the path "key[i]". */
static sf_status decode_list(sf_cfg_ctx *ctx, const sf_config_row *row, const sf_node *v,
                             sf_cfg_list *out)
{
    const char *path = ctx->path;
    sf_status st = SF_OK;

    memset(out, 0, sizeof(*out));
    if (v->kind == SF_NODE_SCALAR && v->is_null)
        return SF_OK;
    if (v->kind != SF_NODE_SEQ) {
        sf_cfg_error(ctx, v, NULL, "expected a list of mappings, got %s",
                     v->kind == SF_NODE_SCALAR ? "a single value" : kind_text(v));
        return SF_CONFIG;
    }
    if (row->elem_size == 0 || row->sub == NULL)
        return SF_OK;
    out->v = sf_cfg_alloc(ctx, (v->n ? v->n : 1) * row->elem_size);
    if (out->v == NULL)
        return SF_ENOMEM;
    memset(out->v, 0, (v->n ? v->n : 1) * row->elem_size);
    for (size_t i = 0; i < v->n; i++) {
        const sf_node *it = v->items[i];
        sf_status r;

        if (sf_cfg_path_item(ctx, path, i) != SF_OK)
            return SF_ENOMEM;
        if (it->kind != SF_NODE_MAP) {
            sf_cfg_error(ctx, it, NULL, "expected a mapping, got %s",
                         it->kind == SF_NODE_SCALAR ? "a single value" : kind_text(it));
            r = SF_CONFIG;
        } else {
            r = decode_map(ctx, row->sub, it, (char *)out->v + out->n * row->elem_size, it);
        }
        ctx->path = path;
        if (r == SF_ENOMEM || ctx->oom)
            return SF_ENOMEM;
        if (r != SF_OK)
            st = r;
        out->n++;
    }
    return st;
}

static sf_status decode_map(sf_cfg_ctx *ctx, const sf_config_row *rows, const sf_node *map,
                            void *base, const sf_node *at_default)
{
    size_t errors = sf_diag_errors(ctx->diag);
    const char *path = ctx->path;

    if (map && map->kind == SF_NODE_SCALAR && map->is_null)
        map = NULL;
    if (map && map->kind != SF_NODE_MAP) {
        sf_cfg_error(ctx, map, NULL, "expected a mapping, got %s",
                     map->kind == SF_NODE_SCALAR ? "a single value" : kind_text(map));
        return SF_CONFIG;
    }
    /* unknown keys */
    for (size_t i = 0; map && i < map->n; i++) {
        const char *key = map->keys[i]->text;
        const char *cands[128];
        size_t n = 0;
        const sf_config_row *r;
        const char *hint;

        for (r = rows; r->type != SF_CFG_END; r++) {
            if (strcmp(r->key, key) == 0)
                break;
            if (n < 128)
                cands[n++] = r->key;
        }
        if (r->type != SF_CFG_END)
            continue;
        hint = sf_cfg_suggest(key, cands, n);
        if (hint)
            sf_cfg_error(ctx, map->keys[i], NULL, "unknown key '%s' (did you mean '%s'?)", key,
                         hint);
        else
            sf_cfg_error(ctx, map->keys[i], NULL, "unknown key '%s'", key);
    }
    for (const sf_config_row *r = rows; r->type != SF_CFG_END; r++) {
        const sf_node *key = NULL, *v = NULL;
        scratch tmp;
        void *field;

        for (size_t i = 0; map && i < map->n; i++) {
            if (strcmp(map->keys[i]->text, r->key) == 0) {
                key = map->keys[i];
                v = map->items[i];
                break;
            }
        }
        if (r->offset == SF_CFG_NO_FIELD) {
            memset(&tmp, 0, sizeof(tmp));
            field = &tmp;
        } else {
            field = (char *)base + r->offset;
        }
        ctx->path = sf_cfg_path_join(ctx, path, r->key);
        if (ctx->path == NULL) {
            ctx->path = path;
            return SF_ENOMEM;
        }
        if (key == NULL) {
            sf_node def;

            if (r->type == SF_CFG_SECTION) {
                const sf_node *saved = ctx->node;

                decode_map(ctx, r->sub, NULL, field, at_default);
                ctx->node = saved;
            } else if (r->def != NULL) {
                def = (sf_node){ .kind = SF_NODE_SCALAR, .text = (char *)r->def,
                                 .len = strlen(r->def), .plain = true,
                                 .line = at_default ? at_default->line : 0,
                                 .col = at_default ? at_default->col : 0 };
                decode_row(ctx, r, at_default, &def, field);
            }
        } else {
            decode_row(ctx, r, key, v, field);
        }
        ctx->path = path;
        if (ctx->oom)
            return SF_ENOMEM;
    }
    return sf_diag_errors(ctx->diag) > errors ? SF_CONFIG : SF_OK;
}

static sf_status decode_row(sf_cfg_ctx *ctx, const sf_config_row *row, const sf_node *key,
                            const sf_node *v, void *field)
{
    bool null = v->kind == SF_NODE_SCALAR && v->is_null;

    switch (row->type) {
    case SF_CFG_STR:
    case SF_CFG_BOOL:
    case SF_CFG_INT:
    case SF_CFG_DOUBLE:
    case SF_CFG_DURATION:
    case SF_CFG_SIZE:
    case SF_CFG_ENUM:
        if (null) {
            sf_node def;

            if (row->def == NULL)
                return SF_OK;
            def = (sf_node){ .kind = SF_NODE_SCALAR, .text = (char *)row->def,
                             .len = strlen(row->def), .plain = true, .line = v->line,
                             .col = v->col };
            return decode_scalar_value(ctx, row, &def, field);
        }
        return decode_scalar_value(ctx, row, v, field);
    case SF_CFG_STRLIST:
        return decode_strlist(ctx, v, field);
    case SF_CFG_STRMAP:
        return decode_strmap(ctx, v, field);
    case SF_CFG_LIST:
        return decode_list(ctx, row, v, field);
    case SF_CFG_SECTION: {
        const sf_node *saved = ctx->node;
        sf_status st;

        *(bool *)field = true;
        ctx->node = key;
        st = decode_map(ctx, row->sub, v, field, key);
        ctx->node = saved;
        return st;
    }
    case SF_CFG_CUSTOM:
        return row->parse ? row->parse(ctx, v, field) : SF_OK;
    case SF_CFG_REJECT:
        sf_cfg_error(ctx, key, NULL, "%s", row->help ? row->help : "this key is not supported");
        return SF_CONFIG;
    case SF_CFG_IGNORE:
        sf_cfg_warn(ctx, key, NULL, "'%s' has no effect in spanfence", row->key);
        return SF_OK;
    case SF_CFG_END:
        break;
    }
    return SF_OK;
}

sf_status sf_cfg_decode(sf_cfg_ctx *ctx, const sf_config_row *rows, const sf_node *map,
                        void *base)
{
    sf_status st = decode_map(ctx, rows, map, base, ctx->node ? ctx->node : map);

    return ctx->oom ? SF_ENOMEM : st;
}

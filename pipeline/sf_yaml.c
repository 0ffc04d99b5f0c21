/* sf_yaml.c: YAML text -> sf_node tree, with libyaml's document API.
 * Owns: positions (1-based), anchors and aliases (an alias yields the very
 * node it names, so nothing is copied), YAML 1.1 merge keys, duplicate keys,
 * and ${env:VAR} expansion in scalar values (never in keys).
 *
 * DESIGN: each libyaml mapping/sequence is converted once and memoized, so a
 * file built from nested aliases ("billion laughs") costs what it weighs.
 * A node reached again while it is still being converted is a recursive
 * alias and is refused. Every node and string lives in the config's arena. */
#include "internal/sf_config_int.h"
#include "sf_alloc.h"
#include "sf_dynbuf.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#define SF_YAML_MAX_DEPTH 64
/* One scalar after ${VAR} expansion. */
#define SF_ENV_EXPAND_MAX (1024 * 1024)

enum { CONVERT_NONE, CONVERT_BUSY, CONVERT_DONE };

typedef struct yconv {
    yaml_document_t *doc;
    sf_arena *arena;
    sf_diag *diag;
    size_t n_nodes;
    unsigned char *state;       /* per libyaml node: CONVERT_* */
    sf_node **memo;
    const char *file;           /* stamped on every node: the source it came from */
    int source;
    bool oom;
} yconv;

/* ---- ${env} expansion -------------------------------------------------- */

static bool valid_var_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return false;
    return true;
}

static char *arena_printf(sf_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static char *arena_printf(sf_arena *a, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    return sf_arena_strndup(a, buf, strlen(buf));
}

sf_status sf_env_expand(const char *in, size_t len, sf_arena *arena, char **out,
                        size_t *out_len, char **err)
{
    sf_dynbuf buf;
    char *res;
    sf_status st = SF_OK;

    *err = NULL;
    if (memchr(in, '$', len) == NULL) {
        res = sf_arena_strndup(arena, in, len);
        if (res == NULL)
            return SF_ENOMEM;
        *out = res;
        *out_len = len;
        return SF_OK;
    }
    sf_dynbuf_init(&buf, SF_ENV_EXPAND_MAX);
#define PUT(src, cnt)                                                   \
    do {                                                                \
        st = sf_dynbuf_add(&buf, (src), (cnt));                         \
        if (st == SF_TOOBIG) {                                          \
            *err = arena_printf(arena, "'%.*s' expands to more than %d bytes", \
                                (int)len, in, SF_ENV_EXPAND_MAX);      \
            st = *err ? SF_CONFIG : SF_ENOMEM;                          \
        }                                                               \
        if (st != SF_OK)                                                \
            goto out_free_buf;                                          \
    } while (0)
    for (size_t i = 0; i < len;) {
        const char *close, *name, *def = NULL, *sep, *val;
        size_t name_len, def_len = 0;
        char var[256];

        if (in[i] != '$' || i + 1 >= len || (in[i + 1] != '$' && in[i + 1] != '{')) {
            PUT(&in[i], 1);
            i++;
            continue;
        }
        if (in[i + 1] == '$') {
            PUT("$", 1);
            i += 2;
            continue;
        }
        close = memchr(in + i + 2, '}', len - i - 2);
        if (close == NULL) {
            *err = arena_printf(arena, "unterminated '${' in '%.*s'", (int)len, in);
            st = *err ? SF_CONFIG : SF_ENOMEM;
            goto out_free_buf;
        }
        name = in + i + 2;
        name_len = (size_t)(close - name);
        if (name_len >= 4 && strncmp(name, "env:", 4) == 0) {
            name += 4;
            name_len -= 4;
        } else {
            const char *colon = memchr(name, ':', name_len);

            if (colon && !(colon + 1 < close && colon[1] == '-')) {
                *err = arena_printf(arena, "unsupported config provider '%.*s' (only 'env' is supported)",
                                    (int)(colon - name), name);
                st = *err ? SF_CONFIG : SF_ENOMEM;
                goto out_free_buf;
            }
        }
        sep = NULL;
        for (const char *p = name; p + 1 < close; p++) {
            if (p[0] == ':' && p[1] == '-') {
                sep = p;
                break;
            }
        }
        if (sep) {
            def = sep + 2;
            def_len = (size_t)(close - def);
            name_len = (size_t)(sep - name);
        }
        if (!valid_var_name(name, name_len) || name_len >= sizeof(var)) {
            *err = arena_printf(arena, "invalid environment variable name '%.*s'",
                                (int)name_len, name);
            st = *err ? SF_CONFIG : SF_ENOMEM;
            goto out_free_buf;
        }
        memcpy(var, name, name_len);
        var[name_len] = '\0';
        val = getenv(var);
        if (val) {
            PUT(val, strlen(val));
        } else if (def) {
            PUT(def, def_len);
        } else {
            *err = arena_printf(arena, "environment variable '%s' is not set", var);
            st = *err ? SF_CONFIG : SF_ENOMEM;
            goto out_free_buf;
        }
        i = (size_t)(close - in) + 1;
    }
#undef PUT
    res = sf_arena_strndup(arena, sf_dynbuf_ptr(&buf), sf_dynbuf_len(&buf));
    if (res == NULL) {
        st = SF_ENOMEM;
        goto out_free_buf;
    }
    *out = res;
    *out_len = sf_dynbuf_len(&buf);
out_free_buf:
    sf_dynbuf_release(&buf);
    return st;
}

sf_status sf_config_expand_env(const char *in, char **out, char **err)
{
    sf_arena *arena = sf_arena_create(4096, 2 * SF_ENV_EXPAND_MAX);
    char *res = NULL, *why = NULL;
    size_t len;
    sf_status st;

    *out = NULL;
    *err = NULL;
    if (arena == NULL)
        return SF_ENOMEM;
    st = sf_env_expand(in, strlen(in), arena, &res, &len, &why);
    if (st == SF_OK && (*out = sf_strdup(res)) == NULL)
        st = SF_ENOMEM;
    else if (st == SF_CONFIG && (*err = sf_strdup(why)) == NULL)
        st = SF_ENOMEM;
    sf_arena_destroy(arena);
    return st;
}

/* ---- conversion ---------------------------------------------------------- */

static const char *join(yconv *y, const char *base, const char *key)
{
    size_t bl = strlen(base), kl = strlen(key);
    bool dot = bl > 0 && key[0] != '[';
    char *p = sf_arena_alloc(y->arena, bl + kl + 2);

    if (p == NULL) {
        y->oom = true;
        return NULL;
    }
    memcpy(p, base, bl);
    if (dot)
        p[bl++] = '.';
    memcpy(p + bl, key, kl + 1);
    return p;
}

static sf_node *new_node(yconv *y, sf_node_kind kind, const yaml_node_t *yn)
{
    sf_node *n = sf_arena_alloc(y->arena, sizeof(*n));

    if (n == NULL) {
        y->oom = true;
        return NULL;
    }
    memset(n, 0, sizeof(*n));
    n->kind = kind;
    n->file = y->file;
    n->source = y->source;
    n->line = (int)yn->start_mark.line + 1;
    n->col = (int)yn->start_mark.column + 1;
    return n;
}

static bool is_null_text(const char *s, size_t n)
{
    return n == 0 || (n == 1 && s[0] == '~') ||
           (n == 4 && (memcmp(s, "null", 4) == 0 || memcmp(s, "Null", 4) == 0 ||
                       memcmp(s, "NULL", 4) == 0));
}

static sf_node *convert(yconv *y, int index, const char *path, bool is_key, int depth);

static sf_node *convert_scalar(yconv *y, yaml_node_t *yn, const char *path, bool is_key)
{
    const char *v = (const char *)yn->data.scalar.value;
    size_t len = yn->data.scalar.length;
    sf_node *n = new_node(y, SF_NODE_SCALAR, yn);
    char *err = NULL;
    sf_status st;

    if (n == NULL)
        return NULL;
    n->plain = yn->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (memchr(v, '\0', len) != NULL) {
        sf_diag_error(y->diag, n, path, "a NUL character is not allowed in a value");
        n->text = "";
        return n;
    }
    if (n->plain && is_null_text(v, len)) {
        n->is_null = true;
        n->text = "";
        return n;
    }
    if (is_key) {
        n->text = sf_arena_strndup(y->arena, v, len);
        n->len = len;
        if (n->text == NULL)
            y->oom = true;
        return n->text ? n : NULL;
    }
    st = sf_env_expand(v, len, y->arena, &n->text, &n->len, &err);
    if (st == SF_CONFIG) {
        /* keep the text as written: the load fails anyway, and an empty
         * value would only add "is required" noise from checks */
        sf_diag_error(y->diag, n, path, "%s", err);
        n->invalid = true;
        n->text = sf_arena_strndup(y->arena, v, len);
        n->len = len;
        if (n->text == NULL) {
            y->oom = true;
            return NULL;
        }
    } else if (st != SF_OK) {
        y->oom = true;
        return NULL;
    } else if (n->len != len || memcmp(n->text, v, len) != 0) {
        n->raw = sf_arena_strndup(y->arena, v, len);
        if (n->raw == NULL) {
            y->oom = true;
            return NULL;
        }
    }
    return n;
}

static sf_node *convert_seq(yconv *y, yaml_node_t *yn, const char *path, int depth)
{
    sf_node *n = new_node(y, SF_NODE_SEQ, yn);
    size_t count = (size_t)(yn->data.sequence.items.top - yn->data.sequence.items.start);

    if (n == NULL)
        return NULL;
    n->items = sf_arena_alloc(y->arena, (count ? count : 1) * sizeof(*n->items));
    if (n->items == NULL) {
        y->oom = true;
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        char idx[32];
        const char *ipath;

        snprintf(idx, sizeof(idx), "[%zu]", i);
        ipath = join(y, path, idx);
        if (ipath == NULL)
            return NULL;
        n->items[n->n] = convert(y, yn->data.sequence.items.start[i], ipath, false, depth + 1);
        if (y->oom)
            return NULL;
        if (n->items[n->n])
            n->n++;
    }
    return n;
}

static bool has_key(const sf_node *map, size_t upto, const char *key)
{
    for (size_t i = 0; i < upto; i++)
        if (strcmp(map->keys[i]->text, key) == 0)
            return true;
    return false;
}

static sf_node *convert_map(yconv *y, yaml_node_t *yn, const char *path, int depth)
{
    sf_node *n = new_node(y, SF_NODE_MAP, yn);
    size_t count = (size_t)(yn->data.mapping.pairs.top - yn->data.mapping.pairs.start);
    size_t n_merge = 0, cap;
    sf_node **merge;                /* mappings merged in by '<<', in order */

    if (n == NULL)
        return NULL;
    merge = sf_arena_alloc(y->arena, (count ? count : 1) * sizeof(*merge) * 1);
    n->keys = sf_arena_alloc(y->arena, (count ? count : 1) * sizeof(*n->keys));
    n->items = sf_arena_alloc(y->arena, (count ? count : 1) * sizeof(*n->items));
    if (merge == NULL || n->keys == NULL || n->items == NULL) {
        y->oom = true;
        return NULL;
    }
    cap = count;
    bool seen_merge = false;
    for (size_t i = 0; i < count; i++) {
        yaml_node_pair_t *pair = &yn->data.mapping.pairs.start[i];
        yaml_node_t *yk = yaml_document_get_node(y->doc, pair->key);
        sf_node *k, *v;
        const char *kpath;

        if (yk == NULL || yk->type != YAML_SCALAR_NODE) {
            sf_node at = { .line = yk ? (int)yk->start_mark.line + 1 : n->line,
                           .col = yk ? (int)yk->start_mark.column + 1 : n->col };
            sf_diag_error(y->diag, &at, path[0] ? path : NULL,
                          "a mapping key must be a plain value, not a list or mapping");
            continue;
        }
        k = convert(y, pair->key, path, true, depth + 1);
        if (k == NULL)
            return NULL;
        if (k->plain && strcmp(k->text, "<<") == 0) {
            if (seen_merge) {
                sf_diag_error(y->diag, k, path[0] ? path : NULL, "duplicate key '<<'");
                continue;
            }
            seen_merge = true;
            v = convert(y, pair->value, path, false, depth + 1);
            if (y->oom)
                return NULL;
            if (v && v->kind == SF_NODE_MAP) {
                merge[n_merge++] = v;
            } else if (v && v->kind == SF_NODE_SEQ) {
                sf_node **grown = sf_arena_alloc(y->arena, (cap + v->n + 1) * sizeof(*grown));

                if (grown == NULL) {
                    y->oom = true;
                    return NULL;
                }
                memcpy(grown, merge, n_merge * sizeof(*merge));
                merge = grown;
                cap += v->n;
                for (size_t j = 0; j < v->n; j++) {
                    if (v->items[j]->kind == SF_NODE_MAP)
                        merge[n_merge++] = v->items[j];
                    else
                        sf_diag_error(y->diag, v->items[j], path[0] ? path : NULL,
                                      "a merge key ('<<') takes a mapping or a list of mappings");
                }
            } else if (v) {
                sf_diag_error(y->diag, v, path[0] ? path : NULL,
                              "a merge key ('<<') takes a mapping or a list of mappings");
            }
            continue;
        }
        kpath = join(y, path, k->text);
        if (kpath == NULL)
            return NULL;
        if (has_key(n, n->n, k->text)) {
            sf_diag_error(y->diag, k, kpath, "duplicate key '%s'", k->text);
            continue;
        }
        v = convert(y, pair->value, kpath, false, depth + 1);
        if (y->oom)
            return NULL;
        if (v == NULL)
            continue;
        n->keys[n->n] = k;
        n->items[n->n] = v;
        n->n++;
    }
    if (n_merge > 0) {
        size_t total = n->n;

        for (size_t m = 0; m < n_merge; m++)
            total += merge[m]->n;
        sf_node **keys = sf_arena_alloc(y->arena, total * sizeof(*keys));
        sf_node **items = sf_arena_alloc(y->arena, total * sizeof(*items));

        if (keys == NULL || items == NULL) {
            y->oom = true;
            return NULL;
        }
        memcpy(keys, n->keys, n->n * sizeof(*keys));
        memcpy(items, n->items, n->n * sizeof(*items));
        n->keys = keys;
        n->items = items;
        /* explicit keys win; among merged mappings the earlier one wins */
        for (size_t m = 0; m < n_merge; m++) {
            for (size_t j = 0; j < merge[m]->n; j++) {
                if (has_key(n, n->n, merge[m]->keys[j]->text))
                    continue;
                n->keys[n->n] = merge[m]->keys[j];
                n->items[n->n] = merge[m]->items[j];
                n->n++;
            }
        }
    }
    return n;
}

static sf_node *convert(yconv *y, int index, const char *path, bool is_key, int depth)
{
    yaml_node_t *yn = yaml_document_get_node(y->doc, index);
    size_t slot = (size_t)index - 1;
    sf_node *n;

    if (yn == NULL)
        return NULL;
    if (yn->type == YAML_SCALAR_NODE)
        return convert_scalar(y, yn, path, is_key);
    if (y->state[slot] == CONVERT_DONE)
        return y->memo[slot];
    if (y->state[slot] == CONVERT_BUSY || depth > SF_YAML_MAX_DEPTH) {
        sf_node at = { .line = (int)yn->start_mark.line + 1, .col = (int)yn->start_mark.column + 1 };

        sf_diag_error(y->diag, &at, path[0] ? path : NULL,
                      depth > SF_YAML_MAX_DEPTH ? "nesting is too deep (more than %d levels)"
                                                : "an alias must not refer to a node that contains it",
                      SF_YAML_MAX_DEPTH);
        return NULL;
    }
    y->state[slot] = CONVERT_BUSY;
    n = yn->type == YAML_MAPPING_NODE ? convert_map(y, yn, path, depth)
                                      : convert_seq(y, yn, path, depth);
    y->state[slot] = CONVERT_DONE;
    y->memo[slot] = n;
    return n;
}

static void syntax_error(sf_diag *diag, const yaml_parser_t *p)
{
    const char *problem = p->problem ? p->problem : "invalid yaml";

    if (p->error == YAML_MEMORY_ERROR) {
        sf_diag_error_at(diag, 1, 1, NULL, "out of memory while parsing yaml");
        return;
    }
    if (p->context)
        sf_diag_error_at(diag, (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1,
                         NULL, "invalid yaml: %s (%s)", problem, p->context);
    else
        sf_diag_error_at(diag, (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1,
                         NULL, "invalid yaml: %s", problem);
}

sf_status sf_yaml_load(const char *text, size_t len, sf_arena *arena, sf_diag *diag,
                       sf_node **root)
{
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    yaml_node_t *yroot, *xroot;
    yconv y = { .doc = &doc, .arena = arena, .diag = diag };
    size_t errors_before = sf_diag_errors(diag);
    sf_status st = SF_CONFIG;

    *root = NULL;
    if (!yaml_parser_initialize(&parser))
        return SF_ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        syntax_error(diag, &parser);
        goto out_delete_parser;
    }
    yroot = yaml_document_get_root_node(&doc);
    if (yroot == NULL || (yroot->type == YAML_SCALAR_NODE &&
                          yroot->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                          is_null_text((const char *)yroot->data.scalar.value,
                                       yroot->data.scalar.length))) {
        sf_diag_error_at(diag, 1, 1, NULL, "the file is empty");
        goto out_delete_doc;
    }
    if (yroot->type != YAML_MAPPING_NODE) {
        sf_diag_error_at(diag, (int)yroot->start_mark.line + 1, (int)yroot->start_mark.column + 1,
                         NULL, "the top level must be a mapping");
        goto out_delete_doc;
    }
    if (!yaml_parser_load(&parser, &extra)) {
        syntax_error(diag, &parser);
        goto out_delete_doc;
    }
    xroot = yaml_document_get_root_node(&extra);
    if (xroot != NULL)
        sf_diag_error_at(diag, (int)extra.start_mark.line + 1, (int)extra.start_mark.column + 1,
                         NULL, "only one yaml document is allowed in a config file");
    yaml_document_delete(&extra);

    y.source = sf_diag_source(diag);
    y.file = sf_arena_strndup(arena, sf_diag_file(diag), strlen(sf_diag_file(diag)));
    if (y.file == NULL) {
        st = SF_ENOMEM;
        goto out_delete_doc;
    }
    y.n_nodes = (size_t)(doc.nodes.top - doc.nodes.start);
    y.state = sf_calloc(y.n_nodes, 1);
    y.memo = sf_calloc(y.n_nodes, sizeof(*y.memo));
    if (y.state == NULL || y.memo == NULL) {
        st = SF_ENOMEM;
        goto out_free_memo;
    }
    *root = convert(&y, 1 + (int)(yroot - doc.nodes.start), "", false, 0);
    if (y.oom || sf_diag_oom(diag)) {
        *root = NULL;
        st = SF_ENOMEM;
    } else if (sf_diag_errors(diag) == errors_before && *root != NULL) {
        st = SF_OK;
    }
out_free_memo:
    sf_free(y.memo);
    sf_free(y.state);
out_delete_doc:
    yaml_document_delete(&doc);
out_delete_parser:
    yaml_parser_delete(&parser);
    return st;
}

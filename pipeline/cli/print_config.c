/* pipeline/cli/print_config.c: `spanfence print-config`, upstream's
 * `otelcol print-config` (redacted mode): the effective config after every
 * --config / --set merge and ${env:...} expansion, each component's keys
 * with their defaults filled in from its type's config map, written as
 * YAML with libyaml's emitter. Secrets are never printed: keys that name a
 * credential (pseudonym_key, *password*, *token*, *secret*, api_key,
 * authorization, key_pem), the values of headers named like a credential
 * (secret_header: *auth*, *token*, *secret*, *passw*, *key*, *cookie*,
 * *session*, *credential*, *signature*) and the user:password part of a
 * URL are "[REDACTED]", whether written in the file or from the
 * environment. Other headers (x-vm-id, x-tenant) are identifiers and are
 * printed. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "internal/sf_core.h"
#include "sf_cli.h"
#include "sf_config.h"
#include "sf_net.h"

#define REDACTED "[REDACTED]"

typedef struct out {
    yaml_emitter_t em;
    bool failed;
} out;

static void emit(out *o, yaml_event_t *ev, int made)
{
    if (!made || !yaml_emitter_emit(&o->em, ev))
        o->failed = true;
}

static void scalar(out *o, const char *text, bool plain)
{
    yaml_event_t ev;

    if (o->failed)
        return;
    /* a scalar quoted in the file stays quoted ("true" is a string) */
    emit(o, &ev, yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text,
                                              (int)strlen(text), plain, 1,
                                              YAML_ANY_SCALAR_STYLE));
}

static void map_start(out *o)
{
    yaml_event_t ev;

    if (!o->failed)
        emit(o, &ev, yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                                         YAML_BLOCK_MAPPING_STYLE));
}

static void map_end(out *o)
{
    yaml_event_t ev;

    if (!o->failed)
        emit(o, &ev, yaml_mapping_end_event_initialize(&ev));
}

/* Whether the value of `key` is a credential (a whole subtree). */
static bool secret_key(const char *key)
{
    static const char *const exact[] = { "pseudonym_key", "api_key", "apikey", "authorization",
                                         "key_pem", "bearer_token", "credentials", "headers_list" };
    static const char *const parts[] = { "password", "token", "secret" };

    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
        if (strcasecmp(key, exact[i]) == 0)
            return true;
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (strcasestr(key, parts[i]) != NULL)
            return true;
    return false;
}

/* Whether a header named `name` carries a credential: Authorization,
 * Proxy-Authorization, Cookie, X-Api-Key, X-Auth-Token, X-Amz-Security-Token,
 * X-Session-Id... Matched loosely on purpose: a header wrongly redacted
 * costs a line of print-config, one wrongly printed a credential. */
static bool secret_header(const char *name)
{
    static const char *const parts[] = { "auth", "token", "secret", "passw", "key", "cookie",
                                         "session", "credential", "signature" };

    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (strcasestr(name, parts[i]) != NULL)
            return true;
    return secret_key(name);
}

static void emit_node(out *o, const sf_node *n, bool redact);

/* A `headers` mapping: each value redacted when its header name is a
 * credential's (or the whole when `redact`); anything but a mapping
 * redacted whole. */
static void emit_headers(out *o, const sf_node *n, bool redact)
{
    if (n == NULL || n->kind != SF_NODE_MAP) {
        emit_node(o, n, true);
        return;
    }
    map_start(o);
    for (size_t i = 0; i < n->n; i++) {
        scalar(o, n->keys[i]->text, n->keys[i]->plain);
        emit_node(o, n->items[i], redact || secret_header(n->keys[i]->text));
    }
    map_end(o);
}

/* A key's value: a headers mapping by its header names, else redacted
 * whole when `redact` or the key names a secret. */
static void emit_value(out *o, const char *key, const sf_node *n, bool redact)
{
    if (strcmp(key, "headers") == 0)
        emit_headers(o, n, redact);
    else
        emit_node(o, n, redact || secret_key(key));
}

/* A scalar as written, a URL without its user:password@ (sf_net.h). */
static void emit_text(out *o, const sf_node *n)
{
    char buf[2048];
    const char *t = sf_net_url_redacted(n->text, buf, sizeof(buf));

    scalar(o, t, t == n->text && n->plain);
}

/* A node as written (after ${env} expansion); every scalar under it
 * redacted when `redact` (or under a key that names a secret, or a header
 * that does: emit_value). */
static void emit_node(out *o, const sf_node *n, bool redact)
{
    yaml_event_t ev;

    if (o->failed)
        return;
    if (n == NULL || n->kind == SF_NODE_SCALAR) {
        if (n == NULL || n->is_null)
            scalar(o, "null", true);
        else if (redact)
            scalar(o, REDACTED, false);
        else
            emit_text(o, n);
        return;
    }
    if (n->kind == SF_NODE_SEQ) {
        emit(o, &ev, yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                          YAML_ANY_SEQUENCE_STYLE));
        for (size_t i = 0; i < n->n; i++)
            emit_node(o, n->items[i], redact);
        if (!o->failed)
            emit(o, &ev, yaml_sequence_end_event_initialize(&ev));
        return;
    }
    map_start(o);
    for (size_t i = 0; i < n->n; i++) {
        scalar(o, n->keys[i]->text, n->keys[i]->plain);
        emit_value(o, n->keys[i]->text, n->items[i], redact);
    }
    map_end(o);
}

/* Whether a section left out of the file is in effect with its defaults:
 * one with an `enabled` key (sending_queue, retry_on_failure) says so
 * itself; any other (a protocol not served, tls) is off when absent. */
static bool on_by_default(const sf_config_row *rows)
{
    for (const sf_config_row *r = rows; r != NULL && r->key != NULL; r++)
        if (strcmp(r->key, "enabled") == 0)
            return r->def != NULL && strcmp(r->def, "true") == 0;
    return false;
}

/* A component's settings as its config map has them: every key written,
 * and every key left out that has a default, with it (a section left out
 * only when it is on by default); then any key the map does not name (none
 * in a valid config), as written. */
static void emit_rows(out *o, const sf_config_row *rows, const sf_node *value)
{
    const sf_node *map = value != NULL && value->kind == SF_NODE_MAP ? value : NULL;

    map_start(o);
    for (const sf_config_row *r = rows; r->key != NULL; r++) {
        const sf_node *n = sf_node_get(map, r->key);
        bool redact = secret_key(r->key);

        if (r->type == SF_CFG_REJECT)
            continue;
        if (r->type == SF_CFG_SECTION && (n == NULL || n->kind != SF_NODE_SEQ) &&
            (n != NULL || on_by_default(r->sub))) {
            scalar(o, r->key, true);
            emit_rows(o, r->sub, n);
        } else if (r->type == SF_CFG_LIST && n != NULL && n->kind == SF_NODE_SEQ) {
            yaml_event_t ev;

            scalar(o, r->key, true);
            emit(o, &ev, yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                              YAML_ANY_SEQUENCE_STYLE));
            for (size_t i = 0; i < n->n && !o->failed; i++)
                emit_rows(o, r->sub, n->items[i]);
            if (!o->failed)
                emit(o, &ev, yaml_sequence_end_event_initialize(&ev));
        } else if (n != NULL) {
            scalar(o, r->key, true);
            emit_value(o, r->key, n, false);
        } else if (r->def != NULL && r->type != SF_CFG_IGNORE) {
            scalar(o, r->key, true);
            scalar(o, redact ? REDACTED : r->def, !redact);
        }
    }
    for (size_t i = 0; map != NULL && i < map->n; i++) {
        bool known = false;

        for (const sf_config_row *r = rows; r->key != NULL && !known; r++)
            known = strcmp(r->key, map->keys[i]->text) == 0;
        if (known)
            continue;
        scalar(o, map->keys[i]->text, map->keys[i]->plain);
        emit_value(o, map->keys[i]->text, map->items[i], false);
    }
    map_end(o);
}

static const sf_config_component *component_of(const sf_config *cfg, const sf_node *key)
{
    for (size_t i = 0; i < cfg->n_components; i++)
        if (cfg->components[i].node == key)
            return &cfg->components[i];
    return NULL;
}

int sf_print_config(const sf_config *cfg, FILE *f)
{
    static const char *const sections[] = { "receivers", "processors", "exporters",
                                            "extensions" };
    const sf_node *root = cfg->root;
    yaml_event_t ev;
    out o = { .failed = false };

    if (!yaml_emitter_initialize(&o.em)) {
        fputs("spanfence: out of memory\n", stderr);
        return 1;
    }
    yaml_emitter_set_output_file(&o.em, f);
    yaml_emitter_set_unicode(&o.em, 1);
    emit(&o, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
    if (!o.failed)
        emit(&o, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
    map_start(&o);
    for (size_t i = 0; root != NULL && i < root->n; i++) {
        const sf_node *k = root->keys[i], *v = root->items[i];
        bool components = false;

        for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++)
            components |= strcmp(k->text, sections[s]) == 0;
        scalar(&o, k->text, k->plain);
        if (!components || v == NULL || v->kind != SF_NODE_MAP) {
            emit_node(&o, v, false);
            continue;
        }
        map_start(&o);
        for (size_t j = 0; j < v->n; j++) {
            const sf_config_component *cc = component_of(cfg, v->keys[j]);

            scalar(&o, v->keys[j]->text, v->keys[j]->plain);
            if (cc != NULL && cc->type != NULL)
                emit_rows(&o, cc->type->config_map, v->items[j]);
            else        /* a type spanfence does not run: as written */
                emit_node(&o, v->items[j], false);
        }
        map_end(&o);
    }
    map_end(&o);
    if (!o.failed)
        emit(&o, &ev, yaml_document_end_event_initialize(&ev, 1));
    if (!o.failed)
        emit(&o, &ev, yaml_stream_end_event_initialize(&ev));
    if (!o.failed && !yaml_emitter_flush(&o.em))
        o.failed = true;
    if (o.failed)
        fprintf(stderr, "spanfence: print-config: %s\n",
                o.em.problem ? o.em.problem : "cannot write the config");
    yaml_emitter_delete(&o.em);
    return o.failed ? 1 : 0;
}

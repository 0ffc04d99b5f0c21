/* processors/attributes/attributes_config.c: the config maps of the
 * `attributes` and `resource` processors and the parser of their action
 * lists (load time). Every upstream key is known: the ones spanfence
 * cannot honour (hash, extract, convert, from_attribute, from_context,
 * pattern, include/exclude) are refused with what to use instead, never
 * ignored: an action that silently did nothing could let an attribute out
 * that the operator meant to delete. */
#include "attributes.h"

#include "sf_otlp_wire.h"

#include <stdio.h>
#include <string.h>

static const char *const action_names[] = {
    [SF_ATTR_INSERT] = "insert", [SF_ATTR_UPDATE] = "update", [SF_ATTR_UPSERT] = "upsert",
    [SF_ATTR_DELETE] = "delete", [SF_ATTR_HASH] = "hash", [SF_ATTR_EXTRACT] = "extract",
    [SF_ATTR_CONVERT] = "convert",
};

/* Action keys upstream has and spanfence refuses, with why. */
static const struct {
    const char *key;
    const char *why;
} refused_keys[] = {
    { "from_attribute", "values can only be constants (or ${env:NAME}): copying an attribute "
      "could move a value past the transform's allowlist" },
    { "from_context", "values can only be constants (or ${env:NAME}): client metadata is not "
      "read" },
    { "pattern", "only exact keys: a delete by pattern is keep_keys/delete_key in the "
      "transform processor" },
    { "converted_type", "convert is not supported" },
};

static bool scalar_is(const sf_node *n, const char *s)
{
    return n->kind == SF_NODE_SCALAR && n->len == strlen(s) && memcmp(n->text, s, n->len) == 0;
}

/* A plain YAML scalar that upstream would read as a number, a bool or
 * null: spanfence inserts strings only, so it must be quoted. */
static bool looks_typed(const sf_node *n)
{
    static const char *const words[] = { "true", "false", "True", "False", "TRUE", "FALSE",
                                         "null", "Null", "NULL", "~", ".inf", "-.inf", ".nan" };
    size_t i = 0, digits = 0;

    if (!n->plain)
        return false;
    if (n->is_null)
        return true;
    for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++)
        if (strcmp(n->text, words[w]) == 0)
            return true;
    if (n->text[i] == '-' || n->text[i] == '+')
        i++;
    for (; n->text[i] != '\0'; i++) {
        char c = n->text[i];

        if (c >= '0' && c <= '9')
            digits++;
        else if (c != '.' && c != 'e' && c != 'E' && c != '-' && c != '+' && c != '_' &&
                 c != 'x' && c != 'o' && !(c >= 'a' && c <= 'f') && !(c >= 'A' && c <= 'F'))
            return false;
    }
    /* digits with at most number punctuation: 42, 4.2, 1e3, 0x1f */
    return digits > 0 && (n->text[0] == '-' || n->text[0] == '+' || n->text[0] == '.' ||
                          (n->text[0] >= '0' && n->text[0] <= '9'));
}

/* One action mapping into *a; problems reported under `sub`. */
static int parse_action(sf_cfg_ctx *ctx, const sf_node *it, const char *sub, sf_attr_action *a)
{
    const sf_node *key = NULL, *value = NULL, *action = NULL;
    int errors = 0;
    char path[96];

    a->node = it;
    if (it->kind != SF_NODE_MAP) {
        sf_cfg_error(ctx, it, sub, "an action must be a mapping with 'key', 'action' and "
                     "'value'");
        return 1;
    }
    for (size_t k = 0; k < it->n; k++) {
        const sf_node *kn = it->keys[k], *v = it->items[k];
        bool refused = false;

        for (size_t r = 0; r < sizeof(refused_keys) / sizeof(refused_keys[0]); r++) {
            if (scalar_is(kn, refused_keys[r].key)) {
                snprintf(path, sizeof(path), "%s.%s", sub, refused_keys[r].key);
                sf_cfg_error(ctx, kn, path, "'%s' is not supported: %s", refused_keys[r].key,
                             refused_keys[r].why);
                errors++;
                refused = true;
            }
        }
        if (refused)
            continue;
        if (scalar_is(kn, "key"))
            key = v;
        else if (scalar_is(kn, "value"))
            value = v;
        else if (scalar_is(kn, "action"))
            action = v;
        else {
            sf_cfg_error(ctx, kn, sub, "unknown key '%s'", kn->text);
            errors++;
        }
    }
    if (key == NULL || key->kind != SF_NODE_SCALAR || key->is_null || key->len == 0) {
        sf_cfg_error(ctx, key != NULL ? key : it, sub, "'key' is required: the attribute's "
                     "name");
        errors++;
    } else if (!sf_otlp_utf8_valid((const uint8_t *)key->text, key->len) ||
               memchr(key->text, '\0', key->len) != NULL) {
        sf_cfg_error(ctx, key, sub, "'key' is not UTF-8 text");
        errors++;
    } else {
        a->key = key->text;
    }
    a->action = (sf_attr_action_kind)-1;
    for (int i = 0; action != NULL && i <= SF_ATTR_CONVERT; i++)
        if (scalar_is(action, action_names[i]))
            a->action = (sf_attr_action_kind)i;
    snprintf(path, sizeof(path), "%s.action", sub);
    if (action == NULL) {
        sf_cfg_error(ctx, it, sub, "'action' is required (insert, update, upsert or delete)");
        return errors + 1;
    }
    if ((int)a->action < 0) {
        sf_cfg_error(ctx, action, path, "unknown action '%s' (insert, update, upsert or delete)",
                     action->kind == SF_NODE_SCALAR ? action->text : "");
        return errors + 1;
    }
    if (a->action >= SF_ATTR_HASH) {
        sf_cfg_error(ctx, action, path, "action '%s' is not supported: spanfence runs insert, "
                     "update, upsert and delete of constants (hash ids with the transform "
                     "processor's pseudonymize)", action_names[a->action]);
        return errors + 1;
    }
    snprintf(path, sizeof(path), "%s.value", sub);
    if (a->action == SF_ATTR_DELETE) {
        if (value != NULL) {
            sf_cfg_error(ctx, value, path, "delete takes no value");
            errors++;
        }
        return errors;
    }
    if (value == NULL) {
        sf_cfg_error(ctx, it, sub, "'value' is required for %s", action_names[a->action]);
        return errors + 1;
    }
    if (value->kind != SF_NODE_SCALAR) {
        sf_cfg_error(ctx, value, path, "the value must be a string");
        return errors + 1;
    }
    if (looks_typed(value)) {
        sf_cfg_error(ctx, value, path, "'%s' would be a number, bool or null upstream: "
                     "spanfence inserts strings only, quote it (\"%s\")", value->text,
                     value->raw != NULL ? value->raw : value->text);
        return errors + 1;
    }
    if (!sf_otlp_utf8_valid((const uint8_t *)value->text, value->len) ||
        memchr(value->text, '\0', value->len) != NULL) {
        sf_cfg_error(ctx, value, path, "the value is not UTF-8 text");
        return errors + 1;
    }
    a->value = value->text;
    return errors;
}

static sf_status parse_actions(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    sf_attr_actions *out = field;
    sf_status st;
    int errors = 0;
    char sub[64];

    memset(out, 0, sizeof(*out));
    out->v = sf_cfg_list_alloc(ctx, node, "actions ({key, action, value})", sizeof(*out->v), &st);
    if (out->v == NULL)
        return st;
    out->n = node->n;
    for (size_t i = 0; i < node->n; i++) {
        snprintf(sub, sizeof(sub), "[%zu]", i);
        errors += parse_action(ctx, node->items[i], sub, &out->v[i]);
    }
    return errors ? SF_CONFIG : SF_OK;
}

/* Two actions on one key: upstream runs them in order; spanfence's edit
 * runs a key's delete before its insert, so the order could differ.
 * Refused. */
sf_status sf_attributes_check(sf_cfg_ctx *ctx, void *config)
{
    const sf_attributes_config *cfg = config;
    int errors = 0;

    for (size_t i = 0; i < cfg->actions.n; i++) {
        const sf_attr_action *a = &cfg->actions.v[i];

        if (a->key == NULL)
            continue;
        for (size_t j = 0; j < i; j++) {
            if (cfg->actions.v[j].key != NULL && strcmp(cfg->actions.v[j].key, a->key) == 0) {
                sf_cfg_error(ctx, a->node, NULL, "key '%s' has a second action: write one "
                             "action per key", a->key);
                errors++;
                break;
            }
        }
    }
    return errors ? SF_CONFIG : SF_OK;
}

static const char include_why[] =
    "include/exclude are not supported: spanfence applies the actions to every item";

const sf_config_row sf_attributes_config_map[] = {
    { .key = "actions", .type = SF_CFG_CUSTOM, .offset = offsetof(sf_attributes_config, actions),
      .parse = parse_actions,
      .help = "actions on span, log record and data point attributes, in order: {key, action: "
              "insert|update|upsert|delete, value: \"string\" or ${env:NAME}}" },
    { .key = "include", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = include_why },
    { .key = "exclude", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = include_why },
    { 0 }
};

const sf_config_row sf_resource_config_map[] = {
    { .key = "attributes", .type = SF_CFG_CUSTOM,
      .offset = offsetof(sf_attributes_config, actions), .parse = parse_actions,
      .help = "actions on resource attributes, in order: {key, action: "
              "insert|update|upsert|delete, value: \"string\" or ${env:NAME}}" },
    { 0 }
};

/* receivers/journald/journald_config.c: the `journald` receiver's config map
 * (load time), upstream's keys where spanfence does what they say, and
 * clear refusals where it does not (grep, operators, a storage extension,
 * namespaces). Units, identifiers and matches become sd_journal match
 * terms ("FIELD=value") here, so a bad one is a config error with its
 * place, not a failure at start. */
#include "journald.h"

#include <stdio.h>
#include <string.h>

static const char *const priority_names[8] = {
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
};

/* A journal field name: A-Z, 0-9, '_', not starting with a digit, at
 * most 64 (as sd_journal accepts them for matches). */
static bool field_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 64 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* "FIELD=value" in the config's memory. */
static char *term(sf_cfg_ctx *ctx, const char *field, const char *value, const char *suffix)
{
    size_t n = strlen(field) + 1 + strlen(value) + strlen(suffix);
    char *t = sf_cfg_alloc(ctx, n + 1);

    if (t != NULL)
        snprintf(t, n + 1, "%s=%s%s", field, value, suffix);
    return t;
}

/* A list of names (units, identifiers) into match terms of `field`. */
static sf_status parse_names(sf_cfg_ctx *ctx, const sf_node *node, sf_strlist *out,
                             const char *field, bool unit)
{
    sf_status st;
    int errors = 0;
    char sub[32];

    memset(out, 0, sizeof(*out));
    out->v = sf_cfg_list_alloc(ctx, node, unit ? "unit names" : "syslog identifiers",
                               sizeof(*out->v), &st);
    if (out->v == NULL)
        return st;
    for (size_t i = 0; i < node->n; i++) {
        const sf_node *it = node->items[i];
        const char *dot;

        snprintf(sub, sizeof(sub), "[%zu]", i);
        if (it->kind != SF_NODE_SCALAR || it->is_null || it->len == 0 || it->len > 255 ||
            memchr(it->text, '\0', it->len) != NULL ||
            !sf_otlp_utf8_valid((const uint8_t *)it->text, it->len)) {
            sf_cfg_error(ctx, it, sub, "expected a %s (text, 1 to 255 bytes)", unit ? "unit name" :
                         "syslog identifier");
            errors++;
            continue;
        }
        if (unit && strpbrk(it->text, "*?[") != NULL) {
            sf_cfg_error(ctx, it, sub, "unit patterns are not supported by spanfence: name "
                         "each unit ('%s')", it->text);
            errors++;
            continue;
        }
        /* journalctl --unit's mangling: a name without a type is a service */
        dot = strrchr(it->text, '.');
        out->v[out->n] = term(ctx, field, it->text, unit && dot == NULL ? ".service" : "");
        if (out->v[out->n] == NULL)
            return SF_ENOMEM;
        out->n++;
    }
    return errors ? SF_CONFIG : SF_OK;
}

static sf_status parse_units(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    return parse_names(ctx, node, field, "_SYSTEMD_UNIT", true);
}

static sf_status parse_identifiers(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    return parse_names(ctx, node, field, "SYSLOG_IDENTIFIER", false);
}

/* matches: a list of mappings FIELD: value. */
static sf_status parse_matches(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    sf_jd_matches *out = field;
    sf_status st;
    int errors = 0;
    char sub[96];

    memset(out, 0, sizeof(*out));
    out->v = sf_cfg_list_alloc(ctx, node, "mappings (FIELD: value)", sizeof(*out->v), &st);
    if (out->v == NULL)
        return st;
    out->n = node->n;
    for (size_t i = 0; i < node->n; i++) {
        const sf_node *m = node->items[i];
        sf_jd_match *jm = &out->v[i];

        snprintf(sub, sizeof(sub), "[%zu]", i);
        if (m->kind != SF_NODE_MAP || m->n == 0) {
            sf_cfg_error(ctx, m, sub, "expected a mapping of journal fields to values "
                         "(_SYSTEMD_UNIT: sglang.service)");
            errors++;
            continue;
        }
        jm->terms = sf_cfg_alloc(ctx, m->n * sizeof(*jm->terms));
        if (jm->terms == NULL)
            return SF_ENOMEM;
        for (size_t k = 0; k < m->n; k++) {
            const sf_node *v = m->items[k];

            snprintf(sub, sizeof(sub), "[%zu].%.64s", i, m->keys[k]->text);
            if (!field_name_ok(m->keys[k]->text)) {
                sf_cfg_error(ctx, m->keys[k], sub, "'%s' is not a journal field name (A-Z, "
                             "0-9 and _, not starting with a digit)", m->keys[k]->text);
                errors++;
                continue;
            }
            if (v->kind != SF_NODE_SCALAR || v->is_null || memchr(v->text, '\0', v->len) != NULL ||
                !sf_otlp_utf8_valid((const uint8_t *)v->text, v->len)) {
                sf_cfg_error(ctx, v, sub, "expected the field's value as text");
                errors++;
                continue;
            }
            jm->terms[jm->n] = term(ctx, m->keys[k]->text, v->text, "");
            if (jm->terms[jm->n] == NULL)
                return SF_ENOMEM;
            jm->n++;
        }
    }
    return errors ? SF_CONFIG : SF_OK;
}

static int priority_of(const char *s, size_t n)
{
    if (n == 1 && s[0] >= '0' && s[0] <= '7')
        return s[0] - '0';
    for (int i = 0; i < 8; i++)
        if (strlen(priority_names[i]) == n && memcmp(priority_names[i], s, n) == 0)
            return i;
    return -1;
}

/* priority: a level (records at it or more urgent) or a range "FROM..TO",
 * as journalctl --priority takes them. */
static sf_status parse_priority(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    sf_jd_priority *out = field;
    const char *dots;
    int a, b;

    if (node->kind != SF_NODE_SCALAR || node->is_null)
        goto out_bad;
    dots = strstr(node->text, "..");
    if (dots == NULL) {
        a = priority_of(node->text, node->len);
        if (a < 0)
            goto out_bad;
        *out = (sf_jd_priority){ .most = 0, .least = a };
        return SF_OK;
    }
    a = priority_of(node->text, (size_t)(dots - node->text));
    b = priority_of(dots + 2, strlen(dots + 2));
    if (a < 0 || b < 0)
        goto out_bad;
    *out = (sf_jd_priority){ .most = a < b ? a : b, .least = a < b ? b : a };
    return SF_OK;

out_bad:
    sf_cfg_error(ctx, node, NULL, "expected a priority (emerg, alert, crit, err, warning, "
                 "notice, info, debug, or 0 to 7) or a range FROM..TO");
    return SF_CONFIG;
}

/* The numeric defaults, from one definition each. */
#define DEF_TEXT_(x) #x
#define DEF_TEXT(x) DEF_TEXT_(x)
#define DEF_MAX_BATCH_RECORDS 256

const sf_config_row sf_journald_config_map[] = {
    { .key = "units", .type = SF_CFG_CUSTOM, .offset = offsetof(sf_journald_config, units),
      .parse = parse_units,
      .help = "read records of these units only (_SYSTEMD_UNIT; a name without a type is a "
              ".service); any of them" },
    { .key = "identifiers", .type = SF_CFG_CUSTOM,
      .offset = offsetof(sf_journald_config, identifiers), .parse = parse_identifiers,
      .help = "read records with these SYSLOG_IDENTIFIERs only; any of them" },
    { .key = "matches", .type = SF_CFG_CUSTOM, .offset = offsetof(sf_journald_config, matches),
      .parse = parse_matches,
      .help = "a list of {FIELD: value, ...}: a record matches an entry when all its fields "
              "do, and is read when it matches any entry" },
    { .key = "priority", .type = SF_CFG_CUSTOM, .def = "info",
      .offset = offsetof(sf_journald_config, priority), .parse = parse_priority,
      .help = "records at this priority or more urgent (emerg..debug, 0..7), or a range "
              "FROM..TO" },
    { .key = "dmesg", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_journald_config, dmesg),
      .help = "kernel messages of the current boot only (_TRANSPORT=kernel)" },
    { .key = "start_at", .type = SF_CFG_ENUM, .def = "end",
      .offset = offsetof(sf_journald_config, start_at), .choices = "end|beginning",
      .help = "without a saved cursor: read only new records (end) or the whole journal "
              "(beginning)" },
    { .key = "directory", .type = SF_CFG_STR, .offset = offsetof(sf_journald_config, directory),
      .help = "read the journal files in this directory (default: the local journal, "
              "/var/log/journal and /run/log/journal)" },
    { .key = "files", .type = SF_CFG_STRLIST, .offset = offsetof(sf_journald_config, files),
      .help = "read these journal files (not with directory)" },
    { .key = "cursor_file", .type = SF_CFG_STR,
      .offset = offsetof(sf_journald_config, cursor_file),
      .help = "where the cursor of the last record the pipeline accepted is kept, written "
              "after each batch (temp file and rename) and read at start: a restart resumes "
              "there (default: none, the cursor lives in memory and survives reloads only)" },
    { .key = "max_message_size", .type = SF_CFG_SIZE, .def = "16KiB",
      .offset = offsetof(sf_journald_config, max_message_size),
      .help = "longest body: a longer MESSAGE is cut at a character boundary, counted",
      .min = 64, .max = 1048576 },
    { .key = "max_batch_records", .type = SF_CFG_INT, .def = DEF_TEXT(DEF_MAX_BATCH_RECORDS),
      .offset = offsetof(sf_journald_config, max_batch_records),
      .help = "most records in one request into the pipeline (a request also stops at about "
              "1 MiB)", .min = 1, .max = 10000 },
    { .key = "storage", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "storage extensions are not supported by spanfence: keep the cursor with "
              "'cursor_file: PATH'" },
    { .key = "grep", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "'grep' is not supported by spanfence: select bodies with the transform "
              "processor's log_statements (set(body, nil) where not IsMatch(body, ...)) or "
              "the filter processor" },
    { .key = "operators", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "operators are not supported by spanfence: shape records with the transform "
              "processor" },
    { .key = "namespace", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "journal namespaces are not supported by spanfence: read the namespace's "
              "directory with 'directory'" },
    { .key = "all", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD,
      .help = "bodies are bounded by max_message_size and made UTF-8 instead" },
    { .key = "convert_message_bytes", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD,
      .help = "MESSAGE is always read as text (bytes that are not UTF-8 replaced)" },
    { .key = "root_path", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD,
      .help = "spanfence reads the journal with libsystemd, no journalctl" },
    { .key = "journalctl_path", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD,
      .help = "spanfence reads the journal with libsystemd, no journalctl" },
    { .key = "retry_on_failure", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD,
      .help = "a batch the pipeline refuses is always sent again later, never dropped" },
    { 0 }
};

sf_status sf_journald_check(sf_cfg_ctx *ctx, void *config)
{
    const sf_journald_config *c = config;
    const sf_node *v = sf_cfg_value(ctx);

    if (c->directory != NULL && c->files.n > 0) {
        sf_cfg_error(ctx, sf_node_get(v, "files"), "files",
                     "'files' and 'directory' cannot both be given");
        return SF_CONFIG;
    }
    if (c->directory != NULL && c->directory[0] != '/') {
        sf_cfg_error(ctx, sf_node_get(v, "directory"), "directory",
                     "'%s' is not an absolute path", c->directory);
        return SF_CONFIG;
    }
    if (c->cursor_file != NULL && c->cursor_file[0] != '/') {
        sf_cfg_error(ctx, sf_node_get(v, "cursor_file"), "cursor_file",
                     "'%s' is not an absolute path", c->cursor_file);
        return SF_CONFIG;
    }
    return SF_OK;
}

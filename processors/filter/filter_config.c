/* processors/filter/filter_config.c: the `filter` processor's config map
 * and the reader of its conditions (load time). A condition spanfence
 * cannot run is refused, never ignored: a filter that silently did
 * nothing would send what the operator meant to drop. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "filter.h"

#include "sf_otlp_wire.h"

#include <pcre2.h>
#include <stdio.h>
#include <string.h>

static const char conditions_help[] =
    "conditions on the metric name only: name == \"x\", name != \"x\", IsMatch(name, \"re\"), "
    "not IsMatch(name, \"re\")";

/* Whether the PCRE2 pattern compiles; else reported at `at`. */
static bool pattern_ok(sf_cfg_ctx *ctx, const sf_node *at, const char *sub, const char *re)
{
    int err;
    PCRE2_SIZE off;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &err, &off, NULL);
    PCRE2_UCHAR msg[128];

    if (code != NULL) {
        pcre2_code_free(code);
        return true;
    }
    pcre2_get_error_message(err, msg, sizeof(msg));
    sf_cfg_error(ctx, at, sub, "pattern \"%s\": %s at offset %zu", re, (const char *)msg,
                 (size_t)off);
    return false;
}

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* `word` at p (followed by no identifier character): past it, or NULL. */
static const char *word_at(const char *p, const char *word)
{
    size_t n = strlen(word);
    char c;

    if (strncmp(p, word, n) != 0)
        return NULL;
    c = p[n];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
        c == '_' || c == '.')
        return NULL;
    return p + n;
}

/* The metric's name path: `name` or `metric.name`. */
static const char *name_at(const char *p)
{
    const char *q = word_at(p, "name");

    return q != NULL ? q : word_at(p, "metric.name");
}

/* An OTTL string literal at p ("...", with \" \\ \n \t) into *out (config
 * memory): past it, or NULL with *why set. */
static const char *string_at(sf_cfg_ctx *ctx, const char *p, char **out, const char **why)
{
    size_t n = 0;
    char *s;

    if (*p != '"') {
        *why = "expected a quoted string";
        return NULL;
    }
    s = sf_cfg_alloc(ctx, strlen(p));
    if (s == NULL) {
        *why = "out of memory";
        return NULL;
    }
    for (p++; *p != '"'; p++) {
        if (*p == '\0') {
            *why = "a string is not closed";
            return NULL;
        }
        if (*p == '\\') {
            p++;
            switch (*p) {
            case '"': case '\\': s[n++] = *p; break;
            case 'n': s[n++] = '\n'; break;
            case 't': s[n++] = '\t'; break;
            default:
                *why = "unknown escape in a string (write \\\\ for a backslash)";
                return NULL;
            }
            continue;
        }
        s[n++] = *p;
    }
    s[n] = '\0';
    *out = s;
    return p + 1;
}

/* One condition's text into *c; problems reported under `sub`. */
static int parse_cond(sf_cfg_ctx *ctx, const sf_node *it, const char *sub, sf_filter_cond *c)
{
    const char *p, *q, *why = conditions_help;
    char *text = NULL;

    if (it->kind != SF_NODE_SCALAR || it->is_null) {
        sf_cfg_error(ctx, it, sub, "a condition is a string: %s", conditions_help);
        return 1;
    }
    p = skip_ws(it->text);
    memset(c, 0, sizeof(*c));
    if ((q = word_at(p, "not")) != NULL) {
        c->negate = true;
        p = skip_ws(q);
    }
    if ((q = word_at(p, "IsMatch")) != NULL) {
        c->regex = true;
        p = skip_ws(q);
        if (*p != '(')
            goto bad;
        p = skip_ws(p + 1);
        if ((q = name_at(p)) == NULL)
            goto bad;
        p = skip_ws(q);
        if (*p != ',')
            goto bad;
        p = skip_ws(p + 1);
        if ((q = string_at(ctx, p, &text, &why)) == NULL)
            goto bad;
        p = skip_ws(q);
        if (*p != ')')
            goto bad;
        p = skip_ws(p + 1);
    } else if (!c->negate && (q = name_at(p)) != NULL) {
        p = skip_ws(q);
        if (p[0] == '!' && p[1] == '=')
            c->negate = true;
        else if (!(p[0] == '=' && p[1] == '='))
            goto bad;
        p = skip_ws(p + 2);
        if ((q = string_at(ctx, p, &text, &why)) == NULL)
            goto bad;
        p = skip_ws(q);
    } else {
        goto bad;
    }
    if (*p != '\0')
        goto bad;
    if (!sf_otlp_utf8_valid((const uint8_t *)text, strlen(text))) {
        sf_cfg_error(ctx, it, sub, "the string is not UTF-8 text");
        return 1;
    }
    c->text = text;
    return c->regex && !pattern_ok(ctx, it, sub, text);

bad:
    sf_cfg_error(ctx, it, sub, "condition '%s' is not supported: %s", it->text, why);
    return 1;
}

static sf_status parse_conds(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    sf_filter_conds *out = field;
    sf_status st;
    int errors = 0;
    char sub[32], what[192];

    memset(out, 0, sizeof(*out));
    snprintf(what, sizeof(what), "conditions (%s)", conditions_help);
    out->v = sf_cfg_list_alloc(ctx, node, what, sizeof(*out->v), &st);
    if (out->v == NULL)
        return st;
    out->n = node->n;
    for (size_t i = 0; i < node->n; i++) {
        snprintf(sub, sizeof(sub), "[%zu]", i);
        errors += parse_cond(ctx, node->items[i], sub, &out->v[i]);
    }
    return errors ? SF_CONFIG : SF_OK;
}

/* include / exclude: a match_type (required, as upstream), names given,
 * and patterns that compile. */
static int names_check(sf_cfg_ctx *ctx, sf_filter_names *f, const char *which)
{
    char sub[64];
    int errors = 0;

    if (!f->present)
        return 0;
    snprintf(sub, sizeof(sub), "metrics.%s", which);
    if (f->match_type_text == NULL) {
        sf_cfg_error(ctx, NULL, sub, "'match_type' is required: strict or regexp");
        errors++;
    } else if (strcmp(f->match_type_text, "strict") == 0) {
        f->match_type = SF_FILTER_STRICT;
    } else if (strcmp(f->match_type_text, "regexp") == 0) {
        f->match_type = SF_FILTER_REGEXP;
    } else {
        sf_cfg_error(ctx, NULL, sub, "match_type '%s' is not supported by spanfence (use one of "
                     "'strict', 'regexp')", f->match_type_text);
        errors++;
    }
    if (f->metric_names.n == 0) {
        sf_cfg_error(ctx, NULL, sub, "'metric_names' is required: the metrics to %s",
                     strcmp(which, "include") == 0 ? "keep" : "drop");
        return errors + 1;
    }
    for (size_t i = 0; errors == 0 && i < f->metric_names.n; i++) {
        if (f->match_type == SF_FILTER_REGEXP &&
            !pattern_ok(ctx, NULL, sub, f->metric_names.v[i]))
            errors++;
    }
    return errors;
}

sf_status sf_filter_check(sf_cfg_ctx *ctx, void *config)
{
    sf_filter_config *cfg = config;
    int errors = 0;

    errors += names_check(ctx, &cfg->metrics.include, "include");
    errors += names_check(ctx, &cfg->metrics.exclude, "exclude");
    if (cfg->metrics.metric.n > 0 &&
        (cfg->metrics.include.present || cfg->metrics.exclude.present)) {
        /* upstream refuses the mix too */
        sf_cfg_error(ctx, NULL, "metrics", "'metric' conditions and include/exclude cannot be "
                     "used together: write the names as conditions");
        errors++;
    }
    if (cfg->metrics.metric.n == 0 && !cfg->metrics.include.present &&
        !cfg->metrics.exclude.present)
        sf_cfg_warn(ctx, NULL, NULL, "no metrics condition, include or exclude: the filter "
                    "drops nothing");
    return errors ? SF_CONFIG : SF_OK;
}

static const char only_metrics[] =
    "spanfence filters metrics by name only: it keeps every span and log record it can fence "
    "(drop attributes with the transform processor's keep_keys or delete_key)";

static const sf_config_row names_rows[] = {
    { .key = "match_type", .type = SF_CFG_STR,
      .offset = offsetof(sf_filter_names, match_type_text),
      .help = "required: strict (exact names) or regexp (patterns found anywhere in the "
              "name)" },
    { .key = "metric_names", .type = SF_CFG_STRLIST,
      .offset = offsetof(sf_filter_names, metric_names),
      .help = "metric names, or patterns with match_type: regexp" },
    { .key = "resource_attributes", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "matching on resource attributes is not supported: spanfence filters metrics by "
              "name" },
    { .key = "expr_names", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "expr matching is not supported: use match_type: regexp" },
    { 0 }
};

static const sf_config_row metrics_rows[] = {
    { .key = "metric", .type = SF_CFG_CUSTOM,
      .offset = offsetof(sf_filter_metrics, metric),
      .parse = parse_conds,
      .help = "a metric is dropped when one of these holds (upstream's OTTL on the name)" },
    { .key = "include", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_filter_metrics, include),
      .sub = names_rows, .help = "keep only the metrics named here" },
    { .key = "exclude", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_filter_metrics, exclude),
      .sub = names_rows, .help = "drop the metrics named here" },
    { .key = "datapoint", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "data point conditions are not supported: spanfence drops whole metrics by name "
              "(metrics.metric)" },
    { 0 }
};

const sf_config_row sf_filter_config_map[] = {
    { .key = "error_mode", .type = SF_CFG_ENUM, .def = "propagate",
      .offset = offsetof(sf_filter_config, error_mode), .choices = "propagate|ignore|silent",
      .help = "upstream's; a condition on the name cannot fail, so all three act alike" },
    { .key = "metrics", .type = SF_CFG_SECTION, .offset = offsetof(sf_filter_config, metrics),
      .sub = metrics_rows, .help = "which metrics to drop" },
    { .key = "traces", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = only_metrics },
    { .key = "spans", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = only_metrics },
    { .key = "logs", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD, .help = only_metrics },
    { 0 }
};

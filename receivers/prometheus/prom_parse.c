/* receivers/prometheus/prom_parse.c: the exposition parser (prom_parse.h):
 * Prometheus text 0.0.4 and OpenMetrics 1.0.0 text, line by line, with
 * every limit checked as it is read. No clock, no I/O, no globals: a pure
 * function of the bytes, the format and the limits.
 *
 * Families: a sample belongs to the family its name names, or to the one
 * its name minus a suffix its type allows names (foo_bucket to histogram
 * foo); any other sample starts an untyped (OpenMetrics: unknown) family
 * of its own name. Families need not be contiguous in the text format;
 * a TYPE line after a family's samples, a second TYPE or HELP line, a
 * sample a typed family of its name does not allow, are malformed.
 * Duplicate series (same name, same labels) are kept once: later ones are
 * marked and counted. */
#include "prom_parse.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const type_names[] = {
#define SF_PROM_TYPE_NAME(e, t) t,
    SF_PROM_TYPE_MAP(SF_PROM_TYPE_NAME)
#undef SF_PROM_TYPE_NAME
};

static const char *const err_labels[] = {
#define SF_PROM_ERR_LABEL(e, l) l,
    SF_PROM_ERR_MAP(SF_PROM_ERR_LABEL)
#undef SF_PROM_ERR_LABEL
};

const char *sf_prom_type_name(sf_prom_type t)
{
    return (unsigned)t < SF_PROM_TYPE_COUNT ? type_names[t] : "?";
}

const char *sf_prom_err_label(sf_prom_err e)
{
    return (unsigned)e < SF_PROM_ERR_COUNT ? err_labels[e] : "?";
}

sf_prom_format sf_prom_format_of(const char *ct)
{
    static const char om[] = "application/openmetrics-text";

    if (ct == NULL)
        return SF_PROM_TEXT;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return strncasecmp(ct, om, sizeof(om) - 1) == 0 ? SF_PROM_OPENMETRICS : SF_PROM_TEXT;
}

/* The suffixes a type allows after its family's name; "" is the name itself. */
static bool suffix_allowed(sf_prom_type type, const char *suffix)
{
    static const char *const counter[] = { "", "_total", "_created", NULL };
    static const char *const single[] = { "", NULL };
    static const char *const histogram[] = { "_bucket", "_sum", "_count", "_created", NULL };
    static const char *const ghistogram[] = { "_bucket", "_gsum", "_gcount", NULL };
    static const char *const summary[] = { "", "_sum", "_count", "_created", NULL };
    static const char *const info[] = { "_info", NULL };
    const char *const *list;

    switch (type) {
    case SF_PROM_COUNTER: list = counter; break;
    case SF_PROM_HISTOGRAM: list = histogram; break;
    case SF_PROM_GAUGEHISTOGRAM: list = ghistogram; break;
    case SF_PROM_SUMMARY: list = summary; break;
    case SF_PROM_INFO: list = info; break;
    default: list = single; break;
    }
    for (; *list; list++)
        if (strcmp(*list, suffix) == 0)
            return true;
    return false;
}

bool sf_prom_name_in_family(const char *name, const char *family, sf_prom_type type)
{
    size_t n = strlen(family);

    return strncmp(name, family, n) == 0 && suffix_allowed(type, name + n);
}

/* ---- the parser's state ------------------------------------------------- */

typedef struct parser {
    const uint8_t *data;
    size_t len, pos;
    sf_prom_format fmt;
    const sf_prom_limits *lim;
    sf_arena *arena;
    sf_prom_result *out;
    size_t line_no;
    size_t cap_samples, cap_families;
    /* family names -> index + 1 (0: empty slot), open addressing */
    uint32_t *slots;
    size_t n_slots;
    bool *has_type, *has_help;  /* per family, by index (cap_families) */
} parser;

static sf_prom_err fail(parser *ps, sf_prom_err e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static sf_prom_err fail(parser *ps, sf_prom_err e, const char *fmt, ...)
{
    sf_prom_result *out = ps->out;
    int n;
    va_list ap;

    if (out->err != SF_PROM_ERR_OK)
        return out->err;
    out->err = e;
    out->err_line = ps->line_no;
    n = snprintf(out->err_text, sizeof(out->err_text), "line %zu: ", ps->line_no);
    if (n < 0 || (size_t)n >= sizeof(out->err_text))
        return e;
    va_start(ap, fmt);
    vsnprintf(out->err_text + n, sizeof(out->err_text) - (size_t)n, fmt, ap);
    va_end(ap);
    return e;
}

static sf_prom_err no_memory(parser *ps)
{
    return fail(ps, SF_PROM_ERR_NO_MEMORY, "out of memory for the scrape");
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;

    for (size_t i = 0; i < n; i++) {   /* FNV-1a */
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

#define HASH_SEED 0xcbf29ce484222325ULL

static bool grow_slots(parser *ps)
{
    size_t n = ps->n_slots ? ps->n_slots * 2 : 64;
    uint32_t *s = sf_arena_alloc(ps->arena, n * sizeof(*s));

    if (s == NULL)
        return false;
    memset(s, 0, n * sizeof(*s));
    for (size_t i = 0; i < ps->n_slots; i++) {
        uint32_t v = ps->slots[i];
        const char *name;
        size_t j;

        if (v == 0)
            continue;
        name = ps->out->families[v - 1].name;
        j = hash_bytes(HASH_SEED, name, strlen(name)) & (n - 1);
        while (s[j] != 0)
            j = (j + 1) & (n - 1);
        s[j] = v;
    }
    ps->slots = s;
    ps->n_slots = n;
    return true;
}

/* The family named `name` (len bytes), or -1. */
static long family_find(const parser *ps, const char *name, size_t len)
{
    size_t j;

    if (ps->n_slots == 0)
        return -1;
    j = hash_bytes(HASH_SEED, name, len) & (ps->n_slots - 1);
    while (ps->slots[j] != 0) {
        const char *f = ps->out->families[ps->slots[j] - 1].name;

        if (strncmp(f, name, len) == 0 && f[len] == '\0')
            return (long)ps->slots[j] - 1;
        j = (j + 1) & (ps->n_slots - 1);
    }
    return -1;
}

/* A new family `name` of `type`; its index, or -1 (the error is set). */
static long family_add(parser *ps, const char *name, size_t len, sf_prom_type type)
{
    sf_prom_result *out = ps->out;
    sf_prom_family *f;
    size_t j;

    if (out->n_families == ps->cap_families) {
        size_t cap = ps->cap_families ? ps->cap_families * 2 : 32;
        sf_prom_family *nf;
        bool *nt, *nh;

        /* a family is a sample or a metadata line: bound them like samples */
        if (ps->lim->sample_limit > 0 && out->n_families >= 2 * ps->lim->sample_limit + 64) {
            fail(ps, SF_PROM_ERR_SAMPLE_LIMIT, "more than %zu metric families",
                 2 * ps->lim->sample_limit + 64);
            return -1;
        }
        nf = sf_arena_alloc(ps->arena, cap * sizeof(*nf));
        nt = sf_arena_alloc(ps->arena, cap);
        nh = sf_arena_alloc(ps->arena, cap);
        if (nf == NULL || nt == NULL || nh == NULL) {
            no_memory(ps);
            return -1;
        }
        if (out->n_families > 0) {
            memcpy(nf, out->families, out->n_families * sizeof(*nf));
            memcpy(nt, ps->has_type, out->n_families);
            memcpy(nh, ps->has_help, out->n_families);
        }
        out->families = nf;
        ps->has_type = nt;
        ps->has_help = nh;
        ps->cap_families = cap;
    }
    if ((out->n_families + 1) * 2 > ps->n_slots && !grow_slots(ps)) {
        no_memory(ps);
        return -1;
    }
    f = &out->families[out->n_families];
    memset(f, 0, sizeof(*f));
    f->name = sf_arena_strndup(ps->arena, name, len);
    if (f->name == NULL) {
        no_memory(ps);
        return -1;
    }
    f->help = "";
    f->unit = "";
    f->type = type;
    ps->has_type[out->n_families] = false;
    ps->has_help[out->n_families] = false;
    j = hash_bytes(HASH_SEED, name, len) & (ps->n_slots - 1);
    while (ps->slots[j] != 0)
        j = (j + 1) & (ps->n_slots - 1);
    ps->slots[j] = (uint32_t)(out->n_families + 1);
    return (long)out->n_families++;
}

/* ---- lexing helpers -------------------------------------------------------- */

typedef struct line {
    const char *s;
    size_t n, i;
} line;

static bool is_name_start(int c, bool metric)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
}

static bool is_name_char(int c, bool metric)
{
    return is_name_start(c, metric) || (c >= '0' && c <= '9');
}

static size_t skip_ws(line *l)
{
    size_t from = l->i;

    while (l->i < l->n && (l->s[l->i] == ' ' || l->s[l->i] == '\t'))
        l->i++;
    return l->i - from;
}

/* A metric (or label) name at l->i: its length, 0 when there is none. */
static size_t lex_name(line *l, bool metric)
{
    size_t from = l->i;

    if (l->i >= l->n || !is_name_start((unsigned char)l->s[l->i], metric))
        return 0;
    while (l->i < l->n && is_name_char((unsigned char)l->s[l->i], metric))
        l->i++;
    return l->i - from;
}

/* Whether s[0..n) is valid UTF-8 without NUL, overlongs or surrogates. */
static bool utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        unsigned c = s[i];
        size_t k;
        uint32_t cp;

        if (c == 0)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            k = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += k + 1;
    }
    return true;
}

/* Unescape s[0..n) into arena memory: \\, \n and (with quote) \" ; any
 * other backslash is kept as written (as Prometheus' and prometheus_client's
 * parsers keep it, in both formats). */
static char *unescape(parser *ps, const char *s, size_t n, bool quote, size_t *out_len)
{
    char *o = sf_arena_alloc(ps->arena, n + 1);
    size_t k = 0;

    if (o == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 == n) {
            o[k++] = s[i];
            continue;
        }
        if (s[i + 1] == '\\') {
            o[k++] = '\\';
            i++;
        } else if (s[i + 1] == 'n') {
            o[k++] = '\n';
            i++;
        } else if (quote && s[i + 1] == '"') {
            o[k++] = '"';
            i++;
        } else {
            o[k++] = '\\';
        }
    }
    o[k] = '\0';
    *out_len = k;
    return o;
}

/* A float as Prometheus writes one: decimal, or Inf/+Inf/-Inf/NaN in any
 * case (Infinity too). No hex, no underscores. */
static bool parse_double(const char *s, size_t n, double *out)
{
    char buf[64];
    size_t i = 0, digits = 0;
    const char *w;
    bool neg = false;
    char *end;

    if (n == 0 || n >= sizeof(buf))
        return false;
    if (s[0] == '+' || s[0] == '-') {
        neg = s[0] == '-';
        i = 1;
    }
    w = s + i;
    if ((n - i == 3 && strncasecmp(w, "inf", 3) == 0) ||
        (n - i == 8 && strncasecmp(w, "infinity", 8) == 0)) {
        *out = neg ? -INFINITY : INFINITY;
        return true;
    }
    if (n - i == 3 && strncasecmp(w, "nan", 3) == 0 && i == 0) {
        *out = NAN;
        return true;
    }
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
        digits++;
    if (i < n && s[i] == '.')
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            digits++;
    if (digits == 0)
        return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t e = 0;

        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            e++;
        if (e == 0)
            return false;
    }
    if (i != n)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    *out = strtod(buf, &end);
    return end == buf + n;
}

/* Text format timestamp: an integer of milliseconds. */
static bool parse_ts_ms(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    uint64_t v = 0;

    if (n == 0)
        return false;
    if (s[0] == '-' || s[0] == '+') {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == n)
        return false;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (v > (uint64_t)INT64_MAX / 10)
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > (uint64_t)INT64_MAX)
            return false;
    }
    *out = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

/* OpenMetrics timestamp: seconds, possibly fractional, to milliseconds. */
static bool parse_ts_s(const char *s, size_t n, int64_t *out)
{
    double d;

    if (!parse_double(s, n, &d) || !isfinite(d) || d > 9.2e15 || d < -9.2e15)
        return false;
    *out = (int64_t)llround(d * 1000.0);
    return true;
}

/* A token: up to the next space or tab. */
static size_t lex_token(line *l)
{
    size_t from = l->i;

    while (l->i < l->n && l->s[l->i] != ' ' && l->s[l->i] != '\t')
        l->i++;
    return l->i - from;
}

/* ---- labels --------------------------------------------------------------- */

static int label_cmp(const void *a, const void *b)
{
    return strcmp(((const sf_prom_label *)a)->name, ((const sf_prom_label *)b)->name);
}

/* Labels at l->i ('{' already consumed) up to and including '}'. With
 * `exemplar`, no limits but OpenMetrics' 128 characters. */
static sf_prom_err lex_labels(parser *ps, line *l, bool exemplar, sf_prom_label **out_labels,
                              uint16_t *out_n)
{
    const sf_prom_limits *lim = ps->lim;
    bool text = ps->fmt == SF_PROM_TEXT;
    size_t cap = 8, n = 0, runes = 0;
    sf_prom_label *labels = sf_arena_alloc(ps->arena, cap * sizeof(*labels));

    if (labels == NULL)
        return no_memory(ps);
    if (text)
        skip_ws(l);
    while (l->i < l->n && l->s[l->i] != '}') {
        size_t from = l->i, nlen, vfrom, vlen;

        nlen = lex_name(l, false);
        if (nlen == 0)
            return fail(ps, SF_PROM_ERR_MALFORMED, "expected a label name");
        if (!exemplar && lim->label_name_length > 0 && nlen > lim->label_name_length)
            return fail(ps, SF_PROM_ERR_LABEL_NAME_LENGTH,
                        "a label name of %zu bytes (label_name_length_limit %zu)", nlen,
                        lim->label_name_length);
        if (text)
            skip_ws(l);
        if (l->i >= l->n || l->s[l->i] != '=')
            return fail(ps, SF_PROM_ERR_MALFORMED, "expected '=' after a label name");
        l->i++;
        if (text)
            skip_ws(l);
        if (l->i >= l->n || l->s[l->i] != '"')
            return fail(ps, SF_PROM_ERR_MALFORMED, "expected '\"' to open a label value");
        vfrom = ++l->i;
        while (l->i < l->n && l->s[l->i] != '"') {
            if (l->s[l->i] == '\\' && l->i + 1 < l->n)
                l->i++;
            l->i++;
        }
        if (l->i >= l->n)
            return fail(ps, SF_PROM_ERR_MALFORMED, "a label value without its closing '\"'");
        vlen = l->i - vfrom;
        l->i++;
        if (!exemplar && lim->label_limit > 0 && n + 1 > lim->label_limit)
            return fail(ps, SF_PROM_ERR_LABEL_LIMIT, "more than %zu labels (label_limit)",
                        lim->label_limit);
        if (n == cap) {
            sf_prom_label *nl;

            if (cap >= 65535)
                return fail(ps, SF_PROM_ERR_LABEL_LIMIT, "more than 65535 labels");
            nl = sf_arena_alloc(ps->arena, cap * 2 * sizeof(*nl));
            if (nl == NULL)
                return no_memory(ps);
            memcpy(nl, labels, n * sizeof(*nl));
            labels = nl;
            cap *= 2;
        }
        labels[n].name = sf_arena_strndup(ps->arena, l->s + from, nlen);
        labels[n].value = unescape(ps, l->s + vfrom, vlen, true, &labels[n].value_len);
        if (labels[n].name == NULL || labels[n].value == NULL)
            return no_memory(ps);
        if (!utf8_ok((const unsigned char *)labels[n].value, labels[n].value_len))
            return fail(ps, SF_PROM_ERR_MALFORMED, "a label value that is not UTF-8 text");
        if (!exemplar && lim->label_value_length > 0 &&
            labels[n].value_len > lim->label_value_length)
            return fail(ps, SF_PROM_ERR_LABEL_VALUE_LENGTH,
                        "a label value of %zu bytes (label_value_length_limit %zu)",
                        labels[n].value_len, lim->label_value_length);
        if (exemplar) {
            for (size_t k = 0; k < nlen; k++)
                runes++;
            for (size_t k = 0; k < labels[n].value_len; k++)
                if (((unsigned char)labels[n].value[k] & 0xc0) != 0x80)
                    runes++;
        }
        n++;
        if (text)
            skip_ws(l);
        if (l->i < l->n && l->s[l->i] == ',') {
            l->i++;
            if (text)
                skip_ws(l);
            else if (l->i < l->n && l->s[l->i] == '}')
                return fail(ps, SF_PROM_ERR_MALFORMED, "a ',' before '}'");
        } else if (l->i < l->n && l->s[l->i] != '}') {
            return fail(ps, SF_PROM_ERR_MALFORMED, "expected ',' or '}' after a label");
        }
    }
    if (l->i >= l->n)
        return fail(ps, SF_PROM_ERR_MALFORMED, "labels without their closing '}'");
    l->i++;
    if (exemplar && runes > 128)
        return fail(ps, SF_PROM_ERR_MALFORMED, "exemplar labels of %zu characters (at most 128)",
                    runes);
    if (n > 1)
        qsort(labels, n, sizeof(*labels), label_cmp);
    for (size_t k = 1; k < n; k++)
        if (strcmp(labels[k - 1].name, labels[k].name) == 0)
            return fail(ps, SF_PROM_ERR_MALFORMED, "label '%.64s' twice in one sample",
                        labels[k].name);
    *out_labels = labels;
    *out_n = (uint16_t)n;
    return SF_PROM_ERR_OK;
}

/* ---- lines ------------------------------------------------------------------- */

static sf_prom_type type_of(parser *ps, const char *s, size_t n, bool *ok)
{
    *ok = true;
    for (int t = 0; t < SF_PROM_TYPE_COUNT; t++) {
        if (strlen(type_names[t]) != n || strncmp(type_names[t], s, n) != 0)
            continue;
        if (ps->fmt == SF_PROM_TEXT &&
            (t == SF_PROM_COUNTER || t == SF_PROM_GAUGE || t == SF_PROM_HISTOGRAM ||
             t == SF_PROM_SUMMARY || t == SF_PROM_UNTYPED))
            return (sf_prom_type)t;
        if (ps->fmt == SF_PROM_OPENMETRICS && t != SF_PROM_UNTYPED)
            return (sf_prom_type)t;
    }
    *ok = false;
    return SF_PROM_UNTYPED;
}

/* "# HELP name text", "# TYPE name type", "# UNIT name unit", "# EOF" or a
 * comment; l->i is just past '#'. */
static sf_prom_err meta_line(parser *ps, line *l, bool *eof)
{
    bool om = ps->fmt == SF_PROM_OPENMETRICS;
    size_t kfrom, klen, nfrom, nlen;
    long f;

    if (om) {
        if (l->i >= l->n || l->s[l->i] != ' ')
            return fail(ps, SF_PROM_ERR_MALFORMED, "expected '# HELP', '# TYPE', '# UNIT' or "
                        "'# EOF'");
        l->i++;
    } else if (skip_ws(l) == 0) {
        return SF_PROM_ERR_OK;          /* "#comment" */
    }
    kfrom = l->i;
    klen = lex_token(l);
    if (om && klen == 3 && memcmp(l->s + kfrom, "EOF", 3) == 0 && l->i == l->n) {
        *eof = true;
        return SF_PROM_ERR_OK;
    }
    if (!(klen == 4 && (memcmp(l->s + kfrom, "HELP", 4) == 0 ||
                        memcmp(l->s + kfrom, "TYPE", 4) == 0 ||
                        memcmp(l->s + kfrom, "UNIT", 4) == 0)) ||
        (!om && memcmp(l->s + kfrom, "UNIT", 4) == 0)) {
        if (om)
            return fail(ps, SF_PROM_ERR_MALFORMED, "expected '# HELP', '# TYPE', '# UNIT' or "
                        "'# EOF'");
        return SF_PROM_ERR_OK;          /* any other comment */
    }
    if (om) {
        if (l->i >= l->n || l->s[l->i] != ' ')
            return fail(ps, SF_PROM_ERR_MALFORMED, "expected a metric name after '# %.4s'",
                        l->s + kfrom);
        l->i++;
    } else if (skip_ws(l) == 0) {
        return SF_PROM_ERR_OK;          /* "# HELP" alone: a comment, as Prometheus reads it */
    }
    nfrom = l->i;
    nlen = lex_name(l, true);
    if (nlen == 0 || (l->i < l->n && l->s[l->i] != ' ' && l->s[l->i] != '\t'))
        return fail(ps, SF_PROM_ERR_MALFORMED, "an invalid metric name after '# %.4s'",
                    l->s + kfrom);
    f = family_find(ps, l->s + nfrom, nlen);
    if (f < 0) {
        f = family_add(ps, l->s + nfrom, nlen, om ? SF_PROM_UNKNOWN : SF_PROM_UNTYPED);
        if (f < 0)
            return ps->out->err;
    }
    if (om) {
        if (l->i < l->n)
            l->i++;                     /* the one space before the text */
    } else {
        skip_ws(l);
    }
    if (l->s[kfrom] == 'H') {
        size_t hl;
        char *h;

        if (ps->has_help[f])
            return fail(ps, SF_PROM_ERR_MALFORMED, "a second HELP line for '%.64s'",
                        ps->out->families[f].name);
        h = unescape(ps, l->s + l->i, l->n - l->i, om, &hl);
        if (h == NULL)
            return no_memory(ps);
        if (!utf8_ok((const unsigned char *)h, hl))
            return fail(ps, SF_PROM_ERR_MALFORMED, "HELP text that is not UTF-8 text");
        ps->out->families[f].help = h;
        ps->has_help[f] = true;
    } else if (l->s[kfrom] == 'T') {
        size_t tfrom = l->i, tlen = lex_token(l);
        bool ok;
        sf_prom_type t = type_of(ps, l->s + tfrom, tlen, &ok);

        if (!om)
            skip_ws(l);
        if (!ok || l->i != l->n)
            return fail(ps, SF_PROM_ERR_MALFORMED, "an invalid TYPE for '%.64s'",
                        ps->out->families[f].name);
        if (ps->has_type[f])
            return fail(ps, SF_PROM_ERR_MALFORMED, "a second TYPE line for '%.64s'",
                        ps->out->families[f].name);
        if (ps->out->families[f].n_samples > 0)
            return fail(ps, SF_PROM_ERR_MALFORMED, "the TYPE of '%.64s' after its samples",
                        ps->out->families[f].name);
        ps->out->families[f].type = t;
        ps->has_type[f] = true;
    } else {
        size_t ufrom = l->i, ulen = lex_token(l);

        if (l->i != l->n || !utf8_ok((const unsigned char *)l->s + ufrom, ulen))
            return fail(ps, SF_PROM_ERR_MALFORMED, "an invalid UNIT for '%.64s'",
                        ps->out->families[f].name);
        ps->out->families[f].unit = sf_arena_strndup(ps->arena, l->s + ufrom, ulen);
        if (ps->out->families[f].unit == NULL)
            return no_memory(ps);
    }
    return SF_PROM_ERR_OK;
}

/* The family a sample named name[0..n) belongs to, created untyped when
 * none claims it; -1 on error. */
static long family_of_sample(parser *ps, const char *name, size_t n)
{
    static const char *const suffixes[] = { "_bucket", "_count", "_sum", "_created", "_total",
                                            "_gcount", "_gsum", "_info" };
    long f = family_find(ps, name, n);

    if (f >= 0) {
        const sf_prom_family *fam = &ps->out->families[f];

        if (suffix_allowed(fam->type, ""))
            return f;
    }
    for (size_t s = 0; s < sizeof(suffixes) / sizeof(suffixes[0]); s++) {
        size_t sl = strlen(suffixes[s]);
        long b;

        if (n <= sl || memcmp(name + n - sl, suffixes[s], sl) != 0)
            continue;
        b = family_find(ps, name, n - sl);
        if (b >= 0 && suffix_allowed(ps->out->families[b].type, suffixes[s]))
            return b;
    }
    if (f >= 0) {
        fail(ps, SF_PROM_ERR_MALFORMED, "sample '%.*s' does not belong to %s '%.64s'",
             (int)(n < 64 ? n : 64), name,
             sf_prom_type_name(ps->out->families[f].type), ps->out->families[f].name);
        return -1;
    }
    return family_add(ps, name, n, ps->fmt == SF_PROM_OPENMETRICS ? SF_PROM_UNKNOWN
                                                                  : SF_PROM_UNTYPED);
}

static sf_prom_err sample_line(parser *ps, line *l)
{
    sf_prom_result *out = ps->out;
    bool om = ps->fmt == SF_PROM_OPENMETRICS;
    size_t nfrom = l->i, nlen = lex_name(l, true), vfrom, vlen;
    sf_prom_sample s;
    sf_prom_err e;
    long f;

    memset(&s, 0, sizeof(s));
    if (nlen == 0)
        return fail(ps, SF_PROM_ERR_MALFORMED, "expected a metric name");
    if (ps->lim->sample_limit > 0 && out->n_samples >= ps->lim->sample_limit)
        return fail(ps, SF_PROM_ERR_SAMPLE_LIMIT, "more than %zu samples (sample_limit)",
                    ps->lim->sample_limit);
    if (!om) {
        size_t at = l->i;

        skip_ws(l);                     /* "name {" in the text format */
        if (l->i >= l->n || l->s[l->i] != '{')
            l->i = at;
    }
    if (l->i < l->n && l->s[l->i] == '{') {
        l->i++;
        e = lex_labels(ps, l, false, &s.labels, &s.n_labels);
        if (e != SF_PROM_ERR_OK)
            return e;
    }
    {
        size_t from = l->i, ws = skip_ws(l);

        /* OpenMetrics: exactly one space; text: any blanks, none needed
         * after '}' */
        if (om ? (ws != 1 || l->s[from] != ' ') : (ws == 0 && s.labels == NULL))
            return fail(ps, SF_PROM_ERR_MALFORMED, "expected %s before the value",
                        om ? "one space" : "a space");
    }
    vfrom = l->i;
    vlen = lex_token(l);
    if (!parse_double(l->s + vfrom, vlen, &s.value))
        return fail(ps, SF_PROM_ERR_MALFORMED, "an invalid value for '%.*s'",
                    (int)(nlen < 64 ? nlen : 64), l->s + nfrom);
    if (skip_ws(l) > 0 && l->i < l->n && l->s[l->i] != '#') {
        size_t tfrom = l->i, tlen = lex_token(l);
        bool ok = om ? parse_ts_s(l->s + tfrom, tlen, &s.ts_ms)
                     : parse_ts_ms(l->s + tfrom, tlen, &s.ts_ms);

        if (!ok)
            return fail(ps, SF_PROM_ERR_MALFORMED, "an invalid timestamp");
        s.has_ts = true;
        skip_ws(l);
    }
    if (l->i < l->n && l->s[l->i] == '#' && om) {
        /* an exemplar: " # {labels} value [timestamp]", read and ignored */
        sf_prom_label *xl;
        uint16_t xn;
        double xv;
        int64_t xt;

        l->i++;
        if (l->i + 1 >= l->n || l->s[l->i] != ' ' || l->s[l->i + 1] != '{')
            return fail(ps, SF_PROM_ERR_MALFORMED, "an invalid exemplar");
        l->i += 2;
        e = lex_labels(ps, l, true, &xl, &xn);
        if (e != SF_PROM_ERR_OK)
            return e;
        if (l->i >= l->n || l->s[l->i] != ' ')
            return fail(ps, SF_PROM_ERR_MALFORMED, "an exemplar without a value");
        l->i++;
        vfrom = l->i;
        vlen = lex_token(l);
        if (!parse_double(l->s + vfrom, vlen, &xv))
            return fail(ps, SF_PROM_ERR_MALFORMED, "an invalid exemplar value");
        if (l->i < l->n) {
            l->i++;
            vfrom = l->i;
            vlen = lex_token(l);
            if (!parse_ts_s(l->s + vfrom, vlen, &xt))
                return fail(ps, SF_PROM_ERR_MALFORMED, "an invalid exemplar timestamp");
        }
        out->exemplars++;
    }
    if (l->i != l->n)
        return fail(ps, SF_PROM_ERR_MALFORMED, "unexpected text after the value");
    f = family_of_sample(ps, l->s + nfrom, nlen);
    if (f < 0)
        return out->err;
    s.family = (uint32_t)f;
    s.name = sf_arena_strndup(ps->arena, l->s + nfrom, nlen);
    if (s.name == NULL)
        return no_memory(ps);
    if (out->n_samples == ps->cap_samples) {
        size_t cap = ps->cap_samples ? ps->cap_samples * 2 : 64;
        sf_prom_sample *ns;

        if (ps->lim->sample_limit > 0 && cap > ps->lim->sample_limit)
            cap = ps->lim->sample_limit;
        ns = sf_arena_alloc(ps->arena, cap * sizeof(*ns));
        if (ns == NULL)
            return no_memory(ps);
        if (out->n_samples > 0)
            memcpy(ns, out->samples, out->n_samples * sizeof(*ns));
        out->samples = ns;
        ps->cap_samples = cap;
    }
    out->samples[out->n_samples++] = s;
    out->families[f].n_samples++;
    return SF_PROM_ERR_OK;
}

/* ---- duplicates ---------------------------------------------------------------- */

static uint64_t series_hash(const sf_prom_sample *s)
{
    uint64_t h = hash_bytes(HASH_SEED, s->name, strlen(s->name) + 1);

    for (uint16_t i = 0; i < s->n_labels; i++) {
        h = hash_bytes(h, s->labels[i].name, strlen(s->labels[i].name) + 1);
        h = hash_bytes(h, s->labels[i].value, s->labels[i].value_len + 1);
    }
    return h;
}

static bool same_series(const sf_prom_sample *a, const sf_prom_sample *b)
{
    if (strcmp(a->name, b->name) != 0 || a->n_labels != b->n_labels)
        return false;
    for (uint16_t i = 0; i < a->n_labels; i++)
        if (strcmp(a->labels[i].name, b->labels[i].name) != 0 ||
            a->labels[i].value_len != b->labels[i].value_len ||
            memcmp(a->labels[i].value, b->labels[i].value, a->labels[i].value_len) != 0)
            return false;
    return true;
}

static sf_prom_err mark_duplicates(parser *ps)
{
    sf_prom_result *out = ps->out;
    size_t n = 64;
    uint32_t *slots;

    while (n < out->n_samples * 2)
        n *= 2;
    slots = sf_arena_alloc(ps->arena, n * sizeof(*slots));
    if (slots == NULL)
        return no_memory(ps);
    memset(slots, 0, n * sizeof(*slots));
    for (size_t i = 0; i < out->n_samples; i++) {
        size_t j = series_hash(&out->samples[i]) & (n - 1);

        while (slots[j] != 0) {
            if (same_series(&out->samples[slots[j] - 1], &out->samples[i])) {
                out->samples[i].duplicate = true;
                out->duplicates++;
                break;
            }
            j = (j + 1) & (n - 1);
        }
        if (!out->samples[i].duplicate)
            slots[j] = (uint32_t)(i + 1);
    }
    return SF_PROM_ERR_OK;
}

/* ---- the entry point --------------------------------------------------------- */

sf_prom_err sf_prom_parse(const uint8_t *data, size_t len, sf_prom_format format,
                          const sf_prom_limits *limits, sf_arena *arena, sf_prom_result *out)
{
    parser ps = { .data = data, .len = len, .fmt = format, .lim = limits, .arena = arena,
                  .out = out };
    bool eof = false;

    memset(out, 0, sizeof(*out));
    while (ps.pos < len) {
        size_t rest = len - ps.pos, scan = rest;
        const uint8_t *nl;
        line l;
        sf_prom_err e = SF_PROM_ERR_OK;

        ps.line_no++;
        if (eof)
            return fail(&ps, SF_PROM_ERR_MALFORMED, "text after '# EOF'");
        if (limits->max_line > 0 && scan > limits->max_line + 1)
            scan = limits->max_line + 1;
        nl = memchr(data + ps.pos, '\n', scan);
        l.s = (const char *)data + ps.pos;
        l.n = nl ? (size_t)(nl - (data + ps.pos)) : scan;
        l.i = 0;
        if (limits->max_line > 0 && l.n > limits->max_line)
            return fail(&ps, SF_PROM_ERR_LINE_TOO_LONG, "a line longer than %zu bytes",
                        limits->max_line);
        ps.pos += l.n + (nl ? 1 : 0);
        if (memchr(l.s, '\0', l.n) != NULL)
            return fail(&ps, SF_PROM_ERR_MALFORMED, "a NUL byte");
        if (format == SF_PROM_TEXT)
            skip_ws(&l);
        if (l.i == l.n) {
            if (format == SF_PROM_OPENMETRICS)
                return fail(&ps, SF_PROM_ERR_MALFORMED, "an empty line");
            continue;
        }
        if (l.s[l.i] == '#') {
            l.i++;
            e = meta_line(&ps, &l, &eof);
        } else {
            e = sample_line(&ps, &l);
        }
        if (e != SF_PROM_ERR_OK)
            return e;
    }
    if (format == SF_PROM_OPENMETRICS && !eof) {
        ps.line_no++;
        return fail(&ps, SF_PROM_ERR_MALFORMED, "the text does not end with '# EOF'");
    }
    return mark_duplicates(&ps);
}

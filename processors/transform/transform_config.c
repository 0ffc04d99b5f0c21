/* processors/transform/transform_config.c: the `transform` processor's
 * config map, the parser of its OTTL statements (load time, not data path)
 * and the read-only accessors of the parsed program.
 *
 * The grammar is the small subset spanfence supports:
 *   statement := func '(' path ',' arg [ ',' arg ] ')' [ 'where' ... -> refused ]
 *   func      := keep_keys | delete_key | set | replace_pattern
 *   path      := [ctx '.'] ( 'attributes' | 'status' '.' 'message' | 'trace_state' | 'name' )
 *   arg       := '[' [ string { ',' string } ] ']' | string
 *   string    := '"' { char | '\"' | '\\' } '"'
 * and of those only these statements (ctx: the contexts each applies in):
 *   keep_keys(attributes, ["k", ...])           every context
 *   delete_key(attributes, "k")                 every context
 *   set(status.message, "")                     span
 *   set(trace_state, "")                        span, link
 *   replace_pattern(name, "regex", "repl")      span, spanevent
 * replace_pattern's regex is PCRE2 (UTF), compiled here once to check it;
 * its replacement is pcre2_substitute syntax, checked by substituting once
 * with a pattern of the same capture groups, so a reference to a group the
 * regex does not have ($9) is a load error too. Upstream's optional fourth
 * and fifth arguments (a hash function, a format) are refused.
 * Anything else is an error quoting the statement and listing the supported
 * ones: a statement spanfence cannot honour must never be silently ignored
 * (it is the privacy boundary). */
#include "transform.h"
/* sf_otlp_set_fields: the governed fields a statement's set(...) changes,
 * the context and list that say each, and the statement declared mode asks
 * for, generated from the schema source's `governs` lines
 * (pipeline/proto/trace_fields.txt, tools/gen_otlp_schema.py). */
#define SF_OTLP_SCHEMA_SET
#include "sf_otlp_schema.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <math.h>
#include <openssl/crypto.h>
#include <pcre2.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sf_transform_program {
    size_t n_ops[SF_OTLP_CTX_COUNT];
    sf_transform_op *ops[SF_OTLP_CTX_COUNT];
};


/* Each statement list, the contexts its statements may use (upstream's:
 * a log statement cannot name a span), and how a message says them. */
static const struct {
    const char *name;
    unsigned contexts;
    const char *said;
} lists[SF_SIGNAL_COUNT] = {
    [SF_SIGNAL_TRACES] = { "trace_statements",
        SF_OTLP_CTX_BIT(SF_OTLP_RESOURCE) | SF_OTLP_CTX_BIT(SF_OTLP_SCOPE) | SF_OTLP_CTX_BIT(SF_OTLP_SPAN) |
        SF_OTLP_CTX_BIT(SF_OTLP_SPANEVENT) | SF_OTLP_CTX_BIT(SF_OTLP_LINK),
        "resource, scope, span, spanevent or link" },
    [SF_SIGNAL_LOGS] = { "log_statements",
        SF_OTLP_CTX_BIT(SF_OTLP_RESOURCE) | SF_OTLP_CTX_BIT(SF_OTLP_SCOPE) | SF_OTLP_CTX_BIT(SF_OTLP_LOG),
        "resource, scope or log" },
    [SF_SIGNAL_METRICS] = { "metric_statements",
        SF_OTLP_CTX_BIT(SF_OTLP_RESOURCE) | SF_OTLP_CTX_BIT(SF_OTLP_SCOPE) |
        SF_OTLP_CTX_BIT(SF_OTLP_METRIC) | SF_OTLP_CTX_BIT(SF_OTLP_DATAPOINT),
        "resource, scope, metric or datapoint" },
};

const char *sf_transform_list_name(sf_signal list)
{
    return list >= 0 && list < SF_SIGNAL_COUNT ? lists[list].name : "?";
}

bool sf_transform_list_has(sf_signal list, sf_otlp_ctx c)
{
    return list >= 0 && list < SF_SIGNAL_COUNT && c >= 0 && c < SF_OTLP_CTX_COUNT &&
           (lists[list].contexts & SF_OTLP_CTX_BIT(c)) != 0;
}

static sf_otlp_ctx ctx_lookup(const char *s, size_t len)
{
    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
        const char *name = sf_otlp_ctx_name((sf_otlp_ctx)c);

        if (strlen(name) == len && memcmp(name, s, len) == 0)
            return (sf_otlp_ctx)c;
    }
    return SF_TRANSFORM_CTX_NONE;
}

/* ---- lexer --------------------------------------------------------------- */

typedef enum tok_kind {
    T_EOF, T_IDENT, T_STRING, T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK, T_COMMA, T_DOT, T_EQ, T_BAD
} tok_kind;

typedef struct lexer {
    const char *src;
    size_t len;
    size_t pos;             /* next byte to read */
    tok_kind kind;          /* current token */
    size_t start, end;      /* its bytes: src[start, end) (quotes included) */
} lexer;

typedef struct parser {
    lexer lx;
    sf_signal list;
    sf_otlp_ctx group;
    const sf_transform_sink *sink;
    char problem[256];      /* first problem found, without the statement */
    int nomem;
} parser;

static int fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(parser *p, const char *fmt, ...)
{
    va_list ap;

    if (p->problem[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(p->problem, sizeof(p->problem), fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int is_ident_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_ident_char(unsigned char c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

/* Where the current token is, for messages: "at column N" (1-based) or
 * "at end of statement". */
static const char *where(parser *p, char *buf, size_t size)
{
    if (p->lx.kind == T_EOF)
        return "at end of statement";
    snprintf(buf, size, "at column %zu", p->lx.start + 1);
    return buf;
}

/* Advance to the next token. A malformed token (bad character, bad escape,
 * unterminated string) becomes T_BAD and records the problem. */
static tok_kind next(parser *p)
{
    lexer *lx = &p->lx;
    unsigned char c;

    while (lx->pos < lx->len && (lx->src[lx->pos] == ' ' || lx->src[lx->pos] == '\t' ||
                                 lx->src[lx->pos] == '\n' || lx->src[lx->pos] == '\r'))
        lx->pos++;
    lx->start = lx->pos;
    if (lx->pos >= lx->len) {
        lx->end = lx->pos;
        return lx->kind = T_EOF;
    }
    c = (unsigned char)lx->src[lx->pos];
    if (is_ident_start(c)) {
        while (lx->pos < lx->len && is_ident_char((unsigned char)lx->src[lx->pos]))
            lx->pos++;
        lx->end = lx->pos;
        return lx->kind = T_IDENT;
    }
    if (c == '"') {
        lx->pos++;
        while (lx->pos < lx->len && lx->src[lx->pos] != '"') {
            if (lx->src[lx->pos] == '\\') {
                char e = lx->pos + 1 < lx->len ? lx->src[lx->pos + 1] : '\0';
                if (e != '"' && e != '\\') {
                    lx->end = lx->pos;
                    if (e == '\0')
                        fail(p, "unterminated string at column %zu", lx->start + 1);
                    else if ((unsigned char)e < 0x20 || (unsigned char)e >= 0x7f)
                        fail(p, "unsupported escape at column %zu (only \\\" and \\\\)",
                             lx->pos + 1);
                    else
                        fail(p, "unsupported escape '\\%c' at column %zu (only \\\" and \\\\)",
                             e, lx->pos + 1);
                    return lx->kind = T_BAD;
                }
                lx->pos += 2;
                continue;
            }
            lx->pos++;
        }
        if (lx->pos >= lx->len) {
            lx->end = lx->pos;
            fail(p, "unterminated string at column %zu", lx->start + 1);
            return lx->kind = T_BAD;
        }
        lx->pos++;
        lx->end = lx->pos;
        return lx->kind = T_STRING;
    }
    if (c == '=' && lx->pos + 1 < lx->len && lx->src[lx->pos + 1] == '=') {
        lx->pos += 2;
        lx->end = lx->pos;
        return lx->kind = T_EQ;
    }
    lx->pos++;
    lx->end = lx->pos;
    switch (c) {
    case '(': return lx->kind = T_LPAREN;
    case ')': return lx->kind = T_RPAREN;
    case '[': return lx->kind = T_LBRACK;
    case ']': return lx->kind = T_RBRACK;
    case ',': return lx->kind = T_COMMA;
    case '.': return lx->kind = T_DOT;
    default:
        if (c < 0x20 || c >= 0x7f)
            fail(p, "unexpected byte 0x%02x at column %zu", c, lx->start + 1);
        else
            fail(p, "unexpected character '%c' at column %zu", c, lx->start + 1);
        return lx->kind = T_BAD;
    }
}

/* Report "expected X" at the current token unless the lexer already said
 * what is wrong with it. */
static int expected(parser *p, const char *what)
{
    char buf[32];

    if (p->lx.kind == T_BAD)
        return -1;                  /* the lexer recorded the problem */
    return fail(p, "expected %s %s", what, where(p, buf, sizeof(buf)));
}

static int expect(parser *p, tok_kind kind, const char *what)
{
    if (p->lx.kind != kind)
        return expected(p, what);
    next(p);
    return 0;
}

/* The current T_STRING token, unescaped, in sink memory. */
static char *take_string(parser *p)
{
    const char *s = p->lx.src + p->lx.start + 1;
    size_t n = p->lx.end - p->lx.start - 2;
    char *out = p->sink->alloc(p->sink->ctx, n + 1);
    size_t w = 0;

    if (out == NULL) {
        p->nomem = 1;
        return NULL;
    }
    for (size_t r = 0; r < n; r++) {
        if (s[r] == '\\')
            r++;                    /* the lexer allowed only \" and \\ */
        out[w++] = s[r];
    }
    out[w] = '\0';
    return out;
}

/* ---- parser --------------------------------------------------------------- */

typedef enum path_kind {
    P_ATTRIBUTES, P_STATUS_MESSAGE, P_TRACE_STATE,
    P_FIELD                     /* a path of sf_otlp_set_fields, in some context */
} path_kind;

typedef struct path {
    path_kind kind;
    sf_otlp_ctx ctx;
    const char *field;          /* P_FIELD: the table's path ("name", "schema_url") */
    size_t start, end;          /* its text in the statement */
} path;

#define N_SET_FIELDS (sizeof(sf_otlp_set_fields) / sizeof(sf_otlp_set_fields[0]))

/* The path of sf_otlp_set_fields that the n segments at seg_start/seg_len
 * of src spell ("name", "schema_url"), in any context; NULL if none. */
static const char *set_field_path(const char *src, const size_t *seg_start,
                                  const size_t *seg_len, size_t n)
{
    for (size_t i = 0; i < N_SET_FIELDS; i++) {
        const char *dotted = sf_otlp_set_fields[i].path;
        size_t k = 0;

        for (; k < n; k++) {
            size_t len = strcspn(dotted, ".");

            if (len != seg_len[k] || memcmp(src + seg_start[k], dotted, len) != 0)
                break;
            dotted += len;
            if (*dotted == '.' && k + 1 < n)
                dotted++;
        }
        if (k == n && *dotted == '\0')
            return sf_otlp_set_fields[i].path;
    }
    return NULL;
}

static int parse_path(parser *p, path *out)
{
    const char *src = p->lx.src;
    size_t seg_start[4], seg_len[4];
    size_t n = 0, first;
    sf_otlp_ctx prefix;
    int len;

    if (p->lx.kind != T_IDENT)
        return expected(p, "a path such as 'span.attributes'");
    out->start = p->lx.start;
    for (;;) {
        if (n < 4) {
            seg_start[n] = p->lx.start;
            seg_len[n] = p->lx.end - p->lx.start;
        }
        n++;
        out->end = p->lx.end;
        if (next(p) != T_DOT)
            break;
        if (next(p) != T_IDENT)
            return expected(p, "a name after '.'");
    }
    if (p->lx.kind == T_LBRACK) {
        /* attributes["x"] and friends: skip to the matching ']' so the
         * whole path can be quoted. */
        int depth = 0;
        do {
            if (p->lx.kind == T_LBRACK)
                depth++;
            else if (p->lx.kind == T_RBRACK)
                depth--;
            else if (p->lx.kind == T_EOF)
                return fail(p, "unbalanced '[' in path at column %zu", out->start + 1);
            else if (p->lx.kind == T_BAD)
                return -1;
            out->end = p->lx.end;
            next(p);
        } while (depth > 0 || p->lx.kind == T_LBRACK);
        len = (int)(out->end - out->start);
        return fail(p, "unsupported path '%.*s'", len, src + out->start);
    }
    len = (int)(out->end - out->start);

    prefix = ctx_lookup(src + seg_start[0], seg_len[0]);
    first = prefix == SF_TRANSFORM_CTX_NONE ? 0 : 1;
#define SEG_IS(i, lit) (seg_len[i] == sizeof(lit) - 1 && memcmp(src + seg_start[i], lit, seg_len[i]) == 0)
    if (n == first + 1 && SEG_IS(first, "attributes"))
        out->kind = P_ATTRIBUTES;
    else if (n == first + 2 && SEG_IS(first, "status") && SEG_IS(first + 1, "message"))
        out->kind = P_STATUS_MESSAGE;
    else if (n == first + 1 && SEG_IS(first, "trace_state"))
        out->kind = P_TRACE_STATE;
    else if (n == first + 1 && SEG_IS(first, "metadata"))
        out->kind = P_ATTRIBUTES;       /* a metric's attributes: checked below */
    else if (n <= 4 && (out->field = set_field_path(src, seg_start + first, seg_len + first,
                                                    n - first)) != NULL)
        out->kind = P_FIELD;
    else
        return fail(p, "unsupported path '%.*s'", len, src + out->start);

    if (prefix != SF_TRANSFORM_CTX_NONE && p->group != SF_TRANSFORM_CTX_NONE &&
        prefix != p->group)
        return fail(p, "path '%.*s' does not match context '%s'", len, src + out->start,
                    sf_otlp_ctx_name(p->group));
    if (prefix == SF_TRANSFORM_CTX_NONE && p->group == SF_TRANSFORM_CTX_NONE)
        return fail(p, "path '%.*s' needs a context prefix (%s) outside a group with "
                    "'context'", len, src + out->start, lists[p->list].said);
    out->ctx = prefix != SF_TRANSFORM_CTX_NONE ? prefix : p->group;
    if (!sf_transform_list_has(p->list, out->ctx))
        return fail(p, "path '%.*s': the %s context is not one of %s' contexts (%s)", len,
                    src + out->start, sf_otlp_ctx_name(out->ctx), lists[p->list].name,
                    lists[p->list].said);
    /* upstream's spelling: a metric has metadata, the other contexts attributes */
    if (out->kind == P_ATTRIBUTES && (out->ctx == SF_OTLP_METRIC) !=
                                         SEG_IS(first, "metadata"))
        return fail(p, "unsupported path '%.*s': %s", len, src + out->start,
                    out->ctx == SF_OTLP_METRIC ? "a metric's attributes are its metadata"
                                                    : "only a metric has metadata");
#undef SEG_IS
    return 0;
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* '[' string, ... ']' into op->keys, sorted and unique. Two passes over the
 * tokens: count (and check the syntax), then copy. */
static int parse_key_list(parser *p, sf_transform_op *op)
{
    lexer at_open;
    size_t n = 0, u;
    char **keys;

    if (p->lx.kind != T_LBRACK)
        return expected(p, "a list of keys such as [\"a\", \"b\"]");
    at_open = p->lx;
    if (next(p) != T_RBRACK) {
        for (;;) {
            if (p->lx.kind != T_STRING)
                return expected(p, "a quoted key");
            n++;
            next(p);
            if (p->lx.kind == T_RBRACK)
                break;
            if (p->lx.kind != T_COMMA)
                return expected(p, "',' or ']'");
            next(p);
        }
    }
    keys = p->sink->alloc(p->sink->ctx, (n ? n : 1) * sizeof(*keys));
    if (keys == NULL) {
        p->nomem = 1;
        return -1;
    }
    p->lx = at_open;
    for (size_t i = 0; i < n; i++) {
        next(p);                    /* the string (after '[' or ',') */
        keys[i] = take_string(p);
        if (keys[i] == NULL)
            return -1;
        next(p);                    /* ',' or ']' */
    }
    if (n == 0)
        next(p);                    /* ']' */
    next(p);                        /* past ']' */
    qsort(keys, n, sizeof(*keys), cmp_keys);
    for (size_t i = u = 0; i < n; i++) {
        if (u == 0 || strcmp(keys[u - 1], keys[i]) != 0)
            keys[u++] = keys[i];
    }
    op->keys.n = n ? u : 0;
    op->keys.keys = (const char *const *)keys;
    return 0;
}

static bool tok_is(const parser *p, const char *word)
{
    size_t n = strlen(word);

    return (p->lx.kind == T_IDENT || p->lx.kind == T_STRING) &&
           p->lx.end - p->lx.start == n && memcmp(p->lx.src + p->lx.start, word, n) == 0;
}

/* After the closing ')': 1 when 'where' follows (consumed), 0 at the end,
 * -1 on anything else. */
static int parse_where(parser *p)
{
    char buf[32];

    if (expect(p, T_RPAREN, "')'") != 0)
        return -1;
    if (p->lx.kind == T_EOF)
        return 0;
    if (tok_is(p, "where")) {
        next(p);
        return 1;
    }
    if (p->lx.kind == T_BAD)
        return -1;
    return fail(p, "unexpected '%.*s' after the closing ')' %s",
                (int)(p->lx.end - p->lx.start > 40 ? 40 : p->lx.end - p->lx.start),
                p->lx.src + p->lx.start, where(p, buf, sizeof(buf)));
}

static int parse_tail(parser *p)
{
    char buf[32];

    if (expect(p, T_RPAREN, "')'") != 0)
        return -1;
    if (p->lx.kind == T_EOF)
        return 0;
    if (tok_is(p, "where"))
        return fail(p, "where clauses are not supported on this statement (only on "
                    "delete_key and on set of a name, version or schema_url)");
    if (p->lx.kind == T_BAD)
        return -1;
    return fail(p, "unexpected '%.*s' after the closing ')' %s",
                (int)(p->lx.end - p->lx.start > 40 ? 40 : p->lx.end - p->lx.start),
                p->lx.src + p->lx.start, where(p, buf, sizeof(buf)));
}

/* The current token as a quoted regular expression into *re (sink memory),
 * *tok where it starts (for columns in messages); past it. */
static int take_regex(parser *p, char **re, size_t *tok)
{
    if (p->lx.kind != T_STRING)
        return expected(p, "a quoted regular expression");
    *tok = p->lx.start;
    if ((*re = take_string(p)) == NULL)
        return -1;
    next(p);
    return 0;
}

/* ---- replace_pattern: checking the regex and the replacement --------------- */

/* PCRE2's scratch memory is counted like every other allocation. */
static void *pcre_alloc(PCRE2_SIZE size, void *ctx)
{
    (void)ctx;
    return sf_malloc(size);
}

static void pcre_release(void *ptr, void *ctx)
{
    (void)ctx;
    sf_free(ptr);
}

/* The 1-based column in the statement of byte `offset` of the unescaped
 * string whose token starts (at its opening quote) at `tok`. */
static size_t string_column(const parser *p, size_t tok, size_t offset)
{
    size_t r = tok + 1, end = p->lx.len;

    for (size_t u = 0; u < offset && r < end; u++)
        r += p->lx.src[r] == '\\' ? 2 : 1;
    return r + 1;
}

static void pcre_message(int code, char *buf, size_t size)
{
    if (pcre2_get_error_message(code, (PCRE2_UCHAR *)buf, size) < 0 && buf[0] == '\0')
        snprintf(buf, size, "pcre2 error %d", code);
}

/* A pattern that always matches the empty string and has the same capture
 * groups (numbers and names) as `code`: "(?J)()(?<name>)()...". NULL on no
 * memory. */
static char *probe_pattern(const pcre2_code *code, uint32_t groups)
{
    uint32_t names = 0, entry = 0;
    PCRE2_SPTR table = NULL;
    size_t size, w;
    char *out;

    pcre2_pattern_info(code, PCRE2_INFO_NAMECOUNT, &names);
    pcre2_pattern_info(code, PCRE2_INFO_NAMEENTRYSIZE, &entry);
    pcre2_pattern_info(code, PCRE2_INFO_NAMETABLE, &table);
    size = 5 + (size_t)groups * 2 + (size_t)names * (entry + 4);
    out = sf_malloc(size);
    if (out == NULL)
        return NULL;
    w = (size_t)snprintf(out, size, "(?J)");
    for (uint32_t g = 1; g <= groups; g++) {
        const char *name = NULL;

        for (uint32_t i = 0; i < names && name == NULL; i++) {
            PCRE2_SPTR e = table + (size_t)i * entry;

            if ((uint32_t)((e[0] << 8) | e[1]) == g)
                name = (const char *)e + 2;
        }
        if (name != NULL)
            w += (size_t)snprintf(out + w, size - w, "(?<%s>)", name);
        else
            w += (size_t)snprintf(out + w, size - w, "()");
    }
    return out;
}

/* The first group reference of `repl` that `code` does not have, for a
 * message: its text into ref (e.g. "9" or "nme"), its offset into *at. */
static bool unknown_reference(const pcre2_code *code, uint32_t groups, const char *repl,
                              char *ref, size_t refsize, size_t *at)
{
    for (size_t i = 0; repl[i] != '\0'; i++) {
        size_t s, e;

        if (repl[i] != '$')
            continue;
        if (repl[i + 1] == '$') {
            i++;
            continue;
        }
        s = i + 1 + (repl[i + 1] == '{');
        e = s;
        while (repl[e] == '_' || (repl[e] >= '0' && repl[e] <= '9') ||
               (repl[e] >= 'a' && repl[e] <= 'z') || (repl[e] >= 'A' && repl[e] <= 'Z') ||
               (unsigned char)repl[e] >= 0x80)
            e++;
        if (e == s)
            continue;                   /* ${*MARK} and syntax errors: pcre2 said */
        snprintf(ref, refsize, "%.*s", (int)(e - s), repl + s);
        if (ref[0] >= '0' && ref[0] <= '9') {
            if (strtoul(ref, NULL, 10) > groups) {
                *at = i;
                return true;
            }
        } else if (pcre2_substring_number_from_name(code, (PCRE2_SPTR)ref) < 0) {
            *at = i;
            return true;
        }
        i = e - 1;
    }
    return false;
}

/* Compile `re` (PCRE2_UTF) and substitute `repl` once with a probe of the
 * same groups, then free both. Problems name the column in the statement:
 * re_tok and repl_tok are where the two strings start. */
static int check_replace_pattern(parser *p, const char *re, size_t re_tok, const char *repl,
                                 size_t repl_tok)
{
    pcre2_general_context *gc = pcre2_general_context_create(pcre_alloc, pcre_release, NULL);
    pcre2_compile_context *cc = NULL;
    pcre2_code *code = NULL, *probe = NULL;
    char msg[160], ref[64], *probe_src = NULL, *out = NULL;
    PCRE2_SIZE erroff = 0, outlen;
    uint32_t groups = 0;
    size_t at;
    int err = 0, rc = -1;

    if (gc == NULL || (cc = pcre2_compile_context_create(gc)) == NULL)
        goto out_nomem;
    code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &erroff, cc);
    if (code == NULL) {
        if (err == PCRE2_ERROR_HEAP_FAILED)
            goto out_nomem;
        pcre_message(err, msg, sizeof(msg));
        fail(p, "invalid regular expression at column %zu (offset %zu of the pattern): %s",
             string_column(p, re_tok, erroff), (size_t)erroff, msg);
        goto out;
    }
    pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &groups);
    probe_src = probe_pattern(code, groups);
    if (probe_src == NULL)
        goto out_nomem;
    probe = pcre2_compile((PCRE2_SPTR)probe_src, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err,
                          &erroff, cc);
    if (probe == NULL) {
        if (err == PCRE2_ERROR_HEAP_FAILED)
            goto out_nomem;
        pcre_message(err, msg, sizeof(msg));    /* well formed by construction */
        fail(p, "cannot check the replacement: %s", msg);
        goto out;
    }
    /* every group of the probe is set and empty: the result is never
     * longer than the replacement */
    outlen = strlen(repl) + 1;
    out = sf_malloc(outlen);
    if (out == NULL)
        goto out_nomem;
    err = pcre2_substitute(probe, (PCRE2_SPTR)"", 0, 0, PCRE2_SUBSTITUTE_GLOBAL, NULL, NULL,
                           (PCRE2_SPTR)repl, PCRE2_ZERO_TERMINATED, (PCRE2_UCHAR *)out, &outlen);
    if (err == PCRE2_ERROR_NOMEMORY)
        goto out_nomem;
    if (err < 0) {
        if (err == PCRE2_ERROR_NOSUBSTRING &&
            unknown_reference(code, groups, repl, ref, sizeof(ref), &at))
            fail(p, "the replacement refers to group '%s' at column %zu, which the pattern "
                 "does not have (it has %u capture group%s)", ref, string_column(p, repl_tok, at),
                 groups, groups == 1 ? "" : "s");
        else if (outlen != PCRE2_UNSET && outlen <= strlen(repl)) {
            pcre_message(err, msg, sizeof(msg));
            fail(p, "invalid replacement at column %zu (offset %zu of the replacement): %s",
                 string_column(p, repl_tok, outlen), (size_t)outlen, msg);
        } else {
            pcre_message(err, msg, sizeof(msg));
            fail(p, "invalid replacement: %s", msg);
        }
        goto out;
    }
    rc = 0;
    goto out;

out_nomem:
    p->nomem = 1;
out:
    sf_free(out);
    pcre2_code_free(probe);
    sf_free(probe_src);
    pcre2_code_free(code);
    pcre2_compile_context_free(cc);
    pcre2_general_context_free(gc);
    return rc;
}

/* ---- statements ----------------------------------------------------------------- */

typedef enum func_kind {
    F_KEEP_KEYS, F_DELETE_KEY, F_SET, F_REPLACE_PATTERN, F_PSEUDONYMIZE, F_KEEP_EXEMPLARS
} func_kind;

/* IsMatch's pattern, compiled once to check it: PCRE2 with Go's reading of
 * '$' (the end of the string only, PCRE2_DOLLAR_ENDONLY), as upstream. */
#define SF_TRANSFORM_MATCH_OPTIONS (PCRE2_UTF | PCRE2_DOLLAR_ENDONLY)

static int check_match_pattern(parser *p, const char *re, size_t tok)
{
    pcre2_general_context *gc = pcre2_general_context_create(pcre_alloc, pcre_release, NULL);
    pcre2_compile_context *cc = NULL;
    pcre2_code *code = NULL;
    PCRE2_SIZE erroff = 0;
    char msg[160];
    int err = 0, rc = 0;

    if (gc == NULL || (cc = pcre2_compile_context_create(gc)) == NULL) {
        p->nomem = 1;
        rc = -1;
        goto out;
    }
    code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, SF_TRANSFORM_MATCH_OPTIONS, &err,
                         &erroff, cc);
    if (code == NULL) {
        pcre_message(err, msg, sizeof(msg));
        rc = fail(p, "invalid regular expression at column %zu (offset %zu of the pattern): %s",
                  string_column(p, tok, erroff), (size_t)erroff, msg);
    }
out:
    pcre2_code_free(code);
    pcre2_compile_context_free(cc);
    pcre2_general_context_free(gc);
    return rc;
}

/* The cheap shapes of an IsMatch pattern: ^[0-9a-f]{N}$, ^[0-9a-f]{N,M}$,
 * ^[0-9a-f]+$ (lowercase hex of a length), and ^(a|b|...)$ or ^a$ with
 * plain literals (a set of strings). Anything else stays a regex. */
static int classify_pattern(parser *p, const char *re, sf_otlp_value_alt *a)
{
    unsigned lo = 0, hi = 0;
    int end = 0;
    size_t n = strlen(re);

    if (sscanf(re, "^[0-9a-f]{%u}$%n", &lo, &end) == 1 && (size_t)end == n && lo > 0) {
        a->shape = SF_OTLP_STR_HEX;
        a->min_len = a->max_len = lo;
        return 0;
    }
    end = 0;
    if (sscanf(re, "^[0-9a-f]{%u,%u}$%n", &lo, &hi, &end) == 2 && (size_t)end == n && lo <= hi) {
        a->shape = SF_OTLP_STR_HEX;
        a->min_len = lo;
        a->max_len = hi;
        return 0;
    }
    if (strcmp(re, "^[0-9a-f]+$") == 0) {
        a->shape = SF_OTLP_STR_HEX;
        a->min_len = 1;
        a->max_len = UINT32_MAX;
        return 0;
    }
    if (n >= 3 && re[0] == '^' && re[n - 1] == '$') {
        size_t b = 1, e = n - 1, count = 1;
        char **set;
        bool plain = true;

        if (re[1] == '(' && re[n - 2] == ')') {
            b = 2;
            e = n - 2;
        }
        for (size_t i = b; i < e && plain; i++) {
            char ch = re[i];

            if (ch == '|' && b == 2)
                count++;
            else if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                       (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == ' ' ||
                       ch == ':' || ch == '/' || ch == ',' || ch == '=' || ch == '@'))
                plain = false;
        }
        if (plain && e > b) {
            size_t k = 0, start = b;

            set = p->sink->alloc(p->sink->ctx, count * sizeof(*set));
            if (set == NULL) {
                p->nomem = 1;
                return -1;
            }
            for (size_t i = b; i <= e; i++) {
                if (i == e || re[i] == '|') {
                    set[k] = p->sink->alloc(p->sink->ctx, i - start + 1);
                    if (set[k] == NULL) {
                        p->nomem = 1;
                        return -1;
                    }
                    memcpy(set[k], re + start, i - start);
                    set[k++][i - start] = '\0';
                    start = i + 1;
                }
            }
            a->shape = SF_OTLP_STR_SET;
            a->n_set = count;
            a->set = (const char *const *)set;
            return 0;
        }
    }
    a->shape = SF_OTLP_STR_REGEX;
    a->regex = re;
    return 0;
}

/* [ctx '.'] 'attributes' '[' "key" ']', the key being the statement's
 * ('metadata' for a metric's); [ctx '.'] 'body' when key is NULL (the
 * condition of set(body, nil)). */
static int parse_attr_ref(parser *p, const char *key)
{
    char buf[32];
    const char *what = key == NULL ? "body" : "attributes[\"key\"]";
    char *k;

    if (p->lx.kind == T_IDENT && !tok_is(p, "attributes") && !tok_is(p, "metadata") &&
        !tok_is(p, "body")) {
        sf_otlp_ctx c = ctx_lookup(p->lx.src + p->lx.start, p->lx.end - p->lx.start);

        if (c == SF_TRANSFORM_CTX_NONE || next(p) != T_DOT)
            return expected(p, what);
        next(p);
    }
    if (key == NULL) {
        if (!tok_is(p, "body") || p->lx.kind != T_IDENT)
            return expected(p, what);
        next(p);
        return 0;
    }
    if ((!tok_is(p, "attributes") && !tok_is(p, "metadata")) || p->lx.kind != T_IDENT)
        return expected(p, what);
    if (next(p) != T_LBRACK || next(p) != T_STRING)
        return expected(p, "attributes[\"key\"]");
    k = take_string(p);
    if (k == NULL)
        return -1;
    if (strcmp(k, key) != 0)
        return fail(p, "the condition tests attributes[\"%s\"] %s, but the statement is about "
                    "\"%s\"", k, where(p, buf, sizeof(buf)), key);
    if (next(p) != T_RBRACK)
        return expected(p, "']'");
    next(p);
    return 0;
}

/* One test of a value: IsInt/IsDouble/IsBool/IsString(attributes["k"]),
 * IsMatch(attributes["k"], "re"), attributes["k"] == "text"; narrows *a. */
static int parse_atom(parser *p, const char *key, sf_otlp_value_alt *a, bool *shaped)
{
    static const struct { const char *name; unsigned type; } preds[] = {
        { "IsInt", SF_OTLP_VAL_INT }, { "IsDouble", SF_OTLP_VAL_DOUBLE },
        { "IsBool", SF_OTLP_VAL_BOOL }, { "IsString", SF_OTLP_VAL_STRING },
    };
    char buf[32];

    for (size_t i = 0; i < sizeof(preds) / sizeof(preds[0]); i++) {
        if (p->lx.kind == T_IDENT && tok_is(p, preds[i].name)) {
            if (next(p) != T_LPAREN)
                return expected(p, "'('");
            next(p);
            if (parse_attr_ref(p, key) != 0 || expect(p, T_RPAREN, "')'") != 0)
                return -1;
            a->types &= preds[i].type;
            return 0;
        }
    }
    if (p->lx.kind == T_IDENT && tok_is(p, "IsMatch")) {
        size_t tok = 0;
        char *re = NULL;

        if (next(p) != T_LPAREN)
            return expected(p, "'('");
        next(p);
        if (parse_attr_ref(p, key) != 0 || expect(p, T_COMMA, "','") != 0 ||
            take_regex(p, &re, &tok) != 0)
            return -1;
        if (expect(p, T_RPAREN, "')'") != 0 || check_match_pattern(p, re, tok) != 0)
            return -1;
        if (*shaped)
            return fail(p, "at most one IsMatch or == in an 'and' group");
        *shaped = true;
        a->types &= SF_OTLP_VAL_STRING;
        return classify_pattern(p, re, a);
    }
    if (p->lx.kind == T_IDENT) {
        char **set;

        if (parse_attr_ref(p, key) != 0)
            return -1;
        if (p->lx.kind != T_EQ)
            return expected(p, "'=='");
        if (next(p) != T_STRING)
            return expected(p, "a quoted string");
        if (*shaped)
            return fail(p, "at most one IsMatch or == in an 'and' group");
        *shaped = true;
        set = p->sink->alloc(p->sink->ctx, sizeof(*set));
        if (set == NULL || (set[0] = take_string(p)) == NULL) {
            p->nomem = 1;
            return -1;
        }
        next(p);
        a->types &= SF_OTLP_VAL_STRING;
        a->shape = SF_OTLP_STR_SET;
        a->n_set = 1;
        a->set = (const char *const *)set;
        return 0;
    }
    return expected(p, "IsInt, IsDouble, IsBool, IsString, IsMatch or attributes[\"key\"] ==");
    (void)buf;
}

/* The condition after 'where not': one 'and' group, or '(' groups joined
 * by 'or' ')'. Each group becomes one alternative of the rule. */
static int parse_value_condition(parser *p, const char *key, sf_otlp_value_rule *rule)
{
    sf_otlp_value_alt alts[16];
    size_t n = 0;
    bool paren = p->lx.kind == T_LPAREN;
    sf_otlp_value_alt *copy;

    if (paren)
        next(p);
    for (;;) {
        sf_otlp_value_alt *a = &alts[n];
        bool shaped = false;

        if (n == sizeof(alts) / sizeof(alts[0]))
            return fail(p, "more than %zu alternatives joined by 'or'", n);
        memset(a, 0, sizeof(*a));
        a->types = SF_OTLP_VAL_STRING | SF_OTLP_VAL_INT | SF_OTLP_VAL_DOUBLE | SF_OTLP_VAL_BOOL;
        for (;;) {
            if (parse_atom(p, key, a, &shaped) != 0)
                return -1;
            if (!tok_is(p, "and") || p->lx.kind != T_IDENT)
                break;
            next(p);
        }
        if (a->types == 0)
            return fail(p, "an 'and' group of the condition can never hold (two different "
                        "types)");
        n++;
        if (!tok_is(p, "or") || p->lx.kind != T_IDENT)
            break;
        if (!paren)
            return fail(p, "write the condition after 'where not' in parentheses when it "
                        "joins tests with 'or'");
        next(p);
    }
    if (paren && expect(p, T_RPAREN, "')'") != 0)
        return -1;
    if (p->lx.kind != T_EOF)
        return expected(p, "the end of the statement");
    copy = p->sink->alloc(p->sink->ctx, n * sizeof(*copy));
    if (copy == NULL) {
        p->nomem = 1;
        return -1;
    }
    memcpy(copy, alts, n * sizeof(*copy));
    rule->n_alts = n;
    rule->alts = copy;
    return 0;
}

/* After 'where': 'not' and the condition on attributes[key] (the body when
 * key is NULL) into a rule in sink memory; `say` when 'not' is missing. */
static int parse_not_condition(parser *p, const char *key, const char *say,
                               sf_otlp_value_rule **out)
{
    sf_otlp_value_rule *rule;

    if (!tok_is(p, "not") || p->lx.kind != T_IDENT)
        return fail(p, "%s", say);
    next(p);
    rule = p->sink->alloc(p->sink->ctx, sizeof(*rule));
    if (rule == NULL) {
        p->nomem = 1;
        return -1;
    }
    memset(rule, 0, sizeof(*rule));
    if (parse_value_condition(p, key, rule) != 0)
        return -1;
    *out = rule;
    return 0;
}

/* The string field `pa` names, or SF_OTLP_FIELD_NONE. */
static sf_otlp_field field_of(const path *pa)
{
    for (size_t i = 0; pa->kind == P_FIELD && i < N_SET_FIELDS; i++) {
        const sf_otlp_set_field *f = &sf_otlp_set_fields[i];

        if (f->ctx == pa->ctx && strcmp(f->path, pa->field) == 0)
            return f->field;
    }
    return SF_OTLP_FIELD_NONE;
}

/* The i-th of the set fields of statement list `list`, in the order
 * messages say them: the list's own, then those of every list (the
 * resource's and the scope's); NULL past the end. */
static const sf_otlp_set_field *set_field_of_list(sf_signal list, size_t i)
{
    for (size_t k = 0; k < 2 * N_SET_FIELDS; k++) {
        const sf_otlp_set_field *f = &sf_otlp_set_fields[k % N_SET_FIELDS];

        if (f->list == (k < N_SET_FIELDS ? list : SF_SIGNAL_COUNT) && i-- == 0)
            return f;
    }
    return NULL;
}

/* The fields set can change in statement list `list`, for messages: per
 * context "<context> <path>, <path>", contexts with the same paths joined
 * ("span and spanevent name"), "; " between. */
static const char *set_fields_said(sf_signal list, char *buf, size_t size)
{
    size_t w = 0, n = 0;
    struct { sf_otlp_ctx ctx; const char *paths[N_SET_FIELDS]; size_t n; } g[SF_OTLP_CTX_COUNT];
    const sf_otlp_set_field *f;

    for (size_t i = 0; (f = set_field_of_list(list, i)) != NULL; i++) {
        size_t j = 0;

        while (j < n && g[j].ctx != f->ctx)
            j++;
        if (j == n) {
            g[n].ctx = f->ctx;
            g[n++].n = 0;
        }
        g[j].paths[g[j].n++] = f->path;
    }
    buf[0] = '\0';
    for (size_t j = 0; j < n && w < size; j++) {
        bool same_next = j + 1 < n && g[j + 1].n == g[j].n;

        for (size_t k = 0; same_next && k < g[j].n; k++)
            same_next = strcmp(g[j].paths[k], g[j + 1].paths[k]) == 0;
        w += (size_t)snprintf(buf + w, size - w, "%s%s", sf_otlp_ctx_name(g[j].ctx),
                              same_next ? " and " : " ");
        if (same_next || w >= size)
            continue;
        for (size_t k = 0; k < g[j].n && w < size; k++)
            w += (size_t)snprintf(buf + w, size - w, "%s%s", k ? ", " : "", g[j].paths[k]);
        if (j + 1 < n && w < size)
            w += (size_t)snprintf(buf + w, size - w, "; ");
    }
    return buf;
}

/* set(body, nil) [where not <condition on body>]: the body leaves only
 * when the condition holds (the value-rule machinery of attributes). */
static int parse_set_body(parser *p, sf_transform_op *op)
{
    sf_otlp_value_rule *rule;
    int w;

    if (!tok_is(p, "nil") || p->lx.kind != T_IDENT)
        return fail(p, "the body can only be dropped: set(body, nil) [where not <what a body "
                    "that leaves must be>]");
    next(p);
    op->replacement = "";
    w = parse_where(p);
    if (w <= 0)
        return w;
    if (parse_not_condition(p, NULL, "a condition on the body must read 'where not <what a "
                            "body that leaves must be>'", &rule) != 0)
        return -1;
    op->rule = rule;
    return 0;
}

/* set(<field>, "v") [where not IsMatch(<field>, "re")], set(entity_refs, []),
 * set(exemplars, []), set(body, nil) [where not ...]. */
static int parse_set_field(parser *p, sf_transform_op *op, const path *pa)
{
    char said[256];
    int w;

    op->kind = SF_RULE_SET_FIELD;
    op->field = field_of(pa);
    if (op->field == SF_OTLP_FIELD_NONE)
        return fail(p, "'%.*s' is not a field of the %s context that set can change (%s)",
                    (int)(pa->end - pa->start), p->lx.src + pa->start, sf_otlp_ctx_name(pa->ctx),
                    set_fields_said(p->list, said, sizeof(said)));
    if (expect(p, T_COMMA, "','") != 0)
        return -1;
    if (op->field == SF_OTLP_FIELD_LOG_BODY)
        return parse_set_body(p, op);
    if (op->field == SF_OTLP_FIELD_ENTITY_REFS || op->field == SF_OTLP_FIELD_EXEMPLARS) {
        const char *name = op->field == SF_OTLP_FIELD_ENTITY_REFS ? "entity_refs" : "exemplars";

        if (p->lx.kind != T_LBRACK || next(p) != T_RBRACK)
            return fail(p, "%s can only be cleared: set(%s, [])", name, name);
        next(p);
        op->replacement = "";
        return parse_tail(p);
    }
    if (p->lx.kind != T_STRING)
        return expected(p, "a quoted string");
    if ((op->replacement = take_string(p)) == NULL)
        return -1;
    next(p);
    w = parse_where(p);
    if (w <= 0)
        return w;
    {
        path cond = { 0 };
        size_t tok = 0;
        char *re = NULL;

        if (!tok_is(p, "not") || p->lx.kind != T_IDENT)
            return expected(p, "'not IsMatch(...)'");
        if (next(p) != T_IDENT || !tok_is(p, "IsMatch"))
            return expected(p, "'IsMatch'");
        if (next(p) != T_LPAREN)
            return expected(p, "'('");
        next(p);
        if (parse_path(p, &cond) != 0)
            return -1;
        if (field_of(&cond) != op->field)
            return fail(p, "the condition must test the field the statement sets");
        if (expect(p, T_COMMA, "','") != 0 || take_regex(p, &re, &tok) != 0 ||
            expect(p, T_RPAREN, "')'") != 0)
            return -1;
        if (p->lx.kind != T_EOF)
            return expected(p, "the end of the statement");
        if (check_match_pattern(p, re, tok) != 0)
            return -1;
        op->pattern = re;
    }
    return 0;
}

/* set(status.message, "") and set(trace_state, ""), the path parsed. */
static int parse_set(parser *p, sf_transform_op *op, const path *pa)
{
    const char *what;

    if (pa->kind != P_STATUS_MESSAGE && pa->kind != P_TRACE_STATE && pa->kind != P_ATTRIBUTES)
        return parse_set_field(p, op, pa);   /* the string fields, body, exemplars */
    if (pa->kind == P_STATUS_MESSAGE) {
        op->kind = SF_RULE_CLEAR_STATUS_MESSAGE;
        what = "status.message";
        if (pa->ctx != SF_OTLP_SPAN)
            return fail(p, "status.message exists only in the span context, not '%s'",
                        sf_otlp_ctx_name(pa->ctx));
    } else if (pa->kind == P_TRACE_STATE) {
        op->kind = SF_RULE_CLEAR_TRACE_STATE;
        what = "trace_state";
        if (pa->ctx != SF_OTLP_SPAN && pa->ctx != SF_OTLP_LINK)
            return fail(p, "trace_state exists only in the span and link contexts, not '%s'",
                        sf_otlp_ctx_name(pa->ctx));
    } else {
        return fail(p, "unsupported path '%.*s' for set: only status.message and trace_state "
                    "can be set", (int)(pa->end - pa->start), p->lx.src + pa->start);
    }
    if (expect(p, T_COMMA, "','") != 0)
        return -1;
    if (p->lx.kind == T_BAD)
        return -1;
    if (p->lx.kind != T_STRING || p->lx.end - p->lx.start != 2)
        return fail(p, "only the empty string \"\" is supported as the value of %s", what);
    next(p);
    return parse_tail(p);
}

/* replace_pattern(name, "regex", "replacement"), the path parsed. */
static int parse_replace_pattern(parser *p, sf_transform_op *op, const path *pa)
{
    size_t re_tok = 0, repl_tok;
    char *re = NULL, *repl;

    op->kind = SF_RULE_REPLACE_PATTERN;
    if (pa->kind != P_FIELD || strcmp(pa->field, "name") != 0)
        return fail(p, "unsupported path '%.*s' for replace_pattern: only name",
                    (int)(pa->end - pa->start), p->lx.src + pa->start);
    if (pa->ctx != SF_OTLP_SPAN && pa->ctx != SF_OTLP_SPANEVENT)
        return fail(p, "replace_pattern rewrites span and span event names only, not '%s' "
                    "names", sf_otlp_ctx_name(pa->ctx));
    if (expect(p, T_COMMA, "','") != 0 || take_regex(p, &re, &re_tok) != 0 ||
        expect(p, T_COMMA, "','") != 0)
        return -1;
    if (p->lx.kind != T_STRING)
        return expected(p, "a quoted replacement");
    repl_tok = p->lx.start;
    if ((repl = take_string(p)) == NULL)
        return -1;
    next(p);
    if (p->lx.kind == T_COMMA)
        return fail(p, "replace_pattern's optional function and format arguments are not "
                    "supported");
    if (parse_tail(p) != 0)
        return -1;
    if (check_replace_pattern(p, re, re_tok, repl, repl_tok) != 0)
        return -1;
    op->pattern = re;
    op->replacement = repl;
    return 0;
}

static int parse(parser *p, sf_transform_op *op)
{
    const char *name;
    size_t name_len;
    func_kind fn;
    path pa = { 0 };

    next(p);
    if (p->lx.kind != T_IDENT)
        return expected(p, "a function name");
    name = p->lx.src + p->lx.start;
    name_len = p->lx.end - p->lx.start;
    if (next(p) != T_LPAREN)
        return expected(p, "'('");
#define NAME_IS(lit) (name_len == sizeof(lit) - 1 && memcmp(name, lit, name_len) == 0)
    if (NAME_IS("keep_keys"))
        fn = F_KEEP_KEYS;
    else if (NAME_IS("delete_key"))
        fn = F_DELETE_KEY;
    else if (NAME_IS("set"))
        fn = F_SET;
    else if (NAME_IS("replace_pattern"))
        fn = F_REPLACE_PATTERN;
    else if (NAME_IS("pseudonymize"))
        fn = F_PSEUDONYMIZE;
    else if (NAME_IS("keep_exemplars"))
        fn = F_KEEP_EXEMPLARS;
    else
        return fail(p, "unsupported function '%.*s'", (int)name_len, name);
#undef NAME_IS
    next(p);
    if (parse_path(p, &pa) != 0)
        return -1;
    op->ctx = pa.ctx;

    if (fn == F_SET)
        return parse_set(p, op, &pa);
    if (fn == F_REPLACE_PATTERN)
        return parse_replace_pattern(p, op, &pa);
    if (fn == F_KEEP_EXEMPLARS) {
        op->kind = SF_RULE_KEEP_EXEMPLARS;
        if (field_of(&pa) != SF_OTLP_FIELD_EXEMPLARS)
            return fail(p, "unsupported path '%.*s' for keep_exemplars: only exemplars "
                        "(datapoint)", (int)(pa.end - pa.start), p->lx.src + pa.start);
        return parse_tail(p);
    }

    op->kind = fn == F_KEEP_KEYS ? SF_RULE_KEEP_KEYS
               : fn == F_PSEUDONYMIZE ? SF_RULE_PSEUDONYMIZE : SF_RULE_DELETE_KEY;
    if (pa.kind != P_ATTRIBUTES)
        return fail(p, "unsupported path '%.*s' for %s: only attributes",
                    (int)(pa.end - pa.start), p->lx.src + pa.start,
                    fn == F_KEEP_KEYS ? "keep_keys" : fn == F_PSEUDONYMIZE ? "pseudonymize"
                                                                           : "delete_key");
    if (expect(p, T_COMMA, "','") != 0)
        return -1;
    if (op->kind == SF_RULE_KEEP_KEYS) {
        if (parse_key_list(p, op) != 0)
            return -1;
    } else {
        char **key;

        if (p->lx.kind != T_STRING)
            return expected(p, "a quoted key");
        key = p->sink->alloc(p->sink->ctx, sizeof(*key));
        if (key == NULL || (*key = take_string(p)) == NULL) {
            p->nomem = 1;
            return -1;
        }
        op->keys.n = 1;
        op->keys.keys = (const char *const *)key;
        next(p);
        if (op->kind == SF_RULE_DELETE_KEY) {
            int w = parse_where(p);
            sf_otlp_value_rule *rule;

            if (w <= 0)
                return w;
            if (parse_not_condition(p, *key, "a delete_key condition must read 'where not "
                                    "<what the value must be>'", &rule) != 0)
                return -1;
            op->kind = SF_RULE_VALUE;
            op->rule = rule;
            return 0;
        }
    }
    return parse_tail(p);
}

/* Appended to every refusal, so the fix is in the message. */
static const char supported_statements[] =
    "supported: keep_keys(attributes, [...]), delete_key(attributes, \"key\") "
    "[where not <condition on attributes[\"key\"]>], pseudonymize(attributes, \"key\"), "
    "set(status.message, \"\"), set(trace_state, \"\"), "
    "set(<name|version|schema_url>, \"value\") [where not IsMatch(<same>, \"regex\")], "
    "set(entity_refs, []), replace_pattern(name, \"regex\", \"replacement\")";
static const char supported_log_statements[] =
    "supported: keep_keys(attributes, [...]), delete_key(attributes, \"key\") "
    "[where not <condition on attributes[\"key\"]>], pseudonymize(attributes, \"key\"), "
    "set(body, nil) [where not <condition on body>], "
    "set(<severity_text|event_name|name|version|schema_url>, \"value\") "
    "[where not IsMatch(<same>, \"regex\")], set(entity_refs, [])";
static const char supported_metric_statements[] =
    "supported: keep_keys(<attributes|metadata>, [...]), delete_key(<attributes|metadata>, "
    "\"key\") [where not <condition on it>], pseudonymize(attributes, \"key\"), "
    "set(<name|description|unit|version|schema_url>, \"value\") "
    "[where not IsMatch(<same>, \"regex\")], set(exemplars, []), keep_exemplars(exemplars), "
    "set(entity_refs, [])";
static const char *const supported[SF_SIGNAL_COUNT] = {
    supported_statements, supported_log_statements, supported_metric_statements,
};

sf_status sf_transform_parse_statement(const char *text, size_t len, sf_otlp_ctx group,
                                       const sf_transform_sink *sink, sf_transform_op *op,
                                       char *err, size_t errlen)
{
    return sf_transform_parse_in(SF_SIGNAL_TRACES, text, len, group, sink, op, err,
                                 errlen);
}

sf_status sf_transform_parse_in(sf_signal list, const char *text, size_t len,
                                sf_otlp_ctx group, const sf_transform_sink *sink,
                                sf_transform_op *op, char *err, size_t errlen)
{
    parser p;
    char *copy;
    size_t blank = 0;

    memset(&p, 0, sizeof(p));
    memset(op, 0, sizeof(*op));
    op->error_mode = -1;
    p.lx.src = text;
    p.lx.len = len;
    p.list = list;
    p.group = group;
    p.sink = sink;

    /* text is len bytes, not necessarily NUL-terminated (strspn would read on). */
    while (blank < len && (text[blank] == ' ' || text[blank] == '\t' || text[blank] == '\r' ||
                           text[blank] == '\n'))
        blank++;
    if (blank == len) {
        snprintf(err, errlen, "empty statement; %s", supported[list]);
        return SF_CONFIG;
    }
    if (memchr(text, '\0', len) != NULL)
        fail(&p, "statement contains a NUL byte");
    else
        parse(&p, op);
    if (p.nomem) {
        snprintf(err, errlen, "out of memory");
        return SF_ENOMEM;
    }
    if (p.problem[0] != '\0') {
        snprintf(err, errlen, "%s in statement '%.*s'; %s", p.problem, (int)len, text,
                 supported[list]);
        return SF_CONFIG;
    }
    copy = sink->alloc(sink->ctx, len + 1);
    if (copy == NULL) {
        snprintf(err, errlen, "out of memory");
        return SF_ENOMEM;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    op->statement = copy;
    return SF_OK;
}

/* ---- program ---------------------------------------------------------------- */

typedef struct builder {
    sf_signal list;
    const sf_transform_sink *sink;
    sf_transform_program *prog;
    char *err;                  /* message buffer, errlen bytes */
    size_t errlen;
    int errors;
    int nomem;
} builder;

static void report(builder *b, const sf_node *at, const char *subpath, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void report(builder *b, const sf_node *at, const char *subpath, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(b->err, b->errlen, fmt, ap);
    va_end(ap);
    b->sink->error(b->sink->ctx, at, subpath, b->err);
    b->errors++;
}

static void add_statement(builder *b, const sf_node *node, sf_otlp_ctx group,
                          int error_mode, const char *subpath)
{
    sf_transform_op op;
    sf_status st;

    if (node->kind != SF_NODE_SCALAR || node->is_null) {
        report(b, node, subpath, "a statement must be a string");
        return;
    }
    st = sf_transform_parse_in(b->list, node->text, node->len, group, b->sink, &op, b->err,
                               b->errlen);
    if (st == SF_ENOMEM) {
        b->nomem = 1;
        return;
    }
    if (st != SF_OK) {
        b->sink->error(b->sink->ctx, node, subpath, b->err);
        b->errors++;
        return;
    }
    op.error_mode = error_mode;
    op.node = node;
    b->prog->ops[op.ctx][b->prog->n_ops[op.ctx]++] = op;
}

static int scalar_is(const sf_node *n, const char *s)
{
    return n->kind == SF_NODE_SCALAR && n->len == strlen(s) && memcmp(n->text, s, n->len) == 0;
}

static void add_group(builder *b, const sf_node *map, size_t i)
{
    const sf_node *statements = NULL;
    sf_otlp_ctx ctx = SF_TRANSFORM_CTX_NONE;
    int error_mode = -1, skip = 0;
    char sub[64], sub2[128];

    snprintf(sub, sizeof(sub), "[%zu]", i);
    for (size_t k = 0; k < map->n; k++) {
        const sf_node *key = map->keys[k], *val = map->items[k];

        if (scalar_is(key, "context")) {
            snprintf(sub2, sizeof(sub2), "%s.context", sub);
            if (val->kind == SF_NODE_SCALAR)
                ctx = ctx_lookup(val->text, val->len);
            if (!sf_transform_list_has(b->list, ctx)) {
                ctx = SF_TRANSFORM_CTX_NONE;
                skip = 1;
                if (val->kind == SF_NODE_SCALAR)
                    report(b, val, sub2, "unsupported context '%s' (%s)", val->text,
                           lists[b->list].said);
                else
                    report(b, val, sub2, "context must be one of %s", lists[b->list].said);
            }
        } else if (scalar_is(key, "statements")) {
            statements = val;
        } else if (scalar_is(key, "error_mode")) {
            snprintf(sub2, sizeof(sub2), "%s.error_mode", sub);
            for (int m = 0; m < SF_ERROR_MODE_COUNT; m++) {
                if (scalar_is(val, sf_error_mode_name(m)))
                    error_mode = m;
            }
            if (error_mode < 0) {
                report(b, val, sub2, "unsupported error_mode '%s' (propagate, ignore or silent)",
                       val->kind == SF_NODE_SCALAR ? val->text : "");
                skip = 1;
            }
        } else if (scalar_is(key, "conditions")) {
            snprintf(sub2, sizeof(sub2), "%s.conditions", sub);
            report(b, key, sub2, "conditions are not supported: spanfence applies every "
                   "statement to every item");
        } else {
            report(b, key, sub, "unknown key '%s'",
                   key->kind == SF_NODE_SCALAR ? key->text : "");
        }
    }
    if (statements == NULL) {
        report(b, map, sub, "'statements' is required");
        return;
    }
    snprintf(sub2, sizeof(sub2), "%s.statements", sub);
    if (statements->kind == SF_NODE_SCALAR && statements->is_null)
        return;
    if (statements->kind != SF_NODE_SEQ) {
        report(b, statements, sub2, "statements must be a list of strings");
        return;
    }
    if (skip)
        return;                     /* cannot judge statements without their context */
    for (size_t j = 0; j < statements->n && !b->nomem; j++) {
        snprintf(sub2, sizeof(sub2), "%s.statements[%zu]", sub, j);
        add_statement(b, statements->items[j], ctx, error_mode, sub2);
    }
}

/* An upper bound of the statements under `node`, so each context's array
 * can be allocated once. */
static size_t count_statements(const sf_node *node)
{
    size_t n = 0;

    for (size_t i = 0; i < node->n; i++) {
        const sf_node *it = node->items[i];

        if (it->kind != SF_NODE_MAP) {
            n++;
            continue;
        }
        for (size_t k = 0; k < it->n; k++) {
            if (scalar_is(it->keys[k], "statements") && it->items[k]->kind == SF_NODE_SEQ)
                n += it->items[k]->n;
        }
    }
    return n;
}

static size_t longest_scalar(const sf_node *node)
{
    size_t m = 0;

    if (node->kind == SF_NODE_SCALAR)
        return node->len;
    for (size_t i = 0; i < node->n; i++) {
        size_t l = longest_scalar(node->items[i]);
        if (node->kind == SF_NODE_MAP) {
            size_t kl = longest_scalar(node->keys[i]);
            l = kl > l ? kl : l;
        }
        m = l > m ? l : m;
    }
    return m;
}

sf_status sf_transform_program_build(const sf_node *node, const sf_transform_sink *sink,
                                     sf_transform_program **out)
{
    return sf_transform_program_build_list(SF_SIGNAL_TRACES, node, sink, out);
}

sf_status sf_transform_program_build_list(sf_signal list, const sf_node *node,
                                          const sf_transform_sink *sink,
                                          sf_transform_program **out)
{
    builder b = { .list = list, .sink = sink };
    size_t total;
    sf_status st = SF_OK;

    *out = NULL;
    b.prog = sink->alloc(sink->ctx, sizeof(*b.prog));
    if (b.prog == NULL)
        return SF_ENOMEM;
    memset(b.prog, 0, sizeof(*b.prog));
    if (node == NULL || (node->kind == SF_NODE_SCALAR && node->is_null)) {
        *out = b.prog;
        return SF_OK;
    }
    /* Messages quote a statement whole: size the buffer for the longest. */
    b.errlen = longest_scalar(node) + 512;
    b.err = sf_malloc(b.errlen);
    if (b.err == NULL)
        return SF_ENOMEM;
    if (node->kind != SF_NODE_SEQ) {
        report(&b, node, lists[list].name, "%s must be a list of statements or of groups with "
               "'context' and 'statements'", lists[list].name);
        st = SF_CONFIG;
        goto out_free_err;
    }
    total = count_statements(node);
    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
        b.prog->ops[c] = sink->alloc(sink->ctx, (total ? total : 1) * sizeof(sf_transform_op));
        if (b.prog->ops[c] == NULL) {
            st = SF_ENOMEM;
            goto out_free_err;
        }
    }
    for (size_t i = 0; i < node->n && !b.nomem; i++) {
        const sf_node *it = node->items[i];
        char sub[64];

        snprintf(sub, sizeof(sub), "[%zu]", i);
        if (it->kind == SF_NODE_MAP)
            add_group(&b, it, i);
        else if (it->kind == SF_NODE_SCALAR && !it->is_null)
            add_statement(&b, it, SF_TRANSFORM_CTX_NONE, -1, sub);
        else
            report(&b, it, sub, "expected a statement or a group with 'context' and "
                   "'statements'");
    }
    if (b.nomem)
        st = SF_ENOMEM;
    else if (b.errors)
        st = SF_CONFIG;
    else
        *out = b.prog;
out_free_err:
    sf_free(b.err);
    return st;
}

/* ---- accessors ------------------------------------------------------------ */

size_t sf_transform_op_count(const sf_transform_program *p, sf_otlp_ctx c)
{
    if (p == NULL || c < 0 || c >= SF_OTLP_CTX_COUNT)
        return 0;
    return p->n_ops[c];
}

const sf_transform_op *sf_transform_op_get(const sf_transform_program *p, sf_otlp_ctx c,
                                           size_t i)
{
    if (i >= sf_transform_op_count(p, c))
        return NULL;
    return &p->ops[c][i];
}

bool sf_transform_keyset_has(const sf_transform_keyset *ks, const char *key)
{
    return sf_sorted_keys_has(ks->keys, ks->n, key);
}

bool sf_transform_has_allowlist(const sf_transform_program *p, sf_otlp_ctx c)
{
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        if (p->ops[c][i].kind == SF_RULE_KEEP_KEYS)
            return true;
    }
    return false;
}

bool sf_transform_keeps_key(const sf_transform_program *p, sf_otlp_ctx c, const char *key)
{
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = &p->ops[c][i];

        if (op->kind == SF_RULE_KEEP_KEYS && !sf_transform_keyset_has(&op->keys, key))
            return false;
        if (op->kind == SF_RULE_DELETE_KEY && sf_transform_keyset_has(&op->keys, key))
            return false;
    }
    return true;
}

bool sf_transform_clears_status_message(const sf_transform_program *p)
{
    for (size_t i = 0; i < sf_transform_op_count(p, SF_OTLP_SPAN); i++) {
        if (p->ops[SF_OTLP_SPAN][i].kind == SF_RULE_CLEAR_STATUS_MESSAGE)
            return true;
    }
    return false;
}

bool sf_transform_clears_trace_state(const sf_transform_program *p, sf_otlp_ctx c)
{
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        if (p->ops[c][i].kind == SF_RULE_CLEAR_TRACE_STATE)
            return true;
    }
    return false;
}

const sf_transform_op *sf_transform_field_op(const sf_transform_program *p, sf_otlp_field f)
{
    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
        for (size_t i = 0; i < sf_transform_op_count(p, (sf_otlp_ctx)c); i++) {
            if (p->ops[c][i].kind == SF_RULE_SET_FIELD && p->ops[c][i].field == f)
                return &p->ops[c][i];
        }
    }
    return NULL;
}

bool sf_transform_keeps_exemplars(const sf_transform_program *p)
{
    for (size_t i = 0; i < sf_transform_op_count(p, SF_OTLP_DATAPOINT); i++) {
        if (p->ops[SF_OTLP_DATAPOINT][i].kind == SF_RULE_KEEP_EXEMPLARS)
            return true;
    }
    return false;
}

const sf_transform_program *sf_transform_program_of(const sf_transform_config *cfg,
                                                    sf_signal list)
{
    switch (list) {
    case SF_SIGNAL_TRACES:  return cfg->program;
    case SF_SIGNAL_LOGS:    return cfg->log_program;
    case SF_SIGNAL_METRICS: return cfg->metric_program;
    default:                             return NULL;
    }
}

int sf_transform_op_error_mode(const sf_transform_config *cfg, const sf_transform_op *op)
{
    return op->error_mode >= 0 ? op->error_mode : cfg->error_mode;
}

/* ---- describe_allowlist: the program in the core's words --------------- */

/* The program's contexts are the codec's, in its order (checked in transform.c). */

static size_t desc_count(const void *rules, sf_otlp_ctx c)
{
    return sf_transform_op_count(rules, (sf_otlp_ctx)c);
}

static bool desc_get(const void *rules, sf_otlp_ctx c, size_t i, sf_rule *out)
{
    const sf_transform_op *op = sf_transform_op_get(rules, (sf_otlp_ctx)c, i);

    if (op == NULL)
        return false;
    *out = (sf_rule){ .error_mode = op->error_mode, .n_keys = op->keys.n, .keys = op->keys.keys,
                      .pattern = op->pattern, .replacement = op->replacement,
                      .node = op->node };
    switch (op->kind) {
    case SF_RULE_KEEP_KEYS:            out->kind = SF_RULE_KEEP_KEYS; break;
    case SF_RULE_DELETE_KEY:           out->kind = SF_RULE_DELETE_KEY; break;
    case SF_RULE_CLEAR_STATUS_MESSAGE: out->kind = SF_RULE_CLEAR_STATUS_MESSAGE; break;
    case SF_RULE_CLEAR_TRACE_STATE:    out->kind = SF_RULE_CLEAR_TRACE_STATE; break;
    case SF_RULE_REPLACE_PATTERN:      out->kind = SF_RULE_REPLACE_PATTERN; break;
    case SF_RULE_PSEUDONYMIZE:         out->kind = SF_RULE_PSEUDONYMIZE; break;
    case SF_RULE_SET_FIELD:
        out->kind = SF_RULE_SET_FIELD;
        out->field = op->field;
        if (op->field == SF_OTLP_FIELD_LOG_BODY) {
            const char *w = strstr(op->statement, " where ");

            out->pattern = op->rule != NULL && w != NULL ? w + 7 : NULL;
        }
        break;
    case SF_RULE_KEEP_EXEMPLARS:       out->kind = SF_RULE_KEEP_EXEMPLARS; break;
    case SF_RULE_VALUE: {
        const char *w = strstr(op->statement, " where ");

        out->kind = SF_RULE_VALUE;
        out->pattern = w != NULL ? w + 7 : op->statement;
        break;
    }
    default:                                out->kind = SF_RULE_OTHER; break;
    }
    return true;
}

bool sf_transform_describe(const void *config, sf_allowlist_desc *out)
{
    const sf_transform_config *cfg = config;

    *out = (sf_allowlist_desc){
        .error_mode = cfg->error_mode,
        .scalar_values_only = cfg->kept_value_types >= SF_TRANSFORM_VALUES_SCALAR,
        .single_values_only = cfg->kept_value_types == SF_TRANSFORM_VALUES_SINGLE,
        .declared_fields = cfg->declared_fields,
        .max_string_length = sf_transform_max_string(cfg),
        .rules = cfg->program,
        .signal_rules = { [SF_SIGNAL_TRACES] = cfg->program, [SF_SIGNAL_LOGS] = cfg->log_program,
                          [SF_SIGNAL_METRICS] = cfg->metric_program },
        .count = desc_count,
        .get = desc_get,
    };
    return true;
}

/* ---- config map ------------------------------------------------------------ */

static void *cfg_alloc(void *ctx, size_t size)
{
    return sf_cfg_alloc(ctx, size);
}

static void cfg_error(void *ctx, const sf_node *at, const char *subpath, const char *msg)
{
    sf_cfg_error(ctx, at, subpath, "%s", msg);
}

static sf_status parse_list(sf_signal list, sf_cfg_ctx *ctx, const sf_node *node,
                            void *field)
{
    const sf_transform_sink sink = { .ctx = ctx, .alloc = cfg_alloc, .error = cfg_error };
    sf_status st = sf_transform_program_build_list(list, node, &sink, field);

    if (st == SF_ENOMEM)
        sf_cfg_error(ctx, node, lists[list].name, "out of memory");
    return st;
}

/* histogram_bounds: a mapping of metric names to sequences of finite,
 * strictly increasing numbers. `field` is the config's n_bounds (bounds
 * follows it). */
static sf_status parse_bounds(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    sf_transform_config *cfg = (sf_transform_config *)((char *)field -
                                                       offsetof(sf_transform_config, n_bounds));
    sf_otlp_bounds *b;

    if (node == NULL || node->is_null)
        return SF_OK;
    if (node->kind != SF_NODE_MAP) {
        sf_cfg_error(ctx, node, "histogram_bounds", "expected a mapping of metric names to "
                     "lists of bounds");
        return SF_CONFIG;
    }
    b = sf_cfg_alloc(ctx, (node->n ? node->n : 1) * sizeof(*b));
    if (b == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < node->n; i++) {
        const sf_node *seq = node->items[i];
        double *v;

        b[i].metric = node->keys[i]->text;
        if (seq->kind != SF_NODE_SEQ || seq->n == 0) {
            sf_cfg_error(ctx, seq, "histogram_bounds", "'%s': expected a list of bounds",
                         b[i].metric);
            return SF_CONFIG;
        }
        v = sf_cfg_alloc(ctx, seq->n * sizeof(*v));
        if (v == NULL)
            return SF_ENOMEM;
        for (size_t j = 0; j < seq->n; j++) {
            const sf_node *x = seq->items[j];
            char *endp = NULL;

            v[j] = x->kind == SF_NODE_SCALAR && x->plain ? strtod(x->text, &endp) : NAN;
            if (endp == NULL || endp == x->text || *endp != '\0' || !isfinite(v[j]) ||
                (j > 0 && !(v[j] > v[j - 1]))) {
                sf_cfg_error(ctx, x, "histogram_bounds", "'%s': bound %zu is not a finite "
                             "number greater than the one before", b[i].metric, j);
                return SF_CONFIG;
            }
        }
        b[i].n = seq->n;
        b[i].v = v;
    }
    cfg->bounds = b;
    cfg->n_bounds = node->n;
    return SF_OK;
}

static sf_status parse_statements(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    return parse_list(SF_SIGNAL_TRACES, ctx, node, field);
}

static sf_status parse_log_statements(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    return parse_list(SF_SIGNAL_LOGS, ctx, node, field);
}

static sf_status parse_metric_statements(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    return parse_list(SF_SIGNAL_METRICS, ctx, node, field);
}

/* How many distinct byte values k[0, n) holds. */
static size_t key_distinct(const uint8_t *k, size_t n)
{
    bool seen[256] = { false };
    size_t d = 0;

    for (size_t i = 0; i < n; i++) {
        d += !seen[k[i]];
        seen[k[i]] = true;
    }
    return d;
}

sf_status sf_transform_key_load(const sf_transform_config *cfg, uint8_t **key, size_t *len,
                                const char **why)
{
    uint8_t buf[4097];
    size_t n = 0;
    sf_status st = SF_OK;

    *key = NULL;
    *len = 0;
    *why = NULL;
    if (cfg->pseudonym_key != NULL) {
        n = strlen(cfg->pseudonym_key);
        if (n >= sizeof(buf))
            n = sizeof(buf);
        else
            memcpy(buf, cfg->pseudonym_key, n);
    } else if (cfg->pseudonym_key_file != NULL) {
        FILE *f = fopen(cfg->pseudonym_key_file, "rb");

        if (f == NULL) {
            *why = "cannot be read";
            return SF_CONFIG;
        }
        n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
    } else {
        return SF_OK;
    }
    while (n > 0 && n < sizeof(buf) && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    if (n < 16) {
        *why = "is shorter than 16 bytes";
        st = SF_CONFIG;
    } else if (key_distinct(buf, n) < (n / 4 < 8 ? n / 4 : 8)) {
        /* "aaaaaaaaaaaaaaaa", "abababab...": a key a guess finds */
        *why = "has too few distinct bytes (at least a quarter of its length, 8 from 32 bytes: "
               "use e.g. `openssl rand -hex 32`)";
        st = SF_CONFIG;
    } else if (n >= sizeof(buf)) {
        *why = "is longer than 4096 bytes";
        st = SF_CONFIG;
    } else if ((*key = sf_malloc(n)) == NULL) {
        *why = "cannot be held: no memory";
        st = SF_ENOMEM;
    } else {
        memcpy(*key, buf, n);
        *len = n;
    }
    OPENSSL_cleanse(buf, sizeof(buf));
    return st;
}

void sf_transform_key_free(uint8_t *key, size_t len)
{
    if (key != NULL) {
        OPENSSL_cleanse(key, len);
        sf_free(key);
    }
}

size_t sf_transform_max_string(const sf_transform_config *cfg)
{
    if (cfg->max_string_length > 0)
        return (size_t)cfg->max_string_length;
    return cfg->declared_fields ? SF_TRANSFORM_DECLARED_MAX_STRING : 0;
}

/* Whether a statement of context c governs string field f (exemplars: a
 * keep_exemplars does too). */
static bool governs(const sf_transform_program *p, sf_otlp_ctx c, sf_otlp_field f)
{
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);

        if (op->kind == SF_RULE_SET_FIELD && op->field == f)
            return true;
        if (op->kind == SF_RULE_KEEP_EXEMPLARS && f == SF_OTLP_FIELD_EXEMPLARS)
            return true;
    }
    return false;
}

/* The node of a kept key's keep_keys statement, for positions. */
static const sf_transform_op *keep_op(const sf_transform_program *p, sf_otlp_ctx c)
{
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        if (sf_transform_op_get(p, c, i)->kind == SF_RULE_KEEP_KEYS)
            return sf_transform_op_get(p, c, i);
    }
    return NULL;
}

/* One value rule per key and context, one body rule, one exemplars rule:
 * two would be read as one by upstream but are easy to misread (the codec
 * holds one). Counts the errors; *pseudonyms when any key is. */
static int check_unique(sf_cfg_ctx *ctx, sf_signal list, const sf_transform_program *p,
                        bool *pseudonyms)
{
    const char *lname = lists[list].name;
    int errors = 0;

    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
        const sf_transform_op *body = NULL, *exemplars = NULL;

        for (size_t i = 0; i < sf_transform_op_count(p, (sf_otlp_ctx)c); i++) {
            const sf_transform_op *op = sf_transform_op_get(p, (sf_otlp_ctx)c, i);
            bool is_body = op->kind == SF_RULE_SET_FIELD &&
                           op->field == SF_OTLP_FIELD_LOG_BODY;
            bool is_exemplars = op->kind == SF_RULE_KEEP_EXEMPLARS ||
                                (op->kind == SF_RULE_SET_FIELD &&
                                 op->field == SF_OTLP_FIELD_EXEMPLARS);

            if (op->kind == SF_RULE_PSEUDONYMIZE)
                *pseudonyms = true;
            if ((is_body && body != NULL) || (is_exemplars && exemplars != NULL)) {
                sf_cfg_error(ctx, op->node, lname, "the %s has a second rule: write one "
                             "statement", is_body ? "log body" : "datapoint exemplars");
                errors++;
            }
            if (is_body)
                body = op;
            if (is_exemplars)
                exemplars = op;
            if (op->kind != SF_RULE_VALUE)
                continue;
            for (size_t j = 0; j < i; j++) {
                const sf_transform_op *o = sf_transform_op_get(p, (sf_otlp_ctx)c, j);

                if (o->kind == SF_RULE_VALUE &&
                    strcmp(o->keys.keys[0], op->keys.keys[0]) == 0) {
                    sf_cfg_error(ctx, op->node, lname, "key '%s' has a second "
                                 "value rule in the %s context: join them into one condition",
                                 op->keys.keys[0], sf_otlp_ctx_name((sf_otlp_ctx)c));
                    errors++;
                }
            }
        }
    }
    return errors;
}

/* Declared mode on the program of `list`: every context bounded, every
 * kept key with a value rule, every string field (and the body, the
 * exemplars) with a rule. */
static int check_declared(sf_cfg_ctx *ctx, sf_signal list, const sf_transform_program *p,
                          const sf_node *at)
{
    const char *lname = lists[list].name;
    const sf_otlp_set_field *f;
    int errors = 0;

    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
        const sf_transform_op *keep = keep_op(p, (sf_otlp_ctx)c);

        if (!sf_transform_list_has(list, (sf_otlp_ctx)c))
            continue;
        if (keep == NULL) {
            sf_cfg_error(ctx, at, lname, "declared_fields: the %s context has no "
                         "keep_keys (write keep_keys(%s, []) to keep none)",
                         sf_otlp_ctx_name((sf_otlp_ctx)c),
                         c == SF_OTLP_METRIC ? "metadata" : "attributes");
            errors++;
            continue;
        }
        for (size_t i = 0; i < sf_transform_op_count(p, (sf_otlp_ctx)c); i++) {
            const sf_transform_op *op = sf_transform_op_get(p, (sf_otlp_ctx)c, i);

            if (op->kind != SF_RULE_KEEP_KEYS)
                continue;
            for (size_t k = 0; k < op->keys.n; k++) {
                const char *key = op->keys.keys[k];
                bool ruled = false;

                if (!sf_transform_keeps_key(p, (sf_otlp_ctx)c, key))
                    continue;
                for (size_t j = 0; j < sf_transform_op_count(p, (sf_otlp_ctx)c); j++) {
                    const sf_transform_op *o = sf_transform_op_get(p, (sf_otlp_ctx)c, j);

                    ruled = ruled || ((o->kind == SF_RULE_VALUE ||
                                       o->kind == SF_RULE_PSEUDONYMIZE) &&
                                      strcmp(o->keys.keys[0], key) == 0);
                }
                if (!ruled) {
                    sf_cfg_error(ctx, op->node, lname, "declared_fields: %s key "
                                 "'%s' is kept without a value rule (delete_key(%s, "
                                 "\"%s\") where not ...)",
                                 sf_otlp_ctx_name((sf_otlp_ctx)c), key,
                                 c == SF_OTLP_METRIC ? "metadata" : "attributes", key);
                    errors++;
                }
            }
        }
    }
    for (size_t i = 0; (f = set_field_of_list(list, i)) != NULL; i++) {
        if (!governs(p, f->ctx, f->field)) {
            sf_cfg_error(ctx, at, lname, "declared_fields: %s has no rule (%s in "
                         "the %s context)", sf_otlp_field_name(f->field), f->declared,
                         sf_otlp_ctx_name(f->ctx));
            errors++;
        }
    }
    if (list != SF_SIGNAL_TRACES)
        return errors;
    if (!sf_transform_clears_status_message(p)) {
        sf_cfg_error(ctx, at, lname, "declared_fields: span.status.message has no "
                     "rule (set(status.message, \"\") in the span context)");
        errors++;
    }
    for (int c = SF_OTLP_SPAN; c <= SF_OTLP_LINK; c += SF_OTLP_LINK - SF_OTLP_SPAN) {
        if (!sf_transform_clears_trace_state(p, (sf_otlp_ctx)c)) {
            sf_cfg_error(ctx, at, lname, "declared_fields: %s.trace_state has no "
                         "rule (set(trace_state, \"\") in the %s context)",
                         sf_otlp_ctx_name((sf_otlp_ctx)c),
                         sf_otlp_ctx_name((sf_otlp_ctx)c));
            errors++;
        }
    }
    return errors;
}

/* The lint on what a rule lets leave: the first atom of the PCRE2 pattern
 * re that repeats without a bound ('[a-z_]+', '.*', '[0-9]+', '\\w{2,}'),
 * its length in *n; NULL when every class, '.' and class escape is
 * bounded. Such a repetition lets a kept value or name carry words or long
 * digit runs (a card or phone number); '{1,12}' bounds it. */
static const char *unbounded_atom(const char *re, size_t *n)
{
    for (const char *p = re; *p != '\0';) {
        const char *atom = p, *q;

        if (*p == '\\') {
            if (p[1] == '\0')
                return NULL;
            q = p + 2;
            if (strchr("dDwWsSpPhHvVNX", p[1]) == NULL) {
                p = q;          /* a literal: repeating it spells nothing */
                continue;
            }
            if ((p[1] == 'p' || p[1] == 'P') && *q == '{')
                q = strchr(q, '}') != NULL ? strchr(q, '}') + 1 : q;
        } else if (*p == '[') {
            q = p + 1;
            if (*q == '^')
                q++;
            if (*q == ']')
                q++;
            while (*q != '\0' && *q != ']')
                q += *q == '\\' && q[1] != '\0' ? 2 : 1;
            if (*q == '\0')
                return NULL;
            q++;
        } else if (*p == '.') {
            q = p + 1;
        } else {
            p++;
            continue;
        }
        if (*q == '+' || *q == '*' ||
            (*q == '{' && strspn(q + 1, "0123456789") > 0 && q[1 + strspn(q + 1, "0123456789")] == ',' &&
             q[2 + strspn(q + 1, "0123456789")] == '}')) {
            *n = (size_t)(q - atom) + (*q == '{' ? strcspn(q, "}") + 1 : 1);
            return atom;
        }
        p = q;
    }
    return NULL;
}

static void lint_pattern(sf_cfg_ctx *ctx, const sf_transform_op *op, const char *lname,
                         const char *what, const char *re)
{
    size_t n = 0;
    const char *at = re != NULL ? unbounded_atom(re, &n) : NULL;

    if (at != NULL)
        sf_cfg_warn(ctx, op->node, lname, "%s: '%.*s' repeats without a bound, so what leaves "
                    "can carry words or long digit runs: bound it (e.g. {1,12})", what, (int)n,
                    at);
}

/* Warn on every unbounded repetition in a pattern that keeps a value or a
 * field: value rules of kept keys, IsMatch of set(...), the body rule. */
static void lint_program(sf_cfg_ctx *ctx, sf_signal list, const sf_transform_program *p)
{
    const char *lname = lists[list].name;
    char what[160];

    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
        for (size_t i = 0; i < sf_transform_op_count(p, (sf_otlp_ctx)c); i++) {
            const sf_transform_op *op = sf_transform_op_get(p, (sf_otlp_ctx)c, i);

            if (op->kind == SF_RULE_SET_FIELD && op->pattern != NULL) {
                snprintf(what, sizeof(what), "the IsMatch that keeps %s",
                         sf_otlp_field_name(op->field));
                lint_pattern(ctx, op, lname, what, op->pattern);
            }
            if ((op->kind != SF_RULE_VALUE && op->kind != SF_RULE_SET_FIELD) ||
                op->rule == NULL)
                continue;
            if (op->kind == SF_RULE_VALUE)
                snprintf(what, sizeof(what), "%s key '%s'",
                         sf_otlp_ctx_name((sf_otlp_ctx)c), op->keys.keys[0]);
            else
                snprintf(what, sizeof(what), "%s", sf_otlp_field_name(op->field));
            for (size_t a = 0; a < op->rule->n_alts; a++)
                if (op->rule->alts[a].shape == SF_OTLP_STR_REGEX)
                    lint_pattern(ctx, op, lname, what, op->rule->alts[a].regex);
        }
    }
}

sf_status sf_transform_check(sf_cfg_ctx *ctx, void *config)
{
    sf_transform_config *cfg = config;
    const sf_node *at = sf_cfg_value(ctx) != NULL ? sf_cfg_value(ctx) : sf_cfg_node(ctx);
    bool pseudonyms = false, any_list = false;
    int errors = 0;

    for (int l = 0; l < SF_SIGNAL_COUNT; l++) {
        errors += check_unique(ctx, (sf_signal)l,
                               sf_transform_program_of(cfg, (sf_signal)l), &pseudonyms);
        any_list = any_list || sf_node_get(at, lists[l].name) != NULL;
    }
    if (cfg->pseudonym_key != NULL && cfg->pseudonym_key_file != NULL) {
        sf_cfg_error(ctx, sf_node_get(at, "pseudonym_key"), NULL,
                     "pseudonym_key and pseudonym_key_file are exclusive");
        errors++;
    } else if (pseudonyms && cfg->pseudonym_key == NULL && cfg->pseudonym_key_file == NULL) {
        sf_cfg_error(ctx, at, "trace_statements", "pseudonymize needs a key: pseudonym_key "
                     "(e.g. ${env:NAME}) or pseudonym_key_file");
        errors++;
    } else if (cfg->pseudonymize_ids && cfg->pseudonym_key == NULL &&
               cfg->pseudonym_key_file == NULL) {
        sf_cfg_error(ctx, sf_node_get(at, "pseudonymize_ids"), NULL, "pseudonymize_ids needs a "
                     "key: pseudonym_key (e.g. ${env:NAME}) or pseudonym_key_file");
        errors++;
    } else if (cfg->pseudonym_key != NULL || cfg->pseudonym_key_file != NULL) {
        uint8_t *key = NULL;
        size_t n = 0;
        const char *why = NULL;

        if (sf_transform_key_load(cfg, &key, &n, &why) != SF_OK) {
            /* never quoted: it is a secret */
            if (cfg->pseudonym_key != NULL)
                sf_cfg_error(ctx, sf_node_get(at, "pseudonym_key"), NULL, "pseudonym_key %s",
                             why);
            else
                sf_cfg_error(ctx, sf_node_get(at, "pseudonym_key_file"), NULL,
                             "pseudonym_key_file '%s' %s", cfg->pseudonym_key_file, why);
            errors++;
        }
        sf_transform_key_free(key, n);
    }
    for (int l = 0; l < SF_SIGNAL_COUNT; l++)
        lint_program(ctx, (sf_signal)l, sf_transform_program_of(cfg, (sf_signal)l));
    if (!cfg->declared_fields)
        return errors ? SF_CONFIG : SF_OK;
    /* declared mode judges each list written (trace_statements also when
     * none is); a signal whose list is not written leaves with nothing but
     * its structure: no attribute, empty strings, no body, no exemplars */
    for (int l = 0; l < SF_SIGNAL_COUNT; l++) {
        if (sf_node_get(at, lists[l].name) != NULL ||
            (l == SF_SIGNAL_TRACES && !any_list))
            errors += check_declared(ctx, (sf_signal)l,
                                     sf_transform_program_of(cfg, (sf_signal)l), at);
    }
    return errors ? SF_CONFIG : SF_OK;
}

const sf_config_row sf_transform_config_map[] = {
    { .key = "error_mode", .type = SF_CFG_ENUM, .def = SF_ERROR_MODE_DEFAULT,
      .offset = offsetof(sf_transform_config, error_mode), .choices = SF_ERROR_MODE_CHOICES,
      .help = "propagate drops a batch that cannot be filtered (fail closed); ignore and silent fail open" },
    { .key = "kept_value_types", .type = SF_CFG_ENUM, .def = "any",
      .offset = offsetof(sf_transform_config, kept_value_types), .choices = "any|scalar|single",
      .help = "scalar: a kept attribute must hold a string, bool, int, double or an array of "
              "those; kvlist and bytes values are removed with their key; single: one value "
              "per kept key, arrays are removed too" },
    { .key = "declared_fields", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_transform_config, declared_fields),
      .help = "every kept key needs a value rule and every string field a rule, or the config "
              "is invalid; one value per key; strings bounded by max_string_length (256)" },
    { .key = "max_string_length", .type = SF_CFG_INT, .def = "0", .min = 0, .max = 1 << 20,
      .offset = offsetof(sf_transform_config, max_string_length),
      .help = "longest attribute string value (longer: removed) and string field (longer: "
              "cleared) that leaves, in bytes; 0: none, or 256 with declared_fields" },
    { .key = "max_events_per_span", .type = SF_CFG_INT, .def = "0", .min = 0, .max = 1 << 16,
      .offset = offsetof(sf_transform_config, max_events_per_span),
      .help = "most events a span keeps (trace_statements); the rest are dropped and added "
              "to its dropped_events_count; 0: any number" },
    { .key = "max_links_per_span", .type = SF_CFG_INT, .def = "0", .min = 0, .max = 1 << 16,
      .offset = offsetof(sf_transform_config, max_links_per_span),
      .help = "most links a span keeps; the rest are dropped and added to its "
              "dropped_links_count; 0: any number" },
    { .key = "max_spans_per_request", .type = SF_CFG_INT, .def = "0", .min = 0, .max = 1 << 24,
      .offset = offsetof(sf_transform_config, max_spans_per_request),
      .help = "most spans one request keeps, the first in its order; the rest are dropped "
              "and counted (dropped_spans); 0: any number" },
    { .key = "max_resources_per_request", .type = SF_CFG_INT, .def = "0", .min = 0,
      .max = 1 << 16, .offset = offsetof(sf_transform_config, max_resources_per_request),
      .help = "most resource entries (ResourceSpans) one request keeps; the rest are dropped "
              "with their spans and counted; 0: any number" },
    { .key = "max_scopes_per_resource", .type = SF_CFG_INT, .def = "0", .min = 0,
      .max = 1 << 16, .offset = offsetof(sf_transform_config, max_scopes_per_resource),
      .help = "most scope entries (ScopeSpans) one resource entry keeps; the rest are dropped "
              "with their spans and counted; 0: any number" },
    { .key = "pseudonymize_ids", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_transform_config, pseudonymize_ids),
      .help = "trace and span ids (spans, parents, links, log records) leave as keyed "
              "pseudonyms (HMAC-SHA256 with pseudonym_key, truncated to the id's length): "
              "the same id, the same pseudonym; all-zero ids stay" },
    { .key = "histogram_bounds", .type = SF_CFG_CUSTOM,
      .offset = offsetof(sf_transform_config, n_bounds), .parse = parse_bounds,
      .help = "metric name -> [bounds]: its histogram points leave only with exactly these "
              "explicit_bounds; with metric_statements in declared mode every histogram point "
              "must hold finite increasing bounds and counts that sum to its count" },
    { .key = "pseudonym_key", .type = SF_CFG_STR,
      .offset = offsetof(sf_transform_config, pseudonym_key),
      .help = "the HMAC-SHA256 key of pseudonymize(attributes, \"k\"), at least 16 bytes; "
              "write it as ${env:NAME}; never logged" },
    { .key = "pseudonym_key_file", .type = SF_CFG_STR,
      .offset = offsetof(sf_transform_config, pseudonym_key_file),
      .help = "or a file holding that key (trailing newlines dropped)" },
    { .key = "trace_statements", .type = SF_CFG_CUSTOM,
      .offset = offsetof(sf_transform_config, program), .parse = parse_statements,
      .help = "OTTL statements: keep_keys(attributes, [...]), delete_key(attributes, \"k\"), "
              "set(status.message, \"\") (span), set(trace_state, \"\") (span, link), "
              "replace_pattern(name, \"regex\", \"replacement\") (span, spanevent; PCRE2)" },
    { .key = "log_statements", .type = SF_CFG_CUSTOM,
      .offset = offsetof(sf_transform_config, log_program), .parse = parse_log_statements,
      .help = "OTTL statements on logs (contexts resource, scope, log): keep_keys, delete_key "
              "[where not ...], pseudonymize on attributes; set(body, nil) [where not <condition "
              "on body>] (declared mode drops a body without it); set(severity_text|event_name, "
              "\"v\") [where not IsMatch(...)]" },
    { .key = "metric_statements", .type = SF_CFG_CUSTOM,
      .offset = offsetof(sf_transform_config, metric_program), .parse = parse_metric_statements,
      .help = "OTTL statements on metrics (contexts resource, scope, metric, datapoint): "
              "keep_keys, delete_key [where not ...] on datapoint attributes and metric "
              "metadata; set(name|description|unit, \"v\") [where not IsMatch(...)]; "
              "set(exemplars, []) or keep_exemplars(exemplars)" },
    { 0 }
};

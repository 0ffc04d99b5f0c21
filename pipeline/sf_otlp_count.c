/* sf_otlp_count.c: the streaming span counter (sf_otlp_count.h), and the
 * count of a decoded tree. The counter is a byte-wise state machine over
 * the three framing levels that lead to spans; field values off that path
 * (and every span's own bytes) are skipped in bulk. */
#include "sf_otlp_count.h"
#include "sf_otlp_schema.h"

#include <string.h>

enum { ST_TAG, ST_LEN, ST_VARINT, ST_SKIP };

void sf_span_counter_init(sf_span_counter *c)
{
    sf_span_counter_init_signal(c, SF_SIGNAL_TRACES);
}

void sf_span_counter_init_signal(sf_span_counter *c, sf_signal s)
{
    memset(c, 0, sizeof(*c));
    c->signal = s;
    c->state = ST_TAG;
    c->bad = s != SF_SIGNAL_TRACES;     /* until logs and metrics land */
}

/* Leave every level that ends here; false when one was overrun. */
static bool pop_levels(sf_span_counter *c)
{
    while (c->level > 0 && c->pos >= c->end[c->level]) {
        if (c->pos > c->end[c->level])
            return false;
        c->level--;
    }
    return true;
}

/* A length-delimited field's length is known. */
static bool on_len(sf_span_counter *c, uint64_t len)
{
    uint32_t field = (uint32_t)(c->tag >> 3);
    uint64_t limit = c->level > 0 ? c->end[c->level] : UINT64_MAX;

    if (len > limit - c->pos)
        return false;
    if (c->groups == 0 && ((c->level == 0 && field == SF_OTLP_NUM_REQUEST_RESOURCE_SPANS) ||
                           (c->level == 1 && field == SF_OTLP_NUM_RESOURCE_SPANS_SCOPE_SPANS))) {
        c->level++;                                 /* into ResourceSpans / ScopeSpans */
        c->end[c->level] = c->pos + len;
        c->state = ST_TAG;
        return pop_levels(c);                       /* an empty one ends at once */
    }
    if (c->groups == 0 && c->level == 2 && field == SF_OTLP_NUM_SCOPE_SPANS_SPANS)
        c->spans++;
    c->skip = len;
    c->state = ST_SKIP;
    if (len == 0) {
        c->state = ST_TAG;
        return pop_levels(c);
    }
    return true;
}

void sf_span_counter_feed(sf_span_counter *c, const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;

    while (p < end && !c->bad) {
        if (c->state == ST_SKIP) {
            size_t k = (uint64_t)(end - p) < c->skip ? (size_t)(end - p) : (size_t)c->skip;

            p += k;
            c->pos += k;
            c->skip -= k;
            if (c->skip == 0) {
                c->state = ST_TAG;
                c->bad = !pop_levels(c);
            }
            continue;
        }
        /* A varint byte: a tag, a length or a skipped scalar. */
        uint8_t b = *p++;

        c->pos++;
        if (c->shift >= 64) {
            c->bad = true;
            break;
        }
        c->acc |= (uint64_t)(b & 0x7f) << c->shift;
        c->shift += 7;
        if (b & 0x80)
            continue;
        uint64_t v = c->acc;

        c->acc = 0;
        c->shift = 0;
        switch (c->state) {
        case ST_TAG:
            c->tag = v;
            if ((v >> 3) == 0) {
                c->bad = true;
                break;
            }
            switch (v & 7) {
            case 0: c->state = ST_VARINT; break;
            case 1: c->skip = 8; c->state = ST_SKIP; break;
            case 5: c->skip = 4; c->state = ST_SKIP; break;
            case 2: c->state = ST_LEN; break;
            case 3:             /* an unknown group, skipped as the codec skips it */
                if (c->groups == sizeof(c->group) / sizeof(c->group[0]))
                    c->bad = true;
                else
                    c->group[c->groups++] = (uint32_t)(v >> 3);
                c->bad = c->bad || !pop_levels(c);
                break;
            case 4:
                if (c->groups == 0 || c->group[c->groups - 1] != (uint32_t)(v >> 3))
                    c->bad = true;
                else
                    c->groups--;
                c->bad = c->bad || !pop_levels(c);    /* a level may end here */
                break;
            default: c->bad = true; break;
            }
            if (c->state == ST_SKIP && c->level > 0 && c->skip > c->end[c->level] - c->pos)
                c->bad = true;
            break;
        case ST_LEN:
            c->bad = !on_len(c, v);
            break;
        case ST_VARINT:
            c->state = ST_TAG;
            c->bad = !pop_levels(c);
            break;
        }
    }
}

/* ---- OTLP/JSON ----------------------------------------------------------- */

enum {
    R_OTHER, R_TOP, R_RS_ARRAY, R_RS, R_SS_ARRAY, R_SS, R_SPAN_ARRAY, R_SPAN,
    R_OTHER_ARRAY,              /* an array off the path: objects in it are not spans */
};

void sf_json_span_counter_init(sf_json_span_counter *c)
{
    sf_json_span_counter_init_signal(c, SF_SIGNAL_TRACES);
}

void sf_json_span_counter_init_signal(sf_json_span_counter *c, sf_signal s)
{
    memset(c, 0, sizeof(*c));
    c->signal = s;
    c->bad = s != SF_SIGNAL_TRACES;     /* until logs and metrics land */
}

static bool key_is(const sf_json_span_counter *c, const char *a, const char *b)
{
    size_t n = c->key_len;

    if (n > sizeof(c->key))
        return false;
    return (strlen(a) == n && memcmp(c->key, a, n) == 0) ||
           (b != NULL && strlen(b) == n && memcmp(c->key, b, n) == 0);
}

static unsigned parent_role(const sf_json_span_counter *c)
{
    if (c->depth == 0)
        return R_OTHER;
    return c->depth <= SF_JSON_COUNT_DEPTH ? c->role[c->depth - 1] : R_OTHER;
}

/* A container opens: `array` or object. Its role follows from its parent's
 * and, in an object, from the key it is the value of. */
static void json_open(sf_json_span_counter *c, bool array)
{
    unsigned parent = parent_role(c), role = array ? R_OTHER_ARRAY : R_OTHER;

    if (c->depth == 0 && !array)
        role = R_TOP;
    else if (parent == R_TOP && array && key_is(c, SF_OTLP_JSON_REQUEST_RESOURCE_SPANS,
                                                   SF_OTLP_NAME_REQUEST_RESOURCE_SPANS))
        role = R_RS_ARRAY;
    else if (parent == R_RS_ARRAY && !array)
        role = R_RS;
    else if (parent == R_RS && array && key_is(c, SF_OTLP_JSON_RESOURCE_SPANS_SCOPE_SPANS,
                                                SF_OTLP_NAME_RESOURCE_SPANS_SCOPE_SPANS))
        role = R_SS_ARRAY;
    else if (parent == R_SS_ARRAY && !array)
        role = R_SS;
    else if (parent == R_SS && array && key_is(c, SF_OTLP_JSON_SCOPE_SPANS_SPANS, NULL))
        role = R_SPAN_ARRAY;
    else if (parent == R_SPAN_ARRAY && !array) {
        role = R_SPAN;
        c->spans++;
    }
    if (c->depth < SF_JSON_COUNT_DEPTH)
        c->role[c->depth] = (uint8_t)role;
    c->depth++;
    c->expect_key = !array;
}

static void json_close(sf_json_span_counter *c)
{
    if (c->depth == 0) {
        c->bad = true;
        return;
    }
    c->depth--;
    c->expect_key = false;
}

void sf_json_span_counter_feed(sf_json_span_counter *c, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n && !c->bad; i++) {
        uint8_t b = p[i];

        if (c->in_string) {
            if (c->escape) {
                c->escape = false;
                c->key_len = sizeof(c->key) + 1;    /* escaped: not a key we match */
            } else if (b == '\\') {
                c->escape = true;
            } else if (b == '"') {
                c->in_string = false;
            } else if (c->string_is_key) {
                if (c->key_len < sizeof(c->key))
                    c->key[c->key_len] = (char)b;
                if (c->key_len <= sizeof(c->key))
                    c->key_len++;
            }
            continue;
        }
        switch (b) {
        case '"':
            c->in_string = true;
            c->string_is_key = c->expect_key;
            if (c->expect_key)
                c->key_len = 0;
            c->expect_key = false;
            break;
        case '{':
            json_open(c, false);
            break;
        case '[':
            json_open(c, true);
            break;
        case '}':
        case ']':
            json_close(c);
            break;
        case ',':
            /* In an object the next string is a key. */
            c->expect_key = parent_role(c) != R_OTHER_ARRAY && parent_role(c) != R_RS_ARRAY &&
                            parent_role(c) != R_SS_ARRAY && parent_role(c) != R_SPAN_ARRAY &&
                            c->depth > 0 && !c->in_string;
            break;
        default:
            break;
        }
    }
}

size_t sf_otlp_count_spans(
    const Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req)
{
    size_t n = 0;

    for (size_t i = 0; i < req->n_resource_spans; i++) {
        const Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = req->resource_spans[i];

        for (size_t j = 0; j < rs->n_scope_spans; j++)
            n += rs->scope_spans[j]->n_spans;
    }
    return n;
}

/* sf_otlp_count.c: the streaming span counter (sf_otlp_count.h). A byte-wise
 * state machine over the three framing levels that lead to spans; field
 * values off that path (and every span's own bytes) are skipped in bulk. */
#include "sf_otlp_count.h"

#include <string.h>

enum { ST_TAG, ST_LEN, ST_VARINT, ST_SKIP };

void sf_span_counter_init(sf_span_counter *c)
{
    memset(c, 0, sizeof(*c));
    c->state = ST_TAG;
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
    if ((c->level == 0 && field == 1) || (c->level == 1 && field == 2)) {
        c->level++;                                 /* into ResourceSpans / ScopeSpans */
        c->end[c->level] = c->pos + len;
        c->state = ST_TAG;
        return pop_levels(c);                       /* an empty one ends at once */
    }
    if (c->level == 2 && field == 2)
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

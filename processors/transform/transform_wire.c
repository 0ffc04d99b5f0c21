/* processors/transform/transform_wire.c: the transform processor on the
 * encoded request: one walk over the bytes of an ExportTraceServiceRequest
 * writes the filtered request, without building a tree.
 *
 * DESIGN: at create the program is compiled into one lookup per context
 * (every key its statements name with that key's verdict, and the verdict
 * for every other key); it is read-only afterwards and shared by the
 * receiver threads. A filter call owns only its output buffer and allocates
 * nothing else. Only messages on the path to a change are rewritten
 * (request > ResourceSpans > ScopeSpans > Span > Event/Link/Status); every
 * other field, kept KeyValues included, is one memcpy. A rewritten message
 * gets the length prefix its input had reserved (content never grows: a
 * removed KeyValue frees at least as many bytes as the rewritten dropped
 * count can take), and is moved only when its prefix got shorter.
 *
 * The meaning is the tree path's (transform.c on what protobuf-c decodes):
 * the last `key` of a KeyValue wins, an absent key is "", the last dropped
 * count wins and is read as uint32, known fields with a wrong wire type are
 * malformed, as are tags or length prefixes longer than protobuf-c reads.
 * Shapes whose decoded meaning a walk cannot reproduce go to the tree path
 * (SF_UNSUPPORTED): a key holding a NUL byte (protobuf-c cuts the key there)
 * and a filtered resource, scope or status given twice (protobuf-c merges
 * them). Inside values and in messages no statement touches, the bytes are
 * passed on as received; the tree path would have re-encoded them. */
#include "transform.h"

#include <string.h>

/* ---- compiled program ---------------------------------------------------- */

typedef struct wire_key {
    const char *key;            /* NULL: empty slot */
    size_t len;
    bool keep;
} wire_key;

typedef struct wire_lookup {
    bool active;                /* the context has keep_keys/delete_key */
    bool keep_other;            /* verdict for keys no statement names */
    uint64_t len_mask;          /* bit min(len, 63) of every named key */
    size_t mask;                /* slots - 1 (a power of two minus one) */
    wire_key *slots;            /* open addressing, linear probing */
} wire_lookup;

struct sf_transform_wire {
    wire_lookup ctx[SF_TRANSFORM_CTX_COUNT];
    bool clear_status;          /* set(span.status.message, "") */
    bool walk_spans;            /* something to do in spans, events or links */
    bool walk_scopes;           /* ... or in scopes */
    bool walk_any;              /* ... or in resources */
    sf_status fail;             /* malformed bytes, no memory: by error mode */
};

static inline uint64_t key_hash(const uint8_t *k, size_t len)
{
    uint64_t a = 0, b = 0, h;

    if (len >= 8) {
        memcpy(&a, k, 8);
        memcpy(&b, k + len - 8, 8);
    } else {
        memcpy(&a, k, len);
    }
    h = a * 0x9e3779b97f4a7c15ull ^ (b + len) * 0xc2b2ae3d27d4eb4full;
    return h ^ (h >> 31);
}

static inline uint64_t len_bit(size_t len)
{
    return 1ull << (len < 63 ? len : 63);
}

/* Whether an attribute named k[0, len) survives every statement of the
 * context; *named says whether a statement names it. */
static inline bool lookup_keep(const wire_lookup *l, const uint8_t *k, size_t len, bool *named)
{
    *named = false;
    if (!(l->len_mask & len_bit(len)))
        return l->keep_other;
    for (size_t i = key_hash(k, len) & l->mask;; i = (i + 1) & l->mask) {
        const wire_key *e = &l->slots[i];

        if (e->key == NULL)
            return l->keep_other;
        if (e->len == len && memcmp(e->key, k, len) == 0) {
            *named = true;
            return e->keep;
        }
    }
}

static bool verdict(const sf_transform_program *p, sf_transform_ctx c, const char *key)
{
    bool keep = true;

    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);

        if (op->kind == SF_TRANSFORM_KEEP_KEYS)
            keep = keep && sf_transform_keyset_has(&op->keys, key);
        else if (op->kind == SF_TRANSFORM_DELETE_KEY)
            keep = keep && !sf_transform_keyset_has(&op->keys, key);
    }
    return keep;
}

static sf_status lookup_build(wire_lookup *l, const sf_transform_program *p, sf_transform_ctx c)
{
    size_t named = 0, slots = 4;

    l->keep_other = true;
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);

        if (op->kind == SF_TRANSFORM_CLEAR_STATUS_MESSAGE)
            continue;
        l->active = true;
        if (op->kind == SF_TRANSFORM_KEEP_KEYS)
            l->keep_other = false;
        named += op->keys.n;
    }
    if (!l->active)
        return SF_OK;
    while (slots < 2 * named + 2)
        slots *= 2;
    l->slots = sf_calloc(slots, sizeof(*l->slots));
    if (l->slots == NULL)
        return SF_ENOMEM;
    l->mask = slots - 1;
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);

        if (op->kind == SF_TRANSFORM_CLEAR_STATUS_MESSAGE)
            continue;
        for (size_t j = 0; j < op->keys.n; j++) {
            const char *key = op->keys.keys[j];
            size_t len = strlen(key), at = key_hash((const uint8_t *)key, len) & l->mask;

            while (l->slots[at].key != NULL && strcmp(l->slots[at].key, key) != 0)
                at = (at + 1) & l->mask;
            if (l->slots[at].key != NULL)
                continue;       /* named by an earlier statement too */
            l->slots[at] = (wire_key){ .key = key, .len = len, .keep = verdict(p, c, key) };
            l->len_mask |= len_bit(len);
        }
    }
    return SF_OK;
}

sf_status sf_transform_wire_create(const sf_transform_config *cfg, sf_transform_wire **out)
{
    const sf_transform_program *p = cfg->program;
    sf_transform_wire *tw;
    bool propagate = false, any_op = false;
    sf_status st = SF_OK;

    *out = NULL;
    tw = sf_calloc(1, sizeof(*tw));
    if (tw == NULL)
        return SF_ENOMEM;
    for (int c = 0; c < SF_TRANSFORM_CTX_COUNT; c++) {
        st = lookup_build(&tw->ctx[c], p, (sf_transform_ctx)c);
        if (st != SF_OK)
            goto out_destroy_wire;
        for (size_t i = 0; i < sf_transform_op_count(p, (sf_transform_ctx)c); i++) {
            const sf_transform_op *op = sf_transform_op_get(p, (sf_transform_ctx)c, i);

            any_op = true;
            if (op->kind == SF_TRANSFORM_CLEAR_STATUS_MESSAGE)
                tw->clear_status = true;
            if (sf_transform_op_error_mode(cfg, op) == SF_ERROR_MODE_PROPAGATE)
                propagate = true;
        }
    }
    if (!any_op && cfg->error_mode == SF_ERROR_MODE_PROPAGATE)
        propagate = true;
    /* Under ignore/silent the tree path decides what a bad batch becomes. */
    tw->fail = propagate ? SF_FILTER : SF_UNSUPPORTED;
    tw->walk_spans = tw->clear_status || tw->ctx[SF_TRANSFORM_SPAN].active ||
                     tw->ctx[SF_TRANSFORM_SPANEVENT].active || tw->ctx[SF_TRANSFORM_LINK].active;
    tw->walk_scopes = tw->walk_spans || tw->ctx[SF_TRANSFORM_SCOPE].active;
    tw->walk_any = tw->walk_scopes || tw->ctx[SF_TRANSFORM_RESOURCE].active;
    *out = tw;
    return SF_OK;

out_destroy_wire:
    sf_transform_wire_destroy(tw);
    return st;
}

void sf_transform_wire_destroy(sf_transform_wire *tw)
{
    if (tw == NULL)
        return;
    for (int c = 0; c < SF_TRANSFORM_CTX_COUNT; c++)
        sf_free(tw->ctx[c].slots);
    sf_free(tw);
}

/* ---- reading ------------------------------------------------------------- */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5, WT_ANY = 0xff };

/* Why a walk stopped. */
enum { W_OK = 0, W_MALFORMED, W_NOMEM, W_TREE };

typedef struct field {
    const uint8_t *start;       /* first byte of the tag */
    const uint8_t *val;         /* the value (LEN: after the length prefix) */
    const uint8_t *end;         /* one past the field */
    uint32_t num;
    uint32_t wt;
    uint32_t tag_len;
} field;

/* At most `max` bytes of varint (protobuf-c reads tags and length prefixes
 * in 5, values in 10); bits past 64 are dropped as protobuf-c does. */
static inline int read_varint(const uint8_t **pp, const uint8_t *end, unsigned max, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t r = 0;

    if (p < end && *p < 0x80) {
        *v = *p;
        *pp = p + 1;
        return 0;
    }
    for (unsigned i = 0; i < max && p < end; i++) {
        uint8_t b = *p++;

        if (i < 10)
            r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = r;
            *pp = p;
            return 0;
        }
    }
    return -1;
}

/* Inlined everywhere: the field stays in registers. */
static inline __attribute__((always_inline)) int next_field(const uint8_t *p, const uint8_t *end,
                                                            field *f)
{
    uint64_t tag, v;

    f->start = p;
    if (read_varint(&p, end, 5, &tag) != 0)
        return -1;
    f->tag_len = (uint32_t)(p - f->start);
    f->num = (uint32_t)(tag >> 3);
    f->wt = (uint32_t)(tag & 7);
    if (f->num == 0 || tag >> 3 > 0x1fffffff)
        return -1;
    switch (f->wt) {
    case WT_VARINT:
        f->val = p;
        if (read_varint(&p, end, 10, &v) != 0)
            return -1;
        break;
    case WT_I64:
        if (end - p < 8)
            return -1;
        f->val = p;
        p += 8;
        break;
    case WT_I32:
        if (end - p < 4)
            return -1;
        f->val = p;
        p += 4;
        break;
    case WT_LEN:
        if (read_varint(&p, end, 5, &v) != 0 || v > (uint64_t)(end - p))
            return -1;
        f->val = p;
        p += v;
        break;
    default:                    /* groups: neither OTLP nor protobuf-c has them */
        return -1;
    }
    f->end = p;
    return 0;
}

/* Wire type of every known field, by field number; WT_ANY: unknown. */
static const uint8_t wt_request[] = { WT_ANY, WT_LEN };
static const uint8_t wt_rs[] = { WT_ANY, WT_LEN, WT_LEN, WT_LEN };
static const uint8_t wt_ss[] = { WT_ANY, WT_LEN, WT_LEN, WT_LEN };
static const uint8_t wt_resource[] = { WT_ANY, WT_LEN, WT_VARINT };
static const uint8_t wt_scope[] = { WT_ANY, WT_LEN, WT_LEN, WT_LEN, WT_VARINT };
static const uint8_t wt_span[] = { WT_ANY, WT_LEN, WT_LEN, WT_LEN, WT_LEN, WT_LEN, WT_VARINT,
                                   WT_I64, WT_I64, WT_LEN, WT_VARINT, WT_LEN, WT_VARINT,
                                   WT_LEN, WT_VARINT, WT_LEN, WT_I32 };
static const uint8_t wt_event[] = { WT_ANY, WT_I64, WT_LEN, WT_LEN, WT_VARINT };
static const uint8_t wt_link[] = { WT_ANY, WT_LEN, WT_LEN, WT_LEN, WT_LEN, WT_VARINT, WT_I32 };
static const uint8_t wt_status[] = { WT_ANY, WT_ANY, WT_LEN, WT_VARINT };

static inline bool wt_ok(const uint8_t *tab, size_t n, const field *f)
{
    return f->num >= n || tab[f->num] == WT_ANY || tab[f->num] == f->wt;
}

#define WT_OK(tab, f) wt_ok((tab), sizeof(tab), (f))

/* ---- writing ------------------------------------------------------------- */

typedef struct wout {
    const sf_transform_wire *tw;
    sf_buf *buf;
    size_t len, cap;            /* bytes written, bytes of buf->data */
    uint64_t removed;
} wout;

static int grow(wout *w, size_t n)
{
    size_t cap = w->cap;
    sf_buf *b;

    if (n > SIZE_MAX / 2 - sizeof(sf_buf) - w->len)
        return W_NOMEM;
    while (cap < w->len + n)
        cap = cap * 2 + 64;
    b = sf_realloc(w->buf, sizeof(sf_buf) + cap);
    if (b == NULL)
        return W_NOMEM;
    w->buf = b;
    w->cap = cap;
    return W_OK;
}

static inline int reserve(wout *w, size_t n)
{
    return n <= w->cap - w->len ? W_OK : grow(w, n);
}

static inline int put(wout *w, const uint8_t *p, size_t n)
{
    if (reserve(w, n) != W_OK)
        return W_NOMEM;
    memcpy(w->buf->data + w->len, p, n);
    w->len += n;
    return W_OK;
}

static inline size_t varint_size(uint64_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline size_t varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;

    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Start rewriting the message in `f`: its tag, then room for a length
 * prefix as long as the one its content needs now. */
static int open_msg(wout *w, const field *f, size_t *hpos, size_t *hlen)
{
    if (put(w, f->start, f->tag_len) != W_OK)
        return W_NOMEM;
    *hlen = varint_size((uint64_t)(f->end - f->val));
    if (reserve(w, *hlen) != W_OK)
        return W_NOMEM;
    *hpos = w->len;
    w->len += *hlen;
    return W_OK;
}

/* Write the real length prefix; move the content only if its size differs. */
static int close_msg(wout *w, size_t hpos, size_t hlen)
{
    size_t n = w->len - hpos - hlen, need = varint_size(n);

    if (need != hlen) {
        if (need > hlen && reserve(w, need - hlen) != W_OK)
            return W_NOMEM;
        memmove(w->buf->data + hpos + need, w->buf->data + hpos + hlen, n);
        w->len = w->len - hlen + need;
    }
    varint_put(w->buf->data + hpos, n);
    return W_OK;
}

/* ---- the walk ------------------------------------------------------------ */

static inline bool has_nul(const uint8_t *p, size_t n)
{
    size_t i = 0;

    if (n < 8) {
        for (; i < n; i++) {
            if (p[i] == 0)
                return true;
        }
        return false;
    }
    /* word at a time; the last word overlaps the one before it */
    for (;; i += 8) {
        uint64_t v;

        if (i + 8 > n)
            i = n - 8;
        memcpy(&v, p + i, 8);
        if ((v - 0x0101010101010101ull) & ~v & 0x8080808080808080ull)
            return true;
        if (i + 8 == n)
            return false;
    }
}

/* A KeyValue: whether it stays. */
static inline int kv_keep(const wire_lookup *l, const uint8_t *p, const uint8_t *end, bool *keep)
{
    const uint8_t *key = p;
    size_t klen = 0;
    bool named;
    field f;

    /* The usual shape, a short key then the value, without the general walk. */
    if (end - p >= 2 && p[0] == (1 << 3 | WT_LEN) && p[1] < 0x80 && p[1] <= end - p - 2) {
        const uint8_t *q = p + 2 + p[1], *r = q + 1;
        uint64_t vlen;

        if (q == end || (q[0] == (2 << 3 | WT_LEN) && read_varint(&r, end, 5, &vlen) == 0 &&
                         vlen == (uint64_t)(end - r))) {
            key = p + 2;
            klen = p[1];
            goto lookup;
        }
    }
    while (p < end) {
        if (next_field(p, end, &f) != 0)
            return W_MALFORMED;
        if (f.num <= 2 && f.wt != WT_LEN)
            return W_MALFORMED;
        if (f.num == 1) {
            key = f.val;
            klen = (size_t)(f.end - f.val);
        }
        p = f.end;
    }
lookup:
    *keep = lookup_keep(l, key, klen, &named);
    /* protobuf-c ends a key at its first NUL: what the tree path matches
     * (and writes) is that prefix, which the bytes here are not. */
    if (!named && has_nul(key, klen))
        return W_TREE;
    return W_OK;
}

/* Span.Status under set(span.status.message, ""): every field but message. */
static int filter_status(wout *w, const uint8_t *p, const uint8_t *end)
{
    field f;

    while (p < end) {
        if (next_field(p, end, &f) != 0 || !WT_OK(wt_status, &f))
            return W_MALFORMED;
        p = f.end;
        if (f.num == 2)
            continue;
        if (put(w, f.start, (size_t)(f.end - f.start)) != W_OK)
            return W_NOMEM;
    }
    return W_OK;
}

typedef struct item_desc {
    sf_transform_ctx ctx;
    uint32_t attrs;             /* field number of attributes */
    uint32_t dropped;           /* ... of dropped_attributes_count (< 16) */
    const uint8_t *wt;
    size_t n_wt;
} item_desc;

static const item_desc d_resource = { SF_TRANSFORM_RESOURCE, 1, 2, wt_resource,
                                      sizeof(wt_resource) };
static const item_desc d_scope = { SF_TRANSFORM_SCOPE, 3, 4, wt_scope, sizeof(wt_scope) };
static const item_desc d_span = { SF_TRANSFORM_SPAN, 9, 10, wt_span, sizeof(wt_span) };
static const item_desc d_event = { SF_TRANSFORM_SPANEVENT, 3, 4, wt_event, sizeof(wt_event) };
static const item_desc d_link = { SF_TRANSFORM_LINK, 4, 5, wt_link, sizeof(wt_link) };

static int filter_item(wout *w, const item_desc *d, const uint8_t *p, const uint8_t *end);

/* Rewrite the message in `f` as an item of kind d. */
static int child_item(wout *w, const item_desc *d, const field *f)
{
    size_t hpos, hlen;
    int rc = open_msg(w, f, &hpos, &hlen);

    if (rc == W_OK)
        rc = filter_item(w, d, f->val, f->end);
    if (rc == W_OK)
        rc = close_msg(w, hpos, hlen);
    return rc;
}

static int child_status(wout *w, const field *f)
{
    size_t hpos, hlen;
    int rc = open_msg(w, f, &hpos, &hlen);

    if (rc == W_OK)
        rc = filter_status(w, f->val, f->end);
    if (rc == W_OK)
        rc = close_msg(w, hpos, hlen);
    return rc;
}

/* One resource, scope, span, event or link: its attributes through the
 * context's lookup, the removed count added to its dropped count; for
 * spans also their events, links and status. */
static int filter_item(wout *w, const item_desc *d, const uint8_t *p, const uint8_t *end)
{
    const sf_transform_wire *tw = w->tw;
    const wire_lookup *l = &tw->ctx[d->ctx];
    const bool attrs = l->active, span = d->ctx == SF_TRANSFORM_SPAN;
    const uint8_t *dropped_at = NULL;   /* value of the last dropped count */
    const uint8_t *dropped_end = NULL;
    const uint8_t *run = p;             /* bytes not yet copied, kept as they are */
    uint64_t removed = 0;
    bool seen_status = false;
    field f;
    int rc;

    while (p < end) {
        bool cut = false;       /* the field is not copied as it is */

        if (next_field(p, end, &f) != 0 || !wt_ok(d->wt, d->n_wt, &f))
            return W_MALFORMED;
        p = f.end;
        if (attrs && f.num == d->attrs) {
            bool keep;

            rc = kv_keep(l, f.val, f.end, &keep);
            if (rc != W_OK)
                return rc;
            if (!keep) {
                removed++;
                cut = true;
            }
        } else if (attrs && f.num == d->dropped) {
            /* Written once at the end: the last occurrence is the value. */
            dropped_at = f.val;
            dropped_end = f.end;
            cut = true;
        } else if (span && ((f.num == 11 && tw->ctx[SF_TRANSFORM_SPANEVENT].active) ||
                            (f.num == 13 && tw->ctx[SF_TRANSFORM_LINK].active) ||
                            (f.num == 15 && tw->clear_status))) {
            if (put(w, run, (size_t)(f.start - run)) != W_OK)
                return W_NOMEM;
            run = f.end;
            if (f.num == 15) {
                if (seen_status)
                    return W_TREE;
                seen_status = true;
                rc = child_status(w, &f);
            } else {
                rc = child_item(w, f.num == 11 ? &d_event : &d_link, &f);
            }
            if (rc != W_OK)
                return rc;
        }
        if (cut) {
            if (put(w, run, (size_t)(f.start - run)) != W_OK)
                return W_NOMEM;
            run = f.end;
        }
    }
    if (put(w, run, (size_t)(end - run)) != W_OK)
        return W_NOMEM;
    if (removed > 0) {
        uint64_t old = 0, sum;
        uint8_t tmp[6];
        size_t n;

        if (dropped_at != NULL && read_varint(&dropped_at, dropped_end, 10, &old) != 0)
            return W_MALFORMED;
        sum = (uint32_t)old + removed;
        tmp[0] = (uint8_t)(d->dropped << 3);
        n = 1 + varint_put(tmp + 1, sum > UINT32_MAX ? UINT32_MAX : sum);
        if (put(w, tmp, n) != W_OK)
            return W_NOMEM;
        w->removed += removed;
    } else if (dropped_at != NULL) {
        uint8_t tag = (uint8_t)(d->dropped << 3);

        if (put(w, &tag, 1) != W_OK || put(w, dropped_at, (size_t)(dropped_end - dropped_at)))
            return W_NOMEM;
    }
    return W_OK;
}

static int filter_scope_spans(wout *w, const uint8_t *p, const uint8_t *end)
{
    const sf_transform_wire *tw = w->tw;
    bool seen_scope = false;
    field f;
    int rc;

    while (p < end) {
        if (next_field(p, end, &f) != 0 || !WT_OK(wt_ss, &f))
            return W_MALFORMED;
        p = f.end;
        if (f.num == 1 && tw->ctx[SF_TRANSFORM_SCOPE].active) {
            if (seen_scope)
                return W_TREE;
            seen_scope = true;
            rc = child_item(w, &d_scope, &f);
        } else if (f.num == 2 && tw->walk_spans) {
            rc = child_item(w, &d_span, &f);
        } else {
            rc = put(w, f.start, (size_t)(f.end - f.start));
        }
        if (rc != W_OK)
            return rc;
    }
    return W_OK;
}

static int filter_resource_spans(wout *w, const uint8_t *p, const uint8_t *end)
{
    const sf_transform_wire *tw = w->tw;
    bool seen_resource = false;
    field f;
    int rc;

    while (p < end) {
        if (next_field(p, end, &f) != 0 || !WT_OK(wt_rs, &f))
            return W_MALFORMED;
        p = f.end;
        if (f.num == 1 && tw->ctx[SF_TRANSFORM_RESOURCE].active) {
            if (seen_resource)
                return W_TREE;
            seen_resource = true;
            rc = child_item(w, &d_resource, &f);
        } else if (f.num == 2 && tw->walk_scopes) {
            size_t hpos, hlen;

            rc = open_msg(w, &f, &hpos, &hlen);
            if (rc == W_OK)
                rc = filter_scope_spans(w, f.val, f.end);
            if (rc == W_OK)
                rc = close_msg(w, hpos, hlen);
        } else {
            rc = put(w, f.start, (size_t)(f.end - f.start));
        }
        if (rc != W_OK)
            return rc;
    }
    return W_OK;
}

static int filter_request(wout *w, const uint8_t *p, const uint8_t *end)
{
    field f;
    int rc;

    while (p < end) {
        if (next_field(p, end, &f) != 0 || !WT_OK(wt_request, &f))
            return W_MALFORMED;
        p = f.end;
        if (f.num == 1) {
            size_t hpos, hlen;

            rc = open_msg(w, &f, &hpos, &hlen);
            if (rc == W_OK)
                rc = filter_resource_spans(w, f.val, f.end);
            if (rc == W_OK)
                rc = close_msg(w, hpos, hlen);
        } else {
            rc = put(w, f.start, (size_t)(f.end - f.start));
        }
        if (rc != W_OK)
            return rc;
    }
    return W_OK;
}

sf_status sf_transform_wire_filter(const sf_transform_wire *tw, const uint8_t *in, size_t len,
                                   size_t spans, sf_buf **out, uint64_t *removed)
{
    wout w = { .tw = tw };
    int rc = W_OK;

    *out = NULL;
    *removed = 0;
    if (len > SIZE_MAX / 2)
        return tw->fail;
    w.cap = len + len / 16 + 64;
    w.buf = sf_buf_create(w.cap);
    if (w.buf == NULL)
        return tw->fail;
    if (!tw->walk_any) {
        if (len > 0)
            memcpy(w.buf->data, in, len);
        w.len = len;
    } else {
        rc = filter_request(&w, in, in + len);
    }
    if (rc != W_OK) {
        sf_buf_unref(w.buf);
        return rc == W_TREE ? SF_UNSUPPORTED : tw->fail;
    }
    w.buf->len = w.len;
    w.buf->spans = spans;
    *out = w.buf;
    *removed = w.removed;
    return SF_OK;
}

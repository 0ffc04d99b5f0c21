/* sf_batch.c: decoding a request into an arena-owned batch, the allocation-
 * free wire check that guards protobuf-c (which recurses without limit), and
 * the reference-counted buffers exporters queue. */
#include "sf_batch.h"
#include "sf_alloc.h"

#include <string.h>

/* ---- sf_buf ------------------------------------------------------------ */

sf_buf *sf_buf_create(size_t len)
{
    sf_buf *b = sf_malloc(sizeof(*b) + len);

    if (b == NULL)
        return NULL;
    atomic_init(&b->refs, 1);
    b->len = len;
    b->spans = 0;
    return b;
}

sf_buf *sf_buf_ref(sf_buf *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void sf_buf_unref(sf_buf *b)
{
    if (b != NULL && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        sf_free(b);
}

/* ---- wire check ---------------------------------------------------------- */

/* The messages of the OTLP trace request that can contain attributes. */
typedef enum {
    M_NONE, M_REQUEST, M_RESOURCE_SPANS, M_RESOURCE, M_SCOPE_SPANS, M_SCOPE,
    M_SPAN, M_EVENT, M_LINK, M_KV, M_ANY, M_ARRAY, M_KVLIST
} msg_kind;

/* Which message a length-delimited field of `m` holds (M_NONE: bytes). */
static msg_kind child_of(msg_kind m, uint32_t field)
{
    switch (m) {
    case M_REQUEST:        return field == 1 ? M_RESOURCE_SPANS : M_NONE;
    case M_RESOURCE_SPANS: return field == 1 ? M_RESOURCE : field == 2 ? M_SCOPE_SPANS : M_NONE;
    case M_RESOURCE:       return field == 1 ? M_KV : M_NONE;
    case M_SCOPE_SPANS:    return field == 1 ? M_SCOPE : field == 2 ? M_SPAN : M_NONE;
    case M_SCOPE:          return field == 3 ? M_KV : M_NONE;
    case M_SPAN:           return field == 9 ? M_KV : field == 11 ? M_EVENT
                                : field == 13 ? M_LINK : M_NONE;
    case M_EVENT:          return field == 3 ? M_KV : M_NONE;
    case M_LINK:           return field == 4 ? M_KV : M_NONE;
    case M_KV:             return field == 2 ? M_ANY : M_NONE;
    case M_ANY:            return field == 5 ? M_ARRAY : field == 6 ? M_KVLIST : M_NONE;
    case M_ARRAY:          return field == 1 ? M_ANY : M_NONE;
    case M_KVLIST:         return field == 1 ? M_KV : M_NONE;
    default:               return M_NONE;
    }
}

static inline int read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    unsigned shift;

    /* Most tags and lengths here fit in one or two bytes. */
    if (p < end && !(p[0] & 0x80)) {
        *out = p[0];
        *pp = p + 1;
        return 0;
    }
    if (end - p >= 2 && !(p[1] & 0x80)) {
        *out = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
        *pp = p + 2;
        return 0;
    }
    for (shift = 0; shift < 64 && p < end; shift += 7) {
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return -1;
}

static sf_status walk(const uint8_t *p, const uint8_t *end, msg_kind m, unsigned depth,
                      unsigned max_depth, size_t *spans);

/* Skip one field's value of wire type `wt`; -1 when it does not fit. */
static inline int skip_value(const uint8_t **pp, const uint8_t *end, unsigned wt)
{
    uint64_t v;

    switch (wt) {
    case 0:
        return read_varint(pp, end, &v);
    case 1:
        if (end - *pp < 8)
            return -1;
        *pp += 8;
        return 0;
    case 5:
        if (end - *pp < 4)
            return -1;
        *pp += 4;
        return 0;
    case 2:
        if (read_varint(pp, end, &v) != 0 || v > (uint64_t)(end - *pp))
            return -1;
        *pp += v;
        return 0;
    default:
        return -1;
    }
}

/* A KeyValue: the hot case of the walk (a dozen or more per span). The
 * common shape, a key and a value holding one scalar field, is checked
 * without recursion; anything else goes through the general walk. */
static sf_status check_kv(const uint8_t *p, const uint8_t *end, unsigned depth,
                          unsigned max_depth, size_t *spans)
{
    while (p < end) {
        uint64_t tag, len;
        const uint8_t *v, *vend, *q;

        if (read_varint(&p, end, &tag) != 0 || (tag >> 3) == 0 || tag >> 3 > 0x1fffffff)
            return SF_INVALID;
        if (tag != 0x12) {                  /* the key, or an unknown field */
            if (skip_value(&p, end, (unsigned)(tag & 7)) != 0)
                return SF_INVALID;
            continue;
        }
        if (read_varint(&p, end, &len) != 0 || len > (uint64_t)(end - p))
            return SF_INVALID;
        v = p;
        vend = p + len;
        p = vend;
        /* AnyValue: a single scalar field needs no further look. */
        q = v;
        if (q < vend && read_varint(&q, vend, &tag) == 0 && (tag >> 3) != 5 &&
            (tag >> 3) != 6 && (tag >> 3) != 0 && skip_value(&q, vend, (unsigned)(tag & 7)) == 0 &&
            q == vend)
            continue;
        if (walk(v, vend, M_ANY, depth, max_depth, spans) != SF_OK)
            return SF_INVALID;
    }
    return SF_OK;
}

static sf_status walk(const uint8_t *p, const uint8_t *end, msg_kind m, unsigned depth,
                      unsigned max_depth, size_t *spans)
{
    if (m == M_ARRAY || m == M_KVLIST) {
        if (++depth > max_depth)
            return SF_INVALID;
    }
    if (m == M_SPAN)
        (*spans)++;

    while (p < end) {
        uint64_t tag, v;
        uint32_t field;

        if (read_varint(&p, end, &tag) != 0)
            return SF_INVALID;
        field = (uint32_t)(tag >> 3);
        if (field == 0 || tag >> 3 > 0x1fffffff)
            return SF_INVALID;
        switch (tag & 7) {
        case 0:
            if (read_varint(&p, end, &v) != 0)
                return SF_INVALID;
            break;
        case 1:
            if (end - p < 8)
                return SF_INVALID;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return SF_INVALID;
            p += 4;
            break;
        case 2: {
            msg_kind c;
            if (read_varint(&p, end, &v) != 0 || v > (uint64_t)(end - p))
                return SF_INVALID;
            c = child_of(m, field);
            if (c == M_KV) {
                if (check_kv(p, p + v, depth, max_depth, spans) != SF_OK)
                    return SF_INVALID;
            } else if (c != M_NONE) {
                sf_status st = walk(p, p + v, c, depth, max_depth, spans);
                if (st != SF_OK)
                    return st;
            }
            p += v;
            break;
        }
        default:            /* groups (3, 4) and reserved types */
            return SF_INVALID;
        }
    }
    return SF_OK;
}

sf_status sf_otlp_wire_check(const uint8_t *data, size_t len, unsigned max_depth,
                             size_t *spans)
{
    size_t n = 0;
    sf_status st = walk(data, data + len, M_REQUEST, 0, max_depth, &n);

    if (spans != NULL)
        *spans = n;
    return st;
}

/* ---- spans by resource ------------------------------------------------- */

/* One field of a message: its number, wire type and, for length-delimited
 * fields, the value's bytes. -1 when the field does not fit. */
static int next_field(const uint8_t **pp, const uint8_t *end, uint32_t *field, unsigned *wt,
                      const uint8_t **v, const uint8_t **vend)
{
    uint64_t tag, len;

    if (read_varint(pp, end, &tag) != 0 || (tag >> 3) == 0 || tag >> 3 > 0x1fffffff)
        return -1;
    *field = (uint32_t)(tag >> 3);
    *wt = (unsigned)(tag & 7);
    if (*wt != 2)
        return skip_value(pp, end, *wt);
    if (read_varint(pp, end, &len) != 0 || len > (uint64_t)(end - *pp))
        return -1;
    *v = *pp;
    *vend = *pp + len;
    *pp += len;
    return 0;
}

static bool bytes_equal(const uint8_t *p, const uint8_t *end, const char *s)
{
    size_t n = strlen(s);

    return (size_t)(end - p) == n && memcmp(p, s, n) == 0;
}

/* Whether the KeyValue [p, end) is key = (string) value. Repeated fields
 * follow protobuf: the last key wins, AnyValue occurrences merge and the
 * last oneof member set wins. -1 when malformed. */
static int kv_is(const uint8_t *p, const uint8_t *end, const char *key, const char *value)
{
    const uint8_t *k = NULL, *kend = NULL, *s = NULL, *send = NULL;
    uint32_t last = 0;              /* last AnyValue member seen */

    while (p < end) {
        const uint8_t *v = NULL, *vend = NULL;
        uint32_t field;
        unsigned wt;

        if (next_field(&p, end, &field, &wt, &v, &vend) != 0)
            return -1;
        if (field == 1 && wt == 2) {
            k = v;
            kend = vend;
        } else if (field == 2 && wt == 2) {
            while (v < vend) {
                const uint8_t *a = NULL, *aend = NULL;
                uint32_t af;
                unsigned awt;

                if (next_field(&v, vend, &af, &awt, &a, &aend) != 0)
                    return -1;
                if (af >= 1 && af <= 7)
                    last = af;
                if (af == 1 && awt == 2) {
                    s = a;
                    send = aend;
                }
            }
        }
    }
    return k != NULL && bytes_equal(k, kend, key) && last == 1 && s != NULL &&
           bytes_equal(s, send, value);
}

/* Whether some Resource of the ResourceSpans [p, end) has key = value
 * (a repeated Resource field merges: its attributes add up). -1 when
 * malformed. */
static int resource_has(const uint8_t *p, const uint8_t *end, const char *key, const char *value)
{
    while (p < end) {
        const uint8_t *v = NULL, *vend = NULL;
        uint32_t field;
        unsigned wt;

        if (next_field(&p, end, &field, &wt, &v, &vend) != 0)
            return -1;
        if (field != 1 || wt != 2)
            continue;
        while (v < vend) {              /* Resource */
            const uint8_t *a = NULL, *aend = NULL;
            uint32_t af;
            unsigned awt;
            int r;

            if (next_field(&v, vend, &af, &awt, &a, &aend) != 0)
                return -1;
            if (af != 1 || awt != 2)
                continue;
            r = kv_is(a, aend, key, value);
            if (r != 0)
                return r;
        }
    }
    return 0;
}

/* Spans of the ResourceSpans [p, end); -1 when malformed. */
static int64_t resource_spans_count(const uint8_t *p, const uint8_t *end)
{
    int64_t n = 0;

    while (p < end) {
        const uint8_t *v = NULL, *vend = NULL;
        uint32_t field;
        unsigned wt;

        if (next_field(&p, end, &field, &wt, &v, &vend) != 0)
            return -1;
        if (field != 2 || wt != 2)
            continue;
        while (v < vend) {              /* ScopeSpans */
            const uint8_t *a = NULL, *aend = NULL;
            uint32_t af;
            unsigned awt;

            if (next_field(&v, vend, &af, &awt, &a, &aend) != 0)
                return -1;
            if (af == 2 && awt == 2)
                n++;
        }
    }
    return n;
}

size_t sf_otlp_count_matching_spans(const uint8_t *data, size_t len, size_t n,
                                    const char *const *keys, const char *const *values)
{
    const uint8_t *p = data, *end = data + len;
    size_t total = 0;

    if (data == NULL || (n > 0 && (keys == NULL || values == NULL)))
        return 0;
    while (p < end) {
        const uint8_t *v = NULL, *vend = NULL;
        uint32_t field;
        unsigned wt;
        bool all = true;
        int64_t spans;

        if (next_field(&p, end, &field, &wt, &v, &vend) != 0)
            return 0;
        if (field != 1 || wt != 2)
            continue;
        for (size_t i = 0; i < n && all; i++) {
            int r = resource_has(v, vend, keys[i], values[i]);
            if (r < 0)
                return 0;
            all = r == 1;
        }
        spans = resource_spans_count(v, vend);
        if (spans < 0)
            return 0;
        if (all)
            total += (size_t)spans;
    }
    return total;
}

/* ---- decode / encode ---------------------------------------------------- */

size_t sf_otlp_count_spans(const sf_otlp_request *req)
{
    size_t n = 0;

    for (size_t i = 0; i < req->n_resource_spans; i++) {
        const sf_otlp_resource_spans *rs = req->resource_spans[i];
        for (size_t j = 0; j < rs->n_scope_spans; j++)
            n += rs->scope_spans[j]->n_spans;
    }
    return n;
}

sf_status sf_batch_init(sf_batch *b, sf_arena *arena, const uint8_t *data, size_t len,
                        unsigned max_depth)
{
    size_t spans;
    sf_status st;

    memset(b, 0, sizeof(*b));
    st = sf_otlp_wire_check(data, len, max_depth, &spans);
    b->spans = spans;           /* on error: the spans seen before it */
    if (st != SF_OK)
        return st;
    b->arena = arena;
    b->raw = data;
    b->raw_len = len;
    b->max_depth = max_depth;
    return SF_OK;
}

sf_status sf_batch_bytes(sf_batch *b, const uint8_t **data, size_t *len)
{
    if (b->req_current) {
        sf_buf *buf;
        sf_status st = sf_batch_encode(b, &buf);    /* packs into b->wire */
        if (st != SF_OK)
            return st;
        sf_buf_unref(buf);
    }
    if (b->wire != NULL) {
        *data = b->wire->data;
        *len = b->wire->len;
    } else {
        *data = b->raw;
        *len = b->raw_len;
    }
    return SF_OK;
}

sf_status sf_batch_request(sf_batch *b)
{
    const uint8_t *data;
    size_t len;
    sf_status st;

    if (b->req_current)
        return SF_OK;
    st = sf_batch_bytes(b, &data, &len);
    if (st != SF_OK)
        return st;
    b->req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        sf_arena_pb_allocator(b->arena), len, data);
    if (b->req == NULL) {
        /* The wire check passed, so this is either memory or something
         * only protobuf-c checks (a wire type that does not match a known
         * field's type). */
        return sf_arena_failed(b->arena) ? SF_ENOMEM : SF_INVALID;
    }
    /* From here the tree is the state: processors edit it in place. */
    sf_buf_unref(b->wire);
    b->wire = NULL;
    b->req_current = true;
    return SF_OK;
}

sf_status sf_batch_decode(sf_batch *b, sf_arena *arena, const uint8_t *data, size_t len,
                          unsigned max_depth)
{
    sf_status st = sf_batch_init(b, arena, data, len, max_depth);

    if (st == SF_OK)
        st = sf_batch_request(b);
    return st;
}

sf_status sf_batch_encode(sf_batch *b, sf_buf **out)
{
    if (b->req_current) {
        size_t len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(b->req);
        sf_buf *buf = sf_buf_create(len);

        if (buf == NULL)
            return SF_ENOMEM;
        buf->len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(b->req, buf->data);
        /* The packed bytes are the state now; an exporter after another
         * exporter gets the same buffer. The tree stays valid for reading. */
        sf_buf_unref(b->wire);
        b->wire = buf;
        b->req_current = false;
    } else if (b->wire == NULL) {
        sf_buf *buf = sf_buf_create(b->raw_len);

        if (buf == NULL)
            return SF_ENOMEM;
        memcpy(buf->data, b->raw, b->raw_len);
        b->wire = buf;
    }
    b->wire->spans = b->spans;
    *out = sf_buf_ref(b->wire);
    return SF_OK;
}

void sf_batch_set_wire(sf_batch *b, sf_buf *buf)
{
    sf_buf_unref(b->wire);
    b->wire = buf;
    b->req_current = false;
}

void sf_batch_release(sf_batch *b)
{
    sf_buf_unref(b->wire);
    b->wire = NULL;
    b->req_current = false;
}

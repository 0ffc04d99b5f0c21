/* sf_otlp_wire.c: the OTLP wire codec for traces, logs and metrics: one
 * schema table per message type, one reader, one canonical writer (see
 * sf_otlp_wire.h).
 *
 * DESIGN
 * - Every field is read once, with its tag, its wire type against the
 *   schema and its value (range, UTF-8, id length) checked; fields the
 *   schema does not define are skipped and counted.
 * - The usual message is written as it is read (stream()): sub-messages
 *   and repeated fields in the order they come, singular scalars held until
 *   the next of those that follows them in number order (the last one wins,
 *   defaults omitted), scalars already canonical and unchanged copied as
 *   one run. A message that does not fit that order (a field after a larger
 *   one was written, a singular message given twice) makes the whole request
 *   start again with generic(): it first reads every field, remembering per
 *   field number the last value and where the occurrences start and end,
 *   then writes in field-number order, repeated fields by walking the range
 *   between their first and last occurrence.
 * - A singular message given more than once is, as protobuf says, the
 *   concatenation of its occurrences: they are copied into one scratch
 *   buffer (bounded by twice the request's size per call) and handled as
 *   one. AnyValue's oneof keeps its last member; a message member merges the
 *   occurrences since the member last changed. Every occurrence is read and
 *   checked, those that lose included, as a standard decoder would.
 * - A oneof keeps the member the input set last (a message member merges
 *   the occurrences since the member last changed; the losers are read and
 *   checked, never written); oneof members and proto3 `optional` fields are
 *   written even when 0 (their presence is their meaning). stream() leaves
 *   a message with two members of its oneof to generic().
 * - Repeated numbers leave packed, one field, whether they came packed,
 *   unpacked or both; varints re-encoded minimal.
 * - KeyValue and AnyValue, a dozen of each per span, have a fast path: when
 *   their bytes are already canonical (one key, one scalar value, minimal
 *   lengths) they are checked, judged by the edit's keyset and copied whole.
 * - The writer reserves a sub-message's length prefix from its input size and
 *   moves the content only when the real length needs another prefix size.
 *   A "discard" depth turns writing off: removed attributes and the losing
 *   members of a oneof are still read and checked, never written.
 * - A call owns everything it allocates (output, merge copies, name
 *   scratch); the edit is read-only, so calls run concurrently. */
#include "sf_otlp_wire.h"
#include "sf_alloc.h"
#include "sf_buf.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* gcc 12 reports locals as maybe-uninitialized through the always_inline
 * readers (and `slot` entries only read under their `pending` bit); the
 * sanitizer and valgrind runs check the real thing. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

/* What a field holds. */
enum { F_NONE = 0, F_UINT32, F_INT32, F_INT64, F_BOOL, F_FIXED32, F_FIXED64, F_STRING, F_BYTES,
       F_MSG, F_SINT32 };

/* Field flags (fdesc.flags): written even when 0; a member of the
 * message's oneof; a repeated number (packed on output). */
enum { FL_PRESENCE = 1, FL_ONEOF = 2, FL_PACKED = 4 };

/* What the codec does with it beyond its type. */
enum { R_PLAIN = 0, R_ATTRS, R_DROPPED, R_ID16, R_ID8, R_SPANS,
       R_COUNT };               /* the dropped count of a capped field (fdesc.field) */

typedef struct fdesc {
    uint8_t type;
    uint8_t repeated;
    uint8_t role;
    uint8_t child;              /* F_MSG: its sf_otlp_msg */
    uint8_t field;              /* sf_otlp_field an edit may govern, or 0 (field_verdict) */
    uint8_t flags;              /* FL_* */
} fdesc;

typedef struct mdesc {
    uint32_t n;                 /* field numbers 1 .. n-1 */
    const fdesc *f;
    int ctx;                    /* sf_otlp_ctx of its attributes and name, or -1 */
    uint32_t dropped;           /* field number of dropped_attributes_count, or 0 */
    uint32_t name;              /* field number of the name an edit renames, or 0 */
    uint32_t oneof;             /* bit n: field n is a member of the message's oneof */
} mdesc;

/* The tables, one per message type (sf_otlp_f_<type>) and schema[] by
 * sf_otlp_msg: generated from the .proto files and
 * pipeline/proto/trace_fields.txt, the decision for every field, by
 * tools/gen_otlp_schema.py. KeyValue and AnyValue have their tables too but
 * no schema[] entry: their own functions (kv, any) read them. */
#define SF_OTLP_SCHEMA_WIRE
#include "sf_otlp_schema.h"

#define N_FIELDS(t) (sizeof(t) / sizeof((t)[0]))

/* AnyValue's members and KeyValue's fields, which any() and kv() read by
 * hand (with the profiles-only string-table indexes of a later schema) */
enum {
    AV_STRING = SF_OTLP_NUM_ANY_VALUE_STRING_VALUE, AV_BOOL = SF_OTLP_NUM_ANY_VALUE_BOOL_VALUE,
    AV_INT = SF_OTLP_NUM_ANY_VALUE_INT_VALUE, AV_DOUBLE = SF_OTLP_NUM_ANY_VALUE_DOUBLE_VALUE,
    AV_ARRAY = SF_OTLP_NUM_ANY_VALUE_ARRAY_VALUE, AV_KVLIST = SF_OTLP_NUM_ANY_VALUE_KVLIST_VALUE,
    AV_BYTES = SF_OTLP_NUM_ANY_VALUE_BYTES_VALUE,
    AV_STRINDEX = SF_OTLP_NUM_ANY_VALUE_STRING_VALUE_STRINDEX,
    KV_KEY = SF_OTLP_NUM_KEY_VALUE_KEY, KV_VALUE = SF_OTLP_NUM_KEY_VALUE_VALUE,
    KV_STRINDEX = SF_OTLP_NUM_KEY_VALUE_KEY_STRINDEX
};

static const char *const msg_labels[SF_OTLP_MSG_COUNT] = {
#define SF_OTLP_MSG_LABEL(e, label) [SF_OTLP_MSG_##e] = label,
    SF_OTLP_MSG_MAP(SF_OTLP_MSG_LABEL)
#undef SF_OTLP_MSG_LABEL
};

const char *sf_otlp_msg_label(sf_otlp_msg m)
{
    return (unsigned)m < SF_OTLP_MSG_COUNT ? msg_labels[m] : "unknown";
}

static const char *const field_names[SF_OTLP_FIELD_COUNT] = {
    [SF_OTLP_FIELD_NONE] = "none",
#define SF_OTLP_FIELD_NAME(e, name) [SF_OTLP_FIELD_##e] = name,
    SF_OTLP_FIELD_MAP(SF_OTLP_FIELD_NAME)
#undef SF_OTLP_FIELD_NAME
};

const char *sf_otlp_field_name(sf_otlp_field f)
{
    return (unsigned)f < SF_OTLP_FIELD_COUNT ? field_names[f] : "none";
}

/* ---- keysets ---------------------------------------------------------------- */

typedef struct ks_slot {
    uint64_t head, tail;        /* key_words() of the key */
    const char *key;            /* NULL: empty */
    size_t len;
    bool keep;
    const sf_otlp_value_rule *rule;     /* kept: what its value must be, or NULL */
} ks_slot;

struct sf_otlp_keyset {
    bool keep_other;            /* verdict for keys not in the set */
    uint64_t len_mask;          /* bit min(len, 63) of every key in the set */
    size_t mask;                /* slots - 1 (a power of two minus one) */
    ks_slot slots[];            /* open addressing, linear probing */
};

/* A key's first 8 bytes (zero-padded) and, from 8 bytes on, its last 8:
 * together the whole key up to 16 bytes, and its hash. */
static inline __attribute__((always_inline)) void key_words(const uint8_t *k, size_t len,
                                                            uint64_t *head, uint64_t *tail)
{
    *head = 0;
    *tail = 0;
    if (len >= 8) {
        memcpy(head, k, 8);
        memcpy(tail, k + len - 8, 8);
    } else {
        memcpy(head, k, len);
    }
}

static inline uint64_t key_hash(uint64_t head, uint64_t tail, size_t len)
{
    uint64_t h = head * 0x9e3779b97f4a7c15ull ^ (tail + len) * 0xc2b2ae3d27d4eb4full;

    return h ^ (h >> 31);
}

static inline uint64_t len_bit(size_t len)
{
    return 1ull << (len < 63 ? len : 63);
}

sf_status sf_otlp_keyset_create(size_t n, const char *const *keys, const bool *keep,
                                bool keep_other, sf_otlp_keyset **out)
{
    return sf_otlp_keyset_create_with(n, keys, keep, NULL, keep_other, out);
}

sf_status sf_otlp_keyset_create_with(size_t n, const char *const *keys, const bool *keep,
                                     const sf_otlp_value_rule *const *rules, bool keep_other,
                                     sf_otlp_keyset **out)
{
    size_t slots = 4;
    sf_otlp_keyset *ks;

    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!sf_otlp_utf8_valid((const uint8_t *)keys[i], strlen(keys[i])))
            return SF_INVALID;
    }
    while (slots < 2 * n + 2)
        slots *= 2;
    ks = sf_calloc(1, sizeof(*ks) + slots * sizeof(ks_slot));
    if (ks == NULL)
        return SF_ENOMEM;
    ks->keep_other = keep_other;
    ks->mask = slots - 1;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(keys[i]), at;
        uint64_t head, tail;

        key_words((const uint8_t *)keys[i], len, &head, &tail);
        at = key_hash(head, tail, len) & ks->mask;
        while (ks->slots[at].key != NULL && strcmp(ks->slots[at].key, keys[i]) != 0)
            at = (at + 1) & ks->mask;
        if (ks->slots[at].key != NULL)
            continue;
        ks->slots[at] = (ks_slot){ .head = head, .tail = tail, .key = keys[i], .len = len,
                                   .keep = keep[i],
                                   .rule = rules != NULL && keep[i] ? rules[i] : NULL };
        ks->len_mask |= len_bit(len);
    }
    *out = ks;
    return SF_OK;
}

void sf_otlp_keyset_destroy(sf_otlp_keyset *ks)
{
    sf_free(ks);
}

/* Bytes 8 .. len-8 of two keys of length len equal (their heads and tails are). */
static inline __attribute__((always_inline)) bool key_middle_eq(const char *a, const uint8_t *b,
                                                                size_t len)
{
    for (size_t i = 8; i + 8 < len; i += 8) {
        uint64_t x, y;

        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y)
            return false;
    }
    return true;
}

/* The slot of a key the set lists (then the key is valid UTF-8: the set's
 * keys were checked), or NULL. */
static inline __attribute__((always_inline)) const ks_slot *
keyset_find(const sf_otlp_keyset *ks, const uint8_t *k, size_t len)
{
    uint64_t head, tail;

    if (!(ks->len_mask & len_bit(len)))
        return NULL;
    key_words(k, len, &head, &tail);
    for (size_t i = key_hash(head, tail, len) & ks->mask;; i = (i + 1) & ks->mask) {
        const ks_slot *e = &ks->slots[i];

        if (e->key == NULL)
            return NULL;
        if (e->head == head && e->tail == tail && e->len == len && key_middle_eq(e->key, k, len))
            return e;
    }
}

/* A keyset's verdict on a key: KS_KEEP or not, and KS_LISTED when the key is
 * one of the set's own. */
enum { KS_KEEP = 1, KS_LISTED = 2 };

static inline __attribute__((always_inline)) int keyset_judge(const sf_otlp_keyset *ks,
                                                              const uint8_t *k, size_t len)
{
    const ks_slot *e = keyset_find(ks, k, len);

    return e != NULL ? KS_LISTED | e->keep : ks->keep_other;
}

static inline __attribute__((always_inline)) bool keyset_keeps(const sf_otlp_keyset *ks,
                                                               const uint8_t *k, size_t len)
{
    return keyset_judge(ks, k, len) & KS_KEEP;
}

bool sf_otlp_keyset_keeps(const sf_otlp_keyset *ks, const uint8_t *key, size_t len)
{
    return keyset_keeps(ks, key, len);
}

/* ---- the call's state ------------------------------------------------------ */

typedef struct cx {
    const sf_otlp_edit *edit;   /* NULL: canonical form only */
    void *state;                /* the edit's per-call pointer */
    sf_otlp_stats *st;
    unsigned max_depth;
    /* the writer */
    sf_buf *buf;                /* NULL: nothing is ever written */
    size_t len, cap;
    unsigned discard;           /* > 0: writing is off */
    size_t budget;              /* bytes merge copies may still take */
    bool general;               /* every message through generic(): see run() */
    uint32_t held[SF_OTLP_MSG_COUNT];  /* per message, fields the edit changes */
    uint64_t ins_kinds;         /* bit k: message kind k gets the edit's inserts */
    uint64_t ins_parents;       /* bit k: kind k has a singular child of such a kind */
    uint8_t verdict[SF_OTLP_FIELD_COUNT]; /* per governed field: FV_* (field_verdict) */
    const sf_otlp_bounds *bounds; /* check_histograms: the current metric's set, or NULL */
    uint32_t caps[SF_OTLP_FIELD_COUNT]; /* per capped repeated field: the edit's cap, 0: none */
    bool ids;                   /* trace and span ids leave as edit->id_fn makes them */
    struct id_memo *memo;       /* ... and those made in this call (put_id), or NULL */
    const uint8_t *in, *in_end; /* the request */
    /* ids_ahead: where the spans not yet looked at start, by level (the
     * request, its ResourceSpans, their ScopeSpans); level -1: none left */
    const uint8_t *ahead_pos[3], *ahead_end[3];
    int ahead_level;
    const uint8_t *ahead_mark;  /* the middle span of those looked at last */
    uint32_t memo_age;          /* ids_ahead calls so far */
    size_t memo_mask;           /* its slots less one */
    bool has_last_trace;        /* put_id: the last trace id made (never all zero) */
    uint64_t last_trace[2];
    uint8_t last_trace_out[16];
    sf_otlp_text name;          /* rename output */
    /* one_value_per_key: the keys of the current attribute list so far, by
     * keyset slot (slots below SEEN_SLOTS) or, past that and for keys the
     * set does not list, by their bytes */
    uint64_t seen[8];
    size_t drift_next;          /* st->drift entry to try first (drift_note) */
    /* per context and cause, 1 + the st->drift entry of the keys counted as
     * `other` (0: none yet): most removals, counted without a call */
    uint8_t drift_other[SF_OTLP_CTX_COUNT][2];
    const uint8_t **seen_key;
    size_t *seen_len;
    size_t n_seen, cap_seen;
    /* sf_otlp_count_matching_spans */
    size_t n_match;
    const char *const *keys;
    const char *const *values;
    uint64_t match_bits;        /* of the current ResourceSpans' resource */
    size_t matching;
} cx;

#define SEEN_SLOTS 512

/* What the edit does to a governed field (sf_otlp_field). */
enum { FV_AS_IS = 0, FV_CLEAR, FV_REWRITE };

/* The one place that decides whether an edit touches a field: run() asks
 * it once per call into c->verdict, which held, as_is, put_scalar and
 * put_repeated all read. */
static int field_verdict(const sf_otlp_edit *e, unsigned f)
{
    if (e == NULL)
        return FV_AS_IS;
    switch (f) {
    case SF_OTLP_FIELD_NONE:
        return FV_AS_IS;
    case SF_OTLP_FIELD_SPAN_NAME:
        return e->rename & SF_OTLP_CTX_BIT(SF_OTLP_SPAN) ? FV_REWRITE : FV_AS_IS;
    case SF_OTLP_FIELD_EVENT_NAME:
        return e->rename & SF_OTLP_CTX_BIT(SF_OTLP_SPANEVENT) ? FV_REWRITE : FV_AS_IS;
    case SF_OTLP_FIELD_SPAN_TRACE_STATE:
        return e->clear_trace_state & SF_OTLP_CTX_BIT(SF_OTLP_SPAN) ? FV_CLEAR : FV_AS_IS;
    case SF_OTLP_FIELD_LINK_TRACE_STATE:
        return e->clear_trace_state & SF_OTLP_CTX_BIT(SF_OTLP_LINK) ? FV_CLEAR : FV_AS_IS;
    case SF_OTLP_FIELD_STATUS_MESSAGE:
        return e->clear_status_message ? FV_CLEAR : FV_AS_IS;
    case SF_OTLP_FIELD_ENTITY_REFS:
        return e->fields & SF_OTLP_FIELD_BIT(f) ? FV_CLEAR : FV_AS_IS;
    case SF_OTLP_FIELD_SPAN_EVENTS:     /* capped (edit->cap), never cleared */
    case SF_OTLP_FIELD_SPAN_LINKS:
    case SF_OTLP_FIELD_RESOURCE_SPANS:
    case SF_OTLP_FIELD_SCOPE_SPANS:
    case SF_OTLP_FIELD_SPANS:
    case SF_OTLP_FIELD_HISTOGRAM_BUCKETS:   /* checked whole (hist_fits), never rewritten */
        return FV_AS_IS;
    case SF_OTLP_FIELD_EXEMPLARS:
        return e->fields & SF_OTLP_FIELD_BIT(f) && !e->keep_exemplars ? FV_CLEAR : FV_AS_IS;
    case SF_OTLP_FIELD_LOG_BODY:        /* judged by body_rule once written (body_judge) */
        return e->fields & SF_OTLP_FIELD_BIT(f) ? FV_REWRITE : FV_AS_IS;
    default:
        return e->fields & SF_OTLP_FIELD_BIT(f) && e->field_fn != NULL ? FV_REWRITE
               : e->fields & SF_OTLP_FIELD_BIT(f) ? FV_CLEAR : FV_AS_IS;
    }
}

static sf_status bad(cx *c, const char *why)
{
    if (c->st->error == NULL)
        c->st->error = why;
    return SF_INVALID;
}

/* Value classes, for kept_value_types: scalar. */
enum { CLS_SCALAR = 0, CLS_ARRAY = 1, CLS_OTHER = 2 };

/* ---- reading --------------------------------------------------------------- */

typedef struct fld {
    const uint8_t *start;       /* first byte of the tag */
    const uint8_t *val;         /* LEN: the payload; else the value's bytes */
    const uint8_t *end;         /* one past the field */
    uint64_t u;                 /* VARINT, I64, I32: the value */
    uint32_t num;
    uint32_t wt;
} fld;

/* A varint of at most `max` bytes (5 for tags and lengths, 10 for values)
 * that fits 64 bits. -1 otherwise. */
static inline __attribute__((always_inline)) int
rd_varint(const uint8_t **pp, const uint8_t *end, unsigned max, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t r = 0;

    if (p < end && *p < 0x80) {
        *v = *p;
        *pp = p + 1;
        return 0;
    }
    if (end - p >= 2 && p[1] < 0x80) {     /* lengths of spans, events, longer values */
        *v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
        *pp = p + 2;
        return 0;
    }
    for (unsigned i = 0; i < max && p < end; i++) {
        uint8_t b = *p++;

        if (i == 9 && b > 1)
            return -1;          /* bits past 64 */
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = r;
            *pp = p;
            return 0;
        }
    }
    return -1;
}

static sf_status skip_group(cx *c, const uint8_t **pp, const uint8_t *end, uint32_t num,
                            unsigned depth);

/* The next field of [p, end). An END_GROUP tag is returned as it is (wt 4)
 * for skip_group; callers outside a group refuse it. */
static inline __attribute__((always_inline)) sf_status next_field(cx *c, const uint8_t *p,
                                                                  const uint8_t *end, fld *f,
                                                                  unsigned depth)
{
    uint64_t tag, v;

    f->start = p;
    if (rd_varint(&p, end, 5, &tag) != 0 || tag > UINT32_MAX)
        return bad(c, "malformed tag");
    f->num = (uint32_t)(tag >> 3);
    f->wt = (uint32_t)(tag & 7);
    if (f->num == 0)
        return bad(c, "field number 0");
    f->val = p;
    switch (f->wt) {
    case WT_VARINT:
        if (rd_varint(&p, end, 10, &f->u) != 0)
            return bad(c, "malformed varint");
        break;
    case WT_I64:
        if (end - p < 8)
            return bad(c, "truncated fixed64");
        memcpy(&f->u, p, 8);
        p += 8;
        break;
    case WT_I32: {
        uint32_t u32;

        if (end - p < 4)
            return bad(c, "truncated fixed32");
        memcpy(&u32, p, 4);
        f->u = u32;
        p += 4;
        break;
    }
    case WT_LEN:
        if (rd_varint(&p, end, 5, &v) != 0 || v > (uint64_t)(end - p))
            return bad(c, "malformed length");
        f->val = p;
        f->u = v;
        p += v;
        break;
    case WT_SGROUP: {
        sf_status st;

        f->u = 0;
        st = skip_group(c, &p, end, f->num, depth + 1);
        if (st != SF_OK)
            return st;
        break;
    }
    case WT_EGROUP:
        f->u = 0;
        break;
    default:
        return bad(c, "invalid wire type");
    }
    f->end = p;
    return SF_OK;
}

/* Past the END_GROUP of group `num` (unknown fields only: OTLP has none). */
static sf_status skip_group(cx *c, const uint8_t **pp, const uint8_t *end, uint32_t num,
                            unsigned depth)
{
    const uint8_t *p = *pp;
    fld f;

    if (depth > c->max_depth)
        return bad(c, "groups nested too deep");
    for (;;) {
        sf_status st;

        if (p >= end)
            return bad(c, "unterminated group");
        st = next_field(c, p, end, &f, depth);
        if (st != SF_OK)
            return st;
        p = f.end;
        if (f.wt == WT_EGROUP) {
            if (f.num != num)
                return bad(c, "mismatched end of group");
            *pp = p;
            return SF_OK;
        }
    }
}

/* Valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF), as
 * proto3 requires of strings and Go, upb and C++ decoders check. */
static bool utf8_valid_slow(const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;

    while (p < end) {
        while ((size_t)(end - p) >= 16) {
            uint64_t w[2];

            memcpy(w, p, 16);
            if ((w[0] | w[1]) & 0x8080808080808080ull)
                break;
            p += 16;
        }
        if (p == end)
            break;
        if ((size_t)(end - p) >= 8) {
            uint64_t w;

            memcpy(&w, p, 8);
            if (!(w & 0x8080808080808080ull)) {
                p += 8;
                continue;
            }
        }
        if (*p < 0x80) {
            p++;
        } else if (*p >= 0xc2 && *p <= 0xdf) {
            if (end - p < 2 || (p[1] & 0xc0) != 0x80)
                return false;
            p += 2;
        } else if (*p >= 0xe0 && *p <= 0xef) {
            uint8_t lo = *p == 0xe0 ? 0xa0 : 0x80, hi = *p == 0xed ? 0x9f : 0xbf;

            if (end - p < 3 || p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80)
                return false;
            p += 3;
        } else if (*p >= 0xf0 && *p <= 0xf4) {
            uint8_t lo = *p == 0xf0 ? 0x90 : 0x80, hi = *p == 0xf4 ? 0x8f : 0xbf;

            if (end - p < 4 || p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80 ||
                (p[3] & 0xc0) != 0x80)
                return false;
            p += 4;
        } else {
            return false;
        }
    }
    return true;
}

/* Nearly every key and value is ASCII: checked 16 bytes (SSE2) or a word at
 * a time first, the last load overlapping the one before. */
static inline __attribute__((always_inline)) bool utf8_valid(const uint8_t *p, size_t n)
{
    if (n >= 16) {
#if defined(__SSE2__)
        __m128i acc = _mm_loadu_si128((const __m128i *)(const void *)(p + n - 16));

        for (size_t i = 0; i + 16 < n; i += 16)
            acc = _mm_or_si128(acc, _mm_loadu_si128((const __m128i *)(const void *)(p + i)));
        return _mm_movemask_epi8(acc) == 0 || utf8_valid_slow(p, n);
#else
        uint64_t acc = 0, w;

        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&w, p + i, 8);
            acc |= w;
        }
        memcpy(&w, p + n - 8, 8);
        acc |= w;
        return !(acc & 0x8080808080808080ull) || utf8_valid_slow(p, n);
#endif
    }
    if (n >= 8) {
        uint64_t a8, b8;

        memcpy(&a8, p, 8);
        memcpy(&b8, p + n - 8, 8);
        return !((a8 | b8) & 0x8080808080808080ull) || utf8_valid_slow(p, n);
    }
    if (n >= 4) {
        uint32_t a4, b4;

        memcpy(&a4, p, 4);
        memcpy(&b4, p + n - 4, 4);
        return !((a4 | b4) & 0x80808080u) || utf8_valid_slow(p, n);
    }
    {
        uint8_t o = 0;

        for (size_t i = 0; i < n; i++)
            o |= p[i];
        return o < 0x80 || utf8_valid_slow(p, n);
    }
}

bool sf_otlp_utf8_valid(const uint8_t *p, size_t n)
{
    return utf8_valid(p, n);
}

static int expected_wt(unsigned type)
{
    switch (type) {
    case F_FIXED32: return WT_I32;
    case F_FIXED64: return WT_I64;
    case F_STRING:
    case F_BYTES:
    case F_MSG:     return WT_LEN;
    default:        return WT_VARINT;
    }
}

/* A known field's value against its type and role. */
static sf_status check_packed(cx *c, const fdesc *d, const fld *f);

static inline __attribute__((always_inline)) sf_status check_value(cx *c, const fdesc *d,
                                                                   const fld *f)
{
    if ((int)f->wt != expected_wt(d->type)) {
        if ((d->flags & FL_PACKED) && f->wt == WT_LEN)
            return check_packed(c, d, f);
        return bad(c, "known field with the wrong wire type");
    }
    switch (d->type) {
    case F_UINT32:
        if (f->u > UINT32_MAX)
            return bad(c, "uint32 field out of range");
        break;
    case F_INT32:
        if (f->u > INT32_MAX && f->u < 0xffffffff80000000ull)
            return bad(c, "int32 field out of range");
        break;
    case F_BOOL:
        if (f->u > 1)
            return bad(c, "bool field out of range");
        break;
    case F_SINT32:
        if (f->u > UINT32_MAX)
            return bad(c, "sint32 field out of range");
        break;
    case F_STRING:
        if (!utf8_valid(f->val, (size_t)f->u))
            return bad(c, "string field is not UTF-8");
        break;
    case F_BYTES:
        if (d->role == R_ID16 && f->u != 0 && f->u != 16)
            return bad(c, "trace id is not 16 bytes");
        if (d->role == R_ID8 && f->u != 0 && f->u != 8)
            return bad(c, "span id is not 8 bytes");
        break;
    default:
        break;
    }
    return SF_OK;
}

/* The payload of a packed field: whole elements, each in its type's range. */
static __attribute__((noinline)) sf_status check_packed(cx *c, const fdesc *d, const fld *f)
{
    const uint8_t *p = f->val, *end = f->val + f->u;

    if (d->type == F_FIXED64 || d->type == F_FIXED32) {
        if (f->u % (d->type == F_FIXED64 ? 8 : 4) != 0)
            return bad(c, "packed field is not whole elements");
        return SF_OK;
    }
    while (p < end) {
        fld e = { .wt = WT_VARINT, .num = f->num };
        fdesc ed = *d;
        sf_status st;

        if (rd_varint(&p, end, 10, &e.u) != 0)
            return bad(c, "packed field is not whole elements");
        ed.flags = 0;
        st = check_value(c, &ed, &e);
        if (st != SF_OK)
            return st;
    }
    return SF_OK;
}

/* ---- writing --------------------------------------------------------------- */

static __attribute__((noinline)) sf_status grow(cx *c, size_t n)
{
    size_t cap = c->cap;
    sf_buf *b;

    if (n > SIZE_MAX / 4 - sizeof(sf_buf) - c->len)
        return SF_ENOMEM;
    while (cap < c->len + n)
        cap = cap * 2 + 64;
    b = sf_buf_resize(c->buf, c->len, cap);
    if (b == NULL)
        return SF_ENOMEM;
    c->buf = b;
    c->cap = cap;
    return SF_OK;
}

static inline __attribute__((always_inline)) sf_status reserve(cx *c, size_t n)
{
    return n <= c->cap - c->len ? SF_OK : grow(c, n);
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

/* n bytes from s to d, inline for the short copies of attributes and runs
 * of scalars: overlapping loads and stores, never outside either range. */
static inline __attribute__((always_inline)) void copy(uint8_t *d, const uint8_t *s, size_t n)
{
#if defined(__SSE2__)
    if (n >= 16 && n <= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + n - 16));

        if (n > 32) {
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
            __m128i y = _mm_loadu_si128((const __m128i *)(const void *)(s + n - 32));

            _mm_storeu_si128((__m128i *)(void *)(d + 16), x);
            _mm_storeu_si128((__m128i *)(void *)(d + n - 32), y);
        }
        _mm_storeu_si128((__m128i *)(void *)d, a);
        _mm_storeu_si128((__m128i *)(void *)(d + n - 16), b);
        return;
    }
#endif
    if (n >= 8 && n < 16) {
        uint64_t a, b;

        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
        return;
    }
    if (n > 0)
        memcpy(d, s, n);
}

static inline __attribute__((always_inline)) sf_status put(cx *c, const void *p, size_t n)
{
    if (c->discard)
        return SF_OK;
    if (reserve(c, n) != SF_OK)
        return SF_ENOMEM;
    copy(c->buf->data + c->len, p, n);
    c->len += n;
    return SF_OK;
}

/* A tag and a varint value (either may be 0 bytes of varint: tag only). */
static inline __attribute__((always_inline)) sf_status
put_tag_varint(cx *c, uint32_t num, unsigned wt, bool with_value, uint64_t v)
{
    if (c->discard)
        return SF_OK;
    if (reserve(c, 15) != SF_OK)
        return SF_ENOMEM;
    c->len += varint_put(c->buf->data + c->len, (uint64_t)num << 3 | wt);
    if (with_value)
        c->len += varint_put(c->buf->data + c->len, v);
    return SF_OK;
}

static inline sf_status put_len_field(cx *c, uint32_t num, const uint8_t *p, size_t n)
{
    sf_status st = put_tag_varint(c, num, WT_LEN, true, n);

    return st == SF_OK ? put(c, p, n) : st;
}

/* A sub-message: its tag, then room for the length prefix `estimate` needs. */
static inline sf_status open_len(cx *c, uint32_t num, size_t estimate, size_t *hpos, size_t *hlen)
{
    sf_status st;

    if (c->discard)
        return SF_OK;
    st = put_tag_varint(c, num, WT_LEN, false, 0);
    if (st != SF_OK)
        return st;
    *hlen = varint_size(estimate);
    if (reserve(c, *hlen) != SF_OK)
        return SF_ENOMEM;
    *hpos = c->len;
    c->len += *hlen;
    return SF_OK;
}

/* The real prefix; the content moves only if its size needs another. */
static __attribute__((noinline)) sf_status close_len_move(cx *c, size_t hpos, size_t hlen,
                                                           size_t n, size_t need)
{
    if (need > hlen && reserve(c, need - hlen) != SF_OK)
        return SF_ENOMEM;
    memmove(c->buf->data + hpos + need, c->buf->data + hpos + hlen, n);
    c->len = c->len - hlen + need;
    varint_put(c->buf->data + hpos, n);
    return SF_OK;
}

static inline __attribute__((always_inline)) sf_status close_len(cx *c, size_t hpos, size_t hlen)
{
    size_t n, need;

    if (c->discard)
        return SF_OK;
    n = c->len - hpos - hlen;
    need = varint_size(n);
    if (need != hlen)
        return close_len_move(c, hpos, hlen, n, need);
    varint_put(c->buf->data + hpos, n);
    return SF_OK;
}

/* ---- merging ---------------------------------------------------------------- */

/* Whether [p, end) is a whole sequence of fields: each occurrence of a
 * singular message must be one on its own, as a decoder parses each and
 * merges the results; concatenated, a field cut short at the end of one
 * occurrence would run on into the next and be read as whole. */
static sf_status whole_fields(cx *c, const uint8_t *p, const uint8_t *end)
{
    fld f;

    while (p < end) {
        sf_status st = next_field(c, p, end, &f, 0);

        if (st != SF_OK)
            return st;
        if (f.wt == WT_EGROUP)
            return bad(c, "end of group outside a group");
        p = f.end;
    }
    return SF_OK;
}

/* The payloads of every LEN field `num` in [p, end), concatenated into *out
 * (sf_malloc'd, the caller frees): what protobuf makes of a singular
 * message given several times, each occurrence whole on its own. */
static __attribute__((noinline)) sf_status
gather(cx *c, const uint8_t *p, const uint8_t *end, uint32_t num, size_t total, uint8_t **out)
{
    uint8_t *buf;
    size_t at = 0;
    fld f;

    *out = NULL;
    if (total > c->budget)
        return bad(c, "repeated singular messages would need too large a merge");
    c->budget -= total;
    buf = sf_malloc(total ? total : 1);
    if (buf == NULL)
        return SF_ENOMEM;
    while (p < end) {
        if (next_field(c, p, end, &f, 0) != SF_OK) {    /* read once already */
            sf_free(buf);
            return SF_INVALID;
        }
        p = f.end;
        if (f.num == num && f.wt == WT_LEN) {
            sf_status st = whole_fields(c, f.val, f.val + f.u);

            if (st != SF_OK) {
                sf_free(buf);
                return st;
            }
            memcpy(buf + at, f.val, (size_t)f.u);
            at += (size_t)f.u;
        }
    }
    *out = buf;
    return SF_OK;
}

/* ---- messages ---------------------------------------------------------------- */

typedef struct result {
    int cls;                    /* AnyValue / ArrayValue: CLS_* */
    const uint8_t *str;         /* AnyValue holding a string: its bytes */
    size_t str_len;
} result;

static sf_status msg(cx *c, unsigned kind, const uint8_t *p, const uint8_t *end, unsigned depth,
                     result *res);
/* What kv() asks of the edit for attributes of one context, read once per
 * run of attributes (the writer's byte stores could alias the edit). */
typedef struct kvjudge {
    const sf_otlp_keyset *keys; /* NULL: every key stays */
    bool scalar_only;           /* kept_value_types: scalar */
    bool single_only;           /* kept_value_types: single */
    bool match;                 /* resource matches to check */
    bool dedupe;                /* one_value_per_key */
    size_t max_str;             /* max_string_length, 0: none */
} kvjudge;

static inline kvjudge kv_judge(const cx *c, int ctx)
{
    const sf_otlp_edit *e = ctx >= 0 ? c->edit : NULL;

    return (kvjudge){ .keys = e != NULL ? e->keys[ctx] : NULL,
                      .scalar_only = e != NULL && (e->scalar_values_only ||
                                                   e->single_values_only),
                      .single_only = e != NULL && e->single_values_only,
                      .match = ctx == SF_OTLP_RESOURCE && c->n_match > 0,
                      .dedupe = e != NULL && e->one_value_per_key,
                      .max_str = e != NULL ? e->max_string_length : 0 };
}

/* ---- value rules, one value per key, drift ---------------------------------- */

static bool str_fits(cx *c, const sf_otlp_value_alt *a, const uint8_t *s, size_t n)
{
    switch (a->shape) {
    case SF_OTLP_STR_ANY:
        return true;
    case SF_OTLP_STR_HEX:
        if (n < a->min_len || n > a->max_len)
            return false;
        for (size_t i = 0; i < n; i++) {
            if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                return false;
        }
        return true;
    case SF_OTLP_STR_SET:
        for (size_t i = 0; i < a->n_set; i++) {
            const char *e = a->set[i];

            /* the first byte rejects most before strlen; s may hold a NUL */
            if (n > 0 && e[0] == (char)s[0] && strlen(e) == n && memcmp(e, s, n) == 0)
                return true;
            if (n == 0 && e[0] == '\0')
                return true;
        }
        return false;
    case SF_OTLP_STR_REGEX:
        return c->edit->match_fn != NULL &&
               c->edit->match_fn(c->edit->ctx, &c->state, a->regex, s, n);
    }
    return false;
}

/* One scalar AnyValue member (its tag, and for a string its bytes) against
 * rule r (NULL: only the length bound). */
static bool scalar_fits(cx *c, const sf_otlp_value_rule *r, uint8_t tag, const uint8_t *s,
                        size_t n)
{
    const unsigned type = tag == (AV_STRING << 3 | WT_LEN) ? SF_OTLP_VAL_STRING
                          : tag == (AV_INT << 3 | WT_VARINT) ? SF_OTLP_VAL_INT
                          : tag == (AV_DOUBLE << 3 | WT_I64) ? SF_OTLP_VAL_DOUBLE
                          : tag == (AV_BOOL << 3 | WT_VARINT) ? SF_OTLP_VAL_BOOL : 0;

    if (type == SF_OTLP_VAL_STRING && c->edit->max_string_length != 0 &&
        n > c->edit->max_string_length)
        return false;
    if (r == NULL)
        return true;
    if (r->n_alts == 0)
        return r->pseudonym && (type == SF_OTLP_VAL_STRING || type == SF_OTLP_VAL_INT);
    for (size_t i = 0; i < r->n_alts; i++) {
        const sf_otlp_value_alt *a = &r->alts[i];

        if ((a->types & type) && (type != SF_OTLP_VAL_STRING || str_fits(c, a, s, n)))
            return true;
    }
    return false;
}

/* A canonical AnyValue [p, end) against rule r: every element of an array
 * (a nested array fails a rule; single_values_only: any array fails); no
 * value fails a rule. */
static bool value_fits(cx *c, const sf_otlp_value_rule *r, const uint8_t *p, const uint8_t *end)
{
    const uint8_t *q = p + 1;
    uint64_t n;

    if (p >= end)
        return r == NULL;
    if (p[0] == (AV_ARRAY << 3 | WT_LEN)) {
        const uint8_t *ae;

        if ((r != NULL && r->pseudonym) || c->edit->single_values_only ||
            rd_varint(&q, end, 5, &n) != 0)
            return false;
        for (ae = q + n; q < ae;) {
            const uint8_t *e = q + 1, *v;
            uint64_t m, sl = 0;

            if (rd_varint(&e, ae, 5, &m) != 0)
                return false;
            v = e + 1;
            if (m > 0 && v[-1] == (AV_STRING << 3 | WT_LEN) && rd_varint(&v, e + m, 5, &sl) != 0)
                return false;
            if (m == 0 ? r != NULL
                : e[0] == (AV_ARRAY << 3 | WT_LEN) ? r != NULL
                : !scalar_fits(c, r, e[0], v, (size_t)sl))
                return false;
            q = e + m;
        }
        return true;
    }
    if (p[0] == (AV_STRING << 3 | WT_LEN)) {
        if (rd_varint(&q, end, 5, &n) != 0)
            return false;
        return scalar_fits(c, r, p[0], q, (size_t)n);
    }
    if (p[0] == (AV_BYTES << 3 | WT_LEN) || p[0] == (AV_KVLIST << 3 | WT_LEN))
        return r == NULL;
    return scalar_fits(c, r, p[0], NULL, 0);
}

/* The pseudonym of the canonical string or int AnyValue [p, end), as
 * canonical AnyValue bytes into out[0, *n). false: not a string or int, or
 * the edit refused it. */
static bool pseudonym_value(cx *c, const uint8_t *p, const uint8_t *end, uint8_t out[80],
                            size_t *n)
{
    const sf_otlp_edit *e = c->edit;
    const uint8_t *q = p + 1;
    uint64_t v;

    if (p >= end || rd_varint(&q, end, 10, &v) != 0)
        return false;
    if (p[0] == (AV_STRING << 3 | WT_LEN) && e->pseudonym_fn != NULL) {
        size_t len = 0;

        if (!e->pseudonym_fn(e->ctx, &c->state, q, (size_t)v, out + 2, &len) || len > 64)
            return false;
        out[0] = AV_STRING << 3 | WT_LEN;
        out[1] = (uint8_t)len;
        *n = 2 + len;
        return true;
    }
    if (p[0] == (AV_INT << 3 | WT_VARINT) && e->pseudonym_int_fn != NULL) {
        int64_t iv;

        if (!e->pseudonym_int_fn(e->ctx, &c->state, (int64_t)v, &iv))
            return false;
        out[0] = AV_INT << 3 | WT_VARINT;
        *n = 1 + varint_put(out + 1, (uint64_t)iv);
        return true;
    }
    return false;
}

/* KeyValue field `num`: key[0, klen) and the AnyValue bytes val[0, vlen). */
static sf_status put_kv_bytes(cx *c, uint32_t num, const uint8_t *key, size_t klen,
                              const uint8_t *val, size_t vlen)
{
    size_t inner = (klen > 0 ? 1 + varint_size(klen) + klen : 0) + 1 + varint_size(vlen) + vlen;
    sf_status st = put_tag_varint(c, num, WT_LEN, true, inner);

    if (st == SF_OK && klen > 0)
        st = put_len_field(c, KV_KEY, key, klen);
    if (st == SF_OK)
        st = put_len_field(c, KV_VALUE, val, vlen);
    return st;
}

/* An attribute the edit removed: counted by context and key (the first
 * SF_OTLP_DRIFT_MAX pairs of the call), the key by its keyset entry e
 * (NULL: not listed, "other"). Spans of one call carry their attributes in
 * the same order, so the entry after the last one counted is tried first:
 * most removals cost one comparison, not a scan; keys compare as the
 * keyset's pointers, never as bytes. */
static __attribute__((noinline)) void drift_note(cx *c, int ctx, const ks_slot *e, bool failed)
{
    sf_otlp_stats *st = c->st;
    const char *key = e != NULL ? e->key : NULL;
    size_t next;

    if (ctx < 0 || c->discard)
        return;
    next = c->drift_next < st->n_drift ? c->drift_next : 0;
    for (size_t j = 0; j < st->n_drift; j++) {
        const size_t i = next + j < st->n_drift ? next + j : next + j - st->n_drift;
        sf_otlp_drift *d = &st->drift[i];

        if (d->key == key && d->ctx == ctx && d->failed_rule == failed) {
            d->count++;
            c->drift_next = i + 1;
            return;
        }
    }
    if (st->n_drift < SF_OTLP_DRIFT_MAX) {
        st->drift[st->n_drift++] = (sf_otlp_drift){ .ctx = (uint8_t)ctx, .failed_rule = failed,
                                                    .key = key, .count = 1 };
        c->drift_next = st->n_drift;
        if (key == NULL && ctx < SF_OTLP_CTX_COUNT)
            c->drift_other[ctx][failed] = (uint8_t)st->n_drift;
    }
}

/* drift_note, with the common case inline: a key the config does not name
 * (counted as `other`) whose entry exists. At 512-span calls with the
 * sample allowlist (7 of 12 span keys removed) the call alone was 6 % of
 * the collector's instructions (callgrind). */
static inline void drift_count(cx *c, int ctx, const ks_slot *e, bool failed)
{
    if (e == NULL && ctx >= 0 && ctx < SF_OTLP_CTX_COUNT && !c->discard) {
        const unsigned i = c->drift_other[ctx][failed];

        if (i > 0) {
            c->st->drift[i - 1].count++;
            return;
        }
    }
    drift_note(c, ctx, e, failed);
}

/* one_value_per_key: forget the keys of the previous attribute list. */
static inline void seen_reset(cx *c, const mdesc *m)
{
    if (m->ctx >= 0 && c->edit != NULL && c->edit->one_value_per_key) {
        memset(c->seen, 0, sizeof(c->seen));
        c->n_seen = 0;
    }
}

/* seen_first for a key the keyset does not list, or past SEEN_SLOTS: by
 * its bytes. */
static __attribute__((noinline)) int seen_first_bytes(cx *c, const uint8_t *k, size_t n)
{
    for (size_t i = 0; i < c->n_seen; i++) {
        if (c->seen_len[i] == n && memcmp(c->seen_key[i], k, n) == 0)
            return 0;
    }
    if (c->n_seen == c->cap_seen) {
        size_t cap = c->cap_seen ? c->cap_seen * 2 : 16;
        const uint8_t **nk = sf_realloc(c->seen_key, cap * sizeof(*nk));
        size_t *nl;

        if (nk == NULL)
            return -1;
        c->seen_key = nk;
        nl = sf_realloc(c->seen_len, cap * sizeof(*nl));
        if (nl == NULL)
            return -1;
        c->seen_len = nl;
        c->cap_seen = cap;
    }
    c->seen_key[c->n_seen] = k;
    c->seen_len[c->n_seen++] = n;
    return 1;
}

/* Whether this is the first entry of key k[0, n) (its slot e in ks, or
 * NULL) in the current list; it is remembered. -1: no memory. A listed
 * key (most of them) is a bit, tested inline. */
static inline int seen_first(cx *c, const sf_otlp_keyset *ks, const ks_slot *e, const uint8_t *k,
                             size_t n)
{
    if (e != NULL && (size_t)(e - ks->slots) < SEEN_SLOTS) {
        const size_t i = (size_t)(e - ks->slots);
        const uint64_t bit = 1ull << (i % 64);

        if (c->seen[i / 64] & bit)
            return 0;
        c->seen[i / 64] |= bit;
        return 1;
    }
    return seen_first_bytes(c, k, n);
}

static inline __attribute__((always_inline)) sf_status kv(cx *c, int ctx, kvjudge j, uint32_t num,
                                                          const uint8_t *field,
                                                          const uint8_t *p, const uint8_t *end,
                                                          unsigned depth, bool *removed);

/* Write sub-message field `num` of kind `kind` holding [p, end). */
static inline __attribute__((always_inline)) sf_status
child(cx *c, uint32_t num, unsigned kind, const uint8_t *p, const uint8_t *end, unsigned depth,
      result *res)
{
    size_t hpos = 0, hlen = 0;
    sf_status st = open_len(c, num, (size_t)(end - p), &hpos, &hlen);

    if (st == SF_OK)
        st = msg(c, kind, p, end, depth, res);
    if (st == SF_OK)
        st = close_len(c, hpos, hlen);
    return st;
}

/* A singular sub-message given `count` times in [from, end) with `total`
 * payload bytes (the last at [val, vend)): written once, merged. */
static sf_status child_merged(cx *c, uint32_t num, unsigned kind, const uint8_t *from,
                              const uint8_t *end, uint32_t count, size_t total,
                              const uint8_t *val, const uint8_t *vend, unsigned depth,
                              result *res)
{
    uint8_t *merged;
    sf_status st;

    if (count == 1)
        return child(c, num, kind, val, vend, depth, res);
    st = gather(c, from, end, num, total, &merged);
    if (st != SF_OK)
        return st;
    st = child(c, num, kind, merged, merged + total, depth, res);
    sf_free(merged);
    return st;
}

/* The most field numbers (plus one) of a message: Span's 16. */
#define SLOTS_MAX 17
_Static_assert(SF_OTLP_TABLE_MAX <= SLOTS_MAX, "a message table longer than SLOTS_MAX");

/* Per field number, what the first step saw. */
typedef struct slot {
    uint32_t count;
    const uint8_t *first;       /* tag of the first occurrence */
    const uint8_t *last_end;    /* one past the last occurrence */
    const uint8_t *val;         /* the last occurrence's value */
    uint64_t u;                 /* ... its varint / fixed value, or LEN length */
    size_t total;               /* LEN: payload bytes of every occurrence */
    uint32_t over;              /* a capped field: occurrences past the cap (generic) */
} slot;

/* A oneof: the member the input set last, and its occurrences since the
 * member last changed (what protobuf merges when it is a message). */
typedef struct oneof_run {
    uint32_t num;               /* 0: none */
    uint32_t count;
    const uint8_t *first;       /* tag of the first occurrence of the run */
    size_t total;               /* LEN: payload bytes of the run */
} oneof_run;

static inline void oneof_note(oneof_run *o, const fld *f)
{
    if (f->num != o->num)
        *o = (oneof_run){ .num = f->num, .first = f->start };
    o->count++;
    if (f->wt == WT_LEN)
        o->total += (size_t)f->u;
}

/* Whether names of context ctx go through the edit's rename. A name the
 * input leaves out is then renamed from "", the name a decoder sees, so an
 * edit's result does not depend on how the input spelled a default. */
static bool renames(const cx *c, const mdesc *m)
{
    return m->name != 0 && !c->discard && c->verdict[m->f[m->name].field] == FV_REWRITE;
}

/* The new value of governed string field f (a span or event name through
 * rename_fn, the others through field_fn). */
static sf_status renamed(cx *c, unsigned f, const uint8_t **p, size_t *n)
{
    const sf_otlp_edit *e = c->edit;
    sf_status st;

    if (c->discard)
        return SF_OK;
    c->name.len = 0;
    if (f == SF_OTLP_FIELD_SPAN_NAME || f == SF_OTLP_FIELD_EVENT_NAME)
        st = e->rename_fn(e->ctx, &c->state,
                          f == SF_OTLP_FIELD_SPAN_NAME ? SF_OTLP_SPAN : SF_OTLP_SPANEVENT, *p, *n,
                          &c->name);
    else
        st = e->field_fn(e->ctx, &c->state, (sf_otlp_field)f, *p, *n, &c->name);
    if (st != SF_OK)
        return st == SF_ENOMEM ? SF_ENOMEM : SF_FILTER;
    if (!utf8_valid(c->name.data, c->name.len))
        return SF_FILTER;
    if (c->name.len != *n || (*n > 0 && memcmp(c->name.data, *p, *n) != 0))
        c->st->renamed++;
    *p = c->name.data;
    *n = c->name.len;
    return SF_OK;
}

/* A trace or span id id[0, n) (16 or 8 bytes) as edit->id_fn makes it: the
 * same id the same pseudonym wherever it comes (a span's id, its children's
 * parent_span_id, links to it, log records), so the trace's structure stays;
 * an all-zero id (invalid, W3C) leaves as it is. Made ids are memoised for
 * the call by a hash of the id, two slots a hash: a request's spans share
 * their trace id, and a parent's span id comes back as its children's
 * parent_span_id. */
#define ID_MEMO 256             /* slots at most (a power of two); fewer for a short request */
#define IDS_AHEAD 48            /* ids asked of ids_fn at once, at most */
#define IDS_AHEAD_SPANS 24      /* spans looked at ahead for them */
struct id_memo {
    uint64_t in[2];             /* the id, zero-padded; len 0: empty */
    uint8_t out[16];
    uint8_t len;
    uint32_t age;               /* c->memo_age when made: the older of two slots goes */
};

static inline size_t memo_slot(const uint64_t w[2], size_t n)
{
    /* both words multiplied: ids of repeated bytes (w[0] == w[1]) spread */
    return (size_t)((w[0] * 0x9e3779b97f4a7c15ull ^ (w[1] + n) * 0xc2b2ae3d27d4eb4full) >> 56) &
           (ID_MEMO - 1);       /* then & c->memo_mask */
}

static inline void id_words(const uint8_t *id, size_t n, uint64_t w[2])
{
    w[1] = 0;
    memcpy(&w[0], id, 8);
    if (n == 16)
        memcpy(&w[1], id + 8, 8);
}

/* The memo's entry for the id w (n bytes) whose memo_slot is `hash`, or NULL. */
static inline struct id_memo *memo_find_at(const cx *c, const uint64_t w[2], size_t n,
                                           size_t hash)
{
    const size_t slot = hash & c->memo_mask;

    for (size_t i = 0; i < 2; i++) {
        struct id_memo *e = &c->memo[slot ^ i];

        if (e->len == n && e->in[0] == w[0] && e->in[1] == w[1])
            return e;
    }
    return NULL;
}

static inline struct id_memo *memo_find(const cx *c, const uint64_t w[2], size_t n)
{
    return memo_find_at(c, w, n, memo_slot(w, n));
}

static void memo_put(cx *c, const uint64_t w[2], size_t n, const uint8_t *out)
{
    const size_t slot = memo_slot(w, n) & c->memo_mask;
    struct id_memo *e = &c->memo[slot];

    if (e->len != 0 && (c->memo[slot ^ 1].len == 0 || c->memo[slot ^ 1].age < e->age))
        e = &c->memo[slot ^ 1];
    e->len = (uint8_t)n;
    e->age = c->memo_age;
    e->in[0] = w[0];
    e->in[1] = w[1];
    memcpy(e->out, out, n);
}

/* The next span of the traces request ahead (ids_ahead), into [*sp, *se);
 * false when none is left or what is left does not read (the pass itself
 * says why). */
static bool ahead_span(cx *c, const uint8_t **sp, const uint8_t **se)
{
    /* per level, the tag of the field holding the next level:
     * resource_spans (1), scope_spans (2), spans (2) */
    static const uint8_t tags[3] = { 1 << 3 | WT_LEN, 2 << 3 | WT_LEN, 2 << 3 | WT_LEN };

    while (c->ahead_level >= 0) {
        const int l = c->ahead_level;
        const uint8_t *p = c->ahead_pos[l], *end = c->ahead_end[l];
        uint64_t tag, v;

        if (p >= end) {
            c->ahead_level--;
            continue;
        }
        if (rd_varint(&p, end, 5, &tag) != 0)
            break;
        switch (tag & 7) {
        case WT_VARINT:
            if (rd_varint(&p, end, 10, &v) != 0)
                goto out_none;
            break;
        case WT_I64:
        case WT_I32:
            v = (tag & 7) == WT_I64 ? 8 : 4;
            if (v > (uint64_t)(end - p))
                goto out_none;
            p += v;
            break;
        case WT_LEN:
            if (rd_varint(&p, end, 5, &v) != 0 || v > (uint64_t)(end - p))
                goto out_none;
            if (tag == tags[l] && l == 2) {
                c->ahead_pos[l] = p + v;
                __builtin_prefetch(p + v);      /* the next span's first bytes */
                *sp = p;
                *se = p + v;
                return true;
            }
            if (tag == tags[l]) {
                c->ahead_pos[l] = p + v;
                c->ahead_level = l + 1;
                c->ahead_pos[l + 1] = p;
                c->ahead_end[l + 1] = p + v;
                continue;
            }
            p += v;
            break;
        default:
            goto out_none;
        }
        c->ahead_pos[l] = p;
    }
out_none:
    c->ahead_level = -1;
    return false;
}

/* id[0, n) is not in the memo: its pseudonym and those of the ids of the
 * next spans of a traces request (their leading trace_id, span_id and
 * parent_span_id, as canonical encoders write them) are made by one
 * ids_fn call and memoised. Spans that end before `id` are
 * passed over; an id ahead that never comes (a span dropped) cost work,
 * not bytes. */
static sf_status ids_ahead(cx *c, const uint8_t *id, size_t n)
{
    const uint8_t *in[IDS_AHEAD];
    uint8_t lens[IDS_AHEAD], out[IDS_AHEAD][16];
    uint64_t words[IDS_AHEAD][2];
    uint64_t hashed[ID_MEMO / 64] = { 0 };     /* the memo slots of those listed */
    size_t count = 0, spans = 0;
    const bool inside = (uintptr_t)id >= (uintptr_t)c->in && (uintptr_t)id < (uintptr_t)c->in_end;
    const uint8_t *sp, *se;

    c->memo_age++;
    in[0] = id;
    lens[0] = (uint8_t)n;
    id_words(id, n, words[0]);
    hashed[memo_slot(words[0], n) >> 6] |= 1ull << (memo_slot(words[0], n) & 63);
    count = 1;
    /* a trace id followed by its span id (a link's, a log record's) */
    if (n == 16 && inside && c->in_end - id >= 16 + 2 + 8 && (id[16] == (2 << 3 | WT_LEN) ||
        id[16] == (10 << 3 | WT_LEN)) && id[17] == 8) {
        id_words(id + 18, 8, words[1]);
        if ((words[1][0] | words[1][1]) != 0 && memo_find(c, words[1], 8) == NULL) {
            in[1] = id + 18;
            lens[1] = 8;
            hashed[memo_slot(words[1], 8) >> 6] |= 1ull << (memo_slot(words[1], 8) & 63);
            count = 2;
        }
    }
    /* the spans looked at last are still ahead (a link's id missed): not
     * further, or their ids would leave the memo before the pass came */
    if (inside && (uintptr_t)id < (uintptr_t)c->ahead_mark)
        spans = IDS_AHEAD_SPANS;
    while (spans < IDS_AHEAD_SPANS && count <= IDS_AHEAD - 3 && ahead_span(c, &sp, &se)) {
        if (inside && (uintptr_t)se <= (uintptr_t)id)
            continue;           /* behind the pass */
        if (++spans == IDS_AHEAD_SPANS / 2)
            c->ahead_mark = sp;
        /* fields 1 to 4 in order, each once: three ids a span at most */
        for (unsigned last = 0; se - sp >= 10 && (sp[0] >> 3) > last && (sp[0] & 7) == WT_LEN;) {
            const unsigned num = sp[0] >> 3;
            const size_t len = num == 1 ? 16 : 8;
            uint64_t w[2], v;
            size_t slot;
            bool listed = false;

            last = num;
            if (num == 3) {                     /* trace_state */
                sp++;
                if (rd_varint(&sp, se, 5, &v) != 0 || v > (uint64_t)(se - sp))
                    break;
                sp += v;
                continue;
            }
            if (num > 4 || sp[1] != len || (size_t)(se - sp) < 2 + len)
                break;
            id_words(sp + 2, len, w);
            slot = memo_slot(w, len);
            if (hashed[slot >> 6] >> (slot & 63) & 1) {
                for (size_t i = 0; i < count && !listed; i++)
                    listed = words[i][0] == w[0] && words[i][1] == w[1] && lens[i] == len;
            }
            if (!listed && (w[0] | w[1]) != 0 && memo_find_at(c, w, len, slot) == NULL) {
                hashed[slot >> 6] |= 1ull << (slot & 63);
                in[count] = sp + 2;
                lens[count] = (uint8_t)len;
                words[count][0] = w[0];
                words[count][1] = w[1];
                count++;
            }
            sp += 2 + len;
        }
    }
    if (!c->edit->ids_fn(c->edit->ctx, &c->state, in, lens, count, out))
        return SF_FILTER;
    for (size_t i = 0; i < count; i++)
        memo_put(c, words[i], lens[i], out[i]);
    return SF_OK;
}

static __attribute__((noinline)) sf_status put_id(cx *c, uint32_t tag, const uint8_t *id,
                                                  size_t n)
{
    uint8_t out[16], *o;
    uint64_t w[2];

    id_words(id, n, w);
    if (n == 16 && w[0] == c->last_trace[0] && w[1] == c->last_trace[1] && c->has_last_trace) {
        /* the trace id of the span before (a request's spans follow each other) */
        c->st->pseudonymized_ids++;
        id = c->last_trace_out;
    } else if ((w[0] | w[1]) != 0) {
        const struct id_memo *e = NULL;

        if (c->memo == NULL) {
            /* a slot per 64 bytes of request (a span of SGLang's is ~1 KB) */
            size_t slots = 16;

            while (slots < ID_MEMO && slots * 64 < (size_t)(c->in_end - c->in))
                slots *= 2;
            c->memo = sf_calloc(slots, sizeof(*c->memo));       /* NULL: no memo */
            c->memo_mask = slots - 1;
        }
        if (c->memo != NULL) {
            e = memo_find(c, w, n);
            if (e == NULL && c->edit->ids_fn != NULL) {
                sf_status st = ids_ahead(c, id, n);

                if (st != SF_OK)
                    return st;
                e = memo_find(c, w, n);
            }
        }
        if (e != NULL) {
            memcpy(out, e->out, 16);
        } else {
            if (!c->edit->id_fn(c->edit->ctx, &c->state, id, n, out))
                return SF_FILTER;
            if (c->memo != NULL)
                memo_put(c, w, n, out);
        }
        c->st->pseudonymized_ids++;
        if (n == 16) {
            c->has_last_trace = true;
            c->last_trace[0] = w[0];
            c->last_trace[1] = w[1];
            memcpy(c->last_trace_out, out, 16);
        }
        id = out;
    }
    if (reserve(c, n + 2) != SF_OK)
        return SF_ENOMEM;
    o = c->buf->data + c->len;
    o += varint_put(o, tag);
    *o++ = (uint8_t)n;
    memcpy(o, id, n);
    c->len = (size_t)(o + n - c->buf->data);
    return SF_OK;
}

/* A scalar field of message m: its canonical bytes (nothing for a default). */
static sf_status put_scalar(cx *c, const mdesc *m, uint32_t num, const uint8_t *val, uint64_t u)
{
    const fdesc *d = &m->f[num];
    const uint32_t tag = num << 3 | (uint32_t)expected_wt(d->type);
    uint8_t *o;
    sf_status st;

    if (d->type == F_STRING || d->type == F_BYTES) {
        size_t n = (size_t)u;

        if (d->field != SF_OTLP_FIELD_NONE && c->verdict[d->field] != FV_AS_IS) {
            if (c->verdict[d->field] == FV_CLEAR)
                return SF_OK;
            if ((st = renamed(c, d->field, &val, &n)) != SF_OK)
                return st;
        }
        if (n == 0 || c->discard)
            return SF_OK;
        if (__builtin_expect(c->ids, 0) && (d->role == R_ID16 || d->role == R_ID8))
            return put_id(c, tag, val, n);
        if (reserve(c, n + 16) != SF_OK)
            return SF_ENOMEM;
        o = c->buf->data + c->len;
        o += varint_put(o, tag);
        o += varint_put(o, n);
        memcpy(o, val, n);
        c->len = (size_t)(o + n - c->buf->data);
        return SF_OK;
    }
    if ((u == 0 && !(d->flags & FL_PRESENCE)) || c->discard)
        return SF_OK;
    if (reserve(c, 16) != SF_OK)
        return SF_ENOMEM;
    o = c->buf->data + c->len;
    o += varint_put(o, tag);
    if (d->type == F_FIXED32) {
        uint32_t v32 = (uint32_t)u;

        memcpy(o, &v32, 4);
        o += 4;
    } else if (d->type == F_FIXED64) {
        memcpy(o, &u, 8);
        o += 8;
    } else {
        o += varint_put(o, u);
    }
    c->len = (size_t)(o - c->buf->data);
    return SF_OK;
}

/* A dropped_attributes_count field: the input's value (0 when absent) plus
 * the attributes removed, saturating; nothing when that is 0. */
static inline __attribute__((always_inline)) sf_status put_dropped(cx *c, uint32_t num, uint64_t given, uint64_t removed)
{
    uint64_t v = given + removed;

    if (v > UINT32_MAX)
        v = UINT32_MAX;
    return v != 0 ? put_tag_varint(c, num, WT_VARINT, true, v) : SF_OK;
}

/* The edit's keep_metric_fn on the Metric in [p, end), asked with the name
 * a decoder sees (the last name field; "" when there is none). A metric
 * that cannot be read, or whose name is not UTF-8, is kept here: the walk
 * then refuses the request. Every Metric comes through put_repeated
 * (ScopeMetrics.metrics is repeated, so stream() never copies one whole:
 * quick_init). */
static int metric_verdict(cx *c, const uint8_t *p, const uint8_t *end)
{
    const uint8_t *name = (const uint8_t *)"";
    size_t len = 0;
    const char *error = c->st->error;
    fld f;

    while (p < end) {
        if (next_field(c, p, end, &f, 0) != SF_OK) {
            c->st->error = error;
            return SF_OTLP_METRIC_KEEP;
        }
        p = f.end;
        if (f.num == 1 && f.wt == WT_LEN) {
            name = f.val;
            len = (size_t)f.u;
        }
    }
    if (!utf8_valid(name, len))
        return SF_OTLP_METRIC_KEEP;
    return c->edit->keep_metric_fn(c->edit->ctx, &c->state, name, len);
}

/* check_histograms: the edit's bounds set for the Metric in [p, end) (the
 * name a decoder sees: the last), or NULL. */
static const sf_otlp_bounds *metric_bounds(cx *c, const uint8_t *p, const uint8_t *end)
{
    const sf_otlp_edit *e = c->edit;
    const uint8_t *name = (const uint8_t *)"";
    const char *error = c->st->error;
    size_t len = 0;
    fld f;

    while (p < end) {
        if (next_field(c, p, end, &f, 0) != SF_OK) {
            c->st->error = error;       /* the walk says what is wrong */
            return NULL;
        }
        p = f.end;
        if (f.num == SF_OTLP_NUM_METRIC_NAME && f.wt == WT_LEN) {
            name = f.val;
            len = (size_t)f.u;
        }
    }
    for (size_t i = 0; i < e->n_bounds; i++) {
        if (strlen(e->bounds[i].metric) == len && memcmp(e->bounds[i].metric, name, len) == 0)
            return &e->bounds[i];
    }
    return NULL;
}

/* check_histograms: whether the HistogramDataPoint in [p, end) holds only
 * numbers that are numbers: finite, strictly increasing explicit_bounds
 * (equal to want's when there is a set), one bucket count more than
 * bounds (or neither), counts summing to `count`. Repeated fields
 * accumulate over their occurrences, packed or not; the last count wins
 * (what a decoder sees). Unreadable bytes fail (the walk refuses them). */
static bool hist_fits(cx *c, const uint8_t *p, const uint8_t *end, const sf_otlp_bounds *want)
{
    const char *error = c->st->error;
    uint64_t count = 0, total = 0;
    size_t nb = 0, nc = 0;
    bool ok = true;
    double prev = 0;
    fld f;

    while (p < end && ok) {
        if (next_field(c, p, end, &f, 0) != SF_OK) {
            c->st->error = error;
            return false;
        }
        p = f.end;
        if (f.num == SF_OTLP_NUM_HISTOGRAM_POINT_COUNT && f.wt == WT_I64) {
            count = f.u;
        } else if ((f.num == SF_OTLP_NUM_HISTOGRAM_POINT_BUCKET_COUNTS ||
                    f.num == SF_OTLP_NUM_HISTOGRAM_POINT_EXPLICIT_BOUNDS) &&
                   (f.wt == WT_LEN || f.wt == WT_I64)) {
            const uint8_t *q = f.val;   /* LEN: packed elements; I64: one */
            const size_t n = f.wt == WT_LEN ? (size_t)f.u : 8;

            if (n % 8 != 0)
                return false;
            for (size_t i = 0; i < n && ok; i += 8) {
                uint64_t u;
                double v;

                memcpy(&u, q + i, 8);
                if (f.num == SF_OTLP_NUM_HISTOGRAM_POINT_BUCKET_COUNTS) {
                    ok = total + u >= total;
                    total += u;
                    nc++;
                    continue;
                }
                memcpy(&v, &u, 8);
                ok = isfinite(v) && (nb == 0 || v > prev) &&
                     (want == NULL || (nb < want->n && v == want->v[nb]));
                prev = v;
                nb++;
            }
        }
    }
    if (!ok)
        return false;
    if (nb == 0 && nc == 0)
        return true;            /* a point with no buckets: count and sum only */
    return nc == nb + 1 && total == count && (want == NULL || nb == want->n);
}

/* One occurrence `f` of repeated field d of message m: a string, a KeyValue
 * (an attribute of m's context when d holds its attributes; *removed counts
 * those the edit took out) or a sub-message (spans counted; *cls the worst
 * class of an array's elements). */
static inline __attribute__((always_inline)) sf_status
put_repeated(cx *c, const mdesc *m, const fdesc *d, const fld *f, unsigned depth,
             uint64_t *removed, int *cls)
{
    sf_status st;

    if (d->type == F_STRING)
        return put_len_field(c, f->num, f->val, (size_t)f->u);
    if (d->child == SF_OTLP_MSG_KEY_VALUE) {
        bool gone = false;

        const int actx = d->role == R_ATTRS ? m->ctx : -1;

        st = kv(c, actx, kv_judge(c, actx), f->num, f->start, f->val, f->val + f->u, depth,
                &gone);
        *removed += gone;
        return st;
    }
    {
        result r = { 0 };
        /* a cleared field (entity_refs, exemplars) is still read and checked */
        bool gone = d->field != SF_OTLP_FIELD_NONE && c->verdict[d->field] == FV_CLEAR;
        const int verdict = d->child == SF_OTLP_MSG_METRIC && !gone && !c->discard &&
                            c->edit != NULL && c->edit->keep_metric_fn != NULL
                            ? metric_verdict(c, f->val, f->val + f->u) : SF_OTLP_METRIC_KEEP;
        const bool filtered = verdict != SF_OTLP_METRIC_KEEP;
        const size_t items = c->st->spans;
        const sf_otlp_bounds *outer = c->bounds;
        bool bad_point = false;

        if (verdict < 0)
            return SF_ENOMEM;
        if (__builtin_expect(c->edit != NULL && c->edit->check_histograms, 0)) {
            if (d->child == SF_OTLP_MSG_METRIC && c->edit->n_bounds > 0)
                c->bounds = metric_bounds(c, f->val, f->val + f->u);
            else if (d->child == SF_OTLP_MSG_HISTOGRAM_POINT && !gone && !c->discard &&
                     !hist_fits(c, f->val, f->val + f->u, c->bounds)) {
                bad_point = true;       /* read and checked below, not written */
                c->st->dropped_points++;
            }
        }
        gone |= bad_point;

        if (d->role == R_SPANS)
            c->st->spans++;
        if (gone && d->field == SF_OTLP_FIELD_EXEMPLARS && !c->discard)
            c->st->dropped_exemplars++;
        gone |= filtered;
        c->discard += gone;
        st = child(c, f->num, d->child, f->val, f->val + f->u, depth, &r);
        c->discard -= gone;
        if (d->child == SF_OTLP_MSG_METRIC)
            c->bounds = outer;
        if (bad_point)
            c->st->spans = items;       /* not an item that leaves: dropped_points */
        if (filtered) {
            /* its points leave not: counted apart */
            c->st->filtered_items += c->st->spans - items;
            if (verdict == SF_OTLP_METRIC_FAILED)
                c->st->filter_failed_items += c->st->spans - items;
            c->st->spans = items;
        }
        if (r.cls > *cls)
            *cls = r.cls;
        return st;
    }
}

/* The elements of one occurrence f of packed field d (a packed payload, or
 * one element), written canonical into the open packed field. */
static sf_status put_elements(cx *c, const fdesc *d, const fld *f)
{
    if (c->discard)
        return SF_OK;
    if (d->type == F_FIXED64 || d->type == F_FIXED32)
        return put(c, f->val, f->wt == WT_LEN ? (size_t)f->u : d->type == F_FIXED64 ? 8 : 4);
    if (f->wt != WT_LEN) {
        if (reserve(c, 10) != SF_OK)
            return SF_ENOMEM;
        c->len += varint_put(c->buf->data + c->len, f->u);
        return SF_OK;
    }
    for (const uint8_t *p = f->val, *end = f->val + f->u; p < end;) {
        uint64_t v;

        if (rd_varint(&p, end, 10, &v) != 0)
            return bad(c, "packed field is not whole elements");    /* checked before */
        if (reserve(c, 10) != SF_OK)
            return SF_ENOMEM;
        c->len += varint_put(c->buf->data + c->len, v);
    }
    return SF_OK;
}

/* Packed field `num` (d) of every occurrence in [p, end), in order, as one
 * packed field; nothing when it has no element. */
static sf_status packed(cx *c, uint32_t num, const fdesc *d, const uint8_t *p, const uint8_t *end)
{
    size_t hpos = 0, hlen = 0, mark = c->len;
    sf_status st = open_len(c, num, (size_t)(end - p), &hpos, &hlen);
    fld f;

    while (st == SF_OK && p < end) {
        if ((st = next_field(c, p, end, &f, 0)) != SF_OK)
            return st;
        p = f.end;
        if (f.num == num)
            st = put_elements(c, d, &f);
    }
    if (st != SF_OK || c->discard)
        return st;
    if (c->len == hpos + hlen) {
        c->len = mark;
        return SF_OK;
    }
    return close_len(c, hpos, hlen);
}

/* A governed log body, written at [mark, c->len) (tag, length, canonical
 * AnyValue): it stays only when it passes the edit's body rule, as a
 * pseudonym when the rule says so; else it is taken back and counted. */
static __attribute__((noinline)) sf_status body_judge(cx *c, uint32_t num, size_t mark)
{
    const sf_otlp_value_rule *rule = c->edit->body_rule;
    const uint8_t *a = c->buf->data + mark + 1, *aend = c->buf->data + c->len;
    uint8_t pv[80];
    size_t pn = 0;
    uint64_t an;

    if (rd_varint(&a, aend, 5, &an) != 0)
        return bad(c, "internal: unreadable body");
    if (rule == NULL || !value_fits(c, rule, a, aend) ||
        (rule->pseudonym && !pseudonym_value(c, a, aend, pv, &pn))) {
        c->len = mark;
        c->st->dropped_bodies++;
        return SF_OK;
    }
    if (!rule->pseudonym)
        return SF_OK;
    c->len = mark;
    c->st->pseudonyms++;
    return put_len_field(c, num, pv, pn);
}

/* Singular sub-message field `num` (d), given `count` times (see
 * child_merged); a governed log body then goes through body_judge. */
static inline __attribute__((always_inline)) sf_status
single(cx *c, const fdesc *d, uint32_t num, const uint8_t *from, const uint8_t *end,
       uint32_t count, size_t total, const uint8_t *val, const uint8_t *vend, unsigned depth,
       result *res)
{
    const size_t mark = c->len;
    sf_status st = child_merged(c, num, d->child, from, end, count, total, val, vend, depth, res);

    if (__builtin_expect(d->field == SF_OTLP_FIELD_LOG_BODY, 0) && st == SF_OK &&
        c->verdict[d->field] != FV_AS_IS && !c->discard)
        return body_judge(c, num, mark);
    return st;
}

/* The losing members of a oneof: message occurrences of field `num` in
 * [p, end) read and checked as a decoder would, never written, their items
 * not counted. */
static __attribute__((noinline)) sf_status oneof_losers(cx *c, uint32_t num, const fdesc *d,
                                                       const uint8_t *p, const uint8_t *end,
                                                       unsigned depth)
{
    const size_t items = c->st->spans;
    sf_status st = SF_OK;
    fld f;

    if (d->type != F_MSG)
        return SF_OK;           /* scalars: read_field checked them */
    c->discard++;
    while (st == SF_OK && p < end) {
        if ((st = next_field(c, p, end, &f, 0)) != SF_OK)
            break;
        p = f.end;
        if (f.num == num) {
            result r = { 0 };

            st = child(c, num, d->child, f.val, f.val + f.u, depth, &r);
        }
    }
    c->discard--;
    c->st->spans = items;
    return st;
}

/* ---- inserts ---------------------------------------------------------------- */

/* The key of KeyValue [p, end) as a decoder sees it (its last key field);
 * "" when it has none. Unreadable bytes give "" too: kv() says what is
 * wrong with them. */
static void kv_key(cx *c, const uint8_t *p, const uint8_t *end, const uint8_t **key, size_t *klen)
{
    const char *error = c->st->error;
    fld f;

    *key = (const uint8_t *)"";
    *klen = 0;
    while (p < end) {
        if (next_field(c, p, end, &f, 0) != SF_OK || f.wt == WT_EGROUP)
            break;
        p = f.end;
        if (f.num == KV_KEY && f.wt == WT_LEN) {
            *key = f.val;
            *klen = (size_t)f.u;
        }
    }
    c->st->error = error;
}

/* Attribute field `num`: key[0, klen) = the string value[0, vlen). */
static sf_status put_kv_str(cx *c, uint32_t num, const uint8_t *key, size_t klen,
                            const uint8_t *value, size_t vlen)
{
    const size_t any = 1 + varint_size(vlen) + vlen;
    const size_t inner = 1 + varint_size(klen) + klen + 1 + varint_size(any) + any;
    sf_status st = put_tag_varint(c, num, WT_LEN, true, inner);

    if (st == SF_OK)
        st = put_len_field(c, KV_KEY, key, klen);
    if (st == SF_OK)
        st = put_tag_varint(c, KV_VALUE, WT_LEN, true, any);
    if (st == SF_OK)
        st = put_len_field(c, AV_STRING, value, vlen);
    return st;
}

/* Which of the n inserts has key k[0, len): its index, or -1. */
static int insert_find(const sf_otlp_insert *ins, size_t n, const uint8_t *k, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        /* k may hold a NUL */
        if (strlen(ins[i].key) == len && memcmp(ins[i].key, k, len) == 0)
            return (int)i;
    }
    return -1;
}

/* The attribute list `num` of message m (context ctx), every occurrence in
 * [sl->first, sl->last_end) (none when sl->count is 0), with the edit's
 * inserts: an upsert's key leaves with its constant at its first entry
 * (later ones of the key, under one_value_per_key, are duplicates), and
 * inserts no entry of which left and upserts no entry had come last (an
 * update only replaces). */
static __attribute__((noinline)) sf_status
attrs_inserted(cx *c, const mdesc *m, uint32_t num, const slot *sl, unsigned depth,
               uint64_t *removed)
{
    const sf_otlp_insert *ins = c->edit->inserts[m->ctx];
    const size_t n = c->edit->n_inserts[m->ctx];
    const kvjudge j = kv_judge(c, m->ctx);
    uint64_t present = 0, upserted = 0;
    const uint8_t *p = sl->count > 0 ? sl->first : NULL, *end = sl->count > 0 ? sl->last_end : NULL;
    fld f;
    sf_status st;

    while (p < end) {
        const uint8_t *key;
        size_t klen;
        bool gone = false;
        int i;

        if ((st = next_field(c, p, end, &f, 0)) != SF_OK)
            return st;
        p = f.end;
        if (f.num != num)
            continue;
        kv_key(c, f.val, f.val + f.u, &key, &klen);
        i = insert_find(ins, n, key, klen);
        if (i >= 0 && (ins[i].upsert || ins[i].update)) {
            const bool first = !(upserted >> i & 1);

            /* read and checked like any attribute, never written */
            c->discard++;
            st = kv(c, m->ctx, j, num, f.start, f.val, f.val + f.u, depth, &gone);
            c->discard--;
            if (st != SF_OK)
                return st;
            if (first) {
                upserted |= 1ull << i;
                c->st->inserted++;
                st = put_kv_str(c, num, key, klen, (const uint8_t *)ins[i].value,
                                strlen(ins[i].value));
            } else if (j.dedupe) {
                c->st->duplicate_keys++;
                ++*removed;
                continue;
            } else {
                st = kv(c, m->ctx, j, num, f.start, f.val, f.val + f.u, depth, &gone);
                *removed += gone;
            }
            if (st != SF_OK)
                return st;
            continue;
        }
        st = kv(c, m->ctx, j, num, f.start, f.val, f.val + f.u, depth, &gone);
        if (st != SF_OK)
            return st;
        *removed += gone;
        if (i >= 0 && !gone)
            present |= 1ull << i;
    }
    for (size_t i = 0; i < n; i++) {
        if (((present | upserted) >> i & 1) || ins[i].update)
            continue;
        c->st->inserted++;
        st = put_kv_str(c, num, (const uint8_t *)ins[i].key, strlen(ins[i].key),
                        (const uint8_t *)ins[i].value, strlen(ins[i].value));
        if (st != SF_OK)
            return st;
    }
    return SF_OK;
}

/* Whether the next occurrence of repeated field d (*reps so far in its
 * message) is past the edit's cap on it: per message, but for spans per
 * request (the spans kept so far). Nothing is, in what is not written (an
 * entry already past a cap: its spans are all counted as capped). */
static inline __attribute__((always_inline)) bool over_cap(const cx *c, const fdesc *d,
                                                           uint32_t *reps)
{
    const uint32_t cap = c->caps[d->field];

    if (cap == 0 || c->discard)
        return false;
    if (d->field == SF_OTLP_FIELD_SPANS)
        return c->st->spans >= cap;
    return ++*reps > cap;
}

/* The repeated field `num` of [first, last_end), each occurrence in order;
 * past the edit's cap on it, read and checked but not written (s->over),
 * the items it held counted apart (stats.capped_items), not as items. */
static sf_status repeated(cx *c, const mdesc *m, uint32_t num, slot *s, unsigned depth,
                          uint64_t *removed, int *cls)
{
    const fdesc *d = &m->f[num];
    const uint8_t *p = s->first;
    uint32_t n = 0;
    fld f;

    while (p < s->last_end) {
        sf_status st = next_field(c, p, s->last_end, &f, 0);
        const size_t items = c->st->spans;
        bool over;

        if (st != SF_OK)
            return st;
        p = f.end;
        if (f.num != num)
            continue;
        over = d->field != SF_OTLP_FIELD_NONE && over_cap(c, d, &n);
        c->discard += over;
        st = put_repeated(c, m, d, &f, depth, removed, cls);
        c->discard -= over;
        if (st != SF_OK)
            return st;
        if (over) {
            if (!c->discard)
                c->st->capped_items += c->st->spans - items;
            c->st->spans = items;
            if (s->over < UINT32_MAX)
                s->over++;
        }
    }
    if (s->over > 0 && !c->discard)
        c->st->capped[d->field] += s->over;
    return SF_OK;
}

/* The occurrences message m's field capped as count field d says were
 * over the cap (that field is written before d). */
static uint32_t capped_over(const mdesc *m, const fdesc *d, const slot *s)
{
    for (uint32_t num = 1; num < m->n; num++) {
        if (m->f[num].repeated && m->f[num].field == d->field && &m->f[num] != d)
            return s[num].over;
    }
    return 0;
}

/* A message written: its removed attributes counted, a ResourceSpans' spans
 * counted as matching when its resource matched, an array's class. */
static inline sf_status msg_done(cx *c, unsigned kind, uint64_t removed, size_t spans_before,
                                 int cls, result *res)
{
    if (removed > 0)
        c->st->removed_attributes += removed;
    if (kind == SF_OTLP_MSG_RESOURCE_SPANS && c->n_match > 0 &&
        c->match_bits == (c->n_match >= 64 ? ~0ull : (1ull << c->n_match) - 1))
        c->matching += c->st->spans - spans_before;
    if (res != NULL)
        res->cls = kind == SF_OTLP_MSG_ARRAY_VALUE && cls != CLS_SCALAR ? CLS_OTHER : cls;
    return SF_OK;
}

/* The next field of a message of kind `kind` at *pp, read and checked
 * against the schema; *d is NULL for a field the schema does not define
 * (counted, skipped). */
static inline __attribute__((always_inline)) sf_status read_field(cx *c, unsigned kind,
                                                                  const uint8_t **pp,
                                                                  const uint8_t *end, fld *f,
                                                                  const fdesc **d)
{
    const mdesc *m = &schema[kind];
    sf_status st = next_field(c, *pp, end, f, 0);

    if (st != SF_OK)
        return st;
    if (f->wt == WT_EGROUP)
        return bad(c, "end of group outside a group");
    *pp = f->end;
    *d = f->num < m->n && m->f[f->num].type != F_NONE ? &m->f[f->num] : NULL;
    if (*d == NULL) {
        c->st->dropped_fields[kind]++;
        return SF_OK;
    }
    return check_value(c, *d, f);
}

/* Any message but KeyValue and AnyValue, by its schema table. */
static sf_status generic(cx *c, unsigned kind, const uint8_t *p, const uint8_t *end,
                         unsigned depth, result *res)
{
    const mdesc *m = &schema[kind];
    slot s[m->n];
    uint64_t removed = 0;
    size_t spans_before = c->st->spans;
    int cls = CLS_SCALAR;
    oneof_run o = { 0 };        /* the message's oneof */
    const bool ins = m->ctx >= 0 && (c->ins_kinds >> kind & 1);
    fld f;
    sf_status st;

    memset(s, 0, sizeof(s));
    seen_reset(c, m);
    /* first step: read and check every field */
    while (p < end) {
        const fdesc *d;

        st = read_field(c, kind, &p, end, &f, &d);
        if (st != SF_OK)
            return st;
        if (d == NULL)
            continue;
        if (d->flags & FL_ONEOF)
            oneof_note(&o, &f);
        slot *sl = &s[f.num];
        if (sl->count++ == 0)
            sl->first = f.start;
        sl->last_end = f.end;
        sl->val = f.val;
        sl->u = f.u;
        if (f.wt == WT_LEN)
            sl->total += (size_t)f.u;
    }

    if (kind == SF_OTLP_MSG_RESOURCE_SPANS)
        c->match_bits = 0;
    /* second step: write in field-number order */
    for (uint32_t num = 1; num < m->n; num++) {
        const fdesc *d = &m->f[num];
        slot *sl = &s[num];

        if (d->type == F_NONE)
            continue;
        if (d->role == R_DROPPED) {
            st = put_dropped(c, num, sl->count ? sl->u : 0, removed);
        } else if (d->role == R_COUNT && capped_over(m, d, s) > 0) {
            st = put_dropped(c, num, sl->count ? sl->u : 0, capped_over(m, d, s));
        } else if (ins && d->role == R_ATTRS) {
            st = attrs_inserted(c, m, num, sl, depth, &removed);
        } else if (sl->count == 0 && d->type == F_MSG && !d->repeated &&
                   (c->ins_kinds >> d->child & 1)) {
            result r = { 0 };

            /* absent: an empty one, which the inserts then fill */
            st = child(c, num, d->child, (const uint8_t *)"", (const uint8_t *)"", depth, &r);
        } else if (sl->count == 0 && !(num == m->name && renames(c, m))) {
            continue;
        } else if ((d->flags & FL_ONEOF) && num != o.num) {
            st = oneof_losers(c, num, d, sl->first, sl->last_end, depth);
        } else if (d->flags & FL_PACKED) {
            st = packed(c, num, d, sl->first, sl->last_end);
        } else if (d->repeated) {
            st = repeated(c, m, num, sl, depth, &removed, &cls);
        } else if (d->type == F_MSG && (d->flags & FL_ONEOF)) {
            result r = { 0 };

            st = single(c, d, num, o.first, sl->last_end, o.count, o.total, sl->val,
                        sl->val + sl->u, depth, &r);
        } else if (d->type == F_MSG) {
            result r = { 0 };

            st = single(c, d, num, sl->first, sl->last_end, sl->count, sl->total, sl->val,
                        sl->val + sl->u, depth, &r);
        } else {
            /* an absent name is renamed from "" (see renames) */
            st = put_scalar(c, m, num, sl->count ? sl->val : (const uint8_t *)"",
                            sl->count ? sl->u : 0);
        }
        if (st != SF_OK)
            return st;
    }
    return msg_done(c, kind, removed, spans_before, cls, res);
}

/* Internal: the message is not in an order stream() can write; run() starts
 * the request again with generic() everywhere. */
#define SF_RESTART SF_UNSUPPORTED

/* Whether message m owes a dropped count for removed attributes before
 * field `limit` (the input gave none, or gave it earlier, still held). */
static inline bool dropped_due(const mdesc *m, uint64_t removed, bool dropped_done,
                               uint32_t limit)
{
    return !dropped_done && removed > 0 && m->dropped != 0 && m->dropped < limit;
}

/* The pending scalars of numbers below `limit`, in order, and the dropped
 * count when its turn has come. */
static sf_status flush(cx *c, const mdesc *m, const slot *s, uint32_t *pending, uint32_t limit,
                       uint64_t removed, bool *dropped_done)
{
    uint32_t below = limit >= 32 ? ~0u : (1u << limit) - 1;
    uint32_t todo = *pending & below;
    sf_status st;

    if (dropped_due(m, removed, *dropped_done, limit))
        todo |= 1u << m->dropped;
    if (m->dropped != 0 && (todo >> m->dropped) & 1)
        *dropped_done = true;
    while (todo != 0) {
        uint32_t num = (uint32_t)__builtin_ctz(todo);

        todo &= todo - 1;
        if (num == m->dropped && m->dropped != 0) {
            st = put_dropped(c, num, (*pending >> num) & 1 ? s[num].u : 0, removed);
        } else {
            st = put_scalar(c, m, num, s[num].val, s[num].u);
        }
        if (st != SF_OK)
            return st;
    }
    *pending &= ~below;
    return SF_OK;
}

/* flush(), inline for its usual cases: nothing held, and at most the dropped
 * count to write (the input gave none: it would be held). */
static inline __attribute__((always_inline)) sf_status
settle(cx *c, const mdesc *m, const slot *s, uint32_t *pending, uint32_t limit, uint64_t removed,
       bool *dropped_done)
{
    const uint32_t below = limit >= 32 ? ~0u : (1u << limit) - 1;

    if ((*pending & below) != 0)
        return flush(c, m, s, pending, limit, removed, dropped_done);
    if (!dropped_due(m, removed, *dropped_done, limit))
        return SF_OK;
    *dropped_done = true;
    return put_dropped(c, m->dropped, 0, removed);
}

/* Whether a singular scalar field can leave exactly as it came: canonical
 * (one-byte tag, minimal varints, not a default) and nothing to change in
 * it. Fields from 16 (Span.flags, which protobufjs writes after field 4)
 * are held instead, so that order stays the streaming walk's. */
static inline bool as_is(const cx *c, const mdesc *m, const fdesc *d, const fld *f)
{
    if (f->num >= 16 || d->role == R_DROPPED || f->u == 0 ||
        (size_t)(f->val - f->start) != 1 + (f->wt == WT_LEN ? varint_size(f->u) : 0))
        return false;
    (void)m;
    if (d->field != SF_OTLP_FIELD_NONE && c->verdict[d->field] != FV_AS_IS)
        return false;
    if (__builtin_expect(c->ids, 0) && (d->role == R_ID16 || d->role == R_ID8))
        return false;           /* held, then put_id */
    return f->wt != WT_VARINT || (size_t)(f->end - f->val) == varint_size(f->u);
}

/* Write the run of scalars copied as they are, if any, and end it. */
static inline sf_status run_flush(cx *c, const uint8_t **run, const uint8_t *run_end)
{
    const uint8_t *r = *run;

    if (r == NULL)
        return SF_OK;
    *run = NULL;
    return put(c, r, (size_t)(run_end - r));
}

/* The quick path of stream(): a singular scalar with a one-byte tag whose
 * bytes are already canonical and not a default leaves as it came. quick[kind][tag]
 * says how to check it (0: not a field this path takes); it is made once
 * from the schema. */
enum { Q_NONE = 0, Q_FIXED64, Q_FIXED32, Q_UINT32, Q_INT32, Q_INT64, Q_BOOL, Q_ID16, Q_ID8,
       Q_BYTES, Q_STRING, Q_MSG };

static uint8_t quick[SF_OTLP_MSG_COUNT][128];
/* Per governed field, the message kinds that have it as a singular field
 * (number below 32) and which numbers: run() makes c->held from these and
 * the call's verdicts, instead of walking the schema on every call. */
static struct held_of {
    uint8_t kind;
    uint32_t nums;
} held_of[SF_OTLP_FIELD_COUNT][SF_OTLP_MSG_COUNT];
static uint8_t n_held_of[SF_OTLP_FIELD_COUNT];
static pthread_once_t quick_once = PTHREAD_ONCE_INIT;

/* A message kind with singular scalars only (Status): Q_MSG copies it whole.
 * KeyValue and AnyValue have no table (kv(), any()): never. */
static bool flat_kind(unsigned kind)
{
    if (kind == SF_OTLP_MSG_ANY_VALUE || kind == SF_OTLP_MSG_KEY_VALUE)
        return false;
    for (uint32_t i = 1; i < schema[kind].n; i++)
        if (schema[kind].f[i].repeated || schema[kind].f[i].type == F_MSG)
            return false;
    return true;
}

static void quick_init(void)
{
    for (unsigned k = 0; k < SF_OTLP_MSG_COUNT; k++) {
        const mdesc *m = &schema[k];

        for (uint32_t num = 1; num < m->n && num < 32; num++) {
            const unsigned f = m->f[num].field;

            if (f == SF_OTLP_FIELD_NONE || m->f[num].repeated)
                continue;
            if (n_held_of[f] == 0 || held_of[f][n_held_of[f] - 1].kind != k)
                held_of[f][n_held_of[f]++] = (struct held_of){ .kind = (uint8_t)k };
            held_of[f][n_held_of[f] - 1].nums |= 1u << num;
        }
        for (uint32_t num = 1; num < m->n && num < 16; num++) {
            const fdesc *d = &m->f[num];
            int q = Q_NONE;

            if (d->repeated || d->role == R_DROPPED || d->flags != 0)
                continue;
            switch (d->type) {
            case F_FIXED64: q = Q_FIXED64; break;
            case F_FIXED32: q = Q_FIXED32; break;
            case F_UINT32:  q = Q_UINT32; break;
            case F_INT32:   q = Q_INT32; break;
            case F_INT64:   q = Q_INT64; break;
            case F_BOOL:    q = Q_BOOL; break;
            case F_STRING:  q = Q_STRING; break;
            case F_BYTES:
                q = d->role == R_ID16 ? Q_ID16 : d->role == R_ID8 ? Q_ID8 : Q_BYTES;
                break;
            case F_MSG:
                q = flat_kind(d->child) ? Q_MSG : Q_NONE;
                break;
            default:
                break;
            }
            if (q != Q_NONE)
                quick[k][num << 3 | (uint32_t)expected_wt(d->type)] = (uint8_t)q;
        }
    }
}

/* One past the field at p when it can leave as it is; NULL: let read_field()
 * and as_is() decide (and say what is wrong). */
static inline __attribute__((always_inline)) const uint8_t *
quick_scalar(unsigned q, const uint8_t *p, const uint8_t *end)
{
    const uint8_t *v = p + 1;
    uint64_t u;

    /* if-chains, not a switch: the field kinds alternate within a span, and
     * an indirect jump per field mispredicts */
    if (q == Q_FIXED64) {
        if (end - v < 8)
            return NULL;
        memcpy(&u, v, 8);
        return u != 0 ? v + 8 : NULL;
    }
    if (q == Q_ID16 || q == Q_ID8) {
        if (end - v < 1 || *v != (q == Q_ID16 ? 16 : 8) || (size_t)(end - v - 1) < *v)
            return NULL;
        return v + 1 + *v;
    }
    if (q == Q_STRING || q == Q_BYTES) {
        if (rd_varint(&v, end, 5, &u) != 0 || u == 0 || u > (uint64_t)(end - v) ||
            (size_t)(v - p - 1) != varint_size(u))
            return NULL;
        return q == Q_BYTES || utf8_valid(v, (size_t)u) ? v + u : NULL;
    }
    if (q == Q_FIXED32) {
        uint32_t u32;

        if (end - v < 4)
            return NULL;
        memcpy(&u32, v, 4);
        return u32 != 0 ? v + 4 : NULL;
    }
    /* Q_UINT32, Q_INT32, Q_INT64, Q_BOOL: one byte; longer varints take the
     * general path */
    if (v < end && *v != 0 && *v < 0x80)
        return q != Q_BOOL || *v == 1 ? v + 1 : NULL;
    return NULL;
}

/* quick_scalar() for a Q_MSG field: one past it when its tag, length and
 * every field inside (of kind `kind`) can leave as they are. */
static inline __attribute__((always_inline)) const uint8_t *
quick_msg(const cx *c, unsigned kind, const uint8_t *p, const uint8_t *end)
{
    const uint8_t *v = p + 1, *vend;
    uint32_t upto = 0;
    uint64_t n;

    if (rd_varint(&v, end, 5, &n) != 0 || n > (uint64_t)(end - v) ||
        (size_t)(v - p - 1) != varint_size(n))
        return NULL;
    for (vend = v + n; v < vend;) {
        const unsigned q = *v < 0x80 ? quick[kind][*v] : Q_NONE;
        const uint32_t num = *v >> 3;

        if (q == Q_NONE || q == Q_MSG || num <= upto || (c->held[kind] >> num & 1))
            return NULL;
        v = quick_scalar(q, v, vend);
        if (v == NULL)
            return NULL;
        upto = num;
    }
    return vend;
}

/* The usual case, one pass: fields arrive in number order, except singular
 * scalars, which may come anywhere before the next sub-message or repeated
 * field that follows them in number order (held, then written in place).
 * Anything else (a field after a larger one was written, a singular
 * message twice) returns SF_RESTART. */
static sf_status stream(cx *c, unsigned kind, const uint8_t *p, const uint8_t *end,
                        unsigned depth, result *res)
{
    const mdesc *m = &schema[kind];
    const uint32_t held = c->held[kind];   /* read once: the writer's stores may alias */
    slot s[SLOTS_MAX];          /* only the entries in `pending` are read */
    const uint8_t *run = NULL, *run_end = NULL;    /* scalars copied as they are */
    uint32_t pending = 0, seen = 0, upto = 0, oneof_seen = 0;
    uint32_t reps = 0;          /* occurrences of repeated field `upto` so far */
    uint64_t removed = 0;
    bool dropped_done = false;
    size_t spans_before = c->st->spans;
    int cls = CLS_SCALAR;
    fld f;
    sf_status st;

    if (kind == SF_OTLP_MSG_RESOURCE_SPANS)
        c->match_bits = 0;
    seen_reset(c, m);
    /* held has the name's bit exactly when the edit renames this context */
    if (m->name != 0 && (held >> m->name & 1) && renames(c, m)) {
        s[m->name].val = (const uint8_t *)"";   /* absent: "" (see renames) */
        s[m->name].u = 0;
        pending |= 1u << m->name;
    }
    while (p < end) {
        const fdesc *d;

        if (*p < 0x80 && quick[kind][*p] != Q_NONE) {
            const uint32_t num = *p >> 3;

            if (num > upto && (pending & ((2u << num) - 1)) == 0 && !(held >> num & 1) &&
                !dropped_due(m, removed, dropped_done, num)) {
                const unsigned q = quick[kind][*p];
                const uint8_t *e = NULL;

                if (q != Q_MSG) {
                    e = quick_scalar(q, p, end);
                } else if (!(seen >> num & 1)) {
                    e = quick_msg(c, m->f[num].child, p, end);
                    if (e != NULL)
                        seen |= 1u << num;
                }
                if (e != NULL && __builtin_expect(c->ids, 0) && (q == Q_ID16 || q == Q_ID8)) {
                    /* in order and canonical: its pseudonym in its place */
                    if ((st = run_flush(c, &run, run_end)) != SF_OK ||
                        (st = put_id(c, *p, p + 2, p[1])) != SF_OK)
                        return st;
                    upto = num;
                    p = e;
                    continue;
                }
                if (e != NULL) {
                    if (run == NULL)
                        run = p;
                    run_end = e;
                    upto = num;
                    p = e;
                    continue;
                }
            }
        }
        st = read_field(c, kind, &p, end, &f, &d);
        if (st != SF_OK)
            return st;
        if (d == NULL) {
            /* the run is contiguous input */
            if ((st = run_flush(c, &run, run_end)) != SF_OK)
                return st;
            continue;
        }
        if (f.num < upto || (f.num == upto && d->type != F_MSG && !d->repeated))
            return SF_RESTART;
        if (__builtin_expect(d->flags != 0, 0)) {
            /* a second member of the oneof, a packed field twice: generic() */
            if ((d->flags & FL_ONEOF) && (oneof_seen & ~(1u << f.num)))
                return SF_RESTART;
            oneof_seen |= (d->flags & FL_ONEOF ? 1u : 0u) << f.num;
            if (d->flags & FL_PACKED) {
                if (f.num == upto)
                    return SF_RESTART;
                if ((st = run_flush(c, &run, run_end)) != SF_OK ||
                    (st = settle(c, m, s, &pending, f.num, removed, &dropped_done)) != SF_OK ||
                    (st = packed(c, f.num, d, f.start, f.end)) != SF_OK)
                    return st;
                upto = f.num;
                continue;
            }
        }
        if (d->type != F_MSG && !d->repeated) {
            /* In order, canonical, unchanged, before every held scalar
             * and the dropped count still to come: part of a run copied
             * as it is. */
            if ((pending & ((2u << f.num) - 1)) == 0 &&
                !dropped_due(m, removed, dropped_done, f.num) && as_is(c, m, d, &f)) {
                if (run == NULL)
                    run = f.start;
                run_end = f.end;
                upto = f.num;
                continue;
            }
            if ((st = run_flush(c, &run, run_end)) != SF_OK)
                return st;
            s[f.num].val = f.val;       /* the last one wins */
            s[f.num].u = f.u;
            pending |= 1u << f.num;
            continue;
        }
        if ((st = run_flush(c, &run, run_end)) != SF_OK)
            return st;
        if (f.num != upto) {
            st = settle(c, m, s, &pending, f.num, removed, &dropped_done);
            if (st != SF_OK)
                return st;
            upto = f.num;
            reps = 0;
        }
        if (!d->repeated) {
            result r = { 0 };

            if (seen & (1u << f.num))
                return SF_RESTART;      /* merge: generic() */
            seen |= 1u << f.num;
            st = single(c, d, f.num, f.start, f.end, 1, (size_t)f.u, f.val, f.val + f.u, depth,
                        &r);
        } else if (d->child == SF_OTLP_MSG_KEY_VALUE && f.start[0] < 0x80) {
            p = f.start;        /* the run below takes this attribute too */
        } else {
            /* past a cap (events, links, spans...): generic() drops and counts */
            if (__builtin_expect(d->field != SF_OTLP_FIELD_NONE && over_cap(c, d, &reps), 0))
                return SF_RESTART;
            st = put_repeated(c, m, d, &f, depth, &removed, &cls);
        }
        if (st == SF_OK && d->repeated && d->type == F_MSG && f.start[0] < 0x80) {
            const uint8_t tag = f.start[0];

            /* the run that usually follows (attributes, spans, events): the
             * same one-byte tag, read here without the general reader. Two
             * loops, not one with a branch inside: one loop costs 2.5% more
             * per span (bench_codec), the attribute loop keeps its verdict
             * inputs in registers. */
            if (d->child == SF_OTLP_MSG_KEY_VALUE) {
                const int actx = d->role == R_ATTRS ? m->ctx : -1;
                const kvjudge j = kv_judge(c, actx);
                bool gone = false;

                while (st == SF_OK && p < end && *p == tag) {
                    const uint8_t *q = p + 1;
                    uint64_t n;

                    if (rd_varint(&q, end, 5, &n) != 0 || n > (uint64_t)(end - q))
                        break;          /* next_field says what is wrong */
                    st = kv(c, actx, j, f.num, p, q, q + n, depth, &gone);
                    removed += gone;
                    p = q + n;
                }
            } else {
                const uint32_t cap = d->field != SF_OTLP_FIELD_NONE ? c->caps[d->field] : 0;

                while (st == SF_OK && p < end && *p == tag) {
                    const uint8_t *q = p + 1;
                    uint64_t n;

                    if (rd_varint(&q, end, 5, &n) != 0 || n > (uint64_t)(end - q))
                        break;
                    if (__builtin_expect(cap != 0, 0) && over_cap(c, d, &reps))
                        return SF_RESTART;
                    f.start = p;
                    f.val = q;
                    f.u = n;
                    f.end = p = q + n;
                    st = put_repeated(c, m, d, &f, depth, &removed, &cls);
                }
            }
        }
        if (st != SF_OK)
            return st;
    }
    if ((st = run_flush(c, &run, run_end)) != SF_OK)
        return st;
    st = settle(c, m, s, &pending, 32, removed, &dropped_done);
    if (st != SF_OK)
        return st;
    return msg_done(c, kind, removed, spans_before, cls, res);
}


/* Whether an AnyValue's bytes are already canonical with one scalar member
 * (the usual attribute); *cls and the string are then set. */
static inline __attribute__((always_inline)) bool any_canonical(const uint8_t *p,
                                                                 const uint8_t *end,
                                                                 result *res)
{
    const uint8_t *q = p + 1;
    uint64_t v;

    res->str = NULL;
    if (end - p < 2)
        return false;
    if (p[0] == (AV_STRING << 3 | WT_LEN) || p[0] == (AV_BYTES << 3 | WT_LEN)) {
        if (rd_varint(&q, end, 5, &v) != 0 || v != (uint64_t)(end - q) ||
            (q - p > 2 && q[-1] == 0))
            return false;
        if (p[0] == (AV_STRING << 3 | WT_LEN)) {
            if (!utf8_valid(q, (size_t)v))
                return false;
            res->cls = CLS_SCALAR;
            res->str = q;
            res->str_len = (size_t)v;
        } else {
            res->cls = CLS_OTHER;
        }
        return true;
    }
    if (p[0] == (AV_INT << 3 | WT_VARINT)) {                                /* int_value */
        if (rd_varint(&q, end, 10, &v) != 0 || q != end || (q - p > 2 && q[-1] == 0))
            return false;
        res->cls = CLS_SCALAR;
        return true;
    }
    if (p[0] == (AV_DOUBLE << 3 | WT_I64)) {                                   /* double_value */
        res->cls = CLS_SCALAR;
        return end - p == 9;
    }
    if (p[0] == (AV_BOOL << 3 | WT_VARINT)) {                                /* bool_value */
        res->cls = CLS_SCALAR;
        return end - p == 2 && p[1] <= 1;
    }
    return false;
}

/* AnyValue: a oneof. Its last member wins; a message member merges the
 * occurrences since the member last changed; every occurrence is checked. */
static sf_status any(cx *c, const uint8_t *p, const uint8_t *end, unsigned depth, result *res)
{
    const uint8_t *start = p, *last_val = NULL;
    oneof_run o = { 0 };
    uint64_t last_u = 0;
    fld f;
    sf_status st;

    res->cls = CLS_SCALAR;
    res->str = NULL;
    if (p < end && any_canonical(p, end, res))
        return put(c, p, (size_t)(end - p));
    res->cls = CLS_SCALAR;
    res->str = NULL;
    while (p < end) {
        fdesc d = { 0 };

        st = next_field(c, p, end, &f, 0);
        if (st != SF_OK)
            return st;
        if (f.wt == WT_EGROUP)
            return bad(c, "end of group outside a group");
        p = f.end;
        if (f.num >= N_FIELDS(sf_otlp_f_any_value)) {
            c->st->dropped_fields[SF_OTLP_MSG_ANY_VALUE]++;
            continue;
        }
        d.type = sf_otlp_f_any_value[f.num].type;   /* all oneof members: numbers 1-8 */
        st = check_value(c, &d, &f);
        if (st != SF_OK)
            return st;
        oneof_note(&o, &f);
        last_val = f.val;
        last_u = f.u;
    }
    /* the occurrences that lost: read for their checks, never written */
    for (p = start; p < (o.first != NULL ? o.first : end);) {
        st = next_field(c, p, end, &f, 0);
        if (st != SF_OK)
            return st;
        p = f.end;
        if ((f.num == AV_ARRAY || f.num == AV_KVLIST) && f.wt == WT_LEN) {
            result r;

            c->discard++;
            st = msg(c, sf_otlp_f_any_value[f.num].child,
                     f.val, f.val + f.u, depth, &r);
            c->discard--;
            if (st != SF_OK)
                return st;
        }
    }
    switch (o.num) {
    case 0:                     /* no value */
        return SF_OK;
    case AV_STRINDEX:           /* needs a profiles dictionary */
        c->st->dropped_fields[SF_OTLP_MSG_ANY_VALUE]++;
        return SF_OK;
    case AV_STRING:
    case AV_BYTES:
        res->cls = o.num == AV_STRING ? CLS_SCALAR : CLS_OTHER;
        res->str = o.num == AV_STRING ? last_val : NULL;
        res->str_len = (size_t)last_u;
        return put_len_field(c, o.num, last_val, (size_t)last_u);
    case AV_DOUBLE:
        st = put_tag_varint(c, o.num, WT_I64, false, 0);
        return st == SF_OK ? put(c, &last_u, 8) : st;
    case AV_BOOL:
    case AV_INT:
        return put_tag_varint(c, o.num, WT_VARINT, true, last_u);
    default: {                  /* AV_ARRAY, AV_KVLIST */
        result r = { 0 };

        st = child_merged(c, o.num, sf_otlp_f_any_value[o.num].child, o.first,
                          end, o.count, o.total, last_val, last_val + last_u, depth, &r);
        res->cls = o.num == AV_ARRAY ? (r.cls == CLS_SCALAR ? CLS_ARRAY : CLS_OTHER) : CLS_OTHER;
        return st;
    }
    }
}

/* Whether key = a string value is one of the resource matches. */
static void match_kv(cx *c, const uint8_t *key, size_t klen, const result *v)
{
    for (size_t i = 0; i < c->n_match && i < 64; i++) {
        size_t kl = strlen(c->keys[i]), vl = strlen(c->values[i]);

        if (kl == klen && memcmp(c->keys[i], key, klen) == 0 && v->str != NULL &&
            v->str_len == vl && memcmp(c->values[i], v->str, vl) == 0)
            c->match_bits |= 1ull << i;
    }
}

/* kv() for any shape: merged values, repeated keys, unknown fields. */
static __attribute__((noinline)) sf_status kv_general(cx *c, int ctx, uint32_t num,
                                                      const uint8_t *p, const uint8_t *end,
                                                      unsigned depth, bool *removed)
{
    const kvjudge j = kv_judge(c, ctx);
    const sf_otlp_keyset *judge = j.keys;
    const bool scalar_only = j.scalar_only;
    const bool single_only = j.single_only;
    const uint8_t *key = NULL, *val = NULL, *vend = NULL, *vfirst = NULL, *vlast_end = NULL;
    const ks_slot *slot = NULL;
    size_t klen = 0, vtotal = 0, mark = c->len, vmark = c->len;
    uint32_t vcount = 0;
    bool keep = true, dup = false;
    result r = { 0 };
    fld f;
    sf_status st;

    *removed = false;
    {
        const uint8_t *q = p;

        while (q < end) {
            const fdesc *d;

            st = next_field(c, q, end, &f, 0);
            if (st != SF_OK)
                return st;
            if (f.wt == WT_EGROUP)
                return bad(c, "end of group outside a group");
            q = f.end;
            d = f.num < N_FIELDS(sf_otlp_f_key_value) ? &sf_otlp_f_key_value[f.num] : NULL;
            if (d == NULL || f.num == KV_STRINDEX) {
                if (d != NULL && (st = check_value(c, d, &f)) != SF_OK)
                    return st;
                c->st->dropped_fields[SF_OTLP_MSG_KEY_VALUE]++;
                continue;
            }
            st = check_value(c, d, &f);
            if (st != SF_OK)
                return st;
            if (f.num == KV_KEY) {
                key = f.val;
                klen = (size_t)f.u;
            } else {
                if (vcount++ == 0)
                    vfirst = f.start;
                vlast_end = f.end;
                val = f.val;
                vend = f.val + f.u;
                vtotal += (size_t)f.u;
            }
        }
    }
    if (judge != NULL) {
        slot = keyset_find(judge, key != NULL ? key : (const uint8_t *)"", klen);
        keep = slot != NULL ? slot->keep : judge->keep_other;
    }
    if (keep && j.dedupe && !c->discard) {
        const int first = seen_first(c, judge, slot, key != NULL ? key : (const uint8_t *)"",
                                     klen);

        if (first < 0)
            return SF_ENOMEM;
        dup = first == 0;
        keep = !dup;
    }
    if (!keep)
        c->discard++;
    {
        size_t hpos = 0, hlen = 0;

        st = open_len(c, num, (size_t)(end - p), &hpos, &hlen);
        if (st == SF_OK && klen > 0)
            st = put_len_field(c, KV_KEY, key, klen);
        vmark = c->len;
        if (st == SF_OK && vcount == 1) {
            st = child(c, KV_VALUE, SF_OTLP_MSG_ANY_VALUE, val, vend, depth, &r);
        } else if (st == SF_OK && vcount > 1) {
            uint8_t *merged;

            st = gather(c, vfirst, vlast_end, KV_VALUE, vtotal, &merged);
            if (st == SF_OK) {
                st = child(c, KV_VALUE, SF_OTLP_MSG_ANY_VALUE, merged, merged + vtotal, depth, &r);
                /* matched while the merged string still exists */
                if (st == SF_OK && c->n_match > 0 && ctx == SF_OTLP_RESOURCE)
                    match_kv(c, key, klen, &r);
                sf_free(merged);
                r.str = NULL;
            }
        }
        if (st == SF_OK)
            st = close_len(c, hpos, hlen);
    }
    if (!keep)
        c->discard--;
    if (st != SF_OK)
        return st;
    if (c->n_match > 0 && ctx == SF_OTLP_RESOURCE && r.str != NULL)
        match_kv(c, key, klen, &r);
    if (keep && ((scalar_only && r.cls == CLS_OTHER) || (single_only && r.cls == CLS_ARRAY))) {
        keep = false;
        if (!c->discard) {
            c->len = mark;      /* written, then taken back */
            drift_count(c, ctx, slot, true);
        }
    } else if (keep && !c->discard && ((slot != NULL && slot->rule != NULL) || j.max_str != 0)) {
        /* the value as written (canonical): tag, length, AnyValue */
        const sf_otlp_value_rule *rule = slot != NULL ? slot->rule : NULL;
        const uint8_t *a = c->buf->data + vmark + 1, *aend = c->buf->data + c->len;
        uint8_t pv[80];
        size_t pn = 0;
        uint64_t an = 0;

        if (vmark == c->len)
            a = aend;               /* no value at all */
        else if (rd_varint(&a, aend, 5, &an) != 0)
            return bad(c, "internal: unreadable value");
        if (!value_fits(c, rule, a, aend) ||
            (rule != NULL && rule->pseudonym && !pseudonym_value(c, a, aend, pv, &pn))) {
            keep = false;
            c->len = mark;
            c->st->failed_values++;
            drift_count(c, ctx, slot, true);
        } else if (rule != NULL && rule->pseudonym) {
            c->len = mark;
            c->st->pseudonyms++;
            st = put_kv_bytes(c, num, key, klen, pv, pn);
            if (st != SF_OK)
                return st;
        }
    } else if (!keep && !dup && judge != NULL) {
        drift_count(c, ctx, slot, false);
    }
    if (dup)
        c->st->duplicate_keys++;
    *removed = !keep;
    return SF_OK;
}

/* KeyValue field `num` (its tag at `field`, its content [p, end)). ctx >= 0:
 * an attribute of that context, judged by the edit when it filters that
 * context; *removed when it is not written. The usual attribute, already
 * canonical (a key with 1 byte of length, one canonical scalar value), is
 * checked, judged and copied whole here; anything else goes to kv_general. */
static inline __attribute__((always_inline)) sf_status kv(cx *c, int ctx, kvjudge j, uint32_t num,
                                                          const uint8_t *field,
                                                          const uint8_t *p, const uint8_t *end,
                                                          unsigned depth, bool *removed)
{
    const uint8_t *q, *key;
    uint64_t n;
    size_t klen;
    result r;

    if (__builtin_expect(end - p < 4 || p[0] != (KV_KEY << 3 | WT_LEN) || p[1] == 0 ||
                         p[1] >= 0x80 || p[1] + 2 >= end - p ||
                         p[2 + p[1]] != (KV_VALUE << 3 | WT_LEN), 0))
        return kv_general(c, ctx, num, p, end, depth, removed);
    key = p + 2;
    klen = p[1];
    q = key + klen + 1;
    if (__builtin_expect(rd_varint(&q, end, 5, &n) != 0 || n != (uint64_t)(end - q) ||
                         (size_t)(q - (key + klen + 1)) != varint_size(n) ||
                         !any_canonical(q, end, &r), 0))
        return kv_general(c, ctx, num, p, end, depth, removed);
    *removed = false;
    {
        const ks_slot *e = j.keys != NULL ? keyset_find(j.keys, key, klen) : NULL;
        const bool keep = j.keys == NULL || (e != NULL ? e->keep : j.keys->keep_other);

        if (e == NULL && __builtin_expect(!utf8_valid(key, klen), 0))
            return bad(c, "string field is not UTF-8");
        if (j.match)
            match_kv(c, key, klen, &r);
        if (!keep || (j.scalar_only && r.cls == CLS_OTHER)) {
            *removed = true;
            drift_count(c, ctx, e, keep);
            return SF_OK;
        }
        if (j.dedupe) {
            const int first = seen_first(c, j.keys, e, key, klen);

            if (first <= 0) {
                if (first < 0)
                    return SF_ENOMEM;
                *removed = true;
                c->st->duplicate_keys++;
                return SF_OK;
            }
        }
        if ((e != NULL && e->rule != NULL) || (j.max_str != 0 && r.str != NULL)) {
            const sf_otlp_value_rule *rule = e != NULL ? e->rule : NULL;
            uint8_t pv[80];
            size_t pn;

            if (!value_fits(c, rule, q, end) ||
                (rule != NULL && rule->pseudonym && !pseudonym_value(c, q, end, pv, &pn))) {
                *removed = true;
                c->st->failed_values++;
                drift_count(c, ctx, e, true);
                return SF_OK;
            }
            if (rule != NULL && rule->pseudonym) {
                c->st->pseudonyms++;
                return put_kv_bytes(c, num, key, klen, pv, pn);
            }
        }
    }
    if ((size_t)(p - field) == varint_size((uint64_t)num << 3 | WT_LEN) +
                               varint_size((uint64_t)(end - p)))
        return put(c, field, (size_t)(end - field));
    return put_len_field(c, num, p, (size_t)(end - p));
}

static sf_status msg(cx *c, unsigned kind, const uint8_t *p, const uint8_t *end, unsigned depth,
                     result *res)
{
    if (kind == SF_OTLP_MSG_ANY_VALUE)
        return any(c, p, end, depth, res);
    /* KeyValue writes its own tag: callers use kv() directly. */
    if (kind == SF_OTLP_MSG_ARRAY_VALUE || kind == SF_OTLP_MSG_KEY_VALUE_LIST) {
        if (++depth > c->max_depth)
            return bad(c, "values nested deeper than max_value_depth");
    }
    if (c->general || ((c->ins_kinds | c->ins_parents) >> kind & 1))
        return generic(c, kind, p, end, depth, res);
    return stream(c, kind, p, end, depth, res);
}

/* ---- entry points ------------------------------------------------------------ */

sf_status sf_otlp_text_reserve(sf_otlp_text *t, size_t cap)
{
    uint8_t *d;

    if (cap <= t->cap)
        return SF_OK;
    if (cap < 64)
        cap = 64;
    d = sf_realloc(t->data, cap);
    if (d == NULL)
        return SF_ENOMEM;
    t->data = d;
    t->cap = cap;
    return SF_OK;
}

_Static_assert(SF_OTLP_MSG_COUNT <= 64, "ins_kinds holds a bit per message kind");

/* The edit's inserts: at most 64 per context, keys not empty, UTF-8; the
 * kinds they apply to into c->ins_kinds (every message of the context but
 * an exemplar, whose filtered_attributes are the datapoint's context too). */
static sf_status inserts_check(cx *c)
{
    const sf_otlp_edit *e = c->edit;

    c->ins_kinds = 0;
    for (unsigned ctx = 0; e != NULL && ctx < SF_OTLP_CTX_COUNT; ctx++) {
        if (e->n_inserts[ctx] == 0)
            continue;
        if (e->n_inserts[ctx] > 64 || e->inserts[ctx] == NULL)
            return SF_FILTER;
        for (size_t i = 0; i < e->n_inserts[ctx]; i++) {
            const sf_otlp_insert *in = &e->inserts[ctx][i];

            if (in->key == NULL || in->value == NULL || in->key[0] == '\0' ||
                !utf8_valid((const uint8_t *)in->key, strlen(in->key)) ||
                !utf8_valid((const uint8_t *)in->value, strlen(in->value)))
                return SF_FILTER;
        }
        for (unsigned k = 0; k < SF_OTLP_MSG_COUNT; k++) {
            /* KeyValue and AnyValue have no table (n 0, ctx 0) */
            if (schema[k].n > 0 && schema[k].ctx == (int)ctx && k != SF_OTLP_MSG_EXEMPLAR)
                c->ins_kinds |= 1ull << k;
        }
    }
    /* a resource or scope the input leaves out is written, to hold them */
    c->ins_parents = 0;
    for (unsigned k = 0; c->ins_kinds != 0 && k < SF_OTLP_MSG_COUNT; k++) {
        for (uint32_t num = 1; num < schema[k].n; num++) {
            const fdesc *d = &schema[k].f[num];

            if (d->type == F_MSG && !d->repeated && (c->ins_kinds >> d->child & 1))
                c->ins_parents |= 1ull << k;
        }
    }
    return SF_OK;
}

/* The whole request (message kind `root`): stream() first; if some message
 * is out of order, once more from the start with generic() (output and
 * counts start over). */
static sf_status run(cx *c, unsigned root, const uint8_t *in, size_t len)
{
    const char *error;
    result r;
    sf_status st;

    pthread_once(&quick_once, quick_init);
    if ((st = inserts_check(c)) != SF_OK) {
        c->st->error = "an insert is not a UTF-8 key and value";
        return st;
    }
    memset(c->held, 0, sizeof(c->held));
    for (unsigned f = 0; f < SF_OTLP_FIELD_COUNT; f++) {
        c->verdict[f] = (uint8_t)field_verdict(c->edit, f);
        c->caps[f] = c->edit != NULL ? c->edit->cap[f] : 0;
        for (unsigned i = 0; c->verdict[f] != FV_AS_IS && i < n_held_of[f]; i++)
            c->held[held_of[f][i].kind] |= held_of[f][i].nums;
    }
    c->ids = c->edit != NULL && c->edit->id_fn != NULL;
    c->budget = 2 * len + 4096;
    c->general = false;
    st = stream(c, root, in, in + len, 0, &r);
    if (st != SF_RESTART)
        return st;
    error = c->st->error;
    memset(c->st, 0, sizeof(*c->st));
    c->st->error = error;
    memset(c->drift_other, 0, sizeof(c->drift_other));
    c->drift_next = 0;
    c->len = 0;
    c->matching = 0;
    c->budget = 2 * len + 4096;
    c->general = true;
    return generic(c, root, in, in + len, 0, &r);
}

/* The output buffer's first size. Sized for the input, a request the edit
 * thins (the sample allowlist keeps 35 % of its bytes) was copied once
 * more at the end into a fitting buffer (the queue holds and counts
 * batches at their real size): 176 KB per 512-span call, as much as the
 * exporter's merge copy. So each thread remembers, per edit and root
 * message, how much of its last request's input came out, and asks the
 * pool for that much with a sixteenth and 4 KiB to spare; a request that
 * keeps more grows the buffer (grow(), one copy of what is written so
 * far), as one of unknown shape did before. An estimate only: an edit freed
 * and another allocated at its address starts from the old one's figure. */
#define OUT_MEMO_SLOTS 8
static _Thread_local struct out_memo {
    const sf_otlp_edit *edit;
    unsigned root;
    uint32_t per_1024;          /* output bytes per 1,024 input bytes, the last call */
} out_memo[OUT_MEMO_SLOTS];

static struct out_memo *out_memo_of(const sf_otlp_edit *edit, unsigned root)
{
    return &out_memo[((uintptr_t)edit >> 4 ^ root) % OUT_MEMO_SLOTS];
}

static size_t out_estimate(const sf_otlp_edit *edit, unsigned root, size_t len)
{
    const struct out_memo *m = out_memo_of(edit, root);
    size_t est;

    if (edit == NULL || m->edit != edit || m->root != root || len > SIZE_MAX / 2048)
        return len + 64;
    est = len / 1024 * m->per_1024 + (len % 1024) * m->per_1024 / 1024 + len / 16 + 4096;
    return est < len + 64 ? est : len + 64;
}

static void out_remember(const sf_otlp_edit *edit, unsigned root, size_t in_len, size_t out_len)
{
    struct out_memo *m = out_memo_of(edit, root);

    if (edit == NULL || in_len == 0 || in_len > SIZE_MAX / 2048)
        return;
    m->edit = edit;
    m->root = root;
    m->per_1024 = out_len >= in_len ? 1024 : (uint32_t)(out_len * 1024 / in_len);
}

/* sf_otlp_rewrite for a request whose root message is `root`. */
static sf_status rewrite(unsigned root, const uint8_t *in, size_t len, unsigned max_depth,
                         const sf_otlp_edit *edit, sf_buf **out, sf_otlp_stats *stats)
{
    sf_otlp_stats local;
    cx c = { .edit = edit, .max_depth = max_depth };
    sf_status st;

    c.st = stats != NULL ? stats : &local;
    memset(c.st, 0, sizeof(*c.st));
    c.in = in;
    c.in_end = in != NULL ? in + len : in;
    /* ids_ahead walks the spans of a traces request */
    c.ahead_level = root == SF_OTLP_MSG_REQUEST && in != NULL ? 0 : -1;
    c.ahead_pos[0] = c.in;
    c.ahead_end[0] = c.in_end;
    if (out != NULL) {
        *out = NULL;
        if (len > SIZE_MAX / 4)
            return SF_ENOMEM;
        c.cap = out_estimate(edit, root, len);
        c.buf = sf_buf_take(c.cap);     /* warm, when this thread uses the pool */
        if (c.buf == NULL)
            return SF_ENOMEM;
    } else {
        c.discard = 1;
    }
    st = run(&c, root, in != NULL ? in : (const uint8_t *)"", in != NULL ? len : 0);
    if (edit != NULL && edit->release != NULL && c.state != NULL)
        edit->release(edit->ctx, c.state);
    sf_free(c.name.data);
    sf_free(c.memo);
    sf_free(c.seen_key);
    sf_free(c.seen_len);
    if (out == NULL)
        return st;
    if (st != SF_OK) {
        sf_buf_unref(c.buf);
        return st;
    }
    out_remember(edit, root, len, c.len);
    /* The buffer was sized for the input (or grown past the estimate): give back what filtering freed,
     * so queued batches are counted (and held) at their real size (a
     * pooled one is copied into a fitting one: sf_buf_resize). */
    if (c.cap - c.len > 4096 && c.len < c.cap / 4 * 3) {
        sf_buf *small = sf_buf_resize(c.buf, c.len, c.len);

        if (small != NULL)
            c.buf = small;
    }
    c.buf->len = c.len;
    c.buf->spans = c.st->spans;
    *out = c.buf;
    return SF_OK;
}

sf_status sf_otlp_rewrite(const uint8_t *in, size_t len, unsigned max_depth,
                          const sf_otlp_edit *edit, sf_buf **out, sf_otlp_stats *stats)
{
    return rewrite(SF_OTLP_MSG_REQUEST, in, len, max_depth, edit, out, stats);
}

sf_status sf_otlp_scan(const uint8_t *in, size_t len, unsigned max_depth, size_t *spans)
{
    sf_otlp_stats stats;
    sf_status st = sf_otlp_rewrite(in, len, max_depth, NULL, NULL, &stats);

    if (spans != NULL)
        *spans = stats.spans;
    return st;
}

size_t sf_otlp_count_matching_spans(const uint8_t *data, size_t len, size_t n,
                                    const char *const *keys, const char *const *values)
{
    sf_otlp_stats stats;
    cx c = { .max_depth = 256, .discard = 1, .n_match = n, .keys = keys, .values = values };

    if (data == NULL || n > 64 || (n > 0 && (keys == NULL || values == NULL)))
        return 0;
    memset(&stats, 0, sizeof(stats));
    c.st = &stats;
    if (run(&c, SF_OTLP_MSG_REQUEST, data, len) != SF_OK)
        return 0;
    return n == 0 ? stats.spans : c.matching;
}

size_t sf_otlp_drop_resources(const uint8_t *in, size_t len,
                              bool (*keep)(void *ctx, const uint8_t *rs, size_t n), void *ctx,
                              uint8_t *out, size_t *out_len)
{
    sf_otlp_stats stats;
    cx c = { .max_depth = 256, .discard = 1 };
    const uint8_t *p = in, *end = in + len;
    size_t dropped = 0, w = 0;

    memset(&stats, 0, sizeof(stats));
    c.st = &stats;
    while (in != NULL && p < end) {
        fld f;

        /* a top level that does not read as fields is the codec's to refuse */
        if (next_field(&c, p, end, &f, 0) != SF_OK || f.wt == WT_EGROUP)
            return 0;
        if (f.num == 1 && f.wt == WT_LEN && !keep(ctx, f.start, (size_t)(f.end - f.start))) {
            dropped++;
        } else {
            memcpy(out + w, f.start, (size_t)(f.end - f.start));
            w += (size_t)(f.end - f.start);
        }
        p = f.end;
    }
    if (dropped > 0)
        *out_len = w;
    return dropped;
}

sf_otlp_msg sf_otlp_signal_request(sf_signal s)
{
    static const sf_otlp_msg roots[SF_SIGNAL_COUNT] = {
        [SF_SIGNAL_TRACES] = SF_OTLP_MSG_REQUEST,
        [SF_SIGNAL_LOGS] = SF_OTLP_MSG_LOGS_REQUEST,
        [SF_SIGNAL_METRICS] = SF_OTLP_MSG_METRICS_REQUEST,
    };

    return roots[s];
}

sf_status sf_otlp_rewrite_signal(sf_signal s, const uint8_t *in, size_t len, unsigned max_depth,
                                 const sf_otlp_edit *edit, sf_buf **out, sf_otlp_stats *stats)
{
    if ((unsigned)s < SF_SIGNAL_COUNT)
        return rewrite(sf_otlp_signal_request(s), in, len, max_depth, edit, out, stats);
    if (out != NULL)
        *out = NULL;
    if (stats != NULL) {
        memset(stats, 0, sizeof(*stats));
        stats->error = "unknown signal";
    }
    return SF_UNSUPPORTED;
}

sf_status sf_otlp_scan_signal(sf_signal s, const uint8_t *in, size_t len, unsigned max_depth,
                              size_t *items)
{
    sf_otlp_stats stats;
    sf_status st = sf_otlp_rewrite_signal(s, in, len, max_depth, NULL, NULL, &stats);

    if (items != NULL)
        *items = stats.spans;
    return st;
}

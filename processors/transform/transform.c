/* processors/transform/transform.c: the `transform` processor on the data
 * path. Each of its programs (transform_config.c: trace_statements,
 * log_statements, metric_statements) is compiled at create into a codec
 * edit (sf_otlp_wire.h) for its signal: per context, one keyset holding
 * every key its statements name with that key's verdict and the verdict
 * for every other key; the name rules as PCRE2 code (JIT where available);
 * the fields to clear; the log body's rule; whether exemplars stay. The
 * core applies the edit of the batch's signal in the pass that validates
 * and canonicalises each request, and accounts for it; transform_edited
 * adds the transform's own counts.
 *
 * DESIGN: transform_edited and the edit's functions run concurrently on receiver
 * threads. The compiled program is read-only after create; a call's only
 * state is its PCRE2 match data (one per codec call, from rename's `state`)
 * and the component's atomic counters. What can fail is a name rule (the
 * regex hit its match or depth limit) and memory: under error_mode
 * propagate a failed rule fails the request closed (SF_FILTER, the batch
 * is dropped and counted); under ignore/silent that rule leaves the name as
 * it was (fail open, as upstream). */
#define PCRE2_CODE_UNIT_WIDTH 8
/* Pseudonyms are HMAC-SHA256 on OpenSSL's SHA256_CTX with the key's pads
 * hashed once (hmac()): EVP_MAC costs more than twice as much a value, and
 * with pseudonymize_ids a span has three. Ids the codec asks for together
 * continue the same pads four at a time on the SHA extensions
 * (pseudonym_ids). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "transform.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- keys ------------------------------------------------------------------ */

/* Bounds on one match, so a pattern cannot take unbounded time on a name. */
#define SF_TRANSFORM_MATCH_LIMIT 100000
#define SF_TRANSFORM_DEPTH_LIMIT 1000

/* The type's own series (sf_counters.values). */
enum {
    TM_FAILED_VALUES, TM_DUPLICATE_KEYS, TM_RULES_SKIPPED, TM_PSEUDONYMS, TM_DROPPED_BODIES,
    TM_DROPPED_EXEMPLARS, TM_CAPPED_EVENTS, TM_CAPPED_LINKS, TM_DROPPED_POINTS,
    TM_PSEUDONYMIZED_IDS, TM_CAPPED_SPANS, TM_CAPPED_RESOURCES, TM_CAPPED_SCOPES, TM_COUNT
};
_Static_assert(TM_COUNT <= SF_TYPE_METRICS_MAX, "the transform's series do not fit sf_counters");

/* Drift: the (context, key) pairs already logged, a bounded number. */
#define SF_TRANSFORM_DRIFT_KEYS 256

typedef enum frule_kind { FR_SUBSTITUTE, FR_ALLOW, FR_SET } frule_kind;

/* One rule on a string field, in statement order: replace_pattern
 * (FR_SUBSTITUTE), set(...) where not IsMatch(...) (FR_ALLOW: a value the
 * pattern does not match becomes `text`), set(...) (FR_SET). */
typedef struct field_rule {
    frule_kind kind;
    pcre2_code *code;           /* SUBSTITUTE, ALLOW */
    PCRE2_SPTR text;            /* the replacement, or the value set */
    size_t text_len;
    bool literal;               /* SUBSTITUTE: a replacement with no `$` and a pattern
                                 * that cannot match empty: spliced in by hand */
    int error_mode;             /* the statement's */
} field_rule;

typedef struct transform_ctx transform_ctx;

/* One program compiled: the edit of one signal. Its edit's `ctx` is this
 * part, which its functions read (and `t` for what the signals share). */
typedef struct sig_part {
    transform_ctx *t;
    const sf_transform_program *prog;   /* NULL: the list was not written */
    bool active;                        /* the edit runs (else the signal passes as it is) */
    sf_otlp_keyset *keys[SF_OTLP_CTX_COUNT];
    /* per context, the compiled rules of the keys that have one */
    sf_otlp_value_rule *vrules[SF_OTLP_CTX_COUNT];
    size_t n_vrules[SF_OTLP_CTX_COUNT];
    size_t n_frules[SF_OTLP_FIELD_COUNT];
    field_rule *frules[SF_OTLP_FIELD_COUNT];
    sf_otlp_value_rule body_rule;       /* the log body's condition, compiled */
    sf_otlp_edit edit;
} sig_part;

struct transform_ctx {
    const sf_transform_config *cfg;
    sig_part parts[SF_SIGNAL_COUNT];
    pcre2_code **codes;         /* every value-rule regex, to free */
    size_t n_codes;
    pcre2_match_context *mctx;
    uint32_t max_groups;        /* largest capture count + 1, for match data */
    size_t max_string;          /* the bound on every string field after its rules */
    uint8_t *key;               /* the pseudonym key, or NULL; cleansed at destroy */
    size_t key_len;
    /* SHA-256 after the key's inner and outer pad (HMAC's first block
     * each), copied per value (hmac()); cleansed at destroy */
    SHA256_CTX inner, outer;
    _Atomic uint64_t rules_skipped;     /* failed rules (limits), any error mode */
    _Atomic uint64_t rules_reported;    /* ... of which counted and logged */
    sf_counters *counters;
    pthread_mutex_t drift_lock;
    size_t n_drift;
    struct {
        uint8_t ctx;
        bool failed;
        const char *id;                 /* the codec's drift key (the keyset's), NULL: other */
        char key[65];
        _Atomic uint64_t count;         /* removals (spanfence_processor_transform_removed_keys) */
    } drift[SF_TRANSFORM_DRIFT_KEYS];
};

/* ---- pseudonyms ------------------------------------------------------------ */

/* One codec call's scratch for the rules (its `state`): PCRE2's match data,
 * the second of the two buffers the field rules alternate between, and the
 * HMAC context. */
typedef struct rule_state rule_state;
struct rule_state {
    pcre2_match_data *md;
    sf_otlp_text tmp;
    /* the last string pseudonymized and its pseudonym: SGLang's root span
     * carries the same id twice (rid, gen_ai.request.id) */
    uint8_t last_in[64], last_out[64];
    size_t last_in_len, last_out_len;
};

static rule_state *state_get(const transform_ctx *t, void **state);

static bool lower_hex(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    }
    return true;
}

/* HMAC-SHA256(key, tag || in), into mac[32]: the key's pads were hashed
 * once at create (hmac_pads), each value continues copies of them. */
static bool hmac(const transform_ctx *t, void **state, uint8_t tag, const uint8_t *in,
                 size_t len, uint8_t mac[32])
{
    SHA256_CTX h = t->inner;

    (void)state;
    SHA256_Update(&h, &tag, 1);
    SHA256_Update(&h, in, len);
    SHA256_Final(mac, &h);
    h = t->outer;
    SHA256_Update(&h, mac, 32);
    SHA256_Final(mac, &h);
    OPENSSL_cleanse(&h, sizeof(h));     /* held the keyed state */
    return true;
}

/* A string id's pseudonym, in its shape: lowercase hex of length 1..64
 * stays lowercase hex of the same length, "0x" and lowercase hex keeps both;
 * any other string becomes 32 lowercase hex digits. */
static bool pseudonym_str(const void *ctx, void **state, const uint8_t *in, size_t len,
                          uint8_t *out, size_t *out_len)
{
    static const char digits[] = "0123456789abcdef";
    const transform_ctx *t = ((const sig_part *)ctx)->t;
    /* Fixed lengths, whatever the input's: "0x" and hex (str(hex(n)),
     * SGLang's bootstrap_room, a 64-bit room) keeps its prefix and becomes
     * 16 hex digits; hex of up to 32 digits (a uuid4().hex rid) 32, longer
     * hex 64, anything else 32. A length the client chose would otherwise
     * leave with it (4 bits a request), and a 1-digit room would have 16
     * pseudonyms. */
    const size_t prefix = len >= 3 && len <= 64 && in[0] == '0' && in[1] == 'x' &&
                          lower_hex(in + 2, len - 2) ? 2 : 0;
    size_t n = prefix ? 16 : len > 32 && len <= 64 && lower_hex(in, len) ? 64 : 32;
    rule_state *rs = state_get(t, state);
    uint8_t mac[32];

    if (rs != NULL && rs->last_in_len == len && len > 0 && len <= sizeof(rs->last_in) &&
        memcmp(rs->last_in, in, len) == 0) {
        memcpy(out, rs->last_out, rs->last_out_len);
        *out_len = rs->last_out_len;
        return true;
    }
    if (!hmac(t, state, 's', in, len, mac))
        return false;
    memcpy(out, "0x", prefix);
    for (size_t i = 0; i < n; i++)
        out[prefix + i] = (uint8_t)digits[(mac[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
    *out_len = prefix + n;
    if (rs != NULL && len <= sizeof(rs->last_in)) {
        memcpy(rs->last_in, in, len);
        rs->last_in_len = len;
        memcpy(rs->last_out, out, *out_len);
        rs->last_out_len = *out_len;
    }
    return true;
}

/* A trace id's (16 bytes) or span id's (8) pseudonym: the HMAC of the id
 * under a tag of its own ('T', 'S': never an attribute's pseudonym of the
 * same bytes), truncated to the id's length, never all zero. The same id
 * gets the same pseudonym in every span, request and signal (one key), so
 * parents, children and links still meet. */
static bool pseudonym_id(const void *ctx, void **state, const uint8_t *in, size_t len,
                         uint8_t *out)
{
    const transform_ctx *t = ((const sig_part *)ctx)->t;
    uint8_t mac[32], any = 0;

    if ((len != 16 && len != 8) || !hmac(t, state, len == 16 ? 'T' : 'S', in, len, mac))
        return false;
    for (size_t i = 0; i < len; i++)
        any |= mac[i];
    if (any == 0)
        mac[len - 1] = 1;       /* a valid id stays valid (2^-64) */
    memcpy(out, mac, len);
    return true;
}

/* ---- pseudonyms of ids, four at a time ----------------------------------------- */

/* pseudonym_id for several ids of one length (the codec's ids_fn: the ids
 * it meets next in a traces request). HMAC-SHA256 is two SHA-256 blocks an
 * id, one after the other; the SHA extensions' rounds wait on each other
 * within a block, so four ids' blocks interleaved take about as long as one
 * or two (~50 against ~110 ns an id). Where the CPU has no SHA extensions
 * (or under valgrind, which hides them) ids_fn is NULL and each id goes
 * through pseudonym_id. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define SF_SHA_NI 1
/* unrolled (the lanes' arrays live in registers only when every index is
 * a constant: GCC's O3 here, the build's O2 elsewhere) */
#if defined(__clang__)
#define SHA_NI __attribute__((target("sha,sse4.1,ssse3")))
#else
#define SHA_NI __attribute__((target("sha,sse4.1,ssse3"), optimize("O3")))
#endif

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
};

/* Whether this CPU has the SHA extensions and the SSE4.1 and SSSE3 the
 * rounds' shuffles need. */
static bool sha_ni_present(void)
{
    unsigned a, b, c, d;

    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3))
        return false;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}

/* One SHA-256 block for each of `lanes` states: st[l] (a..h) continues
 * with the block whose big-endian words are w[l][0..3] (four a vector). */
static inline __attribute__((always_inline)) SHA_NI void
sha_ni_blocks(int lanes, uint32_t st[][8], __m128i w[][4])
{
    __m128i s0[4], s1[4], save0[4], save1[4];

#pragma GCC unroll 4
    for (int l = 0; l < lanes; l++) {
        const __m128i cdab = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&st[l][0]), 0xb1);
        const __m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&st[l][4]), 0x1b);

        save0[l] = s0[l] = _mm_alignr_epi8(cdab, efgh, 8);     /* abef */
        save1[l] = s1[l] = _mm_blend_epi16(efgh, cdab, 0xf0);  /* cdgh */
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
        const __m128i k = _mm_loadu_si128((const __m128i *)&sha256_k[4 * i]);

#pragma GCC unroll 4
        for (int l = 0; l < lanes; l++) {
            __m128i m = _mm_add_epi32(w[l][i & 3], k);

            s1[l] = _mm_sha256rnds2_epu32(s1[l], s0[l], m);
            if (i >= 3 && i < 15) {     /* the schedule's next four words */
                const __m128i t = _mm_alignr_epi8(w[l][i & 3], w[l][(i - 1) & 3], 4);

                w[l][(i + 1) & 3] = _mm_sha256msg2_epu32(_mm_add_epi32(w[l][(i + 1) & 3], t),
                                                         w[l][i & 3]);
            }
            m = _mm_shuffle_epi32(m, 0x0e);
            s0[l] = _mm_sha256rnds2_epu32(s0[l], s1[l], m);
            if (i >= 1 && i < 13)
                w[l][(i - 1) & 3] = _mm_sha256msg1_epu32(w[l][(i - 1) & 3], w[l][i & 3]);
        }
    }
#pragma GCC unroll 4
    for (int l = 0; l < lanes; l++) {
        const __m128i feba = _mm_shuffle_epi32(_mm_add_epi32(s0[l], save0[l]), 0x1b);
        const __m128i dchg = _mm_shuffle_epi32(_mm_add_epi32(s1[l], save1[l]), 0xb1);

        _mm_storeu_si128((__m128i *)&st[l][0], _mm_blend_epi16(feba, dchg, 0xf0));
        _mm_storeu_si128((__m128i *)&st[l][4], _mm_alignr_epi8(dchg, feba, 8));
    }
}

/* HMAC-SHA256(key, tag || in[l][0, lens[l])) for `lanes` ids (each 16
 * bytes, tag 'T', or 8, 'S': one block after the inner pad), pseudonym_id's
 * bytes into out[l]. */
static inline __attribute__((always_inline)) SHA_NI void
hmac_ni(const transform_ctx *t, int lanes, const uint8_t *const *in, const uint8_t *lens,
        uint8_t (*out)[16])
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
    uint32_t st[4][8];
    __m128i w[4][4];
    uint8_t blk[64];

#pragma GCC unroll 4
    for (int l = 0; l < lanes; l++) {
        const size_t len = lens[l];

        memset(blk, 0, sizeof(blk));
        blk[0] = len == 16 ? 'T' : 'S';
        memcpy(blk + 1, in[l], len);
        blk[1 + len] = 0x80;
        blk[62] = (uint8_t)((64 + 1 + len) * 8 >> 8);  /* bits: key pad, tag, id */
        blk[63] = (uint8_t)((64 + 1 + len) * 8);
        for (int k = 0; k < 4; k++)
            w[l][k] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(blk + 16 * k)), bswap);
        memcpy(st[l], t->inner.h, sizeof(st[l]));
    }
    sha_ni_blocks(lanes, st, w);
#pragma GCC unroll 4
    for (int l = 0; l < lanes; l++) {
        /* the inner hash, big-endian: its words are the outer block's first eight */
        w[l][0] = _mm_loadu_si128((const __m128i *)&st[l][0]);
        w[l][1] = _mm_loadu_si128((const __m128i *)&st[l][4]);
        w[l][2] = _mm_set_epi32(0, 0, 0, (int)0x80000000u);
        w[l][3] = _mm_set_epi32((64 + 32) * 8, 0, 0, 0);
        memcpy(st[l], t->outer.h, sizeof(st[l]));
    }
    sha_ni_blocks(lanes, st, w);
#pragma GCC unroll 4
    for (int l = 0; l < lanes; l++) {
        const size_t len = lens[l];
        uint8_t any = 0;

        for (size_t i = 0; i < len; i++) {
            out[l][i] = (uint8_t)(st[l][i / 4] >> (24 - 8 * (i % 4)));
            any |= out[l][i];
        }
        if (any == 0)
            out[l][len - 1] = 1;        /* as pseudonym_id */
    }
    /* held keyed state (explicit_bzero: glibc's vector memset, kept) */
    explicit_bzero(st, sizeof(st));
    explicit_bzero(w, sizeof(w));
    explicit_bzero(blk, sizeof(blk));
}

static SHA_NI bool pseudonym_ids(const void *ctx, void **state, const uint8_t *const *in,
                                 const uint8_t *lens, size_t n, uint8_t (*out)[16])
{
    const transform_ctx *t = ((const sig_part *)ctx)->t;
    size_t i = 0;

    (void)state;
    for (size_t j = 0; j < n; j++) {
        if (lens[j] != 16 && lens[j] != 8)
            return false;
    }
    for (; i + 4 <= n; i += 4)
        hmac_ni(t, 4, in + i, lens + i, out + i);
    if (n - i >= 2) {
        hmac_ni(t, 2, in + i, lens + i, out + i);
        i += 2;
    }
    if (i < n)
        hmac_ni(t, 1, in + i, lens + i, out + i);
    return true;
}
#endif

/* An int id's pseudonym: a non-negative int63 (bootstrap_room's shape). */
static bool pseudonym_int(const void *ctx, void **state, int64_t in, int64_t *out)
{
    const transform_ctx *t = ((const sig_part *)ctx)->t;
    uint8_t be[8], mac[32];
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        be[i] = (uint8_t)((uint64_t)in >> (56 - 8 * i));
    if (!hmac(t, state, 'i', be, sizeof(be), mac))
        return false;
    for (int i = 0; i < 8; i++)
        v = v << 8 | mac[i];
    *out = (int64_t)(v >> 1);
    return true;
}

/* ---- value rules ------------------------------------------------------------ */


static rule_state *state_get(const transform_ctx *t, void **state)
{
    rule_state *rs = *state;

    if (rs != NULL)
        return rs;
    rs = sf_calloc(1, sizeof(*rs));
    if (rs == NULL)
        return NULL;
    rs->md = pcre2_match_data_create(t->max_groups, NULL);
    if (rs->md == NULL) {
        sf_free(rs);
        return NULL;
    }
    *state = rs;
    return rs;
}

static void release(const void *ctx, void *state)
{
    rule_state *rs = state;

    (void)ctx;
    pcre2_match_data_free(rs->md);
    sf_free(rs->tmp.data);
    sf_free(rs);
}

/* pcre2_match by the JIT's direct entry, which skips pcre2_match's checks
 * of options already known good (the same JIT code runs either way, with
 * the same match limit); a pattern the JIT could not compile goes through
 * pcre2_match, interpreted. */
static int rx_match_at(const transform_ctx *t, const pcre2_code *code, const uint8_t *s,
                       size_t n, size_t from, pcre2_match_data *md)
{
    int rc = pcre2_jit_match(code, s, n, from, 0, md, t->mctx);

    if (rc == PCRE2_ERROR_JIT_BADOPTION)
        rc = pcre2_match(code, s, n, from, PCRE2_NO_UTF_CHECK, md, t->mctx);
    return rc;
}

static int rx_match(const transform_ctx *t, const pcre2_code *code, const uint8_t *s, size_t n,
                    pcre2_match_data *md)
{
    return rx_match_at(t, code, s, n, 0, md);
}

/* A value rule's regex on a string: a failed match (limits, memory) counts
 * as not matching (the value is removed) and is counted. */
static bool match_fn(const void *ctx, void **state, const void *regex, const uint8_t *s, size_t n)
{
    transform_ctx *t = ((const sig_part *)ctx)->t;  /* only the atomic counter is written */
    rule_state *rs = state_get(t, state);
    int rc;

    if (rs == NULL)
        return false;
    rc = rx_match(t, regex, s, n, rs->md);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
        atomic_fetch_add_explicit(&t->rules_skipped, 1, memory_order_relaxed);
    return rc >= 0;
}

/* A copy of `rule`'s alternatives into slot, their regexes compiled. */
static sf_status alts_build(transform_ctx *t, const sf_otlp_value_rule *rule,
                            sf_otlp_value_rule *slot)
{
    sf_otlp_value_alt *alts = sf_calloc(rule->n_alts ? rule->n_alts : 1, sizeof(*alts));

    if (alts == NULL)
        return SF_ENOMEM;
    memcpy(alts, rule->alts, rule->n_alts * sizeof(*alts));
    slot->alts = alts;
    slot->n_alts = rule->n_alts;
    for (size_t a = 0; a < slot->n_alts; a++) {
        int err;
        PCRE2_SIZE at;
        pcre2_code *code, **codes;

        if (alts[a].shape != SF_OTLP_STR_REGEX)
            continue;
        code = pcre2_compile((PCRE2_SPTR)alts[a].regex, PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &err, &at, NULL);
        if (code == NULL)
            return SF_ENOMEM;   /* checked at load */
        (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
        codes = sf_realloc(t->codes, (t->n_codes + 1) * sizeof(*codes));
        if (codes == NULL) {
            pcre2_code_free(code);
            return SF_ENOMEM;
        }
        t->codes = codes;
        t->codes[t->n_codes++] = code;
        alts[a].regex = code;
    }
    return SF_OK;
}

/* The rule of `key` in context c: its value rule's alternatives (regexes
 * compiled) and whether it is pseudonymized; *out NULL when it has none. */
static sf_status vrule_build(sig_part *sp, sf_otlp_ctx c, const char *key,
                             sf_otlp_value_rule *slot, const sf_otlp_value_rule **out)
{
    const sf_transform_program *p = sp->prog;
    bool any = false;

    *out = NULL;
    memset(slot, 0, sizeof(*slot));
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);

        if (op->keys.n != 1 || strcmp(op->keys.keys[0], key) != 0)
            continue;
        if (op->kind == SF_RULE_PSEUDONYMIZE) {
            slot->pseudonym = true;
            any = true;
        } else if (op->kind == SF_RULE_VALUE && slot->alts == NULL) {
            sf_status st = alts_build(sp->t, op->rule, slot);

            if (st != SF_OK)
                return st;
            any = true;
        }
    }
    if (any)
        *out = slot;
    return SF_OK;
}

/* A context with nothing kept, or every key kept: is any key named? */
static bool names_keys(sf_rule_kind k)
{
    return k == SF_RULE_KEEP_KEYS || k == SF_RULE_DELETE_KEY ||
           k == SF_RULE_VALUE || k == SF_RULE_PSEUDONYMIZE;
}

/* Context c's statements as one keyset: every key a statement names, with
 * its verdict (sf_transform_keeps_key) and rule, and the verdict for the
 * others (*out stays NULL when c names none and no bound applies). */
static sf_status keyset_build(sig_part *sp, sf_otlp_ctx c, sf_otlp_keyset **out)
{
    const sf_transform_program *p = sp->prog;
    size_t named = 0, n = 0;
    bool active = sp->t->cfg->declared_fields;
    const char **keys;
    const sf_otlp_value_rule **rules;
    bool *keep;
    sf_status st = SF_OK;

    *out = NULL;
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);

        if (!names_keys(op->kind))
            continue;
        active = true;
        named += op->keys.n;
    }
    if (!active)
        return SF_OK;
    keys = sf_calloc(named ? named : 1, sizeof(*keys));
    keep = sf_calloc(named ? named : 1, sizeof(*keep));
    rules = sf_calloc(named ? named : 1, sizeof(*rules));
    sp->vrules[c] = sf_calloc(named ? named : 1, sizeof(sf_otlp_value_rule));
    sp->n_vrules[c] = sp->vrules[c] != NULL ? named : 0;
    if (keys == NULL || keep == NULL || rules == NULL || sp->vrules[c] == NULL) {
        st = SF_ENOMEM;
        goto out_free;
    }
    for (size_t i = 0; i < sf_transform_op_count(p, c) && st == SF_OK; i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);

        if (!names_keys(op->kind))
            continue;
        for (size_t j = 0; j < op->keys.n && st == SF_OK; j++) {
            keys[n] = op->keys.keys[j];
            keep[n] = sf_transform_keeps_key(p, c, keys[n]);
            st = vrule_build(sp, c, keys[n], &sp->vrules[c][n], &rules[n]);
            n++;
        }
    }
    if (st == SF_OK)
        st = sf_otlp_keyset_create_with(n, keys, keep, rules,
                                        sf_transform_has_allowlist(p, c) ||
                                        sp->t->cfg->declared_fields
                                            ? false : true, out);

out_free:
    sf_free(keys);
    sf_free(keep);
    sf_free(rules);
    return st;
}

/* ---- string field rules ---------------------------------------------------------- */

/* The field a rename of context c rewrites. */
static sf_otlp_field name_field(sf_otlp_ctx c)
{
    return c == SF_OTLP_SPAN ? SF_OTLP_FIELD_SPAN_NAME : SF_OTLP_FIELD_EVENT_NAME;
}

/* A rule that could not run (PCRE2's match limit, memory): counted; under
 * error_mode propagate the request fails (SF_FILTER), else the value stays
 * as it was before the rule. */
static bool rule_failed(transform_ctx *t, const field_rule *r)
{
    atomic_fetch_add_explicit(&t->rules_skipped, 1, memory_order_relaxed);
    return r->error_mode == SF_ERROR_MODE_PROPAGATE;
}

/* Append p[0, n) to t at *at. */
static sf_status text_put(sf_otlp_text *t, size_t *at, const void *p, size_t n)
{
    if (*at + n + 1 > t->cap && sf_otlp_text_reserve(t, 2 * (*at + n) + 1) != SF_OK)
        return SF_ENOMEM;
    memcpy(t->data + *at, p, n);
    *at += n;
    return SF_OK;
}

/* A literal replace_pattern (field_rule.literal) on subject[0, len), whose
 * first match is in md, into dst: every match, left to right, replaced by
 * the text, as pcre2_substitute with PCRE2_SUBSTITUTE_GLOBAL does when no
 * match can be empty. SF_FILTER when a later match fails (limits): the
 * caller treats the rule as failed; SF_INVALID when a match ends before it
 * starts (\K): the caller hands the rule to pcre2_substitute. */
static sf_status splice_literal(transform_ctx *t, const field_rule *r, const uint8_t *subject,
                                size_t len, pcre2_match_data *md, sf_otlp_text *dst, size_t *n)
{
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t from = 0;
    int rc;

    *n = 0;
    do {
        size_t s0 = ov[0], s1 = ov[1];

        if (s0 < from || s1 <= s0 || s1 > len)
            return SF_INVALID;
        if (text_put(dst, n, subject + from, s0 - from) != SF_OK ||
            text_put(dst, n, r->text, r->text_len) != SF_OK)
            return SF_ENOMEM;
        from = s1;
        rc = rx_match_at(t, r->code, subject, len, from, md);
    } while (rc >= 0);
    if (rc != PCRE2_ERROR_NOMATCH)
        return SF_FILTER;
    return text_put(dst, n, subject + from, len - from);
}

/* pcre2_substitute of rule r on subject[0, len) into dst, from the first
 * match in md (matched again first when `rematch`). SF_FILTER when the rule
 * failed (limits); SF_ENOMEM. */
static sf_status substitute(transform_ctx *t, const field_rule *r, const uint8_t *subject,
                            size_t len, bool rematch, pcre2_match_data *md, sf_otlp_text *dst,
                            size_t *n)
{
    int rc;

    if (sf_otlp_text_reserve(dst, len + 64) != SF_OK)
        return SF_ENOMEM;
    for (;;) {
        if (rematch && rx_match(t, r->code, subject, len, md) < 0)
            return SF_FILTER;
        *n = dst->cap;
        rc = pcre2_substitute(r->code, subject, len, 0,
                              PCRE2_SUBSTITUTE_MATCHED | PCRE2_SUBSTITUTE_GLOBAL |
                              PCRE2_SUBSTITUTE_OVERFLOW_LENGTH | PCRE2_SUBSTITUTE_UNSET_EMPTY |
                              PCRE2_NO_UTF_CHECK, md, t->mctx, r->text, r->text_len, dst->data,
                              n);
        if (rc != PCRE2_ERROR_NOMEMORY)
            return rc >= 0 ? SF_OK : SF_FILTER;
        if (sf_otlp_text_reserve(dst, *n + 1) != SF_OK)
            return SF_ENOMEM;
        /* measuring the whole result matched on past the first match:
         * match again for PCRE2_SUBSTITUTE_MATCHED */
        rematch = true;
    }
}

/* Every rule of field f in order on in[0, len); the result in *out. The
 * value moves between out and the state's scratch buffer only when a rule
 * changes it: a pattern is matched first (JIT), and pcre2_substitute runs,
 * from that match, only on a value it matches. */
static sf_status apply_rules(const sig_part *sp, void **state, sf_otlp_field f,
                             const uint8_t *in, size_t len, sf_otlp_text *out)
{
    transform_ctx *t = sp->t;
    rule_state *rs = state_get(t, state);
    const uint8_t *subject = in;
    size_t subject_len = len;

    if (rs == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < sp->n_frules[f]; i++) {
        const field_rule *r = &sp->frules[f][i];
        sf_otlp_text *dst = subject == out->data ? &rs->tmp : out;  /* not the subject's */
        PCRE2_SIZE n = 0;
        int rc = 0;

        if (r->kind != FR_SET) {
            rc = rx_match(t, r->code, subject, subject_len, rs->md);
            if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && rule_failed(t, r))
                return SF_FILTER;
            if (r->kind == FR_SUBSTITUTE && rc < 0)
                continue;       /* nothing to replace, or a failed rule: as it was */
            if (r->kind == FR_ALLOW && rc >= 0)
                continue;       /* allowed: kept as it is (a failed match is not) */
        }
        if (r->kind != FR_SUBSTITUTE) {
            /* set, or a value the pattern does not allow: the fixed value */
            if (sf_otlp_text_reserve(dst, r->text_len + 1) != SF_OK)
                return SF_ENOMEM;
            memcpy(dst->data, r->text, r->text_len);
            n = r->text_len;
        } else {
            sf_status sst = r->literal ? splice_literal(t, r, subject, subject_len, rs->md, dst,
                                                        &n)
                                       : SF_INVALID;

            if (sst == SF_INVALID)      /* not literal, or \K: PCRE2's own substitution */
                sst = substitute(t, r, subject, subject_len, r->literal, rs->md, dst, &n);
            if (sst == SF_ENOMEM)
                return SF_ENOMEM;
            if (sst != SF_OK) {
                if (rule_failed(t, r))
                    return SF_FILTER;
                continue;       /* the value as it was before this rule */
            }
        }
        dst->len = n;
        subject = dst->data;
        subject_len = n;
    }
    if (t->max_string != 0 && subject_len > t->max_string)
        subject_len = 0;                /* past the bound: the field leaves empty */
    if (subject != out->data) {         /* the last result is in tmp, or no rule changed it */
        if (sf_otlp_text_reserve(out, subject_len + 1) != SF_OK)
            return SF_ENOMEM;
        memmove(out->data, subject, subject_len);
    }
    out->len = subject_len;
    return SF_OK;
}

/* A governed field without a rule (declared mode, a signal whose list is
 * not written) leaves empty: nothing without a rule leaves. */
static sf_status rename_fn(const void *ctx, void **state, sf_otlp_ctx c, const uint8_t *in,
                           size_t len, sf_otlp_text *out)
{
    const sig_part *sp = ctx;

    if (sp->n_frules[name_field(c)] == 0) {
        out->len = 0;
        return SF_OK;
    }
    return apply_rules(sp, state, name_field(c), in, len, out);
}

static sf_status field_fn(const void *ctx, void **state, sf_otlp_field f, const uint8_t *in,
                          size_t len, sf_otlp_text *out)
{
    const sig_part *sp = ctx;

    if (sp->n_frules[f] == 0) {
        out->len = 0;
        return SF_OK;
    }
    return apply_rules(sp, state, f, in, len, out);
}

/* The field a statement governs: replace_pattern and set on a name, set on
 * the other fields; SF_OTLP_FIELD_NONE for the rest. */
static sf_otlp_field op_field(const sf_transform_op *op)
{
    if (op->kind == SF_RULE_REPLACE_PATTERN)
        return op->ctx == SF_OTLP_SPAN ? SF_OTLP_FIELD_SPAN_NAME : SF_OTLP_FIELD_EVENT_NAME;
    if (op->kind == SF_RULE_SET_FIELD && op->field != SF_OTLP_FIELD_ENTITY_REFS &&
        op->field != SF_OTLP_FIELD_LOG_BODY && op->field != SF_OTLP_FIELD_EXEMPLARS)
        return op->field;       /* the body and exemplars are not strings */
    return SF_OTLP_FIELD_NONE;
}

static sf_status frules_build(sig_part *sp, sf_otlp_ctx c)
{
    transform_ctx *t = sp->t;
    const sf_transform_program *p = sp->prog;

    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);
        const sf_otlp_field f = op_field(op);
        field_rule *r, *grown;
        uint32_t groups = 0;
        int err;
        PCRE2_SIZE at;

        if (f == SF_OTLP_FIELD_NONE)
            continue;
        grown = sf_realloc(sp->frules[f], (sp->n_frules[f] + 1) * sizeof(field_rule));
        if (grown == NULL)
            return SF_ENOMEM;
        sp->frules[f] = grown;
        r = &sp->frules[f][sp->n_frules[f]++];
        memset(r, 0, sizeof(*r));
        r->kind = op->kind == SF_RULE_REPLACE_PATTERN ? FR_SUBSTITUTE
                  : op->pattern != NULL ? FR_ALLOW : FR_SET;
        r->text = (PCRE2_SPTR)op->replacement;
        r->text_len = strlen(op->replacement);
        r->error_mode = sf_transform_op_error_mode(t->cfg, op);
        if (r->kind == FR_SET)
            continue;
        r->code = pcre2_compile((PCRE2_SPTR)op->pattern, PCRE2_ZERO_TERMINATED,
                                r->kind == FR_ALLOW ? PCRE2_UTF | PCRE2_DOLLAR_ENDONLY
                                                    : PCRE2_UTF, &err, &at, NULL);
        if (r->code == NULL) {
            /* checked at load: only memory can make it fail here */
            sf_error("processor transform: pattern '%s' does not compile", op->pattern);
            return SF_CONFIG;
        }
        (void)pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  /* interpreted without JIT */
        pcre2_pattern_info(r->code, PCRE2_INFO_CAPTURECOUNT, &groups);
        if (r->kind == FR_SUBSTITUTE) {
            uint32_t minlength = 0;

            pcre2_pattern_info(r->code, PCRE2_INFO_MINLENGTH, &minlength);
            r->literal = minlength > 0 && memchr(r->text, '$', r->text_len) == NULL;
        }
        if (groups + 1 > t->max_groups)
            t->max_groups = groups + 1;
    }
    return SF_OK;
}

/* ---- the component ------------------------------------------------------------- */

static void transform_destroy(sf_component *self);

/* Compile the program of `list` into its part's edit. A part whose list
 * was not written stays inactive (the signal passes untouched, as
 * upstream), except traces (the edit always runs, as before there were
 * other lists) and in declared mode (nothing without a rule leaves). */
static sf_status part_build(transform_ctx *t, sf_signal list)
{
    const sf_transform_config *cfg = t->cfg;
    sig_part *sp = &t->parts[list];
    const sf_transform_program *p = sf_transform_program_of(cfg, list);
    const sf_transform_op *body;
    sf_status st;

    sp->t = t;
    sp->prog = p;
    sp->active = p != NULL || cfg->declared_fields || list == SF_SIGNAL_TRACES;
    if (!sp->active)
        return SF_OK;
    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
        if (!sf_transform_list_has(list, (sf_otlp_ctx)c))
            continue;   /* a context of another signal */
        st = keyset_build(sp, (sf_otlp_ctx)c, &sp->keys[c]);
        if (st == SF_OK)
            st = frules_build(sp, (sf_otlp_ctx)c);
        if (st != SF_OK)
            return st;
        sp->edit.keys[c] = sp->keys[c];
        if (sf_transform_clears_trace_state(p, (sf_otlp_ctx)c))
            sp->edit.clear_trace_state |= SF_OTLP_CTX_BIT(c);
    }
    if (sp->n_frules[SF_OTLP_FIELD_SPAN_NAME] > 0)
        sp->edit.rename |= SF_OTLP_CTX_BIT(SF_OTLP_SPAN);
    if (sp->n_frules[SF_OTLP_FIELD_EVENT_NAME] > 0)
        sp->edit.rename |= SF_OTLP_CTX_BIT(SF_OTLP_SPANEVENT);
    for (int f = SF_OTLP_FIELD_SCOPE_NAME; f < SF_OTLP_FIELD_COUNT; f++) {
        if (sp->n_frules[f] > 0)
            sp->edit.fields |= SF_OTLP_FIELD_BIT(f);
    }
    if (sf_transform_field_op(p, SF_OTLP_FIELD_ENTITY_REFS) != NULL)
        sp->edit.fields |= SF_OTLP_FIELD_BIT(SF_OTLP_FIELD_ENTITY_REFS);
    /* the body of a log that log_statements judge leaves only when its rule
     * keeps it (the fence's default, not upstream's: a body is where
     * prompts end up) */
    body = sf_transform_field_op(p, SF_OTLP_FIELD_LOG_BODY);
    if (list == SF_SIGNAL_LOGS)
        sp->edit.fields |= SF_OTLP_FIELD_BIT(SF_OTLP_FIELD_LOG_BODY);
    if (body != NULL && body->rule != NULL) {
        st = alts_build(t, body->rule, &sp->body_rule);
        if (st != SF_OK)
            return st;
        sp->edit.body_rule = &sp->body_rule;
    }
    /* exemplars of metrics that metric_statements judge leave only with
     * keep_exemplars(exemplars) (likewise the fence's default) */
    if (list == SF_SIGNAL_METRICS)
        sp->edit.fields |= SF_OTLP_FIELD_BIT(SF_OTLP_FIELD_EXEMPLARS);
    sp->edit.keep_exemplars = sf_transform_keeps_exemplars(p);
    if (cfg->declared_fields) {
        /* a string field no rule keeps leaves empty; the body and
         * exemplars go */
        for (int f = SF_OTLP_FIELD_SCOPE_NAME; f < SF_OTLP_FIELD_COUNT; f++)
            sp->edit.fields |= SF_OTLP_FIELD_BIT(f);
        sp->edit.one_value_per_key = true;
        if (p == NULL && list == SF_SIGNAL_TRACES) {
            /* traces with no trace_statements (declared mode only checks
             * the lists written): names empty, status message and
             * trace_state cleared, as the rules declared mode asks for */
            sp->edit.rename |= SF_OTLP_CTX_BIT(SF_OTLP_SPAN) | SF_OTLP_CTX_BIT(SF_OTLP_SPANEVENT);
            sp->edit.clear_trace_state |= SF_OTLP_CTX_BIT(SF_OTLP_SPAN) |
                                          SF_OTLP_CTX_BIT(SF_OTLP_LINK);
        }
    }
    sp->edit.ctx = sp;
    sp->edit.clear_status_message = sf_transform_clears_status_message(p) ||
                                    (cfg->declared_fields && p == NULL &&
                                     list == SF_SIGNAL_TRACES);
    sp->edit.scalar_values_only = cfg->kept_value_types == SF_TRANSFORM_VALUES_SCALAR;
    sp->edit.single_values_only = cfg->kept_value_types == SF_TRANSFORM_VALUES_SINGLE;
    if (list == SF_SIGNAL_METRICS) {
        /* numbers that are numbers: declared mode checks every histogram
         * point; histogram_bounds pins the bounds of the metrics it names */
        sp->edit.check_histograms = cfg->declared_fields || cfg->n_bounds > 0;
        sp->edit.n_bounds = cfg->n_bounds;
        sp->edit.bounds = cfg->bounds;
    }
    if (list == SF_SIGNAL_TRACES) {
        sp->edit.cap[SF_OTLP_FIELD_SPAN_EVENTS] = (uint32_t)cfg->max_events_per_span;
        sp->edit.cap[SF_OTLP_FIELD_SPAN_LINKS] = (uint32_t)cfg->max_links_per_span;
        sp->edit.cap[SF_OTLP_FIELD_SPANS] = (uint32_t)cfg->max_spans_per_request;
        sp->edit.cap[SF_OTLP_FIELD_RESOURCE_SPANS] = (uint32_t)cfg->max_resources_per_request;
        sp->edit.cap[SF_OTLP_FIELD_SCOPE_SPANS] = (uint32_t)cfg->max_scopes_per_resource;
    }
    /* every signal's ids: a log record's trace_id and span_id name the
     * same spans as the traces' */
    sp->edit.id_fn = t->key != NULL && cfg->pseudonymize_ids ? pseudonym_id : NULL;
#ifdef SF_SHA_NI
    sp->edit.ids_fn = sp->edit.id_fn != NULL && sha_ni_present() ? pseudonym_ids : NULL;
#endif
    sp->edit.max_string_length = t->max_string;
    sp->edit.rename_fn = rename_fn;
    sp->edit.field_fn = field_fn;
    sp->edit.match_fn = match_fn;
    sp->edit.pseudonym_fn = t->key != NULL ? pseudonym_str : NULL;
    sp->edit.pseudonym_int_fn = t->key != NULL ? pseudonym_int : NULL;
    sp->edit.release = release;
    return SF_OK;
}

/* HMAC's two pads of the key (hashed first when longer than a block),
 * each hashed as the first block of a SHA-256 that hmac() continues. */
static void hmac_pads(transform_ctx *t)
{
    uint8_t k[SHA256_CBLOCK] = { 0 }, pad[SHA256_CBLOCK];

    if (t->key_len > sizeof(k))
        SHA256(t->key, t->key_len, k);
    else
        memcpy(k, t->key, t->key_len);
    for (size_t i = 0; i < sizeof(pad); i++)
        pad[i] = k[i] ^ 0x36;
    SHA256_Init(&t->inner);
    SHA256_Update(&t->inner, pad, sizeof(pad));
    for (size_t i = 0; i < sizeof(pad); i++)
        pad[i] = k[i] ^ 0x5c;
    SHA256_Init(&t->outer);
    SHA256_Update(&t->outer, pad, sizeof(pad));
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(pad, sizeof(pad));
}

static sf_status transform_create(sf_component *self, const void *config)
{
    const sf_transform_config *cfg = config;
    transform_ctx *t = sf_calloc(1, sizeof(*t));
    const char *why = NULL;
    sf_status st = SF_OK;

    if (t == NULL)
        return SF_ENOMEM;
    t->cfg = cfg;
    t->max_groups = 1;
    t->max_string = sf_transform_max_string(cfg);
    t->counters = sf_component_counters(self);
    pthread_mutex_init(&t->drift_lock, NULL);
    sf_component_set_ctx(self, t);
    t->mctx = pcre2_match_context_create(NULL);
    if (t->mctx == NULL) {
        st = SF_ENOMEM;
        goto out_destroy;
    }
    pcre2_set_match_limit(t->mctx, SF_TRANSFORM_MATCH_LIMIT);
    pcre2_set_depth_limit(t->mctx, SF_TRANSFORM_DEPTH_LIMIT);
    st = sf_transform_key_load(cfg, &t->key, &t->key_len, &why);
    if (st != SF_OK) {
        /* the check at load said what is wrong; never the key itself */
        sf_error("processor %s: the pseudonym key %s", sf_component_id(self),
                 why != NULL ? why : "cannot be held");
        goto out_destroy;
    }
    if (t->key != NULL)
        hmac_pads(t);
    for (int l = 0; l < SF_SIGNAL_COUNT; l++) {
        st = part_build(t, (sf_signal)l);
        if (st != SF_OK)
            goto out_destroy;
    }
    return SF_OK;

out_destroy:
    transform_destroy(self);
    return st;
}

static void transform_destroy(sf_component *self)
{
    transform_ctx *t = sf_component_ctx(self);

    if (t == NULL)
        return;
    for (int l = 0; l < SF_SIGNAL_COUNT; l++) {
        sig_part *sp = &t->parts[l];

        for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
            sf_otlp_keyset_destroy(sp->keys[c]);
            /* the alternatives each rule copied (vrule_build) */
            for (size_t i = 0; i < sp->n_vrules[c]; i++)
                sf_free((void *)sp->vrules[c][i].alts);
            sf_free(sp->vrules[c]);
        }
        for (int f = 0; f < SF_OTLP_FIELD_COUNT; f++) {
            for (size_t i = 0; i < sp->n_frules[f]; i++)
                pcre2_code_free(sp->frules[f][i].code);
            sf_free(sp->frules[f]);
        }
        sf_free((void *)sp->body_rule.alts);
    }
    for (size_t i = 0; i < t->n_codes; i++)
        pcre2_code_free(t->codes[i]);
    sf_free(t->codes);
    OPENSSL_cleanse(&t->inner, sizeof(t->inner));
    OPENSSL_cleanse(&t->outer, sizeof(t->outer));
    sf_transform_key_free(t->key, t->key_len);
    pcre2_match_context_free(t->mctx);
    pthread_mutex_destroy(&t->drift_lock);
    sf_free(t);
    sf_component_set_ctx(self, NULL);
}

/* The edit of the signal's program; NULL when it has none (the signal
 * passes as it came). */
static const sf_otlp_edit *transform_edit(const sf_component *self, sf_signal signal)
{
    const transform_ctx *t = sf_component_ctx(self);

    if ((int)signal < 0 || signal >= SF_SIGNAL_COUNT || !t->parts[signal].active)
        return NULL;
    return &t->parts[signal].edit;
}

/* Drift: each (context, key, cause) pair removed (key not kept, or its
 * value failed its rule) is counted by key, and logged the first time;
 * only keys the config names are named (the codec's keyset entries,
 * compared as pointers), the rest are 'other'.
 * At most SF_TRANSFORM_DRIFT_KEYS pairs are named; past that, removals
 * count under 'other' and nothing more is logged. The codec reports the
 * first SF_OTLP_DRIFT_MAX distinct pairs of each request. */
#define DRIFT_NAMED (SF_TRANSFORM_DRIFT_KEYS - 2 * SF_OTLP_CTX_COUNT)

static size_t drift_slot(transform_ctx *t, uint8_t ctx, bool failed, const char *id, bool *fresh)
{
    for (size_t j = 0; j < t->n_drift; j++)
        if (t->drift[j].id == id && t->drift[j].ctx == ctx && t->drift[j].failed == failed)
            return j;
    if (t->n_drift >= DRIFT_NAMED && id != NULL)
        return drift_slot(t, ctx, failed, NULL, fresh);
    if (t->n_drift >= SF_TRANSFORM_DRIFT_KEYS)
        return SIZE_MAX;                /* cannot be: 'other' has room kept */
    t->drift[t->n_drift].ctx = ctx;
    t->drift[t->n_drift].failed = failed;
    t->drift[t->n_drift].id = id;
    /* formatted once, here: a key the config names (its keyset's string) */
    snprintf(t->drift[t->n_drift].key, sizeof(t->drift[0].key), "%s", id != NULL ? id : "other");
    atomic_store(&t->drift[t->n_drift].count, 0);
    *fresh = true;
    return t->n_drift++;
}

/* The codec's removals by key: only keys the config names are named (the
 * codec says which: d->key is then the keyset's own string); any other is
 * 'other', in the log line and in the label. */
static void drift_report(sf_component *self, transform_ctx *t, const sf_otlp_stats *st)
{
    for (size_t i = 0; i < st->n_drift; i++) {
        const sf_otlp_drift *d = &st->drift[i];
        bool fresh = false;
        size_t at;

        pthread_mutex_lock(&t->drift_lock);
        at = drift_slot(t, d->ctx, d->failed_rule, d->key, &fresh);
        if (at != SIZE_MAX)
            atomic_fetch_add_explicit(&t->drift[at].count, d->count, memory_order_relaxed);
        pthread_mutex_unlock(&t->drift_lock);
        if (fresh)
            sf_warn("processor %s: removing %s attribute '%s': %s (logged once)",
                    sf_component_id(self), sf_otlp_ctx_name((sf_otlp_ctx)d->ctx),
                    at != SIZE_MAX ? t->drift[at].key : "other",
                    d->failed_rule ? "its value does not fit its rule" : "the key is not kept");
    }
}

static const char drift_help[] =
    "# HELP spanfence_processor_transform_removed_keys Attributes the transform removed, by "
    "context and key (keys the config names; others, and those past the first 240, as "
    "'other') and cause (not_kept, failed_rule).\n"
    "# TYPE spanfence_processor_transform_removed_keys counter\n";

static size_t transform_metrics(sf_component *self, char *buf, size_t size)
{
    transform_ctx *t = sf_component_ctx(self);
    size_t len = 0, n;

    pthread_mutex_lock(&t->drift_lock);
    n = t->n_drift;
    pthread_mutex_unlock(&t->drift_lock);
    for (size_t i = 0; i < n; i++)      /* entries below n_drift never change but their count */
        sf_metrics_put(buf, size, &len, "spanfence_processor_transform_removed_keys{"
                       "processor=\"%s\",context=\"%s\",key=\"%s\",cause=\"%s\"} %llu\n",
                       sf_component_id(self), sf_otlp_ctx_name((sf_otlp_ctx)t->drift[i].ctx),
                       t->drift[i].key, t->drift[i].failed ? "failed_rule" : "not_kept",
                       (unsigned long long)atomic_load(&t->drift[i].count));
    return len;
}

/* What only the transform counts of a batch its edit ran on; the core
 * counted the batch, the spans past a cap (dropped, reason filtered, as
 * the filter processor's) and the removed attributes. */
static void transform_edited(sf_component *self, const sf_request *batch)
{
    sf_counters *counters = sf_component_counters(self);
    transform_ctx *t = sf_component_ctx(self);
    /* the core's pass ran before this call: count and log what the counter
     * gained since the last report, once */
    uint64_t now = atomic_load_explicit(&t->rules_skipped, memory_order_relaxed);
    uint64_t reported = atomic_load_explicit(&t->rules_reported, memory_order_relaxed);

    while (now > reported &&
           !atomic_compare_exchange_weak_explicit(&t->rules_reported, &reported, now,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
    if (now > reported) {
        sf_count(&counters->values[TM_RULES_SKIPPED], now - reported);
        if (t->cfg->error_mode != SF_ERROR_MODE_SILENT)
            sf_warn("processor %s: %llu rule application(s) hit PCRE2's match or depth "
                    "limit; replace_pattern left the value as it was (error_mode %s), a "
                    "value rule removed the value, an IsMatch allowlist set the fixed value",
                    sf_component_id(self), (unsigned long long)(now - reported),
                    sf_error_mode_name(t->cfg->error_mode));
    }
    sf_count(&counters->values[TM_FAILED_VALUES], batch->stats.failed_values);
    sf_count(&counters->values[TM_DUPLICATE_KEYS], batch->stats.duplicate_keys);
    sf_count(&counters->values[TM_PSEUDONYMS], batch->stats.pseudonyms);
    sf_count(&counters->values[TM_DROPPED_BODIES], batch->stats.dropped_bodies);
    sf_count(&counters->values[TM_DROPPED_EXEMPLARS], batch->stats.dropped_exemplars);
    sf_count(&counters->values[TM_CAPPED_EVENTS], batch->stats.capped[SF_OTLP_FIELD_SPAN_EVENTS]);
    sf_count(&counters->values[TM_CAPPED_LINKS], batch->stats.capped[SF_OTLP_FIELD_SPAN_LINKS]);
    sf_count(&counters->values[TM_DROPPED_POINTS], batch->stats.dropped_points);
    sf_count(&counters->values[TM_PSEUDONYMIZED_IDS], batch->stats.pseudonymized_ids);
    sf_count(&counters->values[TM_CAPPED_SPANS], batch->stats.capped_items);
    sf_count(&counters->values[TM_CAPPED_RESOURCES],
             batch->stats.capped[SF_OTLP_FIELD_RESOURCE_SPANS]);
    sf_count(&counters->values[TM_CAPPED_SCOPES], batch->stats.capped[SF_OTLP_FIELD_SCOPE_SPANS]);
    if (batch->stats.n_drift > 0)
        drift_report(self, t, &batch->stats);
}

static const sf_metric_row transform_metric_rows[] = {
    [TM_FAILED_VALUES] = { .name = "spanfence_processor_transform_failed_values",
      .help = "Kept attributes removed because their value did not fit the key's rule." },
    [TM_DUPLICATE_KEYS] = { .name = "spanfence_processor_transform_duplicate_keys",
      .help = "Attributes removed as a second or later entry of a key in one list." },
    [TM_RULES_SKIPPED] = { .name = "spanfence_processor_transform_rules_skipped",
      .help = "Rule applications that hit PCRE2's match or depth limit." },
    [TM_PSEUDONYMS] = { .name = "spanfence_processor_transform_pseudonyms",
      .help = "Attribute values replaced by their keyed pseudonym." },
    [TM_DROPPED_BODIES] = { .name = "spanfence_processor_transform_dropped_log_bodies",
      .help = "Log record bodies dropped: no rule keeps them, or they did not fit its shape." },
    [TM_DROPPED_EXEMPLARS] = { .name = "spanfence_processor_transform_dropped_exemplars",
      .help = "Metric exemplars dropped (set(exemplars, []) or declared mode)." },
    [TM_CAPPED_EVENTS] = { .name = "spanfence_processor_transform_dropped_span_events",
      .help = "Span events dropped past max_events_per_span (added to dropped_events_count)." },
    [TM_CAPPED_LINKS] = { .name = "spanfence_processor_transform_dropped_span_links",
      .help = "Span links dropped past max_links_per_span (added to dropped_links_count)." },
    [TM_DROPPED_POINTS] = { .name = "spanfence_processor_transform_dropped_histogram_points",
      .help = "Histogram points dropped: bounds not finite and increasing, or not the declared "
              "set, or counts not summing to count." },
    [TM_PSEUDONYMIZED_IDS] = { .name = "spanfence_processor_transform_pseudonymized_ids",
      .help = "Trace and span ids replaced by their keyed pseudonym (pseudonymize_ids)." },
    [TM_CAPPED_SPANS] = { .name = "spanfence_processor_transform_dropped_spans",
      .help = "Spans dropped past max_spans_per_request, or with a resource or scope entry "
              "dropped past its cap." },
    [TM_CAPPED_RESOURCES] = { .name = "spanfence_processor_transform_dropped_resource_entries",
      .help = "Resource entries (ResourceSpans) dropped past max_resources_per_request." },
    [TM_CAPPED_SCOPES] = { .name = "spanfence_processor_transform_dropped_scope_entries",
      .help = "Scope entries (ScopeSpans) dropped past max_scopes_per_resource." },
    { 0 }
};

const sf_component_type sf_transform_processor_type = {
    .name = "transform",
    .kind = SF_KIND_PROCESSOR,
    .signals = SF_SIGNALS_ALL,
    .description = "keeps only allowlisted attributes whose values fit their rules, "
                   "pseudonymizes ids, governs names and every string field",
    .config_size = sizeof(sf_transform_config),
    .config_map = sf_transform_config_map,
    .check = sf_transform_check,
    .create = transform_create,
    .edit = transform_edit,
    .edit_failure = "that could not be filtered",
    .edited = transform_edited,
    .destroy = transform_destroy,
    .describe_allowlist = sf_transform_describe,
    .metrics = transform_metrics,
    .metrics_help = drift_help,
    .metric_rows = transform_metric_rows,
};

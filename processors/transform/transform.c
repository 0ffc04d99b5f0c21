/* processors/transform/transform.c: the `transform` processor on the data
 * path. Its program (transform_config.c) is compiled at create into a codec
 * edit (sf_otlp_wire.h): per context, one keyset holding every key its
 * statements name with that key's verdict and the verdict for every other
 * key; the name rules as PCRE2 code (JIT where available); the fields to
 * clear. The core applies the edit in the pass that validates and
 * canonicalises each request; consume accounts for it.
 *
 * DESIGN: consume and the edit's functions run concurrently on receiver
 * threads. The compiled program is read-only after create; a call's only
 * state is its PCRE2 match data (one per codec call, from rename's `state`)
 * and the component's atomic counters. What can fail is a name rule (the
 * regex hit its match or depth limit) and memory: under error_mode
 * propagate a failed rule fails the request closed (SF_FILTER, the batch
 * is dropped and counted); under ignore/silent that rule leaves the name as
 * it was (fail open, as upstream). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "transform.h"

#include <pcre2.h>
#include <stdint.h>
#include <string.h>

/* ---- keys ------------------------------------------------------------------ */

/* The program's contexts are the codec's, in the same order. */
_Static_assert((int)SF_TRANSFORM_RESOURCE == (int)SF_OTLP_RESOURCE &&
               (int)SF_TRANSFORM_SCOPE == (int)SF_OTLP_SCOPE &&
               (int)SF_TRANSFORM_SPAN == (int)SF_OTLP_SPAN &&
               (int)SF_TRANSFORM_SPANEVENT == (int)SF_OTLP_SPANEVENT &&
               (int)SF_TRANSFORM_LINK == (int)SF_OTLP_LINK &&
               (int)SF_TRANSFORM_CTX_COUNT == (int)SF_OTLP_CTX_COUNT,
               "transform contexts and codec contexts differ");

/* The verdict of context c's statements on `key`. */
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

/* Context c's keep_keys and delete_key as one keyset: every key a statement
 * names, with its verdict, and the verdict for the others (*out stays NULL
 * when c has neither). */
static sf_status keyset_build(const sf_transform_program *p, sf_transform_ctx c,
                              sf_otlp_keyset **out)
{
    size_t named = 0, n = 0;
    bool active = false, keep_other = true;
    const char **keys;
    bool *keep;
    sf_status st;

    *out = NULL;
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);

        if (op->kind != SF_TRANSFORM_KEEP_KEYS && op->kind != SF_TRANSFORM_DELETE_KEY)
            continue;
        active = true;
        if (op->kind == SF_TRANSFORM_KEEP_KEYS)
            keep_other = false;
        named += op->keys.n;
    }
    if (!active)
        return SF_OK;
    keys = sf_calloc(named ? named : 1, sizeof(*keys));
    keep = sf_calloc(named ? named : 1, sizeof(*keep));
    if (keys == NULL || keep == NULL) {
        st = SF_ENOMEM;
        goto out_free;
    }
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);

        if (op->kind != SF_TRANSFORM_KEEP_KEYS && op->kind != SF_TRANSFORM_DELETE_KEY)
            continue;
        for (size_t j = 0; j < op->keys.n; j++) {
            keys[n] = op->keys.keys[j];
            keep[n++] = verdict(p, c, op->keys.keys[j]);
        }
    }
    st = sf_otlp_keyset_create(n, keys, keep, keep_other, out);

out_free:
    sf_free(keys);
    sf_free(keep);
    return st;
}

/* ---- name rules --------------------------------------------------------------- */

/* Bounds on one match, so a pattern cannot take unbounded time on a name. */
#define SF_TRANSFORM_MATCH_LIMIT 100000
#define SF_TRANSFORM_DEPTH_LIMIT 1000

typedef struct name_rule {
    pcre2_code *code;
    PCRE2_SPTR replacement;
    size_t replacement_len;
    int error_mode;             /* the statement's */
} name_rule;

typedef struct transform_ctx {
    const sf_transform_config *cfg;
    sf_otlp_keyset *keys[SF_TRANSFORM_CTX_COUNT];
    size_t n_rules[SF_TRANSFORM_CTX_COUNT];
    name_rule *rules[SF_TRANSFORM_CTX_COUNT];
    pcre2_match_context *mctx;
    uint32_t max_groups;        /* largest capture count + 1, for match data */
    sf_otlp_edit edit;
    _Atomic uint64_t rules_skipped;     /* failed rules skipped under ignore/silent */
} transform_ctx;

/* Every rule of context c in order on the name; the result in *out. */
/* One codec call's scratch for the name rules (its `state`): PCRE2's match
 * data and the second of the two buffers the rules alternate between, kept
 * for every name of the request. */
typedef struct rename_state {
    pcre2_match_data *md;
    sf_otlp_text tmp;
} rename_state;

static sf_status rename_fn(const void *ctx, void **state, sf_otlp_ctx c, const uint8_t *in,
                           size_t len, sf_otlp_text *out)
{
    transform_ctx *t = (transform_ctx *)ctx;   /* only the atomic counter is written */
    rename_state *rs = *state;
    const uint8_t *subject = in;
    size_t subject_len = len;

    if (rs == NULL) {
        rs = sf_calloc(1, sizeof(*rs));
        if (rs == NULL)
            return SF_ENOMEM;
        rs->md = pcre2_match_data_create(t->max_groups, NULL);
        if (rs->md == NULL) {
            sf_free(rs);
            return SF_ENOMEM;
        }
        *state = rs;
    }
    for (size_t i = 0; i < t->n_rules[c]; i++) {
        const name_rule *r = &t->rules[c][i];
        sf_otlp_text *dst = (i % 2 == 0) ? out : &rs->tmp;  /* the subject is the other */
        PCRE2_SIZE n;
        int rc;

        if (sf_otlp_text_reserve(dst, subject_len + 64) != SF_OK)
            return SF_ENOMEM;
        for (;;) {
            n = dst->cap;
            rc = pcre2_substitute(r->code, subject, subject_len, 0,
                                  PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH |
                                  PCRE2_SUBSTITUTE_UNSET_EMPTY |
                                  PCRE2_NO_UTF_CHECK, rs->md, t->mctx, r->replacement,
                                  r->replacement_len, dst->data, &n);
            if (rc != PCRE2_ERROR_NOMEMORY)
                break;
            if (sf_otlp_text_reserve(dst, n + 1) != SF_OK)
                return SF_ENOMEM;
        }
        if (rc < 0) {
            if (r->error_mode == SF_ERROR_MODE_PROPAGATE)
                return SF_FILTER;
            atomic_fetch_add_explicit(&t->rules_skipped, 1, memory_order_relaxed);
            /* leave the name as it was before this rule */
            if (sf_otlp_text_reserve(dst, subject_len + 1) != SF_OK)
                return SF_ENOMEM;
            memmove(dst->data, subject, subject_len);
            n = subject_len;
        }
        dst->len = n;
        subject = dst->data;
        subject_len = n;
    }
    if (subject != out->data) {         /* the last result is in tmp, or no rule ran */
        if (sf_otlp_text_reserve(out, subject_len + 1) != SF_OK)
            return SF_ENOMEM;
        memmove(out->data, subject, subject_len);
    }
    out->len = subject_len;
    return SF_OK;
}

static void release(const void *ctx, void *state)
{
    rename_state *rs = state;

    (void)ctx;
    pcre2_match_data_free(rs->md);
    sf_free(rs->tmp.data);
    sf_free(rs);
}

static sf_status rules_build(transform_ctx *t, sf_transform_ctx c)
{
    const sf_transform_program *p = t->cfg->program;
    size_t n = 0;

    for (size_t i = 0; i < sf_transform_op_count(p, c); i++)
        n += sf_transform_op_get(p, c, i)->kind == SF_TRANSFORM_REPLACE_PATTERN;
    if (n == 0)
        return SF_OK;
    t->rules[c] = sf_calloc(n, sizeof(name_rule));
    if (t->rules[c] == NULL)
        return SF_ENOMEM;
    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);
        name_rule *r;
        int err;
        PCRE2_SIZE at;
        uint32_t groups = 0;

        if (op->kind != SF_TRANSFORM_REPLACE_PATTERN)
            continue;
        r = &t->rules[c][t->n_rules[c]++];
        r->code = pcre2_compile((PCRE2_SPTR)op->pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err,
                                &at, NULL);
        if (r->code == NULL) {
            /* checked at load: only memory can make it fail here */
            sf_error("processor transform: pattern '%s' does not compile", op->pattern);
            return SF_CONFIG;
        }
        (void)pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  /* interpreted without JIT */
        pcre2_pattern_info(r->code, PCRE2_INFO_CAPTURECOUNT, &groups);
        if (groups + 1 > t->max_groups)
            t->max_groups = groups + 1;
        r->replacement = (PCRE2_SPTR)op->replacement;
        r->replacement_len = strlen(op->replacement);
        r->error_mode = sf_transform_op_error_mode(t->cfg, op);
    }
    return SF_OK;
}

/* ---- the component ------------------------------------------------------------- */

static void transform_destroy(sf_component *self);

static sf_status transform_create(sf_component *self, const void *config)
{
    const sf_transform_config *cfg = config;
    const sf_transform_program *p = cfg->program;
    transform_ctx *t = sf_calloc(1, sizeof(*t));
    sf_status st = SF_OK;

    if (t == NULL)
        return SF_ENOMEM;
    t->cfg = cfg;
    t->max_groups = 1;
    sf_component_set_ctx(self, t);
    t->mctx = pcre2_match_context_create(NULL);
    if (t->mctx == NULL) {
        st = SF_ENOMEM;
        goto out_destroy;
    }
    pcre2_set_match_limit(t->mctx, SF_TRANSFORM_MATCH_LIMIT);
    pcre2_set_depth_limit(t->mctx, SF_TRANSFORM_DEPTH_LIMIT);
    for (int c = 0; c < SF_TRANSFORM_CTX_COUNT; c++) {
        st = keyset_build(p, (sf_transform_ctx)c, &t->keys[c]);
        if (st == SF_OK)
            st = rules_build(t, (sf_transform_ctx)c);
        if (st != SF_OK)
            goto out_destroy;
        t->edit.keys[c] = t->keys[c];
        if (t->n_rules[c] > 0)
            t->edit.rename |= SF_OTLP_CTX_BIT(c);
        if (sf_transform_clears_trace_state(p, (sf_transform_ctx)c))
            t->edit.clear_trace_state |= SF_OTLP_CTX_BIT(c);
    }
    t->edit.ctx = t;
    t->edit.clear_status_message = sf_transform_clears_status_message(p);
    t->edit.scalar_values_only = cfg->kept_value_types == SF_TRANSFORM_VALUES_SCALAR;
    t->edit.rename_fn = rename_fn;
    t->edit.release = release;
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
    for (int c = 0; c < SF_TRANSFORM_CTX_COUNT; c++) {
        sf_otlp_keyset_destroy(t->keys[c]);
        for (size_t i = 0; i < t->n_rules[c]; i++)
            pcre2_code_free(t->rules[c][i].code);
        sf_free(t->rules[c]);
    }
    pcre2_match_context_free(t->mctx);
    sf_free(t);
    sf_component_set_ctx(self, NULL);
}

static const sf_otlp_edit *transform_edit(const sf_component *self)
{
    const transform_ctx *t = sf_component_ctx(self);

    return &t->edit;
}

static sf_status transform_consume(sf_component *self, sf_request *batch)
{
    sf_counters *counters = sf_component_counters(self);
    transform_ctx *t = sf_component_ctx(self);
    uint64_t skipped = atomic_load_explicit(&t->rules_skipped, memory_order_relaxed);
    sf_status st;

    sf_count(&counters->incoming_items, batch->spans);
    if (batch->edited_by == self)
        st = batch->edit_status;        /* the core ran the edit in its pass */
    else
        st = sf_request_rewrite(batch, &t->edit, self);
    if (st != SF_OK) {
        bool memory = st == SF_ENOMEM;

        sf_count(&counters->dropped_spans[memory ? SF_REASON_MEMORY_LIMIT
                                                 : SF_REASON_FILTER_FAILED], batch->spans);
        sf_warn("processor %s: dropped a batch of %zu spans that could not be filtered (%s)",
                sf_component_id(self), batch->spans, sf_status_str(st));
        return memory ? SF_ENOMEM : SF_FILTER;
    }
    if (t->cfg->error_mode == SF_ERROR_MODE_IGNORE &&
        atomic_load_explicit(&t->rules_skipped, memory_order_relaxed) != skipped)
        sf_warn("processor %s: a replace_pattern statement could not be applied and was "
                "skipped (error_mode ignore)", sf_component_id(self));
    sf_count(&counters->removed_attributes, batch->stats.removed_attributes);
    sf_count(&counters->outgoing_items, batch->spans);
    return SF_OK;
}

const sf_component_type sf_transform_processor_type = {
    .name = "transform",
    .kind = SF_KIND_PROCESSOR,
    .description = "keeps only allowlisted attributes, redacts names, clears status messages "
                   "and trace state",
    .config_size = sizeof(sf_transform_config),
    .config_map = sf_transform_config_map,
    .create = transform_create,
    .consume = transform_consume,
    .edit = transform_edit,
    .destroy = transform_destroy,
    .describe_allowlist = sf_transform_describe,
};

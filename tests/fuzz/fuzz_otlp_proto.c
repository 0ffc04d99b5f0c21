/* tests/fuzz/fuzz_otlp_proto.c: libFuzzer target for the OTLP protobuf path
 * a receiver runs: the bytes as received go to the transform processor
 * (fixed allowlist, loaded from policy_yaml), whose consume runs the wire
 * codec (sf_otlp_wire.h) with its edit. The transform must accept exactly
 * what the codec's validation accepts, and on every input it accepts the
 * output must be: filtered (fuzz_otlp_check.h: only allowlisted keys, no
 * status message), readable by protobuf-c with no unknown field at any
 * level, canonical (the codec, with or without the edit, leaves it as it
 * is), and protobuf-c's repack of it byte for byte when no string holds a
 * NUL (protobuf-c's strings end at one). A second edit using every feature
 * of the codec's (keep_attribute, scalar_values_only, renames, cleared
 * fields) must give the same result on the input as on its canonical form:
 * an edit sees what a decoder sees, not how the bytes spelled it. And where
 * protobuf-c reads the input faithfully, its repack is the codec's output.
 * Last, configs/cvm.yaml's declared-mode transform: every string it exports
 * satisfies its field's rule (fuzz_cvm_rules.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/sf_core.h"
#include "processors/transform/transform.h"
#include "fuzz_otlp_check.h"
#include "fuzz_cvm_rules.h"
#include "sf_otlp_count.h"

/* The policy under test, loaded through the real config loader. The
 * allowlists the checks use (fuzz_otlp_check.h) are written out separately
 * so a parser or program bug cannot widen both at once. */
static const char policy_yaml[] =
    "receivers:\n"
    "  otlp:\n"
    "    protocols:\n"
    "      grpc:\n"
    "processors:\n"
    "  transform/fuzz:\n"
    "    error_mode: propagate\n"
    "    trace_statements:\n"
    "      - keep_keys(resource.attributes, [\"service.name\", \"r\"])\n"
    "      - keep_keys(scope.attributes, [\"scope.keep\", \"s\"])\n"
    "      - keep_keys(span.attributes, [\"gen_ai.request.id\", \"gen_ai.usage.prompt_tokens\","
    " \"tp_rank\", \"k\", \"x\"])\n"
    "      - delete_key(span.attributes, \"x\")\n"
    "      - set(span.status.message, \"\")\n"
    "      - keep_keys(spanevent.attributes, [\"batch_size\", \"e\"])\n"
    "      - keep_keys(link.attributes, [\"link.keep\", \"l\"])\n"
    "exporters:\n"
    "  otlphttp:\n"
    "    endpoint: http://127.0.0.1:4318\n"
    "service:\n"
    "  pipelines:\n"
    "    traces:\n"
    "      receivers: [otlp]\n"
    "      processors: [transform/fuzz]\n"
    "      exporters: [otlphttp]\n";

static struct sf_component comp;

static void init_once(void)
{
    static int done;
    sf_diag *diag;
    sf_config *cfg = NULL;
    sf_config_component *cc;

    if (done)
        return;
    done = 1;
    sf_log_set_level(SF_LOG_OFF);
    diag = sf_diag_create("fuzz_otlp_proto");
    if (diag == NULL ||
        sf_config_load_string("fuzz_otlp_proto", policy_yaml, strlen(policy_yaml), diag,
                              &cfg) != SF_OK) {
        if (diag != NULL)
            sf_diag_print(diag);
        fprintf(stderr, "fuzz_otlp_proto: policy does not load\n");
        abort();
    }
    sf_diag_destroy(diag);
    cc = sf_config_find(cfg, "transform/fuzz");
    if (cc == NULL || cc->type != &sf_transform_processor_type)
        abort();
    /* cfg stays loaded for the life of the process: the program lives in it. */
    comp.type = &sf_transform_processor_type;
    comp.id = cc->id;
    comp.config = cc->config;
    if (sf_transform_processor_type.create(&comp, cc->config) != SF_OK)
        abort();
}

/* ---- what protobuf-c makes of the output ---------------------------------- */

/* Unknown fields anywhere in m. */
static unsigned unknown_in(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    unsigned n = 0;

    n += m->n_unknown_fields;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];

        if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t k = *(const size_t *)(base + fd->quantifier_offset);
            ProtobufCMessage *const *v = *(ProtobufCMessage *const *const *)(base + fd->offset);

            for (size_t j = 0; j < k; j++)
                n += unknown_in(v[j]);
        } else {
            const ProtobufCMessage *sub;

            if ((fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                *(const uint32_t *)(base + fd->quantifier_offset) != fd->id)
                continue;
            sub = *(ProtobufCMessage *const *)(base + fd->offset);
            if (sub != NULL)
                n += unknown_in(sub);
        }
    }
    return n;
}

/* The string fields of each message of the (canonical, valid) output, and
 * the sub-messages to look into: whether some string holds a NUL. */
enum { M_REQ, M_RS, M_RES, M_ENT, M_SS, M_SCOPE, M_SPAN, M_EVENT, M_LINK, M_STATUS, M_KV,
       M_ANY, M_ARR, M_KVL, M_COUNT };
#define S_STR 100               /* a string field; else a message kind, -1: neither */

static const signed char fields[M_COUNT][17] = {
    [M_REQ] = { -1, M_RS, -1 },
    [M_RS] = { -1, M_RES, M_SS, S_STR },
    [M_RES] = { -1, M_KV, -1, M_ENT },
    [M_ENT] = { -1, S_STR, S_STR, S_STR, S_STR },
    [M_SS] = { -1, M_SCOPE, M_SPAN, S_STR },
    [M_SCOPE] = { -1, S_STR, S_STR, M_KV, -1 },
    [M_SPAN] = { -1, -1, -1, S_STR, -1, S_STR, -1, -1, -1, M_KV, -1, M_EVENT, -1, M_LINK, -1,
                 M_STATUS, -1 },
    [M_EVENT] = { -1, -1, S_STR, M_KV, -1 },
    [M_LINK] = { -1, -1, -1, S_STR, M_KV, -1, -1 },
    [M_STATUS] = { -1, -1, S_STR, -1 },
    [M_KV] = { -1, S_STR, M_ANY, -1 },
    [M_ANY] = { -1, S_STR, -1, -1, -1, M_ARR, M_KVL, -1, -1 },
    [M_ARR] = { -1, M_ANY },
    [M_KVL] = { -1, M_KV },
};
static const unsigned n_fields[M_COUNT] = {
    [M_REQ] = 2, [M_RS] = 4, [M_RES] = 4, [M_ENT] = 5, [M_SS] = 4, [M_SCOPE] = 5,
    [M_SPAN] = 17, [M_EVENT] = 5, [M_LINK] = 7, [M_STATUS] = 4, [M_KV] = 4, [M_ANY] = 9,
    [M_ARR] = 2, [M_KVL] = 2,
};

static int has_nul_string(const uint8_t *p, const uint8_t *end, int m)
{
    fuzz_field f;

    while (fuzz_next(&p, end, &f, "nul walk")) {
        int kind;

        if (f.wire_type != 2 || f.number >= n_fields[m])
            continue;
        kind = fields[m][f.number];
        if (kind == S_STR && memchr(f.data, '\0', f.len) != NULL)
            return 1;
        if (kind >= 0 && kind < M_COUNT && has_nul_string(f.data, f.data + f.len, kind))
            return 1;
    }
    return 0;
}

/* Singular message fields per message (AnyValue: its message members). */
static const uint32_t singular_msgs[M_COUNT] = {
    [M_RS] = 1u << 1, [M_SS] = 1u << 1, [M_SPAN] = 1u << 15, [M_KV] = 1u << 2,
    [M_ANY] = 1u << 5 | 1u << 6,
};

/* Whether a singular message field occurs twice in one message of the
 * (protobuf-c-readable, codec-valid) input: protobuf-c 1.4.1 merges those
 * unlike the protobuf spec (it keeps only the last copy's scalars, and
 * replaces an AnyValue message member given twice in a row). */
static int has_singular_repeat(const uint8_t *p, const uint8_t *end, int m)
{
    uint32_t seen = 0;
    fuzz_field f;

    while (fuzz_next(&p, end, &f, "merge walk")) {
        int kind;

        if (f.wire_type != 2 || f.number >= n_fields[m])
            continue;
        if ((singular_msgs[m] >> f.number) & 1) {
            if (seen & (singular_msgs[m] & (m == M_ANY ? ~0u : 1u << f.number)))
                return 1;
            seen |= 1u << f.number;
        }
        kind = fields[m][f.number];
        if (kind >= 0 && kind < M_COUNT && has_singular_repeat(f.data, f.data + f.len, kind))
            return 1;
    }
    return 0;
}

/* Where protobuf-c is a faithful reader of the input (every field known to
 * it, no merge), its repack of the input is the codec's canonical output. */
static void check_against_protobuf_c(const uint8_t *data, size_t size)
{
    sf_otlp_request *req =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
            NULL, size, data);
    sf_buf *canon = NULL;
    size_t n;
    uint8_t *re;

    if (req == NULL)
        return;
    if (unknown_in(&req->base) != 0 || has_singular_repeat(data, data + size, M_REQ))
        goto out_free;
    if (sf_otlp_rewrite(data, size, SF_OTLP_DEFAULT_MAX_DEPTH, NULL, &canon, NULL) != SF_OK)
        fuzz_fail("the codec refuses what its scan accepts");
    if (has_nul_string(canon->data, canon->data + canon->len, M_REQ))
        goto out_unref;
    n = protobuf_c_message_get_packed_size(&req->base);
    re = malloc(n ? n : 1);
    if (re == NULL)
        abort();
    protobuf_c_message_pack(&req->base, re);
    if (n != canon->len || memcmp(re, canon->data, n) != 0)
        fuzz_fail("protobuf-c reads the input as another request than the codec "
                  "(%zu vs %zu bytes)", n, canon->len);
    free(re);
out_unref:
    sf_buf_unref(canon);
out_free:
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(req,
                                                                                          NULL);
}

/* The codec on `out` with `edit` (NULL: none) must give `out` back. */
static void check_canonical(const sf_buf *out, const sf_otlp_edit *edit, const char *what)
{
    sf_otlp_stats st;
    sf_buf *again = NULL;
    sf_status s = sf_otlp_rewrite(out->data, out->len, SF_OTLP_DEFAULT_MAX_DEPTH, edit, &again,
                                  &st);

    if (s != SF_OK)
        fuzz_fail("%s: the codec refuses its own output: %s (%s)", what, sf_status_name(s),
                  st.error ? st.error : "-");
    if (again->len != out->len || memcmp(again->data, out->data, out->len) != 0)
        fuzz_fail("%s: the codec changes its own output (%zu -> %zu bytes)", what, out->len,
                  again->len);
    for (int m = 0; m < SF_OTLP_MSG_COUNT; m++) {
        if (st.dropped_fields[m] != 0)
            fuzz_fail("%s: the codec drops %s fields from its own output", what,
                      sf_otlp_msg_label((sf_otlp_msg)m));
    }
    if (st.removed_attributes != 0)
        fuzz_fail("%s: the edit removes attributes from its own output", what);
    sf_buf_unref(again);
}

static void check_output(const sf_buf *out, size_t spans)
{
    const sf_otlp_edit *edit = sf_transform_processor_type.edit(&comp, SF_SIGNAL_TRACES);
    sf_otlp_request *req;
    size_t n;
    uint8_t *re;

    fuzz_check_filtered(out->data, out->len, "consume");
    check_canonical(out, NULL, "canonical");
    check_canonical(out, edit, "edit again");
    req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        NULL, out->len, out->data);
    if (req == NULL)
        fuzz_fail("protobuf-c does not decode the output");
    if (unknown_in(&req->base) != 0)
        fuzz_fail("protobuf-c finds %u unknown fields in the output", unknown_in(&req->base));
    if (sf_otlp_count_spans(req) != spans)
        fuzz_fail("the codec counted %zu spans, protobuf-c decoded %zu", spans,
                  sf_otlp_count_spans(req));
    n = protobuf_c_message_get_packed_size(&req->base);
    re = malloc(n ? n : 1);
    if (re == NULL)
        abort();
    if (protobuf_c_message_pack(&req->base, re) != n)
        fuzz_fail("protobuf-c packed a size it did not announce");
    if ((n != out->len || memcmp(re, out->data, n) != 0) &&
        !has_nul_string(out->data, out->data + out->len, M_REQ))
        fuzz_fail("protobuf-c's repack differs from the output (%zu vs %zu bytes)", n, out->len);
    free(re);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(req,
                                                                                          NULL);
}

/* ---- an edit with every feature --------------------------------------------- */

/* An allowlist for resources, spans and links, a denylist for events (both
 * kinds of keyset); made once, reachable for the fuzzer's whole life. */
static sf_otlp_keyset *allow_keys, *deny_keys;

static void keysets_make(void)
{
    static const char *const allow[] = { "service.name", "r", "gen_ai.request.id", "k", "x",
                                         "a", "c", "" };
    static const bool keep[] = { true, true, true, true, true, true, true, true };
    static const char *const deny[] = { "e", "secret" };
    static const bool drop[] = { false, false };

    if (allow_keys != NULL)
        return;
    if (sf_otlp_keyset_create(8, allow, keep, false, &allow_keys) != SF_OK ||
        sf_otlp_keyset_create(2, deny, drop, true, &deny_keys) != SF_OK)
        fuzz_fail("no memory for the keysets");
}

static sf_status rename_tag(const void *ctx, void **state, sf_otlp_ctx c, const uint8_t *in,
                            size_t len, sf_otlp_text *out)
{
    (void)ctx;
    (void)state;
    if (sf_otlp_text_reserve(out, len + 2) != SF_OK)
        return SF_ENOMEM;
    out->data[0] = c == SF_OTLP_SPAN ? 'S' : 'E';
    out->data[1] = ':';
    memcpy(out->data + 2, in, len);
    out->len = len + 2;
    return SF_OK;
}

static sf_otlp_edit every_feature = {
    .rename = SF_OTLP_CTX_BIT(SF_OTLP_SPAN) | SF_OTLP_CTX_BIT(SF_OTLP_SPANEVENT),
    .clear_trace_state = SF_OTLP_CTX_BIT(SF_OTLP_SPAN) | SF_OTLP_CTX_BIT(SF_OTLP_LINK),
    .clear_status_message = true,
    .scalar_values_only = true,
    .rename_fn = rename_tag,
};

static void check_edit_sees_meaning(const uint8_t *data, size_t size)
{
    sf_buf *canon = NULL, *direct = NULL, *via = NULL;
    sf_otlp_stats a = { 0 }, b = { 0 };

    keysets_make();
    every_feature.keys[SF_OTLP_RESOURCE] = allow_keys;
    every_feature.keys[SF_OTLP_SPAN] = allow_keys;
    every_feature.keys[SF_OTLP_LINK] = allow_keys;
    every_feature.keys[SF_OTLP_SPANEVENT] = deny_keys;
    if (sf_otlp_rewrite(data, size, SF_OTLP_DEFAULT_MAX_DEPTH, NULL, &canon, NULL) != SF_OK)
        fuzz_fail("the codec refuses what its scan accepts");
    {
        sf_status s1 = sf_otlp_rewrite(data, size, SF_OTLP_DEFAULT_MAX_DEPTH, &every_feature,
                                       &direct, &a);
        sf_status s2 = sf_otlp_rewrite(canon->data, canon->len, SF_OTLP_DEFAULT_MAX_DEPTH,
                                       &every_feature, &via, &b);

        if (s1 != SF_OK || s2 != SF_OK)
            fuzz_fail("the edit fails on a valid request (%s on the input: %s; %s on its "
                      "canonical form: %s)", sf_status_name(s1), a.error ? a.error : "-",
                      sf_status_name(s2), b.error ? b.error : "-");
    }
    if (direct->len != via->len || memcmp(direct->data, via->data, via->len) != 0)
        fuzz_fail("the edit of the input differs from the edit of its canonical form "
                  "(%zu vs %zu bytes)", direct->len, via->len);
    if (a.spans != b.spans || a.removed_attributes != b.removed_attributes)
        fuzz_fail("the edit counts differ on the canonical form");
    sf_buf_unref(via);
    sf_buf_unref(direct);
    sf_buf_unref(canon);
}

/* The receivers' streaming counter (refused bodies, never held whole) sees
 * the spans the codec sees, however the bytes are split. */
static void check_streaming_count(const uint8_t *data, size_t size, size_t spans)
{
    size_t cut = size > 0 ? (size_t)data[0] * size / 256 : 0;
    sf_span_counter sc;

    sf_span_counter_init(&sc);
    sf_span_counter_feed(&sc, data, cut);
    sf_span_counter_feed(&sc, data + cut, size - cut);
    if (sc.spans != spans)
        fuzz_fail("the streaming counter saw %zu spans%s, the codec %zu", sc.spans,
                  sc.bad ? " (it stopped: framing it does not follow)" : "", spans);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_request b;
    sf_status valid, st;
    size_t spans = 0;

    init_once();
    valid = sf_otlp_scan(data, size, SF_OTLP_DEFAULT_MAX_DEPTH, &spans);
    if (valid != SF_OK && valid != SF_INVALID)
        fuzz_fail("sf_otlp_scan returned %s", sf_status_name(valid));
    /* As a pipeline hands it on: the codec's pass has counted the spans. */
    sf_request_init(&b, NULL, data, size, SF_OTLP_DEFAULT_MAX_DEPTH);
    b.spans = spans;
    st = sf_component_process(&comp, &b);
    if (st == SF_OK) {
        if (valid != SF_OK)
            fuzz_fail("the transform passed a request the codec refuses");
        if (b.wire == NULL || b.edited_by != &comp)
            fuzz_fail("consume returned SF_OK without the codec's output");
        if (b.spans != spans)
            fuzz_fail("consume counted %zu spans, the scan %zu", b.spans, spans);
        check_output(b.wire, b.spans);
        check_streaming_count(data, size, spans);
        check_edit_sees_meaning(data, size);
        check_against_protobuf_c(data, size);
        check_cvm_rules(data, size);
    } else if (st == SF_FILTER) {
        if (valid == SF_OK)
            fuzz_fail("the transform refused a request the codec accepts");
        if (b.wire != NULL)
            fuzz_fail("consume failed but left output");
    } else if (st != SF_ENOMEM) {
        fuzz_fail("consume returned %s", sf_status_name(st));
    }
    sf_request_release(&b);
    return 0;
}

/* tests/processors/test_transform_rules.c: the transform's rules on what a
 * kept attribute may hold and on every other string field: value rules in
 * upstream OTTL's spelling (IsInt, IsDouble, IsBool, IsString, IsMatch, ==,
 * not/and/or), one value per key, the length bound, name allowlists, scope
 * and schema_url rules, entity_refs, keyed pseudonyms, and declared mode's
 * config checks. Configs go through the real loader (sf_config_load_string),
 * requests are OTLP/JSON decoded and packed with protobuf-c, run through the
 * processor's compiled edit with the codec, and read back as JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pcre2.h>

#include "internal/sf_core.h"
#include "processors/transform/transform.h"
#include "sf_otlp_json.h"
#include "processor_fixture.h"

typedef pfx_run run;

/* Load `body` (the transform's settings, indented four spaces) and create
 * the processor. SF_CONFIG leaves the messages in r->errors. */
static sf_status load(run *r, const char *body)
{
    return pfx_load_transform(r, "rules.yaml", body);
}

static void unload(run *r)
{
    pfx_unload(r);
}

/* The request `json` through the processor's edit, back as JSON (sf_free). */
static char *apply(run *r, const char *json)
{
    sf_arena *a = sf_arena_create(1 << 16, 0);
    sf_otlp_request *req = NULL, *back;
    char err[256];
    uint8_t *wire;
    size_t len;
    sf_buf *out = NULL;
    char *text = NULL;
    size_t text_len;

    assert_int_equal(sf_otlp_json_decode(a, json, strlen(json), 32, &req, err, sizeof(err)),
                     SF_OK);
    len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(req);
    wire = malloc(len + 1);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(req, wire);
    assert_int_equal(sf_otlp_rewrite(wire, len, 32, r->comp.type->edit(&r->comp, SF_SIGNAL_TRACES), &out,
                                     &r->stats), SF_OK);
    back = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        NULL, out->len, out->data);
    assert_non_null(back);
    assert_int_equal(sf_otlp_json_encode(back, &text, &text_len), SF_OK);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(back,
                                                                                          NULL);
    sf_buf_unref(out);
    free(wire);
    sf_arena_destroy(a);
    return text;
}

/* One span with `attrs` (a JSON array of attributes) and `name`. */
static char *span_json(const char *name, const char *attrs)
{
    static const char fmt[] =
        "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
        "\"value\":{\"stringValue\":\"sglang\"}}]},\"scopeSpans\":[{\"scope\":{\"name\":"
        "\"sglang server\"},\"spans\":[{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\","
        "\"spanId\":\"0102030405060708\",\"name\":\"%s\",\"attributes\":%s}]}]}]}";
    size_t n = sizeof(fmt) + strlen(name) + strlen(attrs);
    char *s = malloc(n);

    snprintf(s, n, fmt, name, attrs);
    return s;
}

static char *apply_span(run *r, const char *name, const char *attrs)
{
    char *in = span_json(name, attrs), *out = apply(r, in);

    free(in);
    return out;
}

#define HAS(s, sub) assert_non_null(strstr((s), (sub)))
#define LACKS(s, sub) assert_null(strstr((s), (sub)))

static const char typed[] =
    "    trace_statements:\n"
    "      - context: span\n"
    "        statements:\n"
    "          - keep_keys(attributes, [\"n\", \"lat\", \"rid\", \"fr\", \"mode\", \"tag\", \"ok\", \"any\"])\n"
    "          - delete_key(attributes, \"n\") where not IsInt(attributes[\"n\"])\n"
    "          - delete_key(attributes, \"lat\") where not (IsDouble(attributes[\"lat\"]) or IsInt(attributes[\"lat\"]))\n"
    "          - delete_key(attributes, \"rid\") where not IsMatch(attributes[\"rid\"], \"^[0-9a-f]{32}$\")\n"
    "          - delete_key(attributes, \"fr\") where not (attributes[\"fr\"] == \"[\\\"stop\\\"]\" or attributes[\"fr\"] == \"[\\\"length\\\"]\")\n"
    "          - delete_key(attributes, \"mode\") where not IsMatch(attributes[\"mode\"], \"^(decode|prefill)$\")\n"
    "          - delete_key(attributes, \"tag\") where not IsMatch(attributes[\"tag\"], \"^v[0-9]+\\\\.[0-9]+$\")\n"
    "          - delete_key(attributes, \"ok\") where not IsBool(attributes[\"ok\"])\n"
    "          - delete_key(attributes, \"any\") where not IsString(attributes[\"any\"])\n";

#define RID "0123456789abcdef0123456789abcdef"

static void test_value_rules_keep_what_fits(void **state)
{
    run r;
    char *out;

    (void)state;
    assert_int_equal(load(&r, typed), SF_OK);
    out = apply_span(&r, "s",
        "[{\"key\":\"n\",\"value\":{\"intValue\":\"12\"}},"
        "{\"key\":\"lat\",\"value\":{\"doubleValue\":0.25}},"
        "{\"key\":\"rid\",\"value\":{\"stringValue\":\"" RID "\"}},"
        "{\"key\":\"fr\",\"value\":{\"stringValue\":\"[\\\"stop\\\"]\"}},"
        "{\"key\":\"mode\",\"value\":{\"stringValue\":\"decode\"}},"
        "{\"key\":\"tag\",\"value\":{\"stringValue\":\"v1.22\"}},"
        "{\"key\":\"ok\",\"value\":{\"boolValue\":true}},"
        "{\"key\":\"any\",\"value\":{\"stringValue\":\"free\"}}]");
    HAS(out, "\"intValue\":\"12\"");
    HAS(out, "0.25");
    HAS(out, RID);
    HAS(out, "[\\\"stop\\\"]");
    HAS(out, "\"decode\"");
    HAS(out, "v1.22");
    HAS(out, "\"boolValue\":true");
    HAS(out, "\"free\"");
    LACKS(out, "droppedAttributesCount");
    assert_int_equal(r.stats.removed_attributes, 0);
    sf_free(out);
    unload(&r);
}

static void test_value_rules_remove_what_does_not(void **state)
{
    run r;
    char *out;

    (void)state;
    assert_int_equal(load(&r, typed), SF_OK);
    out = apply_span(&r, "s",
        "[{\"key\":\"n\",\"value\":{\"stringValue\":\"MARK1\"}},"
        "{\"key\":\"lat\",\"value\":{\"stringValue\":\"MARK2\"}},"
        "{\"key\":\"rid\",\"value\":{\"stringValue\":\"" RID "\\nMARK3\"}},"
        "{\"key\":\"fr\",\"value\":{\"stringValue\":\"[\\\"MARK4\\\"]\"}},"
        "{\"key\":\"mode\",\"value\":{\"stringValue\":\"decodeMARK5\"}},"
        "{\"key\":\"tag\",\"value\":{\"stringValue\":\"v1.2MARK6\"}},"
        "{\"key\":\"ok\",\"value\":{\"arrayValue\":{\"values\":[{\"stringValue\":\"MARK7\"}]}}},"
        "{\"key\":\"any\",\"value\":{\"arrayValue\":{\"values\":[{\"stringValue\":\"x\"},"
        "{\"intValue\":\"3\"}]}}},"
        "{\"key\":\"rid\",\"value\":{\"intValue\":\"5\"}}]");
    if (getenv("SF_TEST_VERBOSE") != NULL)
        fprintf(stderr, "%s\n", out);
    LACKS(out, "MARK");
    LACKS(strstr(out, "\"spans\""), "\"attributes\"");
    HAS(out, "\"droppedAttributesCount\":9");
    assert_int_equal(r.stats.removed_attributes, 9);
    assert_int_equal(r.stats.failed_values, 9);
    /* arrays: every element must fit */
    sf_free(out);
    out = apply_span(&r, "s", "[{\"key\":\"any\",\"value\":{\"arrayValue\":{\"values\":["
                              "{\"stringValue\":\"x\"},{\"stringValue\":\"y\"}]}}}]");
    HAS(out, "\"y\"");
    sf_free(out);
    unload(&r);
}

static const char declared[] =
    "    declared_fields: true\n"
    "    pseudonym_key: 0123456789abcdefSECRETKEY\n"
    "    trace_statements:\n"
    "      - context: resource\n"
    "        statements:\n"
    "          - keep_keys(attributes, [\"service.name\"])\n"
    "          - delete_key(attributes, \"service.name\") where not IsMatch(attributes[\"service.name\"], \"^sglang$\")\n"
    "          - set(schema_url, \"\")\n"
    "          - set(entity_refs, [])\n"
    "      - context: scope\n"
    "        statements:\n"
    "          - keep_keys(attributes, [])\n"
    "          - set(name, \"\") where not IsMatch(name, \"^sglang server$\")\n"
    "          - set(version, \"\")\n"
    "          - set(schema_url, \"\")\n"
    "      - context: span\n"
    "        statements:\n"
    "          - keep_keys(attributes, [\"rid\", \"room\", \"n\", \"s\"])\n"
    "          - delete_key(attributes, \"rid\") where not IsMatch(attributes[\"rid\"], \"^[0-9a-f]{32}$\")\n"
    "          - pseudonymize(attributes, \"rid\")\n"
    "          - delete_key(attributes, \"room\") where not IsInt(attributes[\"room\"])\n"
    "          - pseudonymize(attributes, \"room\")\n"
    "          - delete_key(attributes, \"n\") where not IsInt(attributes[\"n\"])\n"
    "          - delete_key(attributes, \"s\") where not IsString(attributes[\"s\"])\n"
    "          - set(status.message, \"\")\n"
    "          - set(trace_state, \"\")\n"
    "          - replace_pattern(name, \"(?s)(?<![^ ])Req .*\", \"Req redacted\")\n"
    "          - set(name, \"other\") where not IsMatch(name, \"^((prefill|decode)? ?Req redacted|tokenize|decode_loop)$\")\n"
    "      - context: spanevent\n"
    "        statements:\n"
    "          - keep_keys(attributes, [])\n"
    "          - set(name, \"other\") where not IsMatch(name, \"^(schedule|retract)$\")\n"
    "      - context: link\n"
    "        statements:\n"
    "          - keep_keys(attributes, [])\n"
    "          - set(trace_state, \"\")\n";

static void test_declared_names_and_fields(void **state)
{
    static const char in[] =
        "{\"resourceSpans\":[{\"schemaUrl\":\"MARK1\",\"resource\":{\"attributes\":["
        "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"sglang\"}}]},"
        "\"scopeSpans\":[{\"schemaUrl\":\"MARK2\",\"scope\":{\"name\":\"sglang server\","
        "\"version\":\"MARK3\"},\"spans\":["
        "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0102030405060708\","
        "\"name\":\" Req 1234abcd\",\"events\":[{\"name\":\"schedule\"},{\"name\":\"MARK4\"}]},"
        "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0102030405060709\","
        "\"name\":\"decode_loop MARK5\"},"
        "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"010203040506070a\","
        "\"name\":\"tokenize\"}]},"
        "{\"scope\":{\"name\":\"MARK6\"},\"spans\":[]}]}]}";
    run r;
    char *out;

    (void)state;
    assert_int_equal(load(&r, declared), SF_OK);
    out = apply(&r, in);
    LACKS(out, "MARK");
    HAS(out, "\" Req redacted\"");
    HAS(out, "\"tokenize\"");
    HAS(out, "\"schedule\"");
    HAS(out, "\"sglang server\"");
    HAS(out, "\"name\":\"other\"");
    sf_free(out);
    unload(&r);
}

static void test_declared_one_value_per_key_and_bound(void **state)
{
    char big[400];
    char attrs[1200];
    run r;
    char *out;

    (void)state;
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(load(&r, declared), SF_OK);
    out = apply_span(&r, "tokenize",
                     "[{\"key\":\"n\",\"value\":{\"intValue\":\"1\"}},"
                     "{\"key\":\"n\",\"value\":{\"intValue\":\"99\"}},"
                     "{\"key\":\"s\",\"value\":{\"stringValue\":\"first\"}},"
                     "{\"key\":\"s\",\"value\":{\"stringValue\":\"MARK\"}}]");
    LACKS(out, "MARK");
    LACKS(out, "99");
    HAS(out, "\"first\"");
    assert_int_equal(r.stats.duplicate_keys, 2);
    sf_free(out);
    /* 256 bytes is declared mode's bound */
    snprintf(attrs, sizeof(attrs), "[{\"key\":\"s\",\"value\":{\"stringValue\":\"%.256s\"}}]",
             big);
    out = apply_span(&r, "tokenize", attrs);
    HAS(out, "\"key\":\"s\"");
    sf_free(out);
    snprintf(attrs, sizeof(attrs), "[{\"key\":\"s\",\"value\":{\"stringValue\":\"%.257s\"}}]",
             big);
    out = apply_span(&r, "tokenize", attrs);
    LACKS(out, "\"key\":\"s\"");
    sf_free(out);
    unload(&r);
}

/* The pseudonym of rid and room in one request, as JSON (sf_free). */
static char *pseudonyms_of(run *r, const char *rid, const char *room)
{
    char attrs[512];

    snprintf(attrs, sizeof(attrs), "[{\"key\":\"rid\",\"value\":{\"stringValue\":\"%s\"}},"
             "{\"key\":\"room\",\"value\":{\"intValue\":\"%s\"}}]", rid, room);
    return apply_span(r, "tokenize", attrs);
}

static void test_pseudonyms(void **state)
{
    run r, again, other;
    char *a, *b, *c, *d;
    char rid_out[40];
    const char *at;

    (void)state;
    assert_int_equal(load(&r, declared), SF_OK);
    a = pseudonyms_of(&r, RID, "1234567");
    b = pseudonyms_of(&r, RID, "1234567");
    /* the id itself never leaves; the pseudonym has its shape */
    LACKS(a, RID);
    LACKS(a, "1234567\"");
    at = strstr(a, "\"key\":\"rid\",\"value\":{\"stringValue\":\"");
    assert_non_null(at);
    at += strlen("\"key\":\"rid\",\"value\":{\"stringValue\":\"");
    memcpy(rid_out, at, 32);
    rid_out[32] = '\0';
    for (int i = 0; i < 32; i++)
        assert_true((rid_out[i] >= '0' && rid_out[i] <= '9') ||
                    (rid_out[i] >= 'a' && rid_out[i] <= 'f'));
    assert_int_equal(at[32], '"');
    HAS(a, "\"key\":\"room\",\"value\":{\"intValue\":\"");
    assert_int_equal(r.stats.pseudonyms, 2);
    /* same id, same key: same pseudonym across requests and a restart */
    assert_string_equal(a, b);
    assert_int_equal(load(&again, declared), SF_OK);
    c = pseudonyms_of(&again, RID, "1234567");
    assert_string_equal(a, c);
    /* another key: another pseudonym */
    {
        const char *k = strstr(declared, "SECRETKEY");
        size_t n = strlen(declared);
        char *body = malloc(n + 1);

        memcpy(body, declared, n + 1);
        body[k - declared] = 'Z';
        assert_int_equal(load(&other, body), SF_OK);
        free(body);
    }
    d = pseudonyms_of(&other, RID, "1234567");
    assert_null(strstr(d, rid_out));
    assert_string_not_equal(a, d);
    sf_free(a);
    sf_free(b);
    sf_free(c);
    sf_free(d);
    unload(&r);
    unload(&again);
    unload(&other);
}

/* Pseudonyms have a fixed length whatever the input's: a room "0x1" and a
 * room of 16 digits both leave as "0x" and 16 hex digits (a client could
 * otherwise send 4 bits a request in the length, and a 1-digit room has 16
 * pseudonyms); hex ids leave as 32 digits, longer hex as 64. */
static void test_pseudonym_lengths(void **state)
{
    static const char body[] =
        "    pseudonym_key: 0123456789abcdefSECRETKEY\n"
        "    trace_statements:\n"
        "      - keep_keys(span.attributes, [\"bootstrap_room\"])\n"
        "      - pseudonymize(span.attributes, \"bootstrap_room\")\n";
    static const struct { const char *in; size_t prefix, digits; } cases[] = {
        { "0x1", 2, 16 }, { "0x2", 2, 16 }, { "0x123456789", 2, 16 },
        { "0x1f2e3d4c5b6a7980", 2, 16 }, { "0x" "0123456789abcdef0123", 2, 16 },
        { "a", 0, 32 }, { "5f2b8e0c9a7d4e1f8b3c6a2d0e9f1a7b", 0, 32 },
        { "5f2b8e0c9a7d4e1f8b3c6a2d0e9f1a7b5f2b8e0c9a7d4e1f8b3c6a2d0e9f1a", 0, 64 },
        { "Room One", 0, 32 },
    };
    char first[2][80] = { "", "" };
    run r;

    (void)state;
    assert_int_equal(load(&r, body), SF_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char attrs[256], *out;
        const char *at;
        size_t n;

        snprintf(attrs, sizeof(attrs), "[{\"key\":\"bootstrap_room\",\"value\":{\"stringValue\":"
                 "\"%s\"}}]", cases[i].in);
        out = apply_span(&r, "tokenize", attrs);
        at = strstr(out, "\"key\":\"bootstrap_room\",\"value\":{\"stringValue\":\"");
        assert_non_null(at);
        at += strlen("\"key\":\"bootstrap_room\",\"value\":{\"stringValue\":\"");
        n = strcspn(at, "\"");
        if (n != cases[i].prefix + cases[i].digits ||
            (cases[i].prefix && strncmp(at, "0x", 2) != 0) ||
            strspn(at + cases[i].prefix, "0123456789abcdef") != cases[i].digits)
            fail_msg("'%s' left as '%.*s'", cases[i].in, (int)n, at);
        if (i < 2)
            snprintf(first[i], sizeof(first[i]), "%.*s", (int)n, at);
        sf_free(out);
    }
    /* 0x1 and 0x2: two pseudonyms of the same length */
    assert_string_not_equal(first[0], first[1]);
    unload(&r);
}

/* pseudonymize_ids: trace and span ids leave as HMAC-SHA256(key, tag ||
 * id) truncated to their length (checked against OpenSSL's one-shot HMAC,
 * 'T' for trace ids, 'S' for span ids): a child's parent is its parent's
 * pseudonym; the caps reach the edit; without a key the config is refused */
static void hex_hmac(const char *key, char tag, const char *hex_id, char *out)
{
    uint8_t msg[17], mac[32];
    size_t n = strlen(hex_id) / 2;
    unsigned int mlen = 0;

    msg[0] = (uint8_t)tag;
    for (size_t i = 0; i < n; i++)
        sscanf(hex_id + 2 * i, "%2hhx", &msg[1 + i]);
    assert_non_null(HMAC(EVP_sha256(), key, (int)strlen(key), msg, n + 1, mac, &mlen));
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", mac[i]);
}

static void test_pseudonymized_ids(void **state)
{
    static const char body[] =
        "    pseudonym_key: 0123456789abcdefSECRETKEY\n"
        "    pseudonymize_ids: true\n"
        "    max_spans_per_request: 64\n"
        "    max_resources_per_request: 2\n"
        "    max_scopes_per_resource: 3\n"
        "    trace_statements:\n"
        "      - keep_keys(span.attributes, [\"rid\"])\n"
        "      - pseudonymize(span.attributes, \"rid\")\n";
    static const char json[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":["
        "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"1112131415161718\","
        "\"name\":\"root\",\"attributes\":[{\"key\":\"rid\",\"value\":{\"stringValue\":"
        "\"" RID "\"}}]},"
        "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"2122232425262728\","
        "\"parentSpanId\":\"1112131415161718\",\"name\":\"child\",\"links\":[{\"traceId\":"
        "\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"1112131415161718\"}]}]}]}]}";
    char tid[33], root[17], child[17], rid[65], want[512], *out;
    const sf_otlp_edit *e;
    run r;

    (void)state;
    hex_hmac("0123456789abcdefSECRETKEY", 'T', "0102030405060708090a0b0c0d0e0f10", tid);
    hex_hmac("0123456789abcdefSECRETKEY", 'S', "1112131415161718", root);
    hex_hmac("0123456789abcdefSECRETKEY", 'S', "2122232425262728", child);
    {
        /* an attribute's pseudonym is the same HMAC, tagged 's', of its text */
        uint8_t mac[32];
        unsigned int mlen = 0;
        const char msg[] = "s" RID;

        assert_non_null(HMAC(EVP_sha256(), "0123456789abcdefSECRETKEY", 25,
                             (const uint8_t *)msg, strlen(msg), mac, &mlen));
        for (size_t i = 0; i < 16; i++)
            sprintf(rid + 2 * i, "%02x", mac[i]);
    }
    assert_int_equal(load(&r, body), SF_OK);
    e = r.comp.type->edit(&r.comp, SF_SIGNAL_TRACES);
    assert_non_null(e->id_fn);
    if (e->ids_fn != NULL) {
        /* the SHA extensions' lanes (this CPU has them): what id_fn makes,
         * for 1 to 9 ids at once of both lengths, in every lane */
        uint8_t ids[9][16], lens[9], out[9][16], one[16];
        const uint8_t *in[9];
        void *st = NULL;

        for (size_t n = 1; n <= 9; n++) {
            for (size_t i = 0; i < n; i++) {
                lens[i] = (n + i) % 3 ? 8 : 16;
                for (size_t b = 0; b < 16; b++)
                    ids[i][b] = (uint8_t)(n * 37 + i * 11 + b * 7);
                in[i] = ids[i];
            }
            assert_true(e->ids_fn(e->ctx, &st, in, lens, n, out));
            for (size_t i = 0; i < n; i++) {
                assert_true(e->id_fn(e->ctx, &st, in[i], lens[i], one));
                assert_memory_equal(out[i], one, lens[i]);
            }
        }
        if (st != NULL)
            e->release(e->ctx, st);
    }
    assert_int_equal(e->cap[SF_OTLP_FIELD_SPANS], 64);
    assert_int_equal(e->cap[SF_OTLP_FIELD_RESOURCE_SPANS], 2);
    assert_int_equal(e->cap[SF_OTLP_FIELD_SCOPE_SPANS], 3);
    out = apply(&r, json);
    snprintf(want, sizeof(want), "\"traceId\":\"%s\",\"spanId\":\"%s\",\"name\":\"root\"", tid,
             root);
    HAS(out, want);
    snprintf(want, sizeof(want), "\"traceId\":\"%s\",\"spanId\":\"%s\",\"parentSpanId\":\"%s\"",
             tid, child, root);
    HAS(out, want);
    snprintf(want, sizeof(want), "\"links\":[{\"traceId\":\"%s\",\"spanId\":\"%s\"}]", tid, root);
    HAS(out, want);
    snprintf(want, sizeof(want), "{\"key\":\"rid\",\"value\":{\"stringValue\":\"%s\"}}", rid);
    HAS(out, want);
    LACKS(out, "0102030405060708090a0b0c0d0e0f10");
    LACKS(out, "1112131415161718");
    assert_int_equal(r.stats.pseudonymized_ids, 7);
    sf_free(out);
    unload(&r);

    /* the setting needs the key, and the key its quality */
    assert_int_equal(load(&r, "    pseudonymize_ids: true\n    trace_statements:\n"
                              "      - keep_keys(span.attributes, [])\n"), SF_CONFIG);
    HAS(r.errors, "pseudonymize_ids needs a key");
    assert_int_equal(load(&r, "    pseudonym_key: aaaaaaaaaaaaaaaaaaaa\n    pseudonymize_ids: true\n"
                              "    trace_statements:\n      - keep_keys(span.attributes, [])\n"),
                     SF_CONFIG);
    HAS(r.errors, "pseudonym_key has too few distinct bytes");
    /* without it, ids leave as they came */
    assert_int_equal(load(&r, "    trace_statements:\n      - keep_keys(span.attributes, [])\n"),
                     SF_OK);
    assert_null(r.comp.type->edit(&r.comp, SF_SIGNAL_TRACES)->id_fn);
    unload(&r);
}

static void test_declared_mode_refuses_gaps(void **state)
{
    static const char missing[] =
        "    declared_fields: true\n"
        "    trace_statements:\n"
        "      - context: span\n"
        "        statements:\n"
        "          - keep_keys(attributes, [\"rid\"])\n";
    static const char nokey[] =
        "    trace_statements:\n"
        "      - keep_keys(span.attributes, [\"rid\"])\n"
        "      - pseudonymize(span.attributes, \"rid\")\n";
    static const char shortkey[] =
        "    pseudonym_key: tooSHORTsecret\n"
        "    trace_statements:\n"
        "      - pseudonymize(span.attributes, \"rid\")\n";
    run r;

    (void)state;
    assert_int_equal(load(&r, missing), SF_CONFIG);
    HAS(r.errors, "rules.yaml:15:13: processors.transform.trace_statements: declared_fields: "
                  "span key 'rid' is kept without a value rule");
    HAS(r.errors, "declared_fields: the resource context has no keep_keys");
    HAS(r.errors, "declared_fields: span.name has no rule");
    HAS(r.errors, "declared_fields: resource.entity_refs has no rule");
    HAS(r.errors, "declared_fields: link.trace_state has no rule");
    assert_int_equal(load(&r, nokey), SF_CONFIG);
    HAS(r.errors, "pseudonymize needs a key");
    assert_int_equal(load(&r, shortkey), SF_CONFIG);
    HAS(r.errors, "pseudonym_key is shorter than 16 bytes");
    LACKS(r.errors, "tooSHORTsecret");
    /* key quality: 16 bytes of one character, or of two, are refused */
    for (int i = 0; i < 2; i++) {
        static const char *const weak[] = { "aaaaaaaaaaaaaaaa", "abababababababababababababababab" };
        char body[256];

        snprintf(body, sizeof(body), "    pseudonym_key: %s\n    trace_statements:\n"
                 "      - pseudonymize(span.attributes, \"rid\")\n", weak[i]);
        assert_int_equal(load(&r, body), SF_CONFIG);
        HAS(r.errors, "pseudonym_key has too few distinct bytes");
        LACKS(r.errors, weak[i]);
    }
}

static void test_condition_errors(void **state)
{
    static const struct { const char *stmt; const char *msg; } cases[] = {
        { "delete_key(span.attributes, \"a\") where not IsInt(attributes[\"b\"])",
          "the condition tests attributes[\"b\"]" },
        { "delete_key(span.attributes, \"a\") where IsInt(attributes[\"a\"])",
          "a delete_key condition must read 'where not" },
        { "delete_key(span.attributes, \"a\") where not IsInt(attributes[\"a\"]) or "
          "IsDouble(attributes[\"a\"])", "in parentheses" },
        { "delete_key(span.attributes, \"a\") where not (IsInt(attributes[\"a\"]) and "
          "IsString(attributes[\"a\"]))", "can never hold" },
        { "delete_key(span.attributes, \"a\") where not IsMatch(attributes[\"a\"], \"(\")",
          "invalid regular expression" },
        { "set(span.name, \"x\") where not IsMatch(spanevent.name, \"a\")",
          "the condition must test the field the statement sets" },
        { "set(resource.entity_refs, \"x\")", "entity_refs can only be cleared" },
    };
    char body[512];
    run r;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(body, sizeof(body), "    trace_statements:\n      - '%s'\n", cases[i].stmt);
        assert_int_equal(load(&r, body), SF_CONFIG);
        if (strstr(r.errors, cases[i].msg) == NULL)
            fail_msg("case %zu: '%s' not in: %s", i, cases[i].msg, r.errors);
    }
}

/* replace_pattern gives what pcre2_substitute (global, UTF) gives, the
 * reference: on the spliced path the transform takes for a literal
 * replacement of a pattern that cannot match empty, and on PCRE2's own for
 * `$` references and patterns that can (and for a result past the first
 * buffer's size). */
static void test_replace_pattern_as_pcre2_substitutes(void **state)
{
    static const struct { const char *pattern, *repl, *subject; } cases[] = {
        { "host:[^ |)]*", "host:redacted", "Scheduler (host:3f2a | pid:1) host:x host:" },
        { "host:[^ |)]*", "host:redacted", "tokenize" },
        { "pid:[0-9]+", "pid:redacted", "pid:1 pid:22 pid: pid:333" },
        { "(?s)(?<![^ ])Req .*", "Req redacted", " Req 1234abcd" },
        { "(?s)(?<![^ ])Req .*", "Req redacted", "xReq 1234abcd" },
        { "a", "a-much-longer-replacement-than-the-subject-itself-to-grow-the-buffer-", "aaaa" },
        { "(b+)", "<$1>", "abbcbd" },
        { "x*", "-", "abc" },
        { "(b)", "$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1$1", "bbbb" },
        { "é+", "e", "caféé thé" },
    };
    char body[1024], want[1024], find[1100];
    run r;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int err;
        PCRE2_SIZE at, n = sizeof(want);
        pcre2_code *code = pcre2_compile((PCRE2_SPTR)cases[i].pattern, PCRE2_ZERO_TERMINATED,
                                         PCRE2_UTF, &err, &at, NULL);
        char *out;

        assert_non_null(code);
        assert_true(pcre2_substitute(code, (PCRE2_SPTR)cases[i].subject, PCRE2_ZERO_TERMINATED,
                                     0, PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_UNSET_EMPTY,
                                     NULL, NULL, (PCRE2_SPTR)cases[i].repl,
                                     PCRE2_ZERO_TERMINATED, (PCRE2_UCHAR *)want, &n) >= 0);
        pcre2_code_free(code);
        snprintf(body, sizeof(body), "    trace_statements:\n"
                 "      - 'replace_pattern(span.name, \"%s\", \"%s\")'\n",
                 cases[i].pattern, cases[i].repl);
        assert_int_equal(load(&r, body), SF_OK);
        out = apply_span(&r, cases[i].subject, "[]");
        snprintf(find, sizeof(find), "\"name\":\"%s\"", want);
        if (strstr(out, find) == NULL)
            fail_msg("case %zu: %s not in %s", i, find, out);
        sf_free(out);
        unload(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_value_rules_keep_what_fits),
        cmocka_unit_test(test_value_rules_remove_what_does_not),
        cmocka_unit_test(test_declared_names_and_fields),
        cmocka_unit_test(test_declared_one_value_per_key_and_bound),
        cmocka_unit_test(test_pseudonyms),
        cmocka_unit_test(test_pseudonym_lengths),
        cmocka_unit_test(test_pseudonymized_ids),
        cmocka_unit_test(test_declared_mode_refuses_gaps),
        cmocka_unit_test(test_condition_errors),
        cmocka_unit_test(test_replace_pattern_as_pcre2_substitutes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/pipeline/test_otlp_wire_alloc.c: the OTLP codec (sf_otlp_rewrite)
 * under the torture helper: a realistic request rewritten through an
 * allowlist edit and through no edit, and the keyset built, with every
 * allocation failing in turn: SF_ENOMEM (or, for the shrink of the output,
 * success with the larger buffer), nothing leaked. Apart
 * from test_otlp_wire.c, which holds the codec's behaviour. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "bench/sample_batch.h"
#include "sf_otlp_wire.h"
#include "tests/sf_torture.h"

typedef struct scenario {
    const uint8_t *in;
    size_t len;
    bool edit;
    size_t spans;
} scenario;

static const char *const keys[] = { SF_SAMPLE_SPAN_KEYS, SF_SAMPLE_EVENT_KEYS };

static sf_status keyset_scenario(void *arg)
{
    static const bool keep[] = { true, true, true, true, true, true };
    sf_otlp_keyset *ks = NULL;
    sf_status st;

    (void)arg;
    st = sf_otlp_keyset_create(sizeof(keys) / sizeof(keys[0]), keys, keep, false, &ks);
    if (st == SF_OK)
        assert_true(sf_otlp_keyset_keeps(ks, (const uint8_t *)"batch_size", 10));
    sf_otlp_keyset_destroy(ks);
    return st;
}

static sf_status rewrite_scenario(void *arg)
{
    static const bool keep[] = { true, true, true, true, true, true };
    scenario *sc = arg;
    sf_otlp_keyset *ks = NULL;
    sf_otlp_edit e = { 0 };
    sf_otlp_stats stats;
    sf_buf *out = NULL;
    sf_status st = SF_OK;

    if (sc->edit) {
        st = sf_otlp_keyset_create(sizeof(keys) / sizeof(keys[0]), keys, keep, false, &ks);
        if (st != SF_OK)
            return st;
        for (int c = 0; c < SF_OTLP_CTX_COUNT; c++)
            e.keys[c] = ks;
        e.scalar_values_only = true;
    }
    memset(&stats, 0, sizeof(stats));
    st = sf_otlp_rewrite(sc->in, sc->len, 8, sc->edit ? &e : NULL, &out, &stats);
    if (st == SF_OK) {
        assert_non_null(out);
        assert_int_equal(stats.spans, sc->spans);
        if (sc->edit)
            assert_true(stats.removed_attributes > 0);
    } else {
        assert_null(out);
    }
    sf_buf_unref(out);
    sf_otlp_keyset_destroy(ks);
    return st;
}

static void test_keyset(void **state)
{
    const sf_torture t = { .name = "keyset", .run = keyset_scenario, .expect = SF_ENOMEM };

    (void)state;
    assert_true(sf_torture_run(&t) >= 1);
}

static void test_rewrite(void **state)
{
    scenario sc = { .spans = 32 };
    uint8_t *in = sf_sample_request(sc.spans, 7, &sc.len);
    /* The codec's last allocation only shrinks its output to fit; when
     * that fails it keeps the larger buffer, and the run succeeds. */
    const sf_torture t = { .name = "rewrite", .run = rewrite_scenario, .arg = &sc,
                           .may_succeed = true, .expect = SF_ENOMEM };

    (void)state;
    assert_non_null(in);
    sc.in = in;
    assert_true(sf_torture_run(&t) >= 1);
    sc.edit = true;
    assert_true(sf_torture_run(&t) >= 2);
    sf_free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyset),
        cmocka_unit_test(test_rewrite),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

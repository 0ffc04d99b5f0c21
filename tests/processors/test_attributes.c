/* tests/processors/test_attributes.c: the `attributes` and `resource`
 * processors: their actions (upstream's spelling) compiled into one codec
 * edit that serves every signal: inserts, updates and upserts of string constants
 * and ${env:} values on span, log record and data point attributes
 * (attributes) or resource attributes (resource), deletes as a keyset that
 * keeps every other key; and consume accounting for the pass the core ran.
 * Configs go through the real loader; refusals of the actions spanfence
 * does not run are in tests/configs/invalid/attributes_actions.yaml. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/sf_core.h"
#include "processors/attributes/attributes.h"
#include "tests/sf_torture.h"
#include "processor_fixture.h"

typedef pfx_run run;

/* Load the processors section `procs` and create the processor `id`. */
static void load(run *r, const char *procs, const char *id)
{
    if (pfx_load(r, "attributes.yaml", procs, id) != SF_OK)
        fail_msg("%s", r->errors);
    assert_string_equal(r->errors, "");
}

static void unload(run *r)
{
    pfx_unload(r);
}

static bool keeps(const sf_otlp_edit *e, sf_otlp_ctx c, const char *key)
{
    return e->keys[c] == NULL || sf_otlp_keyset_keeps(e->keys[c], (const uint8_t *)key,
                                                      strlen(key));
}

/* The insert of `key` in context c, or NULL. */
static const sf_otlp_insert *insert_of(const sf_otlp_edit *e, sf_otlp_ctx c, const char *key)
{
    for (size_t i = 0; i < e->n_inserts[c]; i++)
        if (strcmp(e->inserts[c][i].key, key) == 0)
            return &e->inserts[c][i];
    return NULL;
}

static const char seed[] =
    "  attributes/vm:\n"
    "    actions:\n"
    "      - key: vm.id\n"
    "        value: ${env:SF_TEST_VM_ID}\n"
    "        action: upsert\n"
    "      - key: deployment\n"
    "        value: \"prod\"\n"
    "        action: insert\n"
    "      - key: user.email\n"
    "        action: delete\n";

/* The seed config's enrichment: upsert of a VM id from the environment,
 * an insert, a delete; on spans, log records and data points, the same
 * edit for every signal, nothing on the resource or span events. */
static void test_attributes_edit(void **state)
{
    run r;
    const sf_otlp_edit *e;
    static const sf_otlp_ctx on[] = { SF_OTLP_SPAN, SF_OTLP_LOG, SF_OTLP_DATAPOINT };

    (void)state;
    setenv("SF_TEST_VM_ID", "vm-7f3a", 1);
    load(&r, seed, "attributes/vm");
    e = r.comp.type->edit(&r.comp, SF_SIGNAL_TRACES);
    assert_non_null(e);
    assert_ptr_equal(e, r.comp.type->edit(&r.comp, SF_SIGNAL_LOGS));
    assert_ptr_equal(e, r.comp.type->edit(&r.comp, SF_SIGNAL_METRICS));
    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        const sf_otlp_insert *vm = insert_of(e, on[i], "vm.id");
        const sf_otlp_insert *dep = insert_of(e, on[i], "deployment");

        assert_non_null(vm);
        assert_string_equal(vm->value, "vm-7f3a");
        assert_true(vm->upsert);
        assert_non_null(dep);
        assert_string_equal(dep->value, "prod");
        assert_false(dep->upsert);
        assert_int_equal(e->n_inserts[on[i]], 2);
        assert_false(keeps(e, on[i], "user.email"));
        assert_true(keeps(e, on[i], "vm.id"));
        assert_true(keeps(e, on[i], "anything.else"));
    }
    assert_int_equal(e->n_inserts[SF_OTLP_RESOURCE], 0);
    assert_int_equal(e->n_inserts[SF_OTLP_SPANEVENT], 0);
    assert_true(keeps(e, SF_OTLP_RESOURCE, "user.email"));
    assert_true(keeps(e, SF_OTLP_SPANEVENT, "user.email"));
    /* the edit changes attributes only: no field, name or body */
    assert_int_equal(e->fields, 0);
    assert_int_equal(e->rename, 0);
    assert_null(e->body_rule);
    unload(&r);
}

/* The resource processor: the same actions, on resource attributes only. */
static void test_resource_edit(void **state)
{
    run r;
    const sf_otlp_edit *e;

    (void)state;
    load(&r, "  resource:\n    attributes:\n"
             "      - {key: cloud.region, value: \"eu-1\", action: upsert}\n"
             "      - {key: host.name, action: delete}\n"
             "      - {key: vm.zone, value: \"z\", action: update}\n", "resource");
    e = r.comp.type->edit(&r.comp, SF_SIGNAL_LOGS);
    assert_int_equal(e->n_inserts[SF_OTLP_RESOURCE], 2);
    assert_string_equal(insert_of(e, SF_OTLP_RESOURCE, "cloud.region")->value, "eu-1");
    assert_true(insert_of(e, SF_OTLP_RESOURCE, "cloud.region")->upsert);
    assert_false(insert_of(e, SF_OTLP_RESOURCE, "cloud.region")->update);
    /* update: replaces where the key is, never adds (the codec's update) */
    assert_string_equal(insert_of(e, SF_OTLP_RESOURCE, "vm.zone")->value, "z");
    assert_true(insert_of(e, SF_OTLP_RESOURCE, "vm.zone")->update);
    assert_false(insert_of(e, SF_OTLP_RESOURCE, "vm.zone")->upsert);
    assert_false(keeps(e, SF_OTLP_RESOURCE, "host.name"));
    assert_true(keeps(e, SF_OTLP_RESOURCE, "service.name"));
    for (int c = SF_OTLP_SCOPE; c < SF_OTLP_CTX_COUNT; c++) {
        assert_int_equal(e->n_inserts[c], 0);
        assert_null(e->keys[c]);
    }
    unload(&r);
}

/* consume accounts for the pass the core ran: the inserted count, the
 * items; a batch whose pass failed (or that reaches it unedited) is
 * dropped whole and counted (fail closed). */
static void test_consume_accounts(void **state)
{
    run r;
    sf_request b;
    sf_counters *cnt;

    (void)state;
    setenv("SF_TEST_VM_ID", "vm-7f3a", 1);
    load(&r, seed, "attributes/vm");
    cnt = sf_component_counters(&r.comp);
    memset(&b, 0, sizeof(b));
    b.signal = SF_SIGNAL_LOGS;
    b.spans = 3;
    b.edited_by = &r.comp;
    b.edit_status = SF_OK;
    b.stats.inserted = 6;
    assert_int_equal(sf_component_consume(&r.comp, &b), SF_OK);
    assert_int_equal(atomic_load(&cnt->values[0]), 6);
    assert_int_equal(atomic_load(&cnt->outgoing_items), 3);
    b.edited_by = NULL;             /* the core did not run the edit: refused */
    assert_int_equal(sf_component_consume(&r.comp, &b), SF_FILTER);
    assert_int_equal(atomic_load(&cnt->dropped_spans[SF_REASON_FILTER_FAILED]), 3);
    assert_int_equal(atomic_load(&cnt->incoming_items), 6);
    assert_int_equal(atomic_load(&cnt->outgoing_items), 3);
    unload(&r);
}

/* create fails cleanly at every allocation, for both types. */
static void test_create_allocation_failures(void **state)
{
    run r;

    (void)state;
    setenv("SF_TEST_VM_ID", "vm-7f3a", 1);
    load(&r, seed, "attributes/vm");
    r.comp.type->destroy(&r.comp);
    assert_true(sf_torture_create(&r.comp, r.comp.config, false) >= 3);
    sf_config_destroy(r.cfg);
    load(&r, "  resource:\n    attributes:\n      - {key: host.name, action: delete}\n",
         "resource");
    r.comp.type->destroy(&r.comp);
    assert_true(sf_torture_create(&r.comp, r.comp.config, false) >= 3);
    sf_config_destroy(r.cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attributes_edit),
        cmocka_unit_test(test_resource_edit),
        cmocka_unit_test(test_consume_accounts),
        cmocka_unit_test(test_create_allocation_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

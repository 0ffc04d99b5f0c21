/* tests/pipeline/test_registry.c: lookups in the table of component types
 * (pipeline/sf_registry.c), walked over the build's whole table
 * (pipeline/cli/components.c) so that a type added later is checked too:
 * every type is found by its name and alias under its own kind and no
 * other, one name may name types of different kinds ("otlp": a receiver
 * and an exporter), unknown names and near misses are not found, every
 * verb a type brings is found and unknown verbs are not, and every kind
 * has its name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "internal/sf_core.h"

static const sf_kind kinds[] = {
    SF_KIND_RECEIVER, SF_KIND_PROCESSOR, SF_KIND_EXPORTER, SF_KIND_EXTENSION,
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

static void test_every_type_found(void **state)
{
    size_t n = 0;

    (void)state;
    for (const sf_component_type *const *t = sf_registry; *t != NULL; t++, n++) {
        assert_non_null((*t)->name);
        assert_ptr_equal(sf_registry_find((*t)->kind, (*t)->name), *t);
        if ((*t)->alias != NULL)
            assert_ptr_equal(sf_registry_find((*t)->kind, (*t)->alias), *t);
        for (size_t k = 0; k < N_KINDS; k++) {
            const sf_component_type *other = sf_registry_find(kinds[k], (*t)->name);

            if (kinds[k] != (*t)->kind)
                assert_true(other == NULL || other->kind == kinds[k]);
        }
        /* one type per name and kind */
        for (const sf_component_type *const *u = sf_registry; u != t; u++)
            if ((*u)->kind == (*t)->kind)
                assert_string_not_equal((*u)->name, (*t)->name);
    }
    assert_true(n >= 4);
}

static void test_same_name_other_kind(void **state)
{
    const sf_component_type *r = sf_registry_find(SF_KIND_RECEIVER, "otlp");
    const sf_component_type *e = sf_registry_find(SF_KIND_EXPORTER, "otlp");

    (void)state;
    assert_non_null(r);
    assert_non_null(e);
    assert_ptr_not_equal(r, e);
    assert_int_equal(r->kind, SF_KIND_RECEIVER);
    assert_int_equal(e->kind, SF_KIND_EXPORTER);
    assert_null(sf_registry_find(SF_KIND_PROCESSOR, "otlp"));
}

static void test_unknown_not_found(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_KINDS; k++) {
        assert_null(sf_registry_find(kinds[k], ""));
        assert_null(sf_registry_find(kinds[k], "no_such_type"));
        assert_null(sf_registry_find(kinds[k], "otlp/extra"));  /* the id, not the type */
        assert_null(sf_registry_find(kinds[k], "OTLP"));        /* exact, as upstream */
        assert_null(sf_registry_find(kinds[k], "otl"));         /* no prefix match */
    }
}

static void test_verbs(void **state)
{
    size_t n = 0;

    (void)state;
    for (const sf_component_type *const *t = sf_registry; *t != NULL; t++)
        for (const sf_cli_verb *v = (*t)->verbs; v != NULL && v->name != NULL; v++, n++) {
            assert_ptr_equal(sf_registry_find_verb(v->name), v);
            assert_non_null(v->run);
            assert_non_null(v->help);
        }
    assert_true(n >= 1);                            /* trace-level */
    assert_null(sf_registry_find_verb(""));
    assert_null(sf_registry_find_verb("no-such-verb"));
    assert_null(sf_registry_find_verb("validate"));     /* the command's own, not a type's */
}

static void test_kind_names(void **state)
{
    (void)state;
    assert_string_equal(sf_kind_name(SF_KIND_RECEIVER), "receiver");
    assert_string_equal(sf_kind_name(SF_KIND_PROCESSOR), "processor");
    assert_string_equal(sf_kind_name(SF_KIND_EXPORTER), "exporter");
    assert_string_equal(sf_kind_name(SF_KIND_EXTENSION), "extension");
    assert_string_equal(sf_kind_name((sf_kind)99), "component");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_found),
        cmocka_unit_test(test_same_name_other_kind),
        cmocka_unit_test(test_unknown_not_found),
        cmocka_unit_test(test_verbs),
        cmocka_unit_test(test_kind_names),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/build/core_alone.c: the core library linked on its own, every
 * object of it (whole archive, --no-undefined), with an empty registry in
 * place of the build's component list. It builds only while no core file
 * calls into a receiver, processor, exporter or extension: the core knows
 * components only through sf_component_type. Not a test to run: building
 * it is the check (it is in the default build). */
#include "internal/sf_core.h"

#include <stddef.h>

extern const sf_component_type *const sf_registry[];
const sf_component_type *const sf_registry[] = { NULL };
const sf_foreign_type sf_foreign_types[] = { { 0, NULL, NULL } };

int main(void)
{
    return 0;
}

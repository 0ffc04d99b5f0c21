#!/bin/sh
# tools/check_layout.sh ROOT: the core (pipeline/*.c, *.h, internal/, cli/)
# includes no component header. The build holds this for receivers/,
# processors/ and exporters/ (the core's include path does not reach them:
# ctest build/core_cannot_include_components); extensions live under
# pipeline/extensions/, which a core file could reach by a relative include,
# so this check covers them and states the rule for all four. It also
# holds the core proper apart from the policy and the command. It prints
# every offending line and exits 1 if there is any.
root=${1:-.}
cd "$root" || exit 2
found=$(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(\.\./)*(pipeline/)?(receivers|processors|exporters|extensions)/' \
    pipeline/*.c pipeline/*.h pipeline/internal/* pipeline/cli/* pipeline/policy/* 2>/dev/null)
if [ -n "$found" ]; then
    echo "$found"
    echo "check_layout: the core includes component headers (pipeline/README.md, Layout: the core knows components only through sf_component_type)" >&2
    exit 1
fi
# The core proper (not its command, pipeline/cli/) includes neither the
# policy (pipeline/policy/, the command's) nor the command.
found=$(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(\.\./)*(pipeline/)?(policy|cli)/|^[[:space:]]*#[[:space:]]*include[[:space:]]*"sf_policy\.h"' \
    pipeline/*.c pipeline/*.h pipeline/internal/* 2>/dev/null)
if [ -n "$found" ]; then
    echo "$found"
    echo "check_layout: the core includes the policy or the command (pipeline/README.md, Layout: they use the core, not the other way round)" >&2
    exit 1
fi
echo "check_layout: the core includes no component header, and neither the policy nor the command"

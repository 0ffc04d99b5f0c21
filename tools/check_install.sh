#!/bin/sh
# tools/check_install.sh BUILD_DIR: `cmake --install` into a scratch
# DESTDIR (prefix /usr) and check what an operator gets: the command (its
# --version, `validate` of the installed default config), the man page
# (groff finds no problem in it), the systemd unit (systemd-analyze verify,
# with its paths pointed into the scratch tree), and that a second install
# keeps an edited config. Exits 1 on the first problem.
set -eu
build=$1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
fail() { echo "check_install: $*" >&2; exit 1; }

DESTDIR=$dest cmake --install "$build" --prefix /usr >/dev/null
for f in usr/bin/spanfence usr/share/man/man1/spanfence.1 \
         usr/lib/systemd/system/spanfence.service etc/spanfence/config.yaml; do
    [ -f "$dest/$f" ] || fail "$f was not installed"
done
"$dest/usr/bin/spanfence" --version | grep -q '^commit: ' || fail "--version names no commit"
(cd / && SPANFENCE_OUTPUT=/dev/null "$dest/usr/bin/spanfence" validate \
    --config "$dest/etc/spanfence/config.yaml") >/dev/null || fail "the installed config does not validate"
grep -q "^ExecStart=/usr/bin/spanfence --config /etc/spanfence/config.yaml$" \
    "$dest/usr/lib/systemd/system/spanfence.service" || fail "ExecStart does not name the installed paths"
grep -q '^ExecReload=/bin/kill -HUP \$MAINPID$' "$dest/usr/lib/systemd/system/spanfence.service" ||
    fail "ExecReload does not send SIGHUP"
warn=$(groff -man -ww -z "$dest/usr/share/man/man1/spanfence.1" 2>&1) || true
[ -z "$warn" ] || fail "man page: $warn"
if command -v systemd-analyze >/dev/null 2>&1; then
    unit=$dest/spanfence.service
    sed "s|/usr/bin/spanfence|$dest/usr/bin/spanfence|g; s|/etc/spanfence|$dest/etc/spanfence|g" \
        "$dest/usr/lib/systemd/system/spanfence.service" > "$unit"
    out=$(systemd-analyze verify --man=no "$unit" 2>&1) || fail "systemd-analyze verify: $out"
    [ -z "$out" ] || fail "systemd-analyze verify: $out"
fi
echo "# edited" >> "$dest/etc/spanfence/config.yaml"
DESTDIR=$dest cmake --install "$build" --prefix /usr >/dev/null
tail -n 1 "$dest/etc/spanfence/config.yaml" | grep -q '^# edited$' || fail "a reinstall overwrote the config"
echo "check_install: ok"

#!/bin/sh
# tools/check_install.sh BUILD_DIR: `cmake --install` into a scratch
# DESTDIR (prefix /usr) and check what an operator gets: the command (its
# --version, `validate` of the installed default config), the man page
# (groff finds no problem in it), the systemd unit (systemd-analyze verify,
# with its paths pointed into the scratch tree), and that a second install
# keeps an edited config. Then, as an operator without root would: an
# install to a scratch --prefix (no DESTDIR) writes only under it, the config
# in PREFIX/etc/spanfence (issue 24, 1); and the installed default config
# answers health_check on localhost:13133 and writes nothing to disk (2).
# Exits 1 on the first problem.
set -eu
build=$1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
fail() { echo "check_install: $*" >&2; exit 1; }

DESTDIR=$dest cmake --install "$build" --prefix /usr >/dev/null
for f in usr/bin/spanfence usr/share/man/man1/spanfence.1.gz usr/lib/sysusers.d/spanfence.conf \
         usr/share/doc/spanfence/changelog.gz usr/share/doc/spanfence/copyright \
         usr/lib/systemd/system/spanfence.service etc/spanfence/config.yaml; do
    [ -f "$dest/$f" ] || fail "$f was not installed"
done
"$dest/usr/bin/spanfence" --version | grep -q '^commit: ' || fail "--version names no commit"
(cd / && SPANFENCE_OUTPUT=/dev/null "$dest/usr/bin/spanfence" validate \
    --config "$dest/etc/spanfence/config.yaml") >/dev/null || fail "the installed config does not validate"
grep -q "^ExecStart=/usr/bin/spanfence --config /etc/spanfence/config.yaml \$SPANFENCE_OPTS$" \
    "$dest/usr/lib/systemd/system/spanfence.service" || fail "ExecStart does not name the installed paths"
grep -q '^ExecReload=/usr/bin/spanfence reload --pid \$MAINPID --config /etc/spanfence/config.yaml$' \
    "$dest/usr/lib/systemd/system/spanfence.service" ||
    fail "ExecReload does not send SIGHUP and wait for the outcome (spanfence reload)"
grep -q '^ExecReload=/usr/bin/spanfence validate ' "$dest/usr/lib/systemd/system/spanfence.service" ||
    fail "ExecReload does not validate first"
grep -q '^Type=notify$' "$dest/usr/lib/systemd/system/spanfence.service" || fail "the unit is not Type=notify"
warn=$(zcat "$dest/usr/share/man/man1/spanfence.1.gz" | groff -man -ww -z 2>&1) || true
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

# 1: a scratch prefix, no DESTDIR: everything lands under it (the manifest
# lists what was written), the unit names the prefix's paths
pre=$dest/opt/sf
cmake --install "$build" --prefix "$pre" >/dev/null
outside=$(grep -v "^$pre/" "$build/install_manifest.txt" || true)
[ -z "$outside" ] || fail "an install to --prefix $pre wrote outside it: $outside"
[ -f "$pre/etc/spanfence/config.yaml" ] || fail "no $pre/etc/spanfence/config.yaml"
grep -q "^ExecStart=$pre/bin/spanfence --config $pre/etc/spanfence/config.yaml \$SPANFENCE_OPTS$" \
    "$pre/lib/systemd/system/spanfence.service" || fail "the unit does not name the prefix's paths"

# 2: the installed default config, run from an empty directory: health_check
# answers on localhost:13133, and no file appears (receivers and metrics
# moved to free ports so other collectors on this machine do not matter)
if command -v curl >/dev/null 2>&1 &&
   ! curl -s -o /dev/null "http://localhost:13133/" 2>/dev/null; then
    run=$dest/run
    mkdir "$run"
    (cd "$run" && exec "$dest/usr/bin/spanfence" --config "$dest/etc/spanfence/config.yaml" \
        --set receivers.otlp.protocols.grpc.endpoint=127.0.0.1:0 \
        --set receivers.otlp.protocols.http.endpoint=127.0.0.1:0 \
        --set service.telemetry.metrics.address=127.0.0.1:0 2>"$dest/run.log") &
    pid=$!
    ok=
    for _ in $(seq 100); do
        if [ "$(curl -s -o /dev/null -w '%{http_code}' http://localhost:13133/)" = 200 ]; then
            ok=1
            break
        fi
        sleep 0.1
    done
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" || fail "the default config did not stop cleanly: $(cat "$dest/run.log")"
    [ -n "$ok" ] || fail "the default config does not answer health_check on localhost:13133: $(cat "$dest/run.log")"
    written=$(ls -A "$run")
    [ -z "$written" ] || fail "the default config wrote to disk: $written"
else
    echo "check_install: localhost:13133 in use here: health_check not checked" >&2
fi
echo "check_install: ok"

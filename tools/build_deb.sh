#!/bin/sh
# tools/build_deb.sh [BUILD_DIR] [OUT_DIR]: the spanfence .deb. Configures
# BUILD_DIR (default build-deb) for prefix /usr, builds the command, runs
# `cpack -G DEB` there (CMakeLists.txt: the binary, spanfence(1), the systemd
# unit, the sysusers.d entry making user spanfence, /etc/spanfence/config.yaml
# as a conffile kept on upgrade; maintainer scripts in tools/debian/), then
# checks it in a scratch root without touching the machine: the contents
# listed, `dpkg --root` install (scripts run chrootless, honouring
# DPKG_ROOT: the user is made in the scratch root's /etc/passwd), an edited
# config kept across a reinstall, systemd-analyze verify on the installed
# unit, and `dpkg --root` remove and purge. Prints the .deb's path last.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-deb}
out=${2:-$build}
fail() { echo "build_deb: $*" >&2; exit 1; }

cmake -S "$src" -B "$build" -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build "$build" --target spanfence -j"$(nproc)" >/dev/null
(cd "$build" && cpack -G DEB -B "$out" >/dev/null) || fail "cpack failed"
deb=$(ls -t "$out"/spanfence_*.deb | head -n 1)
echo "== $deb"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
echo "== contents"
dpkg-deb --contents "$deb" | awk '{print $1, $6}'
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/spanfence/config.yaml ||
    fail "the config is not a conffile"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc"
: > "$root/var/lib/dpkg/status"
: > "$root/etc/passwd"
: > "$root/etc/group"
dpkgr() { dpkg --root="$root" --force-script-chrootless --force-not-root --log=/dev/null "$@"; }
echo "== dpkg --root install"
# the scratch root has no libc6 etc.: dependencies are the machine's
dpkgr --force-depends -i "$deb" 2>&1 | grep -v -e '^ ' -e 'dependency problems' || true
dpkgr --status spanfence 2>/dev/null | grep -q '^Status: install ok installed' || fail "dpkg -i failed"
for f in usr/bin/spanfence usr/share/man/man1/spanfence.1 usr/lib/systemd/system/spanfence.service \
         usr/lib/sysusers.d/spanfence.conf etc/spanfence/config.yaml; do
    [ -f "$root/$f" ] || fail "$f not installed"
done
grep -q '^spanfence:' "$root/etc/passwd" || fail "no user spanfence in the scratch root"
grep -q '^spanfence-operators:' "$root/etc/group" || fail "no group spanfence-operators"
echo "user: $(grep '^spanfence:' "$root/etc/passwd")"
if command -v systemd-analyze >/dev/null 2>&1; then
    # the installed unit, its paths pointed into the scratch root (which has
    # no systemd of its own to resolve targets against)
    sed "s|/usr/bin/spanfence|$root/usr/bin/spanfence|g; s|/etc/spanfence|$root/etc/spanfence|g" \
        "$root/usr/lib/systemd/system/spanfence.service" > "$root/spanfence.service"
    v=$(systemd-analyze verify --man=no "$root/spanfence.service" 2>&1) ||
        fail "systemd-analyze verify: $v"
    [ -z "$v" ] || fail "systemd-analyze verify: $v"
    echo "systemd-analyze verify: clean"
fi
echo "# edited by the operator" >> "$root/etc/spanfence/config.yaml"
dpkgr --force-depends --force-confold -i "$deb" >/dev/null 2>&1 || fail "reinstall failed"
tail -n 1 "$root/etc/spanfence/config.yaml" | grep -q '^# edited by the operator$' ||
    fail "a reinstall replaced the edited config"
echo "reinstall: edited config kept"
dpkgr -r spanfence >/dev/null || fail "dpkg -r failed"
[ ! -e "$root/usr/bin/spanfence" ] || fail "dpkg -r left the binary"
[ -e "$root/etc/spanfence/config.yaml" ] || fail "dpkg -r removed the conffile (only purge should)"
dpkgr -P spanfence >/dev/null || fail "dpkg -P failed"
[ ! -e "$root/etc/spanfence/config.yaml" ] || fail "dpkg -P left the config"
echo "remove: binary gone, config kept; purge: config gone"
echo "$deb"

#!/bin/sh
# tools/build_deb.sh [BUILD_DIR] [OUT_DIR]: the spanfence .deb and its
# spanfence-dbgsym .deb. Configures BUILD_DIR (default build-deb) for prefix
# /usr (RelWithDebInfo, with the hardening flags every build has), builds the
# command, runs `cpack -G DEB` there (CMakeLists.txt: the stripped binary,
# spanfence(1), changelog and copyright, the systemd unit, the sysusers.d
# entry making user spanfence, /etc/spanfence/config.yaml as a conffile kept
# on upgrade; maintainer scripts in tools/debian/), then checks both without
# touching the machine: lintian (no error, no warning), hardening-check on
# the packaged binary, the debug symbols matching its build id; `dpkg --root`
# install into a scratch root (scripts run chrootless, honouring DPKG_ROOT:
# the user made in its /etc/passwd, the unit enabled by deb-systemd-helper),
# systemd-analyze verify on the installed unit, an upgrade keeping an edited
# config, remove and purge; and the maintainer scripts run as on a live
# systemd host (in a mount namespace whose /run has systemd/system, with
# deb-systemd-invoke, deb-systemd-helper, systemctl and systemd-sysusers
# replaced by stubs that log their arguments): install enables and does not
# start, upgrade try-restarts, remove stops, purge removes the state.
# Prints the two .debs' paths last.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-deb}
out=${2:-$build}
fail() { echo "build_deb: $*" >&2; exit 1; }

cmake -S "$src" -B "$build" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target spanfence -j"$(nproc)" >/dev/null
rm -f "$out"/spanfence_*.deb "$out"/spanfence-dbgsym_*
(cd "$build" && cpack -G DEB -B "$out" >/dev/null) || fail "cpack failed"
deb=$(ls "$out"/spanfence_*.deb)
version=$(dpkg-deb -f "$deb" Version)
arch=$(dpkg-deb -f "$deb" Architecture)
echo "== $deb"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
echo "== contents"
dpkg-deb --contents "$deb" | awk '{print $1, $6}'
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/spanfence/config.yaml ||
    fail "the config is not a conffile"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The debug symbols: CPack (3.25) writes them as a .ddeb whose md5sums name
# its staging paths; made again as Debian's dh_strip makes spanfence-dbgsym:
# a .deb, the .debug file 0644, md5sums relative, the doc dir a symlink.
ddeb=$(ls "$out"/spanfence-dbgsym_*.ddeb)
dpkg-deb -R "$ddeb" "$tmp/dbgsym"
find "$tmp/dbgsym/usr" -name '*.debug' -exec chmod 0644 {} +
(cd "$tmp/dbgsym" && find usr -type f | LC_ALL=C sort | xargs md5sum > DEBIAN/md5sums)
mkdir -p "$tmp/dbgsym/usr/share/doc"
ln -s spanfence "$tmp/dbgsym/usr/share/doc/spanfence-dbgsym"
dbgsym=$out/spanfence-dbgsym_${version}_${arch}.deb
dpkg-deb --root-owner-group --build "$tmp/dbgsym" "$dbgsym" >/dev/null
rm -f "$ddeb"

echo "== the packaged binary"
dpkg-deb -x "$deb" "$tmp/x"
bin=$tmp/x/usr/bin/spanfence
file -b "$bin" | grep -q ', stripped' || fail "the packaged binary is not stripped: $(file -b "$bin")"
id=$(readelf -n "$bin" | sed -n 's/.*Build ID: //p')
[ -n "$id" ] || fail "the packaged binary has no build id"
dpkg-deb -c "$dbgsym" | grep "/usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug$" >/dev/null ||
    fail "spanfence-dbgsym holds no debug file for build id $id"
ls -l "$bin" | awk '{print "stripped binary:", $5, "bytes; debug symbols in", "'"$(basename "$dbgsym")"'"}'
sh "$src/tests/build/hardening.sh" "$bin" 1 || fail "the packaged binary lacks a hardening flag"
if command -v hardening-check >/dev/null 2>&1; then
    # --nocfprotection: bookworm's crt1.o/crti.o carry no IBT/SHSTK note, so
    # ld drops the binary's (our objects are built with -fcf-protection)
    hardening-check --nocfprotection "$bin" || fail "hardening-check"
fi
if command -v lintian >/dev/null 2>&1; then
    echo "== lintian"
    lint=$(lintian --no-tag-display-limit "$deb" "$dbgsym" 2>/dev/null || true)
    echo "$lint"
    ! echo "$lint" | grep -q '^[EW]:' || fail "lintian reports errors or warnings"
fi

root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc"
: > "$root/var/lib/dpkg/status"
: > "$root/etc/passwd"
: > "$root/etc/group"
dpkgr() { dpkg --root="$root" --force-script-chrootless --force-not-root --log=/dev/null "$@"; }
echo "== dpkg --root install"
# the scratch root has no libc6 etc.: dependencies are the machine's
dpkgr --force-depends -i "$deb" 2>&1 | grep -v -e '^ ' -e 'dependency problems' || true
dpkgr --status spanfence 2>/dev/null | grep -q '^Status: install ok installed' || fail "dpkg -i failed"
for f in usr/bin/spanfence usr/share/man/man1/spanfence.1.gz usr/lib/systemd/system/spanfence.service \
         usr/lib/sysusers.d/spanfence.conf etc/spanfence/config.yaml usr/share/doc/spanfence/copyright \
         usr/share/doc/spanfence/changelog.gz; do
    [ -f "$root/$f" ] || fail "$f not installed"
done
grep -q '^spanfence:' "$root/etc/passwd" || fail "no user spanfence in the scratch root"
grep -q '^spanfence-operators:' "$root/etc/group" || fail "no group spanfence-operators"
echo "user: $(grep '^spanfence:' "$root/etc/passwd")"
wants=$root/etc/systemd/system/multi-user.target.wants/spanfence.service
[ -L "$wants" ] || fail "install did not enable the unit (no $wants)"
echo "install: unit enabled (deb-systemd-helper, DPKG_ROOT)"
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
# the upgrade: the same files as a later version
dpkg-deb -R "$deb" "$tmp/next"
sed -i "s/^Version: .*/Version: $version+upgrade/" "$tmp/next/DEBIAN/control"
dpkg-deb --root-owner-group --build "$tmp/next" "$tmp/next.deb" >/dev/null
echo "# edited by the operator" >> "$root/etc/spanfence/config.yaml"
dpkgr --force-depends --force-confold -i "$tmp/next.deb" >/dev/null 2>&1 || fail "upgrade failed"
dpkgr --status spanfence | grep -qx "Version: $version+upgrade" || fail "the upgrade did not install"
tail -n 1 "$root/etc/spanfence/config.yaml" | grep -q '^# edited by the operator$' ||
    fail "an upgrade replaced the edited config"
[ -L "$wants" ] || fail "the upgrade lost the enablement"
echo "upgrade to $version+upgrade: edited config kept, unit still enabled"
mkdir -p "$root/var/lib/spanfence" && : > "$root/var/lib/spanfence/audit.log"
dpkgr -r spanfence >/dev/null || fail "dpkg -r failed"
[ ! -e "$root/usr/bin/spanfence" ] || fail "dpkg -r left the binary"
[ -e "$root/etc/spanfence/config.yaml" ] || fail "dpkg -r removed the conffile (only purge should)"
[ -e "$root/var/lib/spanfence/audit.log" ] || fail "dpkg -r removed the state (only purge should)"
dpkgr -P spanfence >/dev/null || fail "dpkg -P failed"
[ ! -e "$root/etc/spanfence/config.yaml" ] || fail "dpkg -P left the config"
[ ! -e "$root/var/lib/spanfence" ] || fail "dpkg -P left /var/lib/spanfence"
[ ! -e "$wants" ] || fail "dpkg -P left the enablement"
echo "remove: binary gone, config and state kept; purge: config, state and enablement gone"

# The scripts as on a live systemd host, where DPKG_ROOT is empty: a mount
# namespace whose /run is a tmpfs with systemd/system in it, and every
# command that would change the machine a stub logging its arguments.
if unshare -m true 2>/dev/null; then
    mkdir "$tmp/stubs" "$tmp/ctrl"
    dpkg-deb -e "$deb" "$tmp/ctrl"
    for c in deb-systemd-invoke deb-systemd-helper systemctl systemd-sysusers; do
        printf '#!/bin/sh\necho "%s $*" >> "$SF_STUB_LOG"\n' "$c" > "$tmp/stubs/$c"
        chmod +x "$tmp/stubs/$c"
    done
    script() {   # script NAME ARGS...: the log of its commands, one a line
        : > "$tmp/log"
        env -u DPKG_ROOT PATH="$tmp/stubs:/usr/bin:/bin" SF_STUB_LOG="$tmp/log" \
            unshare -m sh -c 'mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system && exec sh "$@"' \
            sh "$tmp/ctrl/$@" >/dev/null || fail "$* failed"
        grep -v -e ' --quiet was-enabled' -e ' unmask ' -e 'daemon-reload' "$tmp/log" || true
    }
    [ "$(script postinst configure)" = "systemd-sysusers spanfence.conf
deb-systemd-helper enable spanfence.service" ] || fail "postinst configure (install): $(script postinst configure)"
    script postinst configure "$version" | grep -qx 'deb-systemd-invoke try-restart spanfence.service' ||
        fail "postinst configure $version (upgrade) does not try-restart: $(script postinst configure "$version")"
    script postinst configure | grep -q 'deb-systemd-invoke' && fail "postinst starts the service on install"
    script prerm upgrade "$version+upgrade" | grep -q 'stop' && fail "prerm upgrade stops the service"
    script prerm remove | grep -qx 'deb-systemd-invoke stop spanfence.service' || fail "prerm remove does not stop"
    script postrm remove | grep -qx 'deb-systemd-helper mask spanfence.service' || fail "postrm remove does not mask"
    script postrm purge | grep -qx 'deb-systemd-helper purge spanfence.service' || fail "postrm purge keeps the state"
    echo "scripts on a live host: install enables (no start), upgrade try-restarts, remove stops, purge forgets"
else
    echo "build_deb: no mount namespace here: the scripts' systemd calls not exercised" >&2
fi
echo "$deb"
echo "$dbgsym"

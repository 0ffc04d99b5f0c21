#!/bin/sh
# tests/build/hardening.sh BINARY FORTIFY: the hardening every build of
# spanfence has (CMakeLists.txt, SF_HARDENING), read in the ELF file itself:
# a position-independent executable (type DYN, FLAGS_1 PIE), relocations
# read-only (GNU_RELRO) and bound at start (BIND_NOW, FLAGS_1 NOW), the stack
# protector (__stack_chk_fail imported), and when FORTIFY is 1 (an optimised
# build without sanitizers) glibc's fortified calls (__*_chk imported).
# Works on a stripped binary (the .deb's): dynamic symbols and headers only.
set -u
bin=$1 fortify=$2
fails=0
bad() { echo "hardening: $bin: $*" >&2; fails=$((fails + 1)); }

[ -f "$bin" ] || { echo "hardening: no $bin" >&2; exit 1; }
hdr=$(readelf -hW "$bin") dyn=$(readelf -dW "$bin") seg=$(readelf -lW "$bin")
syms=$(readelf --dyn-syms -W "$bin" | awk '$7 == "UND" {print $8}' | sed 's/@.*//')

echo "$hdr" | grep -q 'Type: *DYN' || bad "not position-independent (ELF type is not DYN)"
echo "$dyn" | grep -q 'FLAGS_1).*Flags:.* PIE' || bad "no FLAGS_1 PIE"
echo "$seg" | grep -q '^ *GNU_RELRO ' || bad "no GNU_RELRO segment (-z relro)"
echo "$dyn" | grep -Eq '\(BIND_NOW\)|\(FLAGS\) +BIND_NOW' || bad "no BIND_NOW (-z now)"
echo "$dyn" | grep -q 'FLAGS_1).*Flags:.* NOW' || bad "no FLAGS_1 NOW (-z now)"
echo "$syms" | grep -qx '__stack_chk_fail' || bad "no __stack_chk_fail (-fstack-protector-strong)"
chk=$(echo "$syms" | grep -c '^__.*_chk$')
if [ "$fortify" = 1 ]; then
    [ "$chk" -gt 0 ] || bad "no fortified __*_chk call (-D_FORTIFY_SOURCE=2)"
fi
[ "$fails" -eq 0 ] || exit 1
echo "hardening: $bin: PIE, RELRO, BIND_NOW, stack protector, $chk fortified calls"

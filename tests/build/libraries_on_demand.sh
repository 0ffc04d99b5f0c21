#!/bin/sh
# tests/build/libraries_on_demand.sh BINARY SOURCE_DIR: libcurl, libsystemd,
# libcrypto and libmicrohttpd are not linked (pipeline/sf_libcurl.c,
# sf_libsystemd.c, sf_libcrypto.c, sf_libmicrohttpd.c); the first three are
# loaded only by a config that uses them, libmicrohttpd only by a start
# (never by `validate`: the HTTP endpoints' daemons start after READY). `validate`
# runs the components' create, where they load, and LD_DEBUG=files names
# every object the loader maps, dlopen'ed ones included:
#   configs/default.yaml (OTLP in, debug out): none of the three;
#   the same with a pseudonym_key: libcrypto alone (the transform's HMAC pads);
#   bench/configs/pipeline.yaml (otlphttp): libcurl, not libsystemd;
#   configs/cvm.yaml: all three (journald, otlphttp, pseudonyms).
# The binary exports none of the functions it forwards (they must not
# interpose on the libraries' own calls).
set -u
bin=$(realpath "$1") src=$2
fails=0
bad() { echo "libraries_on_demand: $*" >&2; fails=$((fails + 1)); }

needed=$(readelf -dW "$bin" | awk '/\(NEEDED\)/ {print $NF}')
for lib in libcurl libsystemd libcrypto libssl libmicrohttpd libgnutls; do
    echo "$needed" | grep -q "\[$lib\." && bad "$bin links $lib"
done
exported=$(readelf --dyn-syms -W "$bin" | awk '$7 != "UND" {print $8}' |
           grep -E '^(curl_|sd_|SHA256|EVP_|OPENSSL_|MHD_)')
[ -z "$exported" ] || bad "$bin exports $(echo $exported)"

# loaded NAME... : the libraries among libcurl, libsystemd, libcrypto, libmicrohttpd that
# `validate` with the rest of the arguments maps, in that order
loaded() {
    out=$(LD_DEBUG=files "$bin" validate "$@" 2>&1)
    echo "$out" | grep -q 'configuration is valid' || { bad "not valid: $*: $out"; return; }
    for lib in libcurl libsystemd libcrypto libmicrohttpd; do
        echo "$out" | grep -q "file=$lib\.so" && printf '%s ' "$lib"
    done
}
expect() {
    want=$1; shift
    got=$(loaded "$@")
    [ "$got" = "$want" ] || bad "validate $*: loaded '$got', expected '$want'"
}

cd "$src" || exit 1
key=0123456789abcdef0123456789abcdef
expect "" --config configs/default.yaml
expect "libcrypto " --config configs/default.yaml \
    --set processors.transform/allowlist.pseudonym_key=$key
expect "libcurl libcrypto " --config bench/configs/pipeline.yaml
tmp=$(mktemp -d) || exit 1
SPANFENCE_PSEUDONYM_KEY=$key SPANFENCE_GATEWAY_ENDPOINT=https://gateway.invalid \
    SPANFENCE_GATEWAY_TOKEN=t expect "libcurl libsystemd libcrypto " --config configs/cvm.yaml \
    --set receivers.journald.cursor_file="$tmp/cursor"
rm -rf "$tmp"
[ "$fails" -eq 0 ] || exit 1
echo "libraries_on_demand: none linked; loaded by the configs that use them"

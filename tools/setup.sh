#!/usr/bin/env bash
# Installs everything spanfence needs to build and test, from Debian's packages
# and (for the end-to-end tests' independent OTLP peers) the npm registry.
# SF_FUZZ=1 adds clang and libFuzzer (tools/fuzz.sh sets it); SF_STRESS=1 adds
# stress-ng, the competing load of tools/repeat.sh.
# Idempotent: safe to run again.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)

pkgs=(build-essential cmake pkg-config
      libprotobuf-c-dev protobuf-c-compiler
      # the codec's tables are generated from the .proto files at build time
      protobuf-compiler python3 python3-protobuf
      libgrpc-dev
      libyaml-dev zlib1g-dev libdeflate-dev libzstd-dev libcmocka-dev libjson-c-dev
      libcurl4-openssl-dev libmicrohttpd-dev libpcre2-dev libsystemd-dev
      # the transform processor's pseudonyms (HMAC-SHA256)
      libssl-dev
      # the OTLP/gRPC receiver's HTTP/2
      libnghttp2-dev
      valgrind curl zstd
      # the TLS test's certificates, the install check (man page lint, unit verify),
      # tools/build_deb.sh (cpack -G DEB needs dpkg-shlibdeps)
      openssl groff-base systemd dpkg-dev
      # the package test (tools/build_deb.sh): CPack's debug-symbols split
      # reads `file`, then lintian and hardening-check (devscripts) judge it
      file lintian devscripts
      # the independent decoder of the privacy differential test, and load tools
      python3 python3-protobuf python3-grpcio protobuf-compiler nghttp2-client
      # the HTTP/2 attackers of the receiver's abuse tests
      python3-h2 python3-hpack
      # the prometheus receiver's real exposer (e2e) and the parser's differential
      # reference; Debian's Prometheus server, which the e2e test compares with, and
      # node-exporter, a second real exposer (Go's text format)
      python3-prometheus-client prometheus prometheus-node-exporter
      # the journald receiver's e2e test: journal files written by the real
      # journal code (systemd-journal-remote, from the export format)
      systemd-journal-remote)
# clang and its libFuzzer/sanitizer runtimes, only for tools/fuzz.sh (about
# 40 MB to download, 230 MB installed, so ordinary set-up skips them).
if [ "${SF_FUZZ:-0}" = 1 ]; then
    pkgs+=(clang libclang-rt-14-dev)
fi
if [ "${SF_STRESS:-0}" = 1 ]; then
    pkgs+=(stress-ng)
fi
# Node.js for the e2e peers: the machine's own if it has one, else Debian's.
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The end-to-end tests' independent OTLP peers (OpenTelemetry JS SDK, grpc-js, protobufjs).
if [ "${SPANFENCE_SKIP_NPM:-0}" != 1 ] && [ -f "$here/tests/e2e/package.json" ]; then
    (cd "$here/tests/e2e" && npm ci --no-audit --no-fund --loglevel=error)
fi

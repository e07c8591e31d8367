#!/usr/bin/env bash
# Builds the npm package (docs/NODE.md): fetches the pinned header packages
# (and Bun and TypeScript, for the tests) from the npm registry into
# node/.cache once, builds the addon in node/build against wgnn's build folder (scripts/setup
# makes it), lays the binaries out in node/prebuilt/linux-x64, and runs
# `npm pack` into node/build.
#
#   node/build.sh [--no-pack]     WGNN_BUILD_DIR: wgnn's build folder (default build/)
#
# Prints the tarball's path last.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
BUILD="${WGNN_BUILD_DIR:-$ROOT/build}"
CACHE="$HERE/.cache"
PACK=1
[ "${1:-}" = "--no-pack" ] && PACK=0

die() { echo "node/build.sh: error: $*" >&2; exit 1; }
command -v npm >/dev/null || die "npm is missing (Debian: apt-get install nodejs npm)"
command -v cmake >/dev/null || die "cmake is missing"
[ -e "$BUILD/libwgnn.so" ] || die "$BUILD/libwgnn.so is missing: run scripts/setup first (it builds wgnn)"

# fetch SPEC SHA256 NAME: the package's tarball, checked, unpacked in
# .cache/NAME (kept: fetched once).
fetch() {
  local spec="$1" sha="$2" name="$3" dest="$CACHE/$3"
  if [ -f "$dest/.sha256" ] && [ "$(cat "$dest/.sha256")" = "$sha" ]; then return; fi
  local tmp
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null 2>"$tmp/err") || {
    cat "$tmp/err" >&2; rm -rf "$tmp"
    die "could not fetch $spec from the npm registry (is it reachable? npm config get registry)"; }
  local tgz
  tgz="$(ls "$tmp"/*.tgz)"
  echo "$sha  $tgz" | sha256sum -c --quiet - || { rm -rf "$tmp"; die "$spec: sha256 differs from the pinned $sha"; }
  rm -rf "$dest" && mkdir -p "$dest"
  tar xzf "$tgz" -C "$dest"
  echo "$sha" >"$dest/.sha256"
  rm -rf "$tmp"
}
fetch node-api-headers@1.9.0 6cbfac49542194ae2c8f1dee5fa2dc00d66bec9cbf3b59e3a4e5f16d14eb0d19 node-api-headers
fetch node-addon-api@8.9.2 4cd65698541b19a33f798f1dc25c02c6ed1c9d7749b8824b1a1ccecdd197c8ea node-addon-api
# Bun's own build for x86-64 CPUs without AVX2 too (the `bun` package's
# install picks between it and the AVX2 one); only the tests run it.
fetch @oven/bun-linux-x64-baseline@1.4.5 c18ff4130882eaa8209f0b3e66a202abd1e07a137f38a254d0b7431bc6a03827 bun
# The TypeScript compiler, for the tests' check of index.d.ts.
fetch typescript@5.6.3 ef67f8d8ad895858024b7339d3e34bf112cae3c5db1f538c3079038b17ae30fa typescript

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
[ -f "$HERE/build/CMakeCache.txt" ] && GEN=()  # configured before: its generator stays
cmake -S "$HERE" -B "$HERE/build" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DWGNN_BUILD_DIR="$BUILD" \
  -DNODE_API_HEADERS_DIR="$CACHE/node-api-headers/package" -DNODE_ADDON_API_DIR="$CACHE/node-addon-api/package" \
  >/dev/null
cmake --build "$HERE/build" >&2

if [ "$PACK" = 1 ]; then
  cp "$ROOT/LICENSE" "$HERE/LICENSE"
  tgz="$(cd "$HERE" && npm pack --silent --pack-destination "$HERE/build")"
  echo "$HERE/build/$tgz"
fi

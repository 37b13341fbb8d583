#!/usr/bin/env bash
# tests/gpu/run.sh rehearsed here, as a lent GPU host would run it but with the CPU emulator
# standing in for libcuda and libcublas (deno task gpu:dry): prepare.sh's bundle, unpacked by
# run.sh with no python3, xz or deno on PATH and Deno's npm cache limited to the bundle's
# (--cached-only: offline), quick shapes. Must exit 0 within 7 minutes and print the table;
# the numbers mean nothing, the table being complete is what is checked.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NO_COLOR=1
bash tests/gpu/prepare.sh
# What the host lacks; with LLAMA=1 (the bundle with llama.cpp's CUDA build, whose Deno is
# xz) python3 stays, as on the H200 hosts, to unpack it.
hidden() {
  case "$1" in
    xz | unxz | xzcat | lzma | unlzma | deno) return 0 ;;
    python*) [ "${LLAMA:-0}" != 1 ] ;;
    *) return 1 ;;
  esac
}
emu=$(.tools/deno/deno eval 'import { buildEmulator } from "./tests/cuda/emu/build_emu.ts"; console.log(await buildEmulator())' | tail -1)
# What a device call gets: the working tree (tracked and untracked, not ignored files) and
# the carried bundle, nothing else of kernels/build.
host=$(mktemp -d)
trap 'rm -rf "$host"' EXIT
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$host" 2>/dev/null || true
mkdir -p "$host/kernels/build" && cp -r kernels/build/gpu "$host/kernels/build/"
bin=$host/.bin
mkdir -p "$bin"
IFS=: read -r -a dirs <<< "$PATH"
for d in "${dirs[@]}"; do
  for f in "$d"/*; do
    n=$(basename "$f")
    hidden "$n" && continue
    [ -x "$f" ] && [ ! -e "$bin/$n" ] && ln -s "$f" "$bin/$n"
  done
done
start=$(date +%s)
(cd "$host" && env PATH="$bin" DRY=1 DRY_EMU="$emu" OUT="$host/out" timeout 420 bash tests/gpu/run.sh)
echo "dry run: exit 0 in $(( $(date +%s) - start )) s"

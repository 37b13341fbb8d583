#!/usr/bin/env bash
# Prepares, on a machine without a GPU, everything tests/gpu/run.sh needs on a GPU host that
# has no Deno, no network, maybe no nvcc, python3, xz or tar: the kernels, Deno (gzip: the
# one decompressor such hosts still have; run.sh unpacks the rest with Deno itself), the npm
# packages the GPU suite, the NCCL test and the bench import (a DENO_DIR subset), and model
# fixtures. Output: kernels/build/gpu/ (git-ignored, like all of kernels/build).
#
#   tests/gpu/prepare.sh [FIXTURE...]   (default: qwen3-tiny-q8_0)
#
# A device call carries at most 64 MiB, the working tree (~4 MiB) included: Deno is ~40 MiB
# as gzip, the sm_90 kernels (H100, H200) and the CPU library ~4 MiB, the npm subset ~2 MiB
# and qwen3-tiny-q8_0 ~11 MiB.
# FLAVOURS="sm_89 sm_90 sm_120" carries every flavour (~10 MiB); more fixtures go in
# follow-up calls, each prepared into its own folder:
#
#   tests/gpu/prepare.sh --only qwen3-tiny-q4_0   -> kernels/build/gpu-extra/
#
# and a follow-up call carries only that folder (the first call's unpacked Deno stays on
# the machine while it is warm): run(command="SUITE=golden bash tests/gpu/run.sh",
# carry=["kernels/build/gpu-extra"]).
#
# LLAMA=1 also carries llama.cpp's CUDA build (npm:@node-llama-cpp/linux-x64-cuda, the
# release the CPU reference is; its 159 MB library cut to the compute_90 PTX by
# tests/gpu/slim_fatbin.ts, 24 MB as gzip), so run.sh times it on the bench's files in the
# same call. To fit, Deno goes as xz (the H200 hosts' python3 unpacks it), and no fixture
# goes unless named.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
DENO=.tools/deno/deno
FIXTURES=${NEURON_FIXTURES:-../shared/fixtures}
FLAVOURS=${FLAVOURS:-sm_90}
LIMIT=$((64 * 1024 * 1024))

only=0
if [ "${1:-}" = "--only" ]; then only=1; shift; fi
names=("$@")
[ ${#names[@]} -gt 0 ] || [ "${LLAMA:-0}" = 1 ] || names=(qwen3-tiny-q8_0)

if [ $only = 1 ]; then
  out=kernels/build/gpu-extra
  rm -rf "$out"
else
  out=kernels/build/gpu
  NO_COLOR=1 $DENO task kernels:cuda
  NO_COLOR=1 $DENO task kernels:cpu
  mkdir -p "$out"
  bin=$(NO_COLOR=1 $DENO eval 'console.log(Deno.execPath())')
  rm -f "$out/deno_dir.tar.xz" "$out/kernels.tar.xz" "$out/llama.tar.gz"
  # Deno as $out/deno.$1, compressed by the command after it, unless already newer than it.
  pack_deno() {
    local to=$out/deno.$1
    shift
    if [ ! -f "$to" ] || [ "$bin" -nt "$to" ]; then
      echo "compressing $bin ($1)"
      "$@" -c "$bin" > "$to.tmp" && mv "$to.tmp" "$to"
    fi
  }
  if [ "${LLAMA:-0}" = 1 ]; then
    rm -f "$out/deno.gz"
    bash tests/gpu/prepare_llama.sh "$out"
    pack_deno xz xz -9 -T2
  else
    rm -f "$out/deno.xz"
    pack_deno gz gzip -9
  fi
  denodir=$(NO_COLOR=1 $DENO info | sed -n 's/^DENO_DIR location: //p')
  # What the GPU suite, the NCCL test and the bench import from npm: zod and jinja (the
  # engine's chat code). A missing one shows in the dry run (tests/gpu/dry_run.sh).
  tar -C "$denodir" -czf "$out/deno_dir.tar.gz" \
    npm/registry.npmjs.org/zod npm/registry.npmjs.org/@huggingface
  # The CPU library goes too: the tensor-parallel path's watchdog lives in it. It picks its
  # instruction set at run time, so this machine's build runs on the GPU host's processor.
  # shellcheck disable=SC2086
  tar -C kernels/build -czf "$out/kernels.tar.gz" $FLAVOURS libneuron_cpu.so
fi

rm -rf "$out/fixtures"
mkdir -p "$out/fixtures/golden"
for n in ${names[@]+"${names[@]}"}; do
  [ -f "$FIXTURES/$n.gguf" ] || { echo "no fixture $FIXTURES/$n.gguf" >&2; exit 1; }
  echo "compressing fixture $n"
  gzip -6 -c "$FIXTURES/$n.gguf" > "$out/fixtures/$n.gguf.gz"
  cp "$FIXTURES/golden/$n.json" "$out/fixtures/golden/"
done
# The limit holds the working tree that travels with the bundle (tracked and untracked files).
tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- | tail -1 | cut -f1)
bytes=$(( $(du -sb "$out" | cut -f1) + tree ))
echo "$out and the working tree: $((bytes / 1024 / 1024)) MiB of the 64 MiB a device call carries"
if [ "$bytes" -gt "$LIMIT" ]; then
  echo "too large to carry: carry fewer fixtures or flavours" >&2
  exit 1
fi
echo "device call: run(command=\"bash tests/gpu/run.sh\", carry=[\"$out\"], timeout_s=450)"

#!/usr/bin/env bash
# Prepares, on a machine without a GPU, everything tests/gpu/run.sh needs on a GPU host
# that has no Deno, no network and maybe no nvcc: the PTX and cubins of every flavour, a
# compressed Deno, the npm packages the GPU suite imports (a DENO_DIR subset), and some
# model fixtures. Output: kernels/build/gpu/ (git-ignored, like all of kernels/build).
#
#   tests/gpu/prepare.sh [FIXTURE...]   (default: qwen3-tiny-q8_0 qwen3-tiny-q4_0)
#
# A device call carries at most 64 MiB: Deno alone is ~30 MiB compressed, so two tiny
# fixtures fit beside it; the others (tiny-f16 ~20 MiB, small-q4_k_m ~56 MiB compressed)
# go in follow-up calls, each prepared into its own folder:
#
#   tests/gpu/prepare.sh --only qwen3-small-q4_k_m   -> kernels/build/gpu-extra/
#
# and a follow-up call carries only that folder (the first call's unpacked Deno stays on
# the machine while it is warm): run(command="SUITE=golden bash tests/gpu/run.sh",
# carry=["kernels/build/gpu-extra"]).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
DENO=.tools/deno/deno
FIXTURES=${NEURON_FIXTURES:-../shared/fixtures}

only=0
if [ "${1:-}" = "--only" ]; then only=1; shift; fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(qwen3-tiny-q8_0 qwen3-tiny-q4_0)

if [ $only = 1 ]; then
  out=kernels/build/gpu-extra
  rm -rf "$out"
else
  out=kernels/build/gpu
  NO_COLOR=1 $DENO task kernels:cuda
  mkdir -p "$out"
  bin=$(NO_COLOR=1 $DENO eval 'console.log(Deno.execPath())')
  if [ ! -f "$out/deno.xz" ] || [ "$bin" -nt "$out/deno.xz" ]; then
    echo "compressing $bin"
    xz -T0 -6 -c "$bin" > "$out/deno.xz.tmp" && mv "$out/deno.xz.tmp" "$out/deno.xz"
  fi
  denodir=$(NO_COLOR=1 $DENO info | sed -n 's/^DENO_DIR location: //p')
  # What the GPU suite imports from npm (through the engine's chat code): zod and jinja.
  tar -C "$denodir" -cJf "$out/deno_dir.tar.xz" \
    npm/registry.npmjs.org/zod npm/registry.npmjs.org/@huggingface
  # The kernels of every flavour, compressed (PTX shrinks tenfold); run.sh unpacks the
  # ones the checkout lacks.
  tar -C kernels/build -cJf "$out/kernels.tar.xz" sm_89 sm_90 sm_120
fi

mkdir -p "$out/fixtures/golden"
for n in "${names[@]}"; do
  [ -f "$FIXTURES/$n.gguf" ] || { echo "no fixture $FIXTURES/$n.gguf" >&2; exit 1; }
  echo "compressing fixture $n"
  xz -T0 -6 -c "$FIXTURES/$n.gguf" > "$out/fixtures/$n.gguf.xz"
  cp "$FIXTURES/golden/$n.json" "$out/fixtures/golden/"
done
du -sh "$out"
echo "device call: run(command=\"bash tests/gpu/run.sh\", carry=[\"$out\"], timeout_s=420)"

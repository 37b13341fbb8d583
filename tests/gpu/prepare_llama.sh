#!/usr/bin/env bash
# Puts into bundle folder $1 what tests/gpu/prepare.sh LLAMA=1 adds: llama.tar.gz (llama.cpp's
# CUDA build, its library cut to the compute_90 PTX, with libcudart.so.13 beside it and the
# quiet logger tests/support/llama_cpp/quiet_log.ts builds, since a GPU host may lack cc).
# The npm package (143 MB, npm pack) is downloaded to ~/.cache/neuron/gpu-prep once. Only
# two CPU backends go (AVX2 and baseline): with every layer on the GPU they barely run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=$1
DENO=.tools/deno/deno
PACKAGE=@node-llama-cpp/linux-x64-cuda@3.21.1
cache=${XDG_CACHE_HOME:-$HOME/.cache}/neuron/gpu-prep
mkdir -p "$cache"

tgz=$cache/node-llama-cpp-linux-x64-cuda-3.21.1.tgz
if [ ! -f "$tgz" ]; then
  echo "downloading $PACKAGE (143 MB)"
  (cd "$cache" && npm pack --silent "$PACKAGE" > /dev/null)
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
bins=package/bins/linux-x64-cuda
tar -xzf "$tgz" -C "$stage" "$bins"
mkdir -p "$stage/llama"
for f in _nlcBuildMetadata.json libllama.cuda.v0.4.0.so libggml.cuda.v0.4.0.so libggml-base.so \
  libggml-cpu-haswell.so libggml-cpu-x64.so; do
  mv "$stage/$bins/$f" "$stage/llama/"
done
NO_COLOR=1 $DENO run -A tests/gpu/slim_fatbin.ts "$stage/$bins/libggml-cuda.so" \
  "$stage/llama/libggml-cuda.so" 90
cudart=$(ls /usr/local/cuda/lib64/libcudart.so.13 2>/dev/null || true)
[ -n "$cudart" ] || { echo "no libcudart.so.13 in /usr/local/cuda/lib64" >&2; exit 1; }
cp -L "$cudart" "$stage/llama/libcudart.so.13"
NO_COLOR=1 $DENO eval 'import { quietLogger } from "./tests/support/llama_cpp/quiet_log.ts"; await quietLogger();'
cp "${XDG_CACHE_HOME:-$HOME/.cache}/neuron/llama_ref/quiet_log.so" "$stage/quiet_log.so"
tar -C "$stage" -czf "$out/llama.tar.gz" llama quiet_log.so
echo "$out/llama.tar.gz: $(( $(stat -c %s "$out/llama.tar.gz") / 1024 / 1024 )) MiB"

#!/usr/bin/env bash
# Sourced by tests/gpu/run.sh and tests/gpu/profile.sh from the repository root: sets B (the
# bundle tests/gpu/prepare.sh made, GPU_BUNDLE), W (the work folder, GPU_WORK), out (OUT, where
# logs go; summary.txt there starts empty), say and elapsed; unpacks Deno, its npm cache, the
# fixtures and the kernels (CUDA flavours and the CPU library, which the tensor-parallel path
# needs for its watchdog), and llama.cpp's CUDA build where carried; sets DENO, CACHED,
# unpack, NEURON_FIXTURES, XDG_CACHE_HOME and NEURON_LLAMA_CUDA_DIR.
export NO_COLOR=1
B=${GPU_BUNDLE:-kernels/build/gpu}
W=${GPU_WORK:-kernels/build/gpu-run}
out=${OUT:-$W/out}
mkdir -p "$out" "$W"
started=$(date +%s)
: > "$out/summary.txt"
say() { echo "== $*" | tee -a "$out/summary.txt"; }
elapsed() { echo $(( $(date +%s) - started )); }
gunzip_to() {
  if command -v gzip >/dev/null 2>&1; then gzip -dc "$1" > "$2"
  elif command -v zcat >/dev/null 2>&1; then zcat "$1" > "$2"
  elif command -v busybox >/dev/null 2>&1; then busybox gunzip -c "$1" > "$2"
  else return 1; fi
}
if [ "${DRY:-0}" != 1 ] && command -v deno >/dev/null 2>&1; then
  DENO=$(command -v deno)
elif [ -x "$W/deno" ]; then
  DENO=$W/deno
elif [ -f "$B/deno.gz" ] && gunzip_to "$B/deno.gz" "$W/deno.tmp"; then
  chmod +x "$W/deno.tmp" && mv "$W/deno.tmp" "$W/deno" && DENO=$W/deno
elif [ -f "$B/deno.xz" ] && command -v xz >/dev/null 2>&1 && xz -dc "$B/deno.xz" > "$W/deno.tmp"; then
  chmod +x "$W/deno.tmp" && mv "$W/deno.tmp" "$W/deno" && DENO=$W/deno
elif [ -f "$B/deno.xz" ] && command -v python3 >/dev/null 2>&1 &&
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' \
    "$B/deno.xz" > "$W/deno.tmp"; then
  chmod +x "$W/deno.tmp" && mv "$W/deno.tmp" "$W/deno" && DENO=$W/deno
else
  say "no deno: none on PATH, and no $B/deno.gz (with gzip, zcat or busybox) or $B/deno.xz (with xz or python3)"
  say "run tests/gpu/prepare.sh before carrying $B"; exit 2
fi
unpack() { "$DENO" run -A --no-lock tests/gpu/unpack.ts "$@" >> "$out/unpack.log" 2>&1; }
CACHED=
if [ -f "$B/deno_dir.tar.gz" ]; then
  export DENO_DIR=$PWD/$W/deno_dir
  [ -d "$DENO_DIR/npm" ] || { mkdir -p "$DENO_DIR" && unpack "$B/deno_dir.tar.gz" "$DENO_DIR"; }
  CACHED="--cached-only --no-lock"
fi
say "deno $("$DENO" --version | head -1 | cut -d' ' -f2) ($DENO) after $(elapsed) s"

fx=$PWD/$W/fixtures
mkdir -p "$fx/golden"
for dir in "$B/fixtures" kernels/build/gpu-extra/fixtures; do
  [ -d "$dir" ] || continue
  cp "$dir"/golden/* "$fx/golden/" 2>/dev/null
  for f in "$dir"/*.gguf.gz; do
    [ -f "$f" ] || continue
    t=$fx/$(basename "$f" .gz)
    [ -f "$t" ] || unpack "$f" "$t"
  done
done
if ls "$fx"/*.gguf >/dev/null 2>&1; then export NEURON_FIXTURES=$fx; fi
say "fixtures: $(ls "${NEURON_FIXTURES:-../shared/fixtures}" 2>/dev/null | grep -c gguf) in ${NEURON_FIXTURES:-../shared/fixtures}"

if [ -f "$B/kernels.tar.gz" ] && { [ ! -f kernels/build/sm_90/manifest.json ] || [ ! -f kernels/build/libneuron_cpu.so ]; }; then
  unpack "$B/kernels.tar.gz" kernels/build
fi
# The host's nvcc builds the kernels only where none were carried: a rebuild of the carried
# flavours costs device time and checks nothing the carried build did not.
if [ "${DRY:-0}" != 1 ] && [ ! -f "$B/kernels.tar.gz" ] && command -v nvcc >/dev/null 2>&1; then
  "$DENO" run -A $CACHED kernels/build_cuda.ts 2>&1 | tail -2 | tee -a "$out/summary.txt"
else
  say "kernels: $(ls -d kernels/build/sm_* 2>/dev/null | tr '\n' ' ')(carried)"
fi

export XDG_CACHE_HOME=$PWD/$W/cache

# llama.cpp's CUDA build (prepare.sh LLAMA=1), for tests/gpu/llama_bench.ts; the quiet
# logger it needs goes where quiet_log.ts looks, prebuilt (a GPU host may lack cc).
if [ -f "$B/llama.tar.gz" ]; then
  [ -d "$W/llama_pkg/llama" ] || { mkdir -p "$W/llama_pkg" && unpack "$B/llama.tar.gz" "$W/llama_pkg"; }
  mkdir -p "$XDG_CACHE_HOME/neuron/llama_ref"
  cp "$W/llama_pkg/quiet_log.so" "$XDG_CACHE_HOME/neuron/llama_ref/"
  export NEURON_LLAMA_CUDA_DIR=$PWD/$W/llama_pkg/llama
  say "llama.cpp CUDA build: $NEURON_LLAMA_CUDA_DIR"
fi

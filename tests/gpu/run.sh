#!/usr/bin/env bash
# The GPU check, run from the repository root on a GPU host: deno task test:gpu (every
# kernel against the reference, every fixture golden present, the engine on the GPU),
# then the GPU bench (synthetic qwen3-0.6b Q8_0 and qwen3-8b Q4_K_M: pp512, tg128, copy
# bandwidth, decode efficiency), then a short table. Sized for under 5 minutes.
#
# Deno, its npm packages and the fixtures come from kernels/build/gpu (tests/gpu/prepare.sh
# makes it) unless `deno` is on PATH; fixtures from a follow-up call's
# kernels/build/gpu-extra are used too. The kernels are built here when nvcc is present,
# else the carried ones. Everything unpacked goes to kernels/build/gpu-run (kept between
# calls while the machine stays warm). Results go to $OUT (or kernels/build/gpu-run/out).
#
#   SUITE=golden only the fixture goldens, no bench (follow-up calls with more fixtures)
#   QUICK=1      one prompt per fixture and a small bench (dry runs on the emulator)
#   SANITIZE=1   also run the kernel tests under compute-sanitizer (memcheck)
#   MOE=1        the bench adds qwen3-30b-a3b Q4_K_M (writes an 18.6 GB synthetic file first)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NO_COLOR=1
B=kernels/build/gpu
W=kernels/build/gpu-run
out=${OUT:-$W/out}
mkdir -p "$out" "$W"
started=$(date +%s)
say() { echo "== $*" | tee -a "$out/summary.txt"; }
: > "$out/summary.txt"
# xz where installed, else Python's lzma (GPU images always have python3).
unxz_to() {
  if command -v xz >/dev/null 2>&1; then xz -dc "$1" > "$2"
  else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' "$1" "$2"; fi
}
untar_xz() {
  python3 -c 'import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"
}

if command -v deno >/dev/null 2>&1; then
  DENO=$(command -v deno)
elif [ -x "$W/deno" ]; then
  DENO=$W/deno
elif [ -f "$B/deno.xz" ]; then
  unxz_to "$B/deno.xz" "$W/deno.tmp" && chmod +x "$W/deno.tmp" && mv "$W/deno.tmp" "$W/deno"
  DENO=$W/deno
else
  say "no deno: put one on PATH or run tests/gpu/prepare.sh before carrying $B"; exit 2
fi
if [ -f "$B/deno_dir.tar.xz" ]; then
  export DENO_DIR=$PWD/$W/deno_dir
  [ -d "$DENO_DIR/npm" ] || { mkdir -p "$DENO_DIR" && untar_xz "$B/deno_dir.tar.xz" "$DENO_DIR"; }
  CACHED="--cached-only --no-lock"
else
  CACHED=
fi
say "deno $("$DENO" --version | head -1 | cut -d' ' -f2) ($DENO)"

fx=$PWD/$W/fixtures
mkdir -p "$fx/golden"
for dir in "$B/fixtures" kernels/build/gpu-extra/fixtures; do
  [ -d "$dir" ] || continue
  cp "$dir"/golden/* "$fx/golden/" 2>/dev/null
  for f in "$dir"/*.gguf.xz; do
    [ -f "$f" ] || continue
    t=$fx/$(basename "$f" .xz)
    [ -f "$t" ] || unxz_to "$f" "$t"
  done
done
if ls "$fx"/*.gguf >/dev/null 2>&1; then
  export NEURON_FIXTURES=$fx
fi
say "fixtures: $(ls "${NEURON_FIXTURES:-../shared/fixtures}" 2>/dev/null | grep -c gguf) in ${NEURON_FIXTURES:-../shared/fixtures}"

if [ -f "$B/kernels.tar.xz" ]; then
  for flavour in sm_89 sm_90 sm_120; do
    if [ ! -f "kernels/build/$flavour/manifest.json" ]; then untar_xz "$B/kernels.tar.xz" kernels/build; break; fi
  done
fi
if command -v nvcc >/dev/null 2>&1; then
  "$DENO" run -A $CACHED kernels/build_cuda.ts 2>&1 | tail -4 | tee -a "$out/summary.txt"
else
  say "no nvcc: using the carried kernels ($(ls -d kernels/build/sm_* 2>/dev/null | tr '\n' ' '))"
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$out/summary.txt"

export XDG_CACHE_HOME=$PWD/$W/cache
if [ "${QUICK:-0}" = 1 ]; then export NEURON_TEST_QUICK=1; BENCH_ARGS=--quick; else BENCH_ARGS=; fi
if [ "${MOE:-0}" = 1 ]; then BENCH_ARGS="$BENCH_ARGS --moe"; fi

if [ "${SUITE:-all}" = golden ]; then tests=tests/gpu/golden_test.ts; else tests=tests/gpu/; fi
"$DENO" test -A --unstable-no-legacy-abort $CACHED $tests 2>&1 | tee "$out/test_gpu.log"
test_rc=${PIPESTATUS[0]}
say "test:gpu: $(grep -E '^(ok|FAILED) \|' "$out/test_gpu.log" | tail -1) (exit $test_rc) after $(( $(date +%s) - started )) s"
grep -E "^(gpu: .*(FAILED|ok)|NOTICE|test:gpu on|qwen3-.*prompts|device-to-device)" "$out/test_gpu.log" | grep -v " ok (" | tee -a "$out/summary.txt"

if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  compute-sanitizer --tool memcheck --print-limit 20 "$DENO" test -A --unstable-no-legacy-abort $CACHED \
    tests/gpu/kernels_test.ts > "$out/sanitizer.log" 2>&1
  say "compute-sanitizer memcheck: $(grep -E 'ERROR SUMMARY' "$out/sanitizer.log" | tail -1)"
fi

bench_rc=0
if [ "${SUITE:-all}" != golden ]; then
  "$DENO" run -A $CACHED tests/gpu/bench.ts $BENCH_ARGS --json "$out/bench.json" 2>&1 | tee "$out/bench.log"
  bench_rc=${PIPESTATUS[0]}
  grep -E "^\|" "$out/bench.log" >> "$out/summary.txt"
  grep -E "^device:" "$out/bench.log" >> "$out/summary.txt"
fi
say "bench exit $bench_rc; total $(( $(date +%s) - started )) s"
echo; cat "$out/summary.txt"
[ "$test_rc" = 0 ] && [ "$bench_rc" = 0 ]

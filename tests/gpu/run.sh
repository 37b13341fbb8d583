#!/usr/bin/env bash
# The one-shot GPU check, run from the repository root on a GPU host, in under 7 minutes:
#   1. Deno, its npm packages, kernels and fixtures from the bundle tests/gpu/prepare.sh made
#      (kernels/build/gpu), unpacked with gzip or xz for Deno itself and Deno for the rest:
#      no python3, xz or tar needed;
#   2. preflight, said first: the driver's CUDA version against the PTX ISA the kernels need,
#      libcublas and libnccl present or not (what is missing is skipped, and said so);
#   3. the GPU suite (tests/gpu: every kernel against the reference, every carried fixture's
#      goldens, the engine on the GPU), then the NCCL tests (init + sanity all-reduce with one
#      rank; two ranks where two GPUs exist);
#   4. the bench: synthetic qwen3-0.6b Q8_0 and qwen3-8b Q4_K_M (MOE=1: qwen3-30b-a3b too),
#      pp512 and tg128, decode with 1 and 16 streams at 0, 4k and 16k context (16k in a
#      second pass, run while time is left);
#   5. one table: every test's result, then every speed next to its bandwidth roofline.
# Logs and the table go to $OUT (or kernels/build/gpu-run/out). Exit 0 when every test
# that ran passed and the bench finished.
#
#   QUICK=1      small shapes and few steps (dry runs on the emulator)
#   DRY=1        the emulator as libcuda and libcublas (implies QUICK=1; tests/gpu/dry_run.sh;
#                DRY_EMU: an emulator library built already; DRY_CUBLAS=/nowhere: no cuBLAS)
#   SUITE=golden only the fixture goldens, no bench (follow-up calls with more fixtures)
#   SANITIZE=1   also the kernel tests under compute-sanitizer (memcheck)
#   MOE=1        the bench adds qwen3-30b-a3b Q4_K_M (writes an 18.6 GB synthetic file first)
#   MODELS=..    the bench's models instead (0.6b, 8b, 30b; e.g. MODELS=30b)
# A bundle prepared with LLAMA=1 also times llama.cpp's CUDA build on the bench's models
# right after the first pass (tests/gpu/llama_bench.ts: pp512, tg128, ratios).
#   CONTEXTS=..  the bench's first pass's contexts (default 0,4096), LONG_CONTEXTS=.. its
#                second's (16384; empty: none), STREAMS=.. its stream counts (1,16)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# Runs "$@" for at most $1 seconds where coreutils' timeout exists (it nearly always does).
limit() {
  local s=$1; shift
  if command -v timeout >/dev/null 2>&1; then timeout -k 10 "$s" "$@"; else "$@"; fi
}

# 1. Deno, npm packages, fixtures, kernels.
# shellcheck source=tests/gpu/setup.sh
source tests/gpu/setup.sh

BENCH_ARGS=()
if [ "${DRY:-0}" = 1 ]; then
  QUICK=1
  emu=${DRY_EMU:-$("$DENO" eval $CACHED 'import { buildEmulator } from "./tests/cuda/emu/build_emu.ts"; console.log(await buildEmulator())' 2>>"$out/unpack.log" | tail -1)}
  export NEURON_TEST_LIBCUDA=$emu NEURON_TEST_LIBCUBLAS=${DRY_CUBLAS:-$emu}
  say "dry run: the emulator ($emu) stands in for libcuda and libcublas"
fi
if [ "${QUICK:-0}" = 1 ]; then export NEURON_TEST_QUICK=1; BENCH_ARGS+=(--quick); fi
if [ "${MOE:-0}" = 1 ]; then BENCH_ARGS+=(--moe); fi
if [ -n "${MODELS:-}" ]; then BENCH_ARGS+=(--models "$MODELS"); fi
# The bench runs in two passes so a slow 16k context costs only its own rows: the first
# with the short contexts, the second (if time is left) with the long one alone. After each
# context it measures one stream (--depth) and the grid 16 streams.
if [ "${QUICK:-0}" = 1 ]; then short=0,64 long=160; else short=0,4096 long=16384; fi
SHORT=${CONTEXTS:-$short}
LONG=${LONG_CONTEXTS-$long}
BENCH_ARGS+=(--streams "${STREAMS:-16}")
# The arguments of a pass over contexts $1.
pass_args() {
  local depths=${1#0,}
  PASS=(--contexts "$1")
  if [ "$depths" != 0 ]; then PASS+=(--depth "$depths"); fi
}

# 2. Preflight, before anything can fail for its reasons.
"$DENO" run -A $CACHED tests/gpu/preflight.ts --json "$out/preflight.json" 2>&1 | tee "$out/preflight.log"
pre_rc=${PIPESTATUS[0]}
grep "^PREFLIGHT" "$out/preflight.log" >> "$out/summary.txt"
command -v nvidia-smi >/dev/null 2>&1 &&
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$out/summary.txt"

# 3. Tests. A driver too old for the PTX fails every test the same way: run none.
test_rc=0
logs=()
if [ "$pre_rc" != 0 ]; then
  say "PREFLIGHT failed: no GPU test or bench can run (see above)"
  test_rc=1
else
  if [ "${SUITE:-all}" = golden ]; then tests=tests/gpu/golden_test.ts; else tests=tests/gpu/; fi
  limit 240 "$DENO" test -A --unstable-no-legacy-abort $CACHED $tests > "$out/test_gpu.log" 2>&1
  test_rc=$?
  logs+=("$out/test_gpu.log")
  say "test:gpu: $(grep -E '^(ok|FAILED) \|' "$out/test_gpu.log" | tail -1) (exit $test_rc) after $(elapsed) s"
  grep -E "^NOTICE|^test:gpu on" "$out/test_gpu.log" | tee -a "$out/summary.txt"
  if [ "${SUITE:-all}" != golden ]; then
    limit 90 "$DENO" test -A --unstable-no-legacy-abort $CACHED tests/tp/nccl_gpu_test.ts > "$out/nccl.log" 2>&1
    nccl_rc=$?
    logs+=("$out/nccl.log")
    say "nccl: $(grep -E '^(ok|FAILED) \|' "$out/nccl.log" | tail -1) (exit $nccl_rc) after $(elapsed) s"
    [ "$nccl_rc" = 0 ] || test_rc=$nccl_rc
  fi
  if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    limit 120 compute-sanitizer --tool memcheck --print-limit 20 "$DENO" test -A \
      --unstable-no-legacy-abort $CACHED tests/gpu/kernels_test.ts > "$out/sanitizer.log" 2>&1
    say "compute-sanitizer memcheck: $(grep -E 'ERROR SUMMARY' "$out/sanitizer.log" | tail -1)"
  fi
fi

# 4. Bench, within what is left of 7 minutes (20 s kept for the table). Each pass writes
# its JSON after every model, so one cut short keeps what it measured.
bench_rc=0
benches=()
# One pass of the bench over contexts $1, its JSON into $out/$2.json, within $3 seconds.
bench_pass() {
  pass_args "$1"
  limit "$3" "$DENO" run -A $CACHED tests/gpu/bench.ts "${BENCH_ARGS[@]}" "${PASS[@]}" \
    --json "$out/$2.json" > "$out/$2.log" 2>&1
  local rc=$?
  benches+=(--bench "$out/$2.json")
  say "bench (contexts $1) exit $rc after $(elapsed) s"
  return $rc
}
if [ "$pre_rc" = 0 ] && [ "${SUITE:-all}" != golden ]; then
  left=$(( 400 - $(elapsed) ))
  [ "$left" -gt 30 ] || left=30
  bench_pass "$SHORT" bench "$left"
  bench_rc=$?
  if [ -n "${NEURON_LLAMA_CUDA_DIR:-}" ]; then
    left=$(( 400 - $(elapsed) ))
    if [ "${QUICK:-0}" = 1 ]; then
      say "llama.cpp (CUDA) bench skipped: quick shapes (and no GPU for it in a dry run)"
    elif [ "$left" -ge 60 ]; then
      llama_models=${MODELS:-0.6b,8b}
      [ -n "${MODELS:-}" ] || [ "${MOE:-0}" != 1 ] || llama_models=0.6b,8b,30b
      limit "$left" "$DENO" run -A $CACHED tests/gpu/llama_bench.ts --models "$llama_models" \
        --neuron "$out/bench.json" --json "$out/llama.json" > "$out/llama.md" 2> "$out/llama.log"
      say "llama.cpp (CUDA) bench exit $? after $(elapsed) s"
    else
      say "llama.cpp (CUDA) bench skipped: $left s left of the 7 minutes"
    fi
  fi
  left=$(( 400 - $(elapsed) ))
  if [ -n "$LONG" ] && [ "$left" -ge 60 ]; then
    bench_pass "$LONG" bench_long "$left"
  elif [ -n "$LONG" ]; then
    say "bench (contexts $LONG) skipped: $left s left of the 7 minutes"
  fi
  grep -E "^device:" "$out/bench.log" >> "$out/summary.txt"
fi

# 5. The table.
"$DENO" run -A $CACHED tests/gpu/table.ts --preflight "$out/preflight.json" "${benches[@]}" \
  "${logs[@]}" > "$out/table.md" 2>&1
say "total $(elapsed) s"
echo; cat "$out/summary.txt"; echo; cat "$out/table.md"
[ ! -s "$out/llama.md" ] || { echo; cat "$out/llama.md"; }
[ "$test_rc" = 0 ] && [ "$bench_rc" = 0 ]

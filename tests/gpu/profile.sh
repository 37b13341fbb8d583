#!/usr/bin/env bash
# Where a GPU host's decode and prefill time goes: tests/gpu/profile.ts's steps timed, then
# the same steps under Nsight Compute (ncu, one row per kernel), cut into steps and summed by
# kernel (tests/gpu/profile_table.ts). Carry the bundle tests/gpu/prepare.sh made, as for
# run.sh: run(command="bash tests/gpu/profile.sh", carry=["kernels/build/gpu"]).
#
#   MODELS=0.6b,8b,30b   which synthetic models (profile.ts --models)
#   TOP=8                kernels listed per step
#   NCU_LIMIT=240        seconds for the profiled pass
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tests/gpu/setup.sh
source tests/gpu/setup.sh
models=${MODELS:-0.6b,8b,30b}

"$DENO" run -A $CACHED tests/gpu/profile.ts --time --models "$models" \
  > "$out/times.jsonl" 2> "$out/profile_time.log"
rc=$?
say "timed after $(elapsed) s (exit $rc)"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -z "$ncu" ]; then say "no ncu on this host: only the wall times"; cat "$out/times.jsonl"; exit 1; fi
# --clock-control none: the card's clocks as found (a lent card's settings are not ours).
# NCU_LIMIT bounds the profiled pass (ncu replays every kernel it records).
timeout -k 10 "${NCU_LIMIT:-240}" "$ncu" --clock-control none --profile-from-start off \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --page raw \
  --log-file "$out/ncu.csv" "$DENO" run -A $CACHED tests/gpu/profile.ts --profile \
  --models "$models" > "$out/steps.jsonl" 2> "$out/profile_ncu.log"
rc=$?
say "profiled after $(elapsed) s (exit $rc)"
"$DENO" run -A $CACHED tests/gpu/profile_table.ts "$out/times.jsonl" "$out/steps.jsonl" \
  "$out/ncu.csv" "${TOP:-8}" | tee "$out/profile.md"

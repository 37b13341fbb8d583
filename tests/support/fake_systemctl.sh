#!/usr/bin/env bash
# Stand-in for systemctl in tests: `fake_systemctl.sh STATE_DIR start|stop UNIT`.
# Appends "start UNIT"/"stop UNIT" to STATE_DIR/calls and runs the fake upstream as the
# "unit", with the settings in STATE_DIR/unit.env (DENO, FAKE_UPSTREAM, PORT, MODELS).
set -euo pipefail
state=$1 verb=$2 unit=$3
echo "$verb $unit" >>"$state/calls"
# shellcheck disable=SC1091
source "$state/unit.env"
case $verb in
start)
  if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then exit 0; fi
  setsid "$DENO" run -A "$FAKE_UPSTREAM" --port "$PORT" --models "$MODELS" \
    --events "$state/events" </dev/null >"$state/upstream.log" 2>&1 &
  echo $! >"$state/pid"
  ;;
stop)
  if [ -f "$state/pid" ]; then
    pid=$(cat "$state/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$state/pid"
  fi
  ;;
*)
  echo "fake_systemctl: unsupported verb $verb" >&2
  exit 1
  ;;
esac

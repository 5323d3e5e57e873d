# Steps of a long script, timed, some of them in the background (sourced by scripts/test.sh).
#
#   step NAME                 a foreground step starts (the previous one ends)
#   background NAME CMD...    runs CMD in the background, its output in $STEPS_LOGS/NAME.log
#   join NAME                 waits for it; on failure prints its log and exits with its status
#   stop_background           ends the background steps still running
#   summary                   each step's time, then the test totals, one line each
#
# Totals come from the `test result:` lines cargo test prints, which `count_tests FILE` adds up.
# Needs STEPS_LOGS (a directory) set before use.

_steps=() _secs=() _step_started= _step_name=
declare -A _bg_pid=() _bg_started=()
_passed=0 _failed=0 _ignored=0

# A step's name and time are recorded together when it ends (a join in the middle of a step adds
# its own line first).
_end_step() {
  if [ -n "$_step_started" ]; then
    _steps+=("$_step_name")
    _secs+=($(($(date +%s) - _step_started)))
    _step_started=
  fi
}

step() {
  _end_step
  printf '\n==> %s\n' "$*"
  _step_name=$*
  _step_started=$(date +%s)
}

background() {
  local name=$1
  shift
  printf '\n==> %s (in the background: %s/%s.log)\n' "$name" "$STEPS_LOGS" "$name"
  _bg_started[$name]=$(date +%s)
  rm -f "$STEPS_LOGS/$name.rc"
  # Each in a process group of its own, so stop_background ends everything it started. The step
  # leaves its exit status in a file: `wait` cannot be trusted with a job that ended long before
  # it is joined (it answers 127 once the shell has forgotten the job).
  set -m
  # (The step itself runs with `set -e`, so its first failing command ends it.)
  {
    set +e
    (
      set -e
      "$@"
    ) >"$STEPS_LOGS/$name.log" 2>&1 </dev/null
    echo $? >"$STEPS_LOGS/$name.rc"
  } &
  _bg_pid[$name]=$!
  set +m
}

# Ends the background steps still running (a foreground step failed) and what they started.
stop_background() {
  local pid
  for pid in "${_bg_pid[@]}"; do
    kill -- "-$pid" 2>/dev/null || true
  done
}

join() {
  local name=$1 status=0 waited_from
  waited_from=$(date +%s)
  while [ ! -s "$STEPS_LOGS/$name.rc" ] && kill -0 "${_bg_pid[$name]}" 2>/dev/null; do
    sleep 1
  done
  wait "${_bg_pid[$name]}" 2>/dev/null || true
  status=$(cat "$STEPS_LOGS/$name.rc" 2>/dev/null || echo 1)
  unset "_bg_pid[$name]"
  _steps+=("$name (background; waited $(($(date +%s) - waited_from)) s for it)")
  _secs+=($(($(date +%s) - _bg_started[$name])))
  if [ "$status" -ne 0 ]; then
    echo "$name failed (exit $status); its output:" >&2
    cat "$STEPS_LOGS/$name.log" >&2
    exit "$status"
  fi
}

count_tests() {
  local p f i
  read -r p f i < <(awk '/^test result:/ {
      for (n = 1; n <= NF; n++) {
        if ($(n + 1) ~ /^passed;?$/) p += $n
        if ($(n + 1) ~ /^failed;?$/) f += $n
        if ($(n + 1) ~ /^ignored;?$/) i += $n
      }
    } END { print p + 0, f + 0, i + 0 }' "$1")
  _passed=$((_passed + p)) _failed=$((_failed + f)) _ignored=$((_ignored + i))
}

summary() {
  _end_step
  local total=0 i
  printf '\n==> Summary\n'
  for i in "${!_steps[@]}"; do
    printf '%6d s  %s\n' "${_secs[$i]}" "${_steps[$i]}"
  done
  total=$(($(date +%s) - STEPS_STARTED))
  printf '%6d s  in all (%d min %d s)\n' "$total" $((total / 60)) $((total % 60))
  # The plain closing line: ignored tests count as skipped.
  printf 'tests: %d passed, %d failed, %d skipped\n' "$_passed" "$_failed" "$_ignored"
}

STEPS_STARTED=$(date +%s)

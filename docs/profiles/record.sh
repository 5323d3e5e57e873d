#!/bin/bash
# Records the `openqq up` that a benchmark example starts, with perf (DWARF call stacks).
#   OPENQQ_BIN=path/to/release/openqq docs/profiles/record.sh NAME -- EXAMPLE ARGS...
# DELAY=s waits before recording and DURATION=s records for that long (default: until the
# server exits). Writes NAME.data, NAME.out and NAME.perf.log in $OUT (default: .).
out=${OUT:-.}
name=$1; shift; shift
"$@" > "$out/$name.out" 2>&1 &
runner=$!
pid=""
for _ in $(seq 1 200); do
  pid=$(pgrep -f "^$OPENQQ_BIN up" | head -1)
  [ -n "$pid" ] && break
  sleep 0.05
done
rec=(perf record -m 4096 -F 499 --call-graph dwarf,40000 -p "$pid" -o "$out/$name.data")
( sleep "${DELAY:-0}"; if [ -n "$DURATION" ]; then "${rec[@]}" -- sleep "$DURATION"; else "${rec[@]}"; fi ) > "$out/$name.perf.log" 2>&1 &
wait $runner
wait $!
cat "$out/$name.out"

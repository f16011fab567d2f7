#!/usr/bin/env bash
# Runs tensord's libFuzzer targets (built by `make fuzz-build` into BIN_DIR):
# for each NAME, first every reproducer in tests/fuzz/regressions/NAME once
# (a regression test: any crash fails), then NAME_fuzz for SECONDS from a
# copy of tests/fuzz/corpus/NAME in a temporary directory, so that nothing
# is written into the repository. Crash inputs and logs go to OUT_DIR/NAME.
# Prints one line per target (executions, crashes); fails when any crashed.
#   scripts/run-fuzz.sh BIN_DIR SECONDS OUT_DIR NAME...
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$1 seconds=$2 out=$3
shift 3
status=0
summary=()
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for name in "$@"; do
  target="$bin/${name}_fuzz"
  mkdir -p "$out/$name"
  regressions=(tests/fuzz/regressions/"$name"/*)
  if [ -e "${regressions[0]}" ]; then
    if ! "$target" -runs=1 "${regressions[@]}" > "$out/$name/regressions.log" 2>&1; then
      echo "fuzz: $name: a regression input crashes again; see $out/$name/regressions.log" >&2
      tail -30 "$out/$name/regressions.log" >&2
      status=1
    fi
  fi
  rm -rf "$work/corpus"
  mkdir -p "$work/corpus"
  cp tests/fuzz/corpus/"$name"/* "$work/corpus/" 2>/dev/null
  # -rss_limit_mb: ASan's shadow plus the targets' own state; a target that
  # needs more is a finding. -max_len: the session and stream targets need
  # room for a 64 KiB message (the size from which uploads are placed).
  "$target" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=3072 -max_len=70000 \
    -print_final_stats=1 -artifact_prefix="$out/$name/" "$work/corpus" > "$out/$name/fuzz.log" 2>&1
  rc=$?
  execs=$(grep -a '^stat::number_of_executed_units' "$out/$name/fuzz.log" | awk '{print $2}')
  crashes=$(ls "$out/$name" | grep -c -E '^(crash|leak|timeout|oom)-')
  summary+=("$name: ${execs:-?} executions in ${seconds} s, $crashes crash(es)")
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $name exited with $rc; see $out/$name/fuzz.log" >&2
    grep -a -A25 -m1 -E '==ERROR|runtime error|deadly signal|Timeout|out-of-memory' "$out/$name/fuzz.log" >&2
    status=1
  fi
done
printf 'fuzz: %s\n' "${summary[@]}"
exit $status

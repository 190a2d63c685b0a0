# Shared by the shell tests: `check NAME COMMAND...` counts a pass or prints the failure,
# `finish` prints the tally and fails when anything did; `timeless FILE` prints metrics
# lines without their timings (which differ from run to run).
passed=0 failed=0
check() {
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name"; fi
}
finish() {
  echo "$passed passed, $failed failed"
  test "$failed" -eq 0
}
timeless() {
  sed -E 's/, "(train_s|wall_s|ms_per_step|tokens_per_s|seconds_to_target)": [0-9.]+//g' "$1"
}

# Shared by the shell tests: `check NAME COMMAND...` counts a pass or prints the failure,
# `finish` prints the tally and fails when anything did; `timeless FILE` prints metrics
# lines without their timings (which differ from run to run); `refused NAME TEXT ARGS...`
# checks that the script's own `run ARGS...` (which runs a program with ARGS, its output
# in ./out and ./err, and prints the exit code) exits 2 with one line saying TEXT.
# `same_checkpoint A B [--tensors]` holds when two checkpoints have bitwise the same tensors
# and the same metadata but for timings (--tensors: the tensors alone); it names what
# differs on stderr.
# `forge IN OUT KEY=VALUE...` writes a copy of a checkpoint with metadata entries changed
# (nan=TENSOR fills that tensor with NaN instead, huge=TENSOR with 3e38: finite, overflowing).
# `grammar_text FILE LINES SEED` writes LINES sentences drawn from a small grammar: a text
# with structure beyond its letter counts, and words for BPE to learn.
# $work: a scratch folder, removed on exit.
work=$(mktemp -d)
references=$(cd "$(dirname "${BASH_SOURCE[0]}")/reference" && pwd)  # forge's safetensors_numpy.py
trap 'rm -rf "$work"' EXIT
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
refused() {
  local name=$1 text=$2; shift 2
  local code; code=$(run "$@")
  check "$name exits 2 (got $code)" test "$code" -eq 2
  check "$name says '$text'" grep -q -- "$text" err
  check "$name says it in one line" test "$(wc -l <err)" -eq 1
}
same_checkpoint() {
  /usr/bin/python3 - "$references" "$@" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import safetensors_numpy
(a, meta_a), (b, meta_b) = (safetensors_numpy.read(path) for path in sys.argv[2:4])
timings = {"train_s", "wall_s"}
differ = [name for name in sorted(set(a) | set(b)) if name not in a or name not in b or
          a[name].dtype != b[name].dtype or a[name].shape != b[name].shape or a[name].tobytes() != b[name].tobytes()]
if sys.argv[4:] != ["--tensors"]:
    differ += ["metadata " + key for key in sorted((set(meta_a) | set(meta_b)) - timings)
               if meta_a.get(key) != meta_b.get(key)]
if differ:
    sys.exit(f"{sys.argv[2]} and {sys.argv[3]} differ in {len(differ)}: {', '.join(differ[:5])}")
PY
}
export -f same_checkpoint
export references
forge() {
  /usr/bin/python3 - "$references" "$@" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import safetensors_numpy
arrays, metadata = safetensors_numpy.read(sys.argv[2])
for change in sys.argv[4:]:
    key, value = change.split("=", 1)
    if key == "nan":
        arrays[value] = np.full_like(arrays[value], np.nan)
    elif key == "huge":  # finite, and too large for anything computed from it
        arrays[value] = np.full_like(arrays[value], 3e38)
    else:
        metadata[key] = value
safetensors_numpy.write(sys.argv[3], arrays, metadata)
PY
}
grammar_text() {
  /usr/bin/python3 - "$@" <<'PY'
import random, sys
path, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(seed)
subjects = ["the king", "a man", "the people", "his servant", "the LORD"]
verbs = ["spake unto", "went before", "gave bread to", "blessed", "sent"]
objects = ["the city", "his brethren", "the prophet", "all Israel", "the children"]
lines = [f"{random.randint(1, 40)} And {random.choice(subjects)} {random.choice(verbs)} {random.choice(objects)}."
         for _ in range(count)]
open(path, "w").write("\n".join(lines) + "\n")
PY
}

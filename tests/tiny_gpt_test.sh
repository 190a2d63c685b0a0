#!/usr/bin/env bash
# Installs xgrad to a temporary prefix, then builds examples/tiny_gpt as a separate
# project with find_package(xgrad) and runs it: a short training on a text (data/kjv.txt
# when ./run has prepared it, else a generated one) must learn (its validation loss well
# below the uniform log(vocab)), write a sample and be reproducible; no argument or an
# unreadable file exits 2 with one line.
#   usage: tiny_gpt_test.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 source=$2
source "$(dirname "$0")/lib.sh"  # $work (removed on exit), check, finish
step() {  # a build step, quiet unless it fails
  "$@" >"$work/step.log" 2>&1 || { echo "FAILED: $*"; tail -n 20 "$work/step.log"; exit 1; }
}
step cmake --install "$build" --prefix "$work/prefix"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
step cmake -S "$source/examples/tiny_gpt" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
     -DCMAKE_BUILD_TYPE=Release "${launcher[@]}"
step cmake --build "$work/build"
tiny_gpt=$work/build/tiny_gpt
cd "$work"
run() { timeout 120 "$tiny_gpt" "$@" >out 2>err; echo $?; }

text=$source/data/kjv.txt
if [ ! -s "$text" ]; then  # sentences drawn from a small grammar
  awk 'BEGIN {
    srand(1)
    n = split("the king|a man|the people|his servant|the LORD", s, "|")
    split("spake unto|went before|gave bread to|blessed|sent", v, "|")
    split("the city|his brethren|the prophet|all Israel|the children", o, "|")
    for (i = 0; i < 3000; i++)
      printf "%d And %s %s %s.\n", int(rand() * 40) + 1, s[int(rand() * n) + 1], v[int(rand() * n) + 1],
             o[int(rand() * n) + 1]
  }' >text.txt
  text=$work/text.txt
fi

# Learning: 300 steps (a few seconds) bring the validation loss a nat below log(vocab).
code=$(run "$text" 300)
check "a 300-step run exits 0 (got $code: $(tail -n 1 err))" test "$code" -eq 0
vocab=$(sed -n 's/.*, vocab \([0-9]*\) .*/\1/p' out)
val=$(sed -n 's/^validation loss \([0-9.]*\) .*/\1/p' out)
check "the vocabulary size is printed ('$vocab')" test -n "$vocab"
check "the validation loss is printed ('$val')" test -n "$val"
check "the validation loss $val is at least 1 nat below log($vocab)" \
  awk -v val="${val:-nan}" -v vocab="${vocab:-1}" 'BEGIN { exit !(val + 0 > 0 && val + 1 < log(vocab)) }'
check "the train loss is reported 10 times" test "$(grep -c '^step [0-9]*/300  train loss ' out)" -eq 10
check "a sample of 201 bytes follows 'sample:'" test "$(sed -n '/^sample:$/,$p' out | tail -n +2 | wc -c)" -ge 201
cp out first

# Reproducible: the same text and steps print the same, but for the time taken.
run "$text" 300 >/dev/null
check "a second run prints the same losses and sample" diff <(sed 's/ in [0-9.]* s$//' first) \
  <(sed 's/ in [0-9.]* s$//' out)

# Refusals: exit 2 with one line on stderr.
code=$(run)
check "no argument exits 2 (got $code)" test "$code" -eq 2
check "with a one-line usage" test "$(wc -l <err)" -eq 1 -a -n "$(grep '^usage: tiny_gpt TEXT' err)"
for bad in "$work/missing.txt" "$work"; do
  code=$(run "$bad")
  check "$bad exits 2 (got $code)" test "$code" -eq 2
  check "naming it in one line" test "$(wc -l <err)" -eq 1 -a -n "$(grep -F "$bad" err)"
done
code=$(run "$text" 0)
check "STEPS 0 exits 2 (got $code)" test "$code" -eq 2
finish

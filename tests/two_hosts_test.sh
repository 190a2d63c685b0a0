#!/usr/bin/env bash
# Two hosts over TCP (docs/distributed.md, "Training on several machines"). Two network namespaces
# joined by a veth pair stand for two machines, each with its own address and host name;
# mpirun starts in the first and reaches the second through a launch agent (`ip netns
# exec` where ssh would be), Open MPI's TCP transport on that link alone, with the
# keepalive settings the docs give. It shows that:
#   - np 2 across the hosts trains the bits of one process with --accum-steps 2;
#   - the remote rank killed ends the whole job within 60 s, and the checkpoint resumes
#     to the bits of a run that never stopped; nothing is left on either host;
#   - the link cut mid-run ends the whole job within 60 s: rank 0 says so in one line,
#     having saved the last step, and that checkpoint resumes the same way.
# Needs root and network namespaces: where they cannot be made it says so and is skipped
# (exit 77).
#   usage: two_hosts_test.sh XGRAD_TRAIN
set -u
train=$1
source "$(dirname "$0")/lib.sh"
cd "$work"

a=xgrad-a-$$ b=xgrad-b-$$  # host a: 10.77.0.1 (mpirun and rank 0), host b: 10.77.0.2
procs_of() { ip netns pids "$1" 2>/dev/null; }
clean_up() {
  for ns in "$a" "$b"; do
    procs_of "$ns" | xargs -r kill -KILL 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
}
trap clean_up EXIT
if ! { ip netns add "$a" && ip netns add "$b" && ip link add veth-a netns "$a" type veth peer name veth-b netns "$b" &&
  ip netns exec "$a" unshare --uts true; } 2>netns.err; then
  echo "two_hosts_test: skipped: cannot make two network namespaces joined by a veth pair here" \
    "($(head -n 1 netns.err)); needs root, iproute2 and util-linux's unshare"
  exit 77
fi
ip -n "$a" addr add 10.77.0.1/24 dev veth-a
ip -n "$b" addr add 10.77.0.2/24 dev veth-b
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
done
ip -n "$a" link set veth-a up
ip -n "$b" link set veth-b up

# Open MPI's launch agent: called as `agent HOST COMMAND`, as ssh would be.
cat >agent <<EOF
#!/bin/sh
echo "\$1" >>"$work/agent.log"
shift
exec ip netns exec $b unshare --uts sh -c "hostname host-b && \$*"
EOF
chmod +x agent
# mpirun on host a, one rank per host, exactly as docs/distributed.md runs it.
across() {
  ip netns exec "$a" unshare --uts bash -c 'hostname host-a && exec "$@"' _ \
    timeout -s KILL 300 mpirun --allow-run-as-root --host 10.77.0.1:1,10.77.0.2:1 -np 2 \
    --mca plm_rsh_agent "$work/agent" --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
    --mca oob_tcp_if_include 10.77.0.0/24 --mca oob_tcp_keepalive_time 10 --mca oob_tcp_keepalive_intvl 10 \
    --mca oob_tcp_keepalive_probes 3 "$@"
}
trainer_on() { for p in $(procs_of "$1"); do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "^$train " && echo "$p"; done; }
# Nothing in either namespace, within 15 s (host b's daemon finds mpirun gone by itself).
nothing_left() {
  for _ in $(seq 150); do
    [ -z "$(procs_of "$a")$(procs_of "$b")" ] && return 0
    sleep 0.1
  done
  return 1
}
# Waits for FILE (the first checkpoint: both ranks are training), then a second more.
training() { for _ in $(seq 600); do [ -s "$1" ] && break; sleep 0.1; done; sleep 1; }

# np 2 across the hosts = --accum-steps 2 in one process, bitwise.
sort=(--task sort --eval-every 50 --quiet --batch 64 --threads 1)
"$train" "${sort[@]}" --steps 200 --accum-steps 2 --metrics one.jsonl --save one.st >/dev/null
across "$train" "${sort[@]}" --steps 200 --metrics two.jsonl --save two.st >two.out 2>two.err
code=$?
check "np 2 across two hosts runs (exit $code)" test "$code" -eq 0
check "rank 1 was started on host b" grep -qx 10.77.0.2 agent.log
check "np 2 across two hosts gives the weights of one process with --accum-steps 2" same_checkpoint one.st two.st
check "and its metrics" diff <(timeless one.jsonl) <(timeless two.jsonl)

# The reference for the resumes below: one process, --accum-steps 2, 1500 steps.
long=(--task sort --eval-every 100 --target-exact 2 --threads 1 --quiet)
"$train" "${long[@]}" --steps 1500 --accum-steps 2 --save reference.st >/dev/null

# The remote rank killed.
across "$train" "${long[@]}" --steps 1000000 --save killed.st >killed.out 2>killed.err &
job=$!
training killed.st
victim=$(trainer_on "$b")
check "rank 1 trains on host b" test -n "$victim"
[ -n "$victim" ] && kill -KILL $victim
killed=$(date +%s)
wait "$job"
code=$?
left=$(nothing_left && echo no || echo yes)
took=$(($(date +%s) - killed))
check "a killed remote rank ends the job (exit $code)" test "$code" -ne 0
check "everything on both hosts ended within 60 s (took $took s)" test "$took" -le 60
check "nothing is left on either host" test "$left" = no
check "mpirun names the rank" grep -q "rank 1 .* on node 10.77.0.2 exited on signal 9" killed.err
"$train" --resume killed.st --steps 1500 --save killed.st --quiet >/dev/null
check "the checkpoint resumes to the bits of the run that never stopped" same_checkpoint reference.st killed.st
# The link cut mid-run.
across "$train" "${long[@]}" --steps 1000000 --save cut.st >cut.out 2>cut.err &
job=$!
training cut.st
check "rank 1 trains on host b" test -n "$(trainer_on "$b")"
ip -n "$a" link set veth-a down
cut=$(date +%s)
wait "$job"
code=$?
left=$(nothing_left && echo no || echo yes)
took=$(($(date +%s) - cut))
check "a cut link ends the job (exit $code)" test "$code" -ne 0 -a "$code" -ne 137
check "everything on both hosts ended within 60 s (took $took s)" test "$took" -le 60
check "nothing is left on either host" test "$left" = no
check "rank 0 says so, in one line" test "$(grep -c '^xgrad-train' cut.err)" -eq 1
check "naming the wait and the checkpoint" grep -qE "^xgrad-train: rank 0: step [0-9]+: [a-z_ ]+( rank 1)?: \
no answer within 20.0 s: the network between the ranks is down, or a rank is stuck or gone; checkpoint saved at step \
[0-9]+: continue with --resume cut.st$" cut.err
"$train" --resume cut.st --steps 1500 --save cut.st --quiet >/dev/null
check "the checkpoint resumes to the bits of the run that never stopped" same_checkpoint reference.st cut.st

finish

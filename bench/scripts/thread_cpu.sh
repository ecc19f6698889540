#!/usr/bin/env bash
# Where a process's cores go, by thread name: samples /proc/PID/task/*/stat twice, SECONDS apart,
# and prints, per process and thread name (SetThreadName; unnamed threads carry the process
# name), the threads and the cores they used (user + system time / wall time): which part of the
# serving path saturates the host (e.g. node, integrator and load generator under
# bench/scripts/bench_hybrid.sh's load).
#
# usage: bench/scripts/thread_cpu.sh SECONDS PID [PID...]
set -uo pipefail
secs=${1:?usage: thread_cpu.sh SECONDS PID...}
shift
snap() {  # pid tid name ticks, one line per thread
  # One cat and one awk a process, however many threads: a fork per thread (hundreds of HTTP
  # threads) would itself load the clients' CPUs in the step it measures. The name sits in
  # parentheses and may hold spaces; utime and stime are the 12th and 13th fields after it.
  for pid in "$@"; do
    cat /proc/"$pid"/task/*/stat 2>/dev/null | awk -v pid="$pid" '{
      o = index($0, "("); n = split($0, a, ") "); rest = a[n]
      name = substr($0, o + 1, length($0) - length(rest) - o - 2); gsub(/ /, "_", name)
      split(rest, f, " "); print pid, $1, name, f[12] + f[13] }'
  done
}
# Each thread's ticks are divided by the time between the starts of the two snapshots, not by
# SECONDS: a thread is read at about the same offset into each, and a snapshot of many threads
# takes a while (dividing by SECONDS counted the first snapshot's own time as the thread's).
t0=$(date +%s.%N)
a=$(snap "$@")
sleep "$secs"
t1=$(date +%s.%N)
b=$(snap "$@")
wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
hz=$(getconf CLK_TCK)
for pid in "$@"; do
  echo "$pid $(tr -d '\0' </proc/"$pid"/comm 2>/dev/null)"
done | awk '{ print "process", $1, $2 }'
join -j1 <(echo "$a" | awk '{ print $1 ":" $2, $3, $4 }' | sort) <(echo "$b" | awk '{ print $1 ":" $2, $4 }' | sort) |
  awk -v hz="$hz" -v s="$wall" '{ split($1, k, ":"); key = k[1] " " $2; n[key]++; c[key] += ($4 - $3) / hz / s }
    END { for (key in n) printf "%s %.2f cores %d threads\n", key, c[key], n[key] }' | sort -k1,1n -k3,3gr

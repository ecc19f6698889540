#!/usr/bin/env bash
# Where a process's cores go, by thread name: samples /proc/PID/task/*/stat twice, SECONDS apart,
# and prints, per process and thread name (SetThreadName; unnamed threads carry the process
# name), the threads and the cores they used (user + system time / wall time): which part of the
# serving path saturates the host (e.g. node, integrator and load generator under
# scripts/bench_hybrid.sh's load).
#
# usage: scripts/thread_cpu.sh SECONDS PID [PID...]
set -uo pipefail
secs=${1:?usage: thread_cpu.sh SECONDS PID...}
shift
snap() {  # pid tid name ticks, one line per thread
  for pid in "$@"; do
    for t in /proc/"$pid"/task/*; do
      # The name sits in parentheses and may hold spaces; utime and stime follow it.
      line=$(cat "$t/stat" 2>/dev/null) || continue
      name=${line#*(}
      name=${name%)*}
      rest=${line##*) }
      set -- $rest
      echo "$pid ${t##*/} ${name// /_} $(( ${12} + ${13} ))"
    done
  done
}
a=$(snap "$@")
sleep "$secs"
b=$(snap "$@")
hz=$(getconf CLK_TCK)
for pid in "$@"; do
  echo "$pid $(tr -d '\0' </proc/"$pid"/comm 2>/dev/null)"
done | awk '{ print "process", $1, $2 }'
join -j1 <(echo "$a" | awk '{ print $1 ":" $2, $3, $4 }' | sort) <(echo "$b" | awk '{ print $1 ":" $2, $4 }' | sort) |
  awk -v hz="$hz" -v s="$secs" '{ split($1, k, ":"); key = k[1] " " $2; n[key]++; c[key] += ($4 - $3) / hz / s }
    END { for (key in n) printf "%s %.2f cores %d threads\n", key, c[key], n[key] }' | sort -k1,1n -k3,3gr

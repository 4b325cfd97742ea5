#!/bin/sh
# The B6 job: byte-compile a copy of part of Python's standard library, then
# run a small unittest suite; N times over (default 1). Run as one command,
# unconfined or under `cordon run`, by bench/b6/b6_bench.py.
#   job.sh DIR [N]   DIR holds fresh copies: src/ (to compile), suite/ (tests), tmp/
# Writes DIR/times: "0 C C+U", C and U the time spent in compileall and in the
# tests (ns, summed over the N passes).
set -e
cd "$1"
# A task gets a home of its own (agent platforms set one). Without HOME, Python
# looks the user up in the passwd database, which asks nscd over a unix socket
# first: a connection the policy refuses (and reports) on hosts without BPF LSM.
export HOME="$1"
n="${2:-1}"
c=0
u=0
i=0
while [ "$i" -lt "$n" ]; do
  t0=$(date +%s%N)
  /usr/bin/python3 -m compileall -q -f src >compileall.log
  t1=$(date +%s%N)
  TMPDIR="$1/tmp" /usr/bin/python3 -m unittest discover -s suite -q 2>unittest.log
  t2=$(date +%s%N)
  c=$((c + t1 - t0))
  u=$((u + t2 - t1))
  i=$((i + 1))
done
echo "0 $c $((c + u))" >times

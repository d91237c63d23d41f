#!/bin/bash
# usage: alone.sh OUT rep budget:n ...   one at a time, in the given order, `rep` rounds
out=$1; reps=$2; shift 2; mkdir -p $out
for r in $(seq 1 $reps); do
 for spec in "$@"; do b=${spec%%:*}; n=${spec##*:}
  /work/main/.venv/bin/python /work/main/benchmarks/user_train.py --num-envs $n --training-steps 100 --budget-bytes $b > $out/alone_${b}_${n}_$r.json 2> $out/alone_${b}_${n}_$r.err
  echo "$(date +%T) done $b $n $r rc=$? load=$(cut -d' ' -f1-3 /proc/loadavg)" >> $out/log.txt
 done
done

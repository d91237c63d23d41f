#!/bin/bash
# How often does each size near the edge survive the user's own run under the line 0.9 x B?
# step3 ran the sizes above the pick twice; "the largest size that survives 2 of 2" is then a
# draw. This runs the pick and the sizes above it again, alone, round-robin (so drift in the
# machine's state falls on every size alike), same script and cap as step3.
cd "$(dirname "$0")/../../../.." || exit 1
out=benchmarks/results/fidelity-prior/step4
run() {  # num_envs cap label round
  tag="user_$1_$3-line_r$4"
  cat /proc/loadavg > "$out/$tag.load"
  nice -n 5 .venv/bin/python benchmarks/user_train.py --num-envs "$1" --training-steps 100 \
    --budget-bytes "$2" --timeout 900 > "$out/$tag.json" 2> "$out/$tag.stderr"
  cat /proc/loadavg >> "$out/$tag.load"
}
for r in 1 2 3 4; do
  run 704 1170000000 1.3GB "$r"
  run 768 1170000000 1.3GB "$r"
  [ "$r" -le 3 ] && run 640 1170000000 1.3GB "$r"
done
for r in 1 2 3; do
  run 960 1260000000 1.4GB "$r"
  run 1024 1260000000 1.4GB "$r"
done

#!/bin/bash
# Second user runs, alone, under the line 0.9 x B, of the sizes above the pick that
# survived one run (step2/ and the bench's own next-size run): does each survive 2 of 2?
cd "$(dirname "$0")/../../../.." || exit 1
out=benchmarks/results/fidelity-prior/step3
for spec in "704 1170000000 1.3GB" "768 1170000000 1.3GB" "1024 1260000000 1.4GB" "1152 1260000000 1.4GB"; do
  set -- $spec
  cat /proc/loadavg > "$out/user_$1_$3-line.load"
  nice -n 5 .venv/bin/python benchmarks/user_train.py --num-envs "$1" --training-steps 100 \
    --budget-bytes "$2" --timeout 900 > "$out/user_$1_$3-line.json" 2> "$out/user_$1.stderr"
  cat /proc/loadavg >> "$out/user_$1_$3-line.load"
done

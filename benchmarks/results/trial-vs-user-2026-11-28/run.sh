#!/bin/bash
# interleaved: vramtune trial vs user_train.py, 1536 envs, same 4 GB cap (never binding), cold
cd /work/main
for i in 1 2 3; do
  .venv/bin/vramtune trial -n 1536 --gpu-mem 4GB --no-cache --json > /tmp/tvu/trial_$i.json 2>/tmp/tvu/trial_$i.err
  .venv/bin/python benchmarks/user_train.py --num-envs 1536 --training-steps 20 --budget-bytes 4000000000 > /tmp/tvu/user_$i.json 2>/tmp/tvu/user_$i.err
  echo "$(date +%T) pair $i" >> /tmp/tvu/log.txt
done

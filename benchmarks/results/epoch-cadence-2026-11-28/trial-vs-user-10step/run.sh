#!/bin/bash
# interleaved, uncapped (4 GB): vramtune trial (1-step epochs) vs user_train.py with 10-step epochs (40 steps, num_evals 5)
cd /work/main
for i in 1 2 3; do
  .venv/bin/vramtune trial -n 2048 --gpu-mem 4GB --no-cache --json > /tmp/uvs/trial_$i.json 2>/tmp/uvs/trial_$i.err
  .venv/bin/python benchmarks/user_train.py --num-envs 2048 --training-steps 40 --num-evals 5 --budget-bytes 4000000000 > /tmp/uvs/user_$i.json 2>/tmp/uvs/user_$i.err
  echo "$(date +%T) pair $i" >> /tmp/uvs/log.txt
done

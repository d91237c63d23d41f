#!/bin/bash
# interleaved: vramtune trial at 1536 envs under a near cap (1.45 GB) vs a far one (4 GB), cold
cd /work/main
for i in 1 2 3 4; do
  for c in 1.45GB 4GB; do
    .venv/bin/vramtune trial -n 1536 --gpu-mem $c --no-cache --json > /tmp/cap/trial_${c}_$i.json 2>/tmp/cap/trial_${c}_$i.err
  done
  echo "$(date +%T) pair $i" >> /tmp/cap/log.txt
done

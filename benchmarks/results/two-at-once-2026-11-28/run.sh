#!/bin/bash
# interleaved: vramtune trial at 1536 envs alone vs two at once (4 GB cap, never binding), cold
cd /work/main
for i in 1 2 3; do
  .venv/bin/vramtune trial -n 1536 --gpu-mem 4GB --no-cache --json > /tmp/two/alone_$i.json 2>/dev/null
  .venv/bin/vramtune trial -n 1536 --gpu-mem 4GB --no-cache --json > /tmp/two/pair_${i}a.json 2>/dev/null &
  .venv/bin/vramtune trial -n 1536 --gpu-mem 4GB --no-cache --json > /tmp/two/pair_${i}b.json 2>/dev/null &
  wait
  echo "$(date +%T) round $i" >> /tmp/two/log.txt
done

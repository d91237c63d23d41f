#!/bin/bash
# naconmax 100,000 (Playground's CheetahRun default) vs 12 (its demand x 1.5 at 4 envs), same
# profile otherwise, interleaved A B A B, warm kernels, one trial at a time.
cd /tmp/w/nac
for round in 1 2; do
  for n in 100000 12; do
    /work/main/.venv/bin/vramtune trial --profile nacon-$n.yaml --num-envs 4 --gpu-mem 3GB --json > trial-$n-$round.json 2> trial-$n-$round.err
    echo "round $round naconmax $n exit $?"
  done
done

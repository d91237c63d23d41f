#!/bin/bash
# GPU call 3: the user's own brax script (benchmarks/user_train.py --platform gpu) on the sweep's
# recommended config and on the sizes above it, under the same pool cap as the sweep's trials
# (XLA_CLIENT_MEM_FRACTION=0.0103925032, preallocation off, as measured); then MJX ant views.
set -o pipefail; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:$PWD/.gpu/src:/tmp/site
export XLA_CLIENT_MEM_FRACTION=0.0103925032
for n in 1536 1536 1920 1920 2048; do
  timeout 110 python3 benchmarks/user_train.py --platform gpu --num-envs $n --batch-size $n --num-minibatches 4 --training-steps 100 > /tmp/u.json 2>/tmp/u.err
  python3 -c "
import json; d=json.load(open('/tmp/u.json')); M=2**20
f=lambda v: 'n/a' if v is None else f'{v/M:.1f} MiB'
print(f\"| {d['num_envs']} | {d['status']} | {d['training_steps']} | {d['num_evals']} | {f(d['gpu_peak_bytes_in_use'])} | {f(d['gpu_peak_pool_bytes'])} | {f(d['gpu_bytes_limit'])} | {d['wall_s']} | {d['versions'].get('backend')} | {d['message'][:120]} |\")" 2>&1 | tee -a $OUT/user_runs_gpu.md
done
unset XLA_CLIENT_MEM_FRACTION
(cd benchmarks && timeout 330 python3 bench_gpu.py --profile ant --sizes 1024 --oom-budget 1.2GB 2>&1 | tail -9) | tee $OUT/bench_gpu_ant.md

#!/bin/bash
# GPU call 2: rest of bench_gpu (4096 capped + a real OOM), a real sweep under 2GB, its
# emitted config, and the user's own brax script on that config under the same pool cap.
set -o pipefail; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:$PWD/.gpu/src:/tmp/site
(cd benchmarks && timeout 150 python3 bench_gpu.py --profile quick --sizes 4096 --oom-budget 1.5GB 2>&1 | tail -8) | tee $OUT/bench_gpu_4096.md
S=$(date +%s)
timeout 290 python3 -m vramtune.cli.app sweep --profile quick --gpu-mem 2GB --out /tmp/sw 2>&1 | tee $OUT/sweep_2GB.txt
echo "sweep wall: $(( $(date +%s) - S )) s" | tee -a $OUT/sweep_2GB.txt
cp /tmp/sw/results.jsonl $OUT/sweep_2GB_results.jsonl 2>/dev/null
python3 -m vramtune.cli.app emit-config /tmp/sw -o $OUT/emitted_2GB.yaml 2>&1 | tail -3
cat $OUT/emitted_2GB.yaml
read N B M FRAC < <(python3 - <<'PY'
import json, yaml
c = yaml.safe_load(open("/root/out_placeholder" if False else __import__("os").environ["OUT"] + "/emitted_2GB.yaml"))
p = c.get("ppo", c)
frac = None
for line in open("/tmp/sw/results.jsonl"):
    d = json.loads(line)
    if d.get("purpose") == "confirm" and d.get("cap"):
        frac = d["cap"].split("=")[1]
print(p["num_envs"], p["batch_size"], p["num_minibatches"], frac)
PY
)
echo "user run: num_envs=$N batch=$B nmb=$M XLA_CLIENT_MEM_FRACTION=$FRAC" | tee $OUT/user_run.txt
for i in 1 2; do XLA_CLIENT_MEM_FRACTION=$FRAC timeout 100 python3 benchmarks/user_train.py --num-envs $N --batch-size $B --num-minibatches $M --training-steps 100 2>&1 | tail -3 | tee -a $OUT/user_run.txt; done
nvidia-smi --query-gpu=memory.used,memory.total --format=csv | tee -a $OUT/user_run.txt

#!/bin/bash
# One device call (2026-11-27): doctor; a capped sweep of `quick` at 2 GB with --parallel 1 (the
# speed pick on a GPU), the same with --parallel auto (wall ratio); then, side by side (none of
# them is timed for a comparison): pytest -m gpu, the user's own brax script on the pick under
# the sweep's pool cap (two at once), and the bench gate's XLA figures of `quick` on the GPU.
# Everything lands in $OUT/log.txt and $OUT/data.tgz (the call returns at most 8 files).
set -o pipefail; export PYTHONUNBUFFERED=1
W=/tmp/w; rm -rf $W; mkdir -p $W
L=$OUT/log.txt
pack() { tar czf $OUT/data.tgz -C $W . 2>/dev/null; }
step() { echo "=== $(date -u +%T) $*" | tee -a $L; }
step install
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -3 | tee -a $L
export PYTHONPATH=$PWD/src:$PWD/.gpu/src:/tmp/site
VT="python3 -m vramtune.cli.app"
{ nvidia-smi; nproc; python3 -c "import jax, jaxlib, brax, mujoco, flax, optax; print(jax.__version__, jaxlib.__version__, jax.devices(), mujoco.__version__, flax.__version__, optax.__version__)"; git log --oneline -1; } 2>&1 | tee $W/env.txt | tail -8 >> $L
[ -n "$SKIP_DONE" ] || step doctor
[ -n "$SKIP_DONE" ] || timeout 45 $VT doctor 2>&1 | tee $W/doctor.txt >> $L
step "sweep 2GB parallel 1"
S=$(date +%s)
timeout 195 $VT sweep --profile quick --gpu-mem 2GB --no-cache --out $W/sw1 2>&1 | tee $W/sweep1.txt >> $L
echo "rc=$? wall $(( $(date +%s) - S )) s" | tee -a $L; pack
step "sweep 2GB parallel auto"
S=$(date +%s)
timeout 105 $VT sweep --profile quick --gpu-mem 2GB --parallel auto --no-cache --out $W/swa 2>&1 | tee $W/sweep_auto.txt >> $L
echo "rc=$? wall $(( $(date +%s) - S )) s" | tee -a $L; pack
step "side by side: pytest -m gpu | user runs + bench XLA figures"
[ -n "$SKIP_DONE" ] || (timeout 150 python3 -m pytest -m gpu tests/integration/test_gpu.py -p no:cacheprovider > $W/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $W/pytest_gpu.txt) &
P=$!
(timeout 90 $VT bench --profile quick --sizes 64,256 --repeat 1 --baseline $W/baseline-gpu-quick.json --save > $W/bench_save.txt 2>&1; echo "bench rc=$?" >> $W/bench_save.txt
 [ -n "$SKIP_DONE" ] || timeout 70 python3 benchmarks/bench_gate.py --runs 1 --detect 1 --sizes 64,256 --repeat 1 --baseline $W/baseline-gpu-quick.json --out $W/gate > $W/bench_gate.txt 2>&1; echo "bench_gate rc=$?" >> $W/bench_gate.txt) &
G=$!
$VT emit-config $W/sw1 -o $W/emitted.yaml > $W/emit.txt 2>&1
read N B M CAP < <(python3 - <<'PY'
import json, yaml
c = yaml.safe_load(open("/tmp/w/emitted.yaml")); p = c.get("ppo", c)
cap = None
for line in open("/tmp/w/sw1/results.jsonl"):
    d = json.loads(line)
    if d.get("kind") == "trial" and d.get("purpose") == "confirm" and d.get("status") == "ok":
        cap = d["cap"]
print(p["num_envs"], p["batch_size"], p["num_minibatches"], cap)
PY
)
echo "user runs: num_envs=$N batch=$B nmb=$M cap=$CAP" | tee -a $L
if [ -n "$CAP" ] && [ "$CAP" != None ]; then
  env "$CAP" timeout 90 python3 benchmarks/user_train.py --platform gpu --num-envs $N --batch-size $B --num-minibatches $M --training-steps 100 > $W/user_1.json 2> $W/user_1.err &
  U1=$!
  env "$CAP" timeout 90 python3 benchmarks/user_train.py --platform gpu --num-envs $N --batch-size $B --num-minibatches $M --training-steps 100 > $W/user_2.json 2> $W/user_2.err &
  U2=$!
  wait $U1 $U2
fi
for i in 1 2; do python3 -c "import json; d=json.load(open('$W/user_$i.json')); print({k: d.get(k) for k in ('num_envs','status','training_steps','gpu_peak_bytes_in_use','gpu_peak_pool_bytes','gpu_bytes_limit','wall_s')})" 2>&1 | tee -a $L; done
wait $G; tail -12 $W/bench_save.txt >> $L; tail -6 $W/bench_gate.txt >> $L; pack
[ -n "$SKIP_DONE" ] || wait $P; tail -15 $W/pytest_gpu.txt >> $L
nvidia-smi --query-gpu=memory.used,memory.total --format=csv >> $L
step done; pack

#!/bin/bash
# Isolation: user script vs vramtune's confirming run, alone vs two at once, 288 envs, cap 990e6 (1.1GB x 0.9)
cd /work/main
PY=.venv/bin/python
cat > /tmp/iso/train.yaml <<Y
num_envs: 288
batch_size: 288
num_minibatches: 4
unroll_length: 10
Y
u() { nice -n 5 $PY benchmarks/user_train.py --num-envs 288 --batch-size 288 --num-minibatches 4 --training-steps 100 --budget-bytes 990000000 --timeout 600 2>/dev/null | tail -1; }
v() { nice -n 5 $PY -m vramtune.cli.app verify /tmp/iso/train.yaml --profile quick --gpu-mem 1.1GB --headroom 10% --steps 100 --no-cache --json 2>/dev/null | $PY -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({k:d.get(k) for k in ('status','host_peak_data_bytes','host_peak_rss_bytes','training_steps','evals','error_message')}))"; }
echo "A user alone 1"; u
echo "A user alone 2"; u
echo "B verify alone 1"; v
echo "B verify alone 2"; v
echo "C verify two at once"; v & v & wait
echo "D user + verify at once"; u & v & wait

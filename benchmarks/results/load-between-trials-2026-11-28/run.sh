#!/bin/bash
# The README's first command; a busy loop (one core) arrives after the first trial, as a
# neighbour's job would. Usage: VRAMTUNE=/path/to/.venv/bin/vramtune run.sh OUT_DIR
cd "${1:-.}"
"${VRAMTUNE:-vramtune}" sweep --gpu-mem 1.3GB > stdout.txt 2> stderr.txt &
pid=$!
until grep -q "num_envs=128: ok" stdout.txt 2>/dev/null; do sleep 1; if ! kill -0 $pid 2>/dev/null; then break; fi; done
date +%T > busy_start
python3 -c "while True: pass" &
busy=$!
wait $pid; echo rc=$? >> stdout.txt
kill $busy; date +%T > end

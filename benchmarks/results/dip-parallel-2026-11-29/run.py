"""The README's first command with --parallel 2, and a load on both cores during the K-th run
alone (default 2): a real dip in the walk alone that follows a parallel search.

Starts `vramtune sweep --gpu-mem 1.3GB --parallel 2`; while the K-th trial line that says
"envs alone:" is the last trial line printed, runs two busy loops beside it (one per core);
they stop when the next trial starts. Writes stdout.txt, load.txt and the run's
results.jsonl under OUT. PROFILE (default: the built-in quick) is passed as --profile.
Usage: run.py [OUT] [K] [PROFILE]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

here = Path(__file__).resolve().parent
out = Path(sys.argv[1]) if len(sys.argv) > 1 else here
disturbed = int(sys.argv[2]) if len(sys.argv) > 2 else 2
out.mkdir(parents=True, exist_ok=True)
runs = out / "runs"
cmd = [sys.executable, "-m", "vramtune", "sweep", "--gpu-mem", "1.3GB", "--parallel", "2",
       "--out", str(runs)]
if len(sys.argv) > 3:
    cmd += ["--profile", sys.argv[3]]
busy: list[subprocess.Popen] = []
alone_seen = 0
log = (out / "load.txt").open("w")
start = time.time()
with (out / "stdout.txt").open("w") as text:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        text.write(line)
        text.flush()
        sys.stdout.write(line)
        if not line.startswith("trial "):
            continue
        if busy:
            for b in busy:
                b.kill()
            busy = []
            log.write(f"{time.time() - start:.1f} s: busy loops stopped ({line.strip()[:60]})\n")
        if "envs alone:" in line:
            alone_seen += 1
            if alone_seen == disturbed:
                busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                        for _ in range(2)]
                log.write(f"{time.time() - start:.1f} s: two busy loops started "
                          f"({line.strip()[:60]})\n")
    rc = proc.wait()
    for b in busy:
        b.kill()
    text.write(f"rc={rc} wall={time.time() - start:.1f}s\n")
log.close()
found = sorted(runs.rglob("results.jsonl"))
if found:
    shutil.copy(found[-1], out / "results.jsonl")
shutil.rmtree(runs, ignore_errors=True)

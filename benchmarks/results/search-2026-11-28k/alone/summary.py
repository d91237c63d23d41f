"""Summarise the user_train.py runs of one round's results folder (alone/ and user/).

python summary.py FOLDER: one line per (budget, size), each run as status, training steps and
peak data segment in % of the budget; "ok at the limit" is a run that finished with under
1 MiB of the line left (an allocation was refused and training went on).
"""

import collections
import glob
import json
import os
import sys

base = sys.argv[1]
rows: dict = collections.defaultdict(lambda: {"alone": [], "two at once": []})
for proto, pattern in (("alone", "alone/alone_*.json"), ("two at once", "user/user_*.json")):
    for path in sorted(glob.glob(os.path.join(base, pattern))):
        try:
            with open(path) as f:
                d = json.load(f)
        except ValueError:  # a run still writing, or killed before its line
            continue
        budget, peak = d["budget_bytes"], d.get("peak_vmdata")
        tag = d["status"]
        if tag == "ok" and peak is not None and budget - peak < 1 << 20:
            tag = "ok at the limit"
        pct = round(100 * peak / budget, 1) if peak else None
        rows[(budget, d["num_envs"])][proto].append(f"{tag} {d.get('training_steps')} {pct}%")
for (budget, n), runs in sorted(rows.items()):
    parts = [f"{proto}: " + ", ".join(v) for proto, v in runs.items() if v]
    print(f"{budget / 1e9:.2f} GB {n:5d}: " + "; ".join(parts))

"""Summarise user_train.py runs (alone/ and user/) of one round's results folder: python summary.py FOLDER."""
import json, glob, os, collections
import sys
base = sys.argv[1]
rows = collections.defaultdict(lambda: {'alone': [], 'two at once': []})
for proto, pat in (('alone', 'alone/alone_*.json'), ('two at once', 'user/user_*.json')):
    for f in sorted(glob.glob(os.path.join(base, pat))):
        try:
            d = json.load(open(f))
        except ValueError:
            continue
        b, n = d['budget_bytes'], d['num_envs']
        p = d.get('peak_vmdata')
        left = b - p if p else None
        tag = d['status']
        if tag == 'ok' and left is not None and left < 1 << 20:
            tag = 'ok at the limit'
        rows[(b, n)][proto].append((tag, d.get('training_steps'), round(100 * p / b, 1) if p else None))
for (b, n), r in sorted(rows.items()):
    print(f"{b/1e9:.2f} GB {n:5d}: " + '; '.join(f"{k}: " + ', '.join(f"{t} {s} {pc}%" for t, s, pc in v) for k, v in r.items() if v))

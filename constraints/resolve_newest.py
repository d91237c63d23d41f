#!/usr/bin/env python
"""What a plain install of vramtune resolves today, as pins for constraints/newest.txt.

    python constraints/resolve_newest.py            # print the pins, and what moved since the file
    python constraints/resolve_newest.py --write    # rewrite constraints/newest.txt with them

pip's own resolver does the work (``pip install --dry-run --ignore-installed --report``),
with no constraints file, for the extras .ci/run's smoke tier installs; nothing is installed.
Bumping the newest stack is then this command and one CI run (.ci/run's smoke tier).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NEWEST = ROOT / "constraints" / "newest.txt"
EXTRAS = "test"  # what the smoke tier installs: the CLI and the suite's own tools
HEADER = """\
# The newest stack a plain `pip install vramtune` resolves, pinned so that .ci/run's smoke tier
# (the second venv) tests what new users get and stays reproducible. Written by
# constraints/resolve_newest.py --write on {date} with Python {python}; rerun it to bump.
# Python 3.12 and later resolve a newer jax again (0.12.x in 2026-12): the same brax gap.
"""


def resolve() -> dict[str, str]:
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
           "--report", "-", f"{ROOT}[{EXTRAS}]"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        sys.exit(f"resolve_newest: pip could not resolve: {out.stderr.strip()[-500:]}")
    report = json.loads(out.stdout)
    pins = {}
    for item in report["install"]:
        meta = item["metadata"]
        if meta["name"].lower() != "vramtune":
            pins[meta["name"]] = meta["version"]
    return dict(sorted(pins.items(), key=lambda kv: kv[0].lower()))


def pinned(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    return dict(line.split("==", 1) for line in lines if "==" in line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {NEWEST.name}")
    args = parser.parse_args()
    pins = resolve()
    old = {k.lower(): v for k, v in pinned(NEWEST).items()}
    for name, version in pins.items():
        before = old.get(name.lower())
        change = "" if before == version else f"   # was {before or 'absent'}"
        print(f"{name}=={version}{change}")
    if args.write:
        import datetime
        import platform

        NEWEST.write_text(HEADER.format(date=datetime.date.today().isoformat(),
                                        python=platform.python_version())
                          + "".join(f"{k}=={v}\n" for k, v in pins.items()))
        print(f"wrote {NEWEST}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

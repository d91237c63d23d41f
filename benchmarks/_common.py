"""What every benchmark prints first: the machine and the versions the figures belong to."""

from __future__ import annotations

import json
import os
import platform
import statistics
from pathlib import Path

from vramtune import machine


def banner(title: str) -> None:
    print(f"# {title}")
    print(f"machine: {machine.cpu_model()}, {os.cpu_count()} cores, {platform.platform()}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in machine.versions().items()))


def median(values: list[float]) -> float:
    return statistics.median(values)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def save(path: Path, data: dict) -> dict:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return data

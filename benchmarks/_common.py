"""What every benchmark prints first: the machine and the versions the figures belong to."""

from __future__ import annotations

import os
import platform
import statistics

from vramtune import machine


def banner(title: str) -> None:
    print(f"# {title}")
    print(f"machine: {machine.cpu_model()}, {os.cpu_count()} cores, {platform.platform()}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in machine.versions().items()))


def median(values: list[float]) -> float:
    return statistics.median(values)

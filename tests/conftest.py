"""Shared fixtures. Everything runs real JAX/Brax on the CPU backend: no mocks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"

# Property tests: the default profile is derandomized with no example database, so CI and a
# fresh clone run the same examples every time (a red run is reproducible, a green one is not
# luck) and nothing is written to .hypothesis/. Each test keeps its own max_examples and
# per-example deadline (the time bound). HYPOTHESIS_PROFILE=explore searches afresh: random
# seeds and the local database (replays past failures); run it now and then to look further.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# Rough seconds a test of each tier takes on 2 cores beside another worker: slowest,
# slow, the rest. Only their sums per module matter, to order the modules.
TIER_SECONDS = (150.0, 20.0, 0.1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules in decreasing expected time (``TIER_SECONDS`` summed over their tests), each
    module's tests together, its slowest first. xdist (loadscope) hands out a module at a
    time in this order: longest first, so that the short ones fill the end on whichever
    worker is free (in file order a 3-minute module went out late and one worker ran alone
    for 60-110 s of a 16-minute suite; in this order a replay of three recorded suites
    balances the workers to within 3 s). Within a module, its slowest first: xdist hands a
    worker its next module once two of its tests are left, and a module queued behind a
    minutes-long last test waits there. Under -n 0 a module fixture (a Ray cluster, a sweep)
    is still made once."""
    def tier(item: pytest.Item) -> int:
        if item.get_closest_marker("slowest"):
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    weight: dict[str, float] = {}
    for item in items:
        weight[item.module.__name__] = weight.get(item.module.__name__, 0.0) + TIER_SECONDS[tier(item)]
    items.sort(key=lambda item: (-weight[item.module.__name__], item.module.__name__,
                                 tier(item)))  # stable: file order within a tier


def sigint_default() -> None:
    """preexec_fn for a CLI a test will Ctrl-C: SIGINT at its default, as in a terminal.
    Started from a background job (`cmd &` in a script, nohup) the test runner has SIGINT
    ignored, the CLI inherits SIG_IGN, Python installs no KeyboardInterrupt handler, and
    the signal is lost (a CI run started that way failed both Ctrl-C tests: exit 0, not 130)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="session", autouse=True)
def _hermetic_env(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Private cache dir (one compile cache shared by the session, by all of its xdist
    workers too), CPU backend forced."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # each worker's basetemp is <session basetemp>/popen-gwN
    cache = root / "xdg-cache"
    cache.mkdir(exist_ok=True)
    os.environ["XDG_CACHE_HOME"] = str(cache)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # Trial children run with `python -P` (the current directory is not on their path): the
    # test factories (tests.workloads_fixture:...) are found through PYTHONPATH, as a user's
    # installed package or PYTHONPATH entry would be.
    entries = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(entries))
    os.environ.pop("GITHUB_STEP_SUMMARY", None)
    # The CLI fits its tables to COLUMNS off a terminal, and under pytest the process
    # environment carries COLUMNS=80 (put there below os.environ: a child sees it though
    # os.environ.get says None). Tests read whole lines of the CLI's output, as a log or a
    # file would hold them with no COLUMNS: say so explicitly; width tests set their own.
    os.environ["COLUMNS"] = "200"


# `quick` as it is, but measuring steps/s for ~1.5 s (three 0.5 s intervals) instead of up to
# 8 s: for tests that assert nothing about speed (statuses, memory, the search, files). The
# workload, its evaluation and the memory rule are the profile's; a trial measures 6-8 s
# less, and the suite runs a few hundred of them.
QUICK_SHORT_MEASURE = {"min_window_s": 1.0, "max_window_s": 1.5}


@pytest.fixture(scope="session")
def quick_short(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The path of `quick` with a short throughput window (QUICK_SHORT_MEASURE), named quick."""
    import yaml

    from vramtune.workload.profile import builtin_profiles

    data = yaml.safe_load(builtin_profiles()["quick"].read_text())
    data["measure"] = {**data.get("measure", {}), **QUICK_SHORT_MEASURE}
    path = tmp_path_factory.mktemp("profiles") / "quick.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def shared_compile_cache() -> str:
    """The session's JAX compile cache (under the private XDG_CACHE_HOME), for direct
    run_trial calls. A trial that asserts nothing about a cold compile's peak passes it (and,
    under a CPU cap, cache_under_cpu_cap=True; `--cache` on the CLI): the few programs the
    suite trains (quick at 64/128/256 envs) then compile once per session, not once per test.
    A test whose figure depends on the cold peak (a boundary, a memory comparison) stays cold."""
    from vramtune.machine import default_cache_dir

    return str(default_cache_dir() / "jax")


def run_cli(*args: str, timeout: float = 600, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real console entry point in a subprocess, as a user would run it."""
    return subprocess.run([sys.executable, "-m", "vramtune.cli.app", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})},
                          cwd=cwd)


def assert_golden(relative: str, text: str) -> None:
    """Compare with tests/golden/<relative>; VRAMTUNE_UPDATE_GOLDEN=1 rewrites it instead."""
    path = GOLDEN / relative
    if os.environ.get("VRAMTUNE_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with VRAMTUNE_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{relative} differs from its golden file"

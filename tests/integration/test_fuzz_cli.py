"""CLI fuzz test: every command on a corpus of hostile files and flags (issue 11).

Each case runs the real CLI (``vramtune.cli.app.main``) in a forked process of its own, in a
fresh folder (its own cwd, HOME, TMPDIR), inputs copied in, and is judged on: the exit code
(2 for bad input: one line, never a traceback), no hang (killed at a time limit), nothing
written outside the run directory, no temp folder left. Forking from this process, where
vramtune is already imported, makes a case cost milliseconds instead of an interpreter start.
Almost nothing here launches a trial; the few cases that must (the trial child's import path,
SIGTERM of `vramtune trial`, a disk that fills during a sweep) run the CLI as a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.fuzz_corpus import ANY, FAIL, MARKUP, OK, USAGE, Item, build
from vramtune.cli import app, common  # imported once here: a forked case starts warm

CASE_TIMEOUT_S = 30.0
# Over two minutes on the shared 2-core machine (~300 forked cases, three real trials).
pytestmark = pytest.mark.slow
SHORT = ["--timeout", "0.05"]
NOSTANDBY = ["--no-standby", "--no-cache"]
HES = "profiles/control-hes.yaml"


@dataclass
class Case:
    id: str
    argv: list[str]  # "@in/..." is an input copied into the case, "@out" the output folder
    expect: tuple[int, ...]
    inputs: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()  # folders (as "@in/...", "@work/...") the case may write in
    warn: bool = False  # exit 0/1 must come with a warning on stderr
    setup: tuple[tuple[str, str], ...] = ()  # (path, text) files made before the run
    checks: tuple[tuple[Any, ...], ...] = ()


@dataclass
class Outcome:
    rc: int | None
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool
    problems: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Item]]:
    root = tmp_path_factory.mktemp("fuzz-corpus")
    return root, build(root)


# ----------------------------------------------------------------------------- running


def _copy(src: Path, dst: Path) -> None:
    info = os.lstat(src)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(src), dst)
    elif stat.S_ISFIFO(info.st_mode):
        os.mkfifo(dst)
    elif stat.S_ISDIR(info.st_mode):
        dst.mkdir(exist_ok=True)
        for child in os.listdir(src):
            _copy(src / child, dst / child)
    else:
        shutil.copyfile(src, dst)


def _tree(root: Path) -> dict[str, tuple[int, int, int]]:
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            found[path] = (stat.S_IFMT(info.st_mode),
                           0 if stat.S_ISDIR(info.st_mode) else info.st_size,
                           0 if stat.S_ISDIR(info.st_mode) else info.st_mtime_ns)
    return found


def _fork_cli(argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> Outcome:
    """``vramtune.cli.app.main(argv)`` in a forked child: its own session, cwd, environment,
    stdout/stderr to files. A traceback is printed as Python prints an uncaught one."""
    out_path, err_path = cwd.parent / "stdout", cwd.parent / "stderr"
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            os.setsid()
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(env)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
            os.dup2(os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            common.console.file = sys.stdout
            common.err_console.file = sys.stderr
            code = app.main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - shown as the uncaught traceback it would be
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    timed_out = False
    deadline = started + timeout_s
    status = 0
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.perf_counter() > deadline:
            timed_out = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.005)
    try:
        os.killpg(pid, signal.SIGKILL)  # anything it left in its session
    except (ProcessLookupError, PermissionError):
        pass
    return Outcome(None if timed_out else os.waitstatus_to_exitcode(status),
                   out_path.read_text(errors="replace"), err_path.read_text(errors="replace"),
                   time.perf_counter() - started, timed_out)


def run_case(case: Case, corpus_root: Path, base: Path) -> Outcome:
    folder = base / re.sub(r"[^A-Za-z0-9_.-]+", "_", case.id)[:120]
    if folder.exists():
        shutil.rmtree(folder)
    work, inp, out, tmp, home = (folder / d for d in ("work", "in", "out", "tmp", "home"))
    for d in (work, inp, out, tmp, home):
        d.mkdir(parents=True)
    for rel in case.inputs:
        _copy(corpus_root / rel, inp / rel)
    for rel, text in case.setup:
        path = Path(rel.replace("@out", str(out)).replace("@work", str(work)))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def resolve(text: str) -> str:
        return (text.replace("@in", str(inp)).replace("@out", str(out))
                .replace("@work", str(work)).replace("@home", str(home)))

    argv = [resolve(a) for a in case.argv]
    # vramtune's own cache folder (XDG_CACHE_HOME) is written by design (the jaxlib fraction
    # variable, once per jaxlib version): allowed for every case, as the run directory is not.
    allowed = [Path(resolve(a)) for a in case.allow] + [home / "cache"]
    before = _tree(folder)
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"), "TMPDIR": str(tmp),
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "COLUMNS": "200"}
    outcome = _fork_cli(argv, work, env, CASE_TIMEOUT_S)
    problems = outcome.problems
    if outcome.timed_out:
        problems.append(f"hang: killed after {CASE_TIMEOUT_S:g} s")
    both = outcome.stdout + outcome.stderr
    if "Traceback (most recent call last)" in both:
        problems.append("traceback: " + both[both.rfind("Traceback"):][-600:])
    elif outcome.rc is not None and outcome.rc not in case.expect:
        problems.append(f"exit {outcome.rc}, expected {case.expect}: {outcome.stderr[-300:]}")
    if outcome.rc == 2:  # one line, click's usage errors too
        lines = [ln for ln in outcome.stderr.splitlines() if ln.strip()]
        if not lines or not lines[-1].startswith("vramtune: error: "):
            problems.append(f"exit 2 without a one-line error: {outcome.stderr[-300:]!r}")
    if case.warn and outcome.rc in (0, 1) and "warning" not in outcome.stderr.lower():
        problems.append("a damaged line was used without a warning")
    for change in _changes(before, _tree(folder)):
        path = Path(change.split(" ", 1)[1])
        if path.parent == folder and path.name in ("stdout", "stderr"):
            continue
        if any(path == a or a in path.parents for a in allowed):
            continue
        problems.append(f"write outside the run: {change.replace(str(folder), '<case>')}")
    if os.listdir(tmp):
        problems.append(f"temp left: {os.listdir(tmp)}")
    for check in case.checks:
        problems += _check(check, outcome, resolve)
    if not problems:
        shutil.rmtree(folder, ignore_errors=True)
    return outcome


def _changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return ([f"created {p}" for p in after if p not in before]
            + [f"modified {p}" for p in after if p in before and before[p] != after[p]]
            + [f"deleted {p}" for p in before if p not in after])


def _check(check: tuple[Any, ...], outcome: Outcome, resolve: Any) -> list[str]:
    name = check[0]
    if name == "forbid" and re.search(check[1], outcome.stdout + outcome.stderr):
        return [check[2]]
    if name == "yaml_top_keys" and outcome.rc == 0:
        import yaml

        path = Path(resolve(check[1]))
        text = outcome.stdout if check[1] == "stdout" else (path.read_text() if path.is_file()
                                                            else "")
        data = yaml.safe_load(text) if text else {}
        if isinstance(data, dict) and "injected" in data:
            return ["YAML injection: a top-level key 'injected'"]
    if name == "fast" and outcome.wall_s > check[1]:
        return [f"{check[2]} ({outcome.wall_s:.1f} s)"]
    return []


def judge(cases: list[Case], corpus: tuple[Path, list[Item]], base: Path) -> None:
    root, _ = corpus
    failures = []
    for case in cases:
        outcome = run_case(case, root, base)
        if outcome.problems:
            failures.append(f"{case.id}: " + "; ".join(outcome.problems))
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures)


# ----------------------------------------------------------------------------- the cases


def _items(corpus: tuple[Path, list[Item]], kind: str) -> list[Item]:
    return [i for i in corpus[1] if i.kind == kind]


def test_profiles(corpus, tmp_path):
    cases = []
    for item in _items(corpus, "profile"):
        p = f"@in/{item.path}"
        cases += [Case(f"trial {item.path}", ["trial", "--profile", p, *SHORT, "--no-cache"],
                       item.expect, (item.path,)),
                  Case(f"sweep {item.path}", ["sweep", "--profile", p, *SHORT, *NOSTANDBY],
                       item.expect, (item.path,))]
        if item.klass in ("name", "bounded-work", "bad-value"):
            cases.append(Case(f"bench {item.path}", [
                "bench", "--profile", p, "--baseline", "@in/baselines/control-good.json",
                "--sizes", "64", "--repeat", "1", *SHORT], item.expect,
                (item.path, "baselines/control-good.json")))
    judge(cases, corpus, tmp_path)


def test_check_configs(corpus, tmp_path):
    cases = []
    for item in _items(corpus, "check"):
        p = f"@in/{item.path}"
        cases.append(Case(f"check {item.path}", ["check", p], item.expect, (item.path,)))
        if item.klass not in ("yaml-bomb", "yaml-depth", "size"):
            cases.append(Case(f"check --json {item.path}", ["check", p, "--json"],
                              item.expect, (item.path,)))
    for value, expect in [("0", USAGE), ("-1", USAGE), ("1000000007", USAGE), ("3", OK),
                          ("1048576", OK)]:
        cases.append(Case(f"check --device-count {value}", [
            "check", "@in/check/control-invalid.yaml", "--device-count", value], expect,
            ("check/control-invalid.yaml",)))
    cases += [Case(f"check {value!r}", ["check", value], USAGE)
              for value in ("", "/nonexistent.yaml", "/dev/null", "/proc/self/environ")]
    judge(cases, corpus, tmp_path)


def test_run_directories(corpus, tmp_path):
    good = "runs/control-good"
    cases = []
    for item in _items(corpus, "run"):
        p = f"@in/{item.path}"
        common = {"expect": item.expect, "warn": item.warn}
        cases += [
            Case(f"report {item.path}", ["report", p], inputs=(item.path,), **common),
            Case(f"emit-config {item.path}", ["emit-config", p], inputs=(item.path,), **common),
            Case(f"emit-config 2 budgets {item.path}", ["emit-config", p, "--gpu-mem", "1GB,2GB"],
                 inputs=(item.path,), allow=(f"{p}/configs",), **common),
            Case(f"compare {item.path}", ["compare", f"@in/{good}", p],
                 inputs=tuple({item.path, good}), **common),
            # the corpus was recorded before trials counted a ledger: one line, whatever
            # the damage
            Case(f"explain {item.path}", ["explain", p, "--json"], USAGE, (item.path,)),
        ]
        if item.expect == USAGE:  # a damaged header is refused before anything runs
            cases.append(Case(f"sweep --resume {item.path}", ["sweep", "--resume", p, *SHORT,
                                                              *NOSTANDBY],
                              item.expect, (item.path,)))
    judge(cases, corpus, tmp_path)


def test_links_in_run_directories(corpus, tmp_path):
    """A run directory copied or shared can hold links (.lock, results.jsonl, configs):
    every command reads through them, none writes through them out of the run."""
    good = "runs/control-good"
    cases = []
    for item in _items(corpus, "run-link"):
        p = f"@in/{item.path}"
        ins = (item.path, *item.extra.get("inputs", ()))
        writes_configs = item.extra.get("writes") == "configs"
        cases += [
            Case(f"report {item.path}", ["report", p], OK, ins),
            Case(f"compare {item.path}", ["compare", f"@in/{good}", p], OK,
                 tuple(dict.fromkeys((*ins, good)))),
            Case(f"emit-config 2 budgets {item.path}", ["emit-config", p, "--gpu-mem",
                                                        "1GB,2GB"],
                 USAGE if writes_configs else OK, ins, allow=(f"{p}/configs",)),
        ]
        if not writes_configs:  # refused before any trial: the run's own files are links
            cases.append(Case(f"sweep --resume {item.path}", ["sweep", "--resume", p, *SHORT,
                                                              *NOSTANDBY], item.expect, ins))
    assert len(cases) == 11
    judge(cases, corpus, tmp_path)


def test_baselines(corpus, tmp_path):
    cases = []
    for item in _items(corpus, "baseline"):
        p = f"@in/{item.path}"
        for save in ([], ["--save"]):
            cases.append(Case(f"bench {' '.join(save)} {item.path}", [
                "bench", *save, "--baseline", p, "--profile", "quick", "--sizes", "64",
                "--repeat", "1", *SHORT], item.expect, (item.path,),
                checks=(("fast", 20.0, "refused only after trials ran"),)))
    judge(cases, corpus, tmp_path)


def test_flags_and_output_paths(corpus, tmp_path):
    good, hes = "runs/control-good", HES
    t = ["trial", "--profile", f"@in/{hes}", "-n", "3"]  # an invalid size: never launches
    s = ["sweep", "--profile", f"@in/{hes}", "--start", "3", "--max-envs", "3", *NOSTANDBY]
    e = ["emit-config", f"@in/{good}"]
    r = ["report", f"@in/{good}"]
    file_txt = (("@out/file.txt", "x"),)
    runs_dir = ("@work/vramtune-runs",)
    cases = []
    for flag, value in [("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "0"),
                        ("--timeout", "-1"), ("--timeout", "1e309"), ("--gpu-mem", "nan"),
                        ("--gpu-mem", "-1GB"), ("--gpu-mem", ""), ("--gpu-mem", "1e400"),
                        ("--gpu-mem", "1e30B"), ("--gpu-mem", "1MB"), ("--num-envs", "0"),
                        ("--num-envs", "1000000000")]:
        cases.append(Case(f"trial {flag} {value!r}", [*t, flag, value], USAGE, (hes,)))
    for flag, value in [("--timeout", "nan"), ("--timeout", "inf"), ("--headroom", ""),
                        ("--headroom", "200%"), ("--headroom", "nan"), ("--gpu-mem", "1e30B"),
                        ("--gpu-mem", "1MB"), ("--max-envs", "1000000000"), ("--start", "0"),
                        ("--refine", "-1"), ("--refine", "1000000000"), ("--profile", ""),
                        ("--confirm-steps", "0")]:
        args = [a for i, a in enumerate(s) if not (a in (flag,) or (i and s[i - 1] == flag))]
        cases.append(Case(f"sweep {flag} {value!r}", [*args, flag, value], USAGE, (hes,),
                          allow=runs_dir))
    cases.append(Case("sweep --max-envs 1e9 from above the product (hold-env-steps)", [
        "sweep", "--profile", f"@in/{hes}", "--start", "1024", "--max-envs", "16777216",
        *SHORT, *NOSTANDBY], FAIL, (hes,), allow=runs_dir))
    for value, expect in [(f"@in/{good}/results.jsonl", USAGE), (f"@in/{good}", USAGE),
                          ("/proc/vramtune-fuzz-run", USAGE), ("@out/file.txt/run", USAGE),
                          ("@out/" + "n" * 300, USAGE), ("", USAGE)]:
        cases.append(Case(f"sweep --out {value[:30]!r}", [*s, "--out", value], expect,
                          (hes, good), setup=file_txt))
    for value, expect in [("@in/nope", USAGE), ("", USAGE), ("@in/runs/results-is-fifo", USAGE)]:
        cases.append(Case(f"sweep --resume {value!r}", ["sweep", "--resume", value, *NOSTANDBY],
                          expect, ("runs/results-is-fifo",)))
    for flag, value in [("--gpu-mem", "nan"), ("--gpu-mem", ","), ("--gpu-mem", "1e30B"),
                        ("--headroom", "200%"), ("--num-timesteps", "0"),
                        ("--num-timesteps", str(10**30)), ("--format", "toml"),
                        ("--hydra-prefix", "x\ninjected: 1\n#"), ("--hydra-prefix", "a: b"),
                        ("--hydra-prefix", "..."), ("--hydra-prefix", "[bold]x")]:
        cases.append(Case(f"emit-config {flag} {value!r}", [*e, "--format", "hydra", flag, value]
                          if flag == "--hydra-prefix" else [*e, flag, value], USAGE, (good,)))
    cases.append(Case("emit-config --hydra-prefix agent.ppo", [
        *e, "--format", "hydra", "--hydra-prefix", "agent.ppo", "-o", "@out/h.yaml"], OK,
        (good,), allow=("@out",), checks=(("yaml_top_keys", "@out/h.yaml"),)))
    for value, expect, extra in [
            ("/proc/vramtune-fuzz.yaml", USAGE, []), ("@out/file.txt/x.yaml", USAGE, []),
            ("@out/" + "n" * 300 + ".yaml", USAGE, []), ("@out", OK, []),
            ("@out/file.txt", USAGE, ["--gpu-mem", "1GB,2GB"])]:
        cases.append(Case(f"emit-config -o {value[:30]!r} {extra}", [*e, "-o", value, *extra],
                          expect, (good,), allow=("@out",), setup=file_txt))
    cases.append(Case("emit-config two runs, one named ../../x", [
        "emit-config", f"@in/{good}", "@in/runs/name-dotdot", "--gpu-mem", "1GB,2GB"], ANY,
        (good, "runs/name-dotdot"), allow=(f"@in/{good}/configs",)))
    for value, expect in [("@out", USAGE), ("/proc/vramtune-fuzz.png", USAGE),
                          ("@out/file.txt/x.png", USAGE), ("", USAGE),
                          ("@out/" + "n" * 300 + ".png", USAGE), ("@out/plot.png", OK)]:
        # matplotlib keeps its font cache in HOME: a library's cache, not vramtune's writing
        cases.append(Case(f"report --plot {value[:30]!r}", [*r, "--plot", value], expect,
                          (good,), allow=("@out", "@home"), setup=file_txt))
    cases.append(Case("report a markup-named run", ["report", "@in/runs/name-markup-field"], OK,
                      ("runs/name-markup-field",), checks=(("forbid", "MarkupError",
                                                            "rich markup error"),)))
    for name in (MARKUP, "../../x", "x\ninjected: 1", ""):
        cases.append(Case(f"init-profile --name {name!r}", [
            "init-profile", "--env", "brax:fast", "-o", "@out/p.yaml", "--name", name], USAGE))
    for args in (["-o", "/proc/vramtune-fuzz.yaml"], ["-o", "@out"], ["-o", ""],
                 ["-o", "@out/file.txt/p.yaml"], ["--env", "[bold]x", "-o", "@out/p.yaml"]):
        argv = ["init-profile", *(["--env", "brax:fast"] if "--env" not in args else []), *args]
        cases.append(Case(f"init-profile {args}", argv, USAGE, setup=file_txt))
    cases.append(Case("bench --save to a path under a file", [
        "bench", "--save", "--baseline", "@out/file.txt/base.json", "--profile", "quick",
        "--sizes", "64", "--repeat", "1"], USAGE, setup=file_txt,
        checks=(("fast", 20.0, "refused only after trials ran"),)))
    for flag, value in [("--timeout", "nan"), ("--timeout", "inf"), ("--repeat", "0"),
                        ("--sizes", "0"), ("--sizes", "1000000000")]:
        cases.append(Case(f"bench {flag} {value}", [
            "bench", "--baseline", "@in/baselines/control-good.json", flag, value,
            *(["--sizes", "64"] if flag != "--sizes" else [])], USAGE,
            ("baselines/control-good.json",)))
    cases += [Case("profiles", ["profiles"], OK), Case("profiles --json", ["profiles", "--json"],
                                                       OK)]
    judge(cases, corpus, tmp_path)


# ----------------------------------------------------------------------------- launches


def test_trial_child_never_imports_from_the_current_directory(corpus, tmp_path):
    """A jax.py in the cwd must not run in the trial child (it runs with python -P)."""
    root, _ = corpus
    (tmp_path / "jax.py").write_text("open('CWD_JAX_IMPORTED', 'w').write('x')\n"
                                     "raise ImportError('cwd jax.py')\n")
    # the session's compile cache (the CLI's default): the test is the import path, not a peak
    proc = run_cli("trial", "--profile", str(root / "profiles/control-base.yaml"), "-n", "64",
                   "--timeout", "20", "--json", cwd=tmp_path, timeout=120)
    assert not (tmp_path / "CWD_JAX_IMPORTED").exists()
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["status"] in ("ok", "timeout"), proc.stdout[-1500:]


def test_sigterm_of_trial_stops_its_process_group_and_removes_its_temp_folder(tmp_path):
    """A factory that starts a grandchild (`sleep 600`) in the trial's process group: SIGTERM
    of `vramtune trial` kills it too, and the trial's temporary folder is removed."""
    import yaml

    from vramtune.workload.profile import builtin_profiles

    data = yaml.safe_load(builtin_profiles()["quick"].read_text())
    pid_file = tmp_path / "sleeper.pid"
    data.update(name="grandchild", env="tests.workloads_fixture:make_env_with_grandchild",
                backend=None, env_kwargs={"pid_file": str(pid_file)})
    profile = tmp_path / "grandchild.yaml"
    profile.write_text(yaml.safe_dump(data))
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    proc = subprocess.Popen([sys.executable, "-m", "vramtune.cli.app", "trial", "--profile",
                             str(profile), "-n", "64", "--timeout", "120", "--no-cache"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 90
        while not pid_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert pid_file.exists(), proc.communicate(timeout=10)
        sleeper = int(pid_file.read_text())
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "terminated" in err
    for _ in range(50):
        if not _alive(sleeper):
            break
        time.sleep(0.1)
    assert not _alive(sleeper), "the grandchild outlived the trial"
    assert os.listdir(temp) == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def test_disk_full_during_a_sweep_is_one_line_with_the_table(tmp_path, quick_short):
    """RLIMIT_FSIZE lets the header through, not the first trial line: as a disk that
    fills after the sweep started. The trial is shown, the error is one line, exit 2."""
    from vramtune import api

    # --cache, here and below: the session's compile cache shortens the one trial that runs,
    # and quick_short's steps/s window too (the same profile here and below: the same header)
    probe = api.prepare_sweep(quick_short, start=64, max_envs=64, refine=0, confirm=False,
                              cache=True, standby=False, out=tmp_path / "probe")
    probe.release()
    limit = (tmp_path / "probe/results.jsonl").stat().st_size + 300

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run([sys.executable, "-m", "vramtune.cli.app", "sweep", "--profile",
                           quick_short, "--start", "64", "--max-envs", "64", "--refine", "0",
                           "--no-confirm", "--cache", "--no-standby", "--out",
                           str(tmp_path / "run"), "--timeout", "120"],
                          capture_output=True, text=True, timeout=300, preexec_fn=small_files)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("vramtune: error: cannot append num_envs=64"), lines
    assert "│" in proc.stdout and "64" in proc.stdout  # the table, with the trial
    assert "sweep --resume" in proc.stdout

"""A corpus of hostile input files for the CLI fuzz test (tests/integration/test_fuzz_cli.py).

Trimmed from the fuzz helper's corpus (notes/fuzz/corpus.py, 335 items): one or two items per
class of hostile input it found failing, per file format: profiles, `check` configs, sweep
run directories, bench baselines. Each item says what a hardened vramtune answers (the exit
codes allowed). Written from this machine's real header fields (versions, CPU), so crafted
trial lines and baselines reach the code behind the first checks.
"""

from __future__ import annotations

import copy
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vramtune import machine
from vramtune.records import Status, TrialResult
from vramtune.results.baseline import BASELINE_KIND
from vramtune.results.settings import SweepSettings
from vramtune.results.store import RunHeader
from vramtune.workload.profile import builtin_profiles, load_profile

MARKUP = "evil[/]name[bold red]"
USAGE, FAIL, ANY, OK = (2,), (1, 2), (0, 1, 2), (0, 1)
_DELETE = object()


@dataclass(frozen=True)
class Item:
    kind: str  # profile | check | run | baseline
    path: str  # relative to the corpus root
    klass: str  # the class of hostile input
    expect: tuple[int, ...]  # exit codes allowed
    warn: bool = False  # a damaged trial line: exit 0/1 must come with a warning
    extra: dict[str, Any] = field(default_factory=dict)


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _with(base: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(base)
    node = data
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    if value is _DELETE:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = value
    return data


def _bomb(levels: int) -> str:
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


class Corpus:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.items: list[Item] = []

    def write(self, rel: str, content: str | bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")

    def special(self, kind: str, folder: str, stem: str) -> None:
        """A directory and a FIFO named like input files (reading a FIFO would block)."""
        (self.root / folder / f"a-directory.{stem}").mkdir(parents=True, exist_ok=True)
        fifo = self.root / folder / f"fifo.{stem}"
        if not fifo.exists():
            os.mkfifo(fifo)
        self.items += [Item(kind, f"{folder}/a-directory.{stem}", "special-file", USAGE),
                       Item(kind, f"{folder}/fifo.{stem}", "special-file", USAGE)]

    # -- profiles ---------------------------------------------------------------------------

    def profiles(self) -> None:
        base = yaml.safe_load(builtin_profiles()["quick"].read_text())
        base.update(name="fuzzbase", max_envs=256)

        def add(rel: str, data: Any, klass: str, expect: tuple[int, ...] = USAGE) -> None:
            self.write(f"profiles/{rel}", data if isinstance(data, str | bytes) else _yaml(data))
            self.items.append(Item("profile", f"profiles/{rel}", klass, expect))

        self.write("profiles/control-base.yaml", _yaml(base))  # used by the launch cases only
        # hold-env-steps: only divisors of batch_size x num_minibatches (512) are valid sizes,
        # so `-n 3` / `--start 3 --max-envs 3` is a size that never launches a trial.
        self.write("profiles/control-hes.yaml", _yaml({**base, "name": "fuzzhes",
                                                       "scaling": "hold-env-steps"}))
        add("binary.yaml", bytes(range(256)) * 8, "encoding")
        add("nonutf8.yaml", _yaml(base).replace("fuzzbase", "caf\u00e9").encode("latin-1"),
            "encoding")
        add("utf16.yaml", _yaml(base).encode("utf-16"), "encoding")
        add("empty.yaml", "", "shape")
        add("toplevel-list.yaml", [base], "shape")
        add("toplevel-scalar.yaml", "5\n", "shape")
        add("multi-doc.yaml", _yaml(base) + "---\n" + _yaml(base), "shape")
        add("python-tag.yaml", "!!python/object/apply:os.system ['echo pwned']\n", "shape")
        add("int-keys.yaml", "5: x\nname: y\n", "shape")
        add("env_kwargs-date.yaml", _yaml(base) + "env_kwargs: {when: 2020-01-01}\n", "wrong-type")
        for rel, key, value in [
            ("missing-env", "env", _DELETE), ("unknown-key", "nmu_envs", 5),
            ("name-int", "name", 123), ("name-list", "name", ["a"]), ("env-int", "env", 5),
            ("backend-list", "backend", ["mjx"]), ("env_kwargs-list", "env_kwargs", [1, 2]),
            ("domain_randomization-str", "domain_randomization", "yes"),
            ("ppo-batch_size-abc", "ppo.batch_size", "abc"),
            ("ppo-batch_size-null", "ppo.batch_size", None),
            ("ppo-batch_size-list", "ppo.batch_size", [1, 2]),
            ("ppo-batch_size-float", "ppo.batch_size", 1.5),
            ("ppo-batch_size-true", "ppo.batch_size", True),
            ("ppo-batch_size-str64", "ppo.batch_size", "64"),
            ("ppo-batch_size-huge", "ppo.batch_size", 1000000007),
            ("ppo-num_minibatches-zero", "ppo.num_minibatches", 0),
            ("ppo-unroll_length-neg", "ppo.unroll_length", -1),
            ("ppo-learning_rate-abc", "ppo.learning_rate", "abc"),
            ("ppo-string", "ppo", "abc"), ("measure-list", "measure", [1, 2]),
            ("measure-min_intervals-str", "measure.min_intervals", "3"),
            ("measure-min_intervals-null", "measure.min_intervals", None),
            ("measure-max_intervals-huge", "measure.max_intervals", 1000000007),
            ("measure-min_window_s-abc", "measure.min_window_s", "abc"),
            ("measure-min_window_s-nan", "measure.min_window_s", math.nan),
            ("measure-steady_intervals-str", "measure.steady_intervals", "x"),
            ("timeout_s-abc", "timeout_s", "abc"), ("timeout_s-zero", "timeout_s", 0),
            ("timeout_s-nan", "timeout_s", math.nan), ("timeout_s-inf", "timeout_s", math.inf),
            ("timeout_s-huge", "timeout_s", 1e308), ("num_envs-huge", "num_envs", 1000000007),
            ("num_envs-1e12", "num_envs", 1e12), ("max_envs-huge", "max_envs", 1000000007),
            ("start_envs-above-max", "start_envs", 100000),
            ("episode_length-huge", "episode_length", 10**15),
            ("action_repeat-zero", "action_repeat", 0), ("scaling-list", "scaling", ["x"]),
            ("network-policy-neg", "network.policy_hidden_layer_sizes", [-5, 3]),
            ("network-policy-str", "network.policy_hidden_layer_sizes", "abc"),
            ("network-policy-huge", "network.policy_hidden_layer_sizes", [10**12]),
            ("network-activation-bad", "network.activation", "not_a_function"),
        ]:
            add(f"{rel}.yaml", _with(base, key, value),
                "wrong-type" if "huge" not in rel else "bad-value")
        add("hes-max_envs-huge.yaml", {**base, "scaling": "hold-env-steps",
                                       "max_envs": 1000000007}, "bounded-work")
        add("yaml-deep-block.yaml", "name: x\nenv: brax:fast\nenv_kwargs:\n  a:\n    "
            + "- " * 20000 + "1\n", "yaml-depth")
        add("yaml-deep-flow-map.yaml", "{a: " * 20000 + "1" + "}" * 20000 + "\n", "yaml-depth")
        bomb = "".join("  " + line + "\n" for line in _bomb(9).splitlines())
        add("yaml-laughs-9.yaml", _yaml({**base, "env_kwargs": None}).replace(
            "env_kwargs: null\n", "env_kwargs:\n" + bomb), "yaml-bomb")
        add("yaml-recursive.yaml", _yaml(base) + "env_kwargs: &r {self: *r}\n", "yaml-bomb")
        add("yaml-big-name.yaml", {**base, "name": "n" * 5_000_000}, "size")
        for rel, name in [("name-markup", MARKUP), ("name-dotdot", "../../x"),
                          ("name-absolute", "/tmp/vramtune-fuzz-escape/abs"),
                          ("name-newline", "x\ninjected: 1"), ("name-nul", "x\u0000y"),
                          ("name-long", "n" * 300), ("name-empty", "")]:
            add(f"{rel}.yaml", {**base, "name": name}, "name")
        add("env-markup.yaml", {**base, "env": "brax:[bold]x"}, "name")
        self.special("profile", "profiles", "yaml")

    # -- check configs ----------------------------------------------------------------------

    def checks(self) -> None:
        base = {"num_envs": 2048, "batch_size": 1024, "num_minibatches": 32, "unroll_length": 5}

        def add(rel: str, data: Any, klass: str, expect: tuple[int, ...]) -> None:
            self.write(f"check/{rel}", data if isinstance(data, str | bytes) else _yaml(data))
            self.items.append(Item("check", f"check/{rel}", klass, expect))

        add("control-valid.yaml", base, "control", OK)
        add("control-invalid.yaml", {**base, "num_envs": 3000}, "control", OK)
        add("binary.yaml", bytes(range(256)) * 8, "encoding", USAGE)
        add("empty.yaml", "", "shape", USAGE)
        add("toplevel-list.yaml", [1, 2, 3], "shape", USAGE)
        add("many-docs.yaml", "---\n" * 200_000, "size", USAGE)
        add("deep-block.yaml", "num_envs: 64\nx:\n  " + "- " * 20000 + "1\n", "yaml-depth",
            USAGE)
        add("deep-flow.yaml", "num_envs: 64\nx: " + "[" * 20000 + "]" * 20000 + "\n",
            "yaml-depth", USAGE)
        add("laughs-9.yaml", _bomb(9) + "num_envs: 2048\n", "yaml-bomb", USAGE)
        add("laughs-6.yaml", _bomb(6) + "num_envs: 2048\n", "yaml-bomb", FAIL)
        add("recursive.yaml", "num_envs: 64\na: &a {b: *a}\n", "yaml-bomb", USAGE)
        add("recursive-list.yaml", "num_envs: 64\na: &a [*a]\n", "yaml-bomb", USAGE)
        for rel, patch, expect in [
            ("num_envs-huge", {"num_envs": 1000000007}, FAIL),
            ("batch_size-huge", {"batch_size": 1000000000000}, OK),
            ("batch_size-huge-invalid", {"batch_size": 1000000000000, "num_envs": 3000}, FAIL),
            ("batch_size-huge-odd", {"batch_size": 1000000000001, "num_envs": 1000000007},
             FAIL),
            ("num_minibatches-huge", {"num_minibatches": 1000000000000, "num_envs": 3}, FAIL),
            ("all-huge", {"num_envs": 2**61 - 1, "batch_size": 2**61, "num_minibatches": 2**40},
             USAGE),
            ("num_envs-float-huge", {"num_envs": 1e300}, USAGE),
            ("num_envs-abc", {"num_envs": "abc"}, USAGE),
            ("num_envs-null", {"num_envs": None}, USAGE),
            ("num_envs-true", {"num_envs": True}, USAGE),
            ("num_envs-nan", {"num_envs": math.nan}, USAGE),
            ("num_envs-neg", {"num_envs": -64}, FAIL),
            ("interp-missing", {"num_envs": "${a.b}"}, USAGE),
            ("interp-self", {"num_envs": "${num_envs}"}, USAGE),
        ]:
            add(f"{rel}.yaml", {**base, **patch}, "bounded-work" if "huge" in rel else
                "wrong-type", expect)
        add("key-markup.yaml", {"num_envs": 2048, "batch_size": 1024, MARKUP: 1}, "name", OK)
        add("big-line.yaml", "num_envs: 64\nx: " + "y" * 5_000_000 + "\n", "size", OK)
        add("many-candidates.yaml", "\n".join(f"s{i}: {{num_envs: {i + 1}, batch_size: 32}}"
                                              for i in range(3000)) + "\n", "bounded-work", OK)
        add("unhashable-key.yaml", "? [1, 2]\n: 3\nnum_envs: 64\n", "shape", USAGE)
        self.special("check", "check", "yaml")

    # -- run directories --------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        quick = load_profile("quick")
        return RunHeader(
            profile_name="quick", profile_hash=quick.hash, profile=quick.to_dict(),
            budget_bytes=None, headroom_fraction=0.1, machine=machine.machine_summary(),
            versions=machine.versions(), search=SweepSettings.from_dict({
                "start": 64, "max_envs": 256, "refine": 0, "objective": "throughput"})).to_dict()

    def trials(self, h: dict[str, Any]) -> list[dict[str, Any]]:
        def trial(n: int, status: Status) -> dict[str, Any]:
            ok = status is Status.OK
            return {"kind": "trial", **TrialResult(
                status=status, profile="quick", profile_hash=h["profile_hash"], num_envs=n,
                batch_size=n, num_minibatches=4, unroll_length=10, backend="cpu",
                device_kind="cpu", device_count=1, compile_s=12.5 if ok else None,
                steps_per_s=10000.0 + 40 * n if ok else None,
                steps_per_s_min=9000.0 if ok else None, steps_per_s_max=11000.0 + 40 * n
                if ok else None, measured_intervals=3 if ok else None,
                host_peak_rss_bytes=300_000_000 + 2_000_000 * n, wall_s=20.0,
                error_message=None if ok else "RESOURCE_EXHAUSTED: out of memory",
                versions=dict(h["versions"]), timestamp="2026-11-22T07:01:00+00:00").to_dict()}

        return [trial(64, Status.OK), trial(128, Status.OK), trial(256, Status.OOM)]

    def runs(self) -> None:
        h = self.header()
        t = self.trials(h)

        def add(name: str, lines: list[Any] | str | bytes, klass: str,
                expect: tuple[int, ...] = USAGE, warn: bool = False) -> None:
            text = lines if isinstance(lines, str | bytes) else "".join(
                (x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
            self.write(f"runs/{name}/results.jsonl", text)
            self.items.append(Item("run", f"runs/{name}", klass, expect, warn))

        add("control-good", [h, *t], "control", OK)
        add("control-truncated-last", [h, *t, json.dumps(t[0])[:100]], "control", OK, warn=True)
        for name, first in [("first-list", [1, 2, 3]), ("first-int", 5), ("first-null", None),
                            ("first-trial", t[0])]:
            add(name, [first, *t], "first-line")
        add("empty-file", "", "first-line")
        add("binary", bytes(range(256)) * 4, "encoding")
        add("nul-bytes", json.dumps(h) + "\n\x00\x00\x00\n" + json.dumps(t[0]) + "\n",
            "encoding")
        for key in ("profile_name", "profile", "budget_bytes", "machine", "schema_version"):
            add(f"header-missing-{key}", [{k: v for k, v in h.items() if k != key}, *t],
                "header-missing")
        for name, key, value in [
            ("budget-str", "budget_bytes", "8GB"), ("budget-neg", "budget_bytes", -1),
            ("budget-huge", "budget_bytes", 10**30), ("budget-list", "budget_bytes", [1]),
            ("headroom-str", "headroom_fraction", "abc"), ("headroom-big", "headroom_fraction", 2),
            ("headroom-null", "headroom_fraction", None), ("search-str", "search", "abc"),
            ("search-objective-int", "search", {"objective": 5}),
            ("search-max_envs-huge", "search", {"max_envs": 10**12}),
            ("search-refine-str", "search", {"refine": "abc"}),
            ("versions-null", "versions", None), ("versions-nested", "versions", {"jax": {}}),
            ("machine-null", "machine", None), ("profile-str", "profile", "abc"),
            ("profile-batch-abc", "profile", _with(h["profile"], "ppo.batch_size", "abc")),
            ("profile-timeout-nan", "profile", {**h["profile"], "timeout_s": math.nan}),
            ("schema-str", "schema_version", "1"), ("schema-true", "schema_version", True),
            ("schema-2", "schema_version", 2), ("created-int", "created", 5),
        ]:
            add(f"header-{name}", [{**h, key: value}, *t], "header-type")
        add("header-nan-tokens", json.dumps({**h, "headroom_fraction": math.nan}) + "\n"
            + "".join(json.dumps(x) + "\n" for x in t), "header-type")
        for name, value in [("markup", MARKUP), ("dotdot", "../../x"),
                            ("absolute", "/tmp/vramtune-fuzz-escape/abs"),
                            ("newline", "x\ninjected: 1")]:
            hp = {**h, "profile_name": value, "profile": {**h["profile"], "name": value}}
            add(f"name-{name}", [hp, *[{**x, "profile": value} for x in t]], "name", ANY)
        add("name-markup-field", [{**h, "profile_name": MARKUP}, *t], "name", OK)
        add("error-markup", [h, t[0], {**t[2], "error_message": "boom [/] [bold red]x",
                                       "error_type": "[/]"}], "name", OK)
        for name, key, value in [
            ("num_envs-str", "num_envs", "abc"), ("num_envs-float", "num_envs", 1.5),
            ("num_envs-huge", "num_envs", 10**18), ("num_envs-list", "num_envs", [128]),
            ("num_envs-zero", "num_envs", 0), ("steps-str", "steps_per_s", "fast"),
            ("steps-neg", "steps_per_s", -5.0), ("peak-str", "host_peak_rss_bytes", "big"),
            ("status-bad", "status", "weird"), ("versions-str", "versions", "abc"),
            ("notes-int", "notes", 5), ("compile-str", "compile_s", "x"),
            ("error_message-int", "error_message", 5), ("batch-str", "batch_size", "abc"),
        ]:
            add(f"trial-{name}", [h, t[0], {**t[1], key: value}, t[2]], "trial-line", OK,
                warn=True)
        add("trial-nan-tokens", "".join(json.dumps(x) + "\n" for x in (
            h, t[0], {**t[1], "steps_per_s": math.nan}, t[2])), "trial-line", OK, warn=True)
        for name, line in [("list", [1, 2, 3]), ("null", None),
                           ("kind-missing", {k: v for k, v in t[1].items() if k != "kind"})]:
            add(f"line-{name}", [h, t[0], line, t[2]], "trial-line", OK, warn=True)
        add("truncated-middle", [h, t[0], json.dumps(t[1])[:80], t[2]], "trial-line")
        add("deep-json", [h, "[" * 100_000 + "]" * 100_000, t[2]], "json-depth", OK,
            warn=True)
        add("deep-json-header", ["{\"a\": " + "[" * 100_000 + "]" * 100_000 + "}", t[0]],
            "json-depth")
        add("huge-line", [h, t[0], {**t[1], "error_message": "x" * 2_000_000}, t[2]], "size",
            OK, warn=True)
        add("duplicate-keys", json.dumps(h)[:-1] + ', "schema_version": 2}\n'
            + "".join(json.dumps(x) + "\n" for x in t), "header-type")
        (self.root / "runs/results-is-dir/results.jsonl").mkdir(parents=True, exist_ok=True)
        fifo = self.root / "runs/results-is-fifo/results.jsonl"
        fifo.parent.mkdir(parents=True, exist_ok=True)
        if not fifo.exists():
            os.mkfifo(fifo)
        loop = self.root / "runs/results-symlink-loop/results.jsonl"
        loop.parent.mkdir(parents=True, exist_ok=True)
        if not loop.is_symlink():
            os.symlink("results.jsonl", loop)
        self.items += [Item("run", f"runs/{n}", "special-file", USAGE)
                       for n in ("results-is-dir", "results-is-fifo", "results-symlink-loop")]
        # A run directory copied or shared can hold links: reading through them is fine, a
        # write through them would land outside the run (test_links_in_run_directories).
        good = "".join(json.dumps(x) + "\n" for x in (h, *t))
        self.write("runs/link-lock/results.jsonl", good)
        self.write("runs/link-configs/results.jsonl", good)
        self.write("runs/link-configs-target/.keep", "")
        links = {"runs/link-lock/.lock": "../link-lock-target",  # dangling: O_CREAT makes it
                 "runs/link-results/results.jsonl": "../control-good/results.jsonl",
                 "runs/link-configs/configs": "../link-configs-target"}
        for rel, target in links.items():
            link = self.root / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                os.symlink(target, link)
        self.items += [
            Item("run-link", "runs/link-lock", "link", USAGE),
            Item("run-link", "runs/link-results", "link", USAGE,
                 extra={"inputs": ("runs/control-good",)}),
            Item("run-link", "runs/link-configs", "link", USAGE,
                 extra={"inputs": ("runs/link-configs-target",), "writes": "configs"}),
        ]

    # -- bench baselines --------------------------------------------------------------------

    def baselines(self) -> None:
        h = self.header()
        sample = {"status": "ok", "peak_bytes": 450_000_000, "steps_per_s": 15000.0,
                  "compile_s": 12.0, "error": None}

        def size(n: int, samples: Any = None, **kw: Any) -> dict[str, Any]:
            return {"num_envs": n, "memory_label": "host RAM", "batch_size": n,
                    "num_minibatches": 4, "versions": dict(h["versions"]),
                    "measured": "2026-11-22T07:00:00+00:00",
                    "samples": [sample] * 3 if samples is None else samples, **kw}

        good = {"kind": BASELINE_KIND, "schema_version": 1,
                "machine": {"backend": "cpu", "device": machine.cpu_model(), "device_count": 1},
                "profile_name": "quick", "profile_hash": h["profile_hash"],
                "versions": dict(h["versions"]), "compile_cache": False,
                "created": "2026-11-22T07:00:00+00:00", "updated": "2026-11-22T07:00:00+00:00",
                "sizes": [size(64)], "profile": h["profile"]}

        def add(rel: str, data: Any, klass: str) -> None:
            self.write(f"baselines/{rel}", data if isinstance(data, str | bytes)
                       else json.dumps(data))
            self.items.append(Item("baseline", f"baselines/{rel}", klass, USAGE))

        self.write("baselines/control-good.json", json.dumps(good))
        add("binary.json", bytes(range(256)) * 4, "encoding")
        add("empty.json", "", "shape")
        add("toplevel-list.json", [good], "shape")
        add("kind-wrong.json", {**good, "kind": "something"}, "shape")
        add("schema-str.json", {**good, "schema_version": "1"}, "shape")
        add("schema-true.json", {**good, "schema_version": True}, "shape")
        add("deep-json.json", "[" * 100_000 + "]" * 100_000, "json-depth")
        for rel, patch in [
            ("machine-null", {"machine": None}), ("sizes-str", {"sizes": "abc"}),
            ("samples-str", {"sizes": [size(64, "abc")]}),
            ("sample-peak-abc", {"sizes": [size(64, [{**sample, "peak_bytes": "abc"}] * 3)]}),
            ("sample-rate-abc", {"sizes": [size(64, [{**sample, "steps_per_s": "abc"}] * 3)]}),
            ("sample-status-int", {"sizes": [size(64, [{**sample, "status": 5}] * 3)]}),
            ("sample-mixed", {"sizes": [size(64, [sample, {**sample, "peak_bytes": "abc"}])]}),
            ("versions-str", {"versions": "abc"}), ("compile_cache-str", {"compile_cache": "no"}),
            ("memory_label-markup", {"sizes": [size(64, memory_label=MARKUP)]}),
            ("created-int", {"created": 5}),
        ]:
            add(f"{rel}.json", {**good, **patch}, "wrong-type")
        add("sample-nan.json", json.dumps({**good, "sizes": [size(64, [{**sample,
                                                                        "peak_bytes": math.nan}])]}),
            "wrong-type")
        add("other-profile-hash.json", {**good, "profile_hash": "0000000000000000",
                                        "profile_name": "other"}, "other-profile")
        add("other-machine.json", {**good, "machine": {**good["machine"],
                                                       "device": "Other CPU"}}, "other-machine")
        self.special("baseline", "baselines", "json")


def build(root: Path) -> list[Item]:
    """Write the corpus under ``root``; the items, each with what a hardened CLI answers."""
    corpus = Corpus(root)
    corpus.profiles()
    corpus.checks()
    corpus.runs()
    corpus.baselines()
    return corpus.items

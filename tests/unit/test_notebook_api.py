"""The notebook surfaces of the API, without trials: a profile dict whose env is a callable,
the outcome's frame / plot / ppo.train kwargs / YAML from a recorded sweep, the warning about
the caller's own GPU memory, and hostile input (one line, nothing written)."""

from __future__ import annotations

import base64
import shutil
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

import vramtune
from vramtune.api import SweepOutcome, choose_in_run
from vramtune.errors import UserError
from vramtune.measure.wire import TrialSpec
from vramtune.notebook import caller_gpu_warning
from vramtune.results.store import RESULTS_FILE, load_run
from vramtune.tune.request import SweepRequest, reconcile
from vramtune.workload.build import _build_factory
from vramtune.workload.pickled import (
    FACTORY_FILE,
    profile_from_user,
    save_factory,
    with_saved_factory,
)
from vramtune.workload.sources import parse_source

GOLDEN = Path(__file__).parents[1] / "golden" / "runs"
BASE = {"episode_length": 100, "num_envs": 64,
        "ppo": {"batch_size": 64, "num_minibatches": 4, "unroll_length": 10}}


def make_env(size: int = 3):
    """A notebook-style factory: what it returns is whatever the user's code builds."""
    return ("env", size)


def test_a_callable_env_is_pickled_by_value_and_named_after_itself():
    profile = profile_from_user({**BASE, "env": make_env})
    source = parse_source(profile.env)
    assert source.kind == "pickled" and profile.name == "make_env"
    assert profile.env.startswith("pickled:make_env@") and profile.factory
    assert "factory" not in profile.to_dict()  # the digest in env stands for the bytes
    assert profile_from_user({**BASE, "env": make_env}).hash == profile.hash
    # in the child: the bytes rebuild the factory, which gets the profile's env_kwargs
    assert _build_factory(profile, source) == ("env", 3)



def test_a_factory_from_a_module_the_trial_cannot_import_travels_by_value(tmp_path):
    """This test module is not installed: a process that cannot import it (no repo root on
    its path, as a notebook's kernel directory is not on a trial's) still calls the factory."""
    import subprocess

    import cloudpickle

    profile = profile_from_user({**BASE, "env": make_env})
    where = str(Path(cloudpickle.__file__).parents[1])
    code = "import pickle, sys; print(pickle.loads(sys.stdin.buffer.read())(size=5))"
    done = subprocess.run([sys.executable, "-P", "-c", code], input=profile.factory,
                          capture_output=True, cwd=tmp_path, timeout=60,
                          env={"PYTHONPATH": where, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "('env', 5)"


def test_a_lambda_is_a_factory_too():
    profile = profile_from_user({**BASE, "env": lambda: ("lambda env",)})
    assert profile.name == "lambda"
    assert _build_factory(profile, parse_source(profile.env)) == ("lambda env",)


def test_the_factory_travels_in_the_spec_as_base64(tmp_path):
    profile = profile_from_user({**BASE, "env": make_env})
    spec = TrialSpec(profile.to_dict(), 64, 64, 4, str(tmp_path / "r.json"),
                     env_factory=base64.b64encode(profile.factory).decode())
    spec.write(tmp_path / "spec.json")
    assert base64.b64decode(TrialSpec.read(tmp_path / "spec.json").env_factory) == profile.factory


def test_bytes_that_do_not_match_the_digest_are_refused():
    profile = profile_from_user({**BASE, "env": make_env})
    other = profile_from_user({**BASE, "env": lambda: None})
    from dataclasses import replace

    with pytest.raises(ValueError, match="do not match"):
        _build_factory(replace(profile, factory=other.factory), parse_source(profile.env))


def _one_line_and_nothing_written(call, tmp_path, monkeypatch, match: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=match) as caught:
        call()
    assert "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_factory_that_closes_over_a_lock_is_one_line(tmp_path, monkeypatch):
    lock = threading.Lock()

    def make_locked_env():
        with lock:
            return make_env()

    _one_line_and_nothing_written(
        lambda: vramtune.sweep({**BASE, "env": make_locked_env}, out="run"), tmp_path,
        monkeypatch, r"the env factory make_locked_env cannot be sent to the trial's process "
                     r"\(cloudpickle: TypeError: cannot pickle '_thread.lock' object\)")


@pytest.mark.parametrize(("change", "match"), [
    ({"ppo": {"batch_size": "64"}}, r"profile <dict>: ppo.batch_size must be an integer"),
    ({"num_envs": 6.5}, r"num_envs must be an integer"),
    ({"env": 42}, r"env must be brax:<name>, .* or a callable, got int"),
    ({"network": {"activation": "nope"}}, r"network.activation must be one of"),
    ({"surprise": 1}, r"unknown key 'surprise'"),
])
def test_a_dict_with_wrong_types_is_one_line(tmp_path, monkeypatch, change, match):
    data = {**BASE, "env": make_env, **change}
    _one_line_and_nothing_written(lambda: vramtune.sweep(data, out="run"), tmp_path,
                                  monkeypatch, match)
    _one_line_and_nothing_written(lambda: vramtune.trial(data, gpu_mem="1GB"), tmp_path,
                                  monkeypatch, match)


def test_a_bare_factory_is_the_dict_form_with_default_settings():
    # vramtune.sweep(make_env): a notebook's natural call
    bare = vramtune.sweep_request(make_env)
    as_dict = vramtune.sweep_request({"env": make_env})
    assert bare.profile.hash == as_dict.profile.hash and bare.profile.factory
    assert bare.profile.name == "make_env"
    from vramtune.api import trial_request
    assert trial_request(make_env, 64).profile.hash == as_dict.profile.hash


def test_a_profile_that_is_not_a_dict_or_name_is_one_line(tmp_path, monkeypatch):
    _one_line_and_nothing_written(lambda: vramtune.sweep(5), tmp_path, monkeypatch,
                                  "a profile is a built-in name")


def test_a_pickled_env_without_its_bytes_is_refused_before_a_run_exists(tmp_path, monkeypatch):
    bare = profile_from_user({**BASE, "env": make_env}).to_dict()
    _one_line_and_nothing_written(lambda: vramtune.sweep(bare, out="run"), tmp_path,
                                  monkeypatch, "pickled from a notebook, and this profile does "
                                               "not carry it")


def test_a_resumed_run_finds_its_factory_in_the_run_directory(tmp_path):
    profile = profile_from_user({**BASE, "env": make_env})
    bare = profile_from_user(profile.to_dict())  # as the header keeps it
    with pytest.raises(UserError, match=f"its {FACTORY_FILE} cannot be read"):
        with_saved_factory(bare, tmp_path)
    save_factory(tmp_path, profile)
    assert with_saved_factory(bare, tmp_path).factory == profile.factory
    (tmp_path / FACTORY_FILE).write_bytes(b"something else")
    with pytest.raises(UserError, match="is not the env factory"):
        with_saved_factory(bare, tmp_path)
    # the same dict passed again wins over the file
    assert with_saved_factory(bare, tmp_path, profile).factory == profile.factory


def test_reconcile_gives_a_resumed_notebook_run_its_factory(tmp_path):
    from vramtune.results.store import RunHeader

    profile = profile_from_user({**BASE, "env": make_env})
    header = RunHeader(profile.name, profile.hash, profile.to_dict(), None, 0.1, {}, {})
    save_factory(tmp_path, profile)
    request = reconcile(SweepRequest(resume=tmp_path / RESULTS_FILE), header)
    assert request.profile.factory == profile.factory


# --- the outcome, from a recorded sweep ------------------------------------------------------

def _outcome(tmp_path) -> SweepOutcome:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(GOLDEN / "cpu-quick-1.2GB.jsonl", run_dir / RESULTS_FILE)
    run = load_run(run_dir)
    choice = choose_in_run(run)
    return SweepOutcome(run_dir, run.results, choice.recommendation, None, 0, header=run.header)


def test_the_outcome_as_a_frame_kwargs_and_yaml(tmp_path):
    outcome = _outcome(tmp_path)
    chosen = outcome.recommendation.chosen
    assert chosen is not None
    frame = outcome.frame
    assert len(frame) == len(outcome.results) and "steps_per_s" in frame.columns
    kwargs = outcome.ppo_kwargs
    assert (kwargs["num_envs"], kwargs["batch_size"], kwargs["num_minibatches"]) == \
        (chosen.num_envs, chosen.batch_size, chosen.num_minibatches)
    assert kwargs["learning_rate"] == 3.0e-4 and kwargs["episode_length"] == 100
    import inspect

    from brax.training.agents.ppo import train

    assert set(kwargs) <= set(inspect.signature(train.train).parameters)
    assert f"num_envs: {chosen.num_envs}" in outcome.yaml


def test_plot_is_a_figure_and_leaves_the_backend_alone(tmp_path):
    import matplotlib
    from matplotlib.figure import Figure

    before = matplotlib.get_backend()
    pyplot_loaded = "matplotlib.pyplot" in sys.modules
    figure = _outcome(tmp_path).plot()
    assert isinstance(figure, Figure) and len(figure.axes) == 2
    assert matplotlib.get_backend() == before
    assert ("matplotlib.pyplot" in sys.modules) == pyplot_loaded
    figure.savefig(tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").stat().st_size > 10_000


def test_no_pick_is_one_line_from_kwargs_and_yaml(tmp_path):
    outcome = _outcome(tmp_path)
    from dataclasses import replace

    empty = replace(outcome, recommendation=replace(outcome.recommendation, chosen=None,
                                                    notice="nothing fit"))
    for attr in ("ppo_kwargs", "yaml"):
        with pytest.raises(UserError, match="^no recommendation: nothing fit$"):
            getattr(empty, attr)


# --- the caller's own GPU memory ----------------------------------------------------------

def _jax(*backends: str) -> dict:
    bridge = SimpleNamespace(_backends={name: object() for name in backends})
    return {"jax": SimpleNamespace(), "jax._src.xla_bridge": bridge}


def test_a_caller_holding_the_gpu_is_warned_with_the_fix():
    warning = caller_gpu_warning(_jax("cpu", "cuda"), {})
    assert warning is not None and "cuda backend with preallocation on" in warning
    assert "XLA_PYTHON_CLIENT_PREALLOCATE'] = 'false'" in warning and "0.75" in warning
    assert "0.3 of the GPU" in caller_gpu_warning(_jax("cuda"),
                                                  {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.3"})


@pytest.mark.parametrize(("modules", "environ"), [
    ({}, {}),  # jax not imported
    ({"jax": SimpleNamespace()}, {}),  # imported, no backend started
    (_jax("cpu"), {}),
    (_jax("cuda"), {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
    (_jax("cuda"), {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}),
])
def test_no_warning_where_the_caller_holds_no_gpu_pool(modules, environ):
    assert caller_gpu_warning(modules, environ) is None


def test_the_real_process_is_read_without_importing_jax():
    had_jax = "jax" in sys.modules
    caller_gpu_warning()
    assert ("jax" in sys.modules) == had_jax

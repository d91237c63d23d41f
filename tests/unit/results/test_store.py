"""The results file: append-only, survives a cut-off write, refuses other schemas."""

import json

import pytest

from vramtune.errors import UserError
from vramtune.records import Objective, Status, TrialResult
from vramtune.results.settings import CacheMode, ExecutorKind, SearchMethod, SweepSettings
from vramtune.results.store import (
    LOCK_FILE,
    RESULTS_FILE,
    SCHEMA_VERSION,
    RunHeader,
    append_result,
    create_run,
    load_run,
    lock_run,
    trial_key,
)
from vramtune.workload.profile import load_profile


def header(**kw) -> RunHeader:
    base = dict(profile_name="quick", profile_hash="abc", profile=load_profile("quick").to_dict(),
                budget_bytes=10**9, headroom_fraction=0.1, machine={"cpu": "AMD EPYC"},
                versions={"jax": "0.9.2"})
    base.update(kw)
    return RunHeader(**base)


def trial(n: int, status: Status = Status.OK) -> TrialResult:
    return TrialResult(status=status, profile="quick", profile_hash="abc", num_envs=n,
                       budget_bytes=10**9, versions={"jax": "0.9.2"}, host_peak_rss_bytes=n,
                       notes=("a note",))


def test_round_trip(tmp_path):
    create_run(tmp_path, header(search=SweepSettings(start=128)))
    append_result(tmp_path, trial(128))
    append_result(tmp_path, trial(256, Status.OOM))
    run = load_run(tmp_path)
    assert run.header.search == SweepSettings(start=128) and run.header.schema_version == SCHEMA_VERSION
    assert [(r.num_envs, r.status) for r in run.results] == [(128, Status.OK), (256, Status.OOM)]
    assert run.results[0] == trial(128) and run.warnings == ()


def test_truncated_last_line_is_skipped_with_a_warning(tmp_path):
    create_run(tmp_path, header())
    append_result(tmp_path, trial(128))
    with open(tmp_path / RESULTS_FILE, "a") as handle:
        handle.write('{"kind": "trial", "status": "ok", "num_en')  # the write that was cut
    run = load_run(tmp_path)
    assert [r.num_envs for r in run.results] == [128]
    assert len(run.warnings) == 1 and "truncated last line" in run.warnings[0]


def test_damage_in_the_middle_is_an_error(tmp_path):
    create_run(tmp_path, header())
    with open(tmp_path / RESULTS_FILE, "a") as handle:
        handle.write("not json\n" + json.dumps({"kind": "trial", **trial(1).to_dict()}) + "\n")
    with pytest.raises(UserError, match="damaged"):
        load_run(tmp_path)


def test_other_schema_version_is_refused(tmp_path):
    (tmp_path / RESULTS_FILE).write_text(json.dumps({"kind": "header", "schema_version": 0}) + "\n")
    with pytest.raises(UserError, match="schema version 0"):
        load_run(tmp_path)


def test_not_a_results_file(tmp_path):
    (tmp_path / RESULTS_FILE).write_text(json.dumps({"hello": 1}) + "\n")
    with pytest.raises(UserError, match="no header"):
        load_run(tmp_path)
    with pytest.raises(UserError, match="no results"):
        load_run(tmp_path / "missing")


def test_create_refuses_to_overwrite(tmp_path):
    create_run(tmp_path, header())
    with pytest.raises(UserError, match="--resume"):
        create_run(tmp_path, header())


def test_trial_key_separates_budgets_versions_and_devices():
    h = header()
    a = trial(128)
    assert trial_key(h, a) == trial_key(h, trial(128))
    other_budget = TrialResult(**{**a.__dict__, "budget_bytes": 2 * 10**9})
    other_versions = TrialResult(**{**a.__dict__, "versions": {"jax": "0.9.1"}})
    other_gpu = TrialResult(**{**a.__dict__, "gpu_name": "NVIDIA H100"})
    assert len({trial_key(h, r) for r in (a, other_budget, other_versions, other_gpu)}) == 4


def test_appending_after_a_cut_off_line_keeps_the_file_readable(tmp_path):
    create_run(tmp_path, header())
    append_result(tmp_path, trial(128))
    with open(tmp_path / RESULTS_FILE, "a") as handle:
        handle.write('{"kind": "trial", "status": "ok", "num_en')  # the write a crash cut
    append_result(tmp_path, trial(256))  # what --resume does next
    append_result(tmp_path, trial(512))
    run = load_run(tmp_path)
    assert [r.num_envs for r in run.results] == [128, 256, 512] and run.warnings == ()


def test_unwritable_run_directory_is_a_user_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot write results"):
        create_run(blocker, header())


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path):
    import os

    lock = create_run(tmp_path, header())
    with pytest.raises(UserError, match=f"PID {os.getpid()}"):
        lock_run(tmp_path)
    lock.release()
    lock_run(tmp_path).release()  # the kernel lock went with the descriptor


def test_links_in_a_run_directory_never_redirect_a_write(tmp_path):
    """Found re-running the external fuzz corpus: a run directory (copied, shared) whose
    .lock is a link made `sweep --resume` truncate the link's target and write a PID in it;
    a linked results.jsonl would have its trials appended to another file."""
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    run = tmp_path / "run"
    create_run(run, header()).release()
    (run / LOCK_FILE).unlink()
    (run / LOCK_FILE).symlink_to(outside)
    with pytest.raises(UserError, match=r"\.lock is a symbolic link") as caught:
        lock_run(run)
    assert "\n" not in str(caught.value) and outside.read_text() == "keep me"
    (run / LOCK_FILE).unlink()
    (run / LOCK_FILE).symlink_to(tmp_path / "dangling")  # O_CREAT would make the target
    with pytest.raises(UserError, match="symbolic link"):
        lock_run(run)
    assert not (tmp_path / "dangling").exists()
    (run / LOCK_FILE).unlink()

    other = tmp_path / "other"
    create_run(other, header()).release()
    (run / RESULTS_FILE).unlink()
    (run / RESULTS_FILE).symlink_to(other / RESULTS_FILE)
    before = (other / RESULTS_FILE).read_text()
    assert load_run(run).header.profile_name == "quick"  # reading through a link is fine
    with pytest.raises(UserError, match="results.jsonl is a symbolic link"):
        lock_run(run)
    assert (other / RESULTS_FILE).read_text() == before and not (run / LOCK_FILE).exists()

    fresh = tmp_path / "fresh"  # --out a folder holding a dangling results link
    fresh.mkdir()
    (fresh / RESULTS_FILE).symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(UserError, match="symbolic link"):
        create_run(fresh, header())
    assert not (tmp_path / "elsewhere.jsonl").exists()


def test_a_lock_file_that_is_not_a_file_is_refused(tmp_path):
    import os

    create_run(tmp_path, header()).release()
    (tmp_path / LOCK_FILE).unlink()
    os.mkfifo(tmp_path / LOCK_FILE)
    with pytest.raises(UserError, match="not a regular file"):
        lock_run(tmp_path)


def test_find_runs_reads_a_run_or_a_parent_of_runs(tmp_path):
    from vramtune.results.store import find_runs

    for card in ("H100", "A100"):
        ray = SweepSettings(executor=ExecutorKind.RAY, gpu_type=card)
        create_run(tmp_path / "mixed" / card, header(search=ray))
    (tmp_path / "mixed" / "configs").mkdir()  # not a run: ignored
    assert find_runs(tmp_path / "mixed" / "A100") == [tmp_path / "mixed" / "A100"]
    assert find_runs(tmp_path / "mixed") == [tmp_path / "mixed" / "A100",
                                             tmp_path / "mixed" / "H100"]
    assert load_run(tmp_path / "mixed" / "H100").header.card == "H100"
    assert header().card == "AMD EPYC"  # no Ray type: the device
    with pytest.raises(UserError, match="directory of such runs"):
        find_runs(tmp_path / "mixed" / "configs")


def test_a_dotted_path_makes_only_the_directory_it_names(tmp_path):
    """`--out ../../x/..` names the folder above x: x itself must not be made on the way."""
    create_run(tmp_path / "run" / "x" / "..", header()).release()
    assert (tmp_path / "run" / "results.jsonl").is_file()
    assert not (tmp_path / "run" / "x").exists()


def _with_header(tmp_path, **fields):
    create_run(tmp_path, header())
    path = tmp_path / RESULTS_FILE
    head = json.loads(path.read_text().splitlines()[0])
    for key, value in fields.items():
        target = head
        *parents, last = key.split(".")
        for p in parents:
            target = target.setdefault(p, {})
        target[last] = value
    path.write_text(json.dumps(head) + "\n")
    return path


@pytest.mark.parametrize(("key", "value"), [
    ("profile_name", "q\x1b]0;TITLE\x07x"), ("gpu_name", "\x1b[31mRED"),
    ("machine.cpu", "CPU\x1b[2J"), ("versions.jax", "0.9\n2"), ("profile_name", "a\nb")])
def test_a_header_name_with_control_characters_is_refused(tmp_path, key, value):
    """A terminal acts on them (colours, a new window title), YAML refuses them, and a line
    break split the one-line error that named the profile: refused where read."""
    _with_header(tmp_path, **{key: value})
    with pytest.raises(UserError, match="without control characters") as caught:
        load_run(tmp_path)
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)


@pytest.mark.parametrize(("key", "value"), [
    ("devices", "abc"), ("devices", [1]), ("devices", -3), ("search", "bogus"),
    ("cache", [1]), ("executor", "slurm"), ("speed_margin", "abc"), ("speed_margin", 1.5),
    ("gpu_type", "A\nB")])
def test_every_search_field_a_resume_reads_is_checked_in_the_header(tmp_path, key, value):
    _with_header(tmp_path, **{f"search.{key}": value})
    with pytest.raises(UserError, match=f"search.{key} must be"):
        load_run(tmp_path)


@pytest.mark.parametrize("method", list(SearchMethod))
@pytest.mark.parametrize("cache", list(CacheMode))
@pytest.mark.parametrize("executor", list(ExecutorKind))
def test_every_search_setting_the_tuner_writes_reads_back(tmp_path, method, cache, executor):
    settings = SweepSettings(start=64, max_envs=512, refine=2, objective=Objective.KNEE,
                             confirm=False, confirm_steps=40, devices=2, search=method,
                             parallel=3, executor=executor, cache=cache, speed_margin=0.05,
                             ray_address="10.0.0.1:6379" if executor is ExecutorKind.RAY else None,
                             gpu_type="A100" if executor is ExecutorKind.RAY else None,
                             parallel_asked="auto")
    create_run(tmp_path, header(search=settings))
    assert load_run(tmp_path).header.search == settings


def test_a_trial_line_with_a_time_that_is_not_one_is_skipped_with_a_warning(tmp_path):
    create_run(tmp_path, header())
    append_result(tmp_path, trial(128))
    with open(tmp_path / RESULTS_FILE, "a") as handle:
        handle.write(json.dumps({"kind": "trial", **trial(256).to_dict(),
                                 "timestamp": "yesterday"}) + "\n")
    run = load_run(tmp_path)
    assert [r.num_envs for r in run.results] == [128]
    assert "timestamp must be an ISO 8601 time" in run.warnings[0]


def test_a_whole_last_line_without_its_line_break_is_kept_when_appending(tmp_path):
    """An editor that adds no final line break: the reader used that record, so the next
    write gives it its line break rather than cutting it off as a crash's half line."""
    create_run(tmp_path, header())
    append_result(tmp_path, trial(128))
    path = tmp_path / RESULTS_FILE
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert [r.num_envs for r in load_run(tmp_path).results] == [128]
    append_result(tmp_path, trial(256))
    assert [r.num_envs for r in load_run(tmp_path).results] == [128, 256]


def test_a_cut_off_line_longer_than_a_block_is_cut_back_to_the_last_whole_line(tmp_path):
    create_run(tmp_path, header())
    append_result(tmp_path, trial(128))
    with open(tmp_path / RESULTS_FILE, "a") as handle:
        handle.write('{"kind": "trial", "notes": ["' + "x" * (3 << 20))
    append_result(tmp_path, trial(256))
    assert [r.num_envs for r in load_run(tmp_path).results] == [128, 256]


def test_a_lone_surrogate_in_a_header_is_named_as_such(tmp_path):
    _with_header(tmp_path, gpu_name="\ud800")
    with pytest.raises(UserError, match="not valid Unicode"):
        load_run(tmp_path)


def test_a_folder_of_runs_given_as_a_run_names_one_of_them(tmp_path):
    from vramtune.results.store import RESULTS_FILE, results_path

    for name in ("b", "a"):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / RESULTS_FILE).write_text("")
    (tmp_path / "runs" / "not-a-run").mkdir()
    with pytest.raises(UserError, match=r"it holds 2 runs one level down: name one, such as "
                                        + str(tmp_path / "runs" / "a")):
        results_path(tmp_path / "runs")
    with pytest.raises(UserError) as plain:
        results_path(tmp_path / "runs" / "not-a-run")
    assert "one level down" not in str(plain.value)

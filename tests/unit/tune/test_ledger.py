import pytest

from vramtune.errors import UserError
from vramtune.records import Purpose, Status, TrialResult
from vramtune.tune.ledger import (
    GB,
    ROLES,
    fit_roles,
    ledgers,
    predict_cards,
    size_ledger,
)

MiB = 2**20
FIXED = {"ledger_params_bytes": 1_588_236, "ledger_optimizer_bytes": 3_176_476,
         "ledger_normalizer_bytes": 36, "ledger_eval_state_bytes": 1_611_312,
         "ledger_keys_bytes": 16, "ledger_epoch_outputs_bytes": 864,
         "ledger_eval_temp_bytes": 267_396}


def trial(n, *, peak=None, purpose=Purpose.SEARCH, status=Status.OK, backend="cpu", **extra):
    """quick's ledger as a CPU trial counts it: 164 B of env state and 248,200 B of epoch
    temporaries per env, 2,400 B of rollout per env."""
    figures = {**FIXED, "ledger_env_state_bytes": 164 * n,
               "ledger_epoch_temp_bytes": 248_200 * n + 9_000, "ledger_rollout_bytes": 2_400 * n}
    peak = peak if peak is not None else 900 * MiB + 240_000 * n
    return TrialResult(status=status, profile="quick", profile_hash="0" * 16, num_envs=n,
                       backend=backend, purpose=purpose, host_peak_data_bytes=peak,
                       host_peak_rss_bytes=peak, **{**figures, **extra})


def test_the_parts_and_the_unexplained_part_add_up_to_the_measured_peak():
    row = size_ledger(trial(128))
    # the epoch's temporaries and outputs, or the evaluation's, never both: the larger
    held = sum(line.bytes for line in row.lines if line.part_of is None and line.field not in
               ("ledger_epoch_temp_bytes", "ledger_epoch_outputs_bytes", "ledger_eval_temp_bytes"))
    parts = held + 248_200 * 128 + 9_000 + 864
    assert row.parts_bytes == parts and row.unexplained_bytes == row.peak_bytes - parts
    assert row.figures()["transient_bytes"] == 248_200 * 128 + 9_000 + 864
    assert row.peak_label == "data segment"
    rollout = next(line for line in row.lines if line.field == "ledger_rollout_bytes")
    assert rollout.part_of == "ledger_epoch_temp_bytes"  # inside the temp, never added to it


def test_a_role_not_counted_stays_in_the_unexplained_part_which_says_so():
    from vramtune.tune.ledger import shown_lines

    full = size_ledger(trial(128))
    row = size_ledger(trial(128, ledger_eval_temp_bytes=None, ledger_eval_state_bytes=None))
    assert row.uncounted == ("eval state, params copy", "XLA temp: eval")  # run_evals off
    assert row.parts_bytes + row.unexplained_bytes == row.peak_bytes
    assert row.unexplained_bytes > full.unexplained_bytes  # it holds what was not counted
    label = dict((f, r) for f, r, _ in shown_lines(row))["unexplained_bytes"]
    assert label == "unexplained (with eval state, params copy, XLA temp: eval: not counted)"
    damaged = size_ledger(trial(128, ledger_params_bytes=-4))  # a damaged results file
    assert damaged.lines[0].bytes is None and "params (policy, value)" in damaged.uncounted
    nothing = {f: None for f, _ in ROLES}
    assert size_ledger(trial(128, **nothing)).unexplained_bytes is None  # nothing counted


def test_one_ledger_per_size_from_its_search_trial_with_the_spread_of_its_runs():
    results = [trial(256, peak=1000 * MiB, purpose=Purpose.CONFIRM),
               trial(256, peak=990 * MiB), trial(64), trial(512, status=Status.OOM),
               TrialResult(status=Status.OK, profile="quick", profile_hash="0" * 16,
                           num_envs=1024, host_peak_data_bytes=GB)]  # no ledger (older run)
    rows = ledgers(results)
    assert [r.num_envs for r in rows] == [64, 256]
    assert rows[1].peak_bytes == 990 * MiB  # the search trial's
    assert rows[1].card_spread_bytes == 10 * MiB and rows[0].card_spread_bytes is None


def test_doubling_num_envs_doubles_the_per_env_parts_and_keeps_the_fixed_ones():
    fits = {f.field: f for f in fit_roles(ledgers([trial(64), trial(128), trial(256)]))}
    assert fits["ledger_env_state_bytes"].per_env_bytes == pytest.approx(164)
    assert fits["ledger_env_state_bytes"].fixed_bytes == pytest.approx(0, abs=1e-6)
    assert fits["ledger_epoch_temp_bytes"].fixed_bytes == pytest.approx(9_000)
    for field, _ in ROLES:
        if field in FIXED:
            assert fits[field].per_env_bytes == pytest.approx(0, abs=1e-9), field
            assert fits[field].fixed_bytes == pytest.approx(FIXED[field]), field
    assert fits["peak_bytes"].residual_bytes == pytest.approx(0, abs=1e-3)  # three sizes


def test_a_line_through_two_sizes_has_no_residual_to_show():
    fits = {f.field: f for f in fit_roles(ledgers([trial(64), trial(128)]))}
    assert fits["peak_bytes"].per_env_bytes == pytest.approx(240_000)
    assert fits["peak_bytes"].residual_bytes is None
    one = {f.field: f for f in fit_roles(ledgers([trial(64)]))}
    assert one["peak_bytes"].per_env_bytes is None  # nothing to fit


def test_cards_are_solved_from_the_peak_s_line_and_rounded_to_a_valid_size():
    (card,) = fit_roles(ledgers([trial(64), trial(128), trial(256, peak=900 * MiB
                                                                  + 240_000 * 256 + MiB)]))[-1:]
    assert card.field == "card_peak_bytes" and card.residual_bytes and card.residual_bytes > 0
    (eight,) = predict_cards(card, 0.1, lambda n: n - n % 64, 256, cards_gb=(8,))
    line = 8 * GB * 0.9
    expected = (line - card.fixed_bytes) / card.per_env_bytes
    assert eight.num_envs == int(expected) - int(expected) % 64
    assert eight.low_num_envs <= eight.num_envs <= eight.high_num_envs
    assert eight.times_measured == eight.num_envs / 256 and not eight.capped
    (tiny,) = predict_cards(card, 0.1, lambda n: n, 256, cards_gb=(0,))
    assert tiny.num_envs is None  # not even one env: no size, never a negative one


def test_explain_needs_a_ledger_and_predicts_only_with_two_sizes(tmp_path):
    from vramtune.results.store import RunHeader, append_result, create_run, load_run
    from vramtune.tune.ledger import explain_run
    from vramtune.workload.profile import load_profile

    quick = load_profile("quick")
    header = RunHeader("quick", quick.hash, quick.to_dict(), int(2e9), 0.1, {}, {})
    create_run(tmp_path / "old", header).release()
    append_result(tmp_path / "old", trial(64, ledger_params_bytes=None,
                                          ledger_epoch_temp_bytes=None))
    with pytest.raises(UserError, match="no trial in this run counted"):
        explain_run(load_run(tmp_path / "old"), None, 0.1)
    create_run(tmp_path / "one", header).release()
    append_result(tmp_path / "one", trial(64))
    assert explain_run(load_run(tmp_path / "one"), None, 0.1).num_envs == 64
    with pytest.raises(UserError, match="not enough to predict"):
        explain_run(load_run(tmp_path / "one"), 128, 0.1)
    append_result(tmp_path / "one", trial(256))
    expl = explain_run(load_run(tmp_path / "one"), 128, 0.1)
    assert expl.predicted and dict((f, b) for f, _, b in expl.shown)[
        "ledger_env_state_bytes"] == 164 * 128
    assert all("(predicted)" in role for _, role, _ in expl.shown)


def test_the_phases_say_which_part_of_the_run_set_the_peak():
    row = size_ledger(trial(128, ledger_peak_before_epoch_compile_bytes=700 * MiB,
                            ledger_peak_after_epoch_compile_bytes=850 * MiB,
                            peak=1000 * MiB))
    assert row.phases_words() == ("the data segment peak stood at 700.00 MiB before the epoch's "
                                  "compile (imports, env, init, first evaluation), 850.00 MiB "
                                  "after it, 1000.00 MiB at the end of training")
    assert size_ledger(trial(128)).phases_words() is None  # not read: nothing said


def test_a_prediction_never_passes_the_most_num_envs_vramtune_takes():
    from vramtune.schema import MAX_NUM_ENVS
    from vramtune.tune.ledger import RoleFit

    flat = RoleFit("card_peak_bytes", "a card must hold", 1e-3, 900 * MiB, None, 2)
    (card,) = predict_cards(flat, 0.1, lambda n: n, 512, cards_gb=(8,))
    assert card.num_envs == MAX_NUM_ENVS and card.capped and card.low_num_envs is None

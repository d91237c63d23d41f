"""Growth over a run: a configured run's epochs priced from what its trials' epochs stack."""

import pytest

from tests.unit.tune.test_ledger import MiB, trial
from vramtune.errors import UserError
from vramtune.records import Purpose, Status
from vramtune.tune.growth import (
    RunLength,
    check_run_length,
    eval_share,
    predict_growth,
    run_epoch_steps,
)
from vramtune.tune.ledger import size_ledger
from vramtune.workload.profile import load_profile

QUICK = load_profile("quick")
PER_STEP = 12_288  # 12 loss metrics x 8 updates x 32 minibatches x 4 B
STEP = 16 * 32 * 10  # env steps per training step at batch 16 x 32 minibatches x unroll 10


def length(num_timesteps, num_evals):
    """A run whose num_evals the user gave."""
    return RunLength(num_timesteps, num_evals, evals_assumed=False)


RUN = length(10**9, 1)


def run_of(n=64, steps=2, peak=1_000 * MiB, **extra):
    figures = {"ledger_epoch_steps": steps, "ledger_stacked_bytes_per_step": PER_STEP, **extra}
    return trial(n, peak=peak, batch_size=16, num_minibatches=32, unroll_length=10, **figures)


def test_the_epoch_is_brax_s_count_of_training_steps():
    # ceil(num_timesteps / (max(num_evals - 1, 1) x env steps per training step x resets))
    assert run_epoch_steps(10**9, 1, STEP, 1) == 195_313  # brax's default: one epoch
    assert run_epoch_steps(10**9, 2, STEP, 1) == 195_313  # one initial evaluation, one epoch
    assert run_epoch_steps(10**9, 11, STEP, 1) == 19_532
    assert run_epoch_steps(10**9, 11, STEP, 4) == 4_883


def test_a_run_whose_epochs_stack_past_the_line_is_predicted_over_it_with_the_fix():
    g = predict_growth([run_of()], 64, QUICK, RUN, int(1.17e9))
    assert g.run_epoch_steps == 195_313 and g.trial_epoch_steps == 2
    assert g.growth_bytes == PER_STEP * (195_313 - 2)
    assert g.predicted_peak_bytes == 1_000 * MiB + g.growth_bytes and g.crosses
    # the fewest evaluations whose epochs keep the peak under the line, and one fewer does not
    fits = predict_growth([run_of()], 64, QUICK, length(10**9, g.fewest_evals), int(1.17e9))
    fewer = predict_growth([run_of()], 64, QUICK, length(10**9, g.fewest_evals - 1), int(1.17e9))
    assert not fits.crosses and fewer.crosses
    assert "will not fit" in g.warning() and f"at least {g.fewest_evals}" in g.warning()
    assert "(predicted)" in g.words()


def test_a_short_run_adds_nothing_and_says_no_warning():
    g = predict_growth([run_of()], 64, QUICK, length(2 * STEP, 1), int(1.17e9))
    assert g.growth_bytes == 0 and g.predicted_peak_bytes == 1_000 * MiB
    assert g.warning() is None and "under the line" in g.words()
    uncapped = predict_growth([run_of()], 64, QUICK, RUN, None)
    assert uncapped.predicted_peak_bytes > 1_000 * MiB and not uncapped.crosses


def test_the_highest_prediction_over_the_size_s_runs_counts():
    # a confirming run's epochs were longer: its peak holds more of the stack already
    runs = [run_of(), run_of(steps=400, peak=1_010 * MiB, purpose=Purpose.CONFIRM),
            run_of(peak=1_900 * MiB, status=Status.OOM)]  # not ok: not a peak to add to
    g = predict_growth(runs, 64, QUICK, length(400 * STEP, 1), None)
    assert g.trial_epoch_steps == 400 and g.predicted_peak_bytes == 1_010 * MiB
    assert predict_growth(runs, 128, QUICK, length(400 * STEP, 1), None) is None  # not measured


def test_runs_from_before_the_count_or_damaged_say_not_read():
    g = predict_growth([run_of(ledger_stacked_bytes_per_step=None),
                        run_of(ledger_epoch_steps=-1)], 64, QUICK, RUN, int(1e9))
    assert g.predicted_peak_bytes is None and not g.crosses and g.warning() is None
    assert "not read" in g.words()


def test_an_evaluation_holding_more_than_the_training_is_flagged():
    profile = load_profile("quick")
    big = size_ledger(run_of(ledger_eval_temp_bytes=80 * MiB)).figures()
    share = eval_share(big, 64, profile)
    assert share.dominates and "lower num_eval_envs" in share.warning()
    assert "(8% of the peak;" in share.warning()
    # more than the training, but a few MiB of a CPU's ~1 GB peak: not worth a warning
    few = eval_share(size_ledger(run_of(ledger_eval_temp_bytes=34 * MiB)).figures(), 64, profile)
    assert few.eval_bytes > few.training_bytes and not few.dominates
    assert share.num_eval_envs == 128  # brax's default: quick does not set it
    small = eval_share(size_ledger(run_of()).figures(), 64, profile)
    assert not small.dominates and small.warning() is None
    assert eval_share(size_ledger(run_of(ledger_eval_temp_bytes=None)).figures(), 64,
                      profile) is None  # no evaluation ran: nothing to hold against


@pytest.mark.parametrize("timesteps, evals, words", [
    (None, 3, "give --num-timesteps too"), (0, None, "--num-timesteps must be"),
    (10**6, 0, "--num-evals must be"), (True, None, "--num-timesteps must be")])
def test_bad_run_lengths_are_refused(timesteps, evals, words):
    with pytest.raises(UserError, match=words):
        check_run_length(timesteps, evals)


def test_a_run_length_defaults_to_brax_s_one_evaluation():
    assert check_run_length(None, None) is None
    assert check_run_length(10**6, None) == RunLength(10**6, 1, evals_assumed=True)
    assert check_run_length(10**6, 5) == length(10**6, 5)
    assert "assumed: brax's default" in RunLength(10**6).words()


def test_a_size_whose_measured_run_is_over_the_line_gets_no_num_evals_that_cannot_help():
    line = 1_000 * MiB - 100  # the trial itself peaked 100 B over it
    g = predict_growth([run_of()], 64, QUICK, RUN, line)
    assert g.crosses and g.fewest_evals is None
    assert "whatever num_evals" in g.warning() and "at least" not in g.warning()


def test_every_run_of_the_size_stays_under_at_the_fewest_evals():
    # the trial is under the line and predicts the most at this length; a confirming run of
    # the size peaked over the line already: no num_evals fits
    runs = [run_of(), run_of(steps=400, peak=1_003 * MiB, purpose=Purpose.CONFIRM)]
    g = predict_growth(runs, 64, QUICK, RUN, 1_002 * MiB)
    assert g.trial_epoch_steps == 2 and g.crosses and g.fewest_evals is None


def test_on_gpu_the_process_figure_the_line_holds_is_the_one_grown():
    from vramtune.records import TrialResult
    r = TrialResult(status=Status.OK, profile="quick", profile_hash="0" * 16, num_envs=64,
                    backend="gpu", batch_size=16, num_minibatches=32, unroll_length=10,
                    jax_peak_pool_bytes=700 * MiB, nvml_process_peak_bytes=1_000 * MiB,
                    ledger_epoch_steps=2, ledger_stacked_bytes_per_step=PER_STEP)
    g = predict_growth([r], 64, QUICK, length(STEP * (2 + 200 * MiB // PER_STEP), 1), 1_100 * MiB)
    assert g.measured_peak_bytes == 1_000 * MiB and g.crosses  # the pool alone read "under"


def test_a_per_step_figure_past_the_trial_s_own_peak_is_damage():
    g = predict_growth([run_of(ledger_stacked_bytes_per_step=1 << 60)], 64, QUICK, RUN, int(1e9))
    assert g.predicted_peak_bytes is None and "not read" in g.words()


def test_an_uncapped_sweep_says_there_is_no_line():
    g = predict_growth([run_of()], 64, QUICK, RUN, None)
    assert "no line" in g.words() and g.warning() is None


def test_a_trial_whose_memory_was_still_growing_is_said_before_the_run(tmp_path):
    from vramtune.results.store import RunHeader, append_result, create_run, load_run
    from vramtune.tune.ledger import explain_run

    header = RunHeader("quick", QUICK.hash, QUICK.to_dict(), int(1.3e9), 0.1, {}, {})
    create_run(tmp_path / "run", header).release()
    append_result(tmp_path / "run", run_of(64, memory_steady=False))
    append_result(tmp_path / "run", run_of(128, memory_steady=True))
    run = load_run(tmp_path / "run")
    growing = explain_run(run, 64, 0.1)
    assert any("memory still growing" in w for w in growing.warnings)
    assert not any("memory still growing" in w for w in explain_run(run, 128, 0.1).warnings)

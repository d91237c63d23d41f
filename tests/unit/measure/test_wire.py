from __future__ import annotations

import pytest

from vramtune.measure.wire import CONFIRM_EVALS, MIN_EPOCH_STEPS, confirm_epoch_steps


@pytest.mark.parametrize(("training_steps", "per_epoch"), [
    (1, 2), (20, 2), (25, 2),  # never one step an epoch: it peaks below the user's run
    (50, 2), (80, 2),  # the usual ceilings (10 x a two-step trial's 8 steps): one every 2
    (81, 3), (100, 3), (250, 7),  # CONFIRM_EVALS reports over the longest run
])
def test_a_confirming_run_reports_every_few_steps_and_never_every_step(training_steps,
                                                                       per_epoch):
    assert confirm_epoch_steps(training_steps) == per_epoch
    assert confirm_epoch_steps(training_steps) >= MIN_EPOCH_STEPS
    epochs = -(-training_steps // per_epoch)
    assert epochs <= CONFIRM_EVALS
    assert epochs * per_epoch - training_steps < per_epoch  # rounded up by less than an epoch

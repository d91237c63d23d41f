"""The Ray executor's worker-side environment and the one private Ray API it leans on.
(Sweeps on a real Ray cluster: tests/integration/test_ray.py.)"""

from __future__ import annotations

import inspect
import os

import pytest

from vramtune.measure.ray_executor import _trial_environment


def test_the_trial_child_loses_rays_omp_setting_unless_the_user_set_it(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what a Ray worker has when the user set none
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    with _trial_environment({"omp_num_threads": None}):
        assert "OMP_NUM_THREADS" not in os.environ
        assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # CUDA ids = NVML's = Ray's
    assert os.environ["OMP_NUM_THREADS"] == "1" and "CUDA_DEVICE_ORDER" not in os.environ
    with _trial_environment({"omp_num_threads": "4"}):
        assert os.environ["OMP_NUM_THREADS"] == "4"


def test_rays_driver_message_printer_is_where_the_executor_expects_it():
    """Ray prints raylet messages to the driver's stdout through this module global, looked
    up at each call; the executor reroutes them to the run's ray.log. A Ray upgrade that
    moves it must fail here, not spill 'worker died' dumps into the sweep's output."""
    pytest.importorskip("ray")
    import ray._private.worker as worker

    assert list(inspect.signature(worker.print_to_stdstream).parameters)[0] == "data"
    assert "print_to_stdstream" in inspect.getsource(worker.listen_error_messages)

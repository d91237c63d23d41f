import ctypes.util

import pytest

from vramtune.measure import cuda_probe


def test_no_driver_gives_none_not_an_error():
    assert cuda_probe.probe("libcuda-that-does-not-exist.so.1") is None


@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None, reason="a CUDA driver is here")
def test_this_machine_has_no_driver():
    assert cuda_probe.probe() is None

"""The fake pynvml, injected at the NVML boundary (``import pynvml``) for these tests only."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

import pytest

from tests.fakes import fake_pynvml
from tests.fakes.fake_pynvml import FakeSystem


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Callable[[FakeSystem], ModuleType]:
    """``fake_nvml(system)`` makes ``import pynvml`` return a fake bound to ``system``, with
    CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER cleared (tests set what they need)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)

    def inject(system: FakeSystem) -> ModuleType:
        module = fake_pynvml.build(system)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return inject

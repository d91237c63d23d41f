"""The device cache: an optimisation, never a reason for a run to end."""

import json

from vramtune.measure.overhead import remember


def test_the_device_cache_is_written_and_read_back(tmp_path):
    cache = tmp_path / "vramtune" / "device-overhead.json"
    assert remember(cache, {"H100|80|580|0.9": {"overhead_bytes": 1}})
    assert json.loads(cache.read_text()) == {"H100|80|580|0.9": {"overhead_bytes": 1}}


def test_a_home_that_cannot_be_written_is_no_error(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    assert not remember(blocker / "vramtune" / "device-overhead.json", {"k": {}})
    assert blocker.read_text() == "a file where the cache folder would go"

"""YAML as vramtune writes it: one dumper for every file it emits (configs, profiles).

Block mappings, one setting a line (easy to diff); lists of scalars inline
(``[256, 256]``). Files are built as data and dumped, never concatenated, so no value can
inject a key.
"""

from __future__ import annotations

from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    """SafeDumper: plain data only, no Python tags."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(v, dict | list) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def dump(data: dict[str, Any], *, width: int = 100) -> str:
    """``data`` as block YAML in insertion order."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     width=width, allow_unicode=True)

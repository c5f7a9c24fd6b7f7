# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Merging nested mappings the way Helm merges values files and containerd 2.x merges
its imported configuration files (``mergo`` with override): tables key by key, any other
value (a list included) replaced."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged into a copy of ``base``: mappings merge key by key, everything else
    (lists included) is replaced. Neither input is changed."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out

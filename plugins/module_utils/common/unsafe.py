# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Values handed to Ansible as variables (extra variables, inventory variables) marked as
data: Ansible templates any string of a variable it loads from a file or an inventory
source, so a ``{{ lookup('pipe', ...) }}`` inside a value read from a file, the cluster,
the environment or a command line would run on the control host.

The marking is Ansible's own JSON form of an unsafe string, ``{"__ansible_unsafe": TEXT}``:
ansible-core 2.17 decodes it to ``AnsibleUnsafeText`` (``ansible/parsing/ajson.py``,
``AnsibleJSONDecoder.object_hook``), 2.19 to a string without trust
(``ansible/_internal/_json/_profiles/_legacy.py``, ``deserialize_unsafe``), in extra-vars
files (``-e @FILE``) and in inventory script output (``vars`` and ``_meta.hostvars``) alike.
Mapping keys stay plain strings: neither release templates the keys of a variable's
mapping. Standard library only: the lab's inventory script loads this file by path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: The keys Ansible's JSON decoders turn into a value of their own (an unsafe string, a
#: vaulted string): a mapping of the data holding one is refused, it cannot be kept as data.
RESERVED_KEYS = ("__ansible_unsafe", "__ansible_vault")

#: Nesting bound of the data (the readers of the collection refuse deeper documents first).
MAX_DEPTH = 200


class UnsafeDataError(ValueError):
    """A value cannot be handed to Ansible as data; the message names where it is."""


def mark_unsafe(value: Any, where: str = "value") -> Any:
    """``value`` with every string (at any depth, mapping keys aside) replaced by
    ``{"__ansible_unsafe": string}``; numbers, booleans and None stay; tuples become lists;
    mapping keys become strings as JSON writes them. The result is what ``json.dumps``
    writes into an extra-vars file or an inventory script's output.

    Raises UnsafeDataError naming ``where`` and the path inside it for a mapping key of
    ``RESERVED_KEYS``, a string that is not UTF-8 (undecodable bytes of a command line), a
    value of another type (bytes, a set, an object) or nesting deeper
    than ``MAX_DEPTH``.
    """
    return _mark(value, where, 0)


def _mark(value: Any, where: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise UnsafeDataError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise UnsafeDataError(
                f"{where} is not UTF-8 text ({value[:60]!r}); fix: give it as UTF-8"
            ) from None
        return {"__ansible_unsafe": str(value)}
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            name = key if isinstance(key, str) else json.dumps(key)
            if name in RESERVED_KEYS:
                raise UnsafeDataError(
                    f"{where}: key {name!r} is Ansible's own marker and cannot be passed as "
                    "data; fix: rename the key"
                )
            out[name] = _mark(item, f"{where}[{name[:60]!r}]", depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_mark(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    raise UnsafeDataError(
        f"{where} is a {type(value).__name__}, not text, a number, a boolean, a list or a "
        "mapping; fix: give it as one of those"
    )


def unsafe_json(value: Any, where: str = "value") -> str:
    """``json.dumps`` of :func:`mark_unsafe` (``value``, ``where``): the text of an extra-vars
    file or an inventory script's output. Raises UnsafeDataError as mark_unsafe does."""
    return json.dumps(mark_unsafe(value, where), ensure_ascii=True)

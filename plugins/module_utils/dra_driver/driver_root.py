# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Where NVIDIA's DRA kubelet plugin looks for the driver under its driver root
(``nvidiaDriverRoot``): the one place these lists are written.

Source: kubernetes-sigs/dra-driver-nvidia-gpu ``cmd/gpu-kubelet-plugin/root.go`` at commit
``95932046683719c43b6a0dd9613c2e5aad5d6703`` (``librarySearchPaths``, the binary search
paths of ``getNvidiaSMIPath`` and ``findFile``). The plugin tries ``<root>/<name>`` first,
then ``<root>/<dir>/<name>`` for each directory in order; a candidate counts when it
resolves (symbolic links followed) to a regular file. When none does it stops with
``error locating "<name>"``. So a driver whose ``libnvidia-ml.so.1`` lives only in
``/usr/lib`` or ``/lib`` (a layout some hosts have) is not found with driver root ``/``.
"""

from __future__ import annotations

import posixpath

__all__ = [
    "BINARY_SEARCH_DIRS",
    "LIBRARY_SEARCH_DIRS",
    "NVML_LIBRARY",
    "SMI_BINARY",
    "SOURCE",
    "SOURCE_COMMIT",
    "search_dirs",
    "search_items",
]

SOURCE = "kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/root.go"
SOURCE_COMMIT = "95932046683719c43b6a0dd9613c2e5aad5d6703"

NVML_LIBRARY = "libnvidia-ml.so.1"
SMI_BINARY = "nvidia-smi"

#: Directories under the driver root searched for ``libnvidia-ml.so.1`` after the root.
LIBRARY_SEARCH_DIRS: tuple[str, ...] = (
    "usr/lib64",
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "lib64",
    "lib/x86_64-linux-gnu",
    "lib/aarch64-linux-gnu",
)

#: Directories under the driver root searched for ``nvidia-smi`` after the root.
BINARY_SEARCH_DIRS: tuple[str, ...] = ("opt/bin", "usr/bin", "usr/sbin", "bin", "sbin")

_DIRS = {NVML_LIBRARY: LIBRARY_SEARCH_DIRS, SMI_BINARY: BINARY_SEARCH_DIRS}


def search_dirs(name: str) -> tuple[str, ...]:
    """The directories, relative to the driver root, the plugin searches for ``name``
    (``libnvidia-ml.so.1`` or ``nvidia-smi``) in order; ``""`` is the root itself. Raises
    ValueError for another name."""
    if name not in _DIRS:
        raise ValueError(
            f"{name!r} is not a file the DRA kubelet plugin looks up "
            f"(one of {', '.join(sorted(_DIRS))})"
        )
    return ("", *_DIRS[name])


def search_items(names: list[str] | tuple[str, ...]) -> list[str]:
    """Paths relative to the driver root, in the plugin's search order, of each of
    ``names``: ``["libnvidia-ml.so.1", "usr/lib64/libnvidia-ml.so.1", ...]``. Raises
    ValueError for a name the plugin does not look up."""
    return [posixpath.join(d, n) for n in names for d in search_dirs(n)]

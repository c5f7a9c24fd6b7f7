# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The kubelet plugin sockets of DRA drivers on a host, and whether anything listens on
them (module ``kubelet_plugin_sockets``).

A DRA kubelet plugin (``k8s.io/dynamic-resource-allocation/kubeletplugin``
``draplugin.go``) makes a registration socket in the kubelet's plugin registry
(``/var/lib/kubelet/plugins_registry/<driver>-reg.sock``, with rolling updates
``<driver>-<pod UID>-reg.sock``) and its service socket under
``/var/lib/kubelet/plugins/<driver>/`` (``dra.sock``). A pod that is gone can leave them
behind. Whether one is live is learnt by connecting to it, as the kubelet does: a
path-bound socket is reached through the file system from any network namespace (the
plugin pods of NVIDIA's chart run in their own), and a socket file nothing listens on
refuses the connection. Nothing is sent; the connection is closed at once.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["KUBELET_PLUGINS_DIR", "KUBELET_REGISTRY_DIR", "probe", "read_sockets"]

KUBELET_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"
KUBELET_PLUGINS_DIR = "/var/lib/kubelet/plugins"
#: At most this many sockets are probed (a registry holds a handful).
MAX_SOCKETS = 64


def probe(path: str, timeout: float) -> bool | None:
    """True when something accepts a connection on the socket ``path``, False when the
    connection is refused (nothing listens: a stale socket file), None when it cannot be
    told (no permission, timed out, another error)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(max(timeout, 0.01))
    try:
        s.connect(path)
        return True
    except ConnectionRefusedError:
        return False
    except OSError as exc:
        return False if exc.errno in (errno.ECONNREFUSED, errno.ENOENT) else None
    finally:
        s.close()


def _sockets_in(directory: str) -> list[str]:
    """Socket files directly in ``directory`` (links not followed); [] when it cannot be
    read."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    out = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                out.append(path)
        except OSError:
            continue
    return out


def _candidates(drivers: Iterable[str], registry: str, plugins: str) -> list[tuple[str, str]]:
    """(driver, socket path) of each driver's registration and service sockets."""
    out = []
    registered = _sockets_in(registry)
    for driver in drivers:
        out += [(driver, p) for p in registered if os.path.basename(p).startswith(f"{driver}-")]
        out += [(driver, p) for p in _sockets_in(os.path.join(plugins, driver))]
    return out


def read_sockets(
    drivers: Iterable[str],
    registry: str = KUBELET_REGISTRY_DIR,
    plugins: str = KUBELET_PLUGINS_DIR,
    deadline_s: float = 10.0,
) -> dict[str, Any]:
    """``{read, sockets: [{driver, path, listening}], truncated}`` for the sockets of
    ``drivers`` (names such as ``gpu.nvidia.com``; a name with ``/`` or starting with ``.``
    is left out) in ``registry`` and ``plugins``. ``listening`` as :func:`probe`; one
    deadline of ``deadline_s`` seconds for all the probes, the ones past it None."""
    safe = [d for d in drivers if d and "/" not in d and not d.startswith(".")]
    found = _candidates(safe, registry, plugins)
    end = time.monotonic() + deadline_s
    sockets = []
    for driver, path in found[:MAX_SOCKETS]:
        left = end - time.monotonic()
        listening = probe(path, min(left, 2.0)) if left > 0 else None
        sockets.append({"driver": driver, "path": path, "listening": listening})
    return {"read": True, "sockets": sockets, "truncated": len(found) > MAX_SOCKETS}

"""``host.plugin_sockets.probe`` and ``read_sockets`` against real Unix sockets: a bound,
listening socket is live; a socket file that nothing listens on (bound once, its process
gone) refuses the connection and is stale; the module's answer feeds hosts.plugin-sockets."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import plugin_sockets as ps
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import driver_root as vdr
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import hosts as vh

pytestmark = pytest.mark.integration


def test_live_and_stale_sockets_are_told_apart() -> None:
    # a short directory: a Unix socket path has at most 107 bytes
    with tempfile.TemporaryDirectory(prefix="ps-", dir="/tmp") as tmp:
        reg, plugins = Path(tmp, "reg"), Path(tmp, "plugins", "gpu.nvidia.com")
        reg.mkdir()
        plugins.mkdir(parents=True)
        live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        live.bind(str(plugins / "dra.sock"))
        live.listen(1)
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(str(reg / "gpu.nvidia.com-reg.sock"))
        stale.close()  # the file stays, nothing listens
        try:
            assert ps.probe(str(plugins / "dra.sock"), 2.0) is True
            assert ps.probe(str(reg / "gpu.nvidia.com-reg.sock"), 2.0) is False
            out = ps.read_sockets(["gpu.nvidia.com"], str(reg), str(plugins.parent))
        finally:
            live.close()
        assert os.path.exists(reg / "gpu.nvidia.com-reg.sock")
    assert [(Path(s["path"]).name, s["listening"]) for s in out["sockets"]] == [
        ("gpu.nvidia.com-reg.sock", False),
        ("dra.sock", True),
    ]
    record = vh.normalize_host({"host": "gpu-1", "plugin_sockets": {"changed": False, **out}})
    c = vdr.plugin_sockets_check([record])
    assert c.status == "warn"
    assert "1 socket(s) of driver gpu.nvidia.com refuse connections" in c.problems[0].message

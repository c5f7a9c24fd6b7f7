"""A kubeconfig naming a port where nothing listens: the command ends at once, naming the
server (the connection is refused by this machine's network stack; no server is started,
unlike ``tests/integration/test_hostile_input_servers.py``)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet.cli import main
from tests.integration.test_hostile_input_servers import (
    assert_names_refusing_server,
    timed,
    write_kubeconfig,
)

pytestmark = pytest.mark.unit


def test_a_closed_port_is_named_at_once(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = f"http://127.0.0.1:{port}"
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server)
    argv = ["claims", "gc", "--kubeconfig", str(kubeconfig)]
    result, elapsed = timed(CliRunner().invoke, main, argv, env={"COLUMNS": "2000"})
    assert_names_refusing_server(result, server, elapsed)
    assert elapsed < 10, elapsed

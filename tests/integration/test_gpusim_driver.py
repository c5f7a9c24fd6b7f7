"""A real process holding the simulated driver's device file keeps ``gpusim driver unload``
from unloading it, found through ``/proc`` as ``fuser`` finds it; once it ends, the unload
goes through."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpufleet.lab.gpusim import admin, state

pytestmark = pytest.mark.integration

HOLD = "import sys, time\nf = open(sys.argv[1], 'rb')\nprint('open', flush=True)\ntime.sleep(60)\n"


def test_a_process_holding_the_device_file_blocks_the_unload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state.json"
    assert admin.main(["--state", str(path), "init", "--node-name", "w1"]) == 0
    device = state.device_file_path(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(device)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        comm = Path(f"/proc/{holder.pid}/comm").read_text().strip()
        capsys.readouterr()
        assert admin.main(["--state", str(path), "driver", "unload"]) == 1
        err = capsys.readouterr().err.splitlines()
        assert err[0] == "rmmod: ERROR: Module nvidia is in use"
        assert f"  process {holder.pid} ({comm}) holds {device} open" in err[1:]
        assert state.load(path).driver_loaded is True
    finally:
        holder.kill()
        holder.wait(timeout=10)
    # the holder has ended (waited for): nothing keeps the module in use
    assert admin.main(["--state", str(path), "driver", "unload"]) == 0, capsys.readouterr().err
    assert state.load(path).driver_loaded is False
    assert not state.proc_version_path(path).exists()

"""Collecting a host's GPU facts (``plugins/module_utils/host/gpu_facts.py``) through the
nvidia-smi backend, replaying real captures: an H200 host and a host with two NVLinked
H200s (driver 580.159.04), and a read-only run on a real H200. The nvidia-smi parsers
are tested in ``tests/unit/nvidia/test_smi.py``.

Expected values were read by hand from the capture files named in each test.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import gpu_facts as gq
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import gpu as ginfo
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import nvml as gnvml

from tests.unit.nvidia.gpu_captures import DATA, SINGLE, X2

_spec = importlib.util.spec_from_file_location(
    "fixture_replay", DATA / "fixture_replay_nvidia_smi.py"
)
assert _spec and _spec.loader
replay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(replay)

pytestmark = pytest.mark.unit

# ------------------------------------------------------------------ collect


def test_collect_x2_through_fixture_replay() -> None:
    host = gq.collect_host(replay.runner(X2), backend="nvidia-smi")
    assert host.warnings == []
    assert (host.backend, host.driver_version, host.cuda_driver_version) == (
        "nvidia-smi",
        "580.159.04",
        "13.0",
    )
    gpu0, gpu1 = host.gpus
    assert gpu0.nvlink_peers == [
        ginfo.NvLinkPeer(1, "GPU-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c61", "00000000:00:07.0", 18)
    ]
    assert gpu1.nvlink_peers[0].index == 0 and gpu1.nvlink_peers[0].links == 18
    assert (gpu0.nvlink_active_links, gpu1.nvlink_active_links) == (18, 18)
    assert (gpu0.compute_capability, gpu0.architecture) == ("9.0", "Hopper")
    data = gpu1.to_dict()
    assert data["driver_version_semver"] == "580.159.4"
    assert data["cuda_driver_version_semver"] == "13.0.0"
    assert data["compute_capability_semver"] == "9.0.0"
    assert json.loads(json.dumps(data)) == data


def test_collect_single_gpu_does_not_read_nvlink() -> None:
    calls: list[list[str]] = []
    run = replay.runner(SINGLE)
    host = gq.collect_host(lambda argv: calls.append(argv) or run(argv), backend="nvidia-smi")
    assert host.warnings == []
    assert [c[1:] for c in calls] == [
        ["-q", "-x"],
        [f"--query-gpu={gq.QUERY_FIELDS}", "--format=csv"],
        ["-L"],
    ]
    assert host.gpus[0].nvlink_peers == [] and host.gpus[0].nvlink_active_links is None


def test_collect_without_nvidia_smi_and_nvml_is_no_driver() -> None:
    if gnvml.load_nvml() is not None:
        pytest.skip("pynvml is importable here; this test needs a host without it")
    with pytest.raises(ginfo.NoDriverError, match="nvidia-smi is not installed"):
        gq.collect(replay.runner(SINGLE), backend="auto", nvidia_smi=None)

    def missing(argv: list[str]) -> tuple[int, str, str]:
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    with pytest.raises(ginfo.NoDriverError, match="/nonexistent/nvidia-smi not found"):
        gq.collect(missing, backend="nvidia-smi", nvidia_smi="/nonexistent/nvidia-smi")


def test_collect_nvml_backend_without_pynvml_names_the_package() -> None:
    if gnvml.load_nvml() is not None:
        pytest.skip("pynvml is importable here; this test needs a host without it")
    with pytest.raises(ginfo.GpuQueryError, match="nvidia-ml-py"):
        gq.collect(replay.runner(SINGLE), backend="nvml")


def test_collect_refuses_unknown_backend() -> None:
    with pytest.raises(ValueError, match="backend='dcgm'"):
        gq.collect(replay.runner(SINGLE), backend="dcgm")


def test_fixture_replay_refuses_uncaptured_commands() -> None:
    rc, out, err = replay.runner(SINGLE)(["nvidia-smi", "-mig", "1"])
    assert (rc, out) == (2, "")
    assert "no capture of 'nvidia-smi -mig 1'" in err


# ------------------------------------------------------------------ real H200 run


def test_fixtures_parse_like_the_real_h200_run() -> None:
    # h200-device-check.json: both backends on a real H200 (see data/gpu/README.md).
    # UUIDs and serial numbers of the fixtures are synthetic; every other field must agree.
    device = json.loads((DATA / "h200-device-check.json").read_text())
    fixtures = gq.collect_host(replay.runner(SINGLE), backend="nvidia-smi")
    expected = [g.to_dict() for g in fixtures.gpus]
    for g in expected:
        del g["uuid"], g["serial"]
    for backend in ("nvidia-smi", "nvml"):
        real = device[backend]
        assert real["backend"] == backend
        assert real["warnings"] == []
        assert (real["driver_version"], real["cuda_driver_version"]) == (
            fixtures.driver_version,
            fixtures.cuda_driver_version,
        )
        got = [{k: v for k, v in g.items() if k not in ("uuid", "serial")} for g in real["gpus"]]
        assert got == expected, backend

"""Lab planning, images and inventory without starting anything."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpufleet.lab import cluster, images

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]


def test_plan_nodes_names_and_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFLEET_LAB_NAME", "lab-x")
    monkeypatch.setenv("GPUFLEET_LAB_SUBNET", "10.89.70.0/24")
    nodes = cluster.plan_nodes(cluster.LabSpec("1.37.2", workers=3))
    assert [(n.name, n.role, n.ip) for n in nodes] == [
        ("lab-x-control-plane", "control-plane", "10.89.70.10"),
        ("lab-x-gpu-1", "gpu-worker", "10.89.70.11"),
        ("lab-x-gpu-2", "gpu-worker", "10.89.70.12"),
        ("lab-x-gpu-3", "gpu-worker", "10.89.70.13"),
    ]
    assert all(n.gpu_model == "NVIDIA H200" for n in nodes[1:])
    assert [n.gpu_path for n in nodes] == ["", "dra", "dra", "dra"]


def test_the_last_workers_form_the_device_plugin_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFLEET_LAB_NAME", "lab-x")
    spec = cluster.LabSpec("1.37.2", workers=3, device_plugin_workers=2).validated()
    assert spec.device_plugin_workers == 2
    paths = {n.name: n.gpu_path for n in cluster.plan_nodes(spec)[1:]}
    assert paths == {
        "lab-x-gpu-1": "dra",
        "lab-x-gpu-2": "device-plugin",
        "lab-x-gpu-3": "device-plugin",
    }
    every = cluster.LabSpec("1.37.2", workers=1, device_plugin_workers=1).validated()
    assert [n.gpu_path for n in cluster.plan_nodes(every)[1:]] == ["device-plugin"]


@pytest.mark.parametrize(
    "spec, words",
    [
        (cluster.LabSpec("1.29.0"), "--kubernetes-version '1.29.0' is not pinned"),
        (cluster.LabSpec("", workers=0), "--workers 0"),
        (cluster.LabSpec("", gpu_model="NVIDIA T4"), "--gpu-model 'NVIDIA T4' is not simulated"),
        (cluster.LabSpec("", gpus_per_node=9), "--gpus-per-node 9"),
        (cluster.LabSpec("", device_plugin_workers=3), "--device-plugin-workers 3: use 0 to"),
        (cluster.LabSpec("", device_plugin_workers=-1), "--device-plugin-workers -1"),
        (cluster.LabSpec("", gpu_model="b" * 10_000), "(10000 characters) is not simulated"),
        (cluster.LabSpec("9" * 10_000), "(10000 characters) is not pinned"),
    ],
)
def test_bad_lab_options_are_refused_naming_the_option(spec: cluster.LabSpec, words: str) -> None:
    with pytest.raises(cluster.LabError) as e:
        spec.validated()
    assert words in str(e.value)
    assert len(str(e.value)) < 2_000


@pytest.mark.parametrize("model", ["NVIDIA B200", "NVIDIA GH200 144G HBM3e", "NVIDIA L4"])
def test_every_model_the_gpu_simulator_knows_is_a_lab_model(model: str) -> None:
    from gpufleet.lab.gpusim import admin

    assert cluster.LabSpec("", gpu_model=model).validated().gpu_model == model
    # and the simulator really builds it
    assert admin.build_state(model, 1, "n").gpus[0].name == model


def test_default_release_is_filled_in() -> None:
    from gpufleet.build import release_pins

    assert (
        cluster.LabSpec("").validated().kubernetes_version == release_pins.load_releases().default
    )


@pytest.mark.parametrize("name", ["Lab", "lab_x", "-lab", "x" * 40])
def test_lab_name_must_fit_node_names(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("GPUFLEET_LAB_NAME", name)
    with pytest.raises(cluster.LabError, match="GPUFLEET_LAB_NAME"):
        cluster.lab_name()


def test_lab_subnet_must_be_a_24_or_larger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFLEET_LAB_SUBNET", "10.89.70.0/28")
    with pytest.raises(cluster.LabError, match="/24"):
        cluster.lab_subnet()


def test_image_archive_is_what_ctr_import_reads(tmp_path: Path) -> None:
    binary = tmp_path / "tool"
    binary.write_bytes(b"\x7fELF fake static binary")
    spec = images.ImageSpec(
        ref="registry.example/tool:v1",
        files=(images.ImageFile(path="usr/local/bin/tool", source=binary),),
        entrypoint=("/usr/local/bin/tool",),
    )
    out = images.build_archive(spec, tmp_path / "tool.tar")
    with tarfile.open(out) as archive:
        manifest = json.loads(archive.extractfile("manifest.json").read())
        (entry,) = manifest
        assert entry["RepoTags"] == ["registry.example/tool:v1"]
        config = json.loads(archive.extractfile(entry["Config"]).read())
        layer_bytes = archive.extractfile(entry["Layers"][0]).read()
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer_bytes).hexdigest()]
    assert config["config"]["Entrypoint"] == ["/usr/local/bin/tool"]
    with tarfile.open(fileobj=__import__("io").BytesIO(layer_bytes)) as layer:
        member = layer.getmember("usr/local/bin/tool")
        assert member.mode == 0o755
        assert layer.extractfile(member).read() == binary.read_bytes()
        assert layer.getmember("usr/local/bin").isdir()
    # the digest (and so the cached name) changes with the content
    binary.write_bytes(b"\x7fELF another build")
    assert images.ImageSpec(ref=spec.ref, files=spec.files, entrypoint=spec.entrypoint).digest()


def test_missing_binary_is_named(tmp_path: Path) -> None:
    spec = images.ImageSpec(
        ref="x/y:1", files=(images.ImageFile(path="bin/y", source=tmp_path / "absent"),)
    )
    with pytest.raises(FileNotFoundError, match="lab/build-binaries"):
        images.build_archive(spec, tmp_path / "y.tar")


def test_gpu_nodes_get_nvidias_cdi_hook(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The simulator's kubelet plugin, like NVIDIA's, does not start without the hook.
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path / "cache"))
    hook = tmp_path / "bin" / "nvidia-cdi-hook"
    files = cluster.simulator_files(hook)
    hooks = [f for f in files if f["dest"] == "/usr/bin/nvidia-cdi-hook"]
    assert hooks == [{"src": str(hook), "dest": "/usr/bin/nvidia-cdi-hook", "mode": "0755"}]
    assert any(f["dest"].endswith("/nvidia-smi") for f in files), files
    assert all(f["dest"] != "/usr/bin/nvidia-cdi-hook" for f in cluster.simulator_files())


def test_lab_binaries_include_the_cdi_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[list[str], str | None]] = []

    def ensure(names: list[str], version: str | None, *, log: object) -> dict[str, Path]:
        calls.append((list(names), version))
        return {n: Path("/cache") / n for n in names}

    monkeypatch.setattr(cluster.binaries, "ensure", ensure)
    bins = cluster.ensure_binaries(cluster.LabSpec().validated().kubernetes_version, print)
    assert (["nvidia-cdi-hook"], None) in calls
    assert bins["nvidia-cdi-hook"] == Path("/cache/nvidia-cdi-hook")


def test_the_main_profile_builds_what_lab_up_asks_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/setup builds the ``main`` profile (gpufleet/build/releases.yaml) so that the
    main job's ``gpufleet lab up`` finds every binary of the default release built; a
    binary the lab asks for that the profile leaves out would be built inside ``lab up``."""
    from gpufleet.build import binaries, release_pins

    rel = release_pins.load_releases()
    asked: set[tuple[str, str]] = set()

    def record(targets: Any, _releases: Any, _log: Any) -> list[Any]:
        """binaries.build, recording what ensure resolved and building nothing."""
        asked.update((t.binary.name, t.version) for t in targets)
        return [
            SimpleNamespace(target=t, status="present", path=Path("/nonexistent") / t.binary.name)
            for t in targets
        ]

    monkeypatch.setattr(binaries, "build", record)
    cluster.ensure_binaries(rel.default, log=lambda _m: None)
    planned = {
        (t.binary.name, t.version) for t in binaries.plan_steps(rel.profile("main").steps, rel)
    }
    assert asked, "ensure_binaries asked for nothing"
    assert asked <= planned, f"lab up builds what scripts/setup does not: {sorted(asked - planned)}"
    ci = {(t.binary.name, t.version) for t in binaries.plan_steps(rel.profile("ci").steps, rel)}
    assert planned <= ci, f"the ci profile lacks part of main: {sorted(planned - ci)}"


@pytest.mark.parametrize(
    "version, words",
    [
        ("1.33.13", "which the driver supports from Kubernetes 1.34"),
        ("1.34.4", "DRAPartitionableDevices is alpha, off by default"),
        ("1.35.4", "DRAPartitionableDevices is alpha, off by default"),
    ],
)
def test_dynamic_mig_is_refused_where_partitionable_devices_are_off(
    version: str, words: str
) -> None:
    # The lab turns no feature gate on: the scheduler would drop the partitionable devices.
    with pytest.raises(cluster.LabError) as e:
        cluster.LabSpec(version, dynamic_mig=True).validated()
    assert str(e.value).startswith(f"--dynamic-mig with --kubernetes-version {version}: ")
    assert words in str(e.value)


@pytest.mark.parametrize("version", ["", "1.36.3", "1.38.0-beta.0"])
def test_dynamic_mig_is_kept_where_partitionable_devices_are_on(version: str) -> None:
    assert cluster.LabSpec(version, dynamic_mig=True).validated().dynamic_mig is True
    assert cluster.LabSpec(version).validated().dynamic_mig is False


@pytest.mark.parametrize("dynamic", [True, False])
def test_dynamic_mig_reaches_the_chart_and_the_dra_driver_role(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dynamic: bool
) -> None:
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path / "cache"))
    built = {n: Path("/c") / n for n in ("kubeadm", "containerd", "helm", "nvidia-cdi-hook")}
    monkeypatch.setattr(cluster, "ensure_binaries", lambda _v, _log: built)
    plugin = images.ImageSpec(ref=f"{cluster.PLUGIN_IMAGE}:abc", files=())
    monkeypatch.setattr(cluster, "_plugin_artefacts", lambda _log: (plugin, tmp_path))
    monkeypatch.setattr(cluster, "busybox_image", lambda: plugin)
    monkeypatch.setattr(cluster, "_archive", lambda spec: {"ref": spec.ref, "path": "/a"})
    monkeypatch.setattr(cluster, "simulator_files", lambda _hook: [])
    monkeypatch.setattr(cluster.images, "control_plane_images", lambda _v, etcd: [])
    monkeypatch.setattr(cluster.images, "pause_ref", lambda _v: "registry.k8s.io/pause:3.10")
    state = cluster.build_state(cluster.LabSpec("", workers=1, dynamic_mig=dynamic), print)
    # the mode is the dra_driver role's (featureGates.DynamicMIG); the chart values that
    # become dra_driver_extra_values carry none, which would pin it against `gpufleet mig mode`
    values = state.vars["lab_gpu_simulator_values"]
    assert "dynamicMIG" not in values and "featureGates" not in values, values
    assert state.vars["dra_driver_dynamic_mig"] is dynamic


@pytest.mark.parametrize("existing", [False, True])
def test_up_of_a_new_lab_removes_the_reports_of_a_removed_lab(tmp_path, monkeypatch, existing):
    """Reports a removed lab of the same name left (a `lab down` that kept them) would make
    the new lab's upgrades resume, or skip, nodes of the old one; a lab that exists keeps
    its reports (its upgrade may be resuming)."""
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    monkeypatch.setenv("GPUFLEET_LAB_NAME", "gpufleet-reports")
    spec = cluster.LabSpec("1.37.2", workers=1)
    lab = cluster.lab_dir()
    lab.mkdir(parents=True)
    names = ["upgrade-report.json", "upgrade-report.json.lock",
             "upgrade-report-gpu-stack.json", "upgrade-report-gpu-stack.json.lock"]  # fmt: skip
    for n in names:
        (lab / n).write_text("{}")
    (lab / "other.json").write_text("{}")
    state = cluster.LabState(spec=spec, nodes=[])
    monkeypatch.setattr(cluster, "existing_spec", lambda: spec.validated() if existing else None)
    monkeypatch.setattr(cluster, "build_state", lambda _spec, _log: state)
    monkeypatch.setattr(cluster, "start_nodes", lambda _nodes, _log: None)
    monkeypatch.setattr(cluster, "use_node_cache", lambda _state: None)
    cluster.up(spec, log=lambda _l: None, run_playbook=lambda *_a: SimpleNamespace(status=0))
    left = sorted(p.name for p in lab.iterdir() if p.name != "state.json")
    assert left == (sorted([*names, "other.json"]) if existing else ["other.json"])

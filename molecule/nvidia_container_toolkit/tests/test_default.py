"""State of the nvidia_container_toolkit scenario's hosts after converge and idempotence.

ctd16 (Debian's containerd 1.6.20, version 2 main file), ctd17 (containerd 1.7.35, an
earlier site drop-in), ctd20 (containerd 2.0.14), ctd21 (containerd 2.1.9, CDI switched
off in the main file), ctd23 (containerd 2.3.7, version 4 main file) and ctd2
(containerd 2.4.2, version 3 main file) must run containerd restarted with the role's
drop-in (nvidia-ctk's on 2.x, the role's own writer's on 1.x), and
``containerd config dump`` (what containerd uses, parsed as TOML) must show the nvidia
runtime (``runtime_type`` io.containerd.runc.v2, ``BinaryName``
/usr/bin/nvidia-container-runtime, runc's ``SystemdCgroup`` kept) and, on ctd2, CDI on
with both spec directories. The drop-in's version is the main file's (2 and 3; containerd
2.4 itself dumps version 4). The main file differs from the prepared one by the imports
line only, and its backup is the prepared file. On ctd2 the role's CDI check refused a
spec that names GPU 0 only, naming GPU 1. ctd2bad held a stale version 2 drop-in: the role
refused, naming it, and changed and restarted nothing.

The role does not generate the CDI spec in this scenario (nvidia-ctk needs NVML, that is
the NVIDIA driver and a GPU; see converge.yml): the specs on the nodes are prepare.yml's,
the role's input, and nothing here asserts on their content.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest

pytestmark = pytest.mark.molecule

testinfra_hosts = [
    "podman://ctd16",
    "podman://ctd17",
    "podman://ctd20",
    "podman://ctd21",
    "podman://ctd23",
    "podman://ctd2",
    "podman://ctd2bad",
]

DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
MAIN = "/etc/containerd/config.toml"
KEPT = "/var/lib/gpufleet-molecule"
IMPORTS_LINE = 'imports = ["/etc/containerd/conf.d/*.toml"]'
EXPECTED = {
    # host: (containerd release, main/drop-in version, dump version, CRI plugin, CDI on)
    "ctd16": ("1.6.20", 2, 2, "io.containerd.grpc.v1.cri", False),
    "ctd17": ("1.7.35", 2, 2, "io.containerd.grpc.v1.cri", True),
    "ctd20": ("2.0.14", 3, 3, "io.containerd.cri.v1.runtime", True),
    "ctd21": ("2.1.9", 3, 3, "io.containerd.cri.v1.runtime", True),
    "ctd23": ("2.3.7", 4, 4, "io.containerd.cri.v1.runtime", True),
    "ctd2": ("2.4.2", 3, 4, "io.containerd.cri.v1.runtime", True),
}
# Who writes the drop-in with writer: auto, as its first line says: NVIDIA's nvidia-ctk
# from containerd 2.0, the role's own writer on 1.x.
WRITER_LINE = {
    "ctd16": "# Written by the gpufleet.cluster nvidia_container_toolkit role",
    "ctd17": "# Written by the gpufleet.cluster nvidia_container_toolkit role",
    "ctd20": "# Written by nvidia-ctk runtime configure --config-source=file",
    "ctd21": "# Written by nvidia-ctk runtime configure --config-source=file",
    "ctd23": "# Written by nvidia-ctk runtime configure --config-source=file",
    "ctd2": "# Written by nvidia-ctk runtime configure --config-source=file",
}


def _name(host: Any) -> str:
    return host.backend.get_hostname()


def _good(host: Any) -> str:
    name = _name(host)
    if name not in EXPECTED:
        pytest.skip(f"{name} is the host where the role must refuse")
    return name


def _text(host: Any, path: str) -> str:
    f = host.file(path)
    assert f.is_file, f"{path} is missing on {_name(host)}"
    return f.content_string


def _dump(host: Any) -> dict:
    out = host.check_output("containerd config dump")
    return tomllib.loads(out)


def test_containerd_release(host: Any) -> None:
    name = _good(host)
    assert EXPECTED[name][0] in host.check_output("containerd --version")


def test_dropin_has_the_main_files_version(host: Any) -> None:
    name = _good(host)
    _, version, _, plugin, _ = EXPECTED[name]
    main = tomllib.loads(_text(host, MAIN))
    dropin = tomllib.loads(_text(host, DROPIN))
    assert main["version"] == version
    assert dropin["version"] == version
    assert list(dropin["plugins"]) == [plugin]


def test_effective_configuration_has_the_nvidia_runtime(host: Any) -> None:
    name = _good(host)
    _, _, dump_version, plugin, _ = EXPECTED[name]
    dump = _dump(host)
    assert dump["version"] == dump_version
    runtimes = dump["plugins"][plugin]["containerd"]["runtimes"]
    nvidia = runtimes["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    # the runtime is a copy of runc's: same cgroup driver as the kubelet
    assert nvidia["options"]["SystemdCgroup"] is True
    # and the main file's settings survive the drop-in
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["runc"]["options"].get("BinaryName", "") == ""


def test_the_dropin_is_written_by_the_writer_the_rule_picks(host: Any) -> None:
    name = _good(host)
    assert _text(host, DROPIN).startswith(WRITER_LINE[name])


def test_containerd_1_7_keeps_what_the_earlier_site_dropin_set(host: Any) -> None:
    if _good(host) != "ctd17":
        pytest.skip("the earlier site drop-in is on ctd17")
    cri = _dump(host)["plugins"]["io.containerd.grpc.v1.cri"]
    # set only in conf.d/10-site.toml; nvidia-ctk's drop-in would replace the section
    assert cri["device_ownership_from_security_context"] is True
    assert cri["registry"]["config_path"] == "/etc/containerd/certs.d"
    assert cri["enable_cdi"] is True


def test_cdi_switched_off_in_the_main_file_is_on_after_the_role(host: Any) -> None:
    if _good(host) != "ctd21":
        pytest.skip("the main file that switches CDI off is on ctd21")
    assert "enable_cdi = false" in _text(host, MAIN)
    assert _dump(host)["plugins"]["io.containerd.cri.v1.runtime"]["enable_cdi"] is True


def test_containerd_1_6_keeps_the_whole_cri_section(host: Any) -> None:
    if _good(host) != "ctd16":
        pytest.skip("containerd 2.1 and newer merge plugin sections key by key")
    cri = _dump(host)["plugins"]["io.containerd.grpc.v1.cri"]
    # set only in the image's main file; lost if the drop-in replaced the section
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"


def test_cdi_in_effect_on_containerd_2(host: Any) -> None:
    name = _good(host)
    _, _, _, plugin, cdi = EXPECTED[name]
    if not cdi:
        pytest.skip("containerd 1.6 has no CDI")
    section = _dump(host)["plugins"][plugin]
    if name != "ctd2":
        assert section["enable_cdi"] is True
        assert set(section["cdi_spec_dirs"]) >= {"/etc/cdi", "/var/run/cdi"}
        return
    # containerd 2.4 has no enable_cdi switch any more (CDI is always on): neither its
    # defaults nor its dump name it, and the drop-in does not set it
    assert "enable_cdi" not in host.check_output("containerd config default")
    assert "enable_cdi" not in section
    assert set(section["cdi_spec_dirs"]) >= {"/etc/cdi", "/var/run/cdi"}


def test_main_file_changed_by_the_imports_line_only(host: Any) -> None:
    _good(host)
    prepared = _text(host, f"{KEPT}/config.toml.prepared").splitlines()
    now = _text(host, MAIN).splitlines()
    if IMPORTS_LINE in prepared:  # ctd17's main file loads conf.d already
        assert now == prepared
        return
    assert [line for line in now if line not in prepared] == [IMPORTS_LINE]
    assert [line for line in now if line != IMPORTS_LINE] == prepared


def test_one_backup_of_the_main_file_equal_to_the_prepared_one(host: Any) -> None:
    _good(host)
    backups = host.check_output("ls /etc/containerd | grep '^config.toml\\..*~$' || true").split()
    if IMPORTS_LINE in _text(host, f"{KEPT}/config.toml.prepared"):
        assert backups == [], "the main file was not changed, so not backed up"
        return
    assert len(backups) == 1, backups
    assert _text(host, f"/etc/containerd/{backups[0]}") == _text(
        host, f"{KEPT}/config.toml.prepared"
    )


def test_containerd_restarted_and_serving(host: Any) -> None:
    name = _good(host)
    before = _text(host, f"{KEPT}/containerd-invocation").strip()
    now = host.check_output("systemctl show -p InvocationID --value containerd").strip()
    assert host.service("containerd").is_running
    assert now and now != before
    # the running daemon answers over its socket with the expected release
    assert EXPECTED[name][0] in host.check_output("ctr version")


def test_cdi_check_refuses_a_spec_without_a_gpu(host: Any) -> None:
    if _good(host) != "ctd2":
        pytest.skip("the spec that lacks GPU 1 is checked on ctd2")
    # the GPUs as the GPU simulator's nvidia-smi lists them: "GPU <i>: <name> (UUID: <uuid>)"
    listing = host.check_output("nvidia-smi -L").splitlines()
    uuids = [line.split("(UUID: ")[1].rstrip(")") for line in listing if line.startswith("GPU ")]
    assert len(uuids) == 2, listing
    text = " ".join(_text(host, f"{KEPT}/cdi-refusal.txt").split())
    assert text.startswith(
        f"no CDI device nvidia.com/gpu=<UUID> for GPU 1 {uuids[1]} (NVIDIA H200) in the specs "
        f"under {KEPT}/cdi-gpu0-only (they hold ['nvidia.com/gpu=0', "
        f"'nvidia.com/gpu={uuids[0]}', 'nvidia.com/gpu=all']);"
    ), text
    # GPU 0 has its device: the refusal names GPU 1 alone
    assert uuids[0] not in text.split("(they hold")[0]


# ------------------------------------------------------ containers through the CRI

PROBE_IMAGE = "localhost/gpufleet/cdiprobe:latest"
PROBE_DIR = "/run/gpufleet-probe"


def _uuids(host: Any) -> list[str]:
    """The simulated GPUs' UUIDs, as the GPU simulator's nvidia-smi -L lists them."""
    listing = host.check_output("nvidia-smi -L").splitlines()
    return [line.split("(UUID: ")[1].rstrip(")") for line in listing if line.startswith("GPU ")]


def _run_probe(host: Any, name: str, *, runtime: str = "", env=None, cdi=()) -> list[str]:
    """Start a pod (runtime handler ``runtime``, host network) with one container of the
    probe image through containerd's CRI, as the kubelet would, and return what the probe
    printed: the device nodes, NVIDIA_*/GPUFLEET_* variables and hook links it was given."""
    work = f"{KEPT}/pods/{name}"
    pod = {
        "metadata": {"name": name, "namespace": "default", "uid": f"{name}-uid", "attempt": 0},
        "log_directory": f"{work}/logs",
        # the nodes' runc runtimes use systemd cgroups, so the parent is a slice
        "linux": {
            "cgroup_parent": "gpufleet-probe.slice",
            "security_context": {"namespace_options": {"network": 2}},
        },
    }
    ctr = {
        "metadata": {"name": "probe"},
        "image": {"image": PROBE_IMAGE},
        "args": [f"{PROBE_DIR}/gpu-0", f"{PROBE_DIR}/gpu-1"],
        "envs": [{"key": k, "value": v} for k, v in (env or {}).items()],
        "CDI_devices": [{"name": n} for n in cdi],
        "log_path": "probe.log",
    }
    runtime_flag = f"--runtime {runtime}" if runtime else ""
    script = f"""
set -eu
mkdir -p {work}/logs
cat > {work}/pod.json <<'JSON'
{json.dumps(pod)}
JSON
cat > {work}/ctr.json <<'JSON'
{json.dumps(ctr)}
JSON
pod=$(crictl runp {runtime_flag} {work}/pod.json)
ctr=$(crictl create "$pod" {work}/ctr.json {work}/pod.json)
crictl start "$ctr" >/dev/null
for _ in $(seq 120); do
  state=$(crictl inspect -o go-template --template '{{{{.status.state}}}}' "$ctr")
  [ "$state" = CONTAINER_EXITED ] && break
  sleep 0.5
done
crictl logs "$ctr"
crictl rm "$ctr" >/dev/null; crictl stopp "$pod" >/dev/null; crictl rmp "$pod" >/dev/null
"""
    result = host.run(script)
    assert result.rc == 0, f"{_name(host)}: the probe pod failed: {result.stderr or result.stdout}"
    return sorted(line for line in result.stdout.splitlines() if line.strip())


def test_a_container_through_the_nvidia_runtime_gets_its_cdi_device(host: Any) -> None:
    """The runtime handler the role configured (``nvidia``) runs NVIDIA's runtime, which
    in CDI mode injects the device named in NVIDIA_VISIBLE_DEVICES and runs the spec's
    nvidia-cdi-hook; on every containerd of the matrix, 1.6 included (the runtime reads
    the spec itself)."""
    _good(host)
    uuid0 = _uuids(host)[0]
    seen = _run_probe(
        host, "nvidia-runtime", runtime="nvidia", env={"NVIDIA_VISIBLE_DEVICES": "nvidia.com/gpu=0"}
    )
    assert seen == [
        "device /dev/nvidia-uvm c 237:0",
        "device /dev/nvidia0 c 195:0",
        "device /dev/nvidiactl c 195:255",
        f"env GPUFLEET_PROBE_GPU={uuid0}",
        "env NVIDIA_VISIBLE_DEVICES=void",
        f"link {PROBE_DIR}/gpu-0 -> /dev/nvidia0",
        f"missing {PROBE_DIR}/gpu-1",
    ], seen


def test_a_container_with_a_cdi_device_through_containerd(host: Any) -> None:
    """containerd's own CDI support (the CRI's CDI devices, as the kubelet passes a DRA
    claim's devices), with runc: the device by UUID, its variable and the hook's link."""
    name = _good(host)
    if not EXPECTED[name][4]:
        pytest.skip("containerd 1.6 has no CDI support")
    uuid1 = _uuids(host)[1]
    seen = _run_probe(host, "cri-cdi", cdi=[f"nvidia.com/gpu={uuid1}"])
    assert seen == [
        "device /dev/nvidia-uvm c 237:0",
        "device /dev/nvidia1 c 195:1",
        "device /dev/nvidiactl c 195:255",
        f"env GPUFLEET_PROBE_GPU={uuid1}",
        "env NVIDIA_VISIBLE_DEVICES=void",
        f"link {PROBE_DIR}/gpu-1 -> /dev/nvidia1",
        f"missing {PROBE_DIR}/gpu-0",
    ], seen


def test_a_plain_container_gets_no_gpu(host: Any) -> None:
    """Without a CDI device or NVIDIA_VISIBLE_DEVICES, the default runtime injects nothing."""
    _good(host)
    assert _run_probe(host, "plain") == [
        f"missing {PROBE_DIR}/gpu-0",
        f"missing {PROBE_DIR}/gpu-1",
    ]


# ------------------------------------------------------------------------- ctd2bad


@pytest.fixture
def bad(host: Any) -> Any:
    if _name(host) != "ctd2bad":
        pytest.skip("only ctd2bad holds the stale drop-in")
    return host


def test_refusal_names_the_stale_dropin(bad: Any) -> None:
    text = " ".join(_text(bad, f"{KEPT}/refusal.txt").split())
    assert (
        "/etc/containerd/conf.d/50-site.toml is a version 2 drop-in but "
        "/etc/containerd/config.toml is version 3" in text
    )


def test_nothing_changed_or_restarted_after_the_refusal(bad: Any) -> None:
    assert _text(bad, MAIN) == _text(bad, f"{KEPT}/config.toml.prepared")
    assert not bad.file(DROPIN).exists
    before = _text(bad, f"{KEPT}/containerd-invocation").strip()
    assert bad.check_output("systemctl show -p InvocationID --value containerd").strip() == before
    assert bad.service("containerd").is_running

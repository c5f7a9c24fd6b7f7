"""Broken GPU hosts and hostile host reads, judged as NVIDIA's own code and the CDI library
judge them: the driver root where NVIDIA's DRA kubelet plugin looks for the driver
(``hosts.driver-root``), the CDI specs ``nvidia-ctk`` writes (``hosts.cdi-gpus``, module
``nvidia_cdi_spec_check``), containerd absent or stopped (``hosts.containerd-cdi``) and the
filters the roles call with host paths. Each case is one test id; every case asserts the
verdict and the words of the message or refusal the code produced.

Verdicts: ``refused`` (bad input stopped with a message naming it), ``handled`` (a broken
host judged: the check fails or warns with the cause and a fix that exists; or a sound
host passes)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter import dra_driver as dra_filter
from ansible_collections.gpufleet.cluster.plugins.filter import nvidia as nvidia_filter
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import driver_root as vdr
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import hosts as vh
from ansible_collections.gpufleet.cluster.plugins.modules import nvidia_cdi_spec_check as mod

from tests.unit import host_records
from tests.unit.hostile.inputs import CONTENTS
from tests.unit.nvidia import cdi_variants as cv

pytestmark = pytest.mark.unit

UUID = cv.UUID
REAL = cv.REAL.read_text()
NO_DEV = cv.NO_DEV.read_text()
DUMP = """
version = 4
[plugins."io.containerd.cri.v1.runtime"]
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
"""


def cmd(name: str, rc: int | None, stdout: str = "", stderr: str = "", **more: Any) -> dict:
    return {"item": {"name": name}, "rc": rc, "stdout": stdout, "stderr": stderr, **more}


def host(
    specs: list[tuple[str, str]] | None = None,
    driver_root: dict | None = None,
    commands: dict[str, dict | None] | None = None,
    sockets: dict | None = None,
) -> dict:
    """A GPU node of the h200-single kind as the validate role reads it: one H200, the
    toolkit, containerd with the nvidia runtime, the real nvidia-ctk spec unless ``specs``
    (``[(path, text)]``), the driver root read by ``host_records``."""
    cmds = {
        "toolkit": cmd("toolkit", 0, "NVIDIA Container Toolkit CLI version 1.20.2"),
        "containerd_version": cmd("containerd_version", 0, "containerd x/v2 v2.4.2 abc"),
        "containerd": cmd("containerd", 0, DUMP),
        "containerd_active": cmd("containerd_active", 0, "active"),
    }
    cmds.update(commands or {})
    specs = [("/var/run/cdi/nvidia.yaml", REAL)] if specs is None else specs
    return vh.normalize_host(
        {
            "host": "gpu-1",
            "node": "gpu-1",
            "gpu_node": True,
            "simulator": False,
            "gpu": {
                "ansible_facts": {
                    "gpufleet_gpu_driver_version": "580.159.04",
                    "gpufleet_gpus": [
                        {"index": 0, "uuid": UUID, "name": "NVIDIA H200", "driver_version": "580"}
                    ],
                }
            },
            "commands": [c for c in cmds.values() if c is not None],
            "driver_root": driver_root or host_records.driver_root(),
            "cdi_hook": host_records.cdi_hook(),
            "plugin_sockets": sockets or host_records.plugin_sockets(),
            "cdi": [
                {
                    "source": p,
                    "encoding": "base64",
                    "content": base64.b64encode(t.encode()).decode(),
                }
                for p, t in specs
            ],
        }
    )


def check(h: dict, check_id: str):
    return {c.id: c for c in vh.hosts_checks([h])}[check_id]


def messages(c) -> str:
    return " | ".join(p.message for p in c.problems)


def spec_text(change: Callable[[dict], None]) -> str:
    spec = yaml.safe_load(REAL)
    change(spec)
    return json.dumps(spec)


# --------------------------------------------------------------------------- driver root

#: id -> (driver_root record, status, words in the messages, words in the fix)
ROOT_CASES: dict[str, tuple[dict, str, tuple[str, ...], tuple[str, ...]]] = {
    "library-only-in-usr-lib": (
        host_records.driver_root("/", library_dir="usr/lib"),
        "fail",
        ("libnvidia-ml.so.1 is not under the driver root /", 'error locating \\"libnvidia'),
        ("/usr/local/nvidia", "<root>/usr/lib64"),
    ),
    "library-only-in-lib": (
        host_records.driver_root("/", library_dir="lib"),
        "fail",
        ("/lib/aarch64-linux-gnu/libnvidia-ml.so.1, where",),
        ("dra_driver_nvidia_driver_root",),
    ),
    "smi-only-in-usr-local-bin": (
        host_records.driver_root("/", smi_dir="usr/local/bin"),
        "fail",
        ("nvidia-smi is not under the driver root /", "/opt/bin/nvidia-smi"),
        ("<root>/opt/bin",),
    ),
    "smi-in-opt-bin": (host_records.driver_root("/", smi_dir="opt/bin"), "pass", (), ()),
    "driver-files-at-the-root-itself": (
        host_records.driver_root("/opt/drv", library_dir="", smi_dir="", dev_dir=False),
        "pass",
        (),
        (),
    ),
    "prefix-root-with-empty-dev": (
        host_records.driver_root("/usr/local/nvidia", library_dir="", smi_dir="", dev_dir=True),
        "fail",
        ("/usr/local/nvidia/dev exists", "the host's /dev has nvidia-uvm"),
        ("bind-mount the host's /dev",),
    ),
    "root-with-trailing-slashes": (
        host_records.driver_root("/usr/local/nvidia///", library_dir="usr/lib64", dev_dir=False),
        "pass",
        (),
        (),
    ),
}


def _library_dir_is_a_directory() -> dict:
    rec = host_records.driver_root("/", library_dir="usr/lib64")
    for f in rec["files"]:
        if f["item"] == "usr/lib64/libnvidia-ml.so.1":
            f["stat"].update(isdir=True, isreg=False)
    return rec


ROOT_CASES["library-name-is-a-directory"] = (
    _library_dir_is_a_directory(),
    "fail",
    ("libnvidia-ml.so.1 is not under the driver root /",),
    (),
)
ROOT_CASES["stat-results-skipped"] = (
    {"root": "/", "files": [{"skipped": True}, "garbage", None, {"item": 1}], "devices": {}},
    "warn",
    ("the driver root was not read on this node",),
    ("validate_become",),
)


@pytest.mark.parametrize("case", sorted(ROOT_CASES))
def test_driver_root_of_a_broken_host(case: str) -> None:
    rec, status, words, fix = ROOT_CASES[case]
    c = vdr.driver_root_check([host(driver_root=rec)])
    assert c.status == status, messages(c)
    flat = messages(c).replace('"', '\\"')
    for w in words:
        assert w in flat, (w, flat)
    for w in fix:
        assert w in (c.fix or ""), (w, c.fix)


# --------------------------------------------------------------------------- CDI specs


def _nodes_without(*names: str) -> dict:
    return host_records.driver_root(
        host_devices=tuple(n for n in host_records.DEVICES if n not in names)
    )


#: id -> (spec files, driver root record or None, status, words in the messages)
CDI_CASES: dict[str, tuple[list[tuple[str, str]], dict | None, str, tuple[str, ...]]] = {
    "real-nvidia-ctk-spec": ([("/var/run/cdi/nvidia.yaml", REAL)], None, "pass", ()),
    "driver-root-without-dev-root": (
        [("/var/run/cdi/nvidia.yaml", NO_DEV)],
        None,
        "fail",
        ("device '0' has no /dev/nvidia<N> device node", "lack /dev/nvidiactl"),
    ),
    "empty-device-edits": (
        [("/etc/cdi/nvidia.json", spec_text(lambda s: s["devices"][0].update(containerEdits={})))],
        None,
        "fail",
        ("/etc/cdi/nvidia.json: the CDI library refuses the spec", "empty device edits"),
    ),
    "empty-device-list": (
        [("/var/run/cdi/nvidia.yaml", spec_text(lambda s: s.update(devices=[])))],
        None,
        "fail",
        ("invalid spec, no devices", "nvidia-ctk found no GPU when it wrote them"),
    ),
    "device-node-the-host-lacks": (
        [("/var/run/cdi/nvidia.yaml", REAL)],
        _nodes_without("nvidia0"),
        "fail",
        ("device node /dev/nvidia0 comes from /dev/nvidia0, which this host lacks",),
    ),
    "binary-spec-file": (
        [("/etc/cdi/nvidia.yaml", CONTENTS["binary"].decode("latin-1"))],
        None,
        "fail",
        ("no CDI device nvidia.com/gpu=<UUID>",),
    ),
    "deep-yaml-spec-file": (
        [("/etc/cdi/nvidia.yaml", CONTENTS["deep-yaml"].decode())],
        None,
        "fail",
        ("/etc/cdi/nvidia.yaml: not YAML or JSON",),
    ),
    "spec-is-a-list": (
        [("/etc/cdi/nvidia.yaml", "- cdiVersion: 0.5.0\n- kind: nvidia.com/gpu\n")],
        None,
        "fail",
        (f"no CDI device nvidia.com/gpu=<UUID> for GPU 0 {UUID}",),
    ),
    "devices-is-a-string": (
        [("/etc/cdi/nvidia.yaml", spec_text(lambda s: s.update(devices="0")))],
        None,
        "fail",
        ("devices must be a list",),
    ),
    "device-name-with-a-space": (
        [("/etc/cdi/nvidia.yaml", spec_text(lambda s: s["devices"][0].update(name="gpu 0")))],
        None,
        "fail",
        ("invalid character ' ' in device name 'gpu 0'",),
    ),
    "one-good-spec-one-broken": (
        [
            ("/etc/cdi/nvidia.yaml", REAL),
            ("/var/run/cdi/nvidia.yaml", NO_DEV),
        ],
        None,
        "fail",
        ("/var/run/cdi/nvidia.yaml: device 'all' has no /dev/nvidia<N>",),
    ),
    "version-with-v-prefix": (
        [("/etc/cdi/nvidia.yaml", spec_text(lambda s: s.update(cdiVersion="v0.5.0")))],
        None,
        "pass",
        (),
    ),
}


@pytest.mark.parametrize("case", sorted(CDI_CASES))
def test_cdi_specs_of_a_broken_host(case: str) -> None:
    specs, rec, status, words = CDI_CASES[case]
    c = check(host(specs=specs, driver_root=rec), "hosts.cdi-gpus")
    assert c.status == status, messages(c)
    for w in words:
        assert w in messages(c), (w, messages(c))
    if status == "fail":
        assert "--dev-root=/" in c.fix
    if case == "driver-root-without-dev-root":
        assert "--driver-root=/usr/local/nvidia --dev-root=/" in c.fix


@pytest.mark.parametrize(
    ("case", "spec", "problems"),
    [
        ("no-dev-spec", yaml.safe_load(NO_DEV), 6),
        ("fully-specified-nodes", None, 0),
        ("other-kind", {"cdiVersion": "0.5.0", "kind": "example.com/x", "devices": []}, 0),
    ],
)
def test_the_node_module_judges_specs_as_the_check_does(
    case: str, spec: dict | None, problems: int
) -> None:
    if spec is None:  # type and major given: no host path needed on this machine
        spec = yaml.safe_load(REAL)
        for e in [s["containerEdits"] for s in spec["devices"]] + [spec["containerEdits"]]:
            for n in e.get("deviceNodes", []):
                n.update(type="c", major=n.get("major") or 195)
    got = mod.judge_spec(spec, "/var/run/cdi/nvidia.yaml", "nvidia.com/gpu")
    assert len(got) == problems, got
    assert all(p.startswith("/var/run/cdi/nvidia.yaml: ") for p in got)


# --------------------------------------------------------------------------- filters

FILTER_REFUSALS: dict[str, tuple[Callable[[], Any], str]] = {
    "search-items-a-string": (
        lambda: dra_filter.dra_driver_root_search_items("nvidia-smi"),
        "takes a list, not str",
    ),
    "search-items-another-library": (
        lambda: dra_filter.dra_driver_root_search_items(["libcuda.so.1"]),
        "'libcuda.so.1' is not a file the DRA kubelet plugin looks up",
    ),
    "search-items-path-traversal": (
        lambda: dra_filter.dra_driver_root_search_items(["../../etc/shadow"]),
        "is not a file the DRA kubelet plugin looks up",
    ),
    "generate-relative-driver-root": (
        lambda: nvidia_filter.nvidia_cdi_generate_argv("/var/run/cdi/x.yaml", "usr/local/nvidia"),
        "the driver root 'usr/local/nvidia' is not an absolute path",
    ),
    "generate-relative-dev-root": (
        lambda: nvidia_filter.nvidia_cdi_generate_argv("/var/run/cdi/x.yaml", "/opt/n", "dev"),
        "the dev root 'dev' is not an absolute path",
    ),
    "generate-relative-output": (
        lambda: nvidia_filter.nvidia_cdi_generate_argv("nvidia.yaml"),
        "the output 'nvidia.yaml' is not an absolute path",
    ),
}


@pytest.mark.parametrize("case", sorted(FILTER_REFUSALS))
def test_filters_refuse_bad_host_paths(case: str) -> None:
    call, words = FILTER_REFUSALS[case]
    with pytest.raises(AnsibleFilterError) as err:
        call()
    assert words in str(err.value)
    if case.startswith("generate"):
        assert "nvidia_container_toolkit_driver_root" in str(err.value)


def test_generate_passes_dev_root_with_a_prefix_driver_root() -> None:
    argv = nvidia_filter.nvidia_cdi_generate_argv(
        "/var/run/cdi/nvidia.yaml.new", "/usr/local/nvidia"
    )
    assert argv[3:5] == ["--driver-root=/usr/local/nvidia", "--dev-root=/"]


# --------------------------------------------------------------------------- containerd

#: id -> (commands replaced, words in the message, words in the fix)
CONTAINERD_CASES: dict[str, tuple[dict[str, dict | None], tuple[str, ...], tuple[str, ...]]] = {
    "not-installed-module-read": (
        {"containerd": cmd("containerd", 2), "containerd_version": cmd("containerd_version", 2)},
        ("containerd is not installed on this node", "rc=2, no output"),
        ("install containerd 1.7 or newer", "systemctl enable --now containerd"),
    ),
    "not-installed-command-read": (
        {"containerd": cmd("containerd", 2, msg="Error executing command.")},
        ("containerd is not installed", "rc=2, no output"),
        ("install containerd",),
    ),
    "installed-but-stopped": (
        {"containerd_active": cmd("containerd_active", 3, "inactive")},
        ("containerd is installed but not running", "inactive"),
        ("systemctl enable --now containerd", "journalctl -u containerd"),
    ),
    "config-does-not-parse": (
        {
            "containerd": cmd(
                "containerd", 1, "", "failed to load TOML: /etc/containerd/config.toml"
            )
        },
        ("containerd config dump failed (rc=1): failed to load TOML",),
        ("names the configuration file", "systemctl restart containerd"),
    ),
    "config-dump-hangs": (
        {"containerd": cmd("containerd", -9)},
        ("did not answer in time",),
        ("run containerd config dump on the node",),
    ),
    "config-dump-not-read": (
        {"containerd": None},
        ("containerd config dump was not run on this node",),
        ("validate_become",),
    ),
}


@pytest.mark.parametrize("case", sorted(CONTAINERD_CASES))
def test_containerd_absent_or_broken(case: str) -> None:
    commands, words, fix = CONTAINERD_CASES[case]
    c = check(host(commands=commands), "hosts.containerd-cdi")
    assert c.status == "fail", messages(c)
    assert "(rc=2): " not in messages(c) or "containerd is not installed" in messages(c)
    for w in words:
        assert w in messages(c), (w, messages(c))
    for w in fix:
        assert w in c.fix, (w, c.fix)


# --------------------------------------------------------------------------- plugin sockets

GPU, CD = "gpu.nvidia.com", "compute-domain.nvidia.com"

#: id -> (plugin_sockets registered result, status, words in the messages)
SOCKET_CASES: dict[str, tuple[dict, str, tuple[str, ...]]] = {
    "every-socket-live": (host_records.plugin_sockets(live=(GPU, CD)), "pass", ()),
    "stale-beside-a-live-one": (
        host_records.plugin_sockets(live=(GPU,), stale=(GPU,)),
        "warn",
        ("1 socket(s) of driver gpu.nvidia.com refuse connections", "beside the live"),
    ),
    "only-stale-sockets-of-the-gpu-driver": (
        host_records.plugin_sockets(live=(), stale=(GPU,)),
        "fail",
        ("every kubelet plugin socket of driver gpu.nvidia.com refuses connections",),
    ),
    "stale-compute-domain-socket": (
        host_records.plugin_sockets(live=(GPU,), stale=(CD,)),
        "fail",
        ("driver compute-domain.nvidia.com refuses connections",),
    ),
    "module-failed": (
        {"failed": True, "msg": "timeout=0: give a number of seconds of at least 1"},
        "warn",
        ("sockets were not read: timeout=0",),
    ),
    "garbage-entries": (
        {"changed": False, "sockets": ["x", {"path": ""}, {"driver": GPU}, None], "truncated": 1},
        "pass",
        (),
    ),
}


@pytest.mark.parametrize("case", sorted(SOCKET_CASES))
def test_kubelet_plugin_sockets_of_a_broken_host(case: str) -> None:
    raw, status, words = SOCKET_CASES[case]
    c = check(host(sockets=raw), "hosts.plugin-sockets")
    assert c.status == status, messages(c)
    for w in words:
        assert w in messages(c), (w, messages(c))
    if status == "fail":
        assert "rm -f PATH" in c.fix and "--field-selector spec.nodeName=NODE" in c.fix


def test_the_socket_drivers_of_the_chart_come_from_one_owner() -> None:
    assert dra_filter.dra_driver_chart_drivers(GPU) == [GPU, CD]
    assert dra_filter.dra_driver_chart_drivers(None) == [""]

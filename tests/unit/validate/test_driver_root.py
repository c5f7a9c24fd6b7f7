"""hosts.driver-root and hosts.cdi-hook: what NVIDIA's DRA kubelet plugin needs on each GPU
node, judged from the records the validate role reads (tests/unit/host_records.py), and the
driver root the role judges by default (the dra_driver role's decision)."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter import dra_driver as dra_filter
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import driver_root as vdr
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import hosts as vh

from tests.unit import host_records

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
OPERATOR_ROOT = "/run/nvidia/driver"


def host(name: str = "gpu-1", gpu_node: bool = True, simulator: bool = False, **read) -> dict:
    """A normalized host record with the driver root and hook as ``read`` gives them
    (``driver_root``, ``cdi_hook``: raw records of host_records)."""
    return vh.normalize_host(
        {
            "host": name,
            "node": name,
            "gpu_node": gpu_node,
            "simulator": simulator,
            "driver_root": read.get("driver_root", host_records.driver_root()),
            "cdi_hook": read.get("cdi_hook", host_records.cdi_hook()),
        }
    )


def checks(*hosts: dict) -> dict:
    gpu = [h for h in hosts if h.get("gpu_node")]
    return {c.id: c for c in (vdr.driver_root_check(gpu), vdr.cdi_hook_check(gpu))}


def test_normalize_reads_found_paths_searched_dirs_and_device_nodes() -> None:
    rec = host(driver_root=host_records.driver_root(OPERATOR_ROOT, dev_dir=True))["driver_root"]
    assert rec["libraries"] == [f"{OPERATOR_ROOT}/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"]
    assert rec["smi"] == [f"{OPERATOR_ROOT}/usr/bin/nvidia-smi"]
    assert rec["library_dirs"] == list(host_records.LIBRARY_DIRS)
    assert rec["dev_dir"] is True
    assert rec["devices"] == {"/dev": ["nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"]}


def test_a_driver_on_the_host_root_passes_both() -> None:
    c = checks(host())
    assert {i: x.status for i, x in c.items()} == {
        "hosts.driver-root": "pass",
        "hosts.cdi-hook": "pass",
    }
    assert "device nodes in /dev: nvidia-uvm, nvidia0, nvidia1, nvidiactl" in (
        c["hosts.driver-root"].evidence[0].detail
    )


def test_operator_root_with_its_own_device_nodes_passes() -> None:
    rec = host_records.driver_root(
        OPERATOR_ROOT, dev_dir=True, root_devices=host_records.DEVICES, host_devices=()
    )
    assert checks(host(driver_root=rec))["hosts.driver-root"].status == "pass"


def test_operator_root_without_dev_takes_the_hosts_dev() -> None:
    rec = host_records.driver_root(OPERATOR_ROOT, dev_dir=False)
    assert checks(host(driver_root=rec))["hosts.driver-root"].status == "pass"


def test_libraries_present_and_an_empty_dev_fails_naming_node_root_and_fix() -> None:
    # the H200 case: the plugin starts and publishes its ResourceSlice, then every claim
    # fails at prepare time, although the host's /dev has every device node
    rec = host_records.driver_root(OPERATOR_ROOT, dev_dir=True, root_devices=())
    c = checks(host("gpu-7", driver_root=rec))["hosts.driver-root"]
    assert c.status == "fail"
    (p,) = c.problems
    assert p.subject == "gpu-7"
    assert p.message.startswith(
        "/run/nvidia/driver/dev exists, so the kubelet plugin takes the device nodes from it "
        "and not from the host's /dev, and it lacks nvidia[0-9]*, nvidiactl, nvidia-uvm (the "
        "host's /dev has nvidia-uvm, "
        "nvidia0, nvidia1, nvidiactl)"
    )
    assert "invalid device, empty device edits" in p.message
    assert "bind-mount the host's /dev there" in c.fix
    assert "remove the empty directory" in c.fix


def test_a_dev_lacking_some_nodes_names_them() -> None:
    rec = host_records.driver_root(OPERATOR_ROOT, dev_dir=True, root_devices=("nvidiactl",))
    (p,) = checks(host(driver_root=rec))["hosts.driver-root"].problems
    assert "it lacks nvidia[0-9]*, nvidia-uvm" in p.message


def test_host_dev_without_nvidia_uvm_fails() -> None:
    rec = host_records.driver_root(host_devices=("nvidia0", "nvidiactl"))
    c = checks(host(driver_root=rec))["hosts.driver-root"]
    (p,) = c.problems
    assert p.message.startswith("/dev lacks nvidia-uvm: the NVIDIA kernel modules")
    assert "nvidia-modprobe -c 0 -u" in c.fix


def test_a_root_without_the_driver_fails_naming_what_is_missing_and_where_it_looked() -> None:
    rec = host_records.driver_root(OPERATOR_ROOT, library_dir=None, smi_dir=None)
    c = checks(host(driver_root=rec))["hosts.driver-root"]
    msgs = [p.message for p in c.problems]
    assert msgs[0].startswith(
        "libnvidia-ml.so.1 is not under the driver root /run/nvidia/driver (looked for "
        "/run/nvidia/driver/libnvidia-ml.so.1, /run/nvidia/driver/usr/lib64/libnvidia-ml.so.1, "
    )
    assert "/run/nvidia/driver/lib/aarch64-linux-gnu/libnvidia-ml.so.1, where" in msgs[0]
    assert "'error locating \"libnvidia-ml.so.1\"'" in msgs[0]
    assert msgs[1].startswith(
        "nvidia-smi is not under the driver root /run/nvidia/driver (looked for "
        "/run/nvidia/driver/nvidia-smi, /run/nvidia/driver/opt/bin/nvidia-smi, "
    )
    assert "/run/nvidia/driver/sbin/nvidia-smi, where" in msgs[1]
    assert "set dra_driver_nvidia_driver_root" in c.fix


def test_a_library_only_in_usr_lib_is_not_found_under_the_host_root() -> None:
    """The h200-single host (shared/fixtures/gpu/h200-single/README.md): the driver under
    /usr/local/nvidia, also reachable as /usr/lib/libnvidia-ml.so.1 and /usr/bin/nvidia-smi;
    the kubelet plugin with driver root / does not find the library there."""
    rec = host_records.driver_root("/", library_dir="usr/lib", smi_dir="usr/bin")
    c = checks(host(driver_root=rec))["hosts.driver-root"]
    assert c.status == "fail"
    ((p),) = c.problems
    assert p.message.startswith("libnvidia-ml.so.1 is not under the driver root / (looked for")
    assert "/usr/lib/libnvidia-ml.so.1" not in p.message
    assert "<root>/usr/lib64, <root>/usr/lib/x86_64-linux-gnu" in c.fix
    assert "/usr/local/nvidia" in c.fix


def test_nvidia_smi_in_opt_bin_and_the_root_itself_are_found() -> None:
    for smi_dir in ("opt/bin", ""):
        rec = host_records.driver_root("/opt/drv", dev_dir=False, smi_dir=smi_dir, library_dir="")
        c = checks(host(driver_root=rec))["hosts.driver-root"]
        assert c.status == "pass", c.problems
        assert f"/opt/drv/{smi_dir}/nvidia-smi".replace("//", "/") in c.evidence[0].detail


def test_a_directory_named_like_the_library_does_not_count() -> None:
    rec = host_records.driver_root("/", library_dir="usr/lib64")
    for f in rec["files"]:
        if f["item"] == "usr/lib64/libnvidia-ml.so.1":
            f["stat"].update(isdir=True, isreg=False)
    c = checks(host(driver_root=rec))["hosts.driver-root"]
    assert c.status == "fail"
    assert c.problems[0].message.startswith("libnvidia-ml.so.1 is not under the driver root /")


def test_non_gpu_nodes_are_not_judged_and_simulated_gpus_skip_the_driver_root() -> None:
    broken = host_records.driver_root(library_dir=None, host_devices=())
    c = checks(host("gpu-1"), host("cp-1", gpu_node=False, driver_root=broken))
    assert c["hosts.driver-root"].status == "pass"
    assert [e.source for e in c["hosts.driver-root"].evidence] == ["gpu-1: stat/find under /"]
    c = checks(host("cp-1", gpu_node=False, driver_root=broken))
    assert c["hosts.driver-root"].reason == "the inventory group gpu_nodes is empty"
    c = checks(host("sim-1", simulator=True, driver_root=broken))
    assert c["hosts.driver-root"].status == "skip"
    # the simulator's CDI specs call NVIDIA's real hook: it is judged on simulated nodes too
    assert c["hosts.cdi-hook"].status == "pass"
    c = checks(host("sim-1", simulator=True, cdi_hook=host_records.cdi_hook(exists=False)))
    assert c["hosts.cdi-hook"].status == "fail"
    assert [p.subject for p in c["hosts.cdi-hook"].problems] == ["sim-1"]


def test_a_node_whose_driver_root_was_not_read_is_a_warning() -> None:
    skipped = {"root": "/", "files": [{"item": "dev", "skipped": True}], "devices": {}}
    c = checks(host(driver_root=skipped))["hosts.driver-root"]
    assert c.status == "warn"
    assert c.problems[0].message == "the driver root was not read on this node"


def test_missing_cdi_hook_fails_with_the_package_and_the_path_setting() -> None:
    c = checks(host("gpu-2", cdi_hook=host_records.cdi_hook(exists=False)))["hosts.cdi-hook"]
    assert c.status == "fail"
    (p,) = c.problems
    assert p.subject == "gpu-2"
    assert p.message.startswith(
        "/usr/bin/nvidia-cdi-hook does not exist: the DRA kubelet plugin does not start"
    )
    assert "install nvidia-container-toolkit-base >= 1.16.0" in c.fix
    assert "validate_nvidia_cdi_hook_path" in c.fix


def test_a_configured_hook_path_that_is_not_executable_fails() -> None:
    hook = host_records.cdi_hook("/opt/nvidia/toolkit/nvidia-cdi-hook", mode="0644")
    (p,) = checks(host(cdi_hook=hook))["hosts.cdi-hook"].problems
    assert p.message.startswith(
        "/opt/nvidia/toolkit/nvidia-cdi-hook is not an executable file (mode 0644)"
    )


def test_hosts_checks_runs_both() -> None:
    ids = [c.id for c in vh.hosts_checks([host()])]
    assert "hosts.driver-root" in ids and "hosts.cdi-hook" in ids


@pytest.mark.parametrize(
    ("gpu_operator", "explicit", "root"),
    [
        (False, "", "/"),
        (True, "", OPERATOR_ROOT),
        (False, "/home/kubernetes/bin/nvidia", "/home/kubernetes/bin/nvidia"),
    ],
)
def test_the_filter_is_the_dra_driver_roles_decision(
    gpu_operator: bool, explicit: str, root: str
) -> None:
    inputs = {"gpu_operator": gpu_operator, "nvidia_driver_root": explicit}
    assert dra_filter.dra_driver_root(inputs) == root
    assert dra_filter.FilterModule().filters()["dra_driver_root"] is dra_filter.dra_driver_root


def _role_default(name: str, **inventory: object) -> str:
    """``name`` of roles/validate/defaults/main.yml templated with ``inventory`` (Jinja2
    with the collection's filter and Ansible's ``bool``)."""
    text = yaml.safe_load((ROOT / "roles/validate/defaults/main.yml").read_text())[name]
    env = jinja2.Environment(undefined=jinja2.ChainableUndefined)
    env.filters["dra_driver_root"] = dra_filter.dra_driver_root
    env.filters["bool"] = lambda v: v if isinstance(v, bool) else str(v).lower() in ("true", "1")
    return (
        env.from_string(text.replace("gpufleet.cluster.dra_driver_root", "dra_driver_root"))
        .render(**inventory)
        .strip()
    )


def test_the_validate_default_follows_the_gpu_operator_switch() -> None:
    assert _role_default("validate_nvidia_driver_root") == "/"
    assert _role_default("validate_nvidia_driver_root", dra_driver_gpu_operator=True) == (
        OPERATOR_ROOT
    )
    assert _role_default("validate_nvidia_driver_root", dra_driver_gpu_operator="false") == "/"
    assert (
        _role_default(
            "validate_nvidia_driver_root",
            dra_driver_gpu_operator=True,
            dra_driver_nvidia_driver_root="/opt/drv",
        )
        == "/opt/drv"
    )


def test_the_hook_path_default_follows_the_charts_value() -> None:
    assert _role_default("validate_nvidia_cdi_hook_path") == "/usr/bin/nvidia-cdi-hook"
    extra = {"nvidiaCDIHookPath": "/opt/nvidia/nvidia-cdi-hook"}
    assert _role_default("validate_nvidia_cdi_hook_path", dra_driver_extra_values=extra) == (
        "/opt/nvidia/nvidia-cdi-hook"
    )


def test_the_role_reads_where_the_kubelet_plugin_looks() -> None:
    task = next(
        t
        for t in yaml.safe_load((ROOT / "roles/validate/tasks/read_node.yml").read_text())[0][
            "block"
        ]
        if "gpufleet.cluster.path_stat" in t
    )
    items = task["gpufleet.cluster.path_stat"]["items"]
    env = jinja2.Environment()
    env.filters["dra_driver_root_search_items"] = dra_filter.dra_driver_root_search_items
    rendered = env.from_string(
        items.replace(
            "gpufleet.cluster.dra_driver_root_search_items", "dra_driver_root_search_items"
        )
    ).render()
    want = [f"{d}/libnvidia-ml.so.1".lstrip("/") for d in host_records.LIBRARY_DIRS]
    want += [f"{d}/nvidia-smi".lstrip("/") for d in host_records.BINARY_DIRS]
    assert yaml.safe_load(rendered) == [*want, "dev"]
    assert "usr/lib/libnvidia-ml.so.1" not in rendered
    assert "opt/bin/nvidia-smi" in rendered
    assert not (ROOT / "roles/validate/vars/main.yml").read_text().count("usr/lib64")


def test_the_root_search_filter_refuses_another_file_and_a_non_list() -> None:
    with pytest.raises(AnsibleFilterError, match=r"libcuda\.so\.1.*is not a file"):
        dra_filter.dra_driver_root_search_items(["libcuda.so.1"])
    with pytest.raises(AnsibleFilterError, match="takes a list, not str"):
        dra_filter.dra_driver_root_search_items("nvidia-smi")

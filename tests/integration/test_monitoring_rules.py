"""The monitoring role's files, rendered by the role itself (ansible-playbook on the local
host) and judged by the real promtool built from github.com/prometheus/prometheus at the
version gpufleet/build/releases.yaml pins (``lab/build-binaries --tools prometheus``; the ci
profile builds it): ``promtool check rules``, ``promtool check config`` and
``promtool test rules`` with tests/integration/data/monitoring/gpufleet-dra.rules.test.yml.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpufleet import runner
from gpufleet.build import binaries
from tests.harness.controlplane import ControlPlane

pytestmark = [pytest.mark.integration, pytest.mark.ansible]

DATA = Path(__file__).with_name("data") / "monitoring"
ROLE_FILES = Path(__file__).resolve().parents[2] / "roles" / "monitoring" / "files"
BIN = Path(sys.executable).parent


def promtool() -> Path:
    path = binaries.binary_path("promtool")
    if not path.is_file():
        pytest.fail(
            f"promtool is not built ({path}); run lab/build-binaries --tools prometheus "
            "(scripts/setup does, in the ci profile)"
        )
    return path


def render(tmp_path: Path, *args: str, **extra: object) -> subprocess.CompletedProcess[str]:
    """Run the monitoring role on the local host into ``tmp_path/out``."""
    play = tmp_path / "play.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "render",
                    "hosts": "localhost",
                    "gather_facts": False,
                    "roles": [{"role": "gpufleet.cluster.monitoring"}],
                }
            ]
        )
    )
    variables = {
        "ansible_python_interpreter": sys.executable,
        "monitoring_config_dir": str(tmp_path / "out"),
        "monitoring_promtool": str(promtool()),
        "monitoring_kubelet_targets": [
            {"node": "w1", "address": "10.0.0.11:10250", "gpu_node": True},
            {"node": "cp", "address": "10.0.0.10:10250"},
        ],
        "monitoring_dcgm_exporter_targets": [{"node": "w1", "address": "10.0.0.11:9400"}],
        "monitoring_scheduler_targets": ["10.0.0.10:10259"],
        "monitoring_controller_manager_targets": ["10.0.0.10:10257"],
        "monitoring_apiserver_targets": ["10.0.0.10:6443"],
        "monitoring_object_exporter_targets": ["10.0.0.1:9477"],
        **extra,
    }
    (tmp_path / "vars.yml").write_text(yaml.safe_dump(variables))
    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "HOME": str(Path.home()),
        "ANSIBLE_COLLECTIONS_PATH": str(runner.collection_root().parents[2]),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
    }
    return subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"@{tmp_path / 'vars.yml'}",
            *args,
            str(play),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_rules_render_check_and_pass_their_unit_tests(tmp_path: Path) -> None:
    out = render(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    rules = tmp_path / "out" / "rules" / "gpufleet-dra.rules.yml"
    doc = yaml.safe_load(rules.read_text())
    alerts = {r["alert"] for g in doc["groups"] for r in g["rules"]}
    assert alerts == {
        "DRAClaimLeaked",
        "DRAClaimsAllocatedNotInUse",
        "DRAClaimCreateFailures",
        "DRAClaimPending",
        "DRAPodsUnschedulable",
        "GPUNodeWithoutResourceSlice",
        "GPUNodeDualAdvertised",
        "DRAKubeletPluginDown",
        "DRAPrepareErrors",
        "DRABindingConditionsFailed",
        "DRAAllocatedDeviceIdle",
        "DRAFeatureGateOff",
        "DRAAPINotServed",
    }
    check = subprocess.run(
        [str(promtool()), "check", "rules", str(rules)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 13 rules found" in check.stdout + check.stderr
    # the unit tests of the rules run against the rendered file, next to it
    shutil.copy(DATA / "gpufleet-dra.rules.test.yml", rules.parent)
    test = subprocess.run(
        [str(promtool()), "test", "rules", "gpufleet-dra.rules.test.yml"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=rules.parent,
    )
    print(test.stdout + test.stderr)
    assert test.returncode == 0, test.stdout + test.stderr
    assert "SUCCESS" in test.stdout + test.stderr


def test_scrape_configuration_is_valid_and_names_every_target(tmp_path: Path) -> None:
    out = render(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    config = tmp_path / "out" / "prometheus.yml"
    (tmp_path / "token").write_text("x\n")
    text = config.read_text().replace("/etc/gpufleet/monitoring/token", str(tmp_path / "token"))
    config.write_text(text)
    check = subprocess.run(
        [str(promtool()), "check", "config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    doc = yaml.safe_load(text)
    jobs = {j["job_name"]: j for j in doc["scrape_configs"]}
    assert set(jobs) == {
        "kubelet",
        "kube-scheduler",
        "kube-controller-manager",
        "kube-apiserver",
        "dcgm-exporter",
        "gpufleet-report",
    }
    kubelets = {
        t["labels"]["node"]: (t["targets"], t["labels"]["gpu_node"])
        for t in jobs["kubelet"]["static_configs"]
    }
    assert kubelets == {"w1": (["10.0.0.11:10250"], "true"), "cp": (["10.0.0.10:10250"], "false")}
    assert jobs["kube-scheduler"]["static_configs"][0]["targets"] == ["10.0.0.10:10259"]
    assert jobs["kubelet"]["tls_config"] == {"insecure_skip_verify": True}
    assert jobs["dcgm-exporter"]["static_configs"][0]["labels"] == {"node": "w1"}
    values = yaml.safe_load((tmp_path / "out" / "dcgm-exporter-values.yaml").read_text())
    assert values["kubernetesDRA"] == {"enabled": True}


def test_the_grafana_dashboard_and_its_provider(tmp_path: Path) -> None:
    provisioning = tmp_path / "provisioning" / "dashboards"
    out = render(tmp_path, monitoring_grafana_provisioning_dir=str(provisioning))
    assert out.returncode == 0, out.stdout + out.stderr
    dashboards = tmp_path / "out" / "grafana-dashboards"
    shipped = ROLE_FILES / "gpufleet-dra-dashboard.json"
    assert (dashboards / shipped.name).read_text() == shipped.read_text()
    provider = yaml.safe_load((provisioning / "gpufleet.yaml").read_text())
    assert provider["apiVersion"] == 1
    (entry,) = provider["providers"]
    assert entry["type"] == "file" and entry["folder"] == "GPU fleet"
    assert entry["options"]["path"] == str(dashboards)


def test_the_dashboard_by_default_and_none_when_off(tmp_path: Path) -> None:
    out = render(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "out" / "grafana-dashboards" / "gpufleet-dra-dashboard.json").is_file()
    off = tmp_path / "off"
    off.mkdir()
    out = render(off, monitoring_grafana_dashboard=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (off / "out" / "grafana-dashboards").exists()


def test_second_run_changes_nothing(tmp_path: Path) -> None:
    assert render(tmp_path).returncode == 0
    again = render(tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "changed=0" in again.stdout, again.stdout


def test_short_durations_reach_the_rules(tmp_path: Path) -> None:
    out = render(
        tmp_path,
        monitoring_plugin_down_for="30s",
        monitoring_device_idle_for="1m",
        monitoring_claim_create_failed_for="2m",
        monitoring_binding_conditions_failed_for="3m",
        monitoring_gpu_path_dual_for="4m",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    doc = yaml.safe_load((tmp_path / "out" / "rules" / "gpufleet-dra.rules.yml").read_text())
    rules = {r["alert"]: r for g in doc["groups"] for r in g["rules"]}
    assert rules["DRAKubeletPluginDown"]["for"] == "30s"
    assert rules["DRAAllocatedDeviceIdle"]["for"] == "1m"
    assert rules["DRAClaimCreateFailures"]["for"] == "2m"
    assert rules["DRABindingConditionsFailed"]["for"] == "3m"
    assert rules["GPUNodeDualAdvertised"]["for"] == "4m"
    assert rules["DRAClaimLeaked"]["for"] == "10m"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("monitoring_claim_leaked_for", "ten minutes"),
        # a value that would add labels to the rule in the rendered YAML
        ("monitoring_claim_create_failed_for", "5m\n        labels:\n          severity: none"),
        ("monitoring_binding_conditions_failed_for", ""),
    ],
    ids=["words", "yaml-injection", "empty"],
)
def test_a_bad_duration_is_refused_before_any_file_is_written(
    tmp_path: Path, name: str, value: str
) -> None:
    out = render(tmp_path, **{name: value})
    assert out.returncode != 0
    assert not (tmp_path / "out").exists()
    text = out.stdout + out.stderr
    assert f"{name}=" in text and "is not a Prometheus duration" in text, text
    assert "Traceback" not in text


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("monitoring_scrape_interval", "30s\nremote_write: [{url: 'http://203.0.113.9/'}]"),
        ("monitoring_prometheus_listen", "0.0.0.0:9090\nExecStartPre=/bin/sh -c id"),
        ("monitoring_bearer_token_file", "/t\n  - job_name: extra"),
        ("monitoring_grafana_folder", "GPU\n  - name: extra"),
    ],
    ids=["remote-write", "exec-start-pre", "scrape-job", "grafana-provider"],
)
def test_a_line_break_in_a_value_is_refused_before_any_file_is_written(
    tmp_path: Path, name: str, value: str
) -> None:
    out = render(tmp_path, **{name: value})
    assert out.returncode != 0
    assert not (tmp_path / "out").exists()
    assert f"{name}=" in out.stdout and "control character" in out.stdout, out.stdout


def test_a_node_label_with_quotes_stays_one_label(tmp_path: Path) -> None:
    node = 'w1", "evil": "x\\'
    out = render(
        tmp_path, monitoring_kubelet_targets=[{"node": node, "address": "w1.example:10250"}]
    )
    assert out.returncode == 0, out.stdout + out.stderr
    doc = yaml.safe_load((tmp_path / "out" / "prometheus.yml").read_text())
    (job,) = [j for j in doc["scrape_configs"] if j["job_name"] == "kubelet"]
    assert job["static_configs"] == [
        {"targets": ["w1.example:10250"], "labels": {"node": node, "gpu_node": "false"}}
    ]


def test_check_mode_writes_nothing(tmp_path: Path) -> None:
    out = render(tmp_path, "--check")
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (tmp_path / "out").exists()
    assert "changed=" in out.stdout and "changed=0" not in out.stdout


def test_the_sidecar_configmap_applied_to_a_kube_apiserver(
    tmp_path: Path, apiserver: ControlPlane
) -> None:
    """The role's task itself (kubernetes.core.k8s from the control host) against a real
    kube-apiserver: nothing in check mode, then the ConfigMap the sidecar selects, with the
    dashboard byte for byte under its file name (two runs: a third, for idempotence, would
    take this test past the integration tier's budget on a loaded 2-core runner)."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(str(apiserver.kubeconfig)))
    api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="grafana")))
    extra = {
        "monitoring_grafana_sidecar_configmap": True,
        "monitoring_grafana_sidecar_namespace": "grafana",
        "monitoring_kubeconfig": str(apiserver.kubeconfig),
        "monitoring_promtool": "",
    }
    checked = render(tmp_path, "--check", **extra)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert _sidecar_task_result(checked.stdout) == "changed"  # what a run would do
    # no controller-manager: not even kube-root-ca.crt, so nothing at all
    assert api.list_namespaced_config_map("grafana").items == []
    out = render(tmp_path, **extra)
    assert out.returncode == 0, out.stdout + out.stderr
    cm = api.read_namespaced_config_map("gpufleet-dra-dashboard", "grafana")
    assert cm.metadata.labels == {"grafana_dashboard": "1"}
    assert cm.metadata.annotations == {"grafana_folder": "GPU fleet"}
    shipped = ROLE_FILES / "gpufleet-dra-dashboard.json"
    assert cm.data == {shipped.name: shipped.read_text()}
    assert _sidecar_task_result(out.stdout) == "changed"


def test_a_label_value_kubernetes_refuses_stops_the_role_before_any_change(
    tmp_path: Path,
) -> None:
    """An unquoted ``1`` is a number, which no label holds: the role's first task refuses
    it, naming the variable and the fix, before any file or cluster object (no kubeconfig
    is even read)."""
    out = render(
        tmp_path,
        monitoring_grafana_sidecar_configmap=True,
        monitoring_grafana_sidecar_label_value=1,
        monitoring_kubeconfig=str(tmp_path / "absent.conf"),
    )
    assert out.returncode != 0
    assert "monitoring_grafana_sidecar_label_value=1: is not a string" in out.stdout, out.stdout
    assert "fix: write monitoring_grafana_sidecar_label_value as a quoted label value" in out.stdout
    assert not (tmp_path / "out").exists()


def _sidecar_task_result(stdout: str) -> str:
    """``changed``, ``ok`` or ``skipping`` of the ConfigMap task in a play's output."""
    start = stdout.index("Apply the Grafana dashboard ConfigMap for the dashboard sidecar]")
    section = stdout[start:].split("\nTASK [", 1)[0].split("\nPLAY RECAP", 1)[0]
    return section.split("\n", 2)[1].split(":", 1)[0].strip()

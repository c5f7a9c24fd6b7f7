"""``gpufleet upgrade``: bad input is refused with the option or variable, the value and
the fix, before any host or the cluster is read (real ansible-playbook in check mode: the
upgrade role judges its input in its first play, on the control host; the cluster comes
from a saved snapshot)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet.cli import main
from tests.unit import cluster_snapshot

pytestmark = pytest.mark.ansible

HOSTS = ["cp-a", "gpu-a", "gpu-b"]


def _snapshot(version):
    return cluster_snapshot.snapshot(version, HOSTS[0], HOSTS[1:])


INVENTORY = """
all:
  vars:
{vars}
  children:
    kube_control_plane:
      hosts:
        cp-a:
    kube_node:
      hosts:
        gpu-a:
        gpu-b:
"""


@pytest.fixture
def site(tmp_path, monkeypatch):
    """``make(vars_yaml)`` -> inventory path; snapshots at 1.36.3 and 1.35.4."""
    monkeypatch.setenv("HOME", str(tmp_path))

    def make(variables: str = "    site_name: test") -> str:
        path = tmp_path / "hosts.yml"
        path.write_text(INVENTORY.format(vars=variables))
        return str(path)

    snaps = {}
    for version in ("1.36.3", "1.35.4"):
        snaps[version] = tmp_path / f"snap-{version}.json"
        snaps[version].write_text(json.dumps(_snapshot(version)))

    class Site:
        pass

    s = Site()
    s.make, s.snap, s.tmp = make, snaps, tmp_path
    return s


def run(*args):
    return CliRunner().invoke(main, ["upgrade", *args])


#: The plays of playbooks/upgrade.yml that read the hosts and the cluster (the runner
#: prints "play: NAME" for each play that starts, on a console that is not a terminal).
READ_PLAYS = ("play: Upgrade | Read kubeadm", "play: Upgrade | Plan and preflight")


def refused(result, *parts):
    """Exit 2, every part in the error, a Fix line, no traceback."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    for part in parts:
        assert part in result.stderr, result.stderr
    assert "Fix:" in result.stderr or "fix:" in result.stderr


# ---------------------------------------------------------------- checked before any read


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        # alpha, beta and rc pre-releases are targets (pkgs.k8s.io 1.38.0~beta.0); other forms not
        (["--to", "1.37.3-gamma.1"], ["--to '1.37.3-gamma.1' is a pre-release"]),
        (["--to", "1.37.3-rc"], ["--to '1.37.3-rc' is a pre-release"]),
        (["--to", "1.37.2+build.1"], ["build metadata"]),
        (["--to", "1.39.0"], ["outside the releases"]),
        (["--to", "1.37.2", "--via", "1.36.0-rc"], ["--via '1.36.0-rc' is a pre-release"]),
        (["--to", "1.37.2", "--via", "1.36.3", "--via", "1.36.1"], ["two releases of 1.36"]),
        (["--to", "1.37.2", "--via", "1.37.1"], ["--via 1.37.1 is not between"]),
        (["--to", "1.37.2", "--batch-size", "0"], ["--batch-size='0'"]),
        (["--to", "1.37.2", "--min-gpu-available-percent", "150"], ["--min-gpu-available-percent"]),
        (["--to", "1.37.2", "-e", "upgrade_batch_size=0"], ["upgrade_batch_size='0' must be"]),
        (
            ["--to", "1.37.2", "-e", "upgrade_min_gpu_available_percent=false"],
            ["upgrade_min_gpu_available_percent='False' is not a percentage"],
        ),
        (
            # upgrade_dra_gates defaults to dra_feature_gates_extra: the role judges it so
            ["--to", "1.37.2", "-e", "dra_feature_gates_extra=[a]"],
            ["argument 'upgrade_dra_gates' is of type list", "convert to dict"],
        ),
        (
            ["--to", "1.37.2", "-e", "upgrade_via={a: b}"],
            ["argument 'upgrade_via' is of type dict", "convert to list"],
        ),
        # a single string is a one-item list, as Ansible's list type reads it
        (["--to", "1.37.2", "-e", "upgrade_via=1.36"], ["upgrade_via '1.36' names a minor"]),
        (
            ["--to", "1.37.2", "-e", "dra_feature_gates_features=no-such-feature"],
            ["'no-such-feature'"],
        ),
        (
            ["--to", "1.37.2", "-e", "upgrade_gpu_driver=[a]"],
            ['upgrade_gpu_driver=["a"] is not a non-empty string'],
        ),
        (["--to", "1.37.2", "-e", "upgrade_repo_url=http://mirror/deb/"], ["no {minor}"]),
        (
            ["--to", "1.37.2", "--save-snapshot", "/nonexistent/dir/s.json"],
            ["--save-snapshot", "does not exist"],
        ),
    ],
)
def test_bad_input_is_refused_before_the_cluster_and_hosts_are_read(site, args, parts):
    result = run("-i", site.make(), "--plan", "--kubeconfig", "/nonexistent/kubeconfig", *args)
    refused(result, *parts)
    assert not any(play in result.stderr for play in READ_PLAYS), result.stderr[-2000:]


def test_a_broken_kubeconfig_does_not_hide_a_bad_target(site):
    result = run("-i", site.make(), "--plan", "--to", "1.37", "--kubeconfig", "/nonexistent")
    refused(result, "--to '1.37' names a minor")
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith(("Error:", "Fix:"))]
    assert errors and not any("kubeconfig" in ln for ln in errors), errors


def test_a_malformed_target_is_told_to_give_major_minor_patch(site):
    result = run("-i", site.make(), "--plan", "--to", "abc", "--snapshot", str(site.snap["1.36.3"]))
    refused(result, "--to='abc'", "MAJOR.MINOR.PATCH")
    assert "MAJOR.MINOR[.PATCH]" not in result.stderr


def test_a_missing_kubeconfig_names_the_option_and_the_fix(site):
    result = run("-i", site.make(), "--plan", "--to", "1.37.2", "--kubeconfig", "/nonexistent")
    refused(result, "--kubeconfig '/nonexistent'", "does not exist", "--snapshot FILE")


def test_a_missing_kubeconfig_from_a_variable_names_the_variable(site):
    inv = site.make("    upgrade_kubeconfig: /nonexistent/admin.conf")
    refused(run("-i", inv, "--plan", "--to", "1.37.2"), "upgrade_kubeconfig '/nonexistent")


def test_json_mode_keeps_stdout_empty_on_a_refusal(site):
    result = run(
        "-i", site.make(), "--plan", "--json", "--to", "1.37.2-rc",
        "--snapshot", str(site.snap["1.36.3"]),
    )  # fmt: skip
    refused(result, "pre-release")
    assert result.stdout == ""


# ---------------------------------------------------------------- snapshot files


@pytest.mark.parametrize(
    ("content", "part"),
    [("{not json", "is not JSON"), ("[1, 2]", "holds a JSON list"), ('{"nodes": 3}', "'nodes'")],
)
def test_a_bad_snapshot_file_is_refused(site, content, part):
    path = site.tmp / "bad.json"
    path.write_text(content)
    result = run("-i", site.make(), "--plan", "--to", "1.37.2", "--snapshot", str(path))
    refused(result, f"--snapshot '{path}'", part)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "deep"])
def test_a_snapshot_that_is_a_pipe_a_device_or_too_deep_is_refused(site, kind):
    """A named pipe nobody writes to hung, /dev/zero was read until memory ran out: the
    planner reads at most SNAPSHOT_MAX_BYTES and waits PIPE_TIMEOUT (10 s) for a pipe."""
    import os
    import time

    path = site.tmp / "snap"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "deep":
        path.write_text("[" * 20_000 + "]" * 20_000)
    else:
        path = Path("/dev/zero")
    start = time.monotonic()
    result = run("-i", site.make(), "--plan", "--to", "1.37.2", "--snapshot", str(path))
    refused(result, f"--snapshot '{path}'")
    assert time.monotonic() - start < 120


# ---------------------------------------------------------------- variables as the run reads them


def plan_json(site, inv, *args, version="1.36.3"):
    result = run("-i", inv, "--plan", "--json", "--snapshot", str(site.snap[version]), *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_templated_inventory_values_are_templated_as_ansible_does(site):
    inv = site.make(
        '    site_floor: 40\n    upgrade_batch_size: "{{ 1 + 1 }}"\n'
        '    upgrade_min_gpu_available_percent: "{{ site_floor }}"'
    )
    doc = plan_json(site, inv, "--to", "1.37.2")
    assert doc["batch_size"] == 2
    assert doc["min_gpu_available_percent"] == 40.0
    # 8 devices, floor 40% -> at most 4 drained at once: one node per batch
    assert doc["steps"][0]["worker_serial"] == [1, 1]


def test_a_template_that_cannot_be_rendered_names_the_variable(site):
    inv = site.make('    upgrade_batch_size: "{{ no_such_variable }}"')
    result = run("-i", inv, "--plan", "--to", "1.37.2", "--snapshot", str(site.snap["1.36.3"]))
    # the role's argument specification templates every variable on entry: Ansible names
    # what is undefined
    refused(result, "'no_such_variable' is undefined")


def test_a_single_string_is_a_one_item_list(site):
    doc = plan_json(site, site.make(), "--to", "1.37.2", "-e", "upgrade_via=1.36.3",
                    version="1.35.4")  # fmt: skip
    assert doc["path"] == ["1.36.3", "1.37.2"]


def test_a_set_variable_is_judged_not_replaced_by_the_default(site):
    result = run("-i", site.make("    upgrade_batch_size: 0"), "--plan", "--to", "1.37.2",
                 "--snapshot", str(site.snap["1.36.3"]))  # fmt: skip
    refused(result, "upgrade_batch_size='0' must be at least 1")


def test_upgrade_gpu_driver_is_read_as_the_role_reads_it(site):
    doc = plan_json(site, site.make(), "--to", "1.37.2", "-e", "upgrade_gpu_driver=other.example")
    assert [n["gpu_devices"] for n in doc["nodes"]] == [0, 0, 0]


def test_upgrade_dra_features_wins_over_dra_feature_gates_features(site):
    inv = site.make(
        "    dra_feature_gates_features: [no-such-feature]\n    upgrade_dra_features: []"
    )
    doc = plan_json(site, inv, "--to", "1.37.2")
    assert doc["path"] == ["1.37.2"]


def test_upgrade_dra_gates_is_read_before_dra_feature_gates_extra(site):
    inv = site.make("    upgrade_dra_gates: {NoSuchGate: true}")
    result = run("-i", inv, "--plan", "--to", "1.37.2", "--snapshot", str(site.snap["1.36.3"]))
    refused(result, "upgrade_dra_gates=", "NoSuchGate")


# ---------------------------------------------------------------- names and inventory


def test_a_floor_broken_by_the_option_names_the_option(site):
    result = run("-i", site.make(), "--plan", "--to", "1.37.2", "--snapshot",
                 str(site.snap["1.36.3"]), "--min-gpu-available-percent", "90")  # fmt: skip
    refused(result, "--min-gpu-available-percent=90: draining")


def test_an_inventory_yaml_error_is_shown_not_an_empty_inventory(site):
    path = site.tmp / "broken.yml"
    path.write_text("all:\n  hosts: [\n")
    result = run("-i", str(path), "--plan", "--to", "1.37.2")
    refused(result, "Ansible cannot parse this inventory source", "YAML")
    assert "kube_control_plane" not in result.stderr


def test_a_variable_set_only_for_the_nodes_is_not_what_the_run_plans_with(site):
    # the planning play runs on localhost: group vars of kube_node do not reach it
    inv = site.make()
    text = (
        Path(inv)
        .read_text()
        .replace("    kube_node:\n", "    kube_node:\n      vars:\n        upgrade_batch_size: 2\n")
    )
    Path(inv).write_text(text)
    assert plan_json(site, inv, "--to", "1.37.2")["batch_size"] == 1

"""Flag value parsing and merging (``--feature-gates``, ``--runtime-config``), the
command-line editor, kubelet ``--config`` discovery and the scheduler plugin check.

The value grammar is the one the components parse (see the module docstring of
``kube.flags``); the property tests check the merge contract on generated values.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import command_line as kcl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import kubelet_config as kcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import scheduler_config as schc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    ConfigEditError,
    FlagEdit,
    FlagValueError,
)
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.unit


def effective_gates(value: str | None) -> dict[str, bool]:
    return {e.key: bool(kfl.parse_go_bool(e.value)) for e in kfl.parse_feature_gates(value or "")}


def effective_runtime(value: str | None) -> dict[str, str]:
    return {e.key: e.value for e in kfl.parse_runtime_config(value or "")}


# ------------------------------------------------------------------ parsing


def test_feature_gates_parse_keeps_order_spelling_and_skips_empty_segments() -> None:
    entries = kfl.parse_feature_gates("A=true,, B = False ,C=1,")
    assert [(e.key, e.value, e.token) for e in entries] == [
        ("A", "true", "A=true"),
        ("B", "False", " B = False "),
        ("C", "1", "C=1"),
    ]


@pytest.mark.parametrize(
    ("value", "bad"),
    [
        ("A=true,DynamicResourceAllocation", "DynamicResourceAllocation"),
        ("A=yes", "'yes'"),
        ("=true", "''"),
        ("Dynamic Resource=true", "Dynamic Resource"),
        ("A=true, ,B=false", "' '"),
    ],
)
def test_malformed_feature_gates_error_names_the_text(value: str, bad: str) -> None:
    with pytest.raises(FlagValueError) as err:
        kfl.parse_feature_gates(value, "ClusterConfiguration apiServer.extraArgs feature-gates")
    msg = str(err.value)
    assert repr(value) in msg
    assert bad in msg
    assert "ClusterConfiguration apiServer.extraArgs feature-gates" in msg
    assert "fix:" in msg


def test_runtime_config_parse_bare_key_and_api_keys() -> None:
    entries = kfl.parse_runtime_config("api/all=false,resource.k8s.io/v1beta1,g.io/v1/things=0")
    assert [(e.key, e.value) for e in entries] == [
        ("api/all", "false"),
        ("resource.k8s.io/v1beta1", ""),
        ("g.io/v1/things", "0"),
    ]


@pytest.mark.parametrize(
    ("value", "bad"),
    [
        ("api/all", "api/all takes exactly true or false"),  # MergeAPIResourceConfigs
        ("api/all=1", "api/all takes exactly true or false"),
        ("resource.k8s.io=true", "'resource.k8s.io' is not group/version"),
        ("a/b/c/d=true", "'a/b/c/d' is not group/version"),
        ("resource.k8s.io/v1/DeviceClasses=true", "lower case"),
        ("resource.k8s.io/v1beta1=on", "'on' of resource.k8s.io/v1beta1 is not a boolean"),
        ("=true", "has no key"),
    ],
)
def test_malformed_runtime_config_error_names_the_text(value: str, bad: str) -> None:
    with pytest.raises(FlagValueError) as err:
        kfl.parse_runtime_config(value)
    assert repr(value) in str(err.value)
    assert bad in str(err.value)


# ------------------------------------------------------------------ merging


def test_merge_feature_gates_sets_removes_and_keeps_unrelated_in_place() -> None:
    edit = kfl.merge_feature_gates(
        "NodeSwap=true,DRAControlPlaneController=true,DRAPrioritizedList=False,Foo=1",
        {"DRAPrioritizedList": True, "DynamicResourceAllocation": True},
        {"DRAControlPlaneController"},
    )
    assert edit.new == "NodeSwap=true,DRAPrioritizedList=true,Foo=1,DynamicResourceAllocation=true"
    assert [(c.what, c.old, c.new) for c in edit.changes] == [
        ("DRAControlPlaneController", "true", None),
        ("DRAPrioritizedList", "False", "true"),
        ("DynamicResourceAllocation", None, "true"),
    ]


def test_merge_keeps_an_equal_value_in_its_own_spelling() -> None:
    edit = kfl.merge_feature_gates("A=True, B=1", {"A": True, "B": True}, ())
    assert not edit.changed
    assert edit.new == "A=True, B=1"


def test_merge_to_nothing_means_remove_the_flag() -> None:
    edit = kfl.merge_feature_gates(
        "DRAControlPlaneController=true", {}, {"DRAControlPlaneController"}
    )
    assert edit.new is None and edit.changed


def test_duplicate_wanted_gate_collapses_to_one_entry() -> None:
    edit = kfl.merge_feature_gates("A=false,B=true,A=true", {"A": True}, ())
    # the last A counts (featureGate.Set fills one map); the earlier one goes
    assert edit.new == "B=true,A=true"
    assert [(c.what, c.old, c.new) for c in edit.changes] == [("A", "false", None)]


def test_runtime_config_absent_group_version_removes_its_resources() -> None:
    edit = kfl.merge_runtime_config(
        "api/beta=false,resource.k8s.io/v1alpha3=true,resource.k8s.io/v1alpha3/devicetaintrules=true,"
        "resource.k8s.io/v1alpha30=true",
        {"resource.k8s.io/v1beta1": "true"},
        {"resource.k8s.io/v1alpha3"},
    )
    assert edit.new == "api/beta=false,resource.k8s.io/v1alpha30=true,resource.k8s.io/v1beta1=true"


def test_runtime_config_bare_key_counts_as_true() -> None:
    edit = kfl.merge_runtime_config("resource.k8s.io/v1beta1", {"resource.k8s.io/v1beta1": "true"})
    assert not edit.changed


def test_merge_refuses_a_name_both_wanted_and_absent() -> None:
    with pytest.raises(ConfigEditError, match="both wanted and absent"):
        kfl.merge_feature_gates("", {"A": True}, {"A"})
    with pytest.raises(ConfigEditError, match="both wanted and absent"):
        kfl.merge_runtime_config("", {"g.io/v1/x": "true"}, {"g.io/v1"})


# ------------------------------------------------------------------ FlagEdit inputs


def test_flag_edit_from_params_accepts_go_bool_strings_and_normalises_runtime_values() -> None:
    edit = FlagEdit.from_params(
        {
            "feature_gates": {"DynamicResourceAllocation": "True"},
            "runtime_config": {"resource.k8s.io/v1beta1": True, "resource.k8s.io/v1beta2": "1"},
            "absent_runtime_config": ["resource.k8s.io/v1alpha3"],
        },
        "apiserver",
    )
    assert edit.feature_gates == {"DynamicResourceAllocation": True}
    assert edit.runtime_config == {
        "resource.k8s.io/v1beta1": "true",
        "resource.k8s.io/v1beta2": "true",
    }


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"feature_gates": {"DRAAdminAccess": "yes"}},
            "apiserver.feature_gates.DRAAdminAccess='yes'",
        ),
        ({"feature_gates": {"DRA-Admin": True}}, "apiserver.feature_gates: 'DRA-Admin'"),
        ({"feature_gates": ["A"]}, "apiserver.feature_gates=['A'] is not a mapping"),
        (
            {"runtime_config": {"resource.k8s.io": "true"}},
            "apiserver.runtime_config: 'resource.k8s.io'",
        ),
        (
            {"feature_gates": {"A": True}, "absent_feature_gates": ["A"]},
            "feature gate(s) A are both",
        ),
        (
            {
                "runtime_config": {"resource.k8s.io/v1alpha3": "true"},
                "absent_runtime_config": ["resource.k8s.io/v1alpha3"],
            },
            "resource.k8s.io/v1alpha3 are both set and absent",
        ),
    ],
)
def test_bad_input_names_variable_value_and_fix(params: dict, expected: str) -> None:
    with pytest.raises(ConfigEditError) as err:
        FlagEdit.from_params(params, "apiserver")
    assert expected in str(err.value)
    assert "fix:" in str(err.value)


# ------------------------------------------------------------------ command lines


def test_edit_command_merges_duplicate_flags_into_the_last_and_keeps_the_form() -> None:
    argv = [
        "kube-controller-manager",
        "--feature-gates=A=true",
        "--bind-address=127.0.0.1",
        "--feature-gates",
        "B=false",
    ]
    new, changes = kcl.edit_command(argv, FlagEdit({"DynamicResourceAllocation": True}), "kcm")
    assert new == [
        "kube-controller-manager",
        "--bind-address=127.0.0.1",
        "--feature-gates",
        "A=true,B=false,DynamicResourceAllocation=true",
    ]
    assert ("--feature-gates", "A=true", None) in [(c.what, c.old, c.new) for c in changes]


def test_edit_command_removes_an_emptied_flag_and_appends_a_missing_one() -> None:
    argv = ["kube-apiserver", "--feature-gates=DRAControlPlaneController=true", "--v=2"]
    edit = FlagEdit(
        absent_feature_gates=frozenset({"DRAControlPlaneController"}),
        runtime_config={"resource.k8s.io/v1beta1": "true"},
    )
    new, _ = kcl.edit_command(argv, edit)
    assert new == ["kube-apiserver", "--v=2", "--runtime-config=resource.k8s.io/v1beta1=true"]


def test_edit_command_without_anything_to_do_leaves_duplicates_alone() -> None:
    argv = ["kube-scheduler", "--feature-gates=A=true", "--feature-gates=A=true"]
    assert kcl.edit_command(argv, FlagEdit()) == (argv, ())


# ------------------------------------------------------------------ properties

GATE = st.from_regex(r"[A-Z][A-Za-z0-9]{0,8}", fullmatch=True)
GO_BOOL = st.sampled_from(sorted(kfl._GO_TRUE | kfl._GO_FALSE))
GATE_TOKEN = st.builds(
    lambda k, v, pad: f"{pad}{k}={v}{pad}", GATE, GO_BOOL, st.sampled_from(["", " "])
)
GATE_VALUE = st.lists(GATE_TOKEN, max_size=8).map(",".join)


@st.composite
def gate_merges(draw: st.DrawFn) -> tuple[str, dict[str, bool], set[str]]:
    value = draw(GATE_VALUE)
    present = sorted(effective_gates(value))
    pool = st.sampled_from(present) | GATE if present else GATE
    wanted = draw(st.dictionaries(pool, st.booleans(), max_size=4))
    absent = draw(st.sets(pool, max_size=4)) - set(wanted)
    return value, wanted, absent


@given(gate_merges())
@settings(max_examples=300, deadline=None)
def test_property_feature_gate_merge(case: tuple[str, dict[str, bool], set[str]]) -> None:
    value, wanted, absent = case
    once = kfl.merge_feature_gates(value, wanted, absent)
    twice = kfl.merge_feature_gates(once.new, wanted, absent)
    # idempotent: applying twice is applying once
    assert twice.new == once.new and not twice.changed
    before, after = effective_gates(value), effective_gates(once.new)
    # wanted values hold, absent names are gone
    assert all(after[k] is v for k, v in wanted.items())
    assert not set(after) & absent
    # unrelated gates keep their value, their spelling and their order
    unrelated = [
        e.token for e in kfl.parse_feature_gates(value) if e.key not in set(wanted) | absent
    ]
    kept = [e.token for e in kfl.parse_feature_gates(once.new or "") if e.key not in wanted]
    assert kept == unrelated
    assert {k: after[k] for k in before if k not in wanted and k not in absent} == {
        k: v for k, v in before.items() if k not in wanted and k not in absent
    }
    # a change is reported exactly when the text changes
    assert once.changed == (once.new != value)


GROUP = st.sampled_from(["resource.k8s.io", "apps", "batch", "g.example.com"])
VERSION = st.sampled_from(["v1", "v1beta1", "v1beta2", "v1alpha3", "v2"])
RESOURCE = st.sampled_from(["deviceclasses", "devicetaintrules", "jobs"])
GV = st.builds(lambda g, v: f"{g}/{v}", GROUP, VERSION)
RC_KEY = GV | st.builds(lambda gv, r: f"{gv}/{r}", GV, RESOURCE)
RC_TOKEN = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", RC_KEY, GO_BOOL),
    RC_KEY,
    st.sampled_from(["api/all=false", "api/beta=true", "api/alpha=false"]),
)
RC_VALUE = st.lists(RC_TOKEN, max_size=8).map(",".join)


@st.composite
def runtime_merges(draw: st.DrawFn) -> tuple[str, dict[str, str], set[str]]:
    value = draw(RC_VALUE)
    absent = draw(st.sets(GV, max_size=3))
    candidates = [
        k
        for k in draw(st.lists(RC_KEY, max_size=4))
        if not any(k == a or k.startswith(a + "/") for a in absent)
    ]
    wanted = {k: draw(st.sampled_from(["true", "false"])) for k in candidates}
    return value, wanted, absent


@given(runtime_merges())
@settings(max_examples=300, deadline=None)
def test_property_runtime_config_merge(case: tuple[str, dict[str, str], set[str]]) -> None:
    value, wanted, absent = case
    once = kfl.merge_runtime_config(value, wanted, absent)
    twice = kfl.merge_runtime_config(once.new, wanted, absent)
    assert twice.new == once.new and not twice.changed

    def gone(key: str) -> bool:
        return any(key == a or key.startswith(a + "/") for a in absent)

    after = effective_runtime(once.new)
    assert not [k for k in after if gone(k)]
    assert all(kfl._rc_enabled(after[k]) == (v == "true") for k, v in wanted.items())
    unrelated = [
        e.token for e in kfl.parse_runtime_config(value) if e.key not in wanted and not gone(e.key)
    ]
    kept = [e.token for e in kfl.parse_runtime_config(once.new or "") if e.key not in wanted]
    assert kept == unrelated


@given(
    st.lists(
        st.one_of(GATE_VALUE, st.sampled_from(["--v=2", "--bind-address=0.0.0.0"])), max_size=4
    ),
    gate_merges(),
)
@settings(max_examples=200, deadline=None)
def test_property_command_edit(
    flags: list[str], case: tuple[str, dict[str, bool], set[str]]
) -> None:
    _, wanted, absent = case
    argv = ["kube-scheduler"] + [f if f.startswith("--") else f"--feature-gates={f}" for f in flags]
    edit = FlagEdit(wanted, frozenset(absent))
    once, _ = kcl.edit_command(argv, edit)
    twice, changes = kcl.edit_command(once, edit)
    assert twice == once and changes == ()
    before = kcl.command_flags(argv, "t").feature_gates
    after = kcl.command_flags(once, "t").feature_gates
    expected = {k: v for k, v in before.items() if k not in absent} | wanted
    assert after == expected
    assert [a for a in once if not a.startswith("--feature-gates")] == [
        a for a in argv if not a.startswith("--feature-gates")
    ]
    count = sum(a.startswith("--feature-gates") for a in once)
    if not edit.touches_feature_gates:
        assert once == argv
    else:
        assert count == 1 if after else count <= 1


# ------------------------------------------------------------------ kubelet --config discovery


def test_kubelet_config_path_from_cmdline_last_wins_and_both_forms() -> None:
    argv = [
        "/usr/bin/kubelet",
        "--config=/var/lib/kubelet/config.yaml",
        "--v=2",
        "--config",
        "/etc/k/c.yaml",
    ]
    assert kcfg.kubelet_config_path_from_cmdline(argv) == "/etc/k/c.yaml"
    assert kcfg.kubelet_config_path_from_cmdline(["/usr/bin/kubelet", "--v=2"]) is None
    # "--config-dir" is another flag
    assert (
        kcfg.kubelet_config_path_from_cmdline(["kubelet", "--config-dir=/etc/kubelet.conf.d"])
        is None
    )


# The kubeadm systemd drop-in as packaged by kubernetes/release
# (cmd/krel/templates/latest/kubeadm/10-kubeadm.conf), comments left out.
KUBEADM_DROPIN = (
    "# /usr/lib/systemd/system/kubelet.service\n"
    "[Unit]\n"
    "Description=kubelet: The Kubernetes Node Agent\n"
    "\n"
    "[Service]\n"
    "ExecStart=/usr/bin/kubelet\n"
    "Restart=always\n"
    "\n"
    "# /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf\n"
    "[Service]\n"
    'Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/'
    'bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"\n'
    'Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"\n'
    "EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\n"
    "EnvironmentFile=-/etc/default/kubelet\n"
    "ExecStart=\n"
    "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS "
    "$KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS\n"
)


def test_kubelet_config_from_systemd_default_and_overrides() -> None:
    files = {"/var/lib/kubelet/kubeadm-flags.env": None, "/etc/default/kubelet": None}
    assert (
        kcfg.kubelet_config_path_from_systemd(KUBEADM_DROPIN, files)
        == "/var/lib/kubelet/config.yaml"
    )
    files["/etc/default/kubelet"] = (
        'KUBELET_EXTRA_ARGS="--node-ip=10.0.0.5 --config=/etc/kubelet/custom.yaml"\n'
    )
    assert (
        kcfg.kubelet_config_path_from_systemd(KUBEADM_DROPIN, files) == "/etc/kubelet/custom.yaml"
    )
    argv = kcfg.kubelet_argv_from_systemd(KUBEADM_DROPIN, files)
    assert argv[0] == "/usr/bin/kubelet"
    assert "--node-ip=10.0.0.5" in argv


def test_environment_file_beats_environment_setting() -> None:
    unit = KUBEADM_DROPIN.replace(
        "EnvironmentFile=-/etc/default/kubelet",
        'EnvironmentFile=-/etc/default/kubelet\nEnvironment="KUBELET_CONFIG_ARGS=--config=/from/environment.yaml"',
    )
    files = {"/etc/default/kubelet": "KUBELET_CONFIG_ARGS=--config=/from/file.yaml\n"}
    assert kcfg.kubelet_config_path_from_systemd(unit, files) == "/from/file.yaml"


def test_missing_required_environment_file_is_an_error() -> None:
    unit = KUBEADM_DROPIN.replace(
        "EnvironmentFile=-/etc/default/kubelet", "EnvironmentFile=/etc/default/kubelet"
    )
    with pytest.raises(ConfigEditError, match="EnvironmentFile=/etc/default/kubelet is missing"):
        kcfg.kubelet_argv_from_systemd(unit, {})


def test_expand_exec_start_splits_dollar_words_and_not_braced_ones() -> None:
    env = {"A": "--x=1 --y='two words'", "B": "b c"}
    assert kcfg.expand_exec_start("-/usr/bin/kubelet $A --z=${B} $UNSET", env) == [
        "/usr/bin/kubelet",
        "--x=1",
        "--y=two words",
        "--z=b c",
    ]


# ------------------------------------------------------------------ scheduler configuration

SCHED = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
profiles:
- schedulerName: default-scheduler
- schedulerName: gpu-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: NodeResourcesFit
      - name: DefaultPreemption
      disabled:
      - name: '*'
    filter:
      disabled:
      - name: DynamicResources
    score:
      disabled:
      - name: '*'
"""


def test_scheduler_config_without_profiles_has_dynamic_resources() -> None:
    text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    assert schc.scheduler_config_has_dynamic_resources(text)
    assert not schc.enable_dynamic_resources(text).changed


def test_enable_dynamic_resources_fixes_star_and_named_disables() -> None:
    assert not schc.scheduler_config_has_dynamic_resources(SCHED)
    result = schc.enable_dynamic_resources(SCHED)
    assert schc.scheduler_config_has_dynamic_resources(result.text)
    data = kce.yaml.safe_load(result.text)
    plugins = data["profiles"][1]["plugins"]
    # placed before DefaultPreemption, as the default plugin set has it
    assert plugins["multiPoint"]["enabled"] == [
        {"name": "NodeResourcesFit"},
        {"name": "DynamicResources"},
        {"name": "DefaultPreemption"},
    ]
    assert "disabled" not in plugins["filter"]
    # score is optional for DRA and older releases lack DynamicResources scoring: untouched
    assert plugins["score"] == {"disabled": [{"name": "*"}]}
    assert data["profiles"][0] == {"schedulerName": "default-scheduler"}
    assert data["clientConnection"] == {"kubeconfig": "/etc/kubernetes/scheduler.conf"}
    assert not schc.enable_dynamic_resources(result.text).changed


def test_scheduler_config_of_an_old_api_is_refused() -> None:
    text = "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n"
    with pytest.raises(ConfigEditError, match=r"kubescheduler\.config\.k8s\.io/v1"):
        schc.scheduler_config_has_dynamic_resources(text)

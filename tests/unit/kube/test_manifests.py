"""Editing kubeadm ClusterConfiguration and static pod manifests
(``plugins/module_utils/kube/manifests.py``); KubeletConfiguration edits are in
``test_kubelet_config.py``.

Every document here was written by a real kubeadm (``data/kubeadm/<version>/``, made by
``data/kubeadm/regenerate.sh`` from the inputs in ``<version>/input/``):

* 1.37.2: ``kubeadm.k8s.io/v1beta4`` (extraArgs a list, repeated names allowed);
* 1.33.13: DRA beta, plus a ``v1beta3`` input migrated by ``kubeadm config migrate``;
* 1.30.14: the last kubeadm that stores ``kubeadm.k8s.io/v1beta3`` (extraArgs a map).

The field cases of the project's reference notes (hand-added manifest flags lost at
upgrade, removed gates, stale runtime-config) are tests at the end.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import kubelet_config as kcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    ConfigEditError,
    FlagEdit,
)

from tests.unit.kube.kubeadm_files import DRA, GENERATED, changed_lines, configmap_data, text

pytestmark = pytest.mark.unit

APISERVER, CM, SCHEDULER = kce.COMPONENTS

MANIFESTS = [(v, var, c) for v, var in GENERATED for c in kce.COMPONENTS]


def cluster_configuration(version: str, variant: str) -> str:
    return configmap_data(version, variant, "kubeadm-config", "ClusterConfiguration")


def manifest(version: str, variant: str, component: str) -> str:
    return text(version, variant, "manifests", f"{component}.yaml")


def require(version: str, variant: str) -> None:
    if (version, variant) not in GENERATED:
        pytest.fail(
            f"fixture {version}/{variant} is missing; regenerate it with "
            f"tests/unit/data/kubeadm/regenerate.sh --build {version}"
        )


def container(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in doc["spec"]["containers"] if c["name"] == name)


def without_command(doc_text: str, component: str) -> dict[str, Any]:
    doc = yaml.safe_load(doc_text)
    del container(doc, component)["command"]
    return doc


DRA_APISERVER = FlagEdit(
    feature_gates=DRA.feature_gates,
    absent_feature_gates=DRA.absent_feature_gates,
    runtime_config={"resource.k8s.io/v1beta1": "true"},
    absent_runtime_config=frozenset({"resource.k8s.io/v1alpha3"}),
)
EDITS = {APISERVER: DRA_APISERVER, CM: DRA, SCHEDULER: DRA}


def test_fixtures_cover_both_kubeadm_config_apis() -> None:
    apis = {yaml.safe_load(cluster_configuration(v, var))["apiVersion"] for v, var in GENERATED}
    assert {"kubeadm.k8s.io/v1beta4", "kubeadm.k8s.io/v1beta3"} <= apis, (
        f"generated fixtures {GENERATED} lack a kubeadm API; run regenerate.sh --build"
    )


# ------------------------------------------------------------------ static pod manifests


@pytest.mark.parametrize(("version", "variant", "component"), MANIFESTS)
def test_manifest_edit_touches_only_the_command_flags(
    version: str, variant: str, component: str
) -> None:
    before = manifest(version, variant, component)
    result = kce.edit_static_pod_manifest(before, component, EDITS[component])
    assert result.changed
    # nothing outside the command changes, parsed ...
    assert without_command(result.text, component) == without_command(before, component)
    # ... nor in the text: every changed line is a --feature-gates/--runtime-config item
    for line in changed_lines(before, result.text):
        assert line[1:].strip().startswith(("- --feature-gates=", "- --runtime-config=")), line
    # the other command items keep their order
    old_cmd = container(yaml.safe_load(before), component)["command"]
    new_cmd = container(yaml.safe_load(result.text), component)["command"]
    managed = ("--feature-gates", "--runtime-config")
    assert [a for a in new_cmd if not a.startswith(managed)] == [
        a for a in old_cmd if not a.startswith(managed)
    ]
    flags = kce.static_pod_flags(result.text, component)
    assert flags.feature_gates["DynamicResourceAllocation"] is True
    assert flags.feature_gates["DRAPrioritizedList"] is True
    assert "DRAControlPlaneController" not in flags.feature_gates
    if component == APISERVER:
        assert flags.runtime_config["resource.k8s.io/v1beta1"] == "true"
        assert not [k for k in flags.runtime_config if k.startswith("resource.k8s.io/v1alpha3")]
    # idempotent
    assert not kce.edit_static_pod_manifest(result.text, component, EDITS[component]).changed


def test_manifest_flag_is_appended_after_the_last_command_item() -> None:
    before = manifest("1.37.2", "defaults", SCHEDULER)
    result = kce.edit_static_pod_manifest(before, SCHEDULER, FlagEdit({"DRAPrioritizedList": True}))
    assert changed_lines(before, result.text) == ["+    - --feature-gates=DRAPrioritizedList=true"]
    command = container(yaml.safe_load(result.text), SCHEDULER)["command"]
    assert command[-1] == "--feature-gates=DRAPrioritizedList=true"
    assert command[:-1] == container(yaml.safe_load(before), SCHEDULER)["command"]


def test_manifest_repeated_feature_gates_from_kubeadm_are_merged_into_the_last() -> None:
    # kubeadm 1.37 writes one --feature-gates per repeated v1beta4 extraArgs item
    before = manifest("1.37.2", "dra", APISERVER)
    old_cmd = container(yaml.safe_load(before), APISERVER)["command"]
    assert sum(a.startswith("--feature-gates=") for a in old_cmd) == 2
    result = kce.edit_static_pod_manifest(before, APISERVER, FlagEdit({"DRAPrioritizedList": True}))
    new_cmd = container(yaml.safe_load(result.text), APISERVER)["command"]
    gates = [a for a in new_cmd if a.startswith("--feature-gates=")]
    assert gates == [
        "--feature-gates=DRAControlPlaneController=true,DRAAdminAccess=true,"
        "DRADeviceTaints=true,DRAPrioritizedList=true"
    ]
    # it sits where the last one was
    last = max(i for i, a in enumerate(old_cmd) if a.startswith("--feature-gates="))
    assert new_cmd.index(gates[0]) == last - 1
    dropped = [c for c in result.changes if c.what == "--feature-gates" and c.new is None]
    assert [c.old for c in dropped] == ["DRAControlPlaneController=true,DRAAdminAccess=true"]


def test_manifest_flag_left_empty_is_removed() -> None:
    before = manifest("1.37.2", "dra", CM)
    result = kce.edit_static_pod_manifest(
        before, CM, FlagEdit(absent_feature_gates=frozenset({"DRAControlPlaneController"}))
    )
    assert changed_lines(before, result.text) == [
        "-    - --feature-gates=DRAControlPlaneController=true"
    ]
    assert (
        CM + " command --feature-gates",
        "--feature-gates",
        "no entry left; flag removed",
    ) in [(c.where, c.what, c.why) for c in result.changes]


def test_manifest_without_edits_is_returned_unchanged() -> None:
    before = manifest("1.37.2", "dra", APISERVER)
    result = kce.edit_static_pod_manifest(before, APISERVER, FlagEdit())
    assert result.text is before and not result.changed


def test_manifest_in_flow_style_is_redumped_with_the_same_content() -> None:
    doc = yaml.safe_load(manifest("1.37.2", "defaults", SCHEDULER))
    flow = yaml.safe_dump(doc, default_flow_style=True, sort_keys=False)
    result = kce.edit_static_pod_manifest(flow, SCHEDULER, FlagEdit({"DRAPrioritizedList": True}))
    assert without_command(result.text, SCHEDULER) == without_command(flow, SCHEDULER)
    assert kce.static_pod_flags(result.text, SCHEDULER).feature_gates == {
        "DRAPrioritizedList": True
    }


@pytest.mark.parametrize(
    ("component", "edit", "message"),
    [
        ("etcd", FlagEdit({"A": True}), "component='etcd' is not a kubeadm static pod component"),
        (
            SCHEDULER,
            FlagEdit(runtime_config={"g.io/v1": "true"}),
            "runtime-config is a kube-apiserver",
        ),
        (APISERVER, FlagEdit({"A": True}), "no container named kube-apiserver"),
    ],
)
def test_manifest_errors_name_the_problem(component: str, edit: FlagEdit, message: str) -> None:
    source = manifest("1.37.2", "defaults", SCHEDULER)
    with pytest.raises(ConfigEditError, match=message):
        kce.edit_static_pod_manifest(source, component, edit)


def test_manifest_with_malformed_gates_names_the_value() -> None:
    source = manifest("1.37.2", "defaults", SCHEDULER).replace(
        "    - --leader-elect=true\n",
        "    - --leader-elect=true\n    - --feature-gates=DRAAdminAccess\n",
    )
    with pytest.raises(ConfigEditError) as err:
        kce.edit_static_pod_manifest(source, SCHEDULER, DRA)
    assert "'DRAAdminAccess'" in str(err.value) and "kube-scheduler command" in str(err.value)


# ------------------------------------------------------------------ ClusterConfiguration


@pytest.mark.parametrize(("version", "variant"), GENERATED)
def test_kubeadm_manifests_carry_what_the_cluster_configuration_says(
    version: str, variant: str
) -> None:
    """Our reading of extraArgs (map, list, repeated items) matches what kubeadm wrote."""
    stored = kce.cluster_configuration_flags(cluster_configuration(version, variant))
    for component in kce.COMPONENTS:
        assert (
            kce.static_pod_flags(manifest(version, variant, component), component)
            == (stored[component])
        )


@pytest.mark.parametrize(("version", "variant"), GENERATED)
def test_cluster_configuration_edit(version: str, variant: str) -> None:
    before = cluster_configuration(version, variant)
    result = kce.edit_cluster_configuration(before, EDITS)
    assert result.changed
    old, new = yaml.safe_load(before), yaml.safe_load(result.text)
    sections = set(kce.CLUSTER_CONFIGURATION_SECTIONS.values())
    assert {k: v for k, v in new.items() if k not in sections} == {
        k: v for k, v in old.items() if k not in sections
    }
    assert list(new) == list(old)  # no key reordered
    flags = kce.cluster_configuration_flags(result.text)
    for component in kce.COMPONENTS:
        assert flags[component].feature_gates["DynamicResourceAllocation"] is True
        assert "DRAControlPlaneController" not in flags[component].feature_gates
    assert flags[APISERVER].runtime_config.get("resource.k8s.io/v1beta1") == "true"
    assert not kce.edit_cluster_configuration(result.text, EDITS).changed
    # every line that changed is a section header or an extraArgs line
    extra_args_line = re.compile(
        r"^[+-](apiServer|controllerManager|scheduler):( \{\})?$"
        r"|^[+-]  (extraArgs:.*|- name: .*|  value: .*|  (feature-gates|runtime-config): .*)$"
    )
    for line in changed_lines(before, result.text):
        assert extra_args_line.match(line), line


def test_v1beta4_list_keeps_unrelated_items_and_merges_repeated_ones() -> None:
    before = cluster_configuration("1.37.2", "dra")
    result = kce.edit_cluster_configuration(before, EDITS)
    data = yaml.safe_load(result.text)
    assert data["apiServer"]["extraArgs"] == [
        {"name": "runtime-config", "value": "api/alpha=false,resource.k8s.io/v1beta1=true"},
        {"name": "audit-log-maxage", "value": "30"},
        {
            "name": "feature-gates",
            "value": "DRAAdminAccess=true,DRADeviceTaints=true,"
            "DynamicResourceAllocation=true,DRAPrioritizedList=true",
        },
    ]
    assert data["controllerManager"]["extraArgs"] == [
        {"name": "bind-address", "value": "0.0.0.0"},
        {
            "name": "feature-gates",
            "value": "DynamicResourceAllocation=true,DRAPrioritizedList=true",
        },
    ]
    merged = [c for c in result.changes if c.what == "--feature-gates" and c.new is None]
    assert [(c.where, c.old) for c in merged] == [
        (
            "ClusterConfiguration apiServer.extraArgs feature-gates",
            "DRAControlPlaneController=true,DRAAdminAccess=true",
        )
    ]


def test_v1beta4_without_extra_args_gets_a_list() -> None:
    before = cluster_configuration("1.37.2", "defaults")
    assert yaml.safe_load(before)["apiServer"] == {}
    result = kce.edit_cluster_configuration(before, {APISERVER: DRA_APISERVER})
    assert yaml.safe_load(result.text)["apiServer"] == {
        "extraArgs": [
            {
                "name": "feature-gates",
                "value": "DynamicResourceAllocation=true,DRAPrioritizedList=true",
            },
            {"name": "runtime-config", "value": "resource.k8s.io/v1beta1=true"},
        ]
    }
    assert yaml.safe_load(result.text)["scheduler"] == {}


def test_v1beta3_map_keeps_key_order_and_appends_new_keys() -> None:
    require("1.30.14", "dra")
    before = cluster_configuration("1.30.14", "dra")
    assert yaml.safe_load(before)["apiVersion"] == "kubeadm.k8s.io/v1beta3"
    edit = FlagEdit(
        feature_gates={"DRAPrioritizedList": True},
        absent_runtime_config=frozenset({"resource.k8s.io/v1alpha2"}),
    )
    result = kce.edit_cluster_configuration(before, {APISERVER: edit, SCHEDULER: DRA})
    old = yaml.safe_load(before)["apiServer"]["extraArgs"]
    new = yaml.safe_load(result.text)["apiServer"]["extraArgs"]
    assert list(new) == [k for k in old if k != "runtime-config"]
    assert new["feature-gates"] == old["feature-gates"] + ",DRAPrioritizedList=true"
    assert new["audit-log-maxage"] == old["audit-log-maxage"]
    assert not kce.edit_cluster_configuration(
        result.text, {APISERVER: edit, SCHEDULER: DRA}
    ).changed


def test_v1beta3_input_reads_the_same_as_kubeadm_migrated_it() -> None:
    """kubeadm 1.33 still reads v1beta3; `kubeadm config migrate` output agrees with our
    reading of the v1beta3 map, and both edit to the same flags."""
    require("1.33.13", "v1beta3")
    original = text("1.33.13", "input", "v1beta3.yaml")
    migrated = text("1.33.13", "v1beta3", "migrated.yaml")
    assert "apiVersion: kubeadm.k8s.io/v1beta4" in migrated
    assert kce.cluster_configuration_flags(original) == kce.cluster_configuration_flags(migrated)
    one = kce.edit_cluster_configuration(original, EDITS).text
    two = kce.edit_cluster_configuration(migrated, EDITS).text
    assert kce.cluster_configuration_flags(one) == kce.cluster_configuration_flags(two)


def test_kubeadm_config_file_stream_keeps_other_documents_verbatim() -> None:
    source = text("1.37.2", "input", "dra.yaml")
    result = kce.edit_cluster_configuration(source, {SCHEDULER: DRA})
    before_docs = source.split("\n---\n")
    after_docs = result.text.split("\n---\n")
    assert len(after_docs) == len(before_docs) == 3
    assert after_docs[0] == before_docs[0]  # InitConfiguration, comments included
    assert after_docs[2] == before_docs[2]  # KubeletConfiguration
    assert kce.cluster_configuration_flags(result.text)[SCHEDULER].feature_gates == {
        "DRAPrioritizedList": True,
        "DynamicResourceAllocation": True,
    }


def test_experimental_v1_list_with_merge_method_is_refused_for_managed_flags() -> None:
    doc = yaml.safe_load(cluster_configuration("1.37.2", "dra"))
    doc["apiVersion"] = "kubeadm.k8s.io/v1"
    ok = kce.edit_cluster_configuration(yaml.safe_dump(doc, sort_keys=False), {SCHEDULER: DRA})
    assert ok.changed
    doc["scheduler"]["extraArgs"][0]["mergeMethod"] = "append"
    with pytest.raises(ConfigEditError, match="mergeMethod 'append'"):
        kce.edit_cluster_configuration(yaml.safe_dump(doc, sort_keys=False), {SCHEDULER: DRA})


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d.update(apiVersion="kubeadm.k8s.io/v1beta2"),
            "'kubeadm.k8s.io/v1beta2' is not a kubeadm config API",
        ),
        (lambda d: d.update(kind="InitConfiguration"), "no document of kind ClusterConfiguration"),
        (
            lambda d: d["apiServer"].update(extraArgs={"feature-gates": "A=true"}),
            "v1beta4 wants a list",
        ),
        (lambda d: d["apiServer"]["extraArgs"][0].update(value=True), "is not a string"),
    ],
)
def test_cluster_configuration_errors(mutate: Any, message: str) -> None:
    doc = yaml.safe_load(cluster_configuration("1.37.2", "dra"))
    mutate(doc)
    with pytest.raises(ConfigEditError, match=message):
        kce.edit_cluster_configuration(yaml.safe_dump(doc, sort_keys=False), EDITS)


def test_cluster_configuration_refuses_runtime_config_for_the_scheduler() -> None:
    with pytest.raises(ConfigEditError, match="runtime-config is a kube-apiserver flag"):
        kce.edit_cluster_configuration(
            cluster_configuration("1.37.2", "dra"),
            {SCHEDULER: FlagEdit(runtime_config={"resource.k8s.io/v1beta1": "true"})},
        )


# ------------------------------------------------------------------ field cases


def test_field_case_hand_added_manifest_gate_is_written_to_the_cluster_configuration_too() -> None:
    """kubernetes/kubeadm#2157: a gate added by hand to the apiserver manifest only is lost
    when `kubeadm upgrade` regenerates the manifest from kubeadm-config. Applying the same
    wanted state to both leaves them agreeing, so regeneration keeps the gate."""
    manifest_text = manifest("1.37.2", "defaults", APISERVER).replace(
        "    - --tls-private-key-file=/etc/kubernetes/pki/apiserver.key\n",
        "    - --tls-private-key-file=/etc/kubernetes/pki/apiserver.key\n"
        "    - --feature-gates=DRAPrioritizedList=true\n",
    )
    stored = cluster_configuration("1.37.2", "defaults")
    assert kce.static_pod_flags(manifest_text, APISERVER).feature_gates == {
        "DRAPrioritizedList": True
    }
    assert kce.cluster_configuration_flags(stored)[APISERVER].feature_gates == {}

    wanted = FlagEdit({"DRAPrioritizedList": True, "DRADeviceTaints": True})
    in_manifest = kce.edit_static_pod_manifest(manifest_text, APISERVER, wanted)
    in_config = kce.edit_cluster_configuration(stored, {APISERVER: wanted})
    assert [c.what for c in in_manifest.changes] == ["DRADeviceTaints"]
    assert [c.what for c in in_config.changes] == ["DRAPrioritizedList", "DRADeviceTaints"]
    assert (
        kce.static_pod_flags(in_manifest.text, APISERVER)
        == (kce.cluster_configuration_flags(in_config.text)[APISERVER])
    )


def test_field_case_removed_gate_is_dropped_from_all_three_places() -> None:
    """kubernetes/kubernetes#100988: a gate the target release removed stops the component;
    it must go from kubeadm-config, the manifests and the kubelet configuration."""
    gone = FlagEdit(absent_feature_gates=frozenset({"DRAControlPlaneController"}))
    edits = dict.fromkeys(kce.COMPONENTS, gone)
    for version, variant in [("1.37.2", "dra"), ("1.33.13", "dra")]:
        require(version, variant)
        stored = kce.edit_cluster_configuration(cluster_configuration(version, variant), edits)
        kubelet_cm = configmap_data(version, variant, "kubelet-config", "kubelet")
        changes = [
            *stored.changes,
            *(
                c
                for component in kce.COMPONENTS
                for c in kce.edit_static_pod_manifest(
                    manifest(version, variant, component), component, gone
                ).changes
            ),
            *kcfg.edit_kubelet_configuration(kubelet_cm, gone).changes,
            *kcfg.edit_kubelet_configuration(
                text(version, variant, "kubelet-config.yaml"), gone
            ).changes,
        ]
        # one removal per place the gate was written ...
        assert sorted(c.where for c in changes if c.what == "DRAControlPlaneController") == sorted(
            [
                "ClusterConfiguration apiServer.extraArgs feature-gates",
                "ClusterConfiguration controllerManager.extraArgs feature-gates",
                "ClusterConfiguration scheduler.extraArgs feature-gates",
                "kube-apiserver command --feature-gates",
                "kube-controller-manager command --feature-gates",
                "kube-scheduler command --feature-gates",
                "KubeletConfiguration featureGates",  # the ConfigMap
                "KubeletConfiguration featureGates",  # /var/lib/kubelet/config.yaml
            ]
        ), version
        # ... and otherwise only whole flags merged or emptied, never another entry
        assert {c.what for c in changes} <= {"DRAControlPlaneController", "--feature-gates"}
        for component in kce.COMPONENTS:
            assert "DRAControlPlaneController" not in (
                kce.cluster_configuration_flags(stored.text)[component].feature_gates
            )


def test_field_case_stale_runtime_config_entry_is_removed() -> None:
    """kubernetes/kubernetes#56800 class: an API version the release no longer serves in
    --runtime-config stops kube-apiserver; removing it keeps the other entries."""
    stale = FlagEdit(absent_runtime_config=frozenset({"resource.k8s.io/v1alpha3"}))
    expected = {"1.37.2": {"api/alpha": "false"}, "1.33.13": {"resource.k8s.io/v1beta1": "true"}}
    for version, runtime in expected.items():
        require(version, "dra")
        stored = kce.edit_cluster_configuration(
            cluster_configuration(version, "dra"), {APISERVER: stale}
        )
        pod = kce.edit_static_pod_manifest(manifest(version, "dra", APISERVER), APISERVER, stale)
        assert kce.cluster_configuration_flags(stored.text)[APISERVER].runtime_config == runtime
        assert kce.static_pod_flags(pod.text, APISERVER).runtime_config == runtime
        assert [(c.what, c.old, c.new) for c in pod.changes] == [
            ("resource.k8s.io/v1alpha3", "true", None)
        ]

"""Flag value parsing and merging (``--feature-gates``, ``--runtime-config``)
(``plugins/module_utils/kube/flags.py``).

The value grammar is the one the components parse (see the module docstring of
``kube.flags``); the property tests check the merge contract on generated values.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    ConfigEditError,
    FlagEdit,
    FlagValueError,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.kube.flag_merges import GO_BOOL, effective_gates, gate_merges

pytestmark = pytest.mark.unit


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


# ------------------------------------------------------------------ properties


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

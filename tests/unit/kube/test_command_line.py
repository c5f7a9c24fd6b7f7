"""Editing a component's command line: flags merged, emptied flags removed, missing ones
appended (``plugins/module_utils/kube/command_line.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import command_line as kcl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    FlagEdit,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.kube.flag_merges import GATE_VALUE, gate_merges

pytestmark = pytest.mark.unit


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

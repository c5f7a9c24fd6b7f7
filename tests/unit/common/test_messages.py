"""The refusal templates (``module_utils/common/messages``) and the error classes written in
them."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.metadata import (
    ClaimTemplateError,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import messages as msg
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.core import (
    VersionModelError,
    VersionParseError,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    DraDriverError,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.cluster import (
    SnapshotError,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("value", "shown"), [("kube-system", "kube-system"), ("", '""'), (None, "None"), ([1], "[1]")]
)
def test_values_are_shown_bare_text_or_python(value, shown) -> None:
    assert msg.assignment("v", value) == f"v={shown}"


def test_both_shapes_read_back_into_reason_and_fix() -> None:
    clause = msg.refusal("x=1", "is not a release", "give 1.37.2")
    sentence = msg.with_fix("x=1 is not a release.", "give 1.37.2.")
    assert clause == "x=1: is not a release; fix: give 1.37.2"
    assert sentence == "x=1 is not a release. Fix: give 1.37.2."
    assert msg.split_fix(clause) == ("x=1: is not a release", "give 1.37.2")
    assert msg.split_fix(sentence) == ("x=1 is not a release.", "give 1.37.2.")
    assert msg.split_fix("no fix here") == ("no fix here", "")
    assert msg.refusal("x", "bad") == "x: bad" and msg.with_fix("bad.") == "bad."


@pytest.mark.parametrize(
    "error", [VersionModelError, VersionParseError, ClaimTemplateError, SnapshotError]
)
def test_sentence_errors_are_written_in_the_one_template(error) -> None:
    exc = error("kubernetes_version='x' is not a version.", "give 1.37.2.")
    assert isinstance(exc, msg.Refused)
    assert (exc.reason, exc.fix) == ("kubernetes_version='x' is not a version.", "give 1.37.2.")
    assert str(exc) == msg.with_fix(exc.reason, exc.fix)


def test_value_errors_are_written_in_the_one_template() -> None:
    exc = DraDriverError("dra_driver_namespace", "", "is empty", "name a namespace")
    assert isinstance(exc, msg.RefusedValue)
    assert str(exc) == 'dra_driver_namespace="": is empty; fix: name a namespace'
    assert msg.split_fix(str(exc)) == ('dra_driver_namespace="": is empty', "name a namespace")

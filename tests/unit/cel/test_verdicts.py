"""The Python DRA CEL environment (``cel.verdicts``) held to Kubernetes without Go binaries:
the verdicts Kubernetes gave on the corpus are recorded in ``tests/data/cel_verdicts.json``
(``tests/integration/test_cel_differential.py`` checks them against the releases), and
every verdict ``cel.verdicts`` gives is one of them."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import verdicts as dra_cel

from tests.cel_corpus import recorded_verdicts

pytestmark = pytest.mark.unit

RECORDED = recorded_verdicts()


@pytest.fixture(scope="module")
def cel_corpus():
    from tests import cel_corpus

    return cel_corpus


A = "device.attributes['gpu.nvidia.com']"


def test_corpus_and_devices_are_large_enough(cel_corpus) -> None:
    assert len(cel_corpus.corpus()) >= 300
    names = [d["name"] for d in cel_corpus.devices()]
    assert "gpu-0" in names and sum(n.startswith("gpu-0-mig-") for n in names) >= 2
    assert len(RECORDED) >= 2 and {"1.37.2", "1.36.3"} <= set(RECORDED)


@pytest.mark.parametrize("release", sorted(RECORDED))
def test_recorded_verdicts_cover_the_corpus(release: str, cel_corpus) -> None:
    missing = [e for e in cel_corpus.corpus() if e not in RECORDED[release]]
    assert not missing, (
        f"{len(missing)} corpus expression(s) without Kubernetes {release}'s verdict, e.g. "
        f"{missing[:3]}; re-record with `{cel_corpus.RECORD_COMMAND}`"
    )


@pytest.mark.parametrize("release", sorted(RECORDED))
def test_every_python_verdict_is_kubernetes(release: str, cel_corpus) -> None:
    lines, counts = cel_corpus.compare(release, RECORDED[release])
    assert not lines, "\n".join(lines)
    assert counts["judged"] >= 300 and counts["cases"] >= 900, counts


#: The divergences of the former checker: Kubernetes' verdict (recorded from 1.37.2 and
#: 1.36.3) and what the Python side now says.
DIVERGENCES = [
    ("'abc'.find('b') == 'b'", "ok", dra_cel.CANNOT_JUDGE),
    ("[1, 2, 3].sum() == 6", "ok", dra_cel.CANNOT_JUDGE),
    (f"sets.contains([{A}.type], ['gpu'])", "ok", dra_cel.CANNOT_JUDGE),
    ("isIP('10.0.0.1')", "ok", dra_cel.CANNOT_JUDGE),
    (f"{A}.?profile.orValue('') == '1g.18gb'", "ok", dra_cel.CANNOT_JUDGE),
    (
        "add(quantity('1Gi'), quantity('1Gi')).isGreaterThan(quantity('1Gi'))",
        "invalid",
        dra_cel.INVALID,
    ),
    (f"split({A}.productName, ' ').size() == 2", "invalid", dra_cel.INVALID),
    (f"lowerAscii({A}.productName) == 'nvidia h200'", "invalid", dra_cel.INVALID),
]


@pytest.mark.parametrize(("expression", "kubernetes", "python"), DIVERGENCES)
def test_listed_divergences(expression: str, kubernetes: str, python: str, cel_corpus) -> None:
    for release, verdicts in RECORDED.items():
        assert verdicts[expression]["compile"] == kubernetes, release
    verdict = dra_cel.judge(expression)
    assert verdict.verdict == python, verdict
    if python == dra_cel.CANNOT_JUDGE:
        assert "cannot" in verdict.message and "offline" in verdict.message
        assert not dra_cel.evaluate(expression, "gpu.nvidia.com", cel_corpus.devices()[0]).judged


def test_a_global_call_of_a_member_function_names_the_member_form() -> None:
    verdict = dra_cel.judge("add(quantity('1Gi'), 1).sign() == 1")
    assert verdict.verdict == dra_cel.INVALID
    assert "x.add(...)" in verdict.message


def test_every_template_selector_is_judged_and_compiles(cel_corpus) -> None:
    for expression in cel_corpus.template_expressions():
        assert dra_cel.judge(expression).verdict == dra_cel.OK, expression


@pytest.mark.parametrize(
    ("expression", "verdict"),
    [
        ("", dra_cel.INVALID),
        ("x" * (dra_cel.MAX_LENGTH + 1), dra_cel.TOO_LONG),
        (7, dra_cel.INVALID),
        ("device.attributes", dra_cel.INVALID),
        ("device.allowMultipleAllocations", dra_cel.OK),
    ],
)
def test_edge_verdicts(expression: object, verdict: str) -> None:
    assert dra_cel.judge(expression).verdict == verdict


def test_allow_multiple_allocations_needs_consumable_capacity() -> None:
    off = dra_cel.judge("device.allowMultipleAllocations", {"consumableCapacity": False})
    assert off.verdict == dra_cel.INVALID and "allowMultipleAllocations" in off.message


def test_list_attributes_refused_where_the_release_refuses_them(cel_corpus) -> None:
    example = next(d for d in cel_corpus.devices() if d["name"] == "example-0")
    on_137 = dra_cel.evaluate("true", example["driver"], example)
    on_136 = dra_cel.evaluate("true", example["driver"], example, list_attributes=False)
    assert on_137.result is True
    assert on_136.error == "other" and "unsupported attribute value" in on_136.message


#: Expressions whose compile verdict changes between releases (tests/data/cel_verdicts.json):
#: Python's verdict per release, for each release whose verdict is recorded.
PER_RELEASE = [
    ("isSemver('1.2', true)", {"1.33": dra_cel.INVALID, "1.34": dra_cel.OK}),
    ("semver('1.2.3', false).patch() == 3", {"1.33": dra_cel.INVALID, "1.37": dra_cel.OK}),
    ("lists.range(3) == [0, 1, 2]", {"1.34": dra_cel.INVALID, "1.35": dra_cel.CANNOT_JUDGE}),
    # a list literal's value is not judged offline, whatever the release
    ("[1, 2].reverse() == [2, 1]", {"1.34": dra_cel.CANNOT_JUDGE, "1.37": dra_cel.CANNOT_JUDGE}),
]


@pytest.mark.parametrize(("expression", "want"), PER_RELEASE)
def test_verdicts_follow_the_release(expression: str, want: dict[str, str]) -> None:
    for minor, python in want.items():
        (release,) = [r for r in RECORDED if r.startswith(minor + ".")]
        verdict = dra_cel.judge(expression, {"consumableCapacity": False}, release)
        assert verdict.verdict == python, (release, verdict)
        if python != dra_cel.CANNOT_JUDGE:
            assert RECORDED[release][expression]["compile"] == python, release
        if python == dra_cel.INVALID:
            assert "undeclared reference" in verdict.message or "no matching overload" in (
                verdict.message
            )


def test_a_release_before_the_recorded_environments_cannot_be_judged() -> None:
    verdict = dra_cel.judge("device.driver == 'gpu.nvidia.com'", None, "1.32.13")
    assert verdict.verdict == dra_cel.CANNOT_JUDGE
    assert "environment of 1.32.13 is not recorded here (1.33 and newer are)" in verdict.message
    assert dra_cel.judge("device.driver == 'gpu.nvidia.com'", None, "1.33.13").verdict == "ok"
    # no release: the newest environment
    assert dra_cel.judge("[1, 2].reverse() == [2, 1]").verdict == dra_cel.CANNOT_JUDGE

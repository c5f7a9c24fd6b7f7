"""Every CEL verdict of the Python environment is Kubernetes' own, per release.

For every release under ``celcheck`` in gpufleet/build/releases.yaml whose
``gpufleet-celcheck`` is cached (scripts/setup builds those marked ``ci: true``;
``python -m gpufleet.build.celcheck build`` the others), run Kubernetes' DRA CEL environment
(``k8s.io/dynamic-resource-allocation/cel`` of that release) on the corpus
(``tests/cel_corpus.py``: ``tests/data/cel_corpus.yaml`` and every selector the project's
builders write) and every device of ``tests/data/cel_devices.yaml``, and compare:

* the compile verdict, the result and the runtime error kind of ``cel.verdicts`` on every case
  it judges (it says ``cannot_judge`` for the rest): no disagreement;
* the verdicts recorded in ``tests/data/cel_verdicts.json`` (the unit tests' expectations):
  the same as the release gives now;
* the function and macro names of ``dra_cel_env.tables(release)``: the release's.

The DRA CEL API changed in 1.34, 1.36 and 1.38; celcheck is built against each release
with the shape file of its API (``lab/go/celcheck/api_*.go``), and with the Go toolchain
and module substitutions of the release's ``go_builds`` entry (1.38.0-beta.0: go1.27.3).
A release whose binary is not cached is skipped with the command that builds it.
"""

from __future__ import annotations

import collections
import json

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import cel_env as env

from gpufleet.build import celcheck
from tests import cel_corpus

pytestmark = pytest.mark.integration

RELEASES = celcheck.load_celcheck_releases()


def _cached(release: celcheck.CelRelease) -> None:
    if not celcheck.binary_path(release.version).is_file():
        pytest.skip(
            f"no gpufleet-celcheck cached for {release.version}: build it with "
            f"`{celcheck.BUILD_COMMAND.format(version=release.version)}`"
        )


@pytest.fixture(scope="module")
def outputs() -> dict[str, dict]:
    return {}


def _output(release: celcheck.CelRelease, outputs: dict[str, dict]) -> dict:
    _cached(release)
    if release.version not in outputs:
        outputs[release.version] = cel_corpus.run_release(release, functions=True)
    return outputs[release.version]


@pytest.mark.parametrize("release", RELEASES, ids=[r.version for r in RELEASES])
def test_python_verdicts_are_the_releases(release, outputs, capsys) -> None:
    fresh = cel_corpus.go_verdicts(_output(release, outputs))
    lines, counts = cel_corpus.compare(release.version, fresh)
    with capsys.disabled():
        print(
            f"\ncel differential {release.version}: {len(fresh)} expressions x "
            f"{len(cel_corpus.devices())} devices; Python judges {counts['judged']} "
            f"({counts['cases']} device cases), cannot judge {counts['cannot_judge']}; "
            f"{len(lines)} disagreement(s)"
        )
    assert not lines, f"{len(lines)} disagreement(s) with Kubernetes {release.version}:\n  " + (
        "\n  ".join(lines)
    )


@pytest.mark.parametrize("release", RELEASES, ids=[r.version for r in RELEASES])
def test_recorded_verdicts_are_the_releases(release, outputs) -> None:
    fresh = cel_corpus.go_verdicts(_output(release, outputs))
    recorded = cel_corpus.recorded_verdicts().get(release.version, {})
    changed = [e for e in fresh if recorded.get(e) != fresh[e]]
    stale = [e for e in recorded if e not in fresh]
    assert not changed and not stale, (
        f"tests/data/cel_verdicts.json is not what Kubernetes {release.version} gives "
        f"({len(changed)} changed, {len(stale)} no longer in the corpus, e.g. "
        f"{(changed or stale)[:3]}); re-record with `{cel_corpus.RECORD_COMMAND}`"
    )


@pytest.mark.parametrize("release", RELEASES, ids=[r.version for r in RELEASES])
def test_function_table_is_the_releases(release, outputs) -> None:
    out = _output(release, outputs)
    want_glob, want_member, want_macros = env.tables(release.version)
    internal = ("_", "@", "cel.@", "!_", "-_")
    functions = {k: v for k, v in out["functions"].items() if not k.startswith(internal)}
    glob = {k for k, v in functions.items() if v["global"]}
    member = {k for k, v in functions.items() if v["member"]}
    assert (glob, member, set(out["macros"])) == (want_glob, want_member, want_macros), (
        f"dra_cel_env.tables({release.version!r}) differs from Kubernetes {release.version}: "
        f"global +{sorted(glob - want_glob)} -{sorted(want_glob - glob)}, member "
        f"+{sorted(member - want_member)} -{sorted(want_member - member)}, macros "
        f"+{sorted(set(out['macros']) - want_macros)} -{sorted(want_macros - set(out['macros']))}"
    )


@pytest.mark.parametrize("release", RELEASES, ids=[r.version for r in RELEASES])
def test_corpus_reaches_every_kind_of_verdict(release, outputs) -> None:
    out = _output(release, outputs)
    assert out["modules"]["k8s.io/dynamic-resource-allocation"] == release.staging_version
    assert out["api"] == celcheck.api_shape(release)
    compile_kinds = collections.Counter(e["compile"]["verdict"] for e in out["expressions"])
    run_kinds = collections.Counter(
        r.get("error") or str(r["result"]).lower() for e in out["expressions"] for r in e["results"]
    )
    assert {"ok", "invalid", "too_expensive"} <= set(compile_kinds), compile_kinds
    assert {"true", "false", "no_such_key", "no_such_overload", "cost_limit"} <= set(run_kinds), (
        run_kinds
    )


def test_claims_check_uses_the_releases_own_cel_environment(tmp_path) -> None:
    from click.testing import CliRunner

    from gpufleet.cli import main

    release = next(r for r in RELEASES if r.ci)
    _cached(release)
    data = cel_corpus.DATA.parent / "unit" / "data" / "claims" / "mixed.yaml"
    result = CliRunner().invoke(
        main, ["claims", "check", str(data), "--kubernetes-version", release.version]
    )
    assert result.exit_code == 1, result.output
    assert f"CEL: Kubernetes {release.version} (gpufleet-celcheck)" in result.output
    # the optional syntax is judged by Kubernetes (it compiles): no cannot-judge line
    assert "cannot-judge" not in result.output
    assert "use kind: MigDeviceConfig" in result.output


@pytest.mark.parametrize("release", RELEASES, ids=[r.version for r in RELEASES])
def test_claims_check_gives_each_releases_own_verdict(release, tmp_path) -> None:
    """The normalize argument of isSemver came in 1.34: `claims check` for 1.33 refuses
    the selector with 1.33's own message, later releases accept it."""
    from click.testing import CliRunner

    from gpufleet.cli import main

    _cached(release)
    expression = "isSemver('1.2', true)"
    claim = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "deviceClassName": "gpu.nvidia.com",
                        "selectors": [{"cel": {"expression": expression}}],
                    }
                ]
            }
        },
    }
    path = tmp_path / "claim.json"
    path.write_text(json.dumps(claim))
    result = CliRunner().invoke(
        main, ["claims", "check", str(path), "--kubernetes-version", release.version, "--json"]
    )
    report = json.loads(result.output)
    assert report["celJudgedBy"] == f"Kubernetes {release.version} (gpufleet-celcheck)"
    cel = [p for p in report["objects"][0]["problems"] if "cel.expression" in p["path"]]
    recorded = cel_corpus.recorded_verdicts()[release.version][expression]["compile"]
    if release.minor < 34:
        assert recorded == "invalid"
        (problem,) = cel
        assert problem["severity"] == "error"
        assert "no matching overload for 'isSemver'" in problem["message"]
    else:
        assert recorded == "ok"
        assert cel == []

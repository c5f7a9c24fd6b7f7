"""Which ``lab/go/celcheck`` sources and build tag each release's DRA CEL API gets, and
which releases the releases file may list (``gpufleet/build/celcheck.py``)."""

from __future__ import annotations

import re

import pytest

from gpufleet.build import celcheck, release_pins

pytestmark = pytest.mark.unit


def _selected(text: str, tags: set[str]) -> bool:
    """Whether a ``//go:build`` line of terms joined by ``&&`` (``x``, ``!x``) holds."""
    line = re.search(r"^//go:build (.+)$", text, re.M)
    assert line is not None, "every shape file has a build constraint"
    terms = [t.strip() for t in line.group(1).split("&&")]
    return all((t[1:] not in tags) if t.startswith("!") else (t in tags) for t in terms)


def release(version: str) -> celcheck.CelRelease:
    return celcheck.CelRelease(version)


@pytest.mark.parametrize(
    ("version", "tag", "shape", "api"),
    [
        ("1.33.13", "dracel_v133", "api_v133.go", "1.33"),
        ("1.34.4", "dracel_v134", "api_v134.go", "1.34"),
        ("1.35.4", "dracel_v134", "api_v134.go", "1.34"),
        ("1.36.3", "dracel_v136", "api_v136.go", "1.36"),
        ("1.37.2", "dracel_v136", "api_v136.go", "1.36"),
        ("1.38.0-beta.0", "", "api_v138.go", "1.38"),
    ],
)
def test_each_release_gets_one_shape_file_whose_build_line_its_tag_selects(
    version: str, tag: str, shape: str, api: str
) -> None:
    got_tag, sources = celcheck.sources_for(release(version))
    assert got_tag == tag
    assert sorted(sources) == sorted(["main.go", shape])
    # the builder's tag selects this shape file and no other (each other file would
    # clash with it), as the files' own build constraints say
    tags = {tag} if tag else set()
    selected = [
        p.name
        for p in sorted(celcheck.SOURCE_DIR.glob("api_*.go"))
        if _selected(p.read_text(), tags)
    ]
    assert selected == [shape]
    assert f'apiShape  = "{api}"' in sources[shape]
    assert celcheck.api_shape(release(version)) == api


def test_the_newest_shape_file_is_built_without_a_tag_for_any_later_release() -> None:
    tag, sources = celcheck.sources_for(release("1.40.0"))
    assert (tag, sorted(sources)) == ("", ["api_v138.go", "main.go"])


def test_a_release_older_than_any_shape_file_is_refused() -> None:
    data = {"celcheck": {"releases": [{"version": "1.33.13"}, {"version": "1.32.13"}]}}
    with pytest.raises(celcheck.CelCheckError, match=r"celcheck.releases\[1\].*1\.32\.13.*1\.33"):
        celcheck.parse_celcheck_releases(data, "releases.yaml")
    data["celcheck"]["releases"].pop()
    (only,) = celcheck.parse_celcheck_releases(data, "releases.yaml")
    assert only.version == "1.33.13"


def test_every_pinned_release_listed_is_built_by_setup() -> None:
    releases = celcheck.load_celcheck_releases()
    pinned = {r.version for r in release_pins.load_releases().releases}
    assert {r.version for r in releases if r.ci} >= {r.version for r in releases} & pinned
    assert {r.minor for r in releases} >= {33, 34, 35, 36, 37, 38}


def test_a_release_is_built_as_its_go_builds_entry_says() -> None:
    data = {
        "go_builds": [
            {
                "version": "1.38.0-beta.0",
                "go_toolchain": "go1.27.3",
                "substitute": {"example.com/m v1.0.1": "v1.0.0"},
            }
        ],
        "celcheck": {"releases": [{"version": "1.38.0-beta.0"}, {"version": "1.37.2"}]},
    }
    new, old = celcheck.parse_celcheck_releases(data, "releases.yaml")
    assert (new.go_toolchain, new.substitute) == ("go1.27.3", (("example.com/m v1.0.1", "v1.0.0"),))
    assert (old.go_toolchain, old.substitute) == (None, ())
    # the same entry the release facts and the pinned binaries read
    assert (
        celcheck.load_celcheck_releases()[0].go_build
        == release_pins.load_go_builds()["1.38.0-beta.0"]
    )


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"version": "1.38"}, r"go_builds\[0\]\.version = '1\.38'"),
        ({"version": "1.38.0", "go_toolchain": "1.27"}, r"go_toolchain = '1\.27'.*go1\.27\.3"),
        (
            {"version": "1.38.0", "substitute": {"example.com/m": "v1"}},
            r"substitute: 'example\.com/m'.*structured-merge-diff",
        ),
    ],
)
def test_a_bad_go_builds_entry_is_named(entry: dict, words: str) -> None:
    data = {"go_builds": [entry], "celcheck": {"releases": [{"version": "1.37.2"}]}}
    with pytest.raises(celcheck.CelCheckError, match=words):
        celcheck.parse_celcheck_releases(data, "releases.yaml")

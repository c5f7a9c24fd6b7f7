"""Each option of each role's argument spec says what the variable does: its description is
not the variable's name again, nor a fragment of a few words.

The floor (four words) is what ``ansible-doc -t role`` needs to
be read without the defaults file beside it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MIN_WORDS = 4


def _options():
    for spec_file in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        role = spec_file.parts[-3]
        specs = yaml.safe_load(spec_file.read_text(encoding="utf-8"))["argument_specs"]
        for entry, spec in specs.items():
            for name, option in (spec.get("options") or {}).items():
                yield role, entry, name, option


def _text(description) -> str:
    if isinstance(description, list):
        return " ".join(str(d) for d in description)
    return str(description or "")


def _says_nothing(name: str, description) -> bool:
    text = _text(description).strip().rstrip(".")
    words = text.replace("_", " ").lower().split()
    return not text or text == name or words == name.lower().split("_") or len(words) < MIN_WORDS


def test_every_option_says_what_it_does() -> None:
    bare = sorted(
        {
            f"{role} {name}: {_text(o.get('description'))!r}"
            for role, _, name, o in _options()
            if _says_nothing(name, o.get("description"))
        }
    )
    assert bare == [], "options whose description repeats or hardly extends the name:\n" + (
        "\n".join(bare)
    )


@pytest.mark.parametrize(
    ("name", "description", "bare"),
    [
        ("upgrade_drain_poll", ["upgrade_drain_poll"], True),
        ("upgrade_drain_poll", "upgrade drain poll", True),
        ("upgrade_drain_poll", "", True),
        ("upgrade_drain_poll", "Seconds between two drain checks.", False),
    ],
)
def test_the_rule_tells_a_name_from_a_description(name, description, bare) -> None:
    assert _says_nothing(name, description) is bare

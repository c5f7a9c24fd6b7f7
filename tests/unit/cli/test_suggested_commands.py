"""Every ``gpufleet ...`` command line the code suggests to a user (messages, fixes,
role and playbook text) names a command, subcommand and options that exist in the CLI."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from gpufleet.cli import main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
SOURCES = [
    *sorted((ROOT / "gpufleet").rglob("*.py")),
    *sorted((ROOT / "plugins").rglob("*.py")),
    *sorted((ROOT / "roles").rglob("*.yml")),
    *sorted((ROOT / "playbooks").rglob("*.yml")),
]
#: ``gpufleet`` then words and options, up to a character that ends a command line.
SUGGESTION = re.compile(r"`?gpufleet((?: (?:[a-z][a-z-]*|--?[a-z][a-z-]*))+)")
#: Words after ``gpufleet`` that are prose, not a command ("gpufleet is not ...").
PROSE = {
    "is", "import", "upgrades", "kubeadm", "role", "roles", "lab's", "collection",
    "contributors", "maintainers", "checkout", "repository", "plans", "nvidia",
}  # fmt: skip
#: Phrases after ``gpufleet`` that are prose ("a gpufleet lab node").
PROSE_PHRASES = ("lab node",)


#: The end of one Python string literal and the start of the next on a following line
#: (implicit concatenation): a command line split over two literals is read as one.
CONTINUED = re.compile(r"""(?<=[ a-z-])["']\n\s*[rf]?["'](?=[a-z-])""")


def suggestions() -> list[tuple[str, str]]:
    out = []
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            text = CONTINUED.sub("", text)
        for match in SUGGESTION.finditer(text):
            words = match.group(1).split()
            if words[0] in PROSE or " ".join(words).startswith(PROSE_PHRASES):
                continue
            out.append((f"{path.relative_to(ROOT)}: gpufleet {' '.join(words)}", " ".join(words)))
    return out


def resolve(words: list[str]) -> tuple[click.Command, list[str]]:
    """The command the words name, and the words left after it."""
    command: click.Command = main
    while words and isinstance(command, click.Group) and not words[0].startswith("-"):
        sub = command.commands.get(words[0])
        if sub is None:
            break
        command, words = sub, words[1:]
    return command, words


def problems(found: list[tuple[str, str]]) -> list[str]:
    """``<where>: <what is wrong>`` for each suggested command line the CLI lacks."""
    wrong = []
    for where, line in found:
        command, rest = resolve(line.split())
        if command is main or (
            rest and not rest[0].startswith("-") and isinstance(command, click.Group)
        ):
            wrong.append(f"{where}: no such command")
            continue
        options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        options |= {"--help", "-h"}
        for word in rest:
            if word.startswith("-") and word not in options:
                wrong.append(f"{where}: {command.name} has no option {word}")
    return wrong


def test_every_suggested_command_line_exists() -> None:
    found = suggestions()
    assert len(found) > 30  # the scan reads the messages at all
    wrong = problems(found)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "line", ["labels apply", "gates plan --kubernetes-version 1.35", "mig carve", "claims nope"]
)
def test_a_command_line_the_cli_lacks_is_found(line: str) -> None:
    assert problems([("here", line)])


def test_a_command_line_split_over_two_string_literals_is_read_whole() -> None:
    text = 'x = (\n    "run gpufleet gates "\n    f"plan --kubernetes-version {v} now"\n)\n'
    joined = CONTINUED.sub("", text)
    words = SUGGESTION.search(joined).group(1).split()
    assert words == ["gates", "plan", "--kubernetes-version"]
    assert problems([("here", " ".join(words))])

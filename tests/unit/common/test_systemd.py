"""Values written into systemd unit files (``plugins/module_utils/common/systemd.py``),
read back with systemd's own unquoting rules (systemd.syntax(7))."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import systemd

pytestmark = pytest.mark.unit


def unquote_word(word: str) -> str:
    """One double-quoted word as systemd reads it: C escapes, then ``%%`` and ``$$``."""
    assert word.startswith('"') and word.endswith('"'), word
    out, i, body = [], 0, word[1:-1]
    while i < len(body):
        c = body[i]
        if c == "\\":
            out.append(body[i + 1])
            i += 2
            continue
        assert c != '"', word  # an unescaped quote would end the word early
        if c in "%$":
            assert body[i + 1] == c, word
            i += 1
        out.append(c)
        i += 1
    return "".join(out)


@pytest.mark.parametrize(
    "value",
    ["/var/lib/prom", "/data dir/x", '/a"b', "/a\\b", "/50%/%h", "/$HOME/${X}", "0.0.0.0:9090"],
)
def test_a_word_reads_back_as_the_value(value: str) -> None:
    assert unquote_word(systemd.exec_word(value)) == value


def test_environment_escapes_percent_but_not_dollar() -> None:
    assert systemd.environment("PYTHONPATH", "/lib/%i/$x") == '"PYTHONPATH=/lib/%%i/$x"'


@pytest.mark.parametrize("value", ["/a\nExecStartPre=/bin/sh", "/a\rb", "/a\x00", "/a\u2028b"])
def test_a_control_character_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(systemd.UnitValueError, match=r"^monitoring_x .*control character"):
        systemd.exec_word(value, "monitoring_x")
    with pytest.raises(systemd.UnitValueError, match="control character"):
        systemd.environment("PYTHONPATH", value)


def test_an_environment_name_must_be_a_name() -> None:
    with pytest.raises(systemd.UnitValueError, match="not an environment variable name"):
        systemd.environment("A B", "x")

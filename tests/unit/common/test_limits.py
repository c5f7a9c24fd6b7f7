"""Bounded reading of text, YAML and JSON (``plugins/module_utils/common/limits.py``):
every refusal names the input and a fix. Inputs built to attack the readers are in
``tests/unit/hostile/``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits

pytestmark = pytest.mark.unit


def test_decode_text_drops_the_byte_order_mark() -> None:
    assert limits.decode_text("\ufeffhé".encode(), "input") == "hé"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"a" * 11, "larger than"),
        (b"a\x00b", "NUL byte at offset 1"),
        (b"ab\xffc", "byte 0xff at offset 2"),
    ],
)
def test_decode_text_refuses_naming_the_input_and_a_fix(data: bytes, words: str) -> None:
    with pytest.raises(limits.InputError) as err:
        limits.decode_text(data, "the-input", limit=10)
    assert str(err.value).startswith("the-input ")
    assert words in str(err.value) and "fix:" in str(err.value)


def test_read_text_of_files(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("a: 1\n")
    assert limits.read_text(path) == "a: 1\n"
    assert limits.read_text(tmp_path / "missing", missing_ok=True) is None
    with pytest.raises(limits.InputError, match="no such file"):
        limits.read_text(tmp_path / "missing")
    with pytest.raises(limits.InputError, match="is a directory"):
        limits.read_text(tmp_path, what="config")


def test_read_stream_reads_standard_input_as_text() -> None:
    assert limits.read_stream(io.BytesIO(b"kind: Pod\n"), "stdin") == "kind: Pod\n"
    with pytest.raises(limits.InputError, match="stdin"):
        limits.read_stream(io.BytesIO(b"x" * 20), "stdin", limit=10)


def test_check_shape_bounds_depth_and_values() -> None:
    assert limits.check_shape({"a": [1, 2]}, "doc") == {"a": [1, 2]}
    with pytest.raises(limits.ShapeError, match="deeper than 2 levels"):
        limits.check_shape([[[1]]], "doc", max_depth=2)
    with pytest.raises(limits.ShapeError, match="more than 5 values"):
        limits.check_shape(list(range(10)), "doc", max_nodes=5)
    assert issubclass(limits.ShapeError, limits.InputError)


def test_yaml_documents_and_errors() -> None:
    assert limits.load_yaml("a: [1, 2]", "f") == {"a": [1, 2]}
    assert limits.load_yaml_documents("a: 1\n---\n---\nb: 2\n", "f") == [{"a": 1}, {"b": 2}]
    with pytest.raises(limits.InputError, match=r"f is not valid YAML.*line 1, column 4"):
        limits.load_yaml("a: [1", "f")


def test_json_refuses_a_name_given_twice_and_bad_syntax() -> None:
    assert limits.load_json('{"a": 1}', "j") == {"a": 1}
    with pytest.raises(limits.InputError, match="names 'a' twice"):
        limits.load_json('{"a": 1, "a": 2}', "j")
    with pytest.raises(limits.InputError, match=r"not valid JSON.*column 7.*\[1\]"):
        limits.load_json('{"a": ', "j", example="[1]")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("Yes", True), (" off ", False), (1, True), ("0", False), (True, True), ("maybe", None)],
)
def test_variable_bool_reads_as_ansible(value: object, expected: bool | None) -> None:
    assert limits.variable_bool(value) is expected


def test_plain_value_gives_plain_containers() -> None:
    assert limits.plain_value({"a": (1, 2)}) == {"a": [1, 2]}

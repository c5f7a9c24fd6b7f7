# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Hostile-input guards shared by the CLI and the modules: read a file or a stream as
bounded UTF-8 text, parse YAML or JSON without a traceback, and refuse data nested deeper
or larger than any real input (a kubeconfig, a kubelet configuration, a claim, a MIG
layout) ever is.

Every refusal is an :class:`InputError` whose ``str()`` names the file or option, what is
wrong with it and the fix. Standard library only (PyYAML is imported where YAML is read):
Ansible ships ``module_utils`` to managed hosts.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from typing import Any, BinaryIO

__all__ = [
    "MAX_DEPTH",
    "MAX_MANIFEST_BYTES",
    "MAX_MANIFEST_NODES",
    "MAX_NODES",
    "MAX_OBJECT_BYTES",
    "MAX_TEXT_BYTES",
    "InputError",
    "ShapeError",
    "check_object_sizes",
    "check_shape",
    "decode_text",
    "load_json",
    "load_yaml",
    "load_yaml_documents",
    "plain_value",
    "read_stream",
    "read_text",
    "variable_bool",
]

#: Bytes read from one input file (4 MiB). The biggest real inputs (a kubelet
#: configuration, a static pod manifest, a file of claim templates, a mig-parted config)
#: are a few KiB; more is read as a mistake (``/dev/zero``, a log, an image).
MAX_TEXT_BYTES = 4 * 1024 * 1024
#: Bytes of one Kubernetes object as JSON: kube-apiserver refuses a larger request body
#: (413), so no object of a manifest can be bigger. ``MaxRequestBodyBytes`` of
#: ``NewConfig`` in ``staging/src/k8s.io/apiserver/pkg/server/config.go`` (3 MiB, twice
#: etcd's default 1.5 MiB request limit, as JSON is bigger than the protobuf etcd stores).
MAX_OBJECT_BYTES = 3 * 1024 * 1024
#: Bytes of one manifest file of many objects (``claims check``): ``kubectl apply -f``
#: reads a file of any size and sends each object on its own, each held to
#: ``MAX_OBJECT_BYTES``; 64 MiB (thousands of templates and claims, about 20 s to parse)
#: bounds the time and memory of reading one, and refuses a device or a log.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
#: Values of one manifest file (``MAX_NODES`` is for one configuration document).
MAX_MANIFEST_NODES = 20_000_000
#: Nesting levels of mappings and lists in one document. Kubernetes objects nest about 12
#: levels (a pod template in a DaemonSet); PyYAML and ``json`` fail with RecursionError
#: a few hundred levels down.
MAX_DEPTH = 100
#: Mapping entries and list items in one parsed input, counted through YAML aliases (an
#: alias bomb of a few lines stands for billions of values).
MAX_NODES = 1_000_000


class InputError(ValueError):
    """Input that cannot be used: ``str()`` names the file or option, the value and the
    fix."""


class ShapeError(InputError):
    """Parsed (or parseable) data nested too deep or holding too many values."""


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


def decode_text(data: bytes, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    """``data`` (at most ``limit`` bytes; one more means the input was cut) as text.

    Raises InputError naming ``what`` for more than ``limit`` bytes, NUL bytes (a binary
    file) or bytes that are not UTF-8 (with the offset of the first bad byte). A leading
    UTF-8 byte-order mark is dropped."""
    if len(data) > limit:
        raise InputError(
            f"{what} is larger than {_mib(limit)} (reading stopped there); fix: give the "
            "text file itself (YAML, JSON, TOML), not a device, a log or an archive"
        )
    nul = data.find(b"\0")
    if nul >= 0:
        raise InputError(
            f"{what} holds a NUL byte at offset {nul}: it is a binary file, not "
            "text; fix: give the text file (YAML, JSON, TOML) meant here"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"{what} is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}); "
            "fix: save the file as UTF-8 (iconv -t UTF-8) or give the right file"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(
    path: str | os.PathLike[str],
    what: str | None = None,
    limit: int = MAX_TEXT_BYTES,
    missing_ok: bool = False,
) -> str | None:
    """The content of ``path`` as text, at most ``limit`` bytes read (see
    :func:`decode_text`). ``what`` names the input in messages (default: the path).

    Returns None for a missing file when ``missing_ok``. Raises InputError for a missing
    file (else), a directory, a file that cannot be read, and whatever ``decode_text``
    refuses."""
    name = what or str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise InputError(f"{name}: no such file; fix: give the path of an existing file") from None
    except OSError as err:
        raise InputError(
            f"{name}: cannot read it ({err.strerror or err}); fix: check the path"
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(
            f"{name} is a directory; fix: give the path of a file (one in that directory), "
            "not the directory"
        )
    try:
        if stat.S_ISFIFO(st.st_mode):
            data = _read_pipe(path, name, limit)
        else:
            with open(path, "rb") as fh:
                data = fh.read(limit + 1)
    except OSError as err:
        raise InputError(
            f"{name}: cannot read it ({err.strerror or err}); fix: check the path and its "
            "permissions"
        ) from None
    return decode_text(data, name, limit)


#: Seconds a named pipe (a FIFO, ``<(command)``) may keep its next bytes back.
PIPE_TIMEOUT = 10


def _read_pipe(path: str | os.PathLike[str], name: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the named pipe ``path``, opened without waiting for a
    writer (a plain ``open`` of a FIFO nobody writes to never returns). Raises InputError
    when no program holds the pipe open for writing or the writer sends nothing for
    ``PIPE_TIMEOUT`` seconds."""
    import select
    import time

    fix = "fix: give a regular file, or start the program that writes the pipe first"
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks: list[bytes] = []
    size = 0
    try:
        deadline = time.monotonic() + PIPE_TIMEOUT
        while size <= limit:
            ready, _unused, _unused = select.select(
                [fd], [], [], max(0.0, deadline - time.monotonic())
            )
            if not ready:
                raise InputError(
                    f"{name} is a named pipe whose writer sent nothing for {PIPE_TIMEOUT} s; " + fix
                )
            try:
                chunk = os.read(fd, min(65536, limit + 1 - size))
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            deadline = time.monotonic() + PIPE_TIMEOUT
    finally:
        os.close(fd)
    if not chunks:
        raise InputError(f"{name} is a named pipe and no program wrote to it; {fix}")
    return b"".join(chunks)


def read_stream(stream: BinaryIO, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    """At most ``limit`` bytes of ``stream`` (standard input) as text (see
    :func:`decode_text`)."""
    try:
        data = stream.read(limit + 1)
    except OSError as err:
        raise InputError(f"{what}: cannot read it ({err.strerror or err})") from None
    if isinstance(data, str):  # a text stream (a test's StringIO)
        data = data.encode("utf-8", "surrogateescape")
    return decode_text(data, what, limit)


def check_shape(
    data: Any, what: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES
) -> Any:
    """Return ``data`` when its mappings and lists nest at most ``max_depth`` levels and
    hold at most ``max_nodes`` entries in all (counted through shared references, so a
    YAML alias bomb or a self-referencing alias is refused too). Iterative: never raises
    RecursionError. Raises ShapeError (an InputError) naming ``what``."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable[Any] = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth > max_depth:
            raise ShapeError(
                f"{what} nests mappings or lists deeper than {max_depth} levels; fix: give "
                "the real document (no Kubernetes object or configuration nests that deep)"
            )
        seen += len(node)
        if seen > max_nodes:
            raise ShapeError(
                f"{what} holds more than {max_nodes:,} values (YAML aliases counted where "
                "they are used); fix: give a smaller document, without alias expansion"
            )
        stack.extend((child, depth + 1) for child in children)
    return data


def _too_deep(what: str) -> ShapeError:
    return ShapeError(
        f"{what} nests mappings or lists too deep to parse (more than {MAX_DEPTH} levels); "
        "fix: give the real document"
    )


def _yaml_reason(err: Exception) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    return " ".join(line.strip() for line in lines[:4])[:400] or type(err).__name__


def load_yaml(text: str, what: str) -> Any:
    """One YAML (or JSON) document of ``text``, shape-checked (:func:`check_shape`).
    Raises InputError naming ``what`` with PyYAML's reason (line and column) for text
    that is not YAML, nests too deep or holds values PyYAML cannot build."""
    import yaml  # PyYAML: present wherever ansible-core runs

    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise _too_deep(what) from None
    except Exception as err:  # YAMLError, and ValueError/AttributeError of bad scalars
        raise InputError(
            f"{what} is not valid YAML: {_yaml_reason(err)}; fix: correct the syntax there"
        ) from None
    return check_shape(data, what)


def load_yaml_documents(text: str, what: str, max_nodes: int = MAX_NODES) -> list[Any]:
    """Every YAML document of ``text`` (empty ones dropped), shape-checked together (at
    most ``max_nodes`` values); the errors of :func:`load_yaml`. Text longer than
    ``MAX_TEXT_BYTES`` (a manifest of many objects) is parsed by libyaml where PyYAML has
    it (the same safe loader, ten times faster)."""
    import yaml

    loader = yaml.SafeLoader
    if len(text) > MAX_TEXT_BYTES:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except RecursionError:
        raise _too_deep(what) from None
    except Exception as err:
        raise InputError(
            f"{what} is not valid YAML: {_yaml_reason(err)}; fix: correct the syntax there"
        ) from None
    return check_shape(docs, what, max_nodes=max_nodes)


def check_object_sizes(docs: Iterable[Any], what: str, limit: int = MAX_OBJECT_BYTES) -> None:
    """Raise InputError naming ``what`` and the document's number for a document whose
    JSON is larger than ``limit`` bytes (``MAX_OBJECT_BYTES``: what kube-apiserver accepts
    as one request body)."""
    for n, doc in enumerate(docs):
        size = len(json.dumps(doc, default=str, separators=(",", ":")).encode("utf-8"))
        if size > limit:
            raise InputError(
                f"{what}: document {n + 1} is {_mib(size)} as JSON, more than the "
                f"{_mib(limit)} kube-apiserver accepts for one object (its "
                "--max-request-body default, MaxRequestBodyBytes); fix: split it into smaller "
                "objects"
            )


class _DuplicateName(ValueError):
    """A JSON object that names one member twice (args[0]: the name)."""


def _refuse_duplicate_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise _DuplicateName(name)
        out[name] = value
    return out


def load_json(text: str, what: str, example: str = '{"key": 1}') -> Any:
    """One JSON value of ``text``, shape-checked. Raises InputError naming ``what`` with
    the position of a syntax error (the fix shows ``example``), for an object that names a
    member twice, or for nesting too deep."""
    try:
        data = json.loads(text, object_pairs_hook=_refuse_duplicate_names)
    except _DuplicateName as dup:
        raise InputError(
            f"{what} names {dup.args[0]!r} twice in one object; JSON keeps only the last, so "
            "one of the two values would be lost silently; fix: write each name once"
        ) from None
    except RecursionError:
        raise _too_deep(what) from None
    except json.JSONDecodeError as err:
        raise InputError(
            f"{what} is not valid JSON ({err.msg}: line {err.lineno} column {err.colno}); "
            f"fix: write e.g. '{example}' (double quotes around names)"
        ) from None
    except ValueError as err:  # an integer of more than 4,300 digits
        raise InputError(f"{what} is not usable JSON ({err}); fix: give real values") from None
    return check_shape(data, what)


def plain_value(value: Any) -> Any:
    """Ansible's lazy and tagged containers (what a filter receives) as plain dicts, lists
    and scalars; anything else as its text."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain_value(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return value
    return str(value)


def variable_bool(value: Any) -> bool | None:
    """A variable's boolean as Ansible reads it (``ansible.module_utils.parsing.
    convert_bool``: ``BOOLEANS_TRUE`` / ``BOOLEANS_FALSE``, strings lower-cased and
    stripped: ``yes``, ``on``, ``1``, ``t``, ``y``, ...), or None when it is not one."""
    from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE, BOOLEANS_TRUE

    if isinstance(value, bool):
        return value
    key = value.lower().strip() if isinstance(value, str) else value
    try:
        if key in BOOLEANS_TRUE:
            return True
        if key in BOOLEANS_FALSE:
            return False
    except TypeError:  # unhashable (a list, a mapping)
        return None
    return None

# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""containerd configuration for the NVIDIA runtime and CDI: render, check, verify.

Pure Python. The node-side module ``containerd_runtime_config`` and the controller-side
filters (``plugins/filter/nvidia.py``) use it. TOML is read with ``tomllib`` (Python 3.11+),
else ``tomli`` or ``toml`` when installed; it is written by :func:`dump_toml`, which
covers what containerd configurations hold (tables, arrays of tables, strings, integers,
floats, booleans, arrays).

Facts and where they come from (containerd source, ``cmd/containerd/server/config`` and
``docs/cri/config.md``; NVIDIA container toolkit ``pkg/config/engine/containerd``):

* The configuration ``version`` decides the CRI plugin names: version 2 (containerd
  1.x) ``io.containerd.grpc.v1.cri``; version 3 (containerd 2.0 to 2.2) and version 4
  (containerd 2.3 and newer) ``io.containerd.cri.v1.runtime`` for runtimes and CDI.
  A file without ``version`` is version 1, which has no drop-in support here.
* containerd reads ``imports`` (paths or globs) after the main file. An imported file
  must have the main file's version: containerd 2.x refuses to start otherwise
  ("unsupported containerd configuration version").
* How imported files combine with the main file (containerd 1.x replaces a whole plugin
  section, 2.0 and newer merge key by key) is ``nvidia.containerd_merge``'s. Where sections are
  replaced the drop-in carries the CRI section in effect before it with the NVIDIA
  runtime added, or the settings of the main file and of earlier drop-ins would be lost.
* CDI: ``enable_cdi`` and ``cdi_spec_dirs`` exist from containerd 1.7 (off by default in
  1.7, on by default from 2.0, spec directories ``/etc/cdi`` and ``/var/run/cdi``).
  containerd 2.4 no longer knows ``enable_cdi`` (CDI is always on; its ``config dump``
  has ``cdi_spec_dirs`` only, and it warns about the key), seen with the v2.4.2 binary.
* The toolkit reads version 3 configurations from release 1.17.4; older toolkits fail with
  "unsupported config version: 3" on containerd 2.x.
* ``containerd config dump`` prints the configuration in the newest version of the
  running containerd (version 4 on 2.3 and newer), so the drop-in's version comes from the
  main file, never from the dump.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.merge import deep_merge
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd_merge as cm

try:  # Python 3.11+
    import tomllib as _toml_reader  # type: ignore[import-not-found]

    TOML_READER = "tomllib"
except ImportError:  # pragma: no cover - depends on the node's Python
    try:
        import tomli as _toml_reader  # type: ignore[import-not-found,no-redef]

        TOML_READER = "tomli"
    except ImportError:
        try:
            import toml as _toml_reader  # type: ignore[import-not-found,no-redef]

            TOML_READER = "toml"
        except ImportError:
            _toml_reader = None
            TOML_READER = ""

__all__ = [
    "CDI_MIN",
    "DEFAULT_CDI_SPEC_DIRS",
    "TOOLKIT_MIN_FOR_CONTAINERD_2",
    "ConfigError",
    "DropinPlan",
    "check_toolkit",
    "cri_plugin",
    "dump_toml",
    "effective_problems",
    "import_covers",
    "loads",
    "parse_containerd_version",
    "plan_dropin",
    "with_import",
]


class ConfigError(ValueError):
    """A configuration that cannot be handled safely; the message says why and the fix."""


#: containerd release from which CDI can be enabled in the CRI plugin.
CDI_MIN = (1, 7, 0)
#: containerd release that no longer knows ``enable_cdi`` (CDI always on); seen with 2.4.2.
CDI_SWITCH_GONE = (2, 4, 0)
#: Oldest NVIDIA container toolkit that reads version 3 containerd configurations.
TOOLKIT_MIN_FOR_CONTAINERD_2 = (1, 17, 4)
DEFAULT_CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
RUNC_V2 = "io.containerd.runc.v2"

_CONTAINERD_VERSION_RE = re.compile(r"(?:^|\s)v?(\d+)\.(\d+)\.(\d+)")


def _fmt(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


def parse_containerd_version(text: str) -> tuple[int, int, int]:
    """Release of ``containerd --version`` output or of a bare ``2.1.4``.

    ``containerd github.com/containerd/containerd/v2 v2.4.2`` -> ``(2, 4, 2)``;
    ``containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3`` ->
    ``(1, 6, 20)``. Raises :class:`ConfigError` when no release is found.
    """
    match = _CONTAINERD_VERSION_RE.search(str(text).strip())
    if not match:
        raise ConfigError(
            f"cannot read a containerd release from {str(text).strip()!r}; fix: install "
            "containerd first or set nvidia_container_toolkit_containerd_version, e.g. 2.1.4"
        )
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


#: A toolkit release as its packages are versioned: MAJOR.MINOR.PATCH, an optional leading
#: v, and an optional package revision or pre-release (``-1``, ``~rc.1``).
_TOOLKIT_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:[-~][0-9A-Za-z.~]+)?\Z", re.ASCII)


def parse_toolkit_version(text: str) -> tuple[int, int, int]:
    """``1.17.8`` (or ``1.17.8-1``, ``1.18.0~rc.1``) -> ``(1, 17, 8)``; raises
    :class:`ConfigError` for anything else, trailing text (``1.17.8;id``, ``1.17.8x``, a
    second line) and digits other than ASCII included: the value becomes a package
    version."""
    match = _TOOLKIT_RE.match(str(text).strip())
    if not match:
        raise ConfigError(
            f"nvidia_container_toolkit_version={str(text)!r} is not a release; fix: give it as "
            "1.17.8"
        )
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def check_toolkit(toolkit_version: str, containerd: str, enable_cdi: bool) -> dict:
    """Refuse a toolkit or CDI setting that cannot work with ``containerd`` (a release or
    ``containerd --version`` output); return ``{"containerd_version", "default_config_version",
    "cdi_default"}``.

    Raises :class:`ConfigError` when the toolkit is older than 1.17.4 on containerd 2.x,
    or CDI is wanted on containerd older than 1.7.
    """
    found = parse_containerd_version(containerd)
    if toolkit_version:
        toolkit = parse_toolkit_version(toolkit_version)
        if found[0] >= 2 and toolkit < TOOLKIT_MIN_FOR_CONTAINERD_2:
            raise ConfigError(
                f"nvidia_container_toolkit_version={toolkit_version}: containerd {_fmt(found)} "
                "writes configuration version 3 or newer, which toolkit releases before "
                f'{_fmt(TOOLKIT_MIN_FOR_CONTAINERD_2)} cannot read ("unsupported config version: '
                f'3"); fix: pin {_fmt(TOOLKIT_MIN_FOR_CONTAINERD_2)} or newer'
            )
    if enable_cdi and found < CDI_MIN:
        raise ConfigError(
            f"nvidia_container_toolkit_enable_cdi=true: containerd {_fmt(found)} has no CDI "
            f"support (added in {_fmt(CDI_MIN)}), and the NVIDIA DRA driver hands GPUs to "
            "containers through CDI; fix: upgrade containerd to 1.7 or newer (2.x has CDI on "
            "by default), or set nvidia_container_toolkit_enable_cdi=false for a "
            "RuntimeClass-only node"
        )
    return {
        "containerd_version": _fmt(found),
        "default_config_version": 2 if found[0] < 2 else 3,
        "cdi_default": found[0] >= 2,
    }


#: Oldest toolkit whose ``nvidia-ctk runtime configure --config-source=file
#: --drop-in-config`` this project has judged against every containerd of its matrix
#: (1.20.2; tests/integration/test_containerd_matrix.py).
NVIDIA_CTK_JUDGED_MIN = (1, 20, 0)
WRITERS = ("auto", "nvidia-ctk", "gpufleet")


def choose_writer(
    writer: str,
    containerd: str,
    toolkit_version: str,
    cdi_spec_dirs: Sequence[str] = DEFAULT_CDI_SPEC_DIRS,
) -> tuple[str, str]:
    """Who writes the drop-in: ``("nvidia-ctk" | "gpufleet", why)``.

    ``auto`` takes NVIDIA's ``nvidia-ctk runtime configure`` where it is right: containerd
    2.0 and newer (sections merge key by key, so its drop-in keeps what other files set)
    with a toolkit of :data:`NVIDIA_CTK_JUDGED_MIN` or newer and the default CDI spec
    directories (it has no option for others). On containerd 1.x its drop-in carries only
    the main file's CRI section, which replaces the one earlier drop-ins made, so this
    project's writer (the section in effect, :func:`plan_dropin`) is used there. Raises
    :class:`ConfigError` for an unknown ``writer`` or a ``nvidia-ctk`` request it cannot
    do right.
    """
    if writer not in WRITERS:
        raise ConfigError(
            f"nvidia_container_toolkit_containerd_writer={writer!r} is not one of "
            f"{', '.join(WRITERS)}; fix: use auto"
        )
    release = parse_containerd_version(containerd)
    reasons = []
    if cm.replaces_sections(release):
        reasons.append(
            f"containerd {_fmt(release)} replaces whole plugin sections on import and "
            "nvidia-ctk's drop-in carries only the main file's CRI section, so settings of "
            "earlier drop-ins would be lost"
        )
    if toolkit_version and parse_toolkit_version(toolkit_version) < NVIDIA_CTK_JUDGED_MIN:
        reasons.append(
            f"toolkit {toolkit_version} is older than {_fmt(NVIDIA_CTK_JUDGED_MIN)}, the oldest "
            "whose nvidia-ctk drop-ins were judged against the real containerd"
        )
    if list(cdi_spec_dirs) != list(DEFAULT_CDI_SPEC_DIRS):
        reasons.append("nvidia-ctk cannot set cdi_spec_dirs other than containerd's default")
    if writer == "gpufleet":
        return "gpufleet", "asked for"
    if not reasons:
        return "nvidia-ctk", "NVIDIA's nvidia-ctk runtime configure with a drop-in"
    if writer == "nvidia-ctk":
        raise ConfigError(
            f"nvidia_container_toolkit_containerd_writer=nvidia-ctk: {'; '.join(reasons)}; "
            "fix: use auto or gpufleet"
        )
    return "gpufleet", "; ".join(reasons)


def cri_plugin(config_version: int) -> str:
    """CRI plugin section that holds runtimes and CDI in a ``config_version`` file."""
    if config_version == 2:
        return "io.containerd.grpc.v1.cri"
    if config_version in (3, 4):
        return "io.containerd.cri.v1.runtime"
    raise ConfigError(
        f"containerd configuration version {config_version} has no known CRI plugin name; "
        "fix: migrate it with 'containerd config migrate' (versions 2, 3 and 4 are supported)"
    )


# ---------------------------------------------------------------------------------- TOML


def loads(text: str, where: str = "TOML") -> dict:
    """Parse TOML ``text``; raises :class:`ConfigError` naming ``where`` on bad TOML or when
    the node's Python has no TOML reader."""
    if _toml_reader is None:
        raise ConfigError(
            "the Python that runs this module has no TOML reader (tomllib is Python 3.11+); "
            "fix: install python3-tomli (or python3-toml), or point ansible_python_interpreter "
            "at a Python 3.11 or newer"
        )
    try:
        return _toml_reader.loads(text)
    except RecursionError:
        raise ConfigError(f"{where} is not valid TOML: it nests too deep to parse") from None
    except Exception as err:  # each reader has its own error class
        raise ConfigError(f"{where} is not valid TOML: {err}") from err


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+\Z")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise ConfigError(f"cannot write {type(value).__name__} value {value!r} as TOML")


def _is_table_array(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def dump_toml(data: dict) -> str:
    """TOML text of ``data``: keys in their order, scalars before sub-tables, each table
    under its full dotted header (``[plugins."io.containerd.grpc.v1.cri".containerd]``),
    two spaces of indent per level as containerd writes it."""
    lines: list[str] = []

    def table(path: list[str], body: dict, array: bool = False) -> None:
        depth = max(len(path) - 1, 0)
        indent = "  " * depth
        scalars = [
            (k, v) for k, v in body.items() if not isinstance(v, dict) and not _is_table_array(v)
        ]
        tables = [(k, v) for k, v in body.items() if isinstance(v, dict) or _is_table_array(v)]
        if path:
            if lines:
                lines.append("")
            header = ".".join(_key(p) for p in path)
            lines.append(f"{indent}[[{header}]]" if array else f"{indent}[{header}]")
        inner = "  " * (len(path)) if path else ""
        for key, value in scalars:
            lines.append(f"{inner}{_key(key)} = {_value(value)}")
        for key, value in tables:
            if isinstance(value, dict):
                table([*path, key], value)
            else:
                for item in value:
                    table([*path, key], item, array=True)

    table([], data)
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ imports


def import_covers(imports: list[str], main_path: str, dropin: str) -> bool:
    """Whether containerd, reading ``imports`` of ``main_path``, loads ``dropin``
    (relative entries are relative to the main file's directory; ``*`` is a glob)."""
    base = os.path.dirname(main_path)
    for entry in imports or []:
        path = os.path.normpath(entry if os.path.isabs(entry) else os.path.join(base, entry))
        if path == os.path.normpath(dropin):
            return True
        if "*" in path and fnmatch.fnmatch(os.path.normpath(dropin), path):
            return True
    return False


_HEADER_RE = re.compile(r"^\s*\[")
_IMPORTS_RE = re.compile(r"^(\s*imports\s*=\s*)\[")
_VERSION_LINE_RE = re.compile(r"^\s*version\s*=")


def _array_end(text: str, start: int) -> int:
    """Index of the ``]`` closing the array that opens at ``text[start] == '['``."""
    depth = 0
    i = start
    quote = ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in ('"', "'"):
            quote = ch
        elif ch == "#":
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ConfigError("the imports array of the main configuration is not closed")


def _last_value_char(text: str, open_at: int, close_at: int) -> int:
    """Index of the last character of the array's content that is neither blank nor in a
    comment (``open_at`` itself when the array is empty)."""
    last = open_at
    i = open_at + 1
    quote = ""
    while i < close_at:
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                last = i - 1
                continue
            if ch == quote:
                quote = ""
            last = i
        elif ch in ('"', "'"):
            quote = ch
            last = i
        elif ch == "#":
            while i < close_at and text[i] != "\n":
                i += 1
            continue
        elif not ch.isspace():
            last = i
        i += 1
    return last


def with_import(text: str, entry: str) -> str:
    """``text`` (a main configuration) with ``entry`` added to its top-level ``imports``.

    Only the ``imports`` line changes (or one line is added after ``version``, else at the
    top); every other byte stays. Raises :class:`ConfigError` when the result would not
    parse to the same configuration plus the entry.
    """
    before = loads(text, "the main configuration")
    lines = text.splitlines(keepends=True)
    top_end = next((i for i, line in enumerate(lines) if _HEADER_RE.match(line)), len(lines))
    new_entry = json.dumps(entry)
    out: str | None = None
    if "imports" in before:
        offset = 0
        for line in lines[:top_end]:
            match = _IMPORTS_RE.match(line)
            if match:
                open_at = offset + match.end() - 1
                close_at = _array_end(text, open_at)
                last = _last_value_char(text, open_at, close_at)
                needs_comma = text[last] not in "[,"
                if "\n" in text[open_at:close_at]:
                    # multi-line array: the entry goes on its own line before the "]" line
                    line_start = text.rindex("\n", 0, close_at) + 1
                    if text[line_start:close_at].strip():
                        line_start = close_at
                    indent = "  "
                    out = (
                        text[: last + 1]
                        + ("," if needs_comma else "")
                        + text[last + 1 : line_start]
                        + f"{indent}{new_entry},\n"
                        + text[line_start:]
                    )
                else:
                    out = (
                        text[: last + 1]
                        + (", " if needs_comma else "")
                        + new_entry
                        + text[last + 1 :]
                    )
                break
            offset += len(line)
        if out is None:
            raise ConfigError(
                "the main configuration sets imports in a form this module does not edit "
                "(not 'imports = [...]' before the first table); fix: add the drop-in "
                f"directory to it by hand: {entry}"
            )
    else:
        line = f"imports = [{new_entry}]\n"
        insert_at = 0
        for i, existing in enumerate(lines[:top_end]):
            if _VERSION_LINE_RE.match(existing):
                insert_at = i + 1
                break
        if insert_at and not lines[insert_at - 1].endswith("\n"):
            lines[insert_at - 1] += "\n"
        lines.insert(insert_at, line)
        out = "".join(lines)
    after = loads(out, "the edited main configuration")
    expected = dict(before)
    expected["imports"] = [*before.get("imports", []), entry]
    if after != expected:
        raise ConfigError(
            "adding the imports entry would change more than imports; fix: add "
            f"{entry!r} to imports of the main configuration by hand"
        )
    return out


# ------------------------------------------------------------------------------ drop-in


@dataclass
class DropinPlan:
    """What to write: ``main_text`` (``None``: leave the main file as it is), ``dropin_text``,
    the ``config_version`` both carry, the CRI ``plugin`` name, and ``notes`` for the
    module's ``changes``."""

    main_text: str | None
    dropin_text: str
    config_version: int
    plugin: str
    copied_section: bool
    notes: list[str] = field(default_factory=list)


def file_version(data: dict) -> int:
    """``version`` of a parsed configuration; containerd reads a missing one as 1."""
    version = data.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ConfigError(f"version = {version!r} is not an integer")
    return version


def _main_file(
    main_text: str | None,
    main_path: str,
    dropin_path: str,
    release: tuple[int, ...],
    notes: list[str],
) -> tuple[dict, int, str | None]:
    """``(parsed main file, its version, its new text or None when unchanged)``: a file
    with the version ``release`` defaults to and the imports line when there is none, else
    the file with the drop-in's glob added to ``imports`` when they do not cover it. Notes
    what changes on ``notes``. Raises ConfigError for a version 1 file, or a version
    ``release`` cannot read."""
    if main_text is None:
        version = 2 if release[0] < 2 else 3
        main = {"version": version}
        new_main: str | None = (
            f"version = {version}\nimports = [{json.dumps(dropin_glob(dropin_path))}]\n"
        )
        notes.append(f"{main_path} absent: created with version {version} and imports only")
    else:
        main = loads(main_text, main_path)
        version = file_version(main)
        if version == 1:
            raise ConfigError(
                f"{main_path} is a version 1 configuration (no 'version' key), which takes no "
                "drop-ins; fix: migrate it with 'containerd config migrate' and set version = 2 "
                "(containerd 1.x) or 3 (containerd 2.x)"
            )
        if release[0] < 2 and version > 2:
            raise ConfigError(
                f"{main_path} is version {version} but containerd {_fmt(release)} reads version 2 "
                "at most; fix: write a version 2 configuration for containerd 1.x"
            )
        new_main = None
        if not import_covers(main.get("imports", []), main_path, dropin_path):
            new_main = with_import(main_text, dropin_glob(dropin_path))
            notes.append(f"{main_path}: imports gains {dropin_glob(dropin_path)}")
    return main, version, new_main


def _refuse_mixed_versions(
    other_dropins: dict[str, str], version: int, main_path: str, plugin: str
) -> None:
    """Raises ConfigError for an imported file whose version is not the main file's
    (containerd refuses to start with mixed versions)."""
    for path, text in sorted(other_dropins.items()):
        other = file_version(loads(text, path))
        if other != version:
            raise ConfigError(
                f"{path} is a version {other} drop-in but {main_path} is version {version}; "
                'containerd refuses to start with mixed versions ("unsupported containerd '
                f'configuration version"); fix: rewrite {path} for version {version} (plugin '
                f"{plugin!r}) or remove it, then run again"
            )


def _runtime_entry(have: dict, in_effect: dict, runtime_name: str, runtime_binary: str) -> dict:
    """The runtime's entry of the drop-in: runc's entry with the runtime's own settings over
    it (``have``: the runtimes of the files), ``BinaryName`` the runtime binary and
    ``SystemdCgroup`` as runc's in effect (``in_effect``, else the files')."""
    # the runtime starts as runc's entry with its own settings over it, as nvidia-ctk does;
    # SystemdCgroup is always runc's in effect (it must match the kubelet's cgroup driver)
    runc = have.get("runc", {"runtime_type": RUNC_V2})
    base = deep_merge(runc, have.get(runtime_name, {}))
    base["runtime_type"] = RUNC_V2
    options = base.setdefault("options", {})
    options["BinaryName"] = runtime_binary
    runc_options = (in_effect.get("runc") or runc).get("options", {})
    if "SystemdCgroup" in runc_options:
        options["SystemdCgroup"] = runc_options["SystemdCgroup"]
    return base


def plan_dropin(
    *,
    main_text: str | None,
    main_path: str,
    dropin_path: str,
    containerd_version: str,
    other_dropins: dict[str, str],
    runtime_name: str = "nvidia",
    runtime_binary: str = "/usr/bin/nvidia-container-runtime",
    enable_cdi: bool = True,
    cdi_spec_dirs: list[str] | tuple[str, ...] = DEFAULT_CDI_SPEC_DIRS,
    set_as_default: bool = False,
    effective: dict | None = None,
) -> DropinPlan:
    """Plan the main file's ``imports`` entry and the drop-in for the NVIDIA runtime.

    ``main_text``: the main configuration (``None`` when absent: one is created with the
    version containerd ``containerd_version`` defaults to and the imports line only).
    ``other_dropins``: path -> text of every other file the main file's imports load.
    ``effective``: the parsed ``containerd config dump`` before the change, when
    containerd could be asked: the runtimes in effect (defaults included) and runc's
    ``SystemdCgroup`` are taken from it, not from the files alone.
    Raises :class:`ConfigError` (nothing written yet) for a version 1 main file, another
    imported file whose version differs from the main file's (containerd would refuse to
    start), a file that is not TOML, or CDI on a containerd without it.
    """
    release = parse_containerd_version(containerd_version)
    notes: list[str] = []
    main, version, new_main = _main_file(main_text, main_path, dropin_path, release, notes)
    plugin = cri_plugin(version)
    _refuse_mixed_versions(other_dropins, version, main_path, plugin)
    if enable_cdi and release < CDI_MIN:
        raise ConfigError(
            f"containerd {_fmt(release)} has no CDI support (added in {_fmt(CDI_MIN)}); fix: "
            "upgrade containerd or set enable_cdi=false"
        )

    parsed = {path: loads(text, path) for path, text in other_dropins.items()}
    order = cm.load_order(
        main.get("imports", []),
        main_path,
        dropin_path,
        glob=lambda pattern: [p for p in parsed if fnmatch.fnmatch(p, pattern)],
        added_entry=None if main_text is None or new_main is None else dropin_glob(dropin_path),
    )
    if main_text is None:
        order = [os.path.normpath(dropin_path)]
    at = order.index(os.path.normpath(dropin_path))
    earlier = [main, *(parsed[p] for p in order[:at] if p in parsed)]
    later = [(p, parsed[p]) for p in order[at + 1 :] if p in parsed]
    copied = cm.replaces_sections(release)
    in_files = cm.plugin_section(earlier, plugin, release)
    _refuse_later_files(later, plugin, runtime_name, copied, set_as_default, dropin_path)
    section = copy.deepcopy(in_files) if copied else {}
    runtimes = section.setdefault("containerd", {}).setdefault("runtimes", {})
    have = in_files.get("containerd", {}).get("runtimes", {})
    in_effect = _runtimes_in_effect(effective, plugin)
    if copied and in_effect:
        # a runtimes table replaces the default one (runc) as well: carry all in effect
        runtimes.update(copy.deepcopy(in_effect))
    runtimes[runtime_name] = _runtime_entry(have, in_effect, runtime_name, runtime_binary)
    if copied:  # the same text whichever runtimes the dump listed first
        section["containerd"]["runtimes"] = dict(sorted(runtimes.items()))
    if set_as_default:
        section["containerd"]["default_runtime_name"] = runtime_name
    if enable_cdi:
        # 1.7 has CDI off by default and 2.0 to 2.3 honour an explicit false in any file,
        # so the switch is written where it exists; 2.4 no longer knows it (it warns
        # "Ignoring unknown key ... enable_cdi") and always has CDI on
        if release < CDI_SWITCH_GONE:
            section["enable_cdi"] = True
        section["cdi_spec_dirs"] = list(cdi_spec_dirs)
    if copied:
        notes.append(
            f"containerd {_fmt(release)} replaces whole plugin sections on import: the drop-in "
            f"carries the {plugin} section that {main_path} and the files imported before "
            "it give together"
        )
    dropin = {"version": version, "plugins": {plugin: section}}
    header = (
        "# Written by the gpufleet.cluster nvidia_container_toolkit role (module\n"
        "# containerd_runtime_config): the NVIDIA runtime and CDI for containerd.\n"
        f"# Version {version} like {main_path}; edits here are overwritten on the next run.\n"
    )
    return DropinPlan(new_main, header + dump_toml(dropin), version, plugin, copied, notes)


def _runtimes_in_effect(effective: dict | None, plugin: str) -> dict:
    """``containerd.runtimes`` of ``plugin`` in a parsed dump ({} without one)."""
    section = ((effective or {}).get("plugins") or {}).get(plugin) or {}
    return section.get("containerd", {}).get("runtimes", {}) or {}


def _refuse_later_files(
    later: Sequence[tuple[str, dict]],
    plugin: str,
    runtime_name: str,
    copied: bool,
    set_as_default: bool,
    dropin_path: str,
) -> None:
    """Refuse files containerd loads after the drop-in that would undo it: on 1.x any
    that has the CRI section (it replaces the drop-in's), from 2.0 any that sets a key the
    drop-in owns."""
    owned = cm.owned_by_runtime_change(plugin, runtime_name, set_as_default=set_as_default)
    for path, data in later:
        section = (data.get("plugins") or {}).get(plugin)
        if section is None:
            continue
        keys = [".".join(k) for k in cm.leaves({"plugins": {plugin: section}}) if owned(k)]
        if copied or keys:
            what = f"sets {', '.join(keys)}" if keys else f"has a [plugins.{plugin!r}] section"
            raise ConfigError(
                f"{path} is loaded after {dropin_path} and {what}, which "
                + (
                    "replaces the whole section the drop-in writes"
                    if copied
                    else "overrides the drop-in"
                )
                + f"; fix: rename it so that it sorts before {os.path.basename(dropin_path)}, or "
                "move its settings into the main file"
            )


def dropin_glob(dropin_path: str) -> str:
    """The imports entry that loads ``dropin_path``: ``<its directory>/*.toml``."""
    return os.path.join(os.path.dirname(dropin_path), "*.toml")


# ------------------------------------------------------------------------- verification


def effective_problems(
    dump: dict,
    *,
    runtime_name: str = "nvidia",
    runtime_binary: str = "/usr/bin/nvidia-container-runtime",
    enable_cdi: bool = True,
    cdi_spec_dirs: list[str] | tuple[str, ...] = DEFAULT_CDI_SPEC_DIRS,
    expect: dict | None = None,
) -> list[str]:
    """Problems of the configuration containerd actually uses (``containerd config dump``,
    parsed), empty when the NVIDIA runtime and CDI are in effect.

    ``expect``: other dotted keys of the CRI plugin section that must keep their value
    (``containerd.runtimes.runc.options.SystemdCgroup`` -> ``True``).
    """
    version = file_version(dump)
    plugin = cri_plugin(version)
    section = dump.get("plugins", {}).get(plugin)
    if section is None:
        return [f"containerd config dump has no plugins.{plugin!r} section (version {version})"]
    problems = []
    runtime = section.get("containerd", {}).get("runtimes", {}).get(runtime_name)
    if runtime is None:
        problems.append(f"no runtime {runtime_name!r} under plugins.{plugin!r}.containerd.runtimes")
    else:
        if runtime.get("runtime_type") != RUNC_V2:
            problems.append(
                f"runtime {runtime_name!r} has runtime_type={runtime.get('runtime_type')!r}, "
                f"expected {RUNC_V2!r}"
            )
        binary = runtime.get("options", {}).get("BinaryName")
        if binary != runtime_binary:
            problems.append(
                f"runtime {runtime_name!r} has options.BinaryName={binary!r}, "
                f"expected {runtime_binary!r}"
            )
    if enable_cdi:
        # a dump without the switch comes from a containerd that always has CDI on
        if "enable_cdi" in section and section["enable_cdi"] is not True:
            problems.append(f"plugins.{plugin!r}.enable_cdi is {section['enable_cdi']!r}, not true")
        dirs = section.get("cdi_spec_dirs") or []
        missing = [d for d in cdi_spec_dirs if d not in dirs]
        if missing:
            problems.append(f"plugins.{plugin!r}.cdi_spec_dirs={dirs!r} lacks {missing!r}")
    for dotted, wanted in (expect or {}).items():
        node = section
        for part in dotted.split("."):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        if node != wanted:
            problems.append(f"plugins.{plugin!r}.{dotted} is {node!r}, expected {wanted!r}")
    return problems

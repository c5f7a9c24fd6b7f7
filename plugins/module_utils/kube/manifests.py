# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Edit feature gates and runtime-config where kubeadm clusters keep them.

This module decides HOW a wanted setting is written; WHAT to set per Kubernetes version
is the version model's business (``dra``), which this module does not import.
Input per component is a :class:`FlagEdit`: feature gates to set
(``{"DRAPrioritizedList": True}``), gate names that must be absent, runtime-config
entries to set (``{"resource.k8s.io/v1beta1": "true"}``) and runtime-config keys that
must be absent.

Places edited, each by a pure function returning an :class:`EditResult` (new text plus
one :class:`Change` per thing changed, with its old and new value and why):

* ``edit_cluster_configuration``: the kubeadm ``ClusterConfiguration`` (ConfigMap
  ``kube-system/kubeadm-config``, key ``ClusterConfiguration``, or a kubeadm config
  file), ``apiServer``/``controllerManager``/``scheduler`` ``extraArgs`` for
  ``kubeadm.k8s.io/v1beta3`` (a map) and ``v1beta4``/``v1`` (a list of ``{name, value}``).
* ``edit_static_pod_manifest``: ``/etc/kubernetes/manifests/kube-*.yaml``; only the
  ``--feature-gates=``/``--runtime-config=`` items of the component's ``command`` change,
  the rest of the file is kept byte for byte where the layout allows.
* ``edit_kubelet_configuration`` (``kubelet_config``): the ``featureGates`` map of a
  ``KubeletConfiguration`` (``/var/lib/kubelet/config.yaml``, ConfigMap
  ``kube-system/kubelet-config`` ``kubelet``).
* ``enable_dynamic_resources`` (``kube.scheduler_config``): a custom
  ``KubeSchedulerConfiguration`` that disables the ``DynamicResources`` plugin.

The parts, one job each: ``kube.flags`` (flag values parsed and merged as the components
do, ``FlagEdit`` and the edit records), ``kube.command_line`` (a component's command line
edited), ``kubelet_config`` (``edit_kubelet_configuration`` and where the kubelet takes
its flags from), ``kube.scheduler_config`` (``enable_dynamic_resources``); this module edits
the kubeadm ``ClusterConfiguration`` and the static pod manifests and reads and writes
the YAML documents.

Needs PyYAML (``HAS_YAML``); output is dumped with ``sort_keys=False`` so keys keep
their order. Comments in re-dumped YAML documents are lost (PyYAML does not keep them);
the static pod manifest edit keeps them because it edits the text in place.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.command_line import (
    CommandArg,
    command_flags,
    edit_args,
    edit_command,
    flags_from_values,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    FEATURE_GATES,
    RUNTIME_CONFIG,
    Change,
    ComponentFlags,
    ConfigEditError,
    EditResult,
    FlagEdit,
)

__all__ = [
    "APISERVER",
    "CLUSTER_CONFIGURATION_SECTIONS",
    "COMPONENTS",
    "CONTROLLER_MANAGER",
    "KUBEADM_APIS",
    "SCHEDULER",
    "cluster_configuration_flags",
    "edit_cluster_configuration",
    "edit_static_pod_manifest",
    "static_pod_flags",
]


try:
    import yaml

    HAS_YAML = True
    YAML_IMPORT_ERROR: str | None = None
except ImportError as _err:  # pragma: no cover - exercised only where PyYAML is missing
    yaml = None  # type: ignore[assignment]
    HAS_YAML = False
    YAML_IMPORT_ERROR = str(_err)


APISERVER = "kube-apiserver"


CONTROLLER_MANAGER = "kube-controller-manager"


SCHEDULER = "kube-scheduler"


#: Control-plane components kubeadm runs as static pods, in kubeadm's order.
COMPONENTS = (APISERVER, CONTROLLER_MANAGER, SCHEDULER)


#: Component -> section of the kubeadm ClusterConfiguration holding its ``extraArgs``.
CLUSTER_CONFIGURATION_SECTIONS = {
    APISERVER: "apiServer",
    CONTROLLER_MANAGER: "controllerManager",
    SCHEDULER: "scheduler",
}


#: kubeadm config API -> shape of ``extraArgs``: ``map`` (v1beta3) or ``list`` of
#: ``{name, value}`` (v1beta4 from 1.31, kubernetes/kubernetes#125029; v1 experimental
#: in 1.36+, adds ``mergeMethod``). Source: ``cmd/kubeadm/app/apis/kubeadm/<version>/types.go``.
KUBEADM_APIS = {
    "kubeadm.k8s.io/v1beta3": "map",
    "kubeadm.k8s.io/v1beta4": "list",
    "kubeadm.k8s.io/v1": "list",
}


def _require_yaml() -> None:
    if not HAS_YAML:
        raise ConfigEditError(
            f"PyYAML is required to edit Kubernetes configuration ({YAML_IMPORT_ERROR}); "
            "fix: install python3-yaml (Debian) or pip install PyYAML on this host"
        )


# ------------------------------------------------------------------ YAML documents

_DOC_SPLIT = re.compile(r"^---[ \t]*(?:#.*)?$", re.MULTILINE)


if HAS_YAML:

    class _GoStyleDumper(yaml.SafeDumper):
        """Quote like Kubernetes' YAML encoder (go-yaml via sigs.k8s.io/yaml): a string
        that cannot be plain is double-quoted, so a document kubeadm wrote is dumped back
        byte for byte."""

        def choose_scalar_style(self) -> str:
            style = super().choose_scalar_style()
            return '"' if style == "'" else style


def _dump(data: Any) -> str:
    return yaml.dump(
        data,
        Dumper=_GoStyleDumper,
        sort_keys=False,
        default_flow_style=False,
        width=1 << 30,
        allow_unicode=True,
    )


def _load(text: str, what: str) -> Any:
    """One YAML document of a host file, through the bounded loader (``common/limits``);
    ConfigEditError naming ``what`` for text that is not YAML or nests too deep."""
    try:
        return ig.load_yaml(text, what)
    except ig.InputError as err:
        raise ConfigEditError(str(err)) from None


@dataclass
class _Doc:
    prefix: str  # the separator line (and what precedes the body) kept verbatim
    body: str


def _split_documents(text: str) -> list[_Doc]:
    docs: list[_Doc] = []
    pos = 0
    prefix = ""
    for m in _DOC_SPLIT.finditer(text):
        docs.append(_Doc(prefix, text[pos : m.start()]))
        end = m.end() + 1 if text[m.end() : m.end() + 1] == "\n" else m.end()
        prefix = text[m.start() : end]
        pos = end
    docs.append(_Doc(prefix, text[pos:]))
    return [d for d in docs if d.prefix or d.body.strip()]


def edit_document_of_kind(
    text: str,
    kind: str,
    what: str,
    edit: Callable[[dict[str, Any]], list[Change]],
) -> EditResult:
    """Find the one YAML document of ``kind`` in ``text`` (a single document or a stream),
    let ``edit`` change its parsed form in place and re-dump only that document."""
    _require_yaml()
    docs = _split_documents(text)
    found = []
    for i, doc in enumerate(docs):
        data = _load(doc.body, what)
        if isinstance(data, dict) and data.get("kind") == kind:
            found.append((i, data))
    if not found:
        kinds = [
            (d.get("kind") if isinstance(d, dict) else type(d).__name__)
            for d in (_load(doc.body, what) for doc in docs)
        ]
        raise ConfigEditError(
            f"{what}: no document of kind {kind} (kinds found: {kinds or 'none'}); fix: "
            f"pass the {kind} text"
        )
    if len(found) > 1:
        raise ConfigEditError(
            f"{what}: {len(found)} documents of kind {kind}; fix: keep one {kind} per file"
        )
    index, data = found[0]
    changes = edit(data)
    if not changes:
        return EditResult(text)
    docs[index].body = _dump(data)
    return EditResult("".join(d.prefix + d.body for d in docs), tuple(changes))


def one_document(text: str, what: str) -> dict[str, Any]:
    _require_yaml()
    data = _load(text, what)
    if not isinstance(data, dict):
        raise ConfigEditError(
            f"{what} is not a YAML mapping (got {type(data).__name__}); fix: pass the file text"
        )
    return data


# ------------------------------------------------------------------ kubeadm ClusterConfiguration


def _extra_args_shape(data: Mapping[str, Any], what: str) -> str:
    api = data.get("apiVersion")
    shape = KUBEADM_APIS.get(str(api))
    if shape is None:
        raise ConfigEditError(
            f"{what}: apiVersion {api!r} is not a kubeadm config API this module edits "
            f"(known: {', '.join(KUBEADM_APIS)}); fix: migrate the file with "
            "'kubeadm config migrate --old-config <file>' of a kubeadm that reads it"
        )
    return shape


def _section_args(section: Mapping[str, Any], shape: str, where: str) -> list[CommandArg]:
    extra = section.get("extraArgs")
    if extra is None:
        return []
    args: list[CommandArg] = []
    if shape == "map":
        if not isinstance(extra, Mapping):
            raise ConfigEditError(
                f"{where}: extraArgs is a {type(extra).__name__}, kubeadm.k8s.io/v1beta3 "
                "wants a map of flag: value; fix: write extraArgs as a map"
            )
        for key, value in extra.items():
            args.append(_managed_arg(str(key), value, where, key))
        return args
    if not isinstance(extra, list):
        raise ConfigEditError(
            f"{where}: extraArgs is a {type(extra).__name__}, kubeadm.k8s.io/v1beta4 wants a "
            "list of {name, value}; fix: write '- name: feature-gates' / '  value: ...' items"
        )
    for item in extra:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ConfigEditError(
                f"{where}: extraArgs item {item!r} has no name; fix: give each item "
                "name: <flag> and value: <value>"
            )
        name = item["name"]
        if name in (FEATURE_GATES, RUNTIME_CONFIG) and item.get("mergeMethod"):
            raise ConfigEditError(
                f"{where}: extraArgs {name} has mergeMethod {item['mergeMethod']!r}; this "
                "module only edits replaced values; fix: drop mergeMethod from that item"
            )
        args.append(_managed_arg(name, item.get("value", ""), where, item))
    return args


def _managed_arg(name: str, value: Any, where: str, origin: Any) -> CommandArg:
    if name in (FEATURE_GATES, RUNTIME_CONFIG):
        if not isinstance(value, str):
            raise ConfigEditError(
                f"{where}: extraArgs {name} value {value!r} is not a string; fix: quote it, "
                f'e.g. "{name}": "Name=true"'
            )
        return CommandArg(name, value, origin)
    return CommandArg(None, "", origin)


def _store_section_args(section: dict[str, Any], shape: str, args: Sequence[CommandArg]) -> None:
    """Write ``args`` back as ``extraArgs``; unchanged items are the original objects."""
    new: Any
    if shape == "map":
        old = section.get("extraArgs") or {}
        new = {}
        for a in args:
            if a.origin is None:
                new[a.name] = a.value
            else:
                new[a.origin] = a.value if a.edited else old[a.origin]
    else:
        new = []
        for a in args:
            if a.origin is None:
                new.append({"name": a.name, "value": a.value})
            elif a.edited:
                item = dict(a.origin)
                item["value"] = a.value
                new.append(item)
            else:
                new.append(a.origin)
    if new:
        section["extraArgs"] = new
    else:
        section.pop("extraArgs", None)


def edit_cluster_configuration(text: str, edits: Mapping[str, FlagEdit]) -> EditResult:
    """Edit ``extraArgs`` of a kubeadm ClusterConfiguration.

    ``text``: the ClusterConfiguration document (the ``ClusterConfiguration`` key of
    ConfigMap ``kube-system/kubeadm-config``) or a kubeadm config file holding one among
    other documents (the others are kept verbatim). ``edits``: component name
    (``kube-apiserver``, ``kube-controller-manager``, ``kube-scheduler``) -> FlagEdit.
    A missing section or ``extraArgs`` is created when something must be set; an
    ``extraArgs`` left empty is removed. For v1beta4/v1, several items of one flag are
    merged into the last one (reported). Raises ConfigEditError for an unknown
    apiVersion, a component name, runtime-config for a component other than
    kube-apiserver, or malformed values.
    """
    _check_components(edits, COMPONENTS, "edits")

    def apply(data: dict[str, Any]) -> list[Change]:
        shape = _extra_args_shape(data, "ClusterConfiguration")
        changes: list[Change] = []
        for component in COMPONENTS:
            edit = edits.get(component)
            if edit is None or edit.empty:
                continue
            name = CLUSTER_CONFIGURATION_SECTIONS[component]
            where = f"ClusterConfiguration {name}.extraArgs"
            section = data.get(name)
            if section is None:
                section = {}
            elif not isinstance(section, dict):
                raise ConfigEditError(
                    f"ClusterConfiguration {name} is a {type(section).__name__}, not a "
                    "mapping; fix: write it as a mapping"
                )
            args = _section_args(section, shape, where)
            new_args, found = edit_args(args, edit, lambda flag, w=where: f"{w} {flag}")
            if found:
                _store_section_args(section, shape, new_args)
                data[name] = section
                changes.extend(found)
        return changes

    return edit_document_of_kind(text, "ClusterConfiguration", "ClusterConfiguration", apply)


def cluster_configuration_flags(text: str) -> dict[str, ComponentFlags]:
    """Effective feature gates and runtime-config per control-plane component as written
    in a kubeadm ClusterConfiguration (``text`` as for ``edit_cluster_configuration``)."""
    result: dict[str, ComponentFlags] = {}

    def read(data: dict[str, Any]) -> list[Change]:
        shape = _extra_args_shape(data, "ClusterConfiguration")
        for component, name in CLUSTER_CONFIGURATION_SECTIONS.items():
            where = f"ClusterConfiguration {name}.extraArgs"
            args = _section_args(data.get(name) or {}, shape, where)
            result[component] = flags_from_values(
                [a.value for a in args if a.name == FEATURE_GATES],
                [a.value for a in args if a.name == RUNTIME_CONFIG],
                where,
            )
        return []

    edit_document_of_kind(text, "ClusterConfiguration", "ClusterConfiguration", read)
    return result


def _check_components(edits: Mapping[str, FlagEdit], allowed: Sequence[str], what: str) -> None:
    for component, edit in edits.items():
        if component not in allowed:
            raise ConfigEditError(
                f"{what}: component {component!r} is not one of {', '.join(allowed)}"
            )
        if component != APISERVER and edit.touches_runtime_config:
            raise ConfigEditError(
                f"{what}: runtime-config is a kube-apiserver flag, {component} has none; "
                "fix: give runtime_config only for the apiserver"
            )


# ------------------------------------------------------------------ static pod manifests


def _find_container(data: Mapping[str, Any], component: str, what: str) -> Mapping[str, Any]:
    containers = getattr(data.get("spec"), "get", {}.get)("containers") or []  # spec: any YAML
    names = [c.get("name") for c in containers if isinstance(c, Mapping)]
    for c in containers:
        if isinstance(c, Mapping) and c.get("name") == component:
            return c
    raise ConfigEditError(
        f"{what}: no container named {component} (containers: {names or 'none'}); fix: pass "
        "the manifest of that component or the right component name"
    )


def static_pod_flags(text: str, component: str) -> ComponentFlags:
    """Effective feature gates and runtime-config of ``component``'s container command in
    a static pod manifest."""
    what = f"{component} static pod manifest"
    data = one_document(text, what)
    container = _find_container(data, component, what)
    return command_flags(list(container.get("command") or []), f"{component} command")


def edit_static_pod_manifest(text: str, component: str, edit: FlagEdit) -> EditResult:
    """Edit ``--feature-gates``/``--runtime-config`` in a kubeadm static pod manifest.

    Only the ``command`` of the container named ``component`` changes: the managed flag
    items are rewritten in place, a missing flag is appended after the last command item,
    a flag left empty is removed. The text outside those items is kept byte for byte when
    the command is a block sequence of plain or quoted scalars (kubeadm's layout);
    otherwise the document is re-dumped (same data, keys in their order). Raises
    ConfigEditError for an unknown component, a missing container, flags in ``args``
    (kubeadm never writes them there) or malformed values.
    """
    if component not in COMPONENTS:
        raise ConfigEditError(
            f"component={component!r} is not a kubeadm static pod component; fix: use one "
            f"of {', '.join(COMPONENTS)}"
        )
    _check_components({component: edit}, COMPONENTS, "edit")
    what = f"{component} static pod manifest"
    data = one_document(text, what)
    container = _find_container(data, component, what)
    for item in container.get("args") or []:
        if isinstance(item, str) and item.split("=", 1)[0] in (
            "--" + FEATURE_GATES,
            "--" + RUNTIME_CONFIG,
        ):
            raise ConfigEditError(
                f"{what}: {item.split('=', 1)[0]} is in the container's args, not its "
                "command; fix: move it into command (kubeadm's layout)"
            )
    command = container.get("command")
    if not isinstance(command, list) or not command:
        raise ConfigEditError(
            f"{what}: container {component} has no command list; fix: restore the kubeadm "
            f"manifest (kubeadm init phase control-plane {component.removeprefix('kube-')})"
        )
    new_command, changes = edit_command(command, edit, f"{component} command")
    if not changes:
        return EditResult(text)
    expected = _load(text, what)
    _find_container(expected, component, what)["command"] = new_command  # type: ignore[index]
    new_text = _rewrite_block_sequence(text, component, command, new_command)
    if new_text is None or _load(new_text, what) != expected:
        new_text = _dump(expected)
    return EditResult(new_text, changes)


def _command_node(root: Any, component: str) -> Any:
    def get(node: Any, key: str) -> Any:
        if not isinstance(node, yaml.MappingNode):
            return None
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
        return None

    containers = get(get(root, "spec"), "containers")
    if not isinstance(containers, yaml.SequenceNode):
        return None
    for c in containers.value:
        name = get(c, "name")
        if isinstance(name, yaml.ScalarNode) and name.value == component:
            return get(c, "command")
    return None


def _scalar_text(value: str) -> str | None:
    out = _dump([value])
    if not out.startswith("- ") or out.count("\n") != 1:
        return None
    return out[2:-1]


def _rewrite_block_sequence(
    text: str, component: str, old: Sequence[str], new: Sequence[str]
) -> str | None:
    """Edit the command items in the text itself; ``None`` when the layout is not a
    block sequence of one-line scalars (then the caller re-dumps)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    seq = _command_node(root, component)
    if not isinstance(seq, yaml.SequenceNode) or seq.flow_style or len(seq.value) != len(old):
        return None
    spans: list[tuple[int, int, int, int, str]] = []  # line start, value start/end, line end
    for node in seq.value:
        if not isinstance(node, yaml.ScalarNode):
            return None
        start, end = node.start_mark.index, node.end_mark.index
        line_start = text.rfind("\n", 0, start) + 1
        prefix = text[line_start:start]
        if not re.fullmatch(r"[ \t]*-[ \t]+", prefix) or "\n" in text[start:end]:
            return None
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end + 1
        spans.append((line_start, start, end, line_end, prefix))
    pieces: list[tuple[int, int, str]] = []  # (from, to, replacement), applied from the end
    ops = difflib.SequenceMatcher(a=list(old), b=list(new), autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for k in range(i2 - i1):
                rendered = _scalar_text(new[j1 + k])
                if rendered is None:
                    return None
                _unused, start, end, _unused, _unused = spans[i1 + k]
                pieces.append((start, end, rendered))
            continue
        if tag in ("delete", "replace"):
            pieces.append((spans[i1][0], spans[i2 - 1][3], ""))
        if tag in ("insert", "replace"):
            lines = []
            for value in new[j1:j2]:
                rendered = _scalar_text(value)
                if rendered is None:
                    return None
                ref = spans[min(i1, len(spans) - 1)]
                lines.append(ref[4] + rendered + "\n")
            at = spans[i1 - 1][3] if i1 > 0 else spans[0][0]
            if at == len(text) and not text.endswith("\n"):
                lines[0] = "\n" + lines[0]
            pieces.append((at, at, "".join(lines)))
    for start, end, replacement in sorted(pieces, key=lambda p: (p[0], p[1]), reverse=True):
        text = text[:start] + replacement + text[end:]
    return text

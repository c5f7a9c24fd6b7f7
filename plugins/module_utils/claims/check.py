# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The shape checker of ResourceClaim(Template) specs: ``check_claim_spec(obj)`` refuses
shapes that look plausible but are not the API (an ``attributes:`` map on a request, a
``matchExpression`` constraint, ``deviceClassName`` at the wrong level for the version, a
selector that is not CEL, a CEL expression that does not compile (``claims.cel``), opaque
NVIDIA parameters the driver does not take...). Every problem names its path and shows the
shape to write instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import metadata as cm
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.api import (
    ALLOCATION_MODES,
    CONFIG_FIELDS,
    CONSTRAINT_FIELDS,
    DEVICES_FIELDS,
    EXACT_FIELDS,
    QUALIFIED_RE,
    REQUEST_V1,
    REQUEST_V1BETA1,
    RESOURCE_GROUP,
    SUBREQUEST_FIELDS,
    api_version_for,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.cel import (
    MEMORY_EXAMPLE,
    SELECTOR_EXAMPLE,
    cel_string,
    check_cel,
    selectors_text,
    suggest_cel,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.metadata import (
    ClaimTemplateError,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.problems import (
    ERROR,
    WARNING,
    Problem,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import resource_versions
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    CHART_DEVICE_CLASSES,
    GPU_CLASS,
    MIG_CLASS,
    NVIDIA_DRIVER,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.classes import (
    CONFIG_CLASS,
    CONFIG_KINDS,
    DRIVER_GATE_FOR_STRATEGY,
    GPU_CONFIG_API_VERSION,
    SHARING_STRATEGIES,
    STRICT_CONFIG_CLASS_FROM,
    TIME_SLICE_INTERVALS,
)

__all__ = [
    "check_claim_spec",
    "check_device_class",
]


_DNS_LABEL_RE, _DNS_SUBDOMAIN_RE = cm.DNS_LABEL_RE, cm.DNS_SUBDOMAIN_RE


# ---- objects


class _Collector:
    def __init__(self, judge: Any = None, driver_version: str | None = None) -> None:
        self.problems: list[Problem] = []
        self.judge = judge
        self.driver_version = driver_version

    def error(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message, ERROR))

    def warn(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message, WARNING))


def check_claim_spec(
    obj: Any,
    kubernetes_version: str | None = None,
    judge: Any = None,
    driver_version: str | None = None,
) -> list[Problem]:
    """Check a ResourceClaimTemplate or ResourceClaim dict; returns the problems found
    (empty: the shape is the API's, as far as this checker sees, see the module docstring).

    ``kubernetes_version`` (optional): also check that the release serves the object's
    resource.k8s.io version (error when not served, warning naming the ``--runtime-config``
    entry when it is off by default). ``judge``: the compile verdict of a CEL selector
    (``claims.cel.check_cel``; default the Python environment ``cel.verdicts``).
    ``driver_version``: the NVIDIA DRA driver release the opaque configs are for (default
    the newest; see ``_check_config_classes``). Never raises for a malformed object: that
    is a problem too.
    """
    out = _Collector(judge, driver_version)
    if not isinstance(obj, Mapping):
        out.error("", f"expected a ResourceClaimTemplate mapping, got {type(obj).__name__}")
        return out.problems
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    group, _sep, version = str(api_version or "").partition("/")
    if group != RESOURCE_GROUP or version not in resource_versions.OBJECT_RESOURCE_VERSIONS:
        out.error(
            "apiVersion",
            f"apiVersion {api_version!r} is not one this checker knows; use "
            + " or ".join(
                f"{RESOURCE_GROUP}/{v}" for v in resource_versions.OBJECT_RESOURCE_VERSIONS
            )
            + " (gpufleet claims template --kubernetes-version <release> picks it)",
        )
        version = "v1"
    elif kubernetes_version:
        _check_served(out, version, kubernetes_version)
    cm.check_metadata(obj, str(kind), out.error)
    if kind == "ResourceClaimTemplate":
        spec_path = "spec.spec"
        outer = obj.get("spec")
        if not isinstance(outer, Mapping):
            out.error("spec", "a ResourceClaimTemplate needs spec: {spec: {devices: ...}}")
            return out.problems
        if "devices" in outer and "spec" not in outer:
            out.error(
                "spec.devices",
                "a ResourceClaimTemplate wraps the claim spec once more: write "
                "spec: {spec: {devices: ...}} (spec.metadata optional), not spec: {devices: ...}",
            )
            return out.problems
        for key in outer:
            if key not in ("metadata", "spec"):
                out.error(f"spec.{key}", f"unknown field {key!r}; spec has metadata and spec")
        spec = outer.get("spec")
    elif kind == "ResourceClaim":
        spec_path = "spec"
        spec = obj.get("spec")
    else:
        out.error("kind", f"kind {kind!r} is not ResourceClaimTemplate or ResourceClaim")
        return out.problems
    if not isinstance(spec, Mapping):
        out.error(spec_path, "the claim spec must be a mapping with devices: {requests: [...]}")
        return out.problems
    for key in spec:
        if key not in ("devices", "controller"):
            out.error(f"{spec_path}.{key}", f"unknown field {key!r}; the claim spec has devices")
    devices = spec.get("devices")
    if not isinstance(devices, Mapping):
        out.error(f"{spec_path}.devices", "devices must be a mapping with requests: [...]")
        return out.problems
    path = f"{spec_path}.devices"
    for key in devices:
        if key not in DEVICES_FIELDS:
            out.error(
                f"{path}.{key}",
                f"unknown field {key!r}; devices has {', '.join(sorted(DEVICES_FIELDS))}",
            )
    names = _check_requests(out, path, devices.get("requests"), version)
    _check_constraints(out, path, devices.get("constraints"), names)
    _check_config(out, path, devices.get("config"), names)
    _check_config_classes(out, path, devices)
    return out.problems


def _check_served(out: _Collector, version: str, kubernetes_version: str) -> None:
    try:
        served = {s.version: s for s in dra_api.served_api_versions(kubernetes_version)}
    except dra_core.VersionModelError as exc:
        out.error("apiVersion", f"kubernetes_version: {exc}")
        return
    state = served.get(version)
    if state is None or "ResourceClaimTemplate" not in state.kinds:
        try:
            better = api_version_for(kubernetes_version)
        except ClaimTemplateError as exc:
            better = str(exc)
        out.error(
            "apiVersion",
            f"Kubernetes {kubernetes_version} does not serve {RESOURCE_GROUP}/{version}; "
            f"use {better}",
        )
    elif not state.enabled_by_default:
        out.warn(
            "apiVersion",
            f"{RESOURCE_GROUP}/{version} is off by default on Kubernetes {kubernetes_version}: "
            f"kube-apiserver needs --runtime-config={state.runtime_config}",
        )


def _check_requests(out: _Collector, path: str, requests: Any, version: str) -> list[str]:
    names: list[str] = []
    if requests is None:
        out.error(f"{path}.requests", "devices needs requests: [{name: ..., ...}]")
        return names
    if not isinstance(requests, list):
        out.error(f"{path}.requests", "requests must be a list of requests")
        return names
    for i, req in enumerate(requests):
        rpath = f"{path}.requests[{i}]"
        if not isinstance(req, Mapping):
            out.error(rpath, "a request must be a mapping with a name")
            continue
        name = req.get("name")
        if not isinstance(name, str) or not _DNS_LABEL_RE.match(name):
            out.error(f"{rpath}.name", f"name {name!r} must be a DNS label (e.g. gpu)")
        elif name in names:
            out.error(f"{rpath}.name", f"request name {name!r} is used twice")
        else:
            names.append(name)
        if version in resource_versions.EXACTLY_REQUEST_VERSIONS:
            _check_request_v1(out, rpath, req, version)
        else:
            _check_request_v1beta1(out, rpath, req)
    return names


_MISPLACED_V1 = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess")


def _check_request_v1(out: _Collector, rpath: str, req: Mapping[str, Any], version: str) -> None:
    misplaced = [k for k in req if k in _MISPLACED_V1]
    if misplaced:
        moved = ", ".join(f"{k}: {_short(req[k])}" for k in misplaced)
        out.error(
            f"{rpath}.{misplaced[0]}",
            f"{', '.join(misplaced)} at the wrong level for {RESOURCE_GROUP}/{version}: it goes "
            f"under exactly: write {{name: {req.get('name', 'gpu')}, exactly: {{{moved}}}}} "
            f"({RESOURCE_GROUP}/v1beta1 is the version with deviceClassName on the request)",
        )
    for key in req:
        if key in REQUEST_V1 or key in _MISPLACED_V1:
            continue
        _unknown_request_field(out, rpath, key, req[key], "name, exactly, firstAvailable")
    has_exact = "exactly" in req
    has_first = "firstAvailable" in req
    if has_exact and has_first:
        out.error(rpath, "a request has exactly or firstAvailable, not both")
    elif not has_exact and not has_first and not misplaced:
        out.error(
            rpath,
            f"a {RESOURCE_GROUP}/{version} request needs exactly: {{deviceClassName: "
            f"{GPU_CLASS}}} (or firstAvailable: [...])",
        )
    if has_exact:
        _check_exact(out, f"{rpath}.exactly", req["exactly"], EXACT_FIELDS, version)
    if has_first:
        _check_first_available(out, f"{rpath}.firstAvailable", req["firstAvailable"], version)


def _check_request_v1beta1(out: _Collector, rpath: str, req: Mapping[str, Any]) -> None:
    if "exactly" in req:
        out.error(
            f"{rpath}.exactly",
            f"{RESOURCE_GROUP}/v1beta1 has no exactly: put deviceClassName, selectors, count "
            f"directly on the request, or use apiVersion {RESOURCE_GROUP}/v1 (Kubernetes "
            f"{dra_api.first_release_serving('ResourceClaim', ('v1',))}+)",
        )
    body = {k: v for k, v in req.items() if k not in ("name", "exactly", "firstAvailable")}
    for key in list(body):
        if key not in REQUEST_V1BETA1:
            _unknown_request_field(
                out, rpath, key, body.pop(key), ", ".join(sorted(REQUEST_V1BETA1))
            )
    if "firstAvailable" in req:
        if body.get("deviceClassName"):
            out.error(
                f"{rpath}.deviceClassName",
                "a request with firstAvailable must not set deviceClassName (each subrequest "
                "names its class)",
            )
        _check_first_available(out, f"{rpath}.firstAvailable", req["firstAvailable"], "v1beta1")
    elif "exactly" not in req:
        _check_exact(out, rpath, body, REQUEST_V1BETA1, "v1beta1", fields_checked=True)


def _check_first_available(out: _Collector, path: str, subs: Any, version: str) -> None:
    if not isinstance(subs, list) or not subs:
        out.error(path, "firstAvailable must be a non-empty list of subrequests")
        return
    for j, sub in enumerate(subs):
        spath = f"{path}[{j}]"
        if not isinstance(sub, Mapping):
            out.error(spath, "a subrequest must be a mapping")
            continue
        if not isinstance(sub.get("name"), str) or not _DNS_LABEL_RE.match(sub["name"]):
            out.error(f"{spath}.name", f"subrequest name {sub.get('name')!r} must be a DNS label")
        _check_exact(
            out, spath, {k: v for k, v in sub.items() if k != "name"}, SUBREQUEST_FIELDS, version
        )


def _check_exact(
    out: _Collector,
    path: str,
    body: Any,
    fields: frozenset,
    version: str,
    fields_checked: bool = False,
) -> None:
    if not isinstance(body, Mapping):
        out.error(path, f"expected a mapping with deviceClassName, got {_short(body)}")
        return
    if not fields_checked:
        for key in body:
            if key not in fields:
                if key == "exactly":
                    out.error(f"{path}.exactly", "exactly is nested twice")
                    continue
                _unknown_request_field(
                    out, path, key, body[key], ", ".join(sorted(fields - {"name"}))
                )
    dc = body.get("deviceClassName")
    if dc is None:
        out.error(
            f"{path}.deviceClassName",
            f"deviceClassName is required, e.g. deviceClassName: {GPU_CLASS} (full GPUs) or "
            f"{MIG_CLASS} (MIG devices)",
        )
    elif not isinstance(dc, str) or not _DNS_SUBDOMAIN_RE.match(dc):
        hint = ""
        if isinstance(dc, str) and dc.startswith("nvidia.com/"):
            hint = f" ({dc} is the device plugin's extended resource name, not a DeviceClass)"
        out.error(
            f"{path}.deviceClassName",
            f"deviceClassName {dc!r} is not a DeviceClass name (a DNS subdomain){hint}; use "
            f"{GPU_CLASS} or {MIG_CLASS}",
        )
    elif dc not in CHART_DEVICE_CLASSES:
        out.warn(
            f"{path}.deviceClassName",
            f"DeviceClass {dc!r} is not one the NVIDIA DRA driver chart creates "
            f"({', '.join(CHART_DEVICE_CLASSES)}); make sure it exists, or claims stay "
            f"pending with 'device class {dc} does not exist'",
        )
    mode = body.get("allocationMode")
    if mode is not None and mode not in ALLOCATION_MODES:
        out.error(
            f"{path}.allocationMode",
            f"allocationMode {mode!r} is not one of {', '.join(ALLOCATION_MODES)}",
        )
    count = body.get("count")
    if count is not None:
        if (
            isinstance(count, bool)
            or not isinstance(count, int)
            or not 0 < count <= cm.ALLOCATION_RESULTS_MAX
        ):
            out.error(
                f"{path}.count",
                f"count {str(count)[:40]} must be an integer from 1 to {cm.ALLOCATION_RESULTS_MAX}",
            )
        elif mode == "All":
            out.error(f"{path}.count", "count must not be set with allocationMode: All")
    if "capacity" in body:
        cap = body["capacity"]
        if not (isinstance(cap, Mapping) and set(cap) <= {"requests"}):
            out.error(
                f"{path}.capacity",
                "capacity on a request is consumable capacity ({requests: {<name>: <quantity>}}, "
                "DRAConsumableCapacity), not a device filter; to pick devices by memory use "
                + selectors_text(
                    suggest_cel(cap) if isinstance(cap, Mapping) and cap else MEMORY_EXAMPLE
                ),
            )
    if "selectors" in body:
        _check_selectors(out, f"{path}.selectors", body["selectors"])


def _unknown_request_field(out: _Collector, path: str, key: str, value: Any, allowed: str) -> None:
    low = key.lower()
    if low in ("attributes", "attribute", "properties", "requirements", "match", "filter"):
        cel = suggest_cel(value) if isinstance(value, Mapping) and value else MEMORY_EXAMPLE
        out.error(
            f"{path}.{key}",
            f"{key} is not a field of a device request: devices are picked with CEL; use "
            + selectors_text(cel),
        )
    elif low in ("matchlabels", "matchexpressions", "selector", "nodeselector", "labelselector"):
        out.error(
            f"{path}.{key}",
            f"{key} is not a field of a device request (devices have no labels); use "
            + selectors_text(MEMORY_EXAMPLE),
        )
    elif "mem" in low or low in ("resources", "limits", "gpumemory"):
        cel = suggest_cel({key: value}) if not isinstance(value, Mapping) else suggest_cel(value)
        out.error(
            f"{path}.{key}",
            f"{key} is not a field of a device request; to pick GPUs by memory use "
            + selectors_text(cel),
        )
    else:
        out.error(f"{path}.{key}", f"unknown field {key!r}; this level has {allowed}")


def _check_selectors(out: _Collector, path: str, selectors: Any) -> None:
    if isinstance(selectors, str):
        out.error(
            path,
            "selectors is a list of {cel: {expression: ...}}, not a string; use "
            + selectors_text(selectors),
        )
        return
    if isinstance(selectors, Mapping):
        cel = suggest_cel(selectors) if "cel" not in selectors else MEMORY_EXAMPLE
        out.error(path, "selectors is a list, not a mapping; use " + selectors_text(cel))
        return
    if not isinstance(selectors, list):
        out.error(path, "selectors must be a list; use " + SELECTOR_EXAMPLE)
        return
    for k, sel in enumerate(selectors):
        spath = f"{path}[{k}]"
        if isinstance(sel, str):
            out.error(
                spath,
                "a selector is {cel: {expression: ...}}, not a bare string; use "
                + selectors_text(sel),
            )
            continue
        if not isinstance(sel, Mapping):
            out.error(spath, "a selector must be a mapping {cel: {expression: ...}}")
            continue
        if "cel" not in sel:
            if "expression" in sel:
                out.error(
                    spath,
                    "the expression belongs under cel:, use "
                    + selectors_text(str(sel["expression"])),
                )
            else:
                cel = suggest_cel(
                    {k2: v for k2, v in sel.items() if not isinstance(v, Mapping | list)}
                    or {"memory": ">=40"}
                )
                if "matchLabels" in sel or "matchExpressions" in sel:
                    cel = MEMORY_EXAMPLE
                out.error(
                    spath,
                    f"selector {_short(sel)} is not CEL (a DRA selector has only cel:); use "
                    + selectors_text(cel),
                )
            continue
        extra = [k2 for k2 in sel if k2 != "cel"]
        if extra:
            out.error(f"{spath}.{extra[0]}", f"unknown field {extra[0]!r}; a selector has cel")
        cel = sel["cel"]
        if isinstance(cel, str):
            out.error(
                f"{spath}.cel",
                "cel is a mapping {expression: ...}, not a string; use " + selectors_text(cel),
            )
            continue
        if not isinstance(cel, Mapping) or "expression" not in cel:
            out.error(f"{spath}.cel", "cel needs expression: use " + SELECTOR_EXAMPLE)
            continue
        for severity, message in check_cel(cel["expression"], out.judge):
            out.problems.append(Problem(f"{spath}.cel.expression", message, severity))


def _check_constraints(out: _Collector, path: str, constraints: Any, names: list[str]) -> None:
    if constraints is None:
        return
    if not isinstance(constraints, list):
        out.error(f"{path}.constraints", "constraints must be a list")
        return
    for i, con in enumerate(constraints):
        cpath = f"{path}.constraints[{i}]"
        if not isinstance(con, Mapping):
            out.error(cpath, "a constraint must be a mapping {requests, matchAttribute}")
            continue
        for key in con:
            if key in CONSTRAINT_FIELDS:
                continue
            if key.lower() in ("matchexpression", "matchexpressions", "expression", "cel"):
                out.error(
                    f"{cpath}.{key}",
                    f"{key} is not a field of a constraint: a constraint only says that the "
                    "devices of its requests share one attribute value, with matchAttribute: "
                    f"<domain>/<attribute>, e.g. {{matchAttribute: {NVIDIA_DRIVER}/productName}}; "
                    "to restrict the values put a CEL selector on the request: "
                    + selectors_text(_constraint_cel(con[key])),
                )
            elif key.lower() in ("matchlabels", "matchattributes", "attribute"):
                out.error(
                    f"{cpath}.{key}",
                    f"{key} is not a field of a constraint; write matchAttribute: "
                    f"{NVIDIA_DRIVER}/productName (one attribute, fully qualified)",
                )
            else:
                out.error(
                    f"{cpath}.{key}",
                    f"unknown field {key!r}; a constraint has "
                    f"{', '.join(sorted(CONSTRAINT_FIELDS))}",
                )
        attrs = [k for k in ("matchAttribute", "distinctAttribute") if k in con]
        if not attrs:
            out.error(
                cpath,
                f"a constraint needs matchAttribute (e.g. {NVIDIA_DRIVER}/productName) or "
                "distinctAttribute",
            )
        for key in attrs:
            value = con[key]
            if not isinstance(value, str) or not QUALIFIED_RE.match(value):
                fix = (
                    f"{NVIDIA_DRIVER}/{value}"
                    if isinstance(value, str) and "/" not in value and value
                    else f"{NVIDIA_DRIVER}/productName"
                )
                out.error(
                    f"{cpath}.{key}",
                    f"{key} {value!r} is not a fully qualified attribute name "
                    f"(<domain>/<name>); write {key}: {fix}",
                )
        _check_request_refs(out, f"{cpath}.requests", con.get("requests"), names)


def _constraint_cel(value: Any) -> str:
    """A CEL selector from a made-up matchExpression(s) value."""
    items = value if isinstance(value, list) else [value]
    clauses = []
    for item in items:
        if isinstance(item, str):
            clauses.append(item)
            continue
        if not isinstance(item, Mapping):
            continue
        key = str(item.get("key") or item.get("attribute") or "productName")
        key = key.split("/", 1)[1] if "/" in key else key
        values = item.get("values") or []
        op = str(item.get("operator", "In"))
        if op == "In" and values:
            if len(values) == 1:
                clauses.append(
                    f"device.attributes['{NVIDIA_DRIVER}'].{key} == {cel_string(str(values[0]))}"
                )
            else:
                listed = ", ".join(cel_string(str(v)) for v in values)
                clauses.append(f"device.attributes['{NVIDIA_DRIVER}'].{key} in [{listed}]")
        elif op == "NotIn" and values:
            listed = ", ".join(cel_string(str(v)) for v in values)
            clauses.append(f"!(device.attributes['{NVIDIA_DRIVER}'].{key} in [{listed}])")
    return (
        " && ".join(clauses) or f"device.attributes['{NVIDIA_DRIVER}'].productName == 'NVIDIA H200'"
    )


def _check_request_refs(out: _Collector, path: str, refs: Any, names: list[str]) -> None:
    if refs is None:
        return
    if not isinstance(refs, list):
        out.error(path, "requests must be a list of request names")
        return
    for ref in refs:
        base = str(ref).split("/", 1)[0]
        if base not in names:
            out.error(
                path,
                f"request {ref!r} is not a request of this claim (requests: "
                f"{', '.join(names) or 'none'})",
            )


def _check_config(out: _Collector, path: str, config: Any, names: list[str]) -> None:
    if config is None:
        return
    if not isinstance(config, list):
        out.error(f"{path}.config", "config must be a list of {requests, opaque}")
        return
    for i, entry in enumerate(config):
        cpath = f"{path}.config[{i}]"
        if not isinstance(entry, Mapping):
            out.error(cpath, "a config entry must be a mapping {requests, opaque}")
            continue
        for key in entry:
            if key not in CONFIG_FIELDS:
                hint = ""
                if key in ("parameters", "sharing", "driver"):
                    hint = (
                        f"; the driver's parameters go under opaque: {{driver: {NVIDIA_DRIVER}, "
                        f"parameters: {{apiVersion: {GPU_CONFIG_API_VERSION}, kind: GpuConfig, "
                        "sharing: ...}}"
                    )
                out.error(
                    f"{cpath}.{key}",
                    f"unknown field {key!r}; a config entry has requests, opaque{hint}",
                )
        _check_request_refs(out, f"{cpath}.requests", entry.get("requests"), names)
        opaque = entry.get("opaque")
        if opaque is None:
            out.error(f"{cpath}.opaque", "a config entry needs opaque: {driver, parameters}")
            continue
        if not isinstance(opaque, Mapping):
            out.error(f"{cpath}.opaque", "opaque must be a mapping {driver, parameters}")
            continue
        for key in opaque:
            if key not in ("driver", "parameters"):
                out.error(
                    f"{cpath}.opaque.{key}", f"unknown field {key!r}; opaque has driver, parameters"
                )
        if not opaque.get("driver"):
            out.error(f"{cpath}.opaque.driver", f"opaque needs driver: {NVIDIA_DRIVER}")
        params = opaque.get("parameters")
        if not isinstance(params, Mapping):
            out.error(f"{cpath}.opaque.parameters", "parameters must be a mapping (a JSON object)")
            continue
        if opaque.get("driver") == NVIDIA_DRIVER:
            _check_nvidia_parameters(out, f"{cpath}.opaque.parameters", params)


def _check_nvidia_parameters(out: _Collector, path: str, params: Mapping[str, Any]) -> None:
    if params.get("apiVersion") != GPU_CONFIG_API_VERSION:
        out.error(
            f"{path}.apiVersion",
            f"apiVersion {params.get('apiVersion')!r}: the NVIDIA DRA driver decodes "
            f"apiVersion: {GPU_CONFIG_API_VERSION}",
        )
    kind = params.get("kind")
    if kind not in CONFIG_KINDS:
        out.error(f"{path}.kind", f"kind {kind!r} is not one of {', '.join(CONFIG_KINDS)}")
        return
    allowed = (
        {"apiVersion", "kind", "sharing"}
        if kind != "VfioDeviceConfig"
        else {"apiVersion", "kind", "iommu"}
    )
    for key in params:
        if key not in allowed:
            out.error(
                f"{path}.{key}",
                f"unknown field {key!r} in {kind}: the driver decodes strictly and fails the "
                f"claim at prepare time; {kind} has "
                + ", ".join(sorted(allowed - {"apiVersion", "kind"})),
            )
    sharing = params.get("sharing")
    if kind == "VfioDeviceConfig" or sharing is None:
        return
    if not isinstance(sharing, Mapping):
        out.error(f"{path}.sharing", "sharing must be a mapping {strategy: TimeSlicing|MPS, ...}")
        return
    strategy = sharing.get("strategy")
    if strategy not in SHARING_STRATEGIES:
        out.error(
            f"{path}.sharing.strategy",
            f"strategy {strategy!r} is not one of {', '.join(SHARING_STRATEGIES)}",
        )
    allowed_sharing = {"strategy", "mpsConfig"} | (
        {"timeSlicingConfig"} if kind == "GpuConfig" else set()
    )
    for key in sharing:
        if key not in allowed_sharing:
            out.error(
                f"{path}.sharing.{key}",
                f"unknown field {key!r} in {kind}.sharing; it has "
                + ", ".join(sorted(allowed_sharing)),
            )
    ts = sharing.get("timeSlicingConfig")
    if ts is not None:
        if strategy != "TimeSlicing":
            out.error(
                f"{path}.sharing.timeSlicingConfig", "timeSlicingConfig needs strategy: TimeSlicing"
            )
        interval = ts.get("interval") if isinstance(ts, Mapping) else None
        if interval is not None and interval not in TIME_SLICE_INTERVALS:
            out.error(
                f"{path}.sharing.timeSlicingConfig.interval",
                f"interval {interval!r} is not one of {', '.join(TIME_SLICE_INTERVALS)}",
            )
    mps = sharing.get("mpsConfig")
    if mps is not None:
        if strategy != "MPS":
            out.error(f"{path}.sharing.mpsConfig", "mpsConfig needs strategy: MPS")
        if isinstance(mps, Mapping):
            pct = mps.get("defaultActiveThreadPercentage")
            if pct is not None and (
                isinstance(pct, bool) or not isinstance(pct, int) or not 0 <= pct <= 100
            ):
                out.error(
                    f"{path}.sharing.mpsConfig.defaultActiveThreadPercentage",
                    f"{pct!r} is not an integer from 0 to 100",
                )
    if isinstance(strategy, str) and strategy in DRIVER_GATE_FOR_STRATEGY:
        gate = DRIVER_GATE_FOR_STRATEGY[strategy]
        out.warn(
            f"{path}.sharing.strategy",
            f"{strategy} needs the driver feature gate {gate} (chart value "
            f"featureGates.{gate}=true); without it the claim fails at prepare time",
        )


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


# ---- opaque configs and the requests they attach to


def _request_classes(requests: Any) -> dict[str, set[str]]:
    """``{request name: {DeviceClass names}}`` (a firstAvailable request: its subrequests'
    classes, and each subrequest as ``request/subrequest``)."""
    out: dict[str, set[str]] = {}
    if not isinstance(requests, list):
        return out
    for req in requests:
        if not isinstance(req, Mapping) or not isinstance(req.get("name"), str):
            continue
        name = req["name"]
        exact = req.get("exactly") if isinstance(req.get("exactly"), Mapping) else req
        classes = (
            {exact["deviceClassName"]} if isinstance(exact.get("deviceClassName"), str) else set()
        )
        for sub in req.get("firstAvailable") or []:
            if isinstance(sub, Mapping) and isinstance(sub.get("deviceClassName"), str):
                classes.add(sub["deviceClassName"])
                if isinstance(sub.get("name"), str):
                    out[f"{name}/{sub['name']}"] = {sub["deviceClassName"]}
        out[name] = classes
    return out


def driver_is_strict(driver_version: str | None) -> bool:
    """True when NVIDIA's DRA driver ``driver_version`` (``25.12.0``, ``0.4.1``; None: the
    newest) refuses an opaque config of the wrong device type at prepare time: from
    25.12 (chart nvidia-dra-driver-gpu), and every release of the renamed chart
    dra-driver-nvidia-gpu (0.4+, after 25.12)."""
    if driver_version is None:
        return True
    parts = str(driver_version).removeprefix("v").split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return True
    return major == 0 or (major, minor) >= STRICT_CONFIG_CLASS_FROM


def _check_config_classes(out: _Collector, path: str, devices: Mapping[str, Any]) -> None:
    """A GpuConfig only on requests of DeviceClass gpu.nvidia.com, a MigDeviceConfig only on
    mig.nvidia.com (``CONFIG_CLASS``): the NVIDIA DRA driver decodes the config for each
    allocated device and, from 25.12, fails the claim at prepare time when the config's
    kind is not that device's type. A config without ``requests`` applies to every request."""
    classes = _request_classes(devices.get("requests"))
    config = devices.get("config")
    if not isinstance(config, list):
        return
    strict = driver_is_strict(out.driver_version)
    for i, entry in enumerate(config):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("opaque"), Mapping):
            continue
        opaque = entry["opaque"]
        params = opaque.get("parameters")
        if opaque.get("driver") != NVIDIA_DRIVER or not isinstance(params, Mapping):
            continue
        kind = params.get("kind")
        wanted = CONFIG_CLASS.get(str(kind))
        if wanted is None:
            continue
        refs = entry.get("requests")
        targets = [str(r) for r in refs] if isinstance(refs, list) and refs else list(classes)
        for ref in targets:
            for dc in sorted(classes.get(ref, set())):
                if dc in CONFIG_CLASS.values() and dc != wanted:
                    right = next(k for k, v in CONFIG_CLASS.items() if v == dc)
                    message = (
                        f"{kind} on request {ref!r}, whose DeviceClass {dc} allocates "
                        f"{'MIG devices' if dc == MIG_CLASS else 'whole GPUs'}: "
                        f"{kind} is for DeviceClass {wanted}; use kind: {right}"
                    )
                    if strict:
                        out.error(
                            f"{path}.config[{i}].opaque.parameters.kind",
                            message + " (the NVIDIA DRA driver fails the claim at prepare time "
                            "from release 25.12)",
                        )
                    else:
                        out.warn(
                            f"{path}.config[{i}].opaque.parameters.kind",
                            message
                            + f" (driver {out.driver_version} does not refuse it; from 25.12 the "
                            "driver fails the claim at prepare time)",
                        )


# ---- DeviceClass

_DEVICE_CLASS_FIELDS = frozenset({"selectors", "config", "extendedResourceName"})


def check_device_class(
    obj: Any,
    kubernetes_version: str | None = None,
    judge: Any = None,
    driver_version: str | None = None,
) -> list[Problem]:
    """Check a DeviceClass dict (resource.k8s.io v1, v1beta2, v1beta1): metadata, its CEL
    selectors (as a claim's), its opaque configs, and, with ``kubernetes_version``, that
    the release serves its version. Returns the problems found; never raises."""
    out = _Collector(judge, driver_version)
    if not isinstance(obj, Mapping):
        out.error("", f"expected a DeviceClass mapping, got {type(obj).__name__}")
        return out.problems
    group, _sep, version = str(obj.get("apiVersion") or "").partition("/")
    if group != RESOURCE_GROUP or version not in resource_versions.OBJECT_RESOURCE_VERSIONS:
        out.error(
            "apiVersion",
            f"apiVersion {obj.get('apiVersion')!r} is not one this checker knows; use "
            + " or ".join(
                f"{RESOURCE_GROUP}/{v}" for v in resource_versions.OBJECT_RESOURCE_VERSIONS
            ),
        )
    elif kubernetes_version:
        _check_served(out, version, kubernetes_version)
    cm.check_metadata(obj, "DeviceClass", out.error)
    spec = obj.get("spec")
    if spec is None:
        return out.problems
    if not isinstance(spec, Mapping):
        out.error("spec", "a DeviceClass spec is a mapping {selectors, config}")
        return out.problems
    for key in spec:
        if key not in _DEVICE_CLASS_FIELDS:
            out.error(
                f"spec.{key}",
                f"unknown field {key!r}; a DeviceClass spec has "
                + ", ".join(sorted(_DEVICE_CLASS_FIELDS)),
            )
    if "selectors" in spec:
        _check_selectors(out, "spec.selectors", spec["selectors"])
    _check_config(out, "spec", spec.get("config"), [])
    return out.problems

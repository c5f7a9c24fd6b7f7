"""Read the DRA facts of a Kueue release from its module source (``sigs.k8s.io/kueue``).

The Kueue version table (``plugins/module_utils/kueue/versions.py``) is written from
these facts and checked against them by the unit tests whenever the module is in the Go
module cache. Every function takes the module directory (``go mod download -json
sigs.k8s.io/kueue@vX`` prints it as ``Dir``) and reads files only:

* :func:`dra_gates`: ``pkg/features/kube_features.go``: the ``featuregate.Feature``
  constants whose comment block links the DRA KEP (``keps/2941-DRA``), with the stage and
  default of their ``VersionedSpecs`` entry in force at the release's minor;
* :func:`mapping_field`: the json path of ``DeviceClassMappings`` in the ``Configuration``
  of ``apis/config/<api>/configuration_types.go`` and the json keys of
  ``DeviceClassMapping``;
* :func:`crd_storage_versions`: the storage version of each CRD in
  ``config/components/crd/bases``;
* :func:`resource_api`: the ``k8s.io/api/resource/<version>`` package ``pkg/dra/claims.go``
  imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

DRA_KEP = "keps/2941-DRA"


@dataclass(frozen=True)
class GateFact:
    """A gate as the source registers it at one minor: name, stage, default, since."""

    name: str
    stage: str
    default: bool
    since: str


def _minor_key(v: str) -> tuple[int, int]:
    major, minor = v.split(".")[:2]
    return int(major), int(minor)


def dra_gates(module: Path, version: str) -> list[GateFact]:
    """The DRA feature gates of the release at ``module`` (version ``0.17.0``), sorted by
    name. Raises ValueError when a DRA constant has no VersionedSpecs entry."""
    text = (module / "pkg" / "features" / "kube_features.go").read_text(encoding="utf-8")
    names: list[str] = []
    comment: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            comment.append(stripped)
            continue
        m = re.match(r'(\w+)\s+featuregate\.Feature\s*=\s*"(\w+)"', stripped)
        if m and any(DRA_KEP in c for c in comment):
            names.append(m.group(2))
        comment = []
    facts = []
    spec_re = re.compile(
        r'\{Version:\s*version\.MustParse\("([\d.]+)"\),\s*Default:\s*(true|false),'
        r"\s*PreRelease:\s*featuregate\.(\w+)"
    )
    for name in names:
        block = re.search(rf"\n\t{name}:\s*\{{(.*?)\n\t\}},", text, re.S)
        if block is None:
            raise ValueError(f"{name}: no VersionedSpecs entry in kube_features.go")
        specs = spec_re.findall(block.group(1))
        in_force = [s for s in specs if _minor_key(s[0]) <= _minor_key(version)]
        if not in_force:
            continue
        since, (_, default, stage) = specs[0][0], in_force[-1]
        facts.append(GateFact(name, stage, default == "true", since))
    return sorted(facts, key=lambda g: g.name)


def _struct_fields(text: str, struct: str) -> dict[str, str]:
    """``{GoField: json name}`` of ``type <struct> struct { ... }`` in ``text``."""
    m = re.search(rf"type {struct} struct \{{(.*?)\n\}}", text, re.S)
    if m is None:
        return {}
    return dict(re.findall(r'^\s*(\w+)\s+[^\n`]+`json:"([\w]+)', m.group(1), re.M))


def mapping_field(module: Path, config_api: str) -> tuple[str, tuple[str, ...]]:
    """(json path of the device-class mappings in the Configuration, json keys of one
    mapping) for ``config_api`` (``config.kueue.x-k8s.io/v1beta2``); ``("", ())`` when
    that API has no such field."""
    version = config_api.rsplit("/", 1)[-1]
    path = module / "apis" / "config" / version / "configuration_types.go"
    if not path.is_file():
        return "", ()
    text = path.read_text(encoding="utf-8")
    config = _struct_fields(text, "Configuration")
    resources = _struct_fields(text, "Resources")
    if "Resources" not in config or "DeviceClassMappings" not in resources:
        return "", ()
    mapping = _struct_fields(text, "DeviceClassMapping")
    return f"{config['Resources']}.{resources['DeviceClassMappings']}", tuple(mapping.values())


def crd_storage_versions(module: Path) -> dict[str, str]:
    """``{kind: storage version}`` of the CRDs in ``config/components/crd/bases``."""
    out = {}
    for path in sorted((module / "config" / "components" / "crd" / "bases").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for v in spec.get("versions", []):
                if v.get("storage"):
                    out[spec["names"]["kind"]] = f"{spec['group']}/{v['name']}"
    return out


def resource_api(module: Path) -> str:
    """``resource.k8s.io/<version>`` imported by ``pkg/dra/claims.go`` (empty if none)."""
    text = (module / "pkg" / "dra" / "claims.go").read_text(encoding="utf-8")
    m = re.search(r'"k8s\.io/api/resource/(v\w+)"', text)
    return f"resource.k8s.io/{m.group(1)}" if m else ""

# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The function and macro names of Kubernetes' DRA CEL environment, and how each is
called: as a global function ``f(x)``, as a member ``x.f()``, or both.

Generated from the environment itself: ``gpufleet-celcheck -functions`` (lab/go/celcheck,
``cel.Env.Functions()`` and ``cel.Env.Macros()`` of the environment that
``k8s.io/dynamic-resource-allocation/cel`` builds, NewExpressions) of Kubernetes
1.38.0-beta.0 (cel-go v0.33.2, now the module cel.dev/cel-go); ``INTRODUCED`` names what
older releases lack, from the same output of theirs (1.37.2: cel-go v0.29.2). Operators
(``_==_``...) and internal names are left out.
``tests/integration/test_cel_differential.py`` checks ``tables(release)`` against every
release under ``celcheck`` in gpufleet/build/releases.yaml.
"""

from __future__ import annotations

import re

#: Names with at least one global overload (``quantity('1Gi')``, ``sets.contains(a, b)``).
GLOBAL_FUNCTIONS = frozenset(
    {
        "bool",
        "bytes",
        "cidr",
        "double",
        "duration",
        "dyn",
        "format.byte",
        "format.date",
        "format.datetime",
        "format.dns1035Label",
        "format.dns1035LabelPrefix",
        "format.dns1123Label",
        "format.dns1123LabelPrefix",
        "format.dns1123Subdomain",
        "format.dns1123SubdomainPrefix",
        "format.labelValue",
        "format.named",
        "format.qualifiedName",
        "format.uri",
        "format.uuid",
        "in",
        "int",
        "ip",
        "ip.isCanonical",
        "isCIDR",
        "isIP",
        "isQuantity",
        "isSemver",
        "isURL",
        "lists.range",
        "matches",
        "optional.none",
        "optional.of",
        "optional.ofNonZeroValue",
        "optional.unwrap",
        "quantity",
        "semver",
        "sets.contains",
        "sets.equivalent",
        "sets.intersects",
        "sign",
        "size",
        "string",
        "strings.quote",
        "timestamp",
        "type",
        "uint",
        "url",
    }
)

#: Names with at least one member overload (``q.isGreaterThan(x)``, ``s.find(re)``).
MEMBER_FUNCTIONS = frozenset(
    {
        "add",
        "allowed",
        "asApproximateFloat",
        "asInteger",
        "charAt",
        "check",
        "compareTo",
        "contains",
        "containsCIDR",
        "containsIP",
        "distinct",
        "endsWith",
        "error",
        "errored",
        "family",
        "fieldSelector",
        "find",
        "findAll",
        "first",
        "flatten",
        "format",
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getEscapedPath",
        "getFullYear",
        "getHost",
        "getHostname",
        "getHours",
        "getMilliseconds",
        "getMinutes",
        "getMonth",
        "getPort",
        "getQuery",
        "getScheme",
        "getSeconds",
        "group",
        "hasValue",
        "includes",
        "indexOf",
        "ip",
        "isGlobalUnicast",
        "isGreaterThan",
        "isInteger",
        "isLessThan",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isLoopback",
        "isSorted",
        "isUnspecified",
        "join",
        "labelSelector",
        "last",
        "lastIndexOf",
        "lowerAscii",
        "major",
        "masked",
        "matches",
        "max",
        "min",
        "minor",
        "name",
        "namespace",
        "or",
        "orValue",
        "patch",
        "path",
        "prefixLength",
        "reason",
        "replace",
        "resource",
        "reverse",
        "serviceAccount",
        "size",
        "slice",
        "sort",
        "split",
        "startsWith",
        "sub",
        "subresource",
        "substring",
        "sum",
        "trim",
        "unwrapOpt",
        "upperAscii",
        "validate",
        "value",
    }
)

#: Macros (``has(x.f)``, ``l.all(x, p)``, ``cel.bind(v, e, r)``, ``o.optMap(v, e)``).
MACROS = frozenset(
    {
        "all",
        "bind",
        "exists",
        "existsOne",
        "exists_one",
        "filter",
        "has",
        "map",
        "optFlatMap",
        "optMap",
        "sortBy",
        "transformList",
        "transformMap",
        "transformMapEntry",
    }
)

#: (``global``, ``member`` or ``macro``, name) -> the first minor (of 1.x) whose NewExpressions
#: environment has it; older minors' environments lack it (``gpufleet-celcheck -functions``
#: of 1.33.13, cel-go v0.23.2, of 1.34.4 and of 1.35.4, cel-go v0.26.0: Kubernetes' base
#: environment at the compatibility version of each; cel-go's lists extension functions
#: and ``sortBy`` from 1.35, ``existsOne`` from 1.34; 1.38.0-beta.0, whose environment is
#: that of compatibility version 1.37: Kubernetes' lists library v1 and its member
#: ``includes``, a ``dyn.includes(dyn)`` that 1.36 and 1.37 declare only with
#: DRAListTypeAttributes on).
INTRODUCED: dict[tuple[str, str], int] = {
    ("member", "includes"): 38,
    ("global", "lists.range"): 35,
    ("member", "distinct"): 35,
    ("member", "flatten"): 35,
    ("member", "reverse"): 35,
    ("member", "slice"): 35,
    ("member", "sort"): 35,
    ("macro", "sortBy"): 35,
    ("macro", "existsOne"): 34,
}

#: (global function, number of arguments) -> the first minor (of 1.x) whose environment has
#: that overload: the ``semver``/``isSemver`` overloads with ``normalize`` came with
#: version 1 of Kubernetes' semver library in 1.34 (k8s.io/apiserver
#: ``pkg/cel/environment/base.go``; 1.33.13 refuses them, ``tests/data/cel_verdicts.json``).
OVERLOAD_INTRODUCED: dict[tuple[str, int], int] = {("semver", 2): 34, ("isSemver", 2): 34}

#: The minor of the oldest release whose environment ``tables`` knows.
OLDEST_MINOR = 33


def release_minor(release: str | None) -> int | None:
    """The minor of a 1.x ``release`` (``1.33.13`` -> 33); None when not one."""
    match = re.match(r"^v?1\.(\d+)", release or "")
    return int(match.group(1)) if match else None


def tables(release: str | None = None) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """``(global functions, member functions, macros)`` of the environment of ``release``
    (``1.33.13``; None or one newer than 1.38: the newest tables above). Raises ValueError
    for a release older than 1.33, whose environment is not recorded here."""
    minor = release_minor(release)
    if minor is None:
        return GLOBAL_FUNCTIONS, MEMBER_FUNCTIONS, MACROS
    if minor < OLDEST_MINOR:
        raise ValueError(
            f"the DRA CEL environment of {release} is not recorded here (1.{OLDEST_MINOR} "
            "and newer are)"
        )
    absent = {k for k, since in INTRODUCED.items() if minor < since}

    def keep(kind: str, names: frozenset[str]) -> frozenset[str]:
        return frozenset(n for n in names if (kind, n) not in absent)

    return keep("global", GLOBAL_FUNCTIONS), keep("member", MEMBER_FUNCTIONS), keep("macro", MACROS)

# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Kubernetes' own DRA e2e specs (``test/e2e/dra`` of the cluster's release) as checks of
the validation report, and the namespaces the suite leaves behind.

One owner for what selects the specs and what a run means:

- the label filter (:data:`FILTER_TERMS`, joined into :data:`DEFAULT_LABEL_FILTER`) and
  the specs left out by name (:data:`DEFAULT_SKIP`), each with the reason a spec it
  leaves out is skipped;
- the reading of Ginkgo's JSON report (``-ginkgo.json-report``: a list of suite reports,
  each with ``SpecReports``): counts (:func:`summarise`) and one check per spec
  (:func:`spec_checks`, ids ``conformance.<slug of the spec's text>``);
- the namespaces the suite's framework makes (``test/e2e/framework/util.go``
  ``CreateTestingNS`` labels each ``e2e-run=<RunID>``; ``framework.go`` adds
  ``e2e-framework=<BaseName>``): which of them a run created (:func:`created_by_run`) and
  their deletion (:func:`delete_namespaces`).

Standard library and the collection's ``kube.client`` only.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import as_list, as_map
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr

AREA = "conformance"


@dataclass(frozen=True)
class LabelTerm:
    """One term of the label filter: a spec passes it when it carries ``label``
    (``wanted``) or does not (not ``wanted``); ``why`` says why a spec that fails it is
    left out."""

    label: str
    wanted: bool
    why: str

    @property
    def expression(self) -> str:
        return self.label if self.wanted else f"!{self.label}"

    def admits(self, labels: Iterable[str]) -> bool:
        return (self.label in set(labels)) == self.wanted


#: What a cluster with the release's default feature gates can run, which is what the
#: collection provisions: every DRA spec but those that need a gate that is off by
#: default (the framework labels them ``Feature:OffByDefault``, with ``Alpha`` or
#: ``BetaOffByDefault`` and a ``FeatureGate:<name>`` per gate) and flaky ones.
FILTER_TERMS = (
    LabelTerm("DRA", True, "not a DRA spec (no DRA label)"),
    LabelTerm(
        "Feature:OffByDefault",
        False,
        "needs a feature gate that is off by default in the release (label Feature:OffByDefault)",
    ),
    LabelTerm("Flaky", False, "marked flaky upstream (label Flaky)"),
)
DEFAULT_LABEL_FILTER = " && ".join(t.expression for t in FILTER_TERMS)
#: Specs left out because the collection does not provision what they need: the deprecated
#: ``resource.k8s.io/v1beta1`` and ``v1beta2`` APIs, which 1.37 serves only when
#: ``--runtime-config`` enables them (the ``dra`` release data: ``enabledByDefault:
#: false``); the specs carry no label for it, so they are skipped by name.
DEFAULT_SKIP = r"with v1beta1 API|with v1beta2 API"
SKIP_WHY = (
    "creates objects through a deprecated beta version of resource.k8s.io, which the "
    "collection does not serve (the release's default API versions only)"
)
#: Labels that say which gate a spec needs and at which stage (shown with the reason).
GATE_LABEL = re.compile(r"^(FeatureGate:.+|Alpha|Beta|BetaOffByDefault)$")
#: Labels every namespace the suite's framework creates carries.
NAMESPACE_LABELS = ("e2e-run", "e2e-framework")
#: Seconds :func:`delete_namespaces` waits for deleted namespaces to be gone.
NAMESPACE_GONE_S = 180.0
#: Seconds after which the pods of a namespace still there are deleted at once
#: (``gracePeriodSeconds=0``): a pod whose claim was prepared by the suite's own test driver
#: never ends when the suite died, since no kubelet plugin is left to unprepare it.
FORCE_PODS_AFTER_S = 45.0
MESSAGE_CHARS = 2000
#: The longest spec slug in a check id (:func:`slug`).
SLUG_CHARS = 64


@dataclass
class Summary:
    """Counts of one run (specs are Ginkgo ``It`` nodes) and the failed specs."""

    total: int = 0
    run: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)


def spec_name(spec: Mapping[str, Any]) -> str:
    """The spec's full text as Ginkgo matches focus and skip against it: the container
    texts and the leaf text joined by spaces (the leaf node type for a suite node)."""
    texts = [*as_list(spec.get("ContainerHierarchyTexts")), spec.get("LeafNodeText", "")]
    return " ".join(str(t) for t in texts if t) or str(spec.get("LeafNodeType", ""))


def spec_labels(spec: Mapping[str, Any]) -> list[str]:
    """Every label of the spec: its containers' and its own, in order, once each."""
    out: dict[str, None] = {}
    for labels in [*as_list(spec.get("ContainerHierarchyLabels")), spec.get("LeafNodeLabels")]:
        out.update((str(x), None) for x in as_list(labels))
    return list(out)


def _location(spec: Mapping[str, Any]) -> str:
    where = as_map(as_map(spec.get("Failure")).get("Location")) or as_map(
        spec.get("LeafNodeLocation")
    )
    name = str(where.get("FileName", "")).rsplit("/", 1)[-1]
    return f"{name}:{where.get('LineNumber', '')}" if name else ""


def _specs(report: Sequence[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    for suite in report:
        yield from (s for s in as_list(as_map(suite).get("SpecReports")) if isinstance(s, Mapping))


def summarise(report: Sequence[Mapping[str, Any]]) -> Summary:
    """Counts of a Ginkgo JSON report; suite-level nodes (BeforeSuite, ReportAfterSuite)
    count only when they fail, as a failure named after the node."""
    out = Summary()
    for spec in _specs(report):
        state = spec.get("State", "")
        is_it = spec.get("LeafNodeType") == "It"
        out.total += int(is_it)
        if state == "passed" and is_it:
            out.run += 1
            out.passed += 1
        elif state in ("skipped", "pending") and is_it:
            out.skipped += 1
        elif state not in ("passed", "skipped", "pending"):
            out.run += int(is_it)
            out.failed += 1
            failure = as_map(spec.get("Failure"))
            out.failures.append(
                {
                    "name": spec_name(spec),
                    "state": state,
                    "message": str(failure.get("Message", ""))[:MESSAGE_CHARS],
                    "location": _location(spec),
                }
            )
    return out


def skip_reason(
    spec: Mapping[str, Any],
    *,
    terms: Sequence[LabelTerm] = FILTER_TERMS,
    skip: str | None = DEFAULT_SKIP,
    focus: str | None = None,
) -> str:
    """Why a spec the report lists as skipped did not run: the message of a skip at run
    time (``e2eskipper``: too few nodes, a provider), the first label term it fails (with
    the gates it names), the skip expression, the focus expression, or a run that ended
    before it."""
    message = str(as_map(spec.get("Failure")).get("Message") or "").strip()
    if message:
        return f"skipped by the spec at run time: {message.splitlines()[0][:300]}"
    labels = spec_labels(spec)
    for term in terms:
        if not term.admits(labels):
            gates = [x for x in labels if GATE_LABEL.match(x)]
            return term.why + (f": {', '.join(gates)}" if gates and not term.wanted else "")
    name = spec_name(spec)
    if skip and re.search(skip, name):
        return f"left out by name (skip {skip!r}): {SKIP_WHY}"
    if focus and not re.search(focus, name):
        return f"not selected by the focus {focus!r}"
    return "selected but not run: the run ended before it (interrupted, timed out or stopped)"


def slug(text: str) -> str:
    """``[sig-node] [DRA] kubelet [Feature:X] supports claim`` -> ``kubelet-supports-claim``:
    the text without its bracketed tags, lower case, runs of other characters as ``-``;
    one longer than ``SLUG_CHARS`` is cut at a ``-`` and ends with six hex digits of the
    SHA-1 of the whole slug, so that it stays stable and distinct and fits a table."""
    words = re.sub(r"\[[^\]]*\]", " ", text).lower()
    out = re.sub(r"[^a-z0-9]+", "-", words).strip("-") or "spec"
    if len(out) <= SLUG_CHARS:
        return out
    head = out[: SLUG_CHARS - 7].rsplit("-", 1)[0]
    return f"{head}-{hashlib.sha1(out.encode()).hexdigest()[:6]}"


def spec_checks(
    report: Sequence[Mapping[str, Any]],
    *,
    terms: Sequence[LabelTerm] = FILTER_TERMS,
    skip: str | None = DEFAULT_SKIP,
    focus: str | None = None,
    output: str = "the suite's output",
) -> list[vr.Check]:
    """One check per spec (``It``) of a Ginkgo JSON report and one per failed suite node:
    ``pass``, ``fail`` (the failure's message, location and ``output``, where the suite's
    log is) or ``skip`` (:func:`skip_reason`). Ids are ``conformance.<slug>``, made unique
    by a ``-2``, ``-3`` suffix in the order of the specs' full texts."""
    specs = sorted(
        (s for s in _specs(report) if s.get("LeafNodeType") == "It" or _failed(s)),
        key=spec_name,
    )
    seen: dict[str, int] = {}
    out = []
    for spec in specs:
        name, state = spec_name(spec), str(spec.get("State", ""))
        base = f"{AREA}.{slug(name)}"
        seen[base] = seen.get(base, 0) + 1
        check_id = base if seen[base] == 1 else f"{base}-{seen[base]}"
        seconds = _seconds(spec.get("RunTime"))
        data = {"spec": name, "state": state, "labels": spec_labels(spec), "seconds": seconds}
        if state == "passed":
            out.append(vr.Check(check_id, name, vr.PASS, f"passed in {seconds:g} s", data=data))
        elif state in ("skipped", "pending"):
            why = skip_reason(spec, terms=terms, skip=skip, focus=focus)
            out.append(vr.Check(check_id, name, vr.SKIP, f"skipped: {why}", reason=why, data=data))
        else:
            message = str(as_map(spec.get("Failure")).get("Message") or state).strip()
            where = _location(spec)
            check = vr.Check(check_id, name, vr.FAIL, data=data, fix=f"read {output}")
            check.summary = f"{state}" + (f" at {where}" if where else "")
            check.problem(None, vr.FAIL, message[:MESSAGE_CHARS])
            out.append(check)
    return out


def _seconds(nanoseconds: Any) -> float:
    """A spec's ``RunTime`` (nanoseconds) in seconds to a tenth; 0 when it is no number."""
    if isinstance(nanoseconds, bool) or not isinstance(nanoseconds, (int, float)):
        return 0.0
    return round(nanoseconds / 1e9, 1) if abs(nanoseconds) < 1e300 else 0.0


def _failed(spec: Mapping[str, Any]) -> bool:
    return spec.get("State") not in ("passed", "skipped", "pending")


#: A Ginkgo ``--timeout`` as this module accepts it: Go's duration syntax in whole hours,
#: minutes and seconds (``1h``, ``90m``, ``1h30m``, ``45s``).
#: ASCII digits only and exactly as written (Go's ``time.ParseDuration`` reads the value the
#: suite is given: no space around it, no other digits).
DURATION = re.compile(r"(?:(\d{1,6})h)?(?:(\d{1,6})m)?(?:(\d{1,6})s)?", re.ASCII)
MAX_TIMEOUT_S = 24 * 3600


def duration_seconds(text: str) -> int:
    """Seconds of a Ginkgo ``--timeout`` value (:data:`DURATION`). Raises ValueError
    naming the value and the accepted form when it is not one, is zero or is longer than a
    day."""
    found = DURATION.fullmatch(text) if isinstance(text, str) and text else None
    if not found or not any(found.groups()):
        raise ValueError(
            f"{text!r} is not a duration; fix: give hours, minutes and seconds as Go writes "
            "them, e.g. 1h, 90m, 1h30m or 600s"
        )
    h, m, s = (int(x or 0) for x in found.groups())
    seconds = h * 3600 + m * 60 + s
    if not 0 < seconds <= MAX_TIMEOUT_S:
        raise ValueError(f"{text!r} is {seconds} s; fix: give a duration from 1s to 24h")
    return seconds


def server_release(version: Mapping[str, Any]) -> str:
    """``1.37.2`` from the API server's ``GET /version`` (``gitVersion`` ``v1.37.2``, with
    or without a distribution's suffix such as ``+k3s1`` or ``-eks-4f1d2c``). Raises
    ValueError naming the value when it holds no release."""
    git = str(version.get("gitVersion") or "")
    found = re.match(r"^v?(\d+\.\d+\.\d+)", git)
    if not found:
        raise ValueError(f"the API server reports gitVersion {git!r}, which names no release")
    return found.group(1)


#: A namespace's name (a DNS-1123 label).
NAMESPACE_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)


#: A pod's name (a DNS-1123 subdomain).
POD_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?", re.ASCII)


def suite_namespaces(items: Iterable[Mapping[str, Any]]) -> set[str]:
    """Names of the listed namespaces (``GET /api/v1/namespaces`` items) that carry every
    label of :data:`NAMESPACE_LABELS`."""
    out = set()
    for item in items:
        meta = as_map(as_map(item).get("metadata"))
        name, labels = meta.get("name"), as_map(meta.get("labels"))
        # only a namespace's name as the API server allows one reaches a DELETE's path
        named = isinstance(name, str) and NAMESPACE_NAME.fullmatch(name)
        if named and all(k in labels for k in NAMESPACE_LABELS):
            out.add(name)
    return out


def created_by_run(before: Iterable[str], after: Iterable[Mapping[str, Any]]) -> list[str]:
    """The suite's namespaces in ``after`` (a listing made when the run ended) that were not
    in ``before`` (the suite's namespaces listed before it started), sorted: those the run
    created, and none another run left or still uses."""
    return sorted(suite_namespaces(after) - set(before))


def list_suite_namespaces(kube: vk.Kube) -> list[dict[str, Any]]:
    """The namespaces that carry the suite's labels (one label-selected list). Raises
    KubeError."""
    selector = ",".join(NAMESPACE_LABELS)
    return kube.list("/api/v1/namespaces", query=[("labelSelector", selector)])


def _terminating(items: Iterable[Mapping[str, Any]]) -> set[str]:
    return {
        str(as_map(as_map(i).get("metadata")).get("name"))
        for i in items
        if as_map(as_map(i).get("metadata")).get("deletionTimestamp")
    }


def _force_delete_pods(kube: vk.Kube, namespaces: Sequence[str], check: vr.Check) -> list[str]:
    """Delete every pod of ``namespaces`` with ``gracePeriodSeconds=0``; returns
    ``namespace/pod`` of each (a failure is a problem of ``check``)."""
    out = []
    for ns in namespaces:
        try:
            pods = kube.list(f"/api/v1/namespaces/{ns}/pods")
            for pod in pods:
                name = as_map(as_map(pod).get("metadata")).get("name")
                if not (isinstance(name, str) and POD_NAME.fullmatch(name)):
                    continue
                kube.request(
                    "DELETE",
                    f"/api/v1/namespaces/{ns}/pods/{name}",
                    query=[("gracePeriodSeconds", 0)],
                )
                out.append(f"{ns}/{name}")
        except vk.KubeError as err:
            if err.status != 404:
                check.problem(ns, vr.FAIL, f"cannot delete its pods: {err.message}")
    return out


def delete_namespaces(
    kube: vk.Kube, before: Iterable[str], wait_s: float = NAMESPACE_GONE_S
) -> vr.Check:
    """Delete the suite's namespaces the run created (:func:`created_by_run` against a
    fresh listing) that the suite is not deleting already, and wait up to ``wait_s``
    seconds for all of them to be gone, deleting the pods of those still there after
    ``FORCE_PODS_AFTER_S`` at once (:data:`FORCE_PODS_AFTER_S` says why); the check
    ``conformance.cleanup`` says what was deleted here, and fails naming a namespace that
    could not be deleted or listed, or is still there. Namespaces that were there before
    the run are left alone."""
    check = vr.Check(f"{AREA}.cleanup", "Namespaces the suite created are gone")
    try:
        listed = list_suite_namespaces(kube)
    except vk.KubeError as err:
        check.problem(None, vr.FAIL, f"cannot list the suite's namespaces: {err.message}")
        return vr.finish(check, "")
    names = created_by_run(before, listed)
    deleted = [n for n in names if n not in _terminating(listed)]
    for name in deleted:
        try:
            kube.request("DELETE", f"/api/v1/namespaces/{name}")
        except vk.KubeError as err:
            if err.status != 404:
                check.problem(name, vr.FAIL, f"DELETE failed: {err.message}")
    started = time.monotonic()
    left, forced = list(names), []
    while left and time.monotonic() < started + wait_s:
        time.sleep(2)
        try:
            present = suite_namespaces(list_suite_namespaces(kube))
        except vk.KubeError:
            continue
        left = [n for n in left if n in present]
        if left and not forced and time.monotonic() >= started + FORCE_PODS_AFTER_S:
            forced = _force_delete_pods(kube, left, check)
    failed = {p.subject for p in check.problems}
    for name in left:
        if name not in failed:
            check.problem(name, vr.FAIL, f"still there (Terminating) after {wait_s:g} s")
    selector = ",".join(NAMESPACE_LABELS)
    check.evidence.append(
        vr.Evidence(
            f"GET /api/v1/namespaces?labelSelector={selector}",
            f"{len(names)} created by the run, {len(deleted)} of them not being deleted",
        )
    )
    check.data = {"created": names, "deleted": deleted, "left": left}
    check.details = [f"deleted {n}" for n in deleted if n not in left and n not in failed]
    check.details += [f"pod deleted at once, its claim's driver gone: {p}" for p in forced]
    check.details += [f"left alone (there before the run): {n}" for n in sorted(before)]
    ok = (
        f"all {len(names)} namespace(s) the suite created are gone ({len(deleted)} deleted "
        f"here, {len(forced)} pod(s) deleted at once)"
        if names
        else "the suite left no namespace"
    )
    check.fix = "kubectl delete namespace " + " ".join(left) if left else None
    return vr.finish(check, ok)

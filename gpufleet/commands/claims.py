"""``gpufleet claims``: ResourceClaimTemplates for NVIDIA GPUs, and a checker for them.

``gpufleet claims template KIND [--profile P] [--min-memory Q] [--min-memory-gib N]
[--gpu-model M] [--no-prefer-smallest] [--strategy S] [--count N] [--name NAME]
[--namespace NS] [--kubernetes-version V] [--output yaml|json]`` prints one
ResourceClaimTemplate (KIND: mig-slice, mig-with-memory, gpu-with-memory, shared-gpu,
gpu-pair-same-product) in the resource.k8s.io version the DRA version model says the
release serves (``plugins/module_utils/claims/templates.py``). When that version is off by
default (1.32, 1.33) the ``--runtime-config`` entry kube-apiserver needs goes to stderr.

With ``--kueue-queue LOCALQUEUE`` (mig-slice only) it prints the template in the form
Kueue counts (no CEL selector: ``mig.nvidia.com``, or the profile's DeviceClass with
``--profile``) and a suspended Job in that LocalQueue whose pod claims through it
(``plugins/module_utils/kueue/jobs.py``).

``gpufleet claims check FILE [--kubernetes-version V] [--driver-version V] [--strict]
[--json]`` checks every DeviceClass, ResourceClaimTemplate and ResourceClaim in a YAML/JSON
file (``-``: stdin; ``kind: List`` flattened) and prints one line per problem with the shape
to write instead (``plugins/module_utils/claims/check.py``). A Pod (or the pod template of a
workload) that uses resource claims is checked against the templates and claims of the
same file (``plugins/module_utils/claims/refs.py``); any other document is listed as not
checked. CEL selectors get Kubernetes' verdict: from the
release's own CEL environment when its ``gpufleet-celcheck`` is cached
(``python -m gpufleet.build.celcheck build``), else from the Python environment
(``cel.verdicts``), which says ``cannot-judge`` (neither a pass nor a fail) where it cannot
judge offline.

Exit codes: 0 success (check: no error; with ``--strict`` no warning either); 1 check found
problems; 2 bad input (unreadable file, not YAML, no DRA object in it, bad option).

``claims gc`` and ``claims explain`` (commands/claims_gc.py) join this group in gpufleet/cli.py.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import click
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import api as capi
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import check as cchk
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import metadata as cm
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import problems as cprob
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import refs as crefs
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import templates as ct
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import resource_versions
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import classes as cdrv
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import jobs as kj

from gpufleet.commands._cel import judge_for
from gpufleet.exit import EXIT_CANNOT_RUN, exit_with, status_of

CLAIM_KINDS = ("ResourceClaimTemplate", "ResourceClaim")
CHECKED_KINDS = ("DeviceClass", *CLAIM_KINDS)

#: Image of the Job that --kueue-queue prints, unless --image says otherwise.
_DEFAULT_IMAGE = "busybox:1"


def _version(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        dra_core.parse_version(value, name="--kubernetes-version")
    except dra_core.VersionParseError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


@click.group("claims")
def claims() -> None:
    """ResourceClaimTemplates for NVIDIA GPUs: write them, check them."""


@claims.command("template")
@click.argument("kind", type=click.Choice(ct.KINDS))
@click.option(
    "--profile",
    default=None,
    help="MIG profile for mig-slice, e.g. 1g.18gb (static MIG and DynamicMIG alike).",
)
@click.option(
    "--min-memory",
    default=None,
    metavar="QUANTITY",
    help="Smallest MIG device memory for mig-with-memory, a quantity such as 20Gi.",
)
@click.option(
    "--gpu-model",
    "gpu_models",
    multiple=True,
    metavar="NAME",
    help="GPU model of the fleet, as nvidia-smi -L names it (repeatable; e.g. 'NVIDIA H200'): "
    "mig-slice checks --profile against them, mig-with-memory orders its subrequests by "
    "their MIG sizes (default: every known model).",
)
@click.option(
    "--prefer-smallest/--no-prefer-smallest",
    default=None,
    help="mig-with-memory: firstAvailable subrequests, smallest fitting MIG size first "
    "(default; needs DRAPrioritizedList on), or one request for any size that fits.",
)
@click.option(
    "--min-memory-gib",
    type=click.FloatRange(0, cm.MAX_MEMORY_GIB, min_open=True),
    default=None,
    help=f"Smallest GPU memory in GiB for gpu-with-memory, e.g. 40 (at most {cm.MAX_MEMORY_GIB}).",
)
@click.option(
    "--strategy",
    type=click.Choice(cdrv.SHARING_STRATEGIES),
    default=None,
    help="Sharing strategy for shared-gpu (default TimeSlicing).",
)
@click.option(
    "--interval",
    type=click.Choice(cdrv.TIME_SLICE_INTERVALS),
    default=None,
    help="Time-slice interval for shared-gpu with TimeSlicing.",
)
@click.option(
    "--mps-active-thread-percentage",
    type=click.IntRange(0, 100),
    default=None,
    help="MPS defaultActiveThreadPercentage for shared-gpu with MPS.",
)
@click.option(
    "--mps-pinned-memory-limit",
    default=None,
    help="MPS defaultPinnedDeviceMemoryLimit for shared-gpu with MPS, e.g. 10Gi.",
)
@click.option(
    "--count",
    type=click.IntRange(1, cm.ALLOCATION_RESULTS_MAX),
    default=None,
    help=f"Number of devices, at most {cm.ALLOCATION_RESULTS_MAX} (one allocation's limit; "
    "gpu-pair-same-product: >= 2).",
)
@click.option("--name", default=None, help="metadata.name (default derived from the kind).")
@click.option("--namespace", default="default", show_default=True, help="metadata.namespace.")
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    help="metadata.labels entry (repeatable).",
)
@click.option(
    "--kubernetes-version",
    default=None,
    callback=_version,
    metavar="VERSION",
    help="Release the template is for; picks resource.k8s.io "
    f"{' or '.join(resource_versions.OBJECT_RESOURCE_VERSIONS)} "
    "(default: the newest release the version model provisions).",
)
@click.option(
    "--kueue-queue",
    default=None,
    metavar="LOCALQUEUE",
    help="Also print a suspended Job in this Kueue LocalQueue (label "
    "kueue.x-k8s.io/queue-name) whose pod claims through the template, in the form Kueue "
    "counts (mig-slice only: no CEL selector; --profile picks the profile's DeviceClass).",
)
@click.option(
    "--kueue-priority-class",
    default="",
    metavar="NAME",
    help="WorkloadPriorityClass of the Job (label kueue.x-k8s.io/priority-class).",
)
@click.option("--job-name", default=None, help="Name of the Job (default: the template's).")
@click.option("--image", default=_DEFAULT_IMAGE, show_default=True, help="Image of the Job's pod.")
@click.option(
    "--output", "-o", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True
)
def template(
    kind: str,
    profile: str | None,
    min_memory: str | None,
    gpu_models: tuple[str, ...],
    prefer_smallest: bool | None,
    min_memory_gib: float | None,
    strategy: str | None,
    interval: str | None,
    mps_active_thread_percentage: int | None,
    mps_pinned_memory_limit: str | None,
    count: int | None,
    name: str | None,
    namespace: str,
    labels: tuple[str, ...],
    kubernetes_version: str | None,
    kueue_queue: str | None,
    kueue_priority_class: str,
    job_name: str | None,
    image: str,
    output: str,
) -> None:
    """Print one ResourceClaimTemplate of KIND (with --kueue-queue: and a Job for Kueue)."""
    gpu_model = list(gpu_models) or None
    template_only = (labels or None, min_memory, gpu_model, prefer_smallest, min_memory_gib)
    template_only += (strategy, interval)
    template_only += (mps_active_thread_percentage, mps_pinned_memory_limit)
    _check_kueue_options(kind, kueue_queue, template_only, (kueue_priority_class, job_name, image))
    if kueue_queue is not None:
        _kueue_template(
            kind,
            profile,
            count or 1,
            name,
            namespace,
            kubernetes_version,
            kueue_queue,
            kueue_priority_class,
            job_name,
            image,
            output,
        )
        return
    try:  # checked here: build() reads an empty namespace as the default one
        params: dict[str, Any] = {
            "namespace": cm.check_name(namespace, "--namespace", subdomain=False)
        }
    except cm.ClaimTemplateError as exc:
        raise click.BadParameter(str(exc), param_hint="'--namespace'") from None
    label_map = _labels(labels)
    if label_map:
        params["labels"] = label_map
    if name is not None:
        try:
            params["name"] = cm.check_name(name, "--name")
        except cm.ClaimTemplateError as exc:
            raise click.BadParameter(str(exc), param_hint="'--name'") from None
    options = {
        "profile": profile,
        "min_memory": min_memory,
        "gpu_model": gpu_model,
        "prefer_smallest": prefer_smallest,
        "min_memory_gib": _whole(min_memory_gib),
        "strategy": strategy,
        "interval": interval,
        "mps_active_thread_percentage": mps_active_thread_percentage,
        "mps_pinned_memory_limit": mps_pinned_memory_limit,
        "count": count,
    }
    params.update(_given_options(kind, options))
    _check_profile(profile)
    version = kubernetes_version or capi.default_kubernetes_version()
    try:
        choice = capi.api_choice_for(version)
        obj = ct.build(kind, params, kubernetes_version=version)
    except (cm.ClaimTemplateError, dra_core.VersionModelError) as exc:
        raise click.UsageError(_option_names(str(exc))) from None
    if choice.runtime_config:
        click.echo(
            f"note: {choice.api_version} is off by default on Kubernetes {version}: "
            f"kube-apiserver needs --runtime-config={choice.runtime_config}",
            err=True,
        )
    if kind == "shared-gpu":
        gate = cdrv.DRIVER_GATE_FOR_STRATEGY[obj_strategy(obj)]
        click.echo(
            f"note: the NVIDIA DRA driver needs its feature gate {gate} "
            f"(chart value featureGates.{gate}=true) for this sharing strategy",
            err=True,
        )
    if output == "json":
        click.echo(json.dumps(obj, indent=2))
    else:
        click.echo(yaml.safe_dump(obj, sort_keys=False), nl=False)


def _given_options(kind: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options given (not None), refused (click.UsageError, exit 2) when ``kind`` does
    not take one of them."""
    given = {k: v for k, v in options.items() if v is not None}
    unused = sorted(set(given) - set(ct.BUILD_PARAMS[kind]))
    if unused:
        takes = ", ".join(_flag(p) for p in ct.BUILD_PARAMS[kind] if p in options)
        raise click.UsageError(
            f"{', '.join(_flag(u) for u in unused)} does not apply to {kind}; {kind} takes {takes}"
        )
    return given


#: The options that only the template (not Kueue's form of it) takes, in the order
#: ``template`` passes their values.
_TEMPLATE_ONLY = (
    "--label",
    "--min-memory",
    "--gpu-model",
    "--prefer-smallest/--no-prefer-smallest",
    "--min-memory-gib",
    "--strategy",
    "--interval",
    "--mps-active-thread-percentage",
    "--mps-pinned-memory-limit",
)


def _check_kueue_options(
    kind: str, queue: str | None, template_only: tuple[Any, ...], job: tuple[str, str | None, str]
) -> None:
    """Refuse (click.UsageError, exit 2) an option that the output would drop: with
    ``--kueue-queue`` the template is Kueue's form (no labels, no CEL selector, no sharing
    settings; a kind other than mig-slice is refused by ``kueue.jobs``); without it there is
    no Job to name, label or give an image (``job``: priority class, Job name, image)."""
    if queue is not None:
        dropped = [o for o, v in zip(_TEMPLATE_ONLY, template_only, strict=True) if v is not None]
        if dropped and kind == "mig-slice":
            raise click.UsageError(
                f"{', '.join(dropped)} cannot be used with --kueue-queue: Kueue counts a claim "
                "only as a template of exact counts with no CEL selector and no sharing "
                "settings, so the option would be dropped; fix: leave it out, or leave out "
                "--kueue-queue"
            )
        return
    priority_class, job_name, image = job
    given = {
        "--kueue-priority-class": bool(priority_class),
        "--job-name": job_name is not None,
        "--image": image != _DEFAULT_IMAGE,
    }
    dropped = [o for o, v in given.items() if v]
    if dropped:
        raise click.UsageError(
            f"{', '.join(dropped)} applies to the Job of --kueue-queue only, and no Job is "
            "printed without it; fix: add --kueue-queue LOCALQUEUE, or leave the option out"
        )


def _kueue_template(
    kind: str,
    profile: str | None,
    count: int,
    name: str | None,
    namespace: str,
    kubernetes_version: str | None,
    queue: str,
    priority_class: str,
    job_name: str | None,
    image: str,
    output: str,
) -> None:
    """Print the Kueue-counted template and its Job (``kueue.jobs``); exit 2 on bad input."""
    _check_profile(profile)
    version = kubernetes_version or capi.default_kubernetes_version()
    try:
        api = capi.api_choice_for(version).api_version
        device_class = kj.device_class_for(kind, profile)
        default = "mig-" + re.sub(r"[^a-z0-9]+", "-", (profile or "slice").lower()).strip("-")
        tmpl = kj.kueue_claim_template(
            name=name or default,
            namespace=namespace,
            device_class=device_class,
            count=count,
            api_version=api,
        )
        job = kj.kueue_job(
            name=job_name or tmpl["metadata"]["name"],
            namespace=namespace,
            queue=queue,
            template=tmpl["metadata"]["name"],
            image=image,
            priority_class=priority_class,
        )
    except (kj.KueueJobError, dra_core.VersionModelError, cm.ClaimTemplateError) as exc:
        raise click.UsageError(str(exc)) from None
    if profile:
        click.echo(
            f"note: DeviceClass {device_class} is made by the kueue role "
            f"(kueue_profile_classes: [{profile}])",
            err=True,
        )
    if output == "json":
        click.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": [tmpl, job]}, indent=2))
    else:
        click.echo(yaml.safe_dump_all([tmpl, job], sort_keys=False), nl=False)


def _labels(labels: tuple[str, ...]) -> dict[str, str]:
    """``--label KEY=VALUE`` options as a mapping, each key given once and valid as
    Kubernetes has it (click.BadParameter, exit 2, otherwise)."""
    out: dict[str, str] = {}
    for raw in labels:
        key, sep, value = raw.partition("=")
        if not sep or not key:
            raise click.BadParameter(
                f"{raw!r} is not KEY=VALUE; write e.g. --label team=ml", param_hint="'--label'"
            )
        if key in out:
            raise click.BadParameter(
                f"{key} is given twice ({key}={out[key]!r} and {key}={value!r}); keep one "
                f"--label {key}=...",
                param_hint="'--label'",
            )
        out[key] = value
    try:
        return cm.check_labels(out, "--label")
    except cm.ClaimTemplateError as exc:
        raise click.BadParameter(str(exc), param_hint="'--label'") from None


def _check_profile(profile: str | None) -> None:
    """Refuse (exit 2) a MIG profile no GPU has; note one no known GPU model has."""
    if profile is None:
        return
    try:
        note = cm.mig_profile_note(profile)
    except cm.ClaimTemplateError as exc:
        raise click.BadParameter(str(exc), param_hint="'--profile'") from None
    if note:
        click.echo(f"note: {note}", err=True)


def _flag(param: str) -> str:
    """``min_memory`` -> ``--min-memory``; ``prefer_smallest`` -> its on/off pair."""
    if param == "prefer_smallest":
        return "--prefer-smallest/--no-prefer-smallest"
    return "--" + param.replace("_", "-")


#: Builder words -> the CLI's, for the builders' messages about a boolean parameter.
_FLAG_WORDS = {
    "prefer_smallest=True": "--prefer-smallest (the default)",
    "prefer_smallest=False": "--no-prefer-smallest",
}


#: Builder parameter -> the option that sets it, for the builders' messages.
_OPTION_OF = {
    "min_memory": "--min-memory",
    "gpu_model": "--gpu-model",
    "min_gib": "--min-memory-gib",
    "min_memory_gib": "--min-memory-gib",
    "mps_pinned_memory_limit": "--mps-pinned-memory-limit",
    "mps_active_thread_percentage": "--mps-active-thread-percentage",
    "count": "--count",
    "name": "--name",
    "namespace": "--namespace",
    "profile": "--profile",
    "kubernetes_version": "--kubernetes-version",
    "version": "--kubernetes-version",
    "interval": "--interval",
    "strategy": "--strategy",
}


def _option_names(message: str) -> str:
    """``message`` with the builder's ``param=value`` written as ``--option=value``."""
    for words, flag in _FLAG_WORDS.items():
        message = message.replace(words, flag)
    return re.sub(
        r"(?<![\w-])(" + "|".join(_OPTION_OF) + r")=", lambda m: _OPTION_OF[m[1]] + "=", message
    )


def _whole(value: float | None) -> float | int | None:
    if value is not None and float(value).is_integer():
        return int(value)
    return value


def obj_strategy(obj: dict[str, Any]) -> str:
    """The sharing strategy of a template built by ``shared_gpu``."""
    config = obj["spec"]["spec"]["devices"]["config"][0]
    return config["opaque"]["parameters"]["sharing"]["strategy"]


def load_documents(path: str) -> list[Any]:
    """Every YAML/JSON document of ``path`` (``-``: stdin); a ``kind: List`` is flattened.

    At most ``common.limits.MAX_MANIFEST_BYTES`` are read, each object at most
    ``MAX_OBJECT_BYTES`` (kube-apiserver's limit). Raises click.BadParameter (exit 2)
    naming the file when it is unreadable, a directory, larger, binary, not UTF-8, not
    YAML, nested too deep, holds an object larger than the API server accepts, or a List
    whose ``items`` is not a list.
    """
    what = "standard input" if path == "-" else path
    limit = ig.MAX_MANIFEST_BYTES
    try:
        if path == "-":
            text = ig.read_stream(getattr(sys.stdin, "buffer", sys.stdin), what, limit)
        else:
            text = ig.read_text(path, what, limit) or ""
        docs = ig.load_yaml_documents(text, what, ig.MAX_MANIFEST_NODES)
        ig.check_object_sizes(docs, what)
    except ig.InputError as exc:
        raise click.BadParameter(str(exc), param_hint="FILE") from None
    out: list[Any] = []
    for n, doc in enumerate(docs):
        if isinstance(doc, dict) and doc.get("kind") == "List":
            items = doc.get("items")
            if items is not None and not isinstance(items, list):
                raise click.BadParameter(
                    f"{what}: document {n + 1} is a kind: List whose items is a "
                    f"{type(items).__name__}, not a list; fix: write items: [<object>, ...]",
                    param_hint="FILE",
                )
            out.extend(items or [])
        else:
            out.append(doc)
    return out


@claims.command("check")
@click.argument("file", metavar="FILE")
@click.option(
    "--kubernetes-version",
    default=None,
    callback=_version,
    metavar="VERSION",
    help="Also check that this release serves each object's resource.k8s.io version.",
)
@click.option(
    "--driver-version",
    default=None,
    metavar="VERSION",
    help="NVIDIA DRA driver release the opaque configs are for, e.g. 25.8.1 or 0.4.1 "
    "(default: the newest).",
)
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document.")
def check(
    file: str,
    kubernetes_version: str | None,
    driver_version: str | None,
    strict: bool,
    as_json: bool,
) -> None:
    """Check the DeviceClasses, ResourceClaimTemplates and ResourceClaims in FILE
    ('-': stdin), and the claim references of its Pods."""
    if driver_version is not None and not re.match(r"^v?\d+\.\d+(\.\d+)?$", driver_version):
        raise click.BadParameter(
            f"{driver_version!r} is not a driver release such as 25.12.0 or 0.4.1",
            param_hint="'--driver-version'",
        )
    docs = load_documents(file)
    objects, skipped = [], []
    for d in docs:
        if (
            isinstance(d, dict)
            and (
                d.get("kind") in CHECKED_KINDS
                or (
                    str(d.get("apiVersion", "")).startswith("resource.k8s.io/")
                    and d.get("kind") not in ("ResourceSlice", "DeviceTaintRule")
                )
            )
        ) or crefs.uses_claims(d):
            objects.append(d)
        else:
            skipped.append(d)
    if not objects:
        click.echo(
            f"error: {file} holds no DeviceClass, ResourceClaimTemplate or ResourceClaim "
            f"and no Pod that uses resource claims ({len(docs)} document(s) read)",
            err=True,
        )
        exit_with(EXIT_CANNOT_RUN)
    judge, judged_by = judge_for(objects, kubernetes_version)
    try:
        results = []
        for obj in objects:
            if crefs.pod_spec(obj) is not None:
                results.append(_result(obj, crefs.check_pod_claims(obj, docs)))
                continue
            checker = (
                cchk.check_device_class
                if obj.get("kind") == "DeviceClass"
                else cchk.check_claim_spec
            )
            problems = checker(
                obj,
                kubernetes_version=kubernetes_version,
                judge=judge,
                driver_version=driver_version,
            )
            results.append(_result(obj, problems))
    except RuntimeError as exc:  # the CEL parser is missing
        click.echo(f"error: {exc}", err=True)
        exit_with(EXIT_CANNOT_RUN)
    errors = sum(1 for r in results for p in r["problems"] if p["severity"] == cprob.ERROR)
    warnings = sum(1 for r in results for p in r["problems"] if p["severity"] == cprob.WARNING)
    unjudged = sum(1 for r in results for p in r["problems"] if p["severity"] == cprob.UNJUDGED)
    failed = errors > 0 or (strict and warnings > 0)
    not_checked = [_ident(d) for d in skipped]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "file": file,
                    "passed": not failed,
                    "errors": errors,
                    "warnings": warnings,
                    "cannotJudge": unjudged,
                    "celJudgedBy": judged_by,
                    "objects": results,
                    "notChecked": not_checked,
                },
                indent=2,
            )
        )
    else:
        for r in results:
            ident = f"{r['kind']} {r['namespace'] or '-'}/{r['name'] or '-'}"
            if not r["problems"]:
                click.echo(f"ok    {ident}")
            for p in r["problems"]:
                click.echo(f"{p['severity']:<7} {ident}: {p['path']}: {p['message']}")
        for ident in not_checked:
            click.echo(
                f"skip  {ident}: not a DeviceClass, ResourceClaimTemplate, ResourceClaim or "
                "Pod that uses resource claims"
            )
        click.echo(
            f"{len(results)} object(s), {errors} error(s), {warnings} warning(s)"
            + (f", {unjudged} CEL selector(s) not judged offline" if unjudged else "")
            + f" (CEL: {judged_by}): "
            + ("FAIL" if failed else "PASS")
        )
    exit_with(status_of(bool(failed)))


def _result(obj: dict[str, Any], problems: list[cprob.Problem]) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return {
        "kind": obj.get("kind"),
        "apiVersion": obj.get("apiVersion"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "problems": [p.to_dict() for p in problems],
    }


def _ident(doc: Any) -> str:
    if not isinstance(doc, dict):
        return f"a {type(doc).__name__} document"
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    return f"{doc.get('kind') or '-'} {meta.get('namespace') or '-'}/{meta.get('name') or '-'}"

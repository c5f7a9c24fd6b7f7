#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Read the feature gates and runtime-config of the Kubernetes components of one node."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: dra_gate_audit_facts
short_description: Read the feature gates and runtime-config of the Kubernetes components of a node
version_added: "0.1.0"
description:
  - Reads, on one node and without changing anything, what kube-apiserver,
    kube-controller-manager, kube-scheduler and the kubelet run with and what their files say,
    for M(gpufleet.cluster.dra_gate_audit) to compare.
  - The running process of each component is found by scanning C(/proc/*/cmdline) for an
    executable whose base name is the component's name (C(/usr/local/bin/kubelet) is the
    kubelet, the static pod's C(kube-apiserver) is kube-apiserver). Its C(--feature-gates) and
    C(--runtime-config) are read from that command line. A component with no process is
    reported as not running.
  - For the kubelet, the C(featureGates) of the KubeletConfiguration its C(--config) names (and
    of the C(.conf) drop-ins of its C(--config-dir), in name order) are read too, and its
    C(--feature-gates) flag is applied on top, as the kubelet does.
  - Files read are the static pod manifests under O(manifest_dir) (container C(command)) and the
    kubelet configuration file (O(kubelet_config)).
  - With O(metrics=true) it also reads C(kubernetes_feature_enabled) from each running
    component's C(https://<bind address>:<secure port>/metrics), the value of every gate in
    force. Those endpoints need credentials (O(bearer_token_file) or O(client_cert) and
    O(client_key)); without readable credentials the metrics are skipped with the reason.
  - When several processes of one component run on the host (test harnesses, nested
    containers), select one with O(pids) or O(match); otherwise the component is reported with
    an error naming the candidates.
  - Needs Linux C(/proc), Python and PyYAML on the node; nothing else.
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - PyYAML (to read manifests and the kubelet configuration)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  host:
    description:
      - Name of this host in the result, normally C(inventory_hostname). Defaults to the
        host name of the node.
    type: str
  components:
    description:
      - Components to look for.
    type: list
    elements: str
    choices: [kube-apiserver, kube-controller-manager, kube-scheduler, kubelet]
    default: [kube-apiserver, kube-controller-manager, kube-scheduler, kubelet]
  pids:
    description:
      - 'Process ids to read instead of scanning, component to pid, for example
        C({kube-apiserver: 4242}).'
    type: dict
    default: {}
  match:
    description:
      - 'Regular expressions, component to pattern; a process counts only when the pattern is
        found in its command line (arguments joined by spaces), for example
        C({kube-apiserver: "--secure-port=6443( |$)"}).'
    type: dict
    default: {}
  manifest_dir:
    description:
      - Directory of the static pod manifests (C(<component>.yaml)).
    type: path
    default: /etc/kubernetes/manifests
  kubelet_config:
    description:
      - The kubelet configuration file read as the kubelet's file source. Defaults to the file
        the running kubelet's C(--config) names, else C(/var/lib/kubelet/config.yaml).
    type: path
  metrics:
    description:
      - Read C(kubernetes_feature_enabled) from the C(/metrics) endpoint of each running
        component.
    type: bool
    default: false
  bearer_token_file:
    description:
      - File holding a bearer token allowed to C(get) the non-resource URL C(/metrics) (and
        C(nodes/metrics) for the kubelet).
    type: path
  client_cert:
    description:
      - Client certificate (PEM) for the metrics endpoints, for example the C(admin.conf)
        user's certificate; needs O(client_key).
    type: path
  client_key:
    description:
      - Key of O(client_cert).
    type: path
  ca_file:
    description:
      - CA bundle to verify the components' serving certificates with when O(validate_certs)
        is true.
    type: path
  validate_certs:
    description:
      - Verify the serving certificates of the metrics endpoints. Off by default because
        kube-controller-manager, kube-scheduler and the kubelet serve self-signed certificates
        unless configured otherwise, and the kube-apiserver certificate kubeadm writes does not
        name C(127.0.0.1).
    type: bool
    default: false
  metrics_text:
    description:
      - Also return the C(kubernetes_feature_enabled) lines as the component served them
        (C(metrics.lines)); off by default to keep the facts of large fleets small.
    type: bool
    default: false
  metrics_timeout:
    description:
      - Seconds for each metrics endpoint's whole exchange (connect, TLS handshake, request
        and answer), however slowly the endpoint sends.
    type: int
    default: 10
  proc_root:
    description:
      - Where the process table is mounted (C(/host/proc) when this runs in a container that
        mounts the host's C(/proc) there).
    type: path
    default: /proc
attributes:
  check_mode:
    support: full
    details: The module only reads; it behaves the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Reading C(/proc/<pid>/cmdline) needs no privilege, but the manifests (mode 0600) and the
    kubelet configuration need root (C(become)).
seealso:
  - module: gpufleet.cluster.dra_gate_audit
"""

EXAMPLES = r"""
- name: DRA gate audit | Read gates on a kubeadm node
  gpufleet.cluster.dra_gate_audit_facts:
    host: "{{ inventory_hostname }}"
  register: node_gates

- name: DRA gate audit | Also read the gates in force from /metrics with a token
  gpufleet.cluster.dra_gate_audit_facts:
    host: "{{ inventory_hostname }}"
    metrics: true
    bearer_token_file: /etc/gpufleet/audit-token

- name: DRA gate audit | One of several control planes on this machine, by its port
  gpufleet.cluster.dra_gate_audit_facts:
    components: [kube-apiserver]
    match:
      kube-apiserver: "--secure-port=36443( |$)"
    metrics: true
    client_cert: /etc/kubernetes/pki/admin.crt
    client_key: /etc/kubernetes/pki/admin.key
"""

RETURN = r"""
facts:
  description:
    - What was read, the input of M(gpufleet.cluster.dra_gate_audit). C(components) maps each
      component looked for to C(running), C(pid), C(argv), C(started_at) (seconds since the
      epoch), C(process) (C(feature_gates) name to boolean, C(runtime_config) key to
      C(true)/C(false)), C(config_files) (kubelet), C(file) (C(path), C(exists), C(flags),
      C(mtime), C(error)), C(metrics) (C(url), C(features) name to C(enabled)/C(stage),
      C(error), C(skipped), C(lines) with O(metrics_text)) and C(errors).
  returned: always
  type: dict
  contains:
    host:
      description: The host name given (or the node's).
      type: str
      sample: cp-1
    components:
      description: Component name to what was read about it.
      type: dict
  sample:
    host: cp-1
    components:
      kube-apiserver:
        component: kube-apiserver
        running: true
        pid: 2211
        argv:
          - kube-apiserver
          - --advertise-address=10.0.0.10
          - --feature-gates=DRAPartitionableDevices=true
        started_at: 1767261000.5
        process:
          feature_gates: {DRAPartitionableDevices: true}
          runtime_config: {}
        config_files: []
        file:
          path: /etc/kubernetes/manifests/kube-apiserver.yaml
          exists: true
          flags:
            feature_gates: {DRAPartitionableDevices: true}
            runtime_config: {}
          mtime: 1767260990.1
          error: null
        metrics: null
        errors: []
"""

import os
import re
import socket
import ssl

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import http_exchange as web
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import facts as gf
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import metrics as gm
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import terms as gt
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import processes as hp
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import kubelet_config as kcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce

DEFAULT_KUBELET_CONFIG = kcfg.DEFAULT_KUBELET_CONFIG
#: Bytes of /metrics read at most (kube-apiserver serves a few MiB).
METRICS_LIMIT = 64 * 1024 * 1024


def scan(proc_root: str, components: list[str]) -> dict[str, list[tuple[int, list[str]]]]:
    """Component -> [(pid, argv)] of every process whose executable is that component.
    Every mount namespace counts: the control plane of a kubeadm node runs in static pods,
    containers of their own."""
    found: dict[str, list[tuple[int, list[str]]]] = {c: [] for c in components}
    for pid in hp.pids(proc_root):
        argv = hp.read_argv(proc_root, pid)
        component = gf.component_of(argv or [], components)
        if component:
            found[component].append((pid, argv or []))
    for items in found.values():
        items.sort()
    return found


def boot_time(proc_root: str) -> float | None:
    try:
        with open(os.path.join(proc_root, "stat"), encoding="ascii") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def started_at(proc_root: str, pid: int, btime: float | None) -> float | None:
    if btime is None:
        return None
    try:
        with open(os.path.join(proc_root, str(pid), "stat"), encoding="utf-8") as fh:
            return gf.process_start_time(fh.read(), btime, os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, gt.GateAuditError):
        return None


def select(
    component: str,
    candidates: list[tuple[int, list[str]]],
    pid: int | None,
    pattern: str | None,
    proc_root: str,
) -> tuple[tuple[int, list[str]] | None, str | None]:
    """The process to read, or an error text."""
    if pid is not None:
        argv = hp.read_argv(proc_root, pid)
        if argv is None:
            return None, f"pids.{component}={pid}: no such process"
        if gf.component_of(argv, [component]) != component:
            return None, (
                f"pids.{component}={pid} runs {argv[0] if argv else '(no command line)'}, "
                f"not {component}; fix: give the pid of {component}"
            )
        return (pid, argv), None
    if pattern:
        regex = re.compile(pattern)
        candidates = [c for c in candidates if regex.search(" ".join(c[1]))]
    if len(candidates) > 1:
        pids = ", ".join(str(p) for p, _unused in candidates)
        return None, (
            f"{len(candidates)} {component} processes run (pids {pids}); fix: select one with "
            f"pids.{component} or match.{component}"
        )
    return (candidates[0] if candidates else None), None


def resolve(proc_root: str, pid: int, path: str) -> str:
    """A path from a process's command line, made absolute against its working directory."""
    if os.path.isabs(path):
        return path
    try:
        return os.path.join(os.readlink(os.path.join(proc_root, str(pid), "cwd")), path)
    except OSError:
        return path


def read_text(path: str) -> tuple[str | None, float | None, str | None]:
    """(text, mtime, error); text None and error None when the file does not exist."""
    try:
        text = ig.read_text(path, path, missing_ok=True)  # at most 4 MiB of UTF-8 text
        return (text, os.stat(path).st_mtime, None) if text is not None else (None, None, None)
    except (ig.InputError, OSError) as err:
        return None, None, f"cannot read: {err}"


def manifest_source(manifest_dir: str, component: str) -> gf.FileSource:
    path = os.path.join(manifest_dir, f"{component}.yaml")
    text, mtime, error = read_text(path)
    source = gf.FileSource(path, exists=text is not None or error is not None, mtime=mtime)
    if error:
        source.error = error
    elif text is not None:
        try:
            source.flags = gf.FlagSet.from_component_flags(kce.static_pod_flags(text, component))
        except kfl.ConfigEditError as err:
            source.error = str(err)
    return source


def kubelet_config_source(path: str) -> tuple[gf.FileSource, dict]:
    """The kubelet configuration file as a FileSource, and its parsed mapping."""
    text, mtime, error = read_text(path)
    source = gf.FileSource(path, exists=text is not None or error is not None, mtime=mtime)
    data: dict = {}
    if error:
        source.error = error
    elif text is not None:
        try:
            source.flags = gf.FlagSet(kcfg.kubelet_feature_gates(text), {})
            loaded = ig.load_yaml(text, path)
            data = loaded if isinstance(loaded, dict) else {}
        except (kfl.ConfigEditError, ig.InputError) as err:
            source.error = str(err)
    return source, data


def kubelet_drop_ins(directory: str) -> list[str]:
    """The ``.conf`` files of a kubelet ``--config-dir``, in the order the kubelet merges
    them (sorted by name; pkg/kubelet/kubeletconfig/configfiles)."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".conf"))
    except OSError:
        return []
    return [os.path.join(directory, n) for n in names]


def metrics_context(params: dict) -> tuple[ssl.SSLContext | None, dict, str | None]:
    """(SSL context, headers, reason to skip) from the credential parameters."""
    headers: dict = {}
    if params["validate_certs"]:
        ctx = ssl.create_default_context(cafile=params["ca_file"] or None)
    else:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if params["bearer_token_file"]:
        try:
            token = (ig.read_text(params["bearer_token_file"]) or "").strip()
        except ig.InputError as err:
            return (
                None,
                headers,
                (f"bearer_token_file={params['bearer_token_file']} is not readable ({err})"),
            )
        if not token:
            return None, headers, f"bearer_token_file={params['bearer_token_file']} is empty"
        headers["Authorization"] = f"Bearer {token}"
    if params["client_cert"]:
        try:
            ctx.load_cert_chain(params["client_cert"], params["client_key"] or None)
        except (OSError, ssl.SSLError) as err:
            return (
                None,
                headers,
                (
                    f"client_cert={params['client_cert']} / client_key={params['client_key']} "
                    f"cannot be loaded ({err})"
                ),
            )
    if not headers and not params["client_cert"]:
        return (
            None,
            headers,
            (
                "no credentials: the metrics endpoints refuse anonymous requests; give "
                "bearer_token_file, or client_cert and client_key"
            ),
        )
    return ctx, headers, None


def fetch_metrics(
    url: str, ctx: ssl.SSLContext | None, headers: dict, skip: str | None, timeout: int
) -> gf.MetricSource:
    source = gf.MetricSource(url)
    if skip:
        source.skipped = skip
        return source
    try:
        answer = web.exchange(
            url,
            "",
            deadline_s=timeout,
            max_bytes=METRICS_LIMIT,
            headers=dict(headers, Accept="text/plain"),
            what="the metrics endpoint",
            context=ctx,
        )
    except web.HttpError as err:
        source.error = str(err)
        return source
    if answer.status != 200:
        denied = answer.status in (401, 403)
        hint = "; the credentials are not allowed to get /metrics" if denied else ""
        source.error = f"HTTP {answer.status}{hint}"
        return source
    text = answer.body.decode("utf-8", errors="replace")
    try:
        source.lines = gm.feature_metric_lines(text)
        source.features = gm.feature_readings(text)
    except gt.GateAuditError as err:
        source.error = str(err)
        return source
    if not source.features:
        source.error = f"no {gt.FEATURE_METRIC} samples in the answer"
    return source


def read_component(
    component: str,
    chosen: tuple[int, list[str]] | None,
    error: str | None,
    params: dict,
    btime: float | None,
    metrics: tuple[ssl.SSLContext | None, dict, str | None] | None,
) -> gf.ComponentFacts:
    proc_root = params["proc_root"]
    facts = gf.ComponentFacts(component)
    if error:
        facts.errors.append(error)
    kubelet_data: dict = {}
    config_gates: dict = {}
    if chosen is not None:
        pid, argv = chosen
        facts.running = True
        facts.pid = pid
        facts.argv = argv
        facts.started_at = started_at(proc_root, pid, btime)
        if component == gt.KUBELET:
            config = kcfg.kubelet_config_path_from_cmdline(argv)
            files = [resolve(proc_root, pid, config)] if config else []
            dirs = [v for v in kcfg.kubelet_flag_values(argv, "config-dir") if v]
            if dirs:
                files += kubelet_drop_ins(resolve(proc_root, pid, dirs[-1]))
            for path in files:
                source, data = kubelet_config_source(path)
                if source.error or not source.exists:
                    facts.errors.append(f"{path}: {source.error or 'does not exist'}")
                    continue
                facts.config_files.append(path)
                config_gates.update(source.flags.feature_gates if source.flags else {})
                kubelet_data.update(data)
        try:
            if component == gt.KUBELET:
                facts.process = gf.kubelet_process_flags(argv, config_gates)
            else:
                facts.process = gf.argv_flags(argv, f"{component} command line")
        except kfl.ConfigEditError as err:
            facts.errors.append(str(err))
    if component == gt.KUBELET:
        path = params["kubelet_config"] or (
            facts.config_files[0] if facts.config_files else DEFAULT_KUBELET_CONFIG
        )
        facts.file, data = kubelet_config_source(path)
        kubelet_data = kubelet_data or data
    else:
        facts.file = manifest_source(params["manifest_dir"], component)
    if metrics is not None and facts.running:
        try:
            url = gf.metrics_url(component, facts.argv, kubelet_data)
        except gt.GateAuditError as err:
            facts.errors.append(str(err))
        else:
            ctx, headers, skip = metrics
            facts.metrics = fetch_metrics(url, ctx, headers, skip, params["metrics_timeout"])
            if not params["metrics_text"]:
                facts.metrics.lines = []
    return facts


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str"),
            components=dict(
                type="list",
                elements="str",
                choices=list(gt.COMPONENTS),
                default=list(gt.COMPONENTS),
            ),
            pids=dict(type="dict", default={}),
            match=dict(type="dict", default={}),
            manifest_dir=dict(type="path", default="/etc/kubernetes/manifests"),
            kubelet_config=dict(type="path"),
            metrics=dict(type="bool", default=False),
            bearer_token_file=dict(type="path"),
            client_cert=dict(type="path"),
            client_key=dict(type="path"),
            ca_file=dict(type="path"),
            validate_certs=dict(type="bool", default=False),
            metrics_text=dict(type="bool", default=False),
            metrics_timeout=dict(type="int", default=10),
            proc_root=dict(type="path", default="/proc"),
        ),
        required_by={"client_key": "client_cert"},
        supports_check_mode=True,
    )
    params = module.params
    if not kce.HAS_YAML:
        module.fail_json(
            msg="PyYAML is missing on this node; fix: install python3-yaml (Debian) or "
            f"pip install PyYAML ({kce.YAML_IMPORT_ERROR})"
        )
    components = list(dict.fromkeys(params["components"]))
    for option in ("pids", "match"):
        unknown = sorted(set(params[option]) - set(gt.COMPONENTS))
        if unknown:
            module.fail_json(
                msg=f"{option} names {', '.join(unknown)}; fix: use component names "
                f"({', '.join(gt.COMPONENTS)})"
            )
    pids: dict[str, int] = {}
    for component, value in params["pids"].items():
        try:
            pids[component] = int(value)
        except (TypeError, ValueError):
            module.fail_json(msg=f"pids.{component}={value!r} is not a process id; fix: a number")
    for component, pattern in params["match"].items():
        try:
            re.compile(str(pattern))
        except re.error as err:
            module.fail_json(
                msg=f"match.{component}={pattern!r} is not a regular expression ({err}); fix: "
                "escape special characters"
            )
    if not os.path.isfile(os.path.join(params["proc_root"], "stat")):
        module.fail_json(
            msg=f"proc_root={params['proc_root']} is not a process table (no stat file); fix: "
            "run on Linux or point proc_root at the mounted /proc"
        )
    found = scan(params["proc_root"], components)
    btime = boot_time(params["proc_root"])
    metrics = metrics_context(params) if params["metrics"] else None
    host = gf.HostFacts(params["host"] or socket.gethostname())
    for component in components:
        pattern = params["match"].get(component)
        chosen, error = select(
            component,
            found[component],
            pids.get(component),
            str(pattern) if pattern is not None else None,
            params["proc_root"],
        )
        host.components[component] = read_component(
            component, chosen, error, params, btime, metrics
        )
    module.exit_json(changed=False, facts=host.to_dict())


if __name__ == "__main__":
    main()

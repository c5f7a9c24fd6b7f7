#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Point apt at one package repository and install packages at exact versions, held, in
one module run (unhold, install, hold)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: upgrade_packages
short_description: Install Kubernetes packages at exact versions and hold them, in one run
version_added: "0.1.0"
description:
  - The package step of the C(upgrade) role (kubeadm before C(kubeadm upgrade node),
    kubelet and kubectl after the drain, the conversion from binaries to packages), as the
    kubeadm upgrade guide does it with apt - C(apt-mark unhold), C(apt-get install
    name=version), C(apt-mark hold) - in one module run instead of one per command (a
    module run costs a connection round trip and a Python start on the node).
  - With O(source_line), the source file O(source_list) is made to hold that one line
    first (the repository of one minor, as pkgs.k8s.io lays them out); the file as it was
    is backed up into O(backup_dir) (not beside it - apt reads every file of
    C(sources.list.d) and warns on other names).
  - Packages already installed at their version and held are left alone, and then
    nothing is refreshed or installed (a rerun changes nothing). Otherwise, with
    O(refresh), the package lists of O(source_list) only are refreshed (C(apt-get update)
    with that file as the only source - an air-gapped node cannot reach its
    distribution's mirrors, and C(apt-get update) fails as a whole when one source fails).
  - A version lower than the installed one is refused by apt (no C(--allow-downgrades)).
  - With O(command), that command runs next in the same module run, once the packages are
    in place (C(kubeadm upgrade node) right after its kubeadm, as the kubeadm upgrade guide
    orders a worker's steps); it runs on every run (not in check mode), and its failure
    fails the module with RV(failed_step) C(command). Bound it with C(timeout) in the
    command itself.
author:
  - gpufleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  packages:
    description: Package name to exact Debian version (C(kubeadm) to C(1.37.2-1.1)).
    type: dict
    required: true
  source_line:
    description:
      - The one line O(source_list) must hold (C(deb [trusted=yes] file:/srv/pkgs/ /),
        C(deb [signed-by=...] https://pkgs.k8s.io/core:/stable:/v1.37/deb/ /)). Empty -
        the file is not touched.
    type: str
    default: ""
  source_list:
    description: The apt source file of the Kubernetes packages.
    type: path
    default: /etc/apt/sources.list.d/kubernetes.list
  refresh:
    description: Refresh the package lists of O(source_list) before installing.
    type: bool
    default: true
  backup_dir:
    description: Where the source file is backed up before it is rewritten.
    type: path
    default: /var/backups/gpufleet
  command:
    description: Command (argv, no shell) run after the packages; empty - none.
    type: list
    elements: str
    default: []
  command_stdin:
    description: What O(command) reads on its standard input.
    type: str
    default: ""
  command_name:
    description: How messages name O(command).
    type: str
    default: the command
attributes:
  check_mode:
    support: full
    details: In check mode neither the APT source list is written nor a package installed,
      nor O(command) run; RV(todo) names the packages that would be installed.
  diff_mode:
    support: partial
    details: Only the APT source list, before and after, when O(source_line) changes it; the
      packages are named in RV(todo).
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Upgrade | Packages | kubeadm 1.37.2-1.1
  gpufleet.cluster.upgrade_packages:
    packages: {kubeadm: 1.37.2-1.1}
    source_line: "deb https://pkgs.k8s.io/core:/stable:/v1.37/deb/ /"
"""

RETURN = r"""
failed_step:
  description: On failure, C(packages) (the source file or apt) or C(command).
  returned: failure
  type: str
command_s:
  description: Seconds O(command) took.
  returned: when O(command) ran
  type: float
installed:
  description: Each package's installed version and dpkg status before the run
    (C(hi) installed and held, C(ii) installed); a package not installed is absent.
  returned: always
  type: dict
todo:
  description: The packages that were (or, in check mode, would be) installed and held.
  returned: always
  type: list
  elements: str
source_changed:
  description: Whether O(source_list) was (or would be) rewritten.
  returned: always
  type: bool
backup_file:
  description: The backup of O(source_list) made before it was rewritten.
  returned: when the file existed and was rewritten
  type: str
"""

import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.files import (
    backup_and_write,
    file_diff,
)

#: dpkg-query's format: one line per package, ``name version status`` with the status
#: abbreviation of dpkg-query(1) (``hi`` = wanted on hold, installed).
DPKG_FORMAT = "${Package} ${Version} ${db:Status-Abbrev}\n"
#: What the apt module passes by default: keep changed configuration files, take the
#: package's for new ones, never ask.
DPKG_OPTIONS = ["-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]


def parse_installed(stdout: str) -> dict[str, dict[str, str]]:
    """``dpkg-query -W -f DPKG_FORMAT`` output to ``{name: {version, status}}``; packages
    dpkg knows but has no version of (removed, config files only) are left out."""
    out: dict[str, dict[str, str]] = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1]:
            out[parts[0]] = {"version": parts[1], "status": parts[2]}
    return out


def todo(packages: dict[str, str], installed: dict[str, dict[str, str]]) -> list[str]:
    """The packages of ``packages`` ({name: version}) not installed at their version and
    held, sorted by name."""
    return sorted(
        name
        for name, version in packages.items()
        if installed.get(name) != {"version": version, "status": "hi"}
    )


def commands(
    packages: dict[str, str], names: list[str], source_list: str, refresh: bool
) -> list[list[str]]:
    """The commands that install ``names`` at their versions of ``packages`` and hold them:
    the refresh of ``source_list`` alone (when ``refresh``), unhold, install, hold."""
    out = []
    if refresh:
        out.append(
            [
                "apt-get",
                "update",
                "-o",
                f"Dir::Etc::sourcelist={source_list}",
                "-o",
                "Dir::Etc::sourceparts=-",
                "-o",
                "APT::Get::List-Cleanup=0",
            ]
        )
    out.append(["apt-mark", "unhold", *names])
    out.append(
        [
            "apt-get",
            "install",
            "-y",
            "-q",
            "--allow-change-held-packages",
            *DPKG_OPTIONS,
            *(f"{n}={packages[n]}" for n in names),
        ]
    )
    out.append(["apt-mark", "hold", *names])
    return out


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type="dict", required=True),
            source_line=dict(type="str", default=""),
            source_list=dict(type="path", default="/etc/apt/sources.list.d/kubernetes.list"),
            refresh=dict(type="bool", default=True),
            backup_dir=dict(type="path", default="/var/backups/gpufleet"),
            command=dict(type="list", elements="str", default=[]),
            command_stdin=dict(type="str", default=""),
            command_name=dict(type="str", default="the command"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    packages = {str(k): str(v) for k, v in p["packages"].items()}
    bad = sorted(
        k for k, v in packages.items() if not k or not v or any(c.isspace() for c in k + v)
    )
    if not packages or bad:
        module.fail_json(
            msg=f"packages={p['packages']!r}: every package needs a name and an exact version "
            "without spaces, as apt-cache madison prints it (kubeadm: <version>-<revision>)"
        )
    result: dict = {"changed": False, "source_changed": False}
    line = p["source_line"].strip()
    if "\n" in line:
        module.fail_json(msg=f"source_line={p['source_line']!r} holds more than one line; give one")
    if line:
        before = _read(p["source_list"])
        after = line + "\n"
        if before != after:
            result.update(changed=True, source_changed=True)
            if module._diff:
                result["diff"] = file_diff(p["source_list"], before, after)
            made = backup_and_write(
                module,
                p["source_list"],
                after,
                backup=True,
                backup_dir=p["backup_dir"],
                new_file_mode=0o644,
            )
            if made:
                result["backup_file"] = made
    query = subprocess.run(
        ["dpkg-query", "-W", "-f", DPKG_FORMAT, *packages],
        capture_output=True,
        text=True,
        check=False,
    )
    installed = parse_installed(query.stdout)
    names = todo(packages, installed)
    result.update(installed=installed, todo=names)
    if names:
        result["changed"] = True
    if module.check_mode:
        module.exit_json(**result)
    for argv in commands(packages, names, p["source_list"], p["refresh"]) if names else []:
        rc, out, err = module.run_command(
            argv, environ_update={"DEBIAN_FRONTEND": "noninteractive"}
        )
        if rc != 0:
            module.fail_json(
                msg=f"{' '.join(argv[:2])} failed (exit {rc}): {(err or out).strip()[-800:]}",
                cmd=argv,
                rc=rc,
                stdout=out,
                stderr=err,
                failed_step="packages",
                **result,
            )
    if p["command"]:
        start = time.monotonic()
        rc, out, err = module.run_command(
            p["command"], data=p["command_stdin"] or None, binary_data=True
        )
        result.update(changed=True, command_s=round(time.monotonic() - start, 1))
        result.update(rc=rc, stdout=out, stderr=err)
        if rc != 0:
            module.fail_json(
                msg=f"{p['command_name']} exited {rc}"
                + (" (timed out)" if rc in (124, 137) else ""),
                failed_step="command",
                **result,
            )
    module.exit_json(**result)


if __name__ == "__main__":
    main()

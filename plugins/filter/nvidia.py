"""Filters for the NVIDIA driver and container toolkit roles (plans, checks, verification)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: nvidia_driver_plan
short_description: Plan an NVIDIA driver install (distribution, packages, repository, modules)
version_added: 0.1.0
description:
  - Checks the pinned branch and release (525.60.13 floor; branch 565 or newer for GPU
    allocation with the NVIDIA DRA driver), the distribution, and picks the open or
    proprietary kernel modules for the GPUs on the host, then renders the CUDA repository
    files and the package list. Fails with the reason and the fix, naming the variable.
  - The other filters of this file are C(nvidia_driver_hold_list),
    C(nvidia_driver_problems), C(nvidia_toolkit_check), C(containerd_effective_problems)
    and C(nvidia_cdi_generate_argv) (the C(nvidia-ctk cdi generate) command line, with
    C(--dev-root) whenever it passes C(--driver-root)); see their docstrings in
    C(plugins/filter/nvidia.py).
options:
  _input:
    description:
      - Dict with C(mode), C(distribution), C(distribution_version), C(architecture),
        C(branch), C(version), C(source), C(kernel_modules), C(for_dra), C(repo_url),
        C(gpu_architectures) and C(packages) (an override, may be empty).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Driver | Plan
  ansible.builtin.set_fact:
    nvidia_driver_plan: "{{ settings | gpufleet.cluster.nvidia_driver_plan }}"
"""

RETURN = r"""
_value:
  description:
    - C(version), C(branch), C(distro) (name, version, family, repo_name), C(repo) (url,
      key_url, keyring_path, apt_source_path, apt_source, dnf_repo_path, dnf_repo),
      C(packages), C(module_stream), C(hold_prefixes), C(kernel_modules),
      C(kernel_modules_reason).
  type: dict
"""

import dataclasses

from ansible.errors import AnsibleFilterError

#: Every refusal starts with this, so that a role can show the reason alone.
REFUSED = "refused: "


def nvidia_driver_plan(settings: dict) -> dict:
    """Plan of the nvidia_driver role (see DOCUMENTATION); AnsibleFilterError on refusal."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import driver as nd

    try:
        pinned = nd.check_pin(
            settings["branch"], settings["version"], bool(settings.get("for_dra", True))
        )
        plan: dict = {"version": str(pinned), "branch": pinned.branch}
        if settings.get("mode", "install") == "preinstalled":
            return plan
        distro = nd.resolve_distro(settings["distribution"], settings["distribution_version"])
        flavor, reason = nd.choose_kernel_modules(
            settings.get("kernel_modules", "auto"),
            pinned.branch,
            list(settings.get("gpu_architectures") or []),
        )
        packages = nd.driver_packages(distro, settings.get("source", "cuda_repo"), flavor, pinned)
        repo = nd.cuda_repo(distro, settings["architecture"], settings["repo_url"])
    except nd.PlanError as err:
        raise AnsibleFilterError(REFUSED + str(err)) from err
    except KeyError as err:
        raise AnsibleFilterError(f"{REFUSED}nvidia_driver_plan needs the setting {err}") from err
    plan.update(
        distro=dataclasses.asdict(distro),
        repo=dataclasses.asdict(repo),
        packages=list(settings.get("packages") or packages.packages),
        module_stream=packages.module_stream,
        hold_prefixes=list(packages.hold_prefixes),
        kernel_modules=flavor,
        kernel_modules_reason=reason,
    )
    return plan


def nvidia_driver_hold_list(installed: dict, version: str, prefixes: list | None = None) -> list:
    """Installed driver packages at ``version`` (input: ``ansible_facts.packages``)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import driver as nd

    return nd.packages_to_hold(
        {
            name: [str(p.get("version", "")) for p in entries]
            for name, entries in (installed or {}).items()
        },
        str(version),
        tuple(prefixes) if prefixes else nd.HOLD_PREFIXES,
    )


def nvidia_driver_problems(facts: dict, version: str) -> list:
    """Problems of a node (``nvidia_driver_facts`` result) whose driver should be ``version``."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import driver as nd

    gpus = [
        nd.SmiGpu(int(g["index"]), str(g["name"]), str(g["uuid"]))
        for g in facts.get("smi_gpus", [])
    ]
    return nd.verify_driver(
        str(version),
        facts.get("loaded_version"),
        list(facts.get("smi_driver_versions", [])),
        len(facts.get("pci_gpus", [])),
        gpus,
    )


def nvidia_driver_load_action(facts: dict, version: str) -> str:
    """``none``, ``modprobe`` or ``reboot`` (see nvidia_driver_plan.load_action)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import driver as nd

    return nd.load_action(
        facts.get("loaded_version"), str(version), bool(facts.get("nouveau_loaded"))
    )


def nvidia_toolkit_check(containerd: str, toolkit_version: str, enable_cdi: bool = True) -> dict:
    """Refuse a toolkit older than 1.17.4 on containerd 2.x or CDI on containerd < 1.7."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd as cc

    try:
        return cc.check_toolkit(str(toolkit_version or ""), str(containerd), bool(enable_cdi))
    except cc.ConfigError as err:
        raise AnsibleFilterError(REFUSED + str(err)) from err


def containerd_effective_problems(
    dump_text: str,
    runtime_name: str = "nvidia",
    runtime_binary: str = "/usr/bin/nvidia-container-runtime",
    enable_cdi: bool = True,
    cdi_spec_dirs: list | None = None,
    expect: dict | None = None,
) -> list:
    """Problems of ``containerd config dump`` output (parsed here, on the control host)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd as cc

    try:
        dump = cc.loads(str(dump_text), "containerd config dump")
        return cc.effective_problems(
            dump,
            runtime_name=runtime_name,
            runtime_binary=runtime_binary,
            enable_cdi=bool(enable_cdi),
            cdi_spec_dirs=list(cdi_spec_dirs or cc.DEFAULT_CDI_SPEC_DIRS),
            expect=expect,
        )
    except cc.ConfigError as err:
        return [str(err)]


def nvidia_cdi_generate_argv(output: str, driver_root: str = "/", dev_root: str = "/") -> list:
    """``nvidia-ctk cdi generate`` argv writing to ``output`` (nvidia.cdi_spec.generate_argv);
    AnsibleFilterError naming the value for a relative path."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import cdi_spec

    try:
        return cdi_spec.generate_argv(str(driver_root or "/"), str(dev_root or "/"), str(output))
    except ValueError as exc:
        raise AnsibleFilterError(
            f"nvidia_container_toolkit_driver_root/_dev_root/_cdi_spec: {exc}; give an "
            "absolute path"
        ) from None


class FilterModule:
    def filters(self) -> dict:
        return {
            "nvidia_cdi_generate_argv": nvidia_cdi_generate_argv,
            "nvidia_driver_plan": nvidia_driver_plan,
            "nvidia_driver_hold_list": nvidia_driver_hold_list,
            "nvidia_driver_problems": nvidia_driver_problems,
            "nvidia_driver_load_action": nvidia_driver_load_action,
            "nvidia_toolkit_check": nvidia_toolkit_check,
            "containerd_effective_problems": containerd_effective_problems,
        }

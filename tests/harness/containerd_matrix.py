"""containerd configurations of the kinds fleets run, and the real containerd's verdict on
a writer's result.

A *case* is a main file and earlier drop-ins for one containerd release and
configuration version; a *writer* adds the NVIDIA runtime and CDI to it (the role's
module, or NVIDIA's ``nvidia-ctk runtime configure``). :func:`judge` asks the real
containerd (``containerd --config MAIN config dump``) before and after and reports what
is wrong: the dump fails (containerd would not start), the runtime or CDI is not in
effect, the NVIDIA runtime's ``SystemdCgroup`` differs from runc's, or a setting that was
in effect before is gone.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd as cc
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd_merge as cm

RUNTIME = "nvidia"
RUNTIME_BINARY = "/usr/bin/nvidia-container-runtime"
DROPIN = "conf.d/99-nvidia.toml"


@dataclass(frozen=True)
class Case:
    """``files``: relative path -> text (``config.toml`` is the main file; ``{root}`` is
    replaced by the case's directory)."""

    name: str
    config_version: int
    files: dict[str, str]

    def write(self, root: Path) -> Path:
        for rel, text in self.files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.replace("{root}", str(root)), encoding="utf-8")
        return root / "config.toml"


def config_versions(release: tuple[int, int, int]) -> tuple[int, ...]:
    """The configuration versions a release reads: 2 on 1.x, 3 on 2.0 to 2.2, 3 and 4 from
    2.3 (containerd's own ``config migrate`` output and its version check)."""
    if release[0] < 2:
        return (2,)
    return (3, 4) if release >= (2, 3, 0) else (3,)


def _plugins(version: int) -> tuple[str, str]:
    """(runtime plugin, images plugin) of a configuration version."""
    runtime = cc.cri_plugin(version)
    return runtime, (runtime if version == 2 else "io.containerd.cri.v1.images")


def cases(release: tuple[int, int, int]) -> list[Case]:
    """The configurations of the matrix for ``release``, each in every version it reads."""
    out: list[Case] = []
    for version in config_versions(release):
        rt, images = _plugins(version)
        head = f'version = {version}\nimports = ["{{root}}/conf.d/*.toml"]\n'
        runc = (
            f'[plugins."{rt}".containerd.runtimes.runc]\n'
            '  runtime_type = "io.containerd.runc.v2"\n'
            f'  [plugins."{rt}".containerd.runtimes.runc.options]\n'
            "    SystemdCgroup = true\n"
        )
        site = (
            f"version = {version}\n"
            f'[plugins."{rt}"]\n'
            "  device_ownership_from_security_context = true\n"
            f'[plugins."{images}".registry]\n'
            '  config_path = "/etc/containerd/certs.d"\n'
        )
        out.append(
            Case(
                f"v{version}-site-dropin",
                version,
                {"config.toml": head + runc, "conf.d/10-site.toml": site},
            )
        )
        nvidia_entry = (
            f'[plugins."{rt}".containerd.runtimes.nvidia]\n'
            '  runtime_type = "io.containerd.runc.v2"\n'
            "  privileged_without_host_devices = true\n"
            f'  [plugins."{rt}".containerd.runtimes.nvidia.options]\n'
            '    BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n'
            '    Root = "/run/nvidia-runc"\n'
        )
        out.append(
            Case(f"v{version}-nvidia-entry", version, {"config.toml": head + runc + nvidia_entry})
        )
        if release < cc.CDI_SWITCH_GONE:
            cdi_off = f'[plugins."{rt}"]\n  enable_cdi = false\n'
            out.append(Case(f"v{version}-cdi-off", version, {"config.toml": head + cdi_off + runc}))
        out.append(
            Case(
                f"v{version}-no-imports", version, {"config.toml": f"version = {version}\n" + runc}
            )
        )
    return out


def dump(containerd: Path, main: Path) -> tuple[dict | None, str]:
    """The parsed ``config dump`` of ``main`` and the error text (empty when it loaded)."""
    proc = subprocess.run(
        [str(containerd), "--config", str(main), "config", "dump"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOME": str(main.parent), "PATH": "/usr/bin:/bin"},
    )
    if proc.returncode != 0:
        return None, (proc.stderr or proc.stdout).strip()[-400:]
    return cc.loads(proc.stdout, "containerd config dump"), ""


def _runc_systemd(data: dict, plugin: str) -> object:
    runtimes = data["plugins"][plugin].get("containerd", {}).get("runtimes", {})
    return [runtimes.get(n, {}).get("options", {}).get("SystemdCgroup") for n in ("runc", RUNTIME)]


def judge(
    containerd: Path, root: Path, case: Case, writer: Callable[[Path, Path], None]
) -> list[str]:
    """Problems of ``writer``'s result on ``case`` (written under ``root``), as the real
    ``containerd`` reads it; empty when all is right."""
    main = case.write(root)
    before, error = dump(containerd, main)
    if before is None:
        return [f"the case itself does not load: {error}"]
    writer(main, root / DROPIN)
    after, error = dump(containerd, main)
    if after is None:
        return [f"containerd does not load the result: {error}"]
    plugin = cc.cri_plugin(cc.file_version(after))
    problems = cc.effective_problems(after, runtime_name=RUNTIME, runtime_binary=RUNTIME_BINARY)
    runc, nvidia = _runc_systemd(after, plugin)
    if runc != nvidia:
        problems.append(f"SystemdCgroup of runc is {runc!r} but of {RUNTIME} {nvidia!r}")
    owned = cm.owned_by_runtime_change(plugin, RUNTIME, set_as_default=False)
    problems += [f"lost {lost}" for lost in cm.lost_settings(before, after, owned)]
    return problems


def nvidia_ctk_in_place(nvidia_ctk: Path) -> Callable[[Path, Path], None]:
    """NVIDIA's own way: ``nvidia-ctk runtime configure --config-source=file`` with a
    drop-in, on the node's files."""

    def write(main: Path, dropin: Path) -> None:
        subprocess.run(
            [
                str(nvidia_ctk),
                "runtime",
                "configure",
                "--runtime=containerd",
                f"--config={main}",
                f"--drop-in-config={dropin}",
                "--config-source=file",
                "--enable-cdi",
                f"--nvidia-runtime-path={RUNTIME_BINARY}",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )

    return write


def available(path: Path) -> bool:
    return path.is_file() and shutil.which(str(path)) is not None

"""What the lab copies onto a node to install the GPU simulator, and the wrappers it writes.

Layout on a node (``LIB_DIR`` = ``/usr/local/lib/gpufleet-gpusim``)::

    LIB_DIR/gpufleet/__init__.py              (empty package marker)
    LIB_DIR/gpufleet/lab/__init__.py          (empty package marker)
    LIB_DIR/gpufleet/lab/gpusim/*.py, templates/*
    LIB_DIR/ansible_collections/gpufleet/cluster/plugins/module_utils/mig/{profiles,tables}.py
                                              (the collection's MIG tables, same package path)
    LIB_DIR/ansible_collections/gpufleet/cluster/plugins/module_utils/nvidia/driver.py
                                              (its driver release parser, same package path)
    /usr/bin/nvidia-smi                       (wrapper: the nvidia-smi simulator)
    /usr/local/bin/gpusim                     (wrapper: the admin entry)

The node needs ``python3`` (3.11) only; nothing here imports outside the standard library.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

LIB_DIR = PurePosixPath("/usr/local/lib/gpufleet-gpusim")
NVIDIA_SMI = PurePosixPath("/usr/bin/nvidia-smi")
GPUSIM = PurePosixPath("/usr/local/bin/gpusim")

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parents[2]
MIG_PROFILES = REPO_ROOT / "plugins" / "module_utils" / "mig" / "profiles.py"
MIG_TABLES = REPO_ROOT / "plugins" / "module_utils" / "mig" / "tables.py"
NVIDIA_DRIVER = REPO_ROOT / "plugins" / "module_utils" / "nvidia" / "driver.py"
#: The collection's modules the simulator imports (standard library only, each of them).
COLLECTION_FILES = (MIG_PROFILES, MIG_TABLES, NVIDIA_DRIVER)
# where the collection's modules land under LIB_DIR: the import path they have everywhere
COLLECTION_MODULE_UTILS = PurePosixPath("ansible_collections/gpufleet/cluster/plugins/module_utils")

_MARKER = '"""Package marker written by the GPU simulator installer."""\n'


def package_files() -> list[Path]:
    """Source files to copy (absolute paths): the package's modules and templates,
    ``mig/profiles.py`` and the tables it reads, ``mig/tables.py``, and
    ``nvidia/driver.py`` (driver release numbers). Raises ``FileNotFoundError`` when one
    is missing."""
    files = sorted(PACKAGE_DIR.glob("*.py")) + sorted((PACKAGE_DIR / "templates").glob("*"))
    for lib in COLLECTION_FILES:
        if not lib.is_file():
            raise FileNotFoundError(f"{lib} is missing: the simulator imports it")
    return [*files, *COLLECTION_FILES]


def file_map(lib_dir: PurePosixPath = LIB_DIR) -> dict[PurePosixPath, Path | str]:
    """Destination path on the node -> source file (``Path``) or literal content (``str``)."""
    out: dict[PurePosixPath, Path | str] = {
        lib_dir / "gpufleet" / "__init__.py": _MARKER,
        lib_dir / "gpufleet" / "lab" / "__init__.py": _MARKER,
    }
    for src in package_files():
        if src in COLLECTION_FILES:
            out[lib_dir / COLLECTION_MODULE_UTILS / src.parent.name / src.name] = src
        else:
            rel = src.relative_to(PACKAGE_DIR)
            out[lib_dir / "gpufleet" / "lab" / "gpusim" / PurePosixPath(*rel.parts)] = src
    return out


def wrapper_scripts(lib_dir: PurePosixPath | str = LIB_DIR) -> dict[PurePosixPath, str]:
    """``/usr/bin/nvidia-smi`` and ``/usr/local/bin/gpusim`` contents (mode 0755)."""

    def script(entry: str, doc: str) -> str:
        return (
            "#!/usr/bin/python3\n"
            f'"""{doc} (gpufleet GPU simulator)."""\n'
            "import sys\n\n"
            f"sys.path.insert(0, {str(lib_dir)!r})\n"
            f"from gpufleet.lab.gpusim.{entry} import main  # noqa: E402\n\n"
            "sys.exit(main())\n"
        )

    return {
        NVIDIA_SMI: script("cli", "nvidia-smi"),
        GPUSIM: script("admin", "gpusim administration"),
    }


def install(dest_root: Path, lib_dir: PurePosixPath = LIB_DIR) -> list[Path]:
    """Write the package, ``mig.profiles.py`` and both wrappers under ``dest_root``
    (``/`` on a node, a temporary directory in tests). Returns the files written."""
    written: list[Path] = []
    items: dict[PurePosixPath, Path | str] = dict(file_map(lib_dir))
    items.update(wrapper_scripts(lib_dir))
    for dest, src in items.items():
        target = dest_root / dest.relative_to("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = src if isinstance(src, str) else src.read_text(encoding="utf-8")
        target.write_text(data, encoding="utf-8")
        mode = 0o755 if dest in (NVIDIA_SMI, GPUSIM) else 0o644
        os.chmod(target, mode)
        written.append(target)
    return written

"""``python3 -m gpufleet.lab.gpusim [nvidia-smi args]`` or ``... admin <gpusim args>``."""

from __future__ import annotations

import sys


def _main(argv: list[str]) -> int:
    if argv[:1] == ["admin"]:
        from gpufleet.lab.gpusim import admin

        return admin.main(argv[1:])
    from gpufleet.lab.gpusim import cli

    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

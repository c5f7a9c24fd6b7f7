"""File writing shared by the modules that edit files on a node."""

from __future__ import annotations

import os
import tempfile


def write_atomic(module, path: str, text: str) -> None:
    """Replace ``path`` by ``text`` (UTF-8) in one rename, keeping its owner and mode.

    ``module`` is the running AnsibleModule: the temporary file goes to its tmpdir and
    ``module.atomic_move`` does the rename (it keeps ownership, mode and SELinux context).
    """
    fd, tmp = tempfile.mkstemp(dir=module.tmpdir)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    module.atomic_move(tmp, path)

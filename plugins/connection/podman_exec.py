# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""A connection to a podman container through ``podman exec`` alone, with pipelining."""

from __future__ import annotations

DOCUMENTATION = r"""
name: podman_exec
short_description: Run tasks in a podman container with one podman exec each
version_added: 0.1.0
description:
  - Runs each task in a local podman container with a single C(podman exec). The module
    goes to the container's Python on standard input (pipelining), so a task needs no
    temporary directory, no file copy and no C(podman mount) of the container.
  - Files that a task does copy (C(ansible.builtin.copy), C(ansible.builtin.template),
    C(async) tasks) go through C(podman exec) too, streamed on standard input and output;
    the container is never paused.
  - Made for the gpufleet lab's nodes and the Molecule scenarios' hosts (containers of the
    lab's node image). C(containers.podman.podman) reaches the same containers with about
    four podman commands a task.
  - A task's run time is bounded by the task's C(timeout) keyword; the connection adds no
    deadline of its own, as a module may run for as long as a drain takes.
options:
  remote_addr:
    description: The container's name or ID.
    type: str
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_podman_host
  remote_user:
    description:
      - The user the commands run as in the container (C(podman exec --user)).
      - Unset, the container's own user.
    type: str
    vars:
      - name: ansible_user
    env:
      - name: ANSIBLE_REMOTE_USER
    ini:
      - section: defaults
        key: remote_user
  podman_executable:
    description: The podman command, a name on C(PATH) or a path.
    type: str
    default: podman
    vars:
      - name: ansible_podman_executable
    env:
      - name: ANSIBLE_PODMAN_EXECUTABLE
  pipelining:
    description:
      - Send modules on standard input. Off, each task writes its module to a temporary
        directory in the container first (two more podman commands).
    type: bool
    default: true
    vars:
      - name: ansible_pipelining
      - name: ansible_podman_exec_pipelining
    env:
      - name: ANSIBLE_PIPELINING
    ini:
      - section: defaults
        key: pipelining
"""

EXAMPLES = r"""
# inventory: the lab's nodes are podman containers named like their hosts
# all:
#   vars:
#     ansible_connection: gpufleet.cluster.podman_exec
#     ansible_python_interpreter: /usr/bin/python3
"""

import os
import re
import shlex
import shutil
import subprocess

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

display = Display()

#: What podman accepts as a container name (libpod's name pattern), also every ID: a value
#: that starts with '-' would be read by podman as an option, not a container.
CONTAINER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")


class Connection(ConnectionBase):
    """``podman exec`` into a running container, one command per exchange."""

    transport = "gpufleet.cluster.podman_exec"
    has_pipelining = True

    def __init__(self, play_context, new_stdin, *args, **kwargs):
        super().__init__(play_context, new_stdin, *args, **kwargs)
        self._podman = None

    def _connect(self):
        if not self._connected:
            name = self.get_option("podman_executable")
            found = shutil.which(name)
            if not found:
                raise AnsibleConnectionFailure(
                    f"podman_executable: {name!r} is not a command on PATH; fix: install "
                    "podman or set ansible_podman_executable to its path"
                )
            self._podman = found
            self._connected = True
        return self

    def _container(self) -> str:
        name = to_native(self.get_option("remote_addr"))
        if not CONTAINER_NAME.match(name):
            raise AnsibleConnectionFailure(
                f"remote_addr: {name!r} is not a podman container name or ID (letters, digits, "
                "'_', '.' and '-', not first); fix: set ansible_host to the container's name "
                "as `podman ps --format '{{.Names}}'` prints it"
            )
        return name

    def _exec_args(self, interactive: bool) -> list[str]:
        args = [self._podman, "exec"]
        if interactive:
            args.append("-i")
        user = self.get_option("remote_user")
        if user:
            args.append(f"--user={to_native(user)}")
        args.append(self._container())
        return args

    def exec_command(self, cmd, in_data=None, sudoable=False):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        argv = self._exec_args(in_data is not None)
        argv += shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        display.vvv(f"EXEC {argv}", host=self._container())
        proc = subprocess.run(
            [to_bytes(a, errors="surrogate_or_strict") for a in argv],
            input=in_data,
            capture_output=True,
            check=False,
        )
        return proc.returncode, proc.stdout, proc.stderr

    def _stream(self, argv: list[str], what: str, stdin=None, stdout=None) -> None:
        proc = subprocess.run(
            [to_bytes(a, errors="surrogate_or_strict") for a in argv],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            check=False,
        )
        if proc.returncode != 0:
            raise AnsibleError(
                f"{what} in container {self._container()} failed (podman exit "
                f"{proc.returncode}): {to_text(proc.stderr).strip()}"
            )

    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        display.vvv(f"PUT {in_path} TO {out_path}", host=self._container())
        argv = [*self._exec_args(True), "/bin/sh", "-c", 'cat > "$1"', "sh", out_path]
        with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as source:
            self._stream(argv, f"copying {in_path} to {out_path}", stdin=source)

    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        display.vvv(f"FETCH {in_path} TO {out_path}", host=self._container())
        argv = [*self._exec_args(False), "cat", "--", in_path]
        target = to_bytes(out_path, errors="surrogate_or_strict")
        try:
            with open(target, "wb") as sink:
                self._stream(argv, f"fetching {in_path}", stdout=sink)
        except AnsibleError:
            if os.path.exists(target):
                os.unlink(target)
            raise

    def close(self):
        super().close()
        self._connected = False

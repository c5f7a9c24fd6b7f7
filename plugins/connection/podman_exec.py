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
  - Made for podman nodes like the gpufleet lab's (containers of its node image, tested
    with them). C(containers.podman.podman) reaches the same containers with about four
    podman commands a task.
  - Commands run through the play's shell (C(executable), by default C(/bin/sh)), as over
    SSH; C(raw) included.
  - The connection adds no deadline of its own, as a module may run for as long as a drain
    takes. A task's C(timeout) keyword stops the task on the controller; as over SSH, what
    already runs in the container runs on to its end (C(podman exec) leaves its session
    running when its client stops).
  - A host name made only of hexadecimal digits must be a container's whole name or whole
    ID; podman alone would also take it as the start of another container's ID.
  - C(become) works without a password (root, or C(NOPASSWD) sudo); a become password is
    refused, as nothing here answers a prompt.
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
import shutil
import subprocess
import tempfile

from ansible.errors import AnsibleConnectionFailure, AnsibleError, AnsibleFileNotFound
from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

display = Display()

#: What podman accepts as a container name (libpod's name pattern), also every ID: a value
#: that starts with '-' would be read by podman as an option, not a container.
CONTAINER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
#: A name podman may also read as the start of a container ID (checked before use).
HEX = re.compile(r"[0-9a-f]{1,63}")
#: podman's own exit codes for its own failures (not the command's): 125, and 255 where
#: the container is not running; with them stderr starts "Error: ".
PODMAN_FAILED = (125, 255)
#: Reads what is left of standard input after a command that did not (a missing
#: interpreter, a file that cannot be created): podman exec -i can lose the output of a
#: command that exits before its input is read.
DRAIN = 'rc=$?; cat > /dev/null; exit "$rc"'


class Connection(ConnectionBase):
    """``podman exec`` into a running container, one command per exchange."""

    transport = "gpufleet.cluster.podman_exec"
    has_pipelining = True

    def __init__(self, play_context, new_stdin, *args, **kwargs):
        super().__init__(play_context, new_stdin, *args, **kwargs)
        self._podman = None
        self._target = None

    def _connect(self):
        if not self._connected:
            self._podman = self._find_podman()
            self._target = self._resolve(self._container())
            self._connected = True
        return self

    def _find_podman(self) -> str:
        name = to_native(self.get_option("podman_executable"))
        if "/" in name:
            if os.path.isfile(name) and os.access(name, os.X_OK):
                return name
            raise AnsibleConnectionFailure(
                f"podman_executable: {name!r} is not an executable file; fix: set "
                "ansible_podman_executable to podman's path or name"
            )
        found = shutil.which(name) if name else None
        if not found:
            raise AnsibleConnectionFailure(
                f"podman_executable: {name!r} is not a command on PATH; fix: install "
                "podman or set ansible_podman_executable to its path"
            )
        return found

    def _container(self) -> str:
        name = to_native(self.get_option("remote_addr"))
        if not CONTAINER_NAME.fullmatch(name):
            raise AnsibleConnectionFailure(
                f"remote_addr: {name!r} is not a podman container name or ID (letters, digits, "
                "'_', '.' and '-', not first); fix: set ansible_host to the container's name "
                "as `podman ps --format '{{.Names}}'` prints it"
            )
        return name

    def _resolve(self, name: str) -> str:
        """The container to run in: ``name``, or for a name podman could also read as an
        ID prefix, the full ID of the container whose whole name or whole ID it is."""
        if not HEX.fullmatch(name):
            return name
        proc = self._run(
            [self._podman, "container", "inspect", "--format", "{{.Id}} {{.Name}}", name],
            capture_output=True,
        )
        found = to_text(proc.stdout).split()
        if proc.returncode != 0 or len(found) != 2:
            raise AnsibleConnectionFailure(
                f"container {name}: {self._reason(proc.stderr)}; fix: start it, or set "
                "ansible_host to a running container's name"
            )
        full_id, actual = found
        if name not in (full_id, actual.lstrip("/")):
            raise AnsibleConnectionFailure(
                f"remote_addr: no container is named {name!r}; podman would take the one whose "
                f"ID starts with it ({full_id[:12]}, named {actual.lstrip('/')}); fix: set "
                "ansible_host to the container's whole name or whole ID"
            )
        return full_id

    def _exec_args(self, interactive: bool) -> list[str]:
        args = [self._podman, "exec"]
        if interactive:
            args.append("-i")
        user = self.get_option("remote_user")
        if user:
            args.append(f"--user={to_native(user)}")
        args.append(self._target)
        return args

    def _run(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(
                [to_bytes(a, errors="surrogate_or_strict") for a in argv], check=False, **kwargs
            )
        except ValueError as exc:  # a NUL byte in a word
            raise AnsibleError(f"cannot pass {argv[-1]!r} to podman: {exc}") from None
        except OSError as exc:
            raise AnsibleConnectionFailure(
                f"podman_executable: {self._podman!r} cannot run ({exc}); fix: set "
                "ansible_podman_executable to podman's path"
            ) from None

    @staticmethod
    def _reason(stderr: bytes) -> str:
        text = to_text(stderr, errors="surrogate_or_replace").strip()
        return text.splitlines()[-1] if text else "podman gave no reason (the container stopped?)"

    def _refuse_podman_failure(self, proc: subprocess.CompletedProcess) -> None:
        # a failed task, not an unreachable host: a block's rescue handles it
        if proc.returncode in PODMAN_FAILED and proc.stderr.startswith(b"Error: "):
            raise AnsibleError(
                f"podman exec in container {self._container()}: {self._reason(proc.stderr)}"
            )

    def exec_command(self, cmd, in_data=None, sudoable=False):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        if sudoable and self.become and self.become.expect_prompt():
            raise AnsibleConnectionFailure(
                "become: a become password is set, and podman_exec answers no prompt; fix: "
                "run the tasks as root (become: false) or give the user NOPASSWD sudo"
            )
        script = to_native(cmd, errors="surrogate_or_strict")
        if in_data is not None:
            script = f"{script}\n{DRAIN}"
        shell = self._play_context.executable or "/bin/sh"
        argv = [*self._exec_args(in_data is not None), shell, "-c", script]
        display.vvv(f"EXEC {argv}", host=self._container())
        proc = self._run(argv, input=in_data, capture_output=True)
        # podman's own failure (a stopped container) stays the command's result, rc and
        # stderr, as with containers.podman: a play that waits for a host to come back
        # (wait_for_connection, the upgrade's phase connect) sees a failed command
        return proc.returncode, proc.stdout, proc.stderr

    def _stream(self, argv: list[str], what: str, stdin=None, stdout=None) -> None:
        proc = self._run(argv, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
        self._refuse_podman_failure(proc)
        if proc.returncode != 0:
            raise AnsibleError(
                f"{what} in container {self._container()} failed (exit {proc.returncode}): "
                f"{self._reason(proc.stderr)}"
            )

    @staticmethod
    def _container_path(path: str, what: str) -> str:
        """``path`` as podman can pass it on: podman replaces each byte of a path that is
        not UTF-8 with U+FFFD, which would name another file."""
        raw = to_bytes(path, errors="surrogate_or_strict")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise AnsibleError(
                f"{what}: {path!r} is not UTF-8, and podman would pass another path on"
            ) from None
        return path

    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        display.vvv(f"PUT {in_path} TO {out_path}", host=self._container())
        source = to_bytes(in_path, errors="surrogate_or_strict")
        if not os.path.isfile(source):
            raise AnsibleFileNotFound(f"file to copy into the container not found: {in_path}")
        dest = self._container_path(out_path, "the destination in the container")
        script = f'cat > "$1" || {{ {DRAIN}; }}'
        argv = [*self._exec_args(True), "/bin/sh", "-c", script, "sh", dest]
        with open(source, "rb") as data:
            self._stream(argv, f"copying {in_path} to {out_path}", stdin=data)

    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        display.vvv(f"FETCH {in_path} TO {out_path}", host=self._container())
        src = self._container_path(in_path, "the file to fetch from the container")
        target = to_bytes(out_path, errors="surrogate_or_strict")
        directory = os.path.dirname(target) or b"."
        if not os.path.isdir(directory):
            raise AnsibleError(f"fetching {in_path}: no directory {to_text(directory)!r} here")
        argv = [*self._exec_args(False), "cat", "--", src]
        # into a file beside the target, which replaces it only when the whole file came
        with tempfile.NamedTemporaryFile(dir=directory, prefix=b".podman_exec-", delete=False) as f:
            partial = f.name
            try:
                self._stream(argv, f"fetching {in_path}", stdout=f)
            except BaseException:
                os.unlink(partial)
                raise
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(partial, 0o666 & ~mask)  # as a file opened here would be, not the 0600 of
        os.replace(partial, target)  # a temporary file

    def reset(self):
        """Nothing is kept between commands: the next one runs as the first did."""
        self.close()

    def close(self):
        super().close()
        self._connected = False

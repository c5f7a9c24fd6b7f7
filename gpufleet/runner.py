"""Run a playbook of the collection through ansible-runner with a live progress display.

The display is driven by ansible-runner's event stream (the same events that
``ansible-runner`` writes to ``artifacts/<ident>/job_events``): one row per host with
its current task and its ok/changed/failed/unreachable/skipped counters, then a recap
from the ``playbook_on_stats`` event.

Exit status contract (used by every ``gpufleet`` subcommand that runs a playbook):
0 when every host ended without failure and was reachable, 1 when a host failed or
was unreachable, 2 when the run itself could not start (missing playbook, inventory, an
extra variable that cannot be kept as data) or its input was refused before any host was
changed (``INPUT_REFUSED_TASKS``: preflight);
the codes are gpufleet/exit.py's. The runner knows no lab: checks of particular
inventories (the lab's) are added to ``INVENTORY_CHECKS`` by gpufleet/cli.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK, exit_with

COLLECTION_PACKAGE = "ansible_collections.gpufleet.cluster"

ARTIFACTS_KEPT = 20

#: Checks of the inventories before a run of a playbook (called with the playbook's name
#: and the inventory paths; each raises RunError to refuse). gpufleet/cli.py adds the lab's:
#: its embedded inventory is usable only while the lab is up.
INVENTORY_CHECKS: list[Callable[[str, Sequence[str]], None]] = []

_COUNTERS = ("ok", "changed", "failed", "unreachable", "skipped", "rescued", "ignored")


class RunError(Exception):
    """The playbook run could not start (exit status 2)."""


def collection_root() -> Path:
    """Return the directory of the installed ``gpufleet.cluster`` collection.

    Works for a wheel install (``site-packages/ansible_collections/gpufleet/cluster``) and
    for an editable install (``.collections/ansible_collections/gpufleet/cluster``, a link
    to the repository root).

    Raises:
        RunError: the collection is not importable (gpufleet is not installed).
    """
    try:
        spec = importlib.util.find_spec(COLLECTION_PACKAGE)
    except ModuleNotFoundError:
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / "galaxy.yml").is_file():
            return Path(location)
    raise RunError(
        "the Ansible collection gpufleet.cluster is not importable; "
        "fix: pip install -e . (or the built wheel) into this Python"
    )


def playbook_path(name: str) -> Path:
    """Resolve a playbook of the collection by name (``site`` or ``site.yml``) or a path.

    Raises:
        RunError: no such playbook; the message lists the playbooks that exist.
    """
    candidate = Path(name)
    if candidate.suffix in (".yml", ".yaml") and candidate.is_file():
        return candidate.resolve()
    stem = candidate.name.removesuffix(".yml").removesuffix(".yaml")
    book_dir = collection_root() / "playbooks"
    path = book_dir / f"{stem}.yml"
    if path.is_file():
        return path
    known = sorted(p.stem for p in book_dir.glob("*.yml")) if book_dir.is_dir() else []
    raise RunError(f"no playbook named {name!r}; playbooks in the collection: {known or 'none'}")


@dataclass
class HostProgress:
    """What one host has done so far in a run."""

    name: str
    task: str = ""
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTERS, 0))
    last_error: str = ""

    @property
    def state(self) -> str:
        if self.counts["unreachable"]:
            return "unreachable"
        if self.counts["failed"]:
            return "failed"
        return "running" if self.task else "waiting"


#: Tasks whose ``msg`` is a warning for the person who runs the playbook (shown by the CLI
#: as it arrives and again under the recap).
NOTICE_TASKS = ("Preflight | Show the warnings",)
#: Tasks whose failure is a refusal of the input, not a failed host: preflight's stop,
#: Ansible's own check of a role's ``meta/argument_specs.yml`` (its task is named
#: "Validating arguments against arg spec ..."), the upgrade's input checks, and the
#: roles' own input checks, named "<Role> | Refuse the ..., naming the variable(s)" or
#: "..., naming them". A run that ends on one exits 2.
INPUT_REFUSAL_TASKS = (
    "Preflight | Stop before any host is changed",
    "Validating arguments against arg spec",
    "Upgrade | Input | ",
    "Upgrade | Check the input",
    "Monitoring | Refuse values the files it writes cannot hold",
    "Toolkit | Refuse values the files it writes cannot hold",
)
INPUT_REFUSAL_ENDINGS = (", naming the variable", ", naming the variables", ", naming them")


def input_refusal(task: str) -> bool:
    """Whether a failure of ``task`` is a refusal of the input (``INPUT_REFUSAL_TASKS``,
    ``INPUT_REFUSAL_ENDINGS``)."""
    return task.startswith(INPUT_REFUSAL_TASKS) or task.endswith(INPUT_REFUSAL_ENDINGS)


@dataclass
class RunProgress:
    """Progress model fed by ansible-runner events; pure, so it is tested without a terminal.

    ``hosts`` maps host name to :class:`HostProgress`; ``stats`` is the
    ``playbook_on_stats`` event data once the run ended (``None`` before).
    """

    play: str = ""
    task: str = ""
    hosts: dict[str, HostProgress] = field(default_factory=dict)
    stats: dict[str, Any] | None = None
    failures: list[tuple[str, str, str]] = field(default_factory=list)
    #: Lines of the warnings the roles report without failing (tasks named in
    #: ``NOTICE_TASKS``: preflight's probable typos and did-you-means), in arrival order.
    notices: list[str] = field(default_factory=list)

    def host(self, name: str) -> HostProgress:
        if name not in self.hosts:
            self.hosts[name] = HostProgress(name)
        return self.hosts[name]

    def feed(self, event: Mapping[str, Any]) -> None:
        """Update the model from one ansible-runner event dict."""
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        host = data.get("host")
        if kind == "playbook_on_play_start":
            self.play = data.get("play", "")
        elif kind == "playbook_on_task_start":
            self.task = data.get("task", "")
        elif kind == "runner_on_start" and host:
            self.host(host).task = data.get("task", "")
        elif (
            kind
            in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped")
            and host
        ):
            self._result(kind, host, data)
        elif kind == "playbook_on_stats":
            self.stats = {
                k: data.get(k) or {}
                for k in ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored")
            }
            for name in set().union(*self.stats.values()):
                self.host(name).task = ""

    def _result(self, kind: str, host: str, data: Mapping[str, Any]) -> None:
        hp = self.host(host)
        res = data.get("res") or {}
        if kind == "runner_on_ok":
            hp.counts["changed" if res.get("changed") else "ok"] += 1
            if str(data.get("task", "")).endswith(NOTICE_TASKS):
                msg = res.get("msg")
                lines = msg if isinstance(msg, list) else str(msg or "").splitlines()
                self.notices.extend(str(line) for line in lines if str(line).strip())
        elif kind == "runner_on_skipped":
            hp.counts["skipped"] += 1
        elif kind == "runner_on_failed" and data.get("ignore_errors"):
            hp.counts["ignored"] += 1
        else:
            counter = "unreachable" if kind == "runner_on_unreachable" else "failed"
            hp.counts[counter] += 1
            msg = str(res.get("msg") or res.get("stderr") or res.get("reason") or "")
            hp.last_error = msg
            self.failures.append((host, data.get("task", ""), msg))

    def recap(self) -> dict[str, dict[str, int]]:
        """Per host, the final counters (from the stats event when there is one)."""
        if self.stats is None:
            return {h: dict(p.counts) for h, p in self.hosts.items()}
        names = {"failures": "failed", "dark": "unreachable"}
        out: dict[str, dict[str, int]] = {}
        for key, per_host in self.stats.items():
            for host, n in per_host.items():
                out.setdefault(host, dict.fromkeys(_COUNTERS, 0))[names.get(key, key)] = n
        return out

    def exit_status(self, runner_rc: int | None = None) -> int:
        """2 when a task that refuses input failed (``input_refusal``), else 0
        when no host failed or was unreachable and ansible-playbook exited 0, else 1."""
        if any(input_refusal(str(task)) for _, task, _ in self.failures):
            return EXIT_CANNOT_RUN
        bad = any(c["failed"] or c["unreachable"] for c in self.recap().values())
        return EXIT_FAILED if bad or (runner_rc not in (None, 0)) else EXIT_OK


def render(progress: RunProgress, final: bool = False) -> Group:
    """Render the progress model as rich renderables (a header line and a host table)."""
    title = "recap" if final else (progress.play or "starting")
    table = Table(title=title, expand=False)
    table.add_column("host")
    if not final:
        table.add_column("task", overflow="ellipsis", max_width=60)
    for col in _COUNTERS:
        table.add_column(col, justify="right")
    counts = progress.recap() if final else {h: p.counts for h, p in progress.hosts.items()}
    for host in sorted(counts):
        c = counts[host]
        style = "red" if c["failed"] or c["unreachable"] else ("yellow" if c["changed"] else "")
        row = [host] + ([] if final else [progress.hosts[host].task])
        table.add_row(*row, *(str(c[k]) for k in _COUNTERS), style=style)
    parts: list[Any] = [table]
    if final and progress.failures:
        parts.append(Text("failures:", style="bold red"))
        for host, task, msg in progress.failures:
            parts.append(Text(f"  {host} | {task}: {msg}", style="red"))
    return Group(*parts)


@dataclass
class RunResult:
    """Outcome of :func:`run_playbook`: the exit status, the model and this run's artifact
    directory (``<artifact_root>/<ident>``: ``stdout``, ``job_events/``; the root itself when
    ansible-runner gave no ident)."""

    status: int
    progress: RunProgress
    artifact_dir: Path
    runner_rc: int | None


def run_playbook(
    playbook: str,
    inventory: Iterable[str] | str,
    *,
    extravars: Mapping[str, Any] | None = None,
    limit: str | None = None,
    tags: str | None = None,
    check: bool = False,
    diff: bool = False,
    verbosity: int = 0,
    console: Console | None = None,
    on_event: Callable[[Mapping[str, Any]], None] | None = None,
    artifact_root: Path | None = None,
) -> RunResult:
    """Run a playbook of the collection (or a playbook file) with a live progress display.

    Args:
        playbook: a collection playbook name (``site``) or a path to a ``.yml`` file.
        inventory: one or more inventory paths (files or directories).
        extravars: extra variables (``-e``).
        limit, tags, check, diff, verbosity: as for ``ansible-playbook``.
        console: where to draw; a non-terminal console gets the recap only.
        on_event: called with every ansible-runner event (after the model is updated).
        artifact_root: where ansible-runner keeps artifacts (default
            ``$GPUFLEET_CACHE/runs``, ``~/.cache/gpufleet/runs``; the newest 20 runs are kept).

    Returns:
        RunResult whose ``status`` follows the module's exit status contract.

    Raises:
        RunError: the playbook or an inventory path does not exist (exit status 2).
    """
    import ansible_runner  # imported late: it is slow to import and doctor must not need it

    book = playbook_path(playbook)
    inventories = [inventory] if isinstance(inventory, str) else list(inventory)
    check_run_inventories(playbook, book, inventories, limit)
    console = console or Console()
    progress = RunProgress()
    private = Path(tempfile.mkdtemp(prefix="gpufleet-run-"))
    artifacts = artifact_root or _cache_dir() / "runs"
    display = _Display(progress, console, on_event)
    try:
        kwargs = _runner_kwargs(
            book, inventories, private, artifacts, extravars=extravars, limit=limit, tags=tags,
            check=check, diff=diff, verbosity=verbosity, event_handler=display.handle,
        )  # fmt: skip
        if console.is_terminal:
            with Live(render(progress), console=console, refresh_per_second=4) as display.live:
                result = ansible_runner.run(**kwargs)
        else:
            result = ansible_runner.run(**kwargs)
        display.live = None
        return _finish(result, progress, console, Path(artifacts))
    finally:
        shutil.rmtree(private, ignore_errors=True)
        try:
            prune_runs(Path(artifacts), ARTIFACTS_KEPT)
        except OSError as err:
            console.print(
                f"warning: old run logs under {artifacts} were not removed: {err}",
                markup=False, highlight=False, style="yellow",
            )  # fmt: skip


def check_run_inventories(
    playbook: str, book: Path, inventories: Sequence[str], limit: str | None
) -> None:
    """Refuse (RunError) before anything runs: an empty or missing inventory path, one an
    ``INVENTORY_CHECKS`` entry refuses, or one :func:`check_inventory` refuses for the
    groups ``book`` (a playbook of the collection) runs on and ``limit``."""
    for inv in inventories:
        if not str(inv).strip():
            raise RunError(
                "-i '': the inventory path is empty; fix: pass -i with the inventory file or "
                "directory (e.g. -i inventory/hosts.yml)"
            )
        if not _exists(Path(inv)):
            shown = repr(inv if len(inv) <= 200 else inv[:200] + "...")
            raise RunError(f"inventory {shown} does not exist; fix: pass -i with an existing path")
    for check in INVENTORY_CHECKS:
        check(playbook, inventories)
    is_named = Path(playbook).suffix not in (".yml", ".yaml") or not Path(playbook).is_file()
    check_inventory(inventories, PLAYBOOK_GROUPS.get(book.stem, ()) if is_named else (), limit)


def _exists(path: Path) -> bool:
    """``path.exists()``, False for a name the system cannot look up (too long, a NUL)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


class _Display:
    """Feeds each ansible-runner event to the progress model and shows it: the live table
    on a terminal; on a log or CI job one plain line per play and per failure; the
    warnings of ``NOTICE_TASKS`` as they arrive."""

    def __init__(
        self,
        progress: RunProgress,
        console: Console,
        on_event: Callable[[Mapping[str, Any]], None] | None,
    ) -> None:
        self.progress = progress
        self.console = console
        self.on_event = on_event
        self.live: Live | None = None

    def handle(self, event: Mapping[str, Any]) -> bool:
        progress, console = self.progress, self.console
        before = (progress.play, len(progress.failures), len(progress.notices))
        progress.feed(event)
        if self.on_event:
            self.on_event(event)
        for line in progress.notices[before[2] :]:
            console.print(f"warning: {line}", markup=False, highlight=False, style="yellow")
        if self.live is not None:
            self.live.update(render(progress))
        elif not console.is_terminal:
            if progress.play != before[0]:
                console.print(f"play: {progress.play}", markup=False, highlight=False)
            for host, task, msg in progress.failures[before[1] :]:
                console.print(f"failed: {host} | {task}: {msg}", markup=False, highlight=False)
        return True


def _runner_kwargs(
    book: Path,
    inventories: Sequence[str],
    private: Path,
    artifacts: Path,
    *,
    extravars: Mapping[str, Any] | None,
    limit: str | None,
    tags: str | None,
    check: bool,
    diff: bool,
    verbosity: int,
    event_handler: Callable[[Mapping[str, Any]], bool],
) -> dict[str, Any]:
    """The keyword arguments of ``ansible_runner.run`` for one run of ``book``."""
    cmdline = " ".join(
        [
            *(["--check"] if check else []),
            *(["--diff"] if diff else []),
            *(["--tags", tags] if tags else []),
        ]
    )
    write_extravars(private, extravars or {})
    # ansible-playbook of this Python's environment, even when its bin/ is not on PATH
    bin_dir = str(Path(sys.executable).parent)
    envvars = {
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "True",
        "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
    }
    return dict(
        private_data_dir=str(private),
        artifact_dir=str(artifacts),
        playbook=str(book),
        inventory=[str(Path(i).resolve()) for i in inventories],
        limit=limit,
        verbosity=verbosity or None,
        quiet=True,
        event_handler=event_handler,
        envvars=envvars,
        cmdline=cmdline or None,
        project_dir=str(book.parent),
        # ansible-runner's default keeps facts in a jsonfile cache under each run's own
        # artifacts, which no later run reads; it costs a file lookup per host each time a
        # host's variables are read (a pass over 10,000 hosts: 2.1 to 2.3 s, 1.7 s
        # without). Not "jsonfile": the fact cache Ansible is configured with (in memory
        # by default).
        fact_cache_type="memory",
    )


#: A run directory without an ``rc`` file (ansible-runner writes it when the run ends) is
#: taken for a run in progress of another command, and kept, for this many seconds.
RUN_IN_PROGRESS_S = 24 * 3600


def prune_runs(root: Path, keep: int, now: float | None = None) -> None:
    """Remove all but the ``keep`` runs under ``root`` that ended last.

    Several commands of this tool can run at once on one machine and share ``root``:
    - a run still in progress (no ``rc`` file yet, the directory modified within
      ``RUN_IN_PROGRESS_S``) is never removed, however many runs ended after it began;
    - when a run ended is read from its ``rc`` file, not from its directory, whose time
      changes while another command is removing it;
    - another command may remove a directory (or a file in it) between the listing and its
      removal: that directory is left to it. Any other error is raised.
    ansible-runner's own rotation (``rotate_artifacts``) is not used: it does none of it."""
    now = time.time() if now is None else now
    ended: list[tuple[float, str, Path]] = []
    try:
        with os.scandir(root) as listing:
            entries = list(listing)
    except FileNotFoundError:
        return
    for entry in entries:
        path = Path(entry.path)
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                ended.append((os.stat(path / "rc").st_mtime, entry.name, path))
            except FileNotFoundError:
                if now - entry.stat(follow_symlinks=False).st_mtime >= RUN_IN_PROGRESS_S:
                    ended.append((0.0, entry.name, path))  # abandoned: first to go
        except FileNotFoundError:
            continue
    ended.sort(reverse=True)
    for _, _, path in ended[keep:]:
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            continue  # another command is removing it


def write_extravars(private: Path, extravars: Mapping[str, Any]) -> Path:
    """Write ``extravars`` to ``<private>/env/extravars``, the file ansible-runner hands to
    ansible-playbook as ``-e @FILE``, with every string marked as data
    (``common.unsafe.mark_unsafe``): a value read from a file, the cluster, the environment
    or a command line is never templated, and none is shown on the command line.

    Raises RunError (exit status 2) naming the variable whose value cannot be kept as data.
    """
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common import unsafe

    try:
        marked = {name: unsafe.mark_unsafe(value, name) for name, value in extravars.items()}
    except unsafe.UnsafeDataError as err:
        raise RunError(f"extra variable {err}") from None
    path = private / "env" / "extravars"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(marked, ensure_ascii=True))
    path.chmod(0o600)
    return path


def _finish(result: Any, progress: RunProgress, console: Console, artifacts: Path) -> RunResult:
    """Print the recap, the warnings and the log's path of an ended run (``result``:
    ansible-runner's Runner) and judge its status: 1 when a host failed or the run timed
    out or was canceled, 2 when ansible-playbook exited before running any task."""
    console.print(render(progress, final=True))
    for line in progress.notices:
        console.print(f"warning: {line}", markup=False, highlight=False, style="yellow")
    rc = result.rc if isinstance(result.rc, int) else None
    status = progress.exit_status(rc)
    if result.status in ("timeout", "canceled"):
        status = EXIT_FAILED
    if progress.stats is None and not progress.hosts and rc not in (None, 0):
        stdout = (
            _tail(artifacts / result.config.ident / "stdout", 20)
            if hasattr(result, "config")
            else ""
        )
        console.print(f"[red]ansible-playbook exited {rc} before running any task[/red]")
        if stdout:
            console.print(stdout, markup=False, highlight=False)
        status = EXIT_CANNOT_RUN
    ident = getattr(getattr(result, "config", None), "ident", None)
    if ident:
        console.print(
            f"ansible log: {artifacts / str(ident) / 'stdout'}", markup=False, highlight=False
        )
    run_dir = artifacts / str(ident) if ident else artifacts
    return RunResult(status, progress, run_dir, rc)


#: The groups each playbook of the collection runs on (fixed host patterns only): an
#: inventory without a host in any of them would run nothing but the localhost plays.
PLAYBOOK_GROUPS: dict[str, tuple[str, ...]] = {
    "site": ("k8s_cluster",),
    "preflight": ("k8s_cluster",),
    "mig": ("gpu_nodes",),
    "dra_feature_gates": ("kube_control_plane", "kube_node"),
    "dra_gate_audit": ("kube_control_plane", "kube_node"),
    "validate": ("kube_control_plane", "kube_node"),
}


class _ParseRecorder:
    """Stands in for ``ansible.inventory.manager.display`` while an inventory is parsed:
    keeps the plugins' parse failures (ansible-core 2.19: ``error_as_warning``; 2.17:
    ``warning('* Failed to parse ...')``) and the sources left unparsed, prints nothing."""

    def __init__(self) -> None:
        self.pending: list[str] = []
        self.unparsed: list[tuple[str, list[str]]] = []

    def error_as_warning(self, msg: str | None, exception: BaseException, **_: Any) -> None:
        self.pending.append(f"{msg or ''} {exception}".strip())

    def warning(self, msg: str, *_: Any, **__: Any) -> None:
        text = " ".join(str(msg).split())
        if text.startswith("Unable to parse ") and text.endswith(" as an inventory source"):
            source = text.removeprefix("Unable to parse ").removesuffix(" as an inventory source")
            self.unparsed.append((source, self.pending))
            self.pending = []
        elif "Failed to parse" in text:
            self.pending.append(text.lstrip("* "))

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def _reasons(failures: list[str], limit: int = 700) -> str:
    """The plugins' reasons, most telling first (the yaml and ini plugins), cut to ``limit``."""
    order = sorted(failures, key=lambda f: 0 if "'yaml'" in f or "'ini'" in f else 1)
    text = " | ".join(" ".join(f.split()) for f in order) or "no inventory plugin accepts it"
    return text if len(text) <= limit else text[:limit] + " ..."


#: Bytes of one inventory file (an inventory of 2,000 hosts with variables is about 1 MiB).
INVENTORY_MAX_BYTES = 16 * 1024 * 1024
#: Files and directories under one inventory directory (group_vars and host_vars aside).
INVENTORY_MAX_FILES = 1000


def _check_inventory_text(source: Path) -> None:
    """Refuse an inventory file (or a file directly in an inventory directory) that is
    binary, not UTF-8 or larger than ``INVENTORY_MAX_BYTES``: Ansible's ini plugin would
    read its bytes as host names. Executable files are inventory scripts and not read."""
    from ansible.inventory.manager import IGNORED  # the names Ansible skips in a directory
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig

    files: list[Path] = []
    pending = [source]
    while pending:  # Ansible reads the files of subdirectories too
        path = pending.pop()
        if path.is_dir():
            if len(files) + len(pending) > INVENTORY_MAX_FILES:
                raise RunError(
                    f"-i {source}: more than {INVENTORY_MAX_FILES} entries under the inventory "
                    "directory; fix: give the inventory directory itself, not a directory "
                    "above it (such as the home directory)"
                )
            pending.extend(
                p for p in sorted(path.iterdir()) if not IGNORED.search(os.fsencode(p.name))
            )
        elif path.exists() and not path.is_file():  # a FIFO, socket or device: Ansible hangs
            raise RunError(
                f"-i {path} is not a regular file (a named pipe, socket or device); fix: give "
                "inventory files (INI, YAML or TOML) only, or move it out of the inventory "
                "directory"
            )
        else:
            files.append(path)
    for path in files:
        if os.access(path, os.X_OK):
            continue
        try:
            ig.read_text(path, f"-i {path}", limit=INVENTORY_MAX_BYTES)
        except ig.InputError as err:
            raise RunError(f"{err} (an Ansible inventory file: INI, YAML or TOML)") from None


def check_inventory(
    inventories: Sequence[str], groups: Sequence[str] = (), limit: str | None = None
) -> dict[str, list]:
    """Parse ``inventories`` with Ansible's own InventoryManager and DataLoader, as
    ansible-playbook will, before anything runs.

    Returns group name -> host names. Raises RunError (exit status 2) naming the source
    and Ansible's parse error when a source (or a file of an inventory directory) cannot
    be parsed, when the inventory holds no host, or, with ``groups``, when no host is in
    any of them (the playbook would run on nothing); with ``limit`` (``--limit``, Ansible's
    host patterns), when it is empty (ansible-runner would drop it and run on every host)
    or selects no host of those groups.
    """
    from ansible.inventory import manager as inventory_manager
    from ansible.parsing.dataloader import DataLoader

    named = " ".join(f"-i {i}" for i in inventories)
    for source in inventories:
        _check_inventory_text(Path(source))
    recorder = _ParseRecorder()
    saved = inventory_manager.display
    inventory_manager.display = recorder  # type: ignore[assignment]
    try:
        inv = inventory_manager.InventoryManager(
            loader=DataLoader(), sources=[str(Path(i).resolve()) for i in inventories]
        )
    except Exception as err:  # AnsibleError, or whatever a plugin raises
        raise RunError(
            f"{named}: Ansible cannot parse the inventory: {' '.join(str(err).split())[:700]}; "
            f"fix: correct it (ansible-inventory {named} --list shows the whole error)"
        ) from None
    finally:
        inventory_manager.display = saved  # type: ignore[assignment]
    if recorder.unparsed:
        source, failures = recorder.unparsed[0]
        fix = (
            "put the inventory file(s) in it (e.g. hosts.yml, as inventory/sample of the "
            "collection)"
            if _is_dir(Path(source))
            else "correct the file"
        )
        raise RunError(
            f"-i {source}: Ansible cannot parse this inventory source: {_reasons(failures)}; "
            f"fix: {fix} (ansible-inventory -i {source} --list shows the whole error)"
        )
    members = {name: sorted(h.name for h in g.get_hosts()) for name, g in inv.groups.items()}
    if not members.get("all"):
        raise RunError(
            f"{named}: the inventory holds no host; fix: list the cluster's nodes in it, in "
            "the groups of inventory/sample/hosts.yml (kube_control_plane, kube_node, "
            "gpu_nodes under k8s_cluster)"
        )
    if groups and not any(members.get(g) for g in groups):
        present = sorted(g for g, hosts in members.items() if hosts and g != "all")
        raise RunError(
            f"{named}: no host is in {' or '.join(groups)}, the group(s) the playbook runs on "
            f"(groups with hosts: {', '.join(present) or 'none'}); fix: put the nodes in "
            "kube_control_plane, kube_node and gpu_nodes under k8s_cluster, as "
            "inventory/sample/hosts.yml of the collection does"
        )
    if limit is not None:
        _check_limit(inv, limit, members, groups)
    return members


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _check_limit(inv: Any, limit: str, members: dict[str, list], groups: Sequence[str]) -> None:
    """Refuse (RunError) a ``--limit`` that is empty or selects no host (of ``groups``)."""
    fix = (
        "fix: give a host or group of the inventory (e.g. --limit gpu_nodes), or leave --limit out"
    )
    if not limit.strip():
        raise RunError(f"--limit {limit!r} is empty: Ansible would run on every host; {fix}")
    try:
        inv.subset(limit)
        selected = {h.name for h in inv.get_hosts("all")}
    except Exception as err:  # AnsibleError: a bad regex (~...), a missing @file
        raise RunError(
            f"--limit {limit[:200]!r}: Ansible cannot use it: {' '.join(str(err).split())[:300]}; "
            + fix
        ) from None
    wanted = {h for g in groups for h in members.get(g, [])} if groups else set(members["all"])
    if not selected & wanted:
        hosts = sorted(wanted)
        raise RunError(
            f"--limit {limit[:200]!r} selects no host the playbook runs on (hosts: "
            f"{', '.join(hosts[:10])}{' ...' if len(hosts) > 10 else ''}); {fix}"
        )


def _cache_dir() -> Path:
    return Path(os.environ.get("GPUFLEET_CACHE") or Path.home() / ".cache" / "gpufleet")


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def default_inventory() -> Path:
    """The embedded default inventory, ``inventory/lab`` of the collection."""
    return collection_root() / "inventory" / "lab"


if __name__ == "__main__":  # pragma: no cover - manual use: python -m gpufleet.runner BOOK INV
    exit_with(run_playbook(sys.argv[1], sys.argv[2:] or [os.fspath(default_inventory())]).status)

"""A cluster's tasks started on their hosts over SSH (``distloop launch``).

The hosts are the TF_CONFIG's host names, unless the project's ``launch`` section
maps one to another destination, port, command or folder (``engine.config.launch``),
reached with the system's OpenSSH client, so ``~/.ssh/config`` (or ``--ssh-config``),
ProxyJump and the agent work as they do in a terminal. ``BatchMode=yes``: a host that
wants a password or an unknown host key fails at once with ssh's own line instead of
waiting for a prompt nobody sees. One connection per host is shared by every ssh call
to it (ControlMaster), and keep-alives end a connection whose network is gone. No
password is ever asked for or stored.

Each task's project (with custom step code beside it) is copied to
``REMOTE_DIR/RUN/project-TYPE-INDEX.json`` on its host (``REMOTE_DIR``: ``--remote-dir``,
else the host's ``remote_dir``, else ``~/distloop-runs``), then started there as
``distloop run --task TYPE:INDEX --messages`` in ``REMOTE_DIR/RUN/tasks/TYPE-INDEX``,
and reports back over its ssh channel (``engine.cluster.remote``). Data paths must
exist on every host as the project names them.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..cluster_layout.plan import run_problems, task_dir_name
from ..code_text import printable
from ..config import Project, SshHost
from ..config.launch import LaunchSettings
from ..problems import Problem, ProblemsError
from ..run_folder import TASKS_DIR
from ..stack_dumps import ANSWER_S, TaskStack
from ..tf_config import TaskSpec, TFConfig, parse_address
from .copy_back import CopyBackError, Limits, receive_run_folder, relay_checkpoints
from .launch_trust import seal, sealed_here
from .placement import Note
from .remote import RemoteEngine

DEFAULT_REMOTE_DIR = "distloop-runs"
"""Relative to the remote user's home."""
DEFAULT_COMMAND = "distloop"
"""How a host runs Distloop unless told otherwise: the one on its PATH."""
CONNECT_TIMEOUT_S = 15
COPY_TIMEOUT_S = 120


def launch_hosts(project: Project) -> dict[str, SshHost]:
    """The project's ways into its hosts (its ``launch.hosts``)."""
    return dict(project.launch.hosts) if project.launch else {}


@dataclass
class SshLaunch:
    """How the tasks reach their hosts, and where they write there.

    ``remote_command`` and ``remote_dir`` (the command line's) win over every host's own
    in ``hosts`` (the project's ``launch.hosts``); None leaves each host its own.
    """

    run_name: str
    ssh_config: Path | None = None
    remote_command: str | None = None
    remote_dir: str | None = None
    hosts: dict[str, SshHost] = field(default_factory=dict)
    _control_dir: tempfile.TemporaryDirectory[str] = field(
        default_factory=lambda: tempfile.TemporaryDirectory(prefix="distloop-ssh-")
    )

    def ssh(self, host: str, command: str) -> list[str]:
        """The ssh command line that runs ``command`` (a shell line) on TF_CONFIG's ``host``."""
        options = [
            "BatchMode=yes",
            f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            "ControlMaster=auto",
            f"ControlPath={self._control_dir.name}/%C",
            "ControlPersist=60",
            "ServerAliveInterval=5",
            "ServerAliveCountMax=3",
        ]
        config = ["-F", str(self.ssh_config)] if self.ssh_config else []
        way_in = self.hosts.get(host, SshHost())
        port = ["-p", str(way_in.port)] if way_in.port is not None else []
        destination = way_in.destination or host
        return [
            "ssh", *config, *(f"-o{o}" for o in options), *port, "-T", destination, "--", command
        ]  # fmt: skip

    def command(self, host: str) -> str:
        """How ``host`` runs Distloop."""
        return self.remote_command or self.hosts.get(host, SshHost()).command or DEFAULT_COMMAND

    def unusual(self, project: Project) -> list[str]:
        """What this launch runs beyond Distloop itself, one line each: a host's own command
        line (its shell runs it as written) and an ssh configuration file (a ProxyCommand
        or LocalCommand in it runs on this machine). A project file or a run folder from
        someone else can set them, so they are said (the command line) or asked about
        (the window) before anything runs; [] for a plain launch."""
        reads = f"ssh reads {printable(str(self.ssh_config))}"
        lines = (
            [f"{reads}: a ProxyCommand or LocalCommand there runs here"] if self.ssh_config else []
        )
        config = project.tf_config
        hosts = dict.fromkeys(
            parse_address(config.address(task))[0] for task in (config.tasks() if config else [])
        )
        lines += [
            f"{printable(self.where(host))} runs: {printable(self.command(host))}"
            for host in hosts
            if self.command(host) != DEFAULT_COMMAND
        ]
        return lines

    def where(self, host: str) -> str:
        """How messages name ``host``: its TF_CONFIG name, and the way in when it differs."""
        way_in = self.hosts.get(host, SshHost())
        if way_in.destination is None and way_in.port is None:
            return host
        port = f" port {way_in.port}" if way_in.port is not None else ""
        return f"{host} (ssh {way_in.destination or host}{port})"

    def folder(self, host: str) -> str:
        """The run's folder on ``host``."""
        remote_dir = self.remote_dir or self.hosts.get(host, SshHost()).remote_dir
        return f"{(remote_dir or DEFAULT_REMOTE_DIR).rstrip('/')}/{self.run_name}"

    def task_folder(self, config: TFConfig, task: TaskSpec) -> str:
        host, _ = parse_address(config.address(task))
        return f"{self.folder(host)}/{TASKS_DIR}/{task_dir_name(task)}"

    def tf_config(self, project: Project) -> TFConfig:
        """The project's own cluster, which names the hosts; ProblemsError if it cannot run."""
        if project.tf_config is None:
            raise ProblemsError(
                [Problem(("tf_config",), "launch needs a cluster: set the project's tf_config")],
                "launch",
            )
        problems = run_problems(project.tf_config, project.strategy.kind)
        named = {parse_address(a)[0] for job in project.tf_config.cluster.values() for a in job}
        problems += [
            Problem(
                ("launch", "hosts", host),
                f"{host} is no host of tf_config's cluster ({', '.join(sorted(named))})",
            )
            for host in (project.launch.hosts if project.launch else {})
            if host not in named
        ]
        if problems:
            raise ProblemsError(problems, "launch")
        return project.tf_config

    def engine(
        self, project: Project, task: TaskSpec, config: TFConfig, *, resume: bool = False
    ) -> RemoteEngine:
        """The task as an engine here: its project copied to its host, then started there;
        ``resume`` continues the task's run in its folder there instead."""
        host, _ = parse_address(config.address(task))
        where = f"{task} on {self.where(host)}"
        if resume:
            run = (
                f"cd {shlex.quote(self.folder(host))} && exec {self.command(host)} run --resume "
                f"{shlex.quote(f'{TASKS_DIR}/{task_dir_name(task)}')} --messages"
            )
            return RemoteEngine(project, self.ssh(host, run), task=str(task), where=where)
        folder, name = self.folder(host), f"project-{task_dir_name(task)}.json"
        sent = project
        files: dict[str, bytes] = {}
        if project.custom_code is not None:
            code = Path(project.custom_code.path)
            files[code.name] = code.read_bytes()
            sent = project.model_copy(
                update={"custom_code": project.custom_code.model_copy(update={"path": code.name})}
            )
        files[name] = sent.to_json().encode()

        def copy() -> None:
            for file_name, content in files.items():
                target = shlex.quote(f"{folder}/{file_name}")
                self.run(host, f"mkdir -p {shlex.quote(folder)} && cat > {target}", content)

        run = (
            f"cd {shlex.quote(folder)} && exec {self.command(host)} run {shlex.quote(name)} "
            f"--task {task} --out {shlex.quote(f'{TASKS_DIR}/{task_dir_name(task)}')} --messages"
        )
        return RemoteEngine(project, self.ssh(host, run), task=str(task), where=where, prepare=copy)

    def run(
        self, host: str, command: str, stdin: bytes = b"", timeout_s: float = COPY_TIMEOUT_S
    ) -> bytes:
        """Runs a short command on ``host``; OSError with ssh's own words when it fails."""
        try:
            done = subprocess.run(
                self.ssh(host, command), input=stdin, capture_output=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            raise OSError(f"{host}: no answer within {timeout_s:g} s") from None
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            raise OSError(
                f"{host}: {printable(said[-1]) if said else f'ssh exit code {done.returncode}'}"
            )
        return done.stdout

    def fetch(
        self, config: TFConfig, task: TaskSpec, into: Path, limits: Limits | None = None
    ) -> None:
        """Copies a task's run folder from its host into ``into`` (tar over ssh).

        The host is trusted with nothing (``engine.cluster.copy_back``): only plain
        files and folders inside the task's folder are taken, bounded in bytes and
        time, into a fresh temporary in ``into``'s run folder that then replaces
        ``into`` (``RUN/tasks/TASK``: the temporary goes into ``RUN``, where a crash's
        leftover is a known temporary). OSError naming the host when it cannot.
        """
        host, _ = parse_address(config.address(task))
        command = f"tar -C {shlex.quote(self.task_folder(config, task))} -cf - ."
        with (
            tempfile.TemporaryFile() as said,
            subprocess.Popen(self.ssh(host, command), stdout=subprocess.PIPE, stderr=said) as ssh,
        ):
            assert ssh.stdout is not None
            try:
                receive_run_folder(ssh.stdout, into, into.parent.parent, limits)
                ssh.wait(timeout=CONNECT_TIMEOUT_S)  # the stream ended: ssh exits now
            except subprocess.TimeoutExpired:
                pass  # killed below; its exit status says the copy failed
            except CopyBackError as exc:
                raise OSError(f"{self.where(host)}: refused: {exc}") from None
            except tarfile.TarError as exc:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    ssh.wait(timeout=CONNECT_TIMEOUT_S)
                said.seek(0)
                lines = said.read().decode(errors="replace").strip().splitlines()
                why = printable(lines[-1]) if lines else exc
                raise OSError(f"{self.where(host)}: {why}") from None
            finally:
                if ssh.poll() is None:
                    ssh.kill()
        if ssh.returncode != 0:
            folder = printable(self.task_folder(config, task))
            raise OSError(f"{self.where(host)}: copying {folder} back failed")

    def ask_for_stacks(
        self, config: TFConfig, tasks: list[TaskSpec], pids: Mapping[str, int] | None = None
    ) -> list[TaskStack]:
        """Every task's Python stacks, written on its host into its folder's stacks.txt
        (``distloop cluster --dump-task`` there signals the task's engine), all at once.
        A host that does not answer gives a task that did not answer. (``pids`` are the
        ssh clients' here: the placement's callers give them, the hosts need them not.)"""

        def ask(task: TaskSpec) -> TaskStack:
            host, _ = parse_address(config.address(task))
            command = (
                f"cd {shlex.quote(self.folder(host))} && {self.command(host)} cluster --dump-task "
                f"{shlex.quote(f'{TASKS_DIR}/{task_dir_name(task)}')}"
            )
            try:
                said = json.loads(self.run(host, command, timeout_s=CONNECT_TIMEOUT_S + ANSWER_S))
            except (OSError, ValueError):
                return TaskStack(str(task), None, f"{host}:{self.task_folder(config, task)}")
            return TaskStack(str(task), said.get("where"), f"{host}:{said.get('file')}")

        with ThreadPoolExecutor(max_workers=min(len(tasks), 32) or 1) as pool:
            return list(pool.map(ask, tasks))

    def stacks_where(self, stacks: list[TaskStack]) -> str:
        """Each dump's ``host:path``."""
        return ", ".join(stack.file for stack in stacks if stack.file)

    def stopped_tasks(self, pids: Mapping[str, int | None]) -> list[str]:
        """A task stopped on its host cannot be seen from here (the pids are ssh's)."""
        return []

    def open_network(self) -> Note:
        """The hosts' own networks, which the log says."""
        return Note(
            "info",
            "the tasks run on their hosts, started over SSH: TensorFlow's unauthenticated "
            "gRPC ports are open on those hosts' networks while the run lasts",
        )

    def spawning(self) -> contextlib.nullcontext[None]:
        """Each task starts through its own ssh command: nothing to start them inside."""
        return contextlib.nullcontext()

    def close_network(self) -> None:
        """The hosts' networks are theirs: nothing to release (:meth:`close` ends the
        connections once the chief's folder is back)."""

    def bring_back(self, project: Project, run_dir: Path) -> str:
        """Copies the chief's run folder into ``run_dir``'s ``tasks/`` at the end of a launch
        (``model.keras``, ``metrics.csv``, checkpoints: what Try It and Resume read); the
        line that says so. OSError with the line that says why it could not."""
        config = self.tf_config(project)
        chief = config.chief_task()
        try:
            self.fetch(config, chief, run_dir / TASKS_DIR / task_dir_name(chief))
        except OSError as exc:
            raise OSError(f"cannot copy {chief}'s run folder back: {exc}") from None
        return f"{chief}'s run folder copied into {run_dir}"

    def share_checkpoint(self, config: TFConfig, chief: TaskSpec, others: list[TaskSpec]) -> None:
        """Copies the chief's checkpoints to the other trainers' folders on their hosts.

        Only the chief keeps checkpoints, and every task restores from its own folder, as
        a local cluster's resume gives them (``ClusterFolder.share_chief_checkpoint``);
        here the copy goes from host to host through this machine, as a tar stream that
        is checked and re-written here (``copy_back.relay_checkpoints``): a chief's host
        cannot hand the others a link or a name outside their checkpoints folder.
        """
        source, _ = parse_address(config.address(chief))
        pack = f"tar -C {shlex.quote(self.task_folder(config, chief))} -cf - checkpoints"
        for task in others:
            host, _ = parse_address(config.address(task))
            target = shlex.quote(self.task_folder(config, task))
            unpack = f"rm -rf {target}/checkpoints && mkdir -p {target} && tar -C {target} -xf -"
            failed = f"copying {chief}'s checkpoints to {task} on {host} failed"
            with (
                tempfile.TemporaryFile() as said,
                subprocess.Popen(
                    self.ssh(source, pack), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
                ) as sender,
                subprocess.Popen(
                    self.ssh(host, unpack), stdin=subprocess.PIPE, stdout=said, stderr=said
                ) as receiver,
            ):
                assert sender.stdout is not None and receiver.stdin is not None
                try:
                    relay_checkpoints(sender.stdout, receiver.stdin)
                except CopyBackError as exc:
                    sender.kill()
                    receiver.kill()
                    with contextlib.suppress(BrokenPipeError):
                        receiver.stdin.close()
                    raise OSError(f"{failed}: {self.where(source)}: refused: {exc}") from None
                except (tarfile.TarError, BrokenPipeError):
                    pass  # nothing or a broken stream sent, or the receiver gone: said below
                with contextlib.suppress(BrokenPipeError):
                    receiver.stdin.close()
                for process in (sender, receiver):
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(timeout=COPY_TIMEOUT_S)
                    if process.poll() is None:
                        process.kill()
                if sender.returncode != 0 or receiver.returncode != 0:
                    said.seek(0)
                    lines = said.read().decode(errors="replace").strip().splitlines()
                    raise OSError(failed + (f": {printable(lines[-1])}" if lines else ""))

    def settings(self, project: Project) -> dict[str, str | None]:
        """What a resume needs to reach the same hosts and folders (kept in status.json;
        the hosts' own ways in are in the run's project.json), sealed as this user's
        (``engine.cluster.launch_trust``) so that a resume here need not ask again."""
        return {
            "run_name": self.run_name,
            "ssh_config": str(self.ssh_config) if self.ssh_config else None,
            "remote_command": self.remote_command,
            "remote_dir": self.remote_dir,
            "seal": seal(self.unusual(project)),
        }

    @classmethod
    def from_settings(cls, settings: LaunchSettings, project: Project) -> SshLaunch:
        """The launch a run folder's settings (already checked) name."""
        return cls(
            run_name=settings.run_name,
            ssh_config=Path(settings.ssh_config) if settings.ssh_config else None,
            remote_command=settings.remote_command,
            remote_dir=settings.remote_dir,
            hosts=launch_hosts(project),
        )

    def made_here(self, project: Project, settings: LaunchSettings) -> bool:
        """Whether this user launched ``settings`` on this machine, or they run nothing
        beyond Distloop: else they run only when the user says so."""
        return sealed_here(self.unusual(project), settings.seal)

    def close(self) -> None:
        """Ends the shared connections (ControlPersist would keep them a minute)."""
        for socket_path in Path(self._control_dir.name).iterdir():
            subprocess.run(
                ["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "unused"],
                capture_output=True,
                timeout=10,
            )
        self._control_dir.cleanup()

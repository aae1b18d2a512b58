"""``distloop`` subcommands that need no window: run, cluster, export, validate, predict, ...

Errors a user can fix (a bad project, a missing file) are printed as plain
messages with a non-zero exit; a traceback appears only for an unexpected engine
failure (not one of ``engine.child_main.KNOWN_FAILURES``), after the message, as the
engine's own report.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from .. import __version__
from ..cluster import local_cluster_tasks, task_dir_name
from ..cluster.blame import PEER_ERRORS, STALLED
from ..cluster.slurm import DEFAULT_PORT_BASE as SLURM_PORT_BASE
from ..cluster.ssh import DEFAULT_REMOTE_DIR, SshLaunch, launch_hosts
from ..config import Project, load_project, uneven_batch_warnings
from ..examples import example_names, load_example, portable_example_text
from ..fileio import open_text
from ..formatting import format_duration, format_prediction, prediction_json
from ..memory_check import memory_problems
from ..message_stream import CHANNEL_CLOSED_GRACE_S, ControlChannel, write_message
from ..messages import (
    Message,
    RunFailed,
    RunFinished,
    secondary_losses,
)
from ..prediction import PredictionError, predict
from ..problems import ProblemsError
from ..resume_rules import Layout, ResumableRun, command_refusal, refuse_strategy, resumable_run
from ..run_checks import file_findings, pre_run_problems
from ..run_events import Evaluated, Logged, RunEvent, Started, StatusChanged, StepsAdded
from ..run_folder import (
    LOCK_FILE,
    MESSAGES_FILE,
    PROJECT_FILE,
    TASKS_DIR,
    RunFolderError,
    RunFolderLock,
    empty_run_folder,
    folder_entries,
    format_loss,
    new_run_dir,
    not_a_run_folder,
    prepare_resume,
    read_status,
    update_status,
)
from ..run_handle import ClusterHandle, EngineHandle, open_run
from ..run_model import RunModel
from ..study.command import add_sweep_command, command_sweep
from ..tf_config import DEFAULT_WORKERS, chief_of
from ..user_code import UserCodeError, fingerprint

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
COMMANDS = (
    "run",
    "cluster",
    "launch",
    "preflight",
    "submit",
    "export",
    "validate",
    "example",
    "devices",
    "predict",
    "sweep",
)
"""The subcommands; any other first word that names a project file opens the window."""
EXIT_TERMINATED = 128 + signal.SIGTERM


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="distloop",
        description="Configure and run TensorFlow distributed training with custom loops. "
        "Without a command, opens the desktop app.",
    )
    parser.add_argument("--version", action="version", version=f"distloop {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser("run", help="train a project headless, one line per step")
    add_run_arguments(run)
    task = run.add_mutually_exclusive_group()
    task.add_argument(
        "--task",
        metavar="TYPE:INDEX",
        help="run this task (e.g. worker:1) of the cluster in the project's tf_config or "
        "in TF_CONFIG (which wins when set)",
    )
    task.add_argument(
        "--task-from",
        choices=["slurm"],
        help="compute the cluster and this task from the variables srun sets (each task "
        "then runs in OUT/tasks/TYPE-INDEX)",
    )
    run.add_argument(
        "--messages",
        action="store_true",
        help="machine-readable: the protocol's messages as JSON lines on stdout; a 'stop' "
        "line on stdin stops the run, the end of stdin stops it too (a launcher's channel)",
    )
    run.add_argument(
        "--record-messages",
        action="store_true",
        help=f"also append the protocol's messages as JSON lines to {MESSAGES_FILE} in the run "
        "folder: a follower on a shared file system reads them (distloop submit --wait)",
    )
    run.add_argument(
        "--port-base",
        type=int,
        default=SLURM_PORT_BASE,
        help=f"with --task-from slurm: the port of each node's first task (default "
        f"{SLURM_PORT_BASE}; the node's next tasks take the ports after it)",
    )
    add_cluster_commands(commands)
    add_sweep_command(commands)

    validate = commands.add_parser("validate", help="check a project file and list its problems")
    validate.add_argument("project", type=Path)

    example = commands.add_parser("example", help="print a built-in example project")
    example.add_argument("name", nargs="?", help=f"one of: {', '.join(example_names())}")

    commands.add_parser("devices", help="list the devices TensorFlow sees on this machine")

    predict = commands.add_parser(
        "predict", help="run a run's saved model (model.keras) on CSV, .npy, image or text files"
    )
    predict.add_argument("run", type=Path, help="the run folder")
    predict.add_argument(
        "inputs",
        nargs="+",
        type=Path,
        metavar="INPUT",
        help="a .csv (one example a row), an .npy array, an image, or a .txt for a text model",
    )
    predict.add_argument("--json", action="store_true", help="one JSON object per example")
    return parser


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("project", nargs="?", type=Path, help="project JSON file")
    source.add_argument("--example", metavar="NAME", help="run a built-in example instead")
    source.add_argument(
        "--resume",
        metavar="DIR",
        type=Path,
        help="continue a stopped, failed or killed run from its last checkpoint",
    )
    parser.add_argument(
        "--out", type=Path, help="run folder (default: a new folder under the user's data dir)"
    )
    add_overwrite_argument(parser)
    parser.add_argument(
        "--quiet", action="store_true", help="print only the summary, not a line per step"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="also print TensorFlow's log output (to stderr)"
    )


def add_max_restarts_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-restarts",
        type=int,
        default=0,
        metavar="N",
        help="when a task dies or is preempted, start the whole cluster again from its last "
        "checkpoint, up to N times (default 0)",
    )


def add_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="empty the --out folder first when it holds an earlier run (which is lost); "
        "a folder that holds anything a run does not write is never emptied",
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return command_run(args)
    if args.command == "cluster":
        return command_cluster(args)
    if args.command == "launch":
        return command_launch(args)
    if args.command == "preflight":
        return command_preflight(args)
    if args.command == "submit":
        return command_submit(args)
    if args.command == "export":
        return command_export(args)
    if args.command == "validate":
        return command_validate(args.project)
    if args.command == "example":
        return command_example(args.name)
    if args.command == "devices":
        return command_devices()
    if args.command == "sweep":
        return command_sweep(args)
    if args.command == "predict":
        return command_predict(args.run, args.inputs, as_json=args.json)
    build_parser().print_help()
    return EXIT_USAGE


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _load(path: Path) -> Project | None:
    try:
        return load_project(path).resolve_paths(path.parent)
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return None


def command_validate(path: Path) -> int:
    project = _load(path)
    if project is None:
        return EXIT_FAILED
    found = file_findings(project)
    if found.problems:
        _err(f"distloop: {ProblemsError(found.problems, str(path))}")
        return EXIT_FAILED
    print(f"{path}: valid ({project.strategy.kind}, {project.total_steps() or '?'} steps)")
    for note in found.notes + uneven_batch_warnings(project):
        print(f"note: {note}")
    # Valid all the same: the project may be meant for a bigger machine; a run here refuses.
    for problem in memory_problems(project):
        print(f"note: {problem}; a run on this machine would be refused")
    return EXIT_OK


def command_example(name: str | None) -> int:
    if name is None:
        for known in example_names():
            print(f"{known:16} {load_example(known).name}")
        return EXIT_OK
    try:
        sys.stdout.write(portable_example_text(name))
    except KeyError:
        _err(_no_example(name))
        return EXIT_USAGE
    return EXIT_OK


def _no_example(name: str) -> str:
    return f"distloop: no example named {name!r}; examples: {', '.join(example_names())}"


def command_devices() -> int:
    from ..process import detect_devices

    try:
        found = detect_devices()
    except (TimeoutError, RuntimeError) as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    print(f"TensorFlow {found.tensorflow_version}")
    for device in found.devices:
        print(f"{device.device_type:6} {device.name}")
    return EXIT_OK


def command_predict(run_dir: Path, inputs: list[Path], *, as_json: bool) -> int:
    """One line per example on stdout; one line per input that cannot be read on stderr."""
    try:
        result = predict(run_dir, inputs)
    except PredictionError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    except KeyboardInterrupt:  # the prediction process is ended with it
        _err("distloop: prediction interrupted")
        return EXIT_INTERRUPTED
    for prediction in result.predictions:
        print(prediction_json(prediction) if as_json else format_prediction(prediction))
    for error in result.errors:
        _err(f"distloop: {error}")
    return EXIT_FAILED if result.errors else EXIT_OK


def command_run(args: argparse.Namespace) -> int:
    if args.resume:
        return command_resume(args)
    if args.example:
        try:
            project = load_example(args.example)
        except KeyError:
            _err(_no_example(args.example))
            return EXIT_USAGE
    else:
        project = _load(args.project)
        if project is None:
            return EXIT_FAILED
    from ..cluster import tf_config_for_run
    from ..cluster.slurm import tf_config_from_slurm

    try:
        if args.task_from == "slurm":
            slurm = tf_config_from_slurm(
                os.environ, project.strategy.kind, port_base=args.port_base
            )
            args.task = str(slurm.task)
            args.out = (
                (args.out or new_run_dir(project.name)) / TASKS_DIR / task_dir_name(slurm.task)
            )
            project = project.model_copy(update={"tf_config": slurm})
        # The cluster Slurm laid out wins over a TF_CONFIG the job's environment inherited.
        environ = {} if args.task_from else None
        project = project.model_copy(
            update={"tf_config": tf_config_for_run(project, args.task, environ)}
        )
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    if not announce_custom_code(project, args.project.parent if args.project else None):
        return EXIT_FAILED
    # A cluster task (--task) may be a ps server that reads no data: the engine decides.
    if not args.task and not _may_start_here(project, str(args.project or args.example)):
        return EXIT_FAILED
    made = _make_run_folder(args.out, project.name)
    if made is None:
        return EXIT_FAILED
    run_dir, _ = made
    lock = _claim_new_run_folder(run_dir, overwrite=args.overwrite, command="run")
    if lock is None:
        return EXIT_FAILED
    return run_in_foreground(
        project,
        run_dir,
        quiet=args.quiet,
        verbose=args.verbose,
        folder_lock=lock,
        as_messages=args.messages,
        record_messages=args.record_messages,
    )


def _may_start_here(project: Project, source: str, *, processes: int = 1) -> bool:
    """Whether the run's checks (``engine.run_checks``) let ``project`` start on this
    machine; says why not. Checked before the run folder is made and before any
    TensorFlow start, so a refused run costs seconds and leaves nothing behind."""
    problems = pre_run_problems(project, processes=processes)
    if problems:
        _err(f"distloop: {ProblemsError(problems, source)}")
    return not problems


def _make_run_folder(out: Path | None, name: str) -> tuple[Path, bool] | None:
    """The folder ``--out`` names, else a new one under the data dir, created, and whether
    this call made it (a refused run removes it again); None when it cannot be made."""
    try:
        run_dir = out or new_run_dir(name)
        created = not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _err(f"distloop: cannot create the run folder: {exc}")
        return None
    return run_dir, created


def _claim_new_run_folder(run_dir: Path, *, overwrite: bool, command: str) -> RunFolderLock | None:
    """Locks the folder a new run writes, which must hold no earlier run; None: refused.

    A second run appending to a finished run's files would leave two traces in
    one; the lock comes first, so a run that is still writing is named as such.
    A folder that is not a run folder (a home folder, a thesis) is refused before
    anything is written into it, lock file included, and ``--overwrite`` never
    empties it (:func:`engine.run_folder.not_a_run_folder`). One with a lock file is
    a run's, and may be one being set up by a run that holds it: that run is named.
    """

    def refusal() -> str | None:
        try:
            why = not_a_run_folder(run_dir)
        except OSError as exc:
            why = f"cannot read the folder {run_dir}: {exc.strerror or exc}"
        return None if why is None else f"{why}; choose an empty or a new folder for --out"

    if not os.path.lexists(run_dir / LOCK_FILE) and (why := refusal()) is not None:
        _err(f"distloop: {why}")
        return None

    def holds_no_earlier_run() -> None:
        if (why := refusal()) is not None:
            raise RunFolderError(why)
        try:
            if not folder_entries(run_dir):
                return
            if not overwrite:
                raise RunFolderError(
                    f"the run folder {run_dir} is not empty: continue its run with "
                    f"distloop {command} --resume {run_dir}, or replace it with --overwrite"
                )
            empty_run_folder(run_dir)
        except RunFolderError:
            raise
        except OSError as exc:
            raise RunFolderError(
                f"cannot empty the run folder {run_dir}: {exc.strerror or exc}"
            ) from exc

    return _claim_run_folder(run_dir, holds_no_earlier_run)


def _claim_run_to_resume(run_dir: Path) -> RunFolderLock | None:
    """Locks the folder of a run to resume and checks that it writes nowhere else."""
    return _claim_run_folder(run_dir, lambda: prepare_resume(run_dir))


def _claim_run_folder(run_dir: Path, check: Callable[[], None]) -> RunFolderLock | None:
    """Locks ``run_dir``, then ``check``s it (a RunFolderError says why not); None: refused.

    A refused folder is left as it was: without a lock file when it had none.
    """
    had_lock_file = os.path.lexists(run_dir / LOCK_FILE)
    try:
        lock = RunFolderLock.acquire(run_dir)
    except RunFolderError as exc:
        _err(f"distloop: {exc}")
        return None
    try:
        check()
    except RunFolderError as exc:
        _err(f"distloop: {exc}")
        if not had_lock_file:
            with contextlib.suppress(OSError):
                (run_dir / LOCK_FILE).unlink()
        lock.release()
        return None
    return lock


def _resumable(run_dir: Path, layout: Layout) -> ResumableRun | int:
    """The run in ``run_dir`` when ``distloop {layout} --resume`` continues it, its custom
    code announced; else the exit code, said why (``engine.resume_rules`` decides).

    A folder another command continues is a usage error (2), as a wrong option is: the
    message names the command to use.
    """
    try:
        run = resumable_run(run_dir)
    except (RunFolderError, ProblemsError) as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    refusal = command_refusal(run, layout)
    if refusal is not None:
        _err(f"distloop: {refusal}")
        return EXIT_FAILED if run.layout is layout else EXIT_USAGE
    return run if announce_custom_code(run.project, None) else EXIT_FAILED


def command_resume(args: argparse.Namespace) -> int:
    run_dir: Path = args.resume
    if args.out is not None or args.overwrite:
        _err("distloop: --resume continues in the run's own folder; drop --out/--overwrite")
        return EXIT_USAGE
    if args.task_from == "slurm":
        return resume_slurm_task(run_dir, port_base=args.port_base, args=args)
    run = _resumable(run_dir, Layout.RUN)
    if isinstance(run, int):
        return run
    project = run.project
    lock = _claim_run_to_resume(run_dir)
    if lock is None:
        return EXIT_FAILED
    return run_in_foreground(
        project,
        run_dir,
        quiet=args.quiet,
        verbose=args.verbose,
        resume=True,
        folder_lock=lock,
        as_messages=args.messages,
        record_messages=args.record_messages,
    )


def resume_slurm_task(run_dir: Path, *, port_base: int, args: argparse.Namespace) -> int:
    """One task of a requeued Slurm job: its folder under ``run_dir``, the chief's checkpoint.

    The nodes may differ from the first start's, so the TF_CONFIG is Slurm's new one;
    a trainer that is not the chief takes the chief's checkpoints first, as a local
    cluster's resume gives them (only the chief keeps them). The chief writes none
    before every task has joined its first step, so the copy is whole.
    """
    from ..cluster.slurm import tf_config_from_slurm
    from ..cluster.top_folder import ClusterFolder

    # multi_worker_mirrored's chief, worker 0: the only multi-machine strategy that resumes.
    chief_dir = run_dir / TASKS_DIR / task_dir_name(chief_of({"worker": ()}))
    project = _load(chief_dir / PROJECT_FILE) if (chief_dir / PROJECT_FILE).is_file() else None
    if project is None:
        _err(f"distloop: {run_dir} holds no Slurm run of multi_worker_mirrored to resume")
        return EXIT_FAILED
    try:
        refuse_strategy(project)
        config = tf_config_from_slurm(os.environ, project.strategy.kind, port_base=port_base)
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    task_dir = run_dir / TASKS_DIR / task_dir_name(config.task)
    if not (task_dir / PROJECT_FILE).is_file():
        _err(f"distloop: {config.task} never started in {run_dir}: resume with the job's shape")
        return EXIT_FAILED
    lock = _claim_run_to_resume(task_dir)
    if lock is None:
        return EXIT_FAILED
    if task_dir != chief_dir:
        ClusterFolder(run_dir, lambda *_: None).share_chief_checkpoint(
            chief_dir.name, [task_dir.name]
        )
    return run_in_foreground(
        project.model_copy(update={"tf_config": config}),
        task_dir,
        quiet=args.quiet,
        verbose=args.verbose,
        resume=True,
        folder_lock=lock,
        as_messages=args.messages,
        record_messages=args.record_messages,
    )


def announce_custom_code(project: Project, project_dir: Path | None) -> bool:
    """Says which code the run will execute, before it does; False when it cannot be read.

    A project may come from anyone and its custom code runs with the user's rights.
    There is no question to answer (the command runs unattended too): the path and
    hash are on record, and a file from outside the project's folder is pointed out.
    ``project_dir`` is None for a run folder's copy, whose paths are all absolute.
    """
    if project.custom_code is None:
        return True
    try:
        code = fingerprint(project.custom_code.path, project_dir)
    except UserCodeError as exc:
        _err(f"distloop: {exc}")
        return False
    _err(f"distloop: running custom step code {code.path} (sha256 {code.sha256})")
    if code.outside_project:
        _err(
            f"distloop: warning: {code.path} is outside the project's folder "
            f"{code.project_dir}; run it only if you trust it"
        )
    return True


def announce_launch(project: Project, hosts: SshLaunch) -> None:
    """Says what a launch runs beyond Distloop itself (``SshLaunch.unusual``), before it
    runs: as with custom code, a project or run folder may come from anyone, and the
    command runs unattended, so the record is the answer."""
    for line in hosts.unusual(project):
        _err(f"distloop: {line}")


def run_in_foreground(
    project: Project,
    run_dir: Path,
    *,
    quiet: bool,
    verbose: bool,
    resume: bool = False,
    folder_lock: RunFolderLock | None = None,
    as_messages: bool = False,
    record_messages: bool = False,
) -> int:
    """Runs the engine and prints its messages; Ctrl-C stops it between steps.

    Always one process: a multi-machine project here is one task of a cluster whose
    other tasks run elsewhere (``--task``), so it names the peers that do not answer.
    ``record_messages`` appends every message to the run folder's ``messages.jsonl``
    too (a resumed run's after its first start's), for a follower elsewhere.
    """
    engine = open_run(
        project,
        run_dir,
        resume=resume,
        layout="single",
        folder_lock=folder_lock,
        name_missing_peers=True,
    )
    if not record_messages:
        return follow(engine, run_dir, quiet=quiet, verbose=verbose, as_messages=as_messages)
    try:
        record = open_text(run_dir / MESSAGES_FILE, "a")
    except OSError as exc:
        _err(f"distloop: cannot write {run_dir / MESSAGES_FILE}: {exc.strerror or exc}")
        return EXIT_FAILED
    with record:
        return follow(
            engine, run_dir, quiet=quiet, verbose=verbose, as_messages=as_messages, record=record
        )


_STOP_SIGNALS = {
    signal.SIGINT: ("Ctrl-C", EXIT_INTERRUPTED),
    signal.SIGTERM: ("SIGTERM", EXIT_TERMINATED),
}


def follow(
    engine: EngineHandle,
    run_dir: Path,
    *,
    quiet: bool,
    verbose: bool,
    as_messages: bool = False,
    record: TextIO | None = None,
    stopping: tuple[str, str, str] = (
        "stopping after the current step",
        "to kill",
        "killing the engine",
    ),
) -> int:
    """Starts the run and prints its messages until it ends; Ctrl-C stops it between steps.

    ``as_messages`` (``--messages``): stdout carries the protocol messages as JSON
    lines and standard input is the control channel (``engine.message_stream``): a
    ``stop`` line is a Ctrl-C, and its end stops the run, then kills it after
    :data:`CHANNEL_CLOSED_GRACE_S`: the launcher that started it is gone.

    SIGTERM (kill, systemd, Slurm, Kubernetes) is a Ctrl-C too, with exit code 143
    instead of 130. The second of either kills the engine: the run then ends
    ``stopped (killed on request)``, resumable from its last checkpoint. The
    handlers only note the signal, and the loop answers it: an exception raised
    wherever a signal lands could cut a message or the cleanup in half. The printer is
    a view of the run's model, as the window's panels are.

    ``stopping`` says what the first stop does, what a second would, and what it does
    (a Slurm job's differ).
    ``record`` gets every message as a JSON line too. SIGUSR1 (``scancel --signal=USR1``,
    which reaches a Slurm task's first process only) is passed on to the engine process,
    which writes its stacks (``engine.stack_dumps``); it would otherwise end this one.
    """
    try:
        engine.start()
    except OSError as exc:
        _err(f"distloop: cannot start the run in {run_dir}: {exc.strerror or exc}")
        return EXIT_FAILED
    received: list[int] = []
    previous = {
        number: signal.signal(number, lambda signum, frame: received.append(signum))
        for number in _STOP_SIGNALS
    }
    if hasattr(signal, "SIGUSR1"):
        previous[signal.SIGUSR1] = signal.signal(
            signal.SIGUSR1, lambda signum, frame: _pass_dump_signal(engine)
        )
    stop_exit: int | None = None  # the exit code of the first Ctrl-C or SIGTERM
    answered = 0
    model = RunModel(run_dir=run_dir)
    outcomes: list[int] = []

    def print_change(event: RunEvent) -> None:
        outcome = _print_event(event, quiet=quiet, verbose=verbose)
        if outcome is not None:
            outcomes.append(outcome)

    control = ControlChannel() if as_messages else None
    closed_at: float | None = None
    if not as_messages:
        model.subscribe(print_change)
    try:
        _err(f"distloop: run folder {run_dir}")
        while not engine.done:
            for message in engine.poll(0.5):
                model.apply(message)
                if record is not None:
                    _record(message, record)
                if as_messages:
                    write_message(message)
                    if isinstance(message, RunFinished | RunFailed):
                        outcomes.append(
                            EXIT_OK if isinstance(message, RunFinished) else EXIT_FAILED
                        )
                if outcomes:
                    return stop_exit if stop_exit and outcomes[0] == EXIT_OK else outcomes[0]
            if control is not None and control.stop_requested.is_set() and stop_exit is None:
                received.append(signal.SIGINT)
            if control is not None and control.kill_requested.is_set():
                control.kill_requested.clear()
                _err("distloop: asked to kill the run: killing the engine")
                stop_exit = stop_exit or EXIT_INTERRUPTED
                engine.kill()
            if control is not None and control.closed.is_set():
                if closed_at is None:
                    closed_at = time.monotonic()
                    _err("distloop: the control channel closed: stopping after the current step")
                    stop_exit = stop_exit or EXIT_INTERRUPTED
                    engine.request_stop()
                elif time.monotonic() - closed_at > CHANNEL_CLOSED_GRACE_S:
                    engine.kill()
            for number in received[answered:]:
                answered += 1
                how, code = _STOP_SIGNALS[number]
                if stop_exit is not None:
                    _err(f"distloop: {how} again: {stopping[2]}")
                    engine.kill()
                else:
                    stop_exit = code
                    _err(f"distloop: {how}: {stopping[0]} ({how} again {stopping[1]})")
                    engine.request_stop()
    finally:
        engine.close()
        for number, handler in previous.items():
            signal.signal(number, handler)
    return EXIT_FAILED


def _pass_dump_signal(engine: EngineHandle) -> None:
    """Asks the engine process (one run's, not a cluster's) for its stacks."""
    pid = getattr(engine, "pid", None)
    if isinstance(pid, int):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGUSR1)


def _record(message: Message, record: TextIO) -> None:
    """One message into ``messages.jsonl``; a full disk costs the follower, not the run."""
    with contextlib.suppress(OSError, ValueError):
        write_message(message, record)


def _print_event(event: RunEvent, *, quiet: bool, verbose: bool) -> int | None:
    """Prints what changed in the run; returns the exit code once the run has ended."""
    if isinstance(event, StepsAdded):
        if not quiet:
            message = event.message
            named = message.named_losses or {}
            shown = secondary_losses(named)
            lines = (
                f"step={step} loss={format_loss(loss)}"
                + "".join(f" {name}={format_loss(named[name][i])}" for name in shown)
                for i, (step, loss) in enumerate(zip(message.steps, message.losses, strict=True))
            )
            print("\n".join(lines), flush=True)
    elif isinstance(event, Evaluated):
        if not quiet:
            values = "".join(f" {k}={format_loss(v)}" for k, v in event.message.metrics.items())
            print(f"eval step={event.message.step}{values}", flush=True)
    elif isinstance(event, Started):
        started = event.message
        if started.serving:
            _err(f"distloop: serving {started.serving} until the coordinator is done")
        else:
            _err(
                f"distloop: {started.strategy_kind or started.strategy} with "
                f"{started.num_replicas} replica(s) on "
                f"{', '.join(started.devices)} (TensorFlow {started.tensorflow_version})"
            )
    elif isinstance(event, Logged):
        # Engine errors arrive again, whole, as RunFailed; only warnings need a line here.
        line = event.message
        if verbose or (line.source == "engine" and line.level == "warning"):
            task = f"{line.task} " if line.task else ""
            _err(f"[{task}{line.source}] {line.text}")
    elif isinstance(event, StatusChanged) and isinstance(event.outcome, RunFinished):
        ended = event.outcome
        loss = "n/a" if ended.final_loss is None else format_loss(ended.final_loss)
        how = " (killed on request)" if ended.killed else ""
        _err(
            f"distloop: {ended.status}{how} after step {ended.last_step}, final loss {loss}, "
            f"{format_duration(ended.elapsed_s)}"
        )
        return EXIT_OK
    elif isinstance(event, StatusChanged) and isinstance(event.outcome, RunFailed):
        failed = event.outcome
        _err(f"distloop: the run failed: {failed.error_type}: {failed.message}")
        if failed.traceback and not failed.known:  # a known failure's stays in engine.log
            _err(failed.traceback.rstrip())
        return EXIT_FAILED
    return None


# --- clusters: distloop cluster / export -------------------------------------------------


def add_cluster_commands(commands: argparse._SubParsersAction) -> None:
    cluster = commands.add_parser(
        "cluster",
        help="run every task of a multi-worker or parameter-server project on this machine",
    )
    source = cluster.add_mutually_exclusive_group(required=True)
    source.add_argument("project", nargs="?", type=Path, help="project JSON file")
    source.add_argument(
        "--resume",
        metavar="DIR",
        type=Path,
        help="continue a stopped, failed or killed multi-worker cluster run, every task from "
        "the chief's last checkpoint",
    )
    source.add_argument(
        "--dump",
        metavar="DIR",
        type=Path,
        help="a running cluster that seems hung: every task writes its Python stacks into "
        "its folder (stacks.txt), and the task not where its peers wait is named",
    )
    source.add_argument(  # a launch's side on a task's host, over ssh: JSON on stdout
        "--dump-task", metavar="DIR", type=Path, help=argparse.SUPPRESS
    )
    cluster.add_argument(
        "--out", type=Path, help="run folder (default: a new folder under the user's data dir)"
    )
    add_overwrite_argument(cluster)
    cluster.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help=f"number of worker tasks (default: the project's tf_config, else {DEFAULT_WORKERS})",
    )
    add_max_restarts_argument(cluster)
    cluster.add_argument(
        "--quiet", action="store_true", help="print only the summary, not a line per step"
    )
    cluster.add_argument(
        "--verbose", action="store_true", help="also print every task's log output (to stderr)"
    )

    launch = commands.add_parser(
        "launch",
        help="run every task of the project's cluster on the hosts its TF_CONFIG names, "
        "started over SSH, and follow it here",
    )
    source = launch.add_mutually_exclusive_group(required=True)
    source.add_argument("project", nargs="?", type=Path, help="project JSON file with a tf_config")
    source.add_argument(
        "--resume",
        metavar="DIR",
        type=Path,
        help="continue a stopped, failed or interrupted launch, every task on its host from "
        "the chief's last checkpoint",
    )
    add_max_restarts_argument(launch)
    launch.add_argument(
        "--out", type=Path, help="the run's folder here (default: a new one under the data dir)"
    )
    add_overwrite_argument(launch)
    launch.add_argument(
        "--ssh-config", type=Path, metavar="FILE", help="ssh's configuration (ssh -F FILE)"
    )
    launch.add_argument(
        "--remote-command",
        metavar="CMD",
        help="how every host runs distloop (e.g. /opt/venv/bin/distloop; default: each host's "
        "launch.hosts command in the project, else distloop)",
    )
    launch.add_argument(
        "--remote-dir",
        metavar="DIR",
        help="where runs go on every host (default: each host's launch.hosts remote_dir in the "
        f"project, else ~/{DEFAULT_REMOTE_DIR})",
    )
    launch.add_argument(
        "--no-preflight", action="store_true", help="start without the pre-flight check"
    )
    launch.add_argument("--quiet", action="store_true", help="print only the summary")
    launch.add_argument(
        "--verbose", action="store_true", help="also print every task's log output (to stderr)"
    )
    preflight = commands.add_parser(
        "preflight",
        help="check every host of the project's cluster over SSH before a launch: versions, "
        "devices, data, ports, and each pair of tasks reaching each other",
    )
    preflight.add_argument("project", nargs="?", type=Path, help="project JSON file")
    preflight.add_argument("--ssh-config", type=Path, metavar="FILE", help="ssh -F FILE")
    preflight.add_argument(
        "--remote-command", metavar="CMD", help="distloop on every host (as launch's)"
    )
    preflight.add_argument(
        "--remote-dir", metavar="DIR", help="where runs go on every host (as launch's)"
    )
    # The host's side, run over ssh by the check itself.
    hidden = argparse.SUPPRESS
    preflight.add_argument("--probe", action="store_true", help=hidden)
    preflight.add_argument("--path", action="append", default=[], help=hidden)
    preflight.add_argument("--port", action="append", type=int, default=[], help=hidden)
    preflight.add_argument("--folder", default=".", help=hidden)
    preflight.add_argument("--devices", action="store_true", help=hidden)
    preflight.add_argument("--listen", type=int, help=hidden)
    preflight.add_argument("--seconds", type=float, default=30.0, help=hidden)
    preflight.add_argument("--connect", nargs="+", help=hidden)

    from ..export import DEFAULT_IMAGE, FORMATS
    from ..export_storage import DATA_MOUNT

    add_submit_command(commands)

    export = commands.add_parser(
        "export",
        help="write a standalone training script, the TF_CONFIG of every task, launch scripts "
        "or Kubernetes manifests",
    )
    export.add_argument("project", type=Path, help="project JSON file")
    export.add_argument("--format", required=True, choices=(*FORMATS, "script"))
    export.add_argument(
        "--out", type=Path, required=True, help="folder to write into (script: the .py file)"
    )
    export.add_argument(
        "--tf-config",
        type=Path,
        metavar="FILE",
        help="take the cluster from this TF_CONFIG JSON file instead of the project",
    )
    export.add_argument(
        "--image",
        default=DEFAULT_IMAGE,
        help=f"image with Distloop installed, for k8s and tfjob (default {DEFAULT_IMAGE})",
    )
    export.add_argument(
        "--runs-volume",
        type=_volume_name,
        metavar="CLAIM",
        help="k8s and tfjob: a PersistentVolumeClaim for the run folders, which stay after the "
        "pods end (default: an emptyDir, lost with the pod)",
    )
    export.add_argument(
        "--data-volume",
        type=_volume_name,
        metavar="CLAIM",
        help="k8s and tfjob: a PersistentVolumeClaim holding the files the project reads, "
        f"mounted read-only; project.json reads them from {DATA_MOUNT}",
    )

    add_slurm_job_arguments(export.add_argument_group("slurm format"))


def add_slurm_job_arguments(slurm: argparse._ActionsContainer) -> None:
    """The job's shape, for export --format slurm and submit alike."""
    from ..export import SlurmJob

    slurm.add_argument("--nodes", type=int, default=SlurmJob.nodes, help="nodes (default 2)")
    slurm.add_argument(
        "--ntasks-per-node",
        type=int,
        default=SlurmJob.tasks_per_node,
        help="tasks on each node (default 1)",
    )
    slurm.add_argument("--time", help="the job's time limit, as sbatch takes it (e.g. 2:00:00)")
    slurm.add_argument("--partition", help="the partition to submit to")
    slurm.add_argument(
        "--port-base",
        type=int,
        default=SLURM_PORT_BASE,
        help=f"each node's first task port (default {SLURM_PORT_BASE})",
    )


def add_submit_command(commands: argparse._SubParsersAction) -> None:
    submit = commands.add_parser(
        "submit",
        help="submit the project's cluster as a Slurm batch job (sbatch) and, with --wait, "
        "follow it here",
    )
    source = submit.add_mutually_exclusive_group(required=True)
    source.add_argument("project", nargs="?", type=Path, help="project JSON file")
    source.add_argument(
        "--resume",
        metavar="RUN_DIR",
        type=Path,
        help="submit a new job that continues a stopped or failed run, from its checkpoint",
    )
    source.add_argument(
        "--follow", metavar="RUN_DIR", type=Path, help="follow the job that runs RUN_DIR"
    )
    submit.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="the job's folder, on a file system every node shares: the script, the project, "
        "the job's output and runs/<job id>/",
    )
    add_slurm_job_arguments(submit)
    submit.add_argument(
        "--wait",
        action="store_true",
        help="follow the job to its end: its state, the chief's steps and evaluations; "
        "Ctrl-C stops it (scancel, every task saves a checkpoint), a second leaves it running",
    )
    submit.add_argument("--quiet", action="store_true", help="print only the summary")
    submit.add_argument(
        "--verbose", action="store_true", help="also print the chief's log output (to stderr)"
    )


def _volume_name(text: str) -> str:
    from ..export_storage import volume_name_problem

    problem = volume_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def command_cluster(args: argparse.Namespace) -> int:
    if args.resume is not None:
        return command_cluster_resume(args)
    if args.dump is not None:
        return command_cluster_dump(args.dump)
    if args.dump_task is not None:
        from ..stack_dumps import ask_task_folder

        print(json.dumps(ask_task_folder(args.dump_task)))
        return EXIT_OK
    project = _load(args.project)
    if project is None or not announce_custom_code(project, args.project.parent):
        return EXIT_FAILED
    if args.workers is not None and args.workers < 1:
        _err("distloop: --workers must be at least 1")
        return EXIT_USAGE
    try:
        tasks = len(local_cluster_tasks(project, args.workers))
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    if not _may_start_here(project, str(args.project), processes=tasks):
        return EXIT_FAILED
    made = _make_run_folder(args.out, project.name)
    if made is None:
        return EXIT_FAILED
    run_dir, created = made
    lock = _claim_new_run_folder(run_dir, overwrite=args.overwrite, command="cluster")
    if lock is None:
        return EXIT_FAILED
    try:
        cluster = open_run(
            project, run_dir, layout="cluster", workers=args.workers, folder_lock=lock
        )
    except ProblemsError as exc:
        lock.release()
        if created:  # it holds nothing but the lock file
            shutil.rmtree(run_dir, ignore_errors=True)
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    return follow_restarting(
        cluster,
        run_dir,
        args,
        lambda lock: open_run(project, run_dir, resume=True, layout="cluster", folder_lock=lock),
    )


def command_cluster_dump(run_dir: Path) -> int:
    """``distloop cluster --dump DIR``: where each task of the running cluster stands, a
    local cluster's or a submitted Slurm job's."""
    from ..stack_dumps import ask_for_stacks, diagnose

    status = read_status(run_dir)
    if "slurm" in status:
        return _dump_slurm_job(run_dir)
    tasks = status.get("tasks")
    if status.get("status") != "running" or not isinstance(tasks, dict):
        _err(f"distloop: {run_dir} holds no running cluster (its status.json lists no tasks)")
        return EXIT_FAILED
    if status.get("host") not in (None, socket.gethostname()):
        _err(f"distloop: the cluster runs on {status['host']}: run --dump there")
        return EXIT_FAILED
    if isinstance(status.get("launch"), dict):
        return _dump_launch(run_dir, status["launch"])
    found = {
        name: (info["pid"], run_dir / info["run_dir"])
        for name, info in tasks.items()
        if isinstance(info, dict)
        and isinstance(info.get("pid"), int)
        and isinstance(info.get("run_dir"), str)
        and not Path(info["run_dir"]).is_absolute()
        and ".." not in Path(info["run_dir"]).parts
    }
    stacks = ask_for_stacks(found)
    for line in diagnose(stacks):
        print(line)
    _err(f"distloop: each task's stacks: {run_dir / TASKS_DIR}/*/stacks.txt")
    return EXIT_OK


def _dump_launch(run_dir: Path, settings: dict[str, str | None]) -> int:
    """The dump of a launch: its tasks are on their hosts (the pids in its status.json are
    its ssh clients'), so each host is asked over ssh, as the launcher itself does."""
    from ..stack_dumps import diagnose

    project = _load(run_dir / PROJECT_FILE)
    if project is None:
        return EXIT_FAILED
    hosts = SshLaunch.from_settings(settings, project)
    announce_launch(project, hosts)
    try:
        config = hosts.tf_config(project)
        stacks = hosts.ask_for_stacks(config, config.tasks())
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    finally:
        hosts.close()
    for line in diagnose(stacks):
        print(line)
    _err("distloop: each task's stacks: " + ", ".join(s.file for s in stacks if s.file))
    return EXIT_OK


def _dump_slurm_job(run_dir: Path) -> int:
    """The dump of a job ``distloop submit`` submitted: scancel signals its tasks."""
    from ..cluster.slurm_jobs import SlurmJobError, dump_job_stacks, follow_job, job_state

    try:
        job_id = follow_job(run_dir).job_id
        state = job_state(job_id)
        if state.state != "RUNNING":
            raise SlurmJobError(f"job {job_id} is {state}, not running: no stacks to ask for")
        lines = dump_job_stacks(run_dir, job_id)
    except SlurmJobError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    for line in lines:
        print(line)
    _err(f"distloop: each task's stacks: {run_dir / TASKS_DIR}/*/stacks.txt")
    return EXIT_OK


def command_cluster_resume(args: argparse.Namespace) -> int:
    """``distloop cluster --resume DIR``: the same tasks, each in its own folder."""
    run_dir: Path = args.resume
    if args.out is not None or args.workers is not None or args.overwrite:
        _err(
            "distloop: --resume continues the cluster's tasks in its folder; "
            "drop --out/--workers/--overwrite"
        )
        return EXIT_USAGE
    run = _resumable(run_dir, Layout.CLUSTER)
    if isinstance(run, int):
        return run
    project = run.project
    lock = _claim_run_to_resume(run_dir)
    if lock is None:
        return EXIT_FAILED

    def reopen(lock: RunFolderLock) -> EngineHandle:
        return open_run(project, run_dir, resume=True, layout="cluster", folder_lock=lock)

    try:
        cluster = reopen(lock)
    except ProblemsError as exc:
        lock.release()
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    return follow_restarting(cluster, run_dir, args, reopen)


def command_launch(args: argparse.Namespace) -> int:
    """``distloop launch``: the project's cluster on its hosts, over SSH, followed here."""
    if args.resume is not None:
        return command_launch_resume(args)
    project = _load(args.project)
    if project is None or not announce_custom_code(project, args.project.parent):
        return EXIT_FAILED
    made = _make_run_folder(args.out, project.name)
    if made is None:
        return EXIT_FAILED
    run_dir, created = made
    hosts = SshLaunch(
        run_name=run_dir.name,
        ssh_config=args.ssh_config,
        remote_command=args.remote_command,
        remote_dir=args.remote_dir,
        hosts=launch_hosts(project),
    )
    announce_launch(project, hosts)
    if not args.no_preflight and _report_preflight(project, hosts, devices=False) != EXIT_OK:
        hosts.close()
        if created:
            shutil.rmtree(run_dir, ignore_errors=True)
        return EXIT_FAILED
    lock = _claim_new_run_folder(run_dir, overwrite=args.overwrite, command="launch")
    if lock is None:
        hosts.close()
        return EXIT_FAILED
    try:
        cluster = open_run(project, run_dir, layout="cluster", folder_lock=lock, hosts=hosts)
    except ProblemsError as exc:
        lock.release()
        hosts.close()
        if created:
            shutil.rmtree(run_dir, ignore_errors=True)
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    update_status(run_dir, launch=hosts.settings())
    return _follow_on_hosts(project, run_dir, hosts, cluster, args)


def command_launch_resume(args: argparse.Namespace) -> int:
    """``distloop launch --resume DIR``: every task again on its host, from the chief's
    last checkpoint (copied to the other trainers' hosts first)."""
    run_dir: Path = args.resume
    if args.out is not None or args.overwrite:
        _err("distloop: --resume continues the run in its own folder; drop --out/--overwrite")
        return EXIT_USAGE
    run = _resumable(run_dir, Layout.LAUNCH)
    if isinstance(run, int):
        return run
    if run.launch is None:
        return EXIT_FAILED
    project, settings = run.project, run.launch
    hosts = SshLaunch.from_settings(settings, project)
    announce_launch(project, hosts)
    lock = _claim_run_to_resume(run_dir)
    if lock is None:
        hosts.close()
        return EXIT_FAILED
    try:
        cluster = open_run(
            project, run_dir, resume=True, layout="cluster", folder_lock=lock, hosts=hosts
        )
    except ProblemsError as exc:
        lock.release()
        hosts.close()
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    return _follow_on_hosts(project, run_dir, hosts, cluster, args)


def _follow_on_hosts(
    project: Project,
    run_dir: Path,
    hosts: SshLaunch,
    cluster: EngineHandle,
    args: argparse.Namespace,
) -> int:
    """Follows (and restarts) the cluster on its hosts, then copies the chief's folder here."""

    def reopen(lock: RunFolderLock) -> EngineHandle:
        return open_run(
            project, run_dir, resume=True, layout="cluster", folder_lock=lock, hosts=hosts
        )

    try:
        code = follow_restarting(cluster, run_dir, args, reopen)
        try:
            _err(f"distloop: {hosts.bring_back(project, run_dir)}")
        except OSError as exc:
            _err(f"distloop: {exc}")
    finally:
        hosts.close()
    return code


def command_preflight(args: argparse.Namespace) -> int:
    from ..cluster.preflight import probe_main

    if args.probe or args.listen is not None or args.connect:
        return probe_main(args)
    if args.project is None:
        _err("distloop: preflight needs the project file")
        return EXIT_USAGE
    project = _load(args.project)
    if project is None:
        return EXIT_FAILED
    hosts = SshLaunch(
        run_name="preflight",
        ssh_config=args.ssh_config,
        remote_command=args.remote_command,
        remote_dir=args.remote_dir,
        hosts=launch_hosts(project),
    )
    announce_launch(project, hosts)
    try:
        return _report_preflight(project, hosts, devices=True)
    finally:
        hosts.close()


def _report_preflight(project: Project, hosts: SshLaunch, *, devices: bool) -> int:
    """Prints one line per finding; EXIT_OK when there is none. ``devices``: count each
    host's devices too (TensorFlow started on every host); a launch compares its tasks'
    own instead, as they start."""
    from ..cluster.preflight import preflight

    try:
        config = hosts.tf_config(project)
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    findings = preflight(project, config, hosts, devices=devices)
    for finding in findings:
        _err(f"distloop: preflight: {finding}")
    if findings:
        return EXIT_FAILED
    hosts_count = len({a.rsplit(":", 1)[0] for job in config.cluster.values() for a in job})
    mirrored = project.strategy.kind == "multi_worker_mirrored"
    later = mirrored and not devices
    _err(
        f"distloop: preflight: {hosts_count} host(s), {len(config.tasks())} task(s) ready: "
        f"ssh, versions, {'devices, ' if devices and mirrored else ''}data, free ports and "
        "every pair of tasks checked"
        + (" (the workers' devices are compared as their tasks start)" if later else "")
    )
    return EXIT_OK


RESTARTABLE = frozenset({"EngineDied", "ConnectionLost", "TaskEnded", STALLED, *PEER_ERRORS})
"""How a task fails when its process, host or network goes away, not its project: worth a
restart from the last checkpoint (a NaN loss or bad data would only fail again)."""


def follow_restarting(
    cluster: EngineHandle,
    run_dir: Path,
    args: argparse.Namespace,
    reopen: Callable[[RunFolderLock], EngineHandle],
) -> int:
    """Follows the cluster; after a task died or was preempted, ``--max-restarts`` times
    starts the whole cluster again from its last checkpoint (``reopen``), as torchrun does.

    A stop asked for here (Ctrl-C) is no preemption: it ends the run.
    """
    restarts = 0
    while True:
        code = follow_cluster(cluster, run_dir, args)
        status = read_status(run_dir)
        died = code == EXIT_FAILED and status.get("error_type") in RESTARTABLE
        preempted = code == EXIT_OK and status.get("status") == "stopped"
        if restarts >= args.max_restarts or not (died or preempted):
            return code
        restarts += 1
        why = f"{status.get('task') or 'a task'} failed" if died else "a task was preempted"
        _err(
            f"distloop: {why}: restart {restarts} of {args.max_restarts}, the whole cluster "
            "from its last checkpoint"
        )
        lock = _claim_run_to_resume(run_dir)
        if lock is None:
            return code
        try:
            cluster = reopen(lock)
        except ProblemsError as exc:
            lock.release()
            _err(f"distloop: cannot restart: {exc}")
            return code
        update_status(run_dir, restarts=restarts)


def follow_cluster(cluster: EngineHandle, run_dir: Path, args: argparse.Namespace) -> int:
    if isinstance(cluster, ClusterHandle):
        for task in cluster.tasks():
            _err(f"distloop: {task.name} at {task.address}, folder {task.run_dir}")
    return follow(cluster, run_dir, quiet=args.quiet, verbose=args.verbose)


def command_export(args: argparse.Namespace) -> int:
    from ..export import SECURITY_NOTE, SlurmJob, export_cluster
    from ..export_storage import VOLUME_FORMATS, storage_notes
    from ..tf_config import parse_tf_config_text

    project = _load(args.project)
    if project is None:
        return EXIT_FAILED
    volumes = {"--runs-volume": args.runs_volume, "--data-volume": args.data_volume}
    given = [flag for flag, claim in volumes.items() if claim is not None]
    if given and args.format not in VOLUME_FORMATS:
        _err(f"distloop: {' and '.join(given)} apply to --format {' and '.join(VOLUME_FORMATS)}")
        return EXIT_USAGE
    if args.format == "script":
        return export_script(project, args.out)
    try:
        tf_config = None
        if args.tf_config is not None:
            tf_config = parse_tf_config_text(args.tf_config.read_text(encoding="utf-8"))
        slurm = SlurmJob(
            nodes=args.nodes,
            tasks_per_node=args.ntasks_per_node,
            time=args.time,
            partition=args.partition,
            port_base=args.port_base,
        )
        files = export_cluster(
            project,
            args.out,
            args.format,
            tf_config=tf_config,
            image=args.image,
            base_dir=args.project.parent,
            runs_volume=args.runs_volume,
            data_volume=args.data_volume,
            slurm=slurm,
        )
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    except (OSError, UnicodeDecodeError) as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    for path in files:
        print(path)
    notes = storage_notes(
        project,
        args.format,
        base_dir=args.project.parent,
        runs_volume=args.runs_volume,
        data_volume=args.data_volume,
    )
    for note in notes:
        _err(f"distloop: warning: {note}")
    _err(f"distloop: {SECURITY_NOTE}")
    return EXIT_OK


def command_submit(args: argparse.Namespace) -> int:
    """``distloop submit``: sbatch the project's cluster, or a resume; ``--wait`` follows it."""
    from ..cluster.slurm_jobs import SlurmJobError, follow_job, resubmit_job, submit_job
    from ..export import SlurmJob

    try:
        if args.project is not None:
            if args.out is None:
                _err("distloop: submit needs --out DIR, the job's folder on the shared file system")
                return EXIT_USAGE
            project = _load(args.project)
            if project is None or not announce_custom_code(project, args.project.parent):
                return EXIT_FAILED
            job = SlurmJob(
                nodes=args.nodes,
                tasks_per_node=args.ntasks_per_node,
                time=args.time,
                partition=args.partition,
                port_base=args.port_base,
            )
            run = submit_job(project, args.out, job, base_dir=args.project.parent)
        elif args.out is not None:
            _err("distloop: --resume and --follow keep the job's folder; drop --out")
            return EXIT_USAGE
        elif args.resume is not None:
            run = resubmit_job(args.resume)
        else:
            run = follow_job(args.follow)
    except (ProblemsError, SlurmJobError) as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    except OSError as exc:
        _err(f"distloop: cannot write the job's folder: {exc.strerror or exc}")
        return EXIT_FAILED
    if args.follow is None:
        print(f"submitted job {run.job_id}, run folder {run.run_dir}", flush=True)
    if not (args.wait or args.follow):
        _err(f"distloop: follow it with: distloop submit --follow {run.run_dir}")
        return EXIT_OK
    run.on_state = lambda state: _err(f"distloop: job {run.job_id}: {state}")
    code = follow(
        run,
        run.run_dir,
        quiet=args.quiet,
        verbose=args.verbose,
        stopping=(
            f"cancelling job {run.job_id} (scancel): every task stops at one step with a "
            "checkpoint",
            "to leave the job to Slurm",
            "no longer following the job",
        ),
    )
    if run.detached:
        _err(
            f"distloop: no longer following job {run.job_id}, which Slurm goes on with: "
            f"follow it with distloop submit --follow {run.run_dir}, cancel it with "
            f"scancel {run.job_id}"
        )
        return EXIT_INTERRUPTED
    return code


def export_script(project: Project, out: Path) -> int:
    """``distloop export --format script``: the run as a standalone TensorFlow program."""
    from ..fileio import atomic_write_text
    from ..script_export import ExportError, render_script

    try:
        atomic_write_text(out, render_script(project))
    except ExportError as exc:
        _err(f"distloop: cannot export {project.name!r} as a script: {exc}")
        return EXIT_FAILED
    except OSError as exc:
        _err(f"distloop: cannot write {out}: {exc.strerror or exc}")
        return EXIT_FAILED
    print(out)
    return EXIT_OK

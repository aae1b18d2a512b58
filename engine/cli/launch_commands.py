"""``distloop launch`` and ``distloop preflight``: the project's cluster on the hosts
its TF_CONFIG names, checked and started over SSH (``engine.cluster.ssh``) and followed
here."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cluster.ssh import DEFAULT_REMOTE_DIR, SshLaunch, launch_hosts
from ..code_text import printable
from ..config import Project
from ..config.launch import LaunchSettings
from ..problems import ProblemsError
from ..resume_rules import Layout
from ..run_folder import new_run_dir, update_status
from ..run_start import OpenedRun, RunRequest, open_requested, resumable
from .arguments import (
    add_max_restarts_argument,
    add_overwrite_argument,
    add_trust_launch_argument,
)
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, _err, _load, announce_custom_code
from .following import follow_restarting
from .mlflow_command import add_live_arguments


def add_launch_commands(commands: argparse._SubParsersAction) -> None:
    """``distloop launch`` and ``distloop preflight``'s parsers (the latter's hidden
    options are the host's side of the check, run over ssh by the check itself)."""
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
    add_live_arguments(launch)
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
    add_trust_launch_argument(launch)
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
    hidden = argparse.SUPPRESS
    preflight.add_argument("--probe", action="store_true", help=hidden)
    preflight.add_argument("--path", action="append", default=[], help=hidden)
    preflight.add_argument("--port", action="append", type=int, default=[], help=hidden)
    preflight.add_argument("--folder", default=".", help=hidden)
    preflight.add_argument("--devices", action="store_true", help=hidden)
    preflight.add_argument("--listen", type=int, help=hidden)
    preflight.add_argument("--seconds", type=float, default=30.0, help=hidden)
    preflight.add_argument("--connect", nargs="+", help=hidden)
    launch.set_defaults(handler=command_launch)
    preflight.set_defaults(handler=command_preflight)


def announce_launch(project: Project, hosts: SshLaunch) -> None:
    """Says what a launch runs beyond Distloop itself (``SshLaunch.unusual``), before it
    runs: as with custom code, a project or run folder may come from anyone, and the
    command runs unattended, so the record is the answer."""
    for line in hosts.unusual(project):
        _err(f"distloop: {line}")


def made_here_or_trusted(
    project: Project, hosts: SshLaunch, settings: LaunchSettings, run_dir: Path, trusted: bool
) -> bool:
    """Whether what a launch folder runs (said just before, by :func:`announce_launch`) may
    run: the folder is this user's own from this machine (``SshLaunch.made_here``), or the
    user said ``--trust-launch``. A folder from anyone else could name an ssh
    configuration whose ProxyCommand runs here, so it does not run unasked."""
    if trusted or hosts.made_here(project, settings):
        return True
    _err(
        f"distloop: {printable(str(run_dir))} was launched by another user, on another machine or "
        "edited since, and runs what is said above: add --trust-launch to run it"
    )
    return False


def command_launch(args: argparse.Namespace) -> int:
    """``distloop launch``: the project's cluster on its hosts, over SSH, followed here."""
    if args.resume is not None:
        return command_launch_resume(args)
    project = _load(args.project)
    if project is None or not announce_custom_code(project, args.project.parent):
        return EXIT_FAILED
    try:
        run_dir = args.out or new_run_dir(project.name)
    except OSError as exc:
        _err(f"distloop: cannot create the run folder: {exc}")
        return EXIT_FAILED
    hosts = SshLaunch(
        run_name=run_dir.name,
        ssh_config=args.ssh_config,
        remote_command=args.remote_command,
        remote_dir=args.remote_dir,
        hosts=launch_hosts(project),
    )
    try:
        announce_launch(project, hosts)
        if not args.no_preflight and _report_preflight(project, hosts, devices=False) != EXIT_OK:
            return EXIT_FAILED
        request = RunRequest(
            project,
            run_dir,
            overwrite=args.overwrite,
            command="launch",
            layout="cluster",
            placement=hosts,
        )
        opened = open_requested(request)
        update_status(run_dir, launch=hosts.settings(project))
        return _follow_on_hosts(project, opened, hosts, args, request)
    finally:
        hosts.close()


def command_launch_resume(args: argparse.Namespace) -> int:
    """``distloop launch --resume DIR``: every task again on its host, from the chief's
    last checkpoint (copied to the other trainers' hosts first)."""
    run_dir: Path = args.resume
    if args.out is not None or args.overwrite:
        _err("distloop: --resume continues the run in its own folder; drop --out/--overwrite")
        return EXIT_USAGE
    run = resumable(run_dir, Layout.LAUNCH)
    if not announce_custom_code(run.project, None) or run.launch is None:
        return EXIT_FAILED
    project, settings = run.project, run.launch
    hosts = SshLaunch.from_settings(settings, project)
    try:
        announce_launch(project, hosts)
        if not made_here_or_trusted(project, hosts, settings, run_dir, args.trust_launch):
            return EXIT_FAILED
        request = RunRequest(project, run_dir, resume=True, layout="cluster", placement=hosts)
        return _follow_on_hosts(project, open_requested(request), hosts, args, request)
    finally:
        hosts.close()


def _follow_on_hosts(
    project: Project,
    opened: OpenedRun,
    hosts: SshLaunch,
    args: argparse.Namespace,
    request: RunRequest,
) -> int:
    """Follows (and restarts) the cluster on its hosts, then copies the chief's folder here."""
    code = follow_restarting(opened, args, request)
    try:
        _err(f"distloop: {hosts.bring_back(project, opened.folder)}")
    except OSError as exc:
        _err(f"distloop: {exc}")
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

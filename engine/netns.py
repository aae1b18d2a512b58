"""A private network for a local cluster's tasks (Linux; TensorFlow-free).

TensorFlow's gRPC servers are unauthenticated and listen on every network
interface whatever host TF_CONFIG names. A cluster that runs on one machine needs
no network but loopback, so :class:`engine.cluster.LocalCluster` puts all its
tasks into one new network namespace whose only interface is its own ``lo``:
their ports then exist there and nowhere else, not even on the host's loopback.

The tasks are ``spawn``-ed engine processes that talk to their parent through
pipes, which a network namespace does not affect. The namespace is made by a
small holder process (``unshare --net``, with ``--user --map-root-user`` when not
root, as unprivileged users need their own user namespace to own a network one).
The tasks start inside it: while the cluster starts them, multiprocessing's
``spawn`` runs a small launcher instead of Python, which joins the holder's
namespaces with ``setns`` and then replaces itself with Python. Joining a user
namespace needs a single-threaded process, which a spawned child no longer is by
the time its target runs (unpickling its arguments imports numpy, whose BLAS
starts threads); the launcher still is. The holder exits when the cluster ends,
or when its parent dies (its stdin closes).

Where the kernel or a sandbox does not allow it (no ``unshare`` command, user
namespaces disabled, ``setns`` refused), :func:`start_private_network` raises
:class:`PrivateNetworkUnavailable` with the reason, and the cluster falls back to
the host's network with a warning. ``DISTLOOP_PRIVATE_NETWORK=0`` asks for that
fallback on purpose (e.g. to reach a task's port from outside with a debugger).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ENV_SWITCH = "DISTLOOP_PRIVATE_NETWORK"
FOLDER_PREFIX = "distloop-netns-"
"""The launcher's folder in the temporary folder: ``distloop-netns-<pid of its maker>-<random>``."""
READY = "ready"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

# The holder: brings its namespace's loopback up (SIOCGIFFLAGS/SIOCSIFFLAGS on "lo",
# adding IFF_UP), says it is ready, then lives until its stdin closes. Standard
# library only, run with -I -S: it must start fast and need nothing from the project.
HOLDER_SCRIPT = """\
import fcntl, signal, socket, struct, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0))[:18])[1]
    fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))
sys.stdout.write("ready\\n")
sys.stdout.flush()
sys.stdin.read()
"""


class PrivateNetworkUnavailable(Exception):
    """This machine does not let the cluster have a private network; the message says why."""


class PrivateNetwork:
    """The holder process of a network namespace, and the launcher that starts tasks in it."""

    def __init__(self, process: subprocess.Popen[str], folder: Path) -> None:
        self._process = process
        self._folder = folder
        self.launcher = folder / "python-in-namespace"

    @property
    def pid(self) -> int:
        return self._process.pid

    @contextlib.contextmanager
    def spawning(self) -> Iterator[None]:
        """Every process multiprocessing spawns meanwhile starts inside the namespace.

        multiprocessing has one spawn executable for the whole program, so this is
        for the moment the cluster starts its tasks, from the thread that starts them.
        """
        from multiprocessing import resource_tracker, spawn

        # It serves every later process too: it must not be started inside.
        resource_tracker.ensure_running()
        previous = spawn.get_executable()
        spawn.set_executable(str(self.launcher))
        try:
            yield
        finally:
            spawn.set_executable(previous)

    def close(self) -> None:
        """Ends the holder. Tasks still inside keep the namespace alive until they end."""
        process = self._process
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        shutil.rmtree(self._folder, ignore_errors=True)


def start_private_network(*, user_namespace: bool | None = None) -> PrivateNetwork:
    """Starts a holder in a new network namespace with loopback up, checked joinable.

    ``user_namespace`` (default: only when not root) also makes a user namespace
    for the network one to belong to.
    """
    if os.environ.get(ENV_SWITCH, "1") == "0":
        raise PrivateNetworkUnavailable(f"{ENV_SWITCH}=0 is set")
    if not sys.platform.startswith("linux"):
        raise PrivateNetworkUnavailable("network namespaces exist on Linux only")
    if user_namespace is None:
        user_namespace = os.geteuid() != 0
    options = ["--user", "--map-root-user", "--net"] if user_namespace else ["--net"]
    command = ["unshare", *options, "--", sys.executable, "-I", "-S", "-c", HOLDER_SCRIPT]
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except OSError as exc:
        raise PrivateNetworkUnavailable(f"cannot run unshare: {exc.strerror or exc}") from None
    remove_stale_folders()
    folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))
    network = PrivateNetwork(process, folder)
    try:
        _wait_ready(process)
        _write_launcher(network)
        _check_launcher(network)
    except PrivateNetworkUnavailable:
        network.close()
        raise
    return network


def remove_stale_folders() -> None:
    """Removes the launcher folders of clusters whose launching process is gone.

    A launcher killed by SIGKILL never removes its folder (``distloop-netns-<pid>-*`` in
    the temporary folder). Only this user's folders are touched, and only when the
    process named in the name no longer exists.
    """
    pattern = re.compile(rf"{FOLDER_PREFIX}(\d+)-\w+")
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        with contextlib.suppress(OSError):
            if entry.stat(follow_symlinks=False).st_uid == os.getuid() and not _alive(
                int(match.group(1))
            ):
                shutil.rmtree(entry.path)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (``engine.run_history`` asks the same; this module runs
    as the launcher script too, alone, so it imports nothing of the engine)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:  # it exists, under another user
        return True
    return True


def _wait_ready(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None and process.stderr is not None
    readable, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
    line = process.stdout.readline() if readable else ""
    if line.strip() == READY:
        return
    if not readable:
        process.kill()
        raise PrivateNetworkUnavailable(f"unshare did not start within {START_TIMEOUT_S:g} s")
    process.wait(STOP_TIMEOUT_S)
    said = process.stderr.read().strip().splitlines()
    raise PrivateNetworkUnavailable(
        said[-1] if said else f"unshare exited with code {process.returncode}"
    )


def _write_launcher(network: PrivateNetwork) -> None:
    """A script that runs Python inside the namespace: this file joins, then execs Python."""
    python, here = shlex.quote(sys.executable), shlex.quote(str(Path(__file__).resolve()))
    network.launcher.write_text(
        f'#!/bin/sh\nexec {python} -I -S {here} {network.pid} {python} "$@"\n', encoding="utf-8"
    )
    network.launcher.chmod(0o700)


def _check_launcher(network: PrivateNetwork) -> None:
    """Starts Python once through the launcher, so a refusal shows here, not in a task.

    It fails where the kernel refuses ``setns``, or where the temporary folder does
    not allow running programs (mounted noexec).
    """
    try:
        probe = subprocess.run(
            [str(network.launcher), "-c", "pass"],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PrivateNetworkUnavailable(f"cannot start a process inside it: {exc}") from None
    if probe.returncode != 0:
        said = probe.stderr.strip().splitlines()
        raise PrivateNetworkUnavailable(said[-1] if said else "joining the namespace failed")


def join(holder_pid: int) -> None:
    """Moves this process into the holder's namespaces; it must have a single thread."""
    spaces = [("net", CLONE_NEWNET)]
    if os.stat(f"/proc/{holder_pid}/ns/user").st_ino != os.stat("/proc/self/ns/user").st_ino:
        spaces.insert(0, ("user", CLONE_NEWUSER))  # first: it grants the right to join the net
    libc = ctypes.CDLL(None, use_errno=True)
    # Both opened before either is joined: the holder's /proc entries are ours to open now.
    descriptors = [
        (name, flag, os.open(f"/proc/{holder_pid}/ns/{name}", os.O_RDONLY)) for name, flag in spaces
    ]
    try:
        for name, flag, fd in descriptors:
            if libc.setns(fd, flag) != 0:
                error = ctypes.get_errno()
                raise OSError(error, f"setns into the cluster's {name} namespace failed")
    finally:
        for _, _, fd in descriptors:
            os.close(fd)


if __name__ == "__main__":  # the launcher: join, then become the Python it was asked to run
    try:
        join(int(sys.argv[1]))
    except OSError as exc:
        sys.exit(f"distloop: {exc}")
    os.execv(sys.argv[2], sys.argv[2:])

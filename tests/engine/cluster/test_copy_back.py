"""The chief's run folder copied back from a host that may be hostile: only plain files
and folders inside the folder, bounded in bytes and time, each refusal one line naming
the host, nothing written outside and the folder here left as it was.

Streams come from real processes: a real sshd host whose answer to ``tar -cf -`` is an
attacker's archive (CVE-2025-4517's symlink chain), and subprocesses that write a tar
stream to a pipe, then stall or trickle.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from distloop.engine.cluster.copy_back import (
    CopyBackError,
    Limits,
    receive_run_folder,
    relay_checkpoints,
)
from distloop.engine.cluster.ssh import SshLaunch
from distloop.engine.tf_config import TFConfig
from support.ssh_hosts import SshHosts, ssh_hosts

KEY = b"ssh-ed25519 AAAAattacker\n"


def _member(
    tar: tarfile.TarFile, name: str, kind: bytes = tarfile.REGTYPE, **fields: object
) -> None:
    content = fields.pop("content", b"")
    assert isinstance(content, bytes)
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o777 if kind == tarfile.DIRTYPE else 0o644
    info.size = len(content) if kind == tarfile.REGTYPE else 0
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(content) if kind == tarfile.REGTYPE else None)


def _archive(*members: tuple, then_only: tarfile.TarInfo | None = None) -> bytes:
    """A tar stream of ``members``; with ``then_only``, that member's header ends it (its
    bytes never come)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, kind, fields in members:
            _member(tar, name, kind, **fields)
        if then_only is not None:
            return buffer.getvalue() + then_only.tobuf(tarfile.GNU_FORMAT, "utf-8", "strict")
    return buffer.getvalue()


def cve_2025_4517_archive(into: Path, ups: int) -> bytes:
    """CPython's regression test for CVE-2025-4517 (``test_realpath_limit_attack``), aimed
    ``ups`` folders above ``into``: a chain of links whose full expansion overflows
    PATH_MAX, so ``os.path.realpath`` stops resolving and ``filter="data"`` passes a link
    out, then a hard link through it that is overwritten with the attacker's key."""
    steps = "abcdefghijklmnop"
    component = "d" * ((os.pathconf("/", "PC_PATH_MAX") - len(str(into)) - 1) // (len(steps) + 1))
    members: list[tuple] = [("./", tarfile.DIRTYPE, {})]
    path = ""
    for step in steps:
        members.append((os.path.join(path, component), tarfile.DIRTYPE, {}))
        members.append((os.path.join(path, step), tarfile.SYMTYPE, {"linkname": component}))
        path = os.path.join(path, component)
    linkpath = os.path.join(*steps, "l" * 254)
    up = os.path.join(*[".."] * len(steps))
    members += [
        (linkpath, tarfile.SYMTYPE, {"linkname": up}),
        ("escape", tarfile.SYMTYPE, {"linkname": os.path.join(linkpath, *[".."] * ups)}),
        ("flaglink", tarfile.LNKTYPE, {"linkname": "escape/authorized_keys"}),
        ("flaglink", tarfile.REGTYPE, {"content": KEY}),
        ("escape/newfile", tarfile.REGTYPE, {"content": b"new\n"}),
    ]
    return _archive(*members)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHosts]:
    with ssh_hosts(tmp_path_factory.mktemp("hosts"), 1) as made:
        yield made


def _answer_with(hosts: SshHosts, stream: Path, then: str = "") -> None:
    """The host answers every ssh command with ``stream``'s bytes (its sshd's forced
    command), as a host whose tar, or whose owner, is hostile; then runs ``then``."""
    keys = hosts.ssh_config.parent / "authorized_keys"
    key = (hosts.ssh_config.parent / "client_key.pub").read_text().strip()
    keys.write_text(f'command="cat {stream}{"; " + then if then else ""}" {key}\n')


@pytest.mark.sshd
def test_a_host_slow_to_exit_after_a_whole_archive_is_a_copy_that_went_well(
    host: SshHosts, tmp_path: Path
) -> None:
    """The end marker comes before tar's padding and before ssh exits: on a busy machine
    the copy read as failed ("copying ... back failed", seen in CI) because ssh was stopped
    the moment the marker arrived. The rest is read and ssh's own exit awaited."""
    stream = tmp_path / "run.tar"
    stream.write_bytes(_archive(("metrics.csv", tarfile.REGTYPE, {"content": b"step\n"})))
    _answer_with(host, stream, then="sleep 2")
    into = tmp_path / "home" / "run" / "tasks" / "worker-0"
    into.parent.mkdir(parents=True)
    _fetch(host, into)
    assert (into / "metrics.csv").read_bytes() == b"step\n"


@pytest.mark.sshd
def test_a_host_that_keeps_sending_after_the_archive_s_end_is_refused(
    host: SshHosts, tmp_path: Path
) -> None:
    stream = tmp_path / "run.tar"
    stream.write_bytes(_archive(("metrics.csv", tarfile.REGTYPE, {"content": b"step\n"})))
    _answer_with(host, stream, then="cat /dev/zero")
    into = tmp_path / "home" / "run" / "tasks" / "worker-0"
    into.parent.mkdir(parents=True)
    with pytest.raises(OSError) as refused:
        _fetch(host, into)
    assert str(refused.value) == (
        f"{host.addresses[0]}: refused: it kept sending after the archive's end"
    )
    assert not into.exists()
    assert sorted(p.name for p in into.parent.parent.iterdir()) == ["tasks"]


def _fetch(host: SshHosts, into: Path, limits: Limits | None = None) -> None:
    config = TFConfig.model_validate(
        {"cluster": {"worker": [f"{host.addresses[0]}:2222"]}, "task": {"type": "worker"}}
    )
    launch = SshLaunch(run_name="run", ssh_config=host.ssh_config)
    try:
        launch.fetch(config, config.chief_task(), into, limits)
    finally:
        launch.close()


@pytest.mark.sshd
def test_a_host_s_symlink_chain_past_path_max_writes_nothing_outside(
    host: SshHosts, tmp_path: Path
) -> None:
    """The attack that got past ``filter="data"`` on Python 3.11.7 and put a key into a
    file three folders above the chief's folder, through a real ssh to a real sshd."""
    home = tmp_path / "home"
    run_dir = home / "run"
    into = run_dir / "tasks" / "worker-0"
    into.mkdir(parents=True)
    (into / "metrics.csv").write_text("step,loss\n1,0.5\n")
    (home / "authorized_keys").write_text("mine\n")
    stream = tmp_path / "hostile.tar"
    stream.write_bytes(cve_2025_4517_archive(into, ups=3))
    _answer_with(host, stream)
    with pytest.raises(OSError) as refused:
        _fetch(host, into)
    assert str(refused.value) == (
        f"{host.addresses[0]}: refused: a is a symbolic link, and a run folder holds only "
        "files and folders"
    )
    assert (home / "authorized_keys").read_text() == "mine\n"
    assert sorted(p.name for p in home.iterdir()) == ["authorized_keys", "run"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["tasks"]
    assert [p.name for p in into.iterdir()] == ["metrics.csv"]


def _sender(data: bytes, then: str = "") -> subprocess.Popen[bytes]:
    """A process that writes ``data`` to its stdout, then runs ``then`` (Python)."""
    script = "import sys, time\nsys.stdout.buffer.write(sys.stdin.buffer.read())\n"
    script += f"sys.stdout.buffer.flush()\n{then}\n"
    sender = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert sender.stdin is not None
    sender.stdin.write(data)
    sender.stdin.close()
    return sender


def _receive(data: bytes, into: Path, then: str = "", limits: Limits | None = None) -> None:
    sender = _sender(data, then)
    assert sender.stdout is not None
    try:
        receive_run_folder(sender.stdout, into, into.parent.parent, limits)
    finally:
        sender.kill()
        sender.wait()
        sender.stdout.close()


def _run_dir(tmp_path: Path) -> Path:
    into = tmp_path / "home" / "run" / "tasks" / "chief-0"
    into.mkdir(parents=True)
    (into / "status.json").write_text('{"status": "stopped"}\n')
    return into


def _untouched(tmp_path: Path, into: Path) -> None:
    home = tmp_path / "home"
    assert [p.relative_to(home).as_posix() for p in sorted(home.rglob("*"))] == [
        "run",
        "run/tasks",
        "run/tasks/chief-0",
        "run/tasks/chief-0/status.json",
    ]
    assert (into / "status.json").read_text() == '{"status": "stopped"}\n'


REFUSED = {
    "absolute": (("/tmp/x", tarfile.REGTYPE, {"content": b"x"}),),
    "up": (("../../../escaped", tarfile.REGTYPE, {"content": b"x"}),),
    "up inside": (("checkpoints/../../escaped", tarfile.REGTYPE, {"content": b"x"}),),
    "symlink": (("model.keras", tarfile.SYMTYPE, {"linkname": "/etc/passwd"}),),
    "hard link": (("engine.log", tarfile.LNKTYPE, {"linkname": "../../../authorized_keys"}),),
    "character device": (("metrics.csv", tarfile.CHRTYPE, {"devmajor": 1, "devminor": 3}),),
    "block device": (("metrics.csv", tarfile.BLKTYPE, {"devmajor": 7, "devminor": 0}),),
    "fifo": (("status.json", tarfile.FIFOTYPE, {}),),
    "line break": (("engine.log\n\x1b[2Jdistloop: all fine", tarfile.REGTYPE, {}),),
    "twice": (
        ("metrics.csv", tarfile.REGTYPE, {"content": b"a"}),
        ("metrics.csv", tarfile.REGTYPE, {"content": b"b"}),
    ),
    "file then folder": (
        ("checkpoints", tarfile.REGTYPE, {"content": b"a"}),
        ("checkpoints/ckpt-1.index", tarfile.REGTYPE, {"content": b"b"}),
    ),
}
TERABYTE = tarfile.TarInfo("checkpoints/ckpt-1.data-00000-of-00001")
TERABYTE.size = 1 << 40
PAX_TERABYTE = tarfile.TarInfo("././@PaxHeader")
PAX_TERABYTE.type, PAX_TERABYTE.size = tarfile.XHDTYPE, 1 << 40
LONG_NAME = tarfile.TarInfo("././@LongLink")
LONG_NAME.type, LONG_NAME.size = tarfile.GNUTYPE_LONGNAME, 1 << 30
HEADERS_ONLY = {
    "declares a terabyte, then stalls": TERABYTE,
    "a pax header of a terabyte, then stalls": PAX_TERABYTE,
    "a long name of a gigabyte, then stalls": LONG_NAME,
}


@pytest.mark.parametrize("case", [*sorted(REFUSED), *sorted(HEADERS_ONLY)])
def test_a_stream_with_anything_but_plain_files_and_folders_inside_is_refused(
    case: str, tmp_path: Path
) -> None:
    """Each refused at its header, before it is written (the terabyte without waiting for
    the bytes that never come: the sender sleeps); the folder here is left as it was."""
    into = _run_dir(tmp_path)
    good = (("./", tarfile.DIRTYPE, {}), ("project.json", tarfile.REGTYPE, {"content": b"{}"}))
    data = _archive(*good, *REFUSED.get(case, ()), then_only=HEADERS_ONLY.get(case))
    with pytest.raises(CopyBackError) as refused:
        _receive(data, into, then="time.sleep(600)", limits=Limits(stall_s=30))
    said = str(refused.value)
    assert "\n" not in said and "\x1b" not in said
    assert "sent nothing" not in said  # refused at its header, not after waiting
    _untouched(tmp_path, into)


def test_a_stream_that_stalls_midway_ends_after_the_stall_limit(tmp_path: Path) -> None:
    """A member of 1 MiB of which 64 KiB come, then nothing: the copy ends, one line."""
    into = _run_dir(tmp_path)
    data = _archive(("model.keras", tarfile.REGTYPE, {"content": b"\0" * (1 << 20)}))
    with pytest.raises(CopyBackError, match=r"^it sent nothing for 2 s$"):
        _receive(data[: 64 * 1024], into, "time.sleep(600)", Limits(stall_s=2))
    _untouched(tmp_path, into)


def test_a_stream_that_trickles_ends_below_the_least_rate(tmp_path: Path) -> None:
    """A byte every 50 ms never stalls, and is still refused: too slow to ever end."""
    into = _run_dir(tmp_path)
    data = _archive(("model.keras", tarfile.REGTYPE, {"content": b"\0" * (1 << 20)}))
    trickle = (
        f"for byte in {data[512:4096]!r}:\n"
        "    sys.stdout.buffer.write(bytes([byte])); sys.stdout.buffer.flush(); time.sleep(0.05)"
    )
    with pytest.raises(CopyBackError, match=r"slower than 1\.0 MiB/s$"):
        _receive(data[:512], into, trickle, Limits(stall_s=1, least_rate=1 << 20))
    _untouched(tmp_path, into)


def test_a_stream_larger_than_the_free_space_is_refused(tmp_path: Path) -> None:
    """The copy leaves the disk its reserve: here all but 1 MiB of it is reserved."""
    into = _run_dir(tmp_path)
    free = shutil.disk_usage(tmp_path).free
    data = _archive(("model.keras", tarfile.REGTYPE, {"content": b"\0" * (16 << 20)}))
    with pytest.raises(CopyBackError, match=r"there is room for$"):
        _receive(data, into, limits=Limits(free_space_kept=free - (1 << 20)))
    _untouched(tmp_path, into)


def test_a_real_tar_of_a_run_folder_of_ten_thousand_files_comes_back_whole(
    tmp_path: Path,
) -> None:
    """What GNU tar sends for a real folder (``tar -C DIR -cf - .``, as the host runs it)
    replaces the folder here exactly, bytes and layout."""
    source = tmp_path / "host" / "chief-0"
    for index in range(10_000):
        folder = source / "tensorboard" / f"part-{index // 1000}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"events.out.tfevents.{index}").write_bytes(index.to_bytes(4, "big") * 64)
    (source / "checkpoints").mkdir()
    (source / "checkpoints" / "ckpt-3.data-00000-of-00001").write_bytes(os.urandom(3 << 20))
    (source / "empty").mkdir()
    into = tmp_path / "home" / "run" / "tasks" / "chief-0"  # the launch's first copy back
    into.parent.parent.mkdir(parents=True)
    tar = subprocess.Popen(["tar", "-C", str(source), "-cf", "-", "."], stdout=subprocess.PIPE)
    assert tar.stdout is not None
    receive_run_folder(tar.stdout, into, into.parent.parent)
    assert tar.wait(timeout=60) == 0
    tar.stdout.close()

    def tree(root: Path) -> dict[str, bytes | None]:
        return {
            p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else None
            for p in root.rglob("*")
        }

    assert tree(into) == tree(source)
    assert sorted(p.name for p in into.parent.parent.iterdir()) == ["tasks"]


def _relay(data: bytes, target: Path) -> None:
    """``data`` from a real sender through :func:`relay_checkpoints` into a real ``tar -xf -``
    in ``target``, as a resume copies the chief's checkpoints from host to host."""
    sender = _sender(data)
    receiver = subprocess.Popen(["tar", "-C", str(target), "-xf", "-"], stdin=subprocess.PIPE)
    assert sender.stdout is not None and receiver.stdin is not None
    try:
        relay_checkpoints(sender.stdout, receiver.stdin)
    finally:
        receiver.stdin.close()
        receiver.wait(timeout=60)
        sender.kill()
        sender.wait()
        sender.stdout.close()


@pytest.mark.parametrize(
    "members",
    [
        (
            (
                "checkpoints/ckpt-1.index",
                tarfile.SYMTYPE,
                {"linkname": "/root/.ssh/authorized_keys"},
            ),
        ),
        (("checkpoints/../engine.log", tarfile.REGTYPE, {"content": b"x"}),),
        (("project.json", tarfile.REGTYPE, {"content": b"{}"}),),
        (("checkpoints/ckpt-1.index", tarfile.LNKTYPE, {"linkname": "/etc/passwd"}),),
    ],
    ids=["symlink", "up", "outside checkpoints", "hard link"],
)
def test_a_chief_host_s_checkpoints_reach_the_other_hosts_only_as_plain_files(
    members: tuple, tmp_path: Path
) -> None:
    target = tmp_path / "worker-1"
    target.mkdir()
    good = (
        ("checkpoints/", tarfile.DIRTYPE, {}),
        ("checkpoints/checkpoint", tarfile.REGTYPE, {"content": b"x"}),
    )
    with pytest.raises(CopyBackError):
        _relay(_archive(*good, *members), target)
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*")) in (
        [],
        ["checkpoints"],
        ["checkpoints", "checkpoints/checkpoint"],
    )

    source = tmp_path / "chief-0"
    (source / "checkpoints").mkdir(parents=True)
    for name in ("checkpoint", "ckpt-3.index", "ckpt-3.data-00000-of-00001"):
        (source / "checkpoints" / name).write_bytes(os.urandom(100_000))
    (source / "engine.log").write_text("not sent\n")
    tar = subprocess.run(
        ["tar", "-C", str(source), "-cf", "-", "checkpoints"], capture_output=True, check=True
    )
    _relay(tar.stdout, target)
    for name in ("checkpoint", "ckpt-3.index", "ckpt-3.data-00000-of-00001"):
        assert (target / "checkpoints" / name).read_bytes() == (
            source / "checkpoints" / name
        ).read_bytes()
    assert not (target / "engine.log").exists()

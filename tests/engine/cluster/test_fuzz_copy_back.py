"""Property-based tests of the tar stream a launch host sends back (the chief's folder):
whatever the stream holds (links, devices, names reaching out, members twice, headers
whose bytes never come, damaged bytes), the copy either refuses it in one line
(CopyBackError, or tarfile's own error for a stream that is no tar) leaving the folder
here as it was, or takes exactly its plain files and folders; nothing outside changes.

Streams go through a real pipe (a writer thread), as ssh's stdout does. Counts (reported
in docs/reliability.md): 300 generated streams, 200 damaged ones.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tarfile
import tempfile
import threading
from pathlib import Path

from distloop.engine.cluster.copy_back import CopyBackError, receive_run_folder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PLAIN = ("status.json", "metrics.csv", "checkpoints", "checkpoints/ckpt-1.index", "tensorboard/e")
HOSTILE_NAMES = (
    "/tmp/x", "../x", "../../home/authorized_keys", "checkpoints/../../x", "./../x", "a//b",
    "a/./b", ".", "./", "", "a\nb", "a\x1b[2Jb", "x" * 2000, "\u202eevil", "-rf",
)  # fmt: skip
KINDS = (
    tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE,
    tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE, tarfile.CONTTYPE,
)  # fmt: skip
NAMES = st.one_of(
    st.sampled_from(PLAIN),
    st.sampled_from(HOSTILE_NAMES),
    st.lists(st.sampled_from(["a", "b", "..", ".", "c d", "é"]), min_size=1, max_size=4).map(
        "/".join
    ),
    st.text(max_size=30),
)
MEMBER = st.tuples(
    NAMES,
    st.sampled_from(KINDS),
    st.binary(max_size=2000),
    st.sampled_from(["../../outside/keep.txt", "/etc/passwd", "status.json", "a"]),
)


def _stream(members: list[tuple[str, bytes, bytes, str]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, content, link in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            regular = kind in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE)
            info.size = len(content) if regular else 0
            info.linkname = link if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
            tar.addfile(info, io.BytesIO(content) if regular else None)
    return buffer.getvalue()


def _through_a_pipe(data: bytes, into: Path) -> None:
    read_end, write_end = os.pipe()

    def write() -> None:
        # Refused before the end: the reader closed its end.
        with contextlib.suppress(BrokenPipeError), open(write_end, "wb") as out:
            out.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with open(read_end, "rb") as pipe:
            receive_run_folder(pipe, into, into.parent.parent)
    finally:
        writer.join()


def _tree(root: Path) -> dict[str, bytes | str]:
    return {
        path.relative_to(root).as_posix(): (
            "link" if path.is_symlink() else path.read_bytes() if path.is_file() else "folder"
        )
        for path in sorted(root.rglob("*"))
    }


def _check(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "outside").mkdir()
        (root / "outside" / "keep.txt").write_text("keep\n")
        into = root / "home" / "run" / "tasks" / "chief-0"
        into.mkdir(parents=True)
        (into / "status.json").write_text("before\n")
        before_outside = _tree(root / "outside")
        try:
            _through_a_pipe(data, into)
        except (CopyBackError, tarfile.TarError) as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 600
            assert _tree(into) == {"status.json": b"before\n"}
        else:
            taken = _tree(into)
            assert "link" not in taken.values()
            expected = _plain_members(data)
            assert {k: v for k, v in taken.items() if v != "folder"} == expected
        assert _tree(root / "outside") == before_outside
        assert sorted(p.name for p in (root / "home").iterdir()) == ["run"]
        assert sorted(p.name for p in (root / "home" / "run").iterdir()) == ["tasks"]
        shutil.rmtree(root / "home")


def _plain_members(data: bytes) -> dict[str, bytes]:
    """What an accepted stream's regular files are, read by tarfile itself."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return {
            member.name.removeprefix("./"): tar.extractfile(member).read()  # type: ignore[union-attr]
            for member in tar.getmembers()
            if member.isreg()
        }


@FUZZ
@given(st.lists(MEMBER, max_size=8))
def test_any_stream_of_members_is_refused_or_taken_as_plain_files_only(
    members: list[tuple[str, bytes, bytes, str]],
) -> None:
    _check(_stream(members))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(MEMBER, min_size=1, max_size=4),
    st.integers(min_value=0, max_value=4096),
    st.binary(min_size=1, max_size=64),
    st.booleans(),
)
def test_a_damaged_or_cut_stream_is_refused_or_taken_as_plain_files_only(
    members: list[tuple[str, bytes, bytes, str]], at: int, garbage: bytes, cut: bool
) -> None:
    data = _stream(members)
    at = min(at, len(data))
    _check(data[:at] if cut else data[:at] + garbage + data[at + len(garbage) :])

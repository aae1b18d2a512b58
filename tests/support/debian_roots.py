"""Fresh Debian systems for tests: minbase roots made with debootstrap, and commands run in them.

A root has only what ``debootstrap --variant=minbase`` and the packages asked for bring,
from the Debian mirror this machine's apt uses. Building one takes a minute or two, so
each is kept as a tarball under ``~/.cache/distloop-tests/roots``, named by a hash of
what made it (suite, mirror, packages); apt's downloaded packages and pip's cache are
kept beside it, mounted into every root of the suite.

Commands run in a root through :func:`in_root`: a private mount namespace (``unshare``)
in which /proc, /sys, /dev and the caches are mounted, then ``chroot``. The mounts exist
only in that namespace, so they are gone when its processes are, whatever happened: the
host never keeps a mount into a root, and deleting a root never reaches through one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "distloop-tests"
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# variables that say how this machine reaches the network (a proxy), passed into roots
NETWORK_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
)


def debian_mirror() -> str | None:
    """The Debian archive URI in this machine's apt sources (deb822 or one-line), if any."""
    sources = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]
    for source in sources:
        if not source.is_file() or source.suffix not in {".list", ".sources"}:
            continue
        text = source.read_text(errors="replace")
        uris = re.findall(r"^URIs:\s*(\S+)", text, re.MULTILINE)
        uris += re.findall(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)", text, re.MULTILINE)
        for uri in uris:
            if uri.rstrip("/").endswith("/debian"):
                return uri.rstrip("/")
    return None


def skip_unless_roots_can_be_built(suite: str) -> str:
    """The mirror to build ``suite`` from; skips, saying why, where no root can be built."""
    if os.geteuid() != 0:
        pytest.skip("building a fresh Debian root needs root (debootstrap, chroot, mounts)")
    for tool, package in (("debootstrap", "debootstrap"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} ({package}: bash packaging/install-linux-deps.sh test)")
    mirror = debian_mirror()
    if mirror is None:
        pytest.skip("this machine's apt sources name no Debian mirror to build a root from")
    release = f"{mirror}/dists/{suite}/Release"
    try:
        with urllib.request.urlopen(release, timeout=30) as answer:
            answer.read(1)
    except OSError as error:
        pytest.skip(f"the Debian mirror is unreachable ({release}: {error})")
    return mirror


def cached_root(suite: str, mirror: str, packages: list[str]) -> Path:
    """The tarball of a minbase ``suite`` root with ``packages``, built on first use."""
    recipe = f"debootstrap --variant=minbase {suite} {mirror} {' '.join(sorted(packages))}"
    key = hashlib.sha256(recipe.encode()).hexdigest()[:16]
    tarball = CACHE / "roots" / f"{suite}-{key}.tar"
    if tarball.is_file():
        return tarball
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tarball.parent) as building:
        target = Path(building) / "root"
        include = [f"--include={','.join(sorted(packages))}"] if packages else []
        made = subprocess.run(
            ["debootstrap", "--variant=minbase", *include, suite, str(target), mirror],
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        assert made.returncode == 0, f"{recipe} failed:\n{made.stdout[-3000:]}{made.stderr[-3000:]}"
        partial = Path(building) / "root.tar"
        subprocess.run(
            ["tar", "-C", str(target), "--numeric-owner", "-cf", str(partial), "."], check=True
        )
        partial.rename(tarball)  # whole or absent, even with two runs building at once
    return tarball


@contextlib.contextmanager
def unpacked_root(tarball: Path, root: Path) -> Iterator[Path]:
    """The root in ``tarball``, unpacked at ``root`` for the duration.

    On a tmpfs where one can be mounted: a root with Distloop installed holds about
    3 GB in tens of thousands of files, which take minutes to write and delete on a
    busy disk, and no time in memory, where unmounting deletes them.
    """
    root.mkdir(parents=True)
    in_memory = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8g,mode=755", "distloop-test-root", str(root)],
        capture_output=True,
        check=False,
    )
    try:
        subprocess.run(
            ["tar", "-C", str(root), "--numeric-owner", "-xpf", str(tarball)], check=True
        )
        for name in ("resolv.conf", "hosts"):  # this machine's name service, as a fresh install's
            if Path("/etc", name).is_file():
                shutil.copyfile(Path("/etc", name), root / "etc" / name)
        yield root
    finally:
        if in_memory.returncode == 0:
            subprocess.run(["umount", "--lazy", str(root)], check=True)
        else:
            shutil.rmtree(root)  # no mount of in_root's outlives its command


def host_certificates() -> list[Path]:
    """The certificate authorities this machine adds to Debian's: those update-ca-certificates
    collects from /usr/local/share/ca-certificates, and a bundle pip is told to use instead
    of the system's (``PIP_CERT``, ``pip config``), where one is."""
    found = sorted(Path("/usr/local/share/ca-certificates").rglob("*.crt"))
    configured = (
        os.environ.get("PIP_CERT")
        or subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.cert"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    )
    if (
        configured
        and Path(configured).is_file()
        and Path(configured).resolve() != Path(SYSTEM_BUNDLE).resolve()
    ):
        found.append(Path(configured))
    return found


def trust_host_certificates(root: Path) -> None:
    """pip in the root trusts what pip here trusts: behind a TLS-inspecting proxy, nothing
    else reaches PyPI (CERTIFICATE_VERIFY_FAILED)."""
    folder = root / "usr/local/share/ca-certificates/host"
    folder.mkdir(parents=True, exist_ok=True)
    for number, certificate in enumerate(host_certificates()):
        shutil.copyfile(certificate, folder / f"{number}-{certificate.stem}.crt")
    updated = subprocess.run(
        in_root(root, "update-ca-certificates"), capture_output=True, text=True, check=False
    )
    assert updated.returncode == 0, updated.stdout + updated.stderr


def in_root(
    root: Path, command: str, env: dict[str, str] | None = None, inherit: tuple[str, ...] = ()
) -> list[str]:
    """The command line that runs ``command`` (bash) as root in ``root``, with a clean
    environment (``env`` added, and ``inherit``: variables taken as they are when it runs,
    as ``DISPLAY`` under xvfb-run), /proc, /sys, /dev, the X sockets and the caches mounted."""
    release = (root / "etc/debian_version").read_text().strip().split(".")[0]  # 12, 13
    apt = CACHE / "apt" / release
    caches = {CACHE / "pip": "root/.cache/pip", apt: "var/cache/apt/archives"}
    (apt / "partial").mkdir(parents=True, exist_ok=True)
    (CACHE / "pip").mkdir(parents=True, exist_ok=True)
    mounts = [
        f"mount -t proc proc {root}/proc",
        f"mount -t sysfs sysfs {root}/sys",
        f"mount --rbind /dev {root}/dev",
    ]
    if Path("/tmp/.X11-unix").is_dir():
        mounts.append(
            f"mkdir -p {root}/tmp/.X11-unix && mount --bind /tmp/.X11-unix {root}/tmp/.X11-unix"
        )
    for host, inside in caches.items():
        mounts.append(f"mkdir -p {root}/{inside} && mount --bind {host} {root}/{inside}")
    variables = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
    }
    variables |= {"LANG": "C.UTF-8", "TERM": "dumb"}
    variables |= {name: os.environ[name] for name in NETWORK_VARIABLES if name in os.environ}
    variables |= env or {}
    assignments = " ".join(
        [f"{name}={shlex.quote(value)}" for name, value in variables.items()]
        + [f'{name}="${name}"' for name in inherit]
    )
    script = " && ".join(
        [*mounts, f'exec chroot {root} /usr/bin/env -i {assignments} bash -c "$1"']
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", command]


def first_display() -> str:
    """Where ``xvfb-run -a`` starts looking for a free X display (``-n``), this process's
    own: two xvfb-run started at once from the same number both find it free and the
    second's Xvfb fails to start. The window tests of the .deb and of a fresh system run
    on different workers, and two checkouts' suites may run side by side."""
    return str(100 + (os.getpid() * 7) % 800)


def root_windows(root: Path) -> list[str]:
    """The lines of ``xwininfo -root -tree`` for the X display a command in ``root`` wrote to
    its ``/tmp/display``, with the authority file at its ``/tmp/xauthority`` (what
    ``xvfb-run -f ROOT/tmp/xauthority`` around :func:`in_root` gives); none before then."""
    display = root / "tmp/display"
    if not display.is_file() or not display.read_text().strip():
        return []
    tree = subprocess.run(
        ["xwininfo", "-root", "-tree", "-display", display.read_text().strip()],
        env=root_display_env(root),
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    ).stdout
    return [line.strip() for line in tree.splitlines()]


def root_display_env(root: Path) -> dict[str, str]:
    """This process's environment, pointed at the X display of a command in ``root``."""
    return {
        **os.environ,
        "DISPLAY": (root / "tmp/display").read_text().strip(),
        "XAUTHORITY": str(root / "tmp/xauthority"),
    }


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stops a process started with ``start_new_session`` and everything it started
    (xvfb-run, Xvfb, the app and its engine): one process group."""
    for sent, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        if process.poll() is not None:
            return
        os.killpg(process.pid, sent)
        try:
            process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    process.wait()

"""The checkout's .deb for tests, built once per content of what goes into it.

``packaging/build.py --only deb`` takes many minutes (PyInstaller over TensorFlow and Qt),
more than the rest of the suite allows on CI's two cores. So the .deb is kept in a cache
outside the clone (``/var/cache/distloop-ci/deb``, or ``DISTLOOP_DEB_CACHE``), under a
key hashed from everything the build reads: the content of the checkout's files that
go into the bundle (tracked, and untracked but not ignored), the installed Python
packages and their versions, the Python and the architecture. A change to any of them
is a new key, so a cached package is always the one this checkout would build;
nothing is ever skipped, only not rebuilt. A lock lets one test process build while
another waits for its package.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .distloop_testing import REPO

CACHE = Path(os.environ.get("DISTLOOP_DEB_CACHE", "/var/cache/distloop-ci/deb"))
BUILD_INPUTS = (
    "engine",
    "gui",
    "resources",
    "README.md",  # Help ▸ Distloop Guide shows it and the pages it links
    "CONTRIBUTING.md",
    "docs",
    ":(exclude)resources/screenshots",  # documentation: the spec leaves them out
    *(f"packaging/{name}" for name in ("build.py", "distloop.spec", "stage_namespace.py")),
    "packaging/distloop.lintian-overrides",
    *(f"packaging/{name}" for name in ("distloop_entry.py", "distloop")),
)
"""What packaging/build.py and the spec read from the checkout."""
COMPRESSION = "gzip"
"""Minutes less than xz's quarter of an hour on two cores; zstd is faster still, but not
a format of Debian's archive (lintian: malformed-deb-archive)."""
KEPT_BUILDS = 3
"""Packages kept in the cache (about 0.5 GB each): a few branches' builds side by side."""
BUILD_TIMEOUT_S = 3600


def build_key() -> str:
    """A hash of everything the build's result depends on."""
    digest = hashlib.sha256()
    listing = ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--"]
    listed = subprocess.run(
        ["git", "-C", str(REPO), *listing, *BUILD_INPUTS],
        capture_output=True,
        check=True,
    ).stdout
    for name in sorted(set(filter(None, listed.split(b"\0")))):
        path = REPO / os.fsdecode(name)
        if path.is_file():  # a tracked file deleted in the checkout is not built
            digest.update(name + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    # the installed packages, not the checkout's own egg-info that a test run's sys.path sees
    outside = [path for path in sys.path if path and not Path(path).resolve().is_relative_to(REPO)]
    installed = sorted(
        f"{dist.metadata['Name']}=={dist.version}"
        for dist in importlib.metadata.distributions(path=outside)
    )
    digest.update("\n".join([*installed, sys.version, platform.machine(), COMPRESSION]).encode())
    return digest.hexdigest()[:24]


def cached_deb() -> Path:
    """This checkout's .deb: from the cache, or built with packaging/build.py into it."""
    CACHE.mkdir(parents=True, exist_ok=True)
    folder = CACHE / build_key()
    with (CACHE / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be building it
        debs = sorted(folder.glob("distloop_*.deb"))
        if debs:
            folder.touch()  # recently used: kept by forget_old_builds
            return debs[0]
        with tempfile.TemporaryDirectory(dir=CACHE) as building:
            deb = build_deb(Path(building))
            partial = Path(building) / "done"
            partial.mkdir()
            deb.rename(partial / deb.name)
            partial.rename(folder)  # whole or absent
        forget_old_builds()
        return folder / deb.name


def build_deb(work: Path) -> Path:
    """Builds the bundle and the .deb from the checkout into ``work``; returns the .deb."""
    subprocess.run(
        [
            sys.executable,
            str(REPO / "packaging" / "build.py"),
            *("--only", "deb", "--dist", str(work / "dist"), "--work", str(work / "pyinstaller")),
            *("--deb-compression", COMPRESSION),
        ],
        cwd=REPO,
        check=True,
        timeout=BUILD_TIMEOUT_S,
    )
    (deb,) = (work / "dist").glob("distloop_*.deb")
    return deb


def forget_old_builds() -> None:
    """Deletes all but the :data:`KEPT_BUILDS` most recently used packages, and what
    builds that were killed left (called with the lock held: no build is under way)."""
    folders = [path for path in CACHE.iterdir() if path.is_dir()]
    for stale in [path for path in folders if path.name.startswith("tmp")]:
        shutil.rmtree(stale)
    builds = sorted(
        (path for path in folders if not path.name.startswith("tmp")),
        key=lambda folder: folder.stat().st_mtime,
        reverse=True,
    )
    for old in builds[KEPT_BUILDS:]:
        shutil.rmtree(old)


def lintian_report(deb: Path) -> str:
    """``lintian``'s tags for ``deb``, informational ones included (they tell of an
    override that no longer matches): many minutes on a package this size, so a cached
    package keeps its report beside it, named by lintian's version (the same package
    and the same lintian give the same report)."""
    version = subprocess.run(
        ["lintian", "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    report = deb.parent / f"lintian-{version}-info.txt"
    if deb.parent.parent == CACHE and report.is_file():
        return report.read_text(encoding="utf-8")
    checked = subprocess.run(
        ["lintian", "--display-info", "--tag-display-limit", "0", str(deb)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    # lintian(1): 0 normal, 2 tags at the --fail-on level (errors) found, 1 its own failure;
    # stderr holds its notice that it runs as root, which CI does
    assert checked.returncode in (0, 2), f"lintian exited {checked.returncode}: {checked.stderr}"
    if deb.parent.parent == CACHE:
        report.write_text(checked.stdout, encoding="utf-8")
    return checked.stdout

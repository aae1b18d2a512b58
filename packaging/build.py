"""Builds Distloop's installers for the platform it runs on.

    python -m pip install -e '.[package]'
    python packaging/build.py                  # bundle + this platform's packages
    python packaging/build.py --skip-bundle    # repackage an existing dist/distloop

Linux (exercised): the PyInstaller one-folder bundle ``dist/distloop/``, then
``dist/distloop-<version>-linux-<arch>.tar.gz`` and ``dist/distloop_<version>_<arch>.deb``
(``/usr/lib/distloop``, ``/usr/bin/distloop``, desktop entry, hicolor icons, lintian
overrides). The ``.deb``'s ``Depends:`` is derived from ``ldd`` over every ELF file in the
bundle: each system library it links is mapped to its Debian package by
:data:`SONAME_PACKAGES`, and the build stops when one is not in that table. The .deb's
copy of the bundle is stripped and loses the build machine's RUNPATHs
(:func:`debianize_elf_files`: ``eu-strip`` and ``patchelf``), as Debian requires.

macOS (not exercised): ``dist/Distloop.app`` from the spec's BUNDLE, then a ``.dmg``
made by ``hdiutil``. Windows (not exercised): the Inno Setup installer from
``packaging/windows/distloop.iss`` (``ISCC.exe`` on PATH or in its default folder).

The version is ``distloop.engine.__version__`` (``engine/__init__.py``), the single place
it is written.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import re
import shutil
import stat
import struct
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "packaging" / "distloop.spec"
ICONS = ROOT / "resources" / "icons"
DESKTOP_FILE = ROOT / "resources" / "distloop.desktop"
ICON_SIZES = (16, 32, 48, 64, 128, 256, 512)
INSTALL_DIR = "/usr/lib/distloop"
LINTIAN_OVERRIDES = ROOT / "packaging" / "distloop.lintian-overrides"
MAINTAINER = "Distloop developers <distloop@users.noreply.github.com>"
HOMEPAGE = "https://github.com/distloop/distloop"

# Shared libraries the bundle takes from the system, by soname prefix, and the Debian
# package(s) providing them ("a | b" where Debian renamed the package, e.g. the 64-bit
# time_t "t64" transition of trixie and Ubuntu 24.04). None: part of libc6, which every
# system has. Derived from `ldd` over a bundle of PySide6 6.x and TensorFlow 2.x.
SONAME_PACKAGES: dict[str, str | None] = {
    # glibc and the toolchain runtime
    "linux-vdso.so": None,
    "ld-linux": None,
    "libc.so": None,
    "libm.so": None,
    "libdl.so": None,
    "libpthread.so": None,
    "librt.so": None,
    "libutil.so": None,
    "libresolv.so": None,
    "libstdc++.so": "libstdc++6",
    "libgcc_s.so": "libgcc-s1",
    "libz.so": "zlib1g",
    # OpenGL / EGL through the GL vendor-neutral dispatch (Qt GUI, the xcb GL integrations)
    "libEGL.so": "libegl1",
    "libGL.so": "libgl1",
    "libGLX.so": "libglx0",
    "libOpenGL.so": "libopengl0",
    "libGLdispatch.so": "libglvnd0",
    # fonts, text, D-Bus, GLib
    "libfontconfig.so": "libfontconfig1",
    "libfreetype.so": "libfreetype6",
    "libexpat.so": "libexpat1",
    "libpng16.so": "libpng16-16t64 | libpng16-16",
    "libbrotlidec.so": "libbrotli1",
    "libbrotlicommon.so": "libbrotli1",
    "libbz2.so": "libbz2-1.0",
    "libdbus-1.so": "libdbus-1-3",
    "libsystemd.so": "libsystemd0",
    "libglib-2.0.so": "libglib2.0-0t64 | libglib2.0-0",
    "libgthread-2.0.so": "libglib2.0-0t64 | libglib2.0-0",
    "libgobject-2.0.so": "libglib2.0-0t64 | libglib2.0-0",
    "libgio-2.0.so": "libglib2.0-0t64 | libglib2.0-0",
    "libgmodule-2.0.so": "libglib2.0-0t64 | libglib2.0-0",
    "libpcre2-8.so": "libpcre2-8-0",
    "libffi.so": "libffi8",
    "libmount.so": "libmount1",
    "libblkid.so": "libblkid1",
    "libselinux.so": "libselinux1",
    "libgssapi_krb5.so": "libgssapi-krb5-2",
    "libzstd.so": "libzstd1",
    "liblzma.so": "liblzma5",
    "liblz4.so": "liblz4-1",
    "libcap.so": "libcap2",
    "libgcrypt.so": "libgcrypt20",
    "libgpg-error.so": "libgpg-error0",
    # the Python standard library's extension modules
    "libssl.so": "libssl3t64 | libssl3",
    "libcrypto.so": "libssl3t64 | libssl3",
    "libreadline.so": "libreadline8t64 | libreadline8",
    "libtinfo.so": "libtinfo6",
    "libncursesw.so": "libncursesw6",
    "libpanelw.so": "libncursesw6",
    "libsqlite3.so": "libsqlite3-0",
    "libgdbm.so": "libgdbm6t64 | libgdbm6",
    "libgdbm_compat.so": "libgdbm-compat4t64 | libgdbm-compat4",
    "libnsl.so": "libnsl2",
    "libtirpc.so": "libtirpc3t64 | libtirpc3",
    "libmpdec.so": "libmpdec3",
    # keyboard
    "libxkbcommon.so": "libxkbcommon0",
    "libxkbcommon-x11.so": "libxkbcommon-x11-0",
    # X11 and XCB (the xcb platform plugin)
    "libX11.so": "libx11-6",
    "libX11-xcb.so": "libx11-xcb1",
    "libXau.so": "libxau6",
    "libXdmcp.so": "libxdmcp6",
    "libXext.so": "libxext6",
    "libXrender.so": "libxrender1",
    "libXi.so": "libxi6",
    "libSM.so": "libsm6",
    "libICE.so": "libice6",
    "libuuid.so": "libuuid1",
    "libbsd.so": "libbsd0",
    "libmd.so": "libmd0",
    "libxcb.so": "libxcb1",
    "libxcb-cursor.so": "libxcb-cursor0",
    "libxcb-glx.so": "libxcb-glx0",
    "libxcb-icccm.so": "libxcb-icccm4",
    "libxcb-image.so": "libxcb-image0",
    "libxcb-keysyms.so": "libxcb-keysyms1",
    "libxcb-randr.so": "libxcb-randr0",
    "libxcb-render-util.so": "libxcb-render-util0",
    "libxcb-render.so": "libxcb-render0",
    "libxcb-shape.so": "libxcb-shape0",
    "libxcb-shm.so": "libxcb-shm0",
    "libxcb-sync.so": "libxcb-sync1",
    "libxcb-util.so": "libxcb-util1",
    "libxcb-xfixes.so": "libxcb-xfixes0",
    "libxcb-xinerama.so": "libxcb-xinerama0",
    "libxcb-xinput.so": "libxcb-xinput0",
    "libxcb-xkb.so": "libxcb-xkb1",
    "libxcb-dri2.so": "libxcb-dri2-0",
    "libxcb-dri3.so": "libxcb-dri3-0",
    "libxcb-present.so": "libxcb-present0",
    # Wayland (the wayland platform plugins)
    "libwayland-client.so": "libwayland-client0",
    "libwayland-cursor.so": "libwayland-cursor0",
    "libwayland-egl.so": "libwayland-egl1",
    "libdrm.so": "libdrm2",
    "libgbm.so": "libgbm1",
}

# GLIBCXX_3.4.N symbol versions and the first GCC (Debian libstdc++6 version) with them.
GLIBCXX_GCC = ((28, "9"), (29, "11"), (30, "12"), (31, "13"), (32, "13.2"), (33, "14"))

# Libraries that only optional plugins need: the package stays installable without
# them and Qt skips a plugin it cannot load. They go to Recommends instead of Depends.
# (The GTK platform theme needs all of GTK; Fusion is the app's style anyway.)
OPTIONAL_PLUGIN_DIRS = ("platformthemes",)


def version() -> str:
    """distloop.engine.__version__, read without importing anything."""
    text = (ROOT / "engine" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"', text, re.MULTILINE)
    if match is None:
        raise SystemExit("build: engine/__init__.py has no __version__")
    return match.group(1)


def debian_version(python_version: str) -> str:
    """A PEP 440 version as Debian orders it: 1.0rc1 -> 1.0~rc1 (before 1.0)."""
    return re.sub(r"(?<=\d)[.-]?(a|b|rc|dev)(\d*)", r"~\1\2", python_version)


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Runs a command, echoing it; a failure ends the build."""
    print("+", " ".join(command), flush=True)
    return subprocess.run(command, check=True, text=True, **kwargs)  # type: ignore[call-overload]


def build_bundle(dist: Path, work: Path) -> Path:
    """Runs PyInstaller on the spec; returns the one-folder bundle."""
    run(
        [
            sys.executable,
            "-m",
            "PyInstaller",
            "--noconfirm",
            "--clean",
            "--log-level",
            "WARN",
            "--distpath",
            str(dist),
            "--workpath",
            str(work),
            str(SPEC),
        ],
        cwd=ROOT,
    )
    return dist / "distloop"


def check_bundle(bundle: Path, expected_version: str) -> None:
    """The bundle's own ``distloop --version`` must answer, without the source tree."""
    executable = bundle / ("distloop.exe" if sys.platform == "win32" else "distloop")
    out = run(
        [str(executable), "--version"], capture_output=True, cwd=bundle, env=clean_env()
    ).stdout
    if expected_version not in out:
        raise SystemExit(f"build: {executable} --version said {out!r}")


def clean_env() -> dict[str, str]:
    """An environment without Python variables that could lead the bundle to other code."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "VIRTUAL_ENV", "CONDA", "QT_", "LD_"))
    }


def dir_size(path: Path) -> int:
    """Bytes of all regular files under ``path`` (links not followed)."""
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def mib(size: int) -> str:
    """Bytes as MiB for the report."""
    return f"{size / 2**20:,.0f} MiB"


# --- Linux ---------------------------------------------------------------------------


def debian_arch() -> str:
    """This machine's Debian architecture (amd64, arm64, ...)."""
    return run(["dpkg", "--print-architecture"], capture_output=True).stdout.strip()


def elf_files(root: Path) -> Iterator[Path]:
    """Every ELF file (executables, shared libraries, Python extensions) under ``root``."""
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as handle:
                if handle.read(4) == b"\x7fELF":
                    yield path


def elf_dynamic(path: Path) -> tuple[list[str], bytes]:
    """(DT_NEEDED sonames, dynamic string table) of a 64-bit little-endian ELF file.

    The string table also names the symbol versions the file needs (``GLIBC_2.34``,
    ``GLIBCXX_3.4.30``), which give the minimum versions of libc6 and libstdc++6.
    """
    data = path.read_bytes()
    if data[4] != 2 or data[5] != 1:
        raise SystemExit(f"build: {path} is not a 64-bit little-endian ELF file")
    phoff, phentsize, phnum = (
        struct.unpack_from("<Q", data, 0x20)[0],
        *struct.unpack_from("<HH", data, 0x36),
    )
    loads: list[tuple[int, int, int]] = []
    dynamic: tuple[int, int] | None = None
    for index in range(phnum):
        p_type, _flags, offset, vaddr, _paddr, filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + index * phentsize
        )
        if p_type == 1:  # PT_LOAD
            loads.append((vaddr, offset, filesz))
        elif p_type == 2:  # PT_DYNAMIC
            dynamic = (offset, filesz)
    if dynamic is None:
        return [], b""
    needed: list[int] = []
    strtab = strsz = 0
    for position in range(dynamic[0], dynamic[0] + dynamic[1], 16):
        tag, value = struct.unpack_from("<qQ", data, position)
        if tag == 0:  # DT_NULL
            break
        if tag == 1:  # DT_NEEDED
            needed.append(value)
        elif tag == 5:  # DT_STRTAB (an address)
            strtab = value
        elif tag == 10:  # DT_STRSZ
            strsz = value
    for vaddr, offset, filesz in loads:
        if vaddr <= strtab < vaddr + filesz:
            strtab = strtab - vaddr + offset
            break
    table = data[strtab : strtab + strsz]
    names = [table[i : table.index(b"\0", i)].decode() for i in needed]
    return names, table


def glibc_floor(tables: Iterable[bytes]) -> str | None:
    """The newest ``GLIBC_2.N`` symbol version any of the string tables needs."""
    found = [int(m) for t in tables for m in re.findall(rb"\bGLIBC_2\.(\d+)\b", t)]
    return f"2.{max(found)}" if found else None


def libstdcxx_floor(tables: Iterable[bytes]) -> str | None:
    """The libstdc++6 (GCC) version providing the newest ``GLIBCXX_3.4.N`` needed."""
    found = [int(m) for t in tables for m in re.findall(rb"\bGLIBCXX_3\.4\.(\d+)\b", t)]
    if not found:
        return None
    newest = max(found)
    for symbol_version, gcc in GLIBCXX_GCC:
        if newest <= symbol_version:
            return gcc
    raise SystemExit(f"build: GLIBCXX_3.4.{newest} is newer than GLIBCXX_GCC knows")


def ldd_resolve(bundle: Path, files: list[Path]) -> tuple[dict[str, set[str]], dict[str, str]]:
    """(unresolved soname -> files needing it, system soname -> path) as ``ldd`` sees them.

    ``ldd`` runs with the bootloader's library path (the bundle's ``_internal``); a
    library missing here would be missing at run time too, unless its package (in
    Depends) is simply not installed on this machine.
    """
    env = {**os.environ, "LD_LIBRARY_PATH": str(bundle / "_internal")}
    missing: dict[str, set[str]] = {}
    resolved: dict[str, str] = {}
    for start in range(0, len(files), 50):
        chunk = files[start : start + 50]
        result = subprocess.run(
            ["ldd", *map(str, chunk)], capture_output=True, text=True, env=env, check=False
        )
        current = ""
        for line in result.stdout.splitlines():
            if not line.startswith(("\t", " ")) and line.endswith(":"):
                current = str(Path(line[:-1]).relative_to(bundle))
            elif "=> not found" in line:
                missing.setdefault(line.split("=>")[0].strip(), set()).add(current)
            elif "=> /" in line:
                soname, target = (part.strip() for part in line.split("=>", 1))
                path = target.split(" (")[0]
                if not path.startswith(str(bundle)):
                    resolved[soname] = os.path.realpath(path)
    return missing, resolved


def owning_packages(paths: Iterable[str]) -> dict[str, str]:
    """path -> installed Debian package owning it (``dpkg -S``; usr-merge aware)."""
    owners: dict[str, str] = {}
    for path in paths:
        candidates = [path]
        if path.startswith("/usr/lib/"):
            candidates.append(path.removeprefix("/usr"))
        for candidate in candidates:
            result = subprocess.run(
                ["dpkg", "-S", candidate], capture_output=True, text=True, check=False
            )
            if result.returncode == 0:
                owners[path] = result.stdout.split(":")[0].strip()
                break
    return owners


def package_for(soname: str) -> str | None:
    """The Debian package(s) of a system library; KeyError when the table lacks it."""
    for prefix in sorted(SONAME_PACKAGES, key=len, reverse=True):
        if soname.startswith(prefix):
            return SONAME_PACKAGES[prefix]
    raise KeyError(soname)


def debian_dependencies(bundle: Path) -> tuple[list[str], list[str], dict[str, set[str]]]:
    """(Depends, Recommends, system soname -> files needing it) of the bundle.

    Every ELF file's DT_NEEDED entries that the bundle does not carry itself are
    system libraries; each maps to its package through :data:`SONAME_PACKAGES`.
    libc6 and libstdc++6 get the minimum versions the symbol versions demand. ``ldd``
    then checks that every library resolves on this machine (a warning names those
    that do not: their packages are not installed here).
    """
    files = list(elf_files(bundle))
    bundled = {path.name for path in bundle.rglob("*")}
    needed: dict[str, set[str]] = {}
    tables: list[bytes] = []
    for path in files:
        names, table = elf_dynamic(path)
        tables.append(table)
        for soname in names:
            if soname not in bundled:
                needed.setdefault(soname, set()).add(str(path.relative_to(bundle)))
    unknown = []
    depends: set[str] = set()
    recommends: set[str] = set()
    for soname, users in sorted(needed.items()):
        try:
            package = package_for(soname)
        except KeyError:
            unknown.append(f"{soname} (needed by {sorted(users)[0]})")
            continue
        if package is None:
            continue
        optional = all(
            any(f"/{folder}/" in user for folder in OPTIONAL_PLUGIN_DIRS) for user in users
        )
        (recommends if optional else depends).add(package)
    if unknown:
        raise SystemExit(
            "build: these system libraries have no Debian package in SONAME_PACKAGES "
            "(packaging/build.py); add them:\n  " + "\n  ".join(unknown)
        )
    missing, resolved = ldd_resolve(bundle, files)
    if missing:
        lines = [f"{name} (needed by {sorted(u)[0]})" for name, u in sorted(missing.items())]
        print(
            "build: warning: not installed here, so not checked by ldd (their packages are in "
            "Depends; install them to run the bundle here):\n  " + "\n  ".join(lines),
            file=sys.stderr,
        )
    if shutil.which("dpkg"):
        paths = {soname: resolved[soname] for soname in needed if soname in resolved}
        owners = owning_packages(paths.values())
        for soname, path in sorted(paths.items()):
            declared = package_for(soname)
            owner = owners.get(path)
            if declared and owner and owner not in [p.strip() for p in declared.split("|")]:
                raise SystemExit(
                    f"build: {soname} is {path} of package {owner} here, but SONAME_PACKAGES "
                    f"says {declared!r}: fix the table"
                )
    if floor := glibc_floor(tables):
        depends.add(f"libc6 (>= {floor})")
    if floor := libstdcxx_floor(tables):
        depends.discard("libstdc++6")
        depends.add(f"libstdc++6 (>= {floor})")
    recommends -= depends
    return sorted(depends), sorted(recommends), needed


def has_symbol_table(path: Path) -> bool:
    """Whether an ELF file (64-bit little-endian) still has a ``.symtab`` (SHT_SYMTAB)
    section, i.e. is not stripped: only those go through ``strip``. PyInstaller's
    bootloader comes stripped, its archive in a section of its own, and is left alone."""
    with path.open("rb") as handle:
        header = handle.read(64)
        section_offset = struct.unpack_from("<Q", header, 0x28)[0]
        entry_size, count = struct.unpack_from("<HH", header, 0x3A)
        handle.seek(section_offset)
        table = handle.read(entry_size * count)
    return any(
        struct.unpack_from("<I", table, index * entry_size + 4)[0] == 2 for index in range(count)
    )


def debianize_elf_files(root: Path) -> None:
    """Strips the ELF files under ``root`` and removes RUNPATHs that lead outside them.

    The wheels ship libraries with their symbol tables, and the build machine's Python
    (pyenv's) gives libpython and its extension modules a RUNPATH into its own prefix,
    which on a user's machine is at best absent and at worst another Python. Debian
    forbids both (lintian: unstripped-binary-or-object, custom-library-search-path).
    ``eu-strip`` (elfutils), not binutils' ``strip``: it removes only sections that are
    not loaded and leaves the segments where they are, where ``strip`` lays the file out
    anew and, on numpy's OpenBLAS (which auditwheel's patchelf had rewritten), made
    segments the loader refuses ("ELF load command address/offset not page-aligned").
    RUNPATH entries relative to the library (``$ORIGIN``, how PySide6 and TensorFlow
    find their own libraries) stay; patchelf only shortens or drops the entry in place.
    """
    files = list(elf_files(root))
    unstripped = [str(path) for path in files if has_symbol_table(path)]
    for start in range(0, len(unstripped), 50):
        run([tool("eu-strip"), "--remove-comment", *unstripped[start : start + 50]])
    patchelf = tool("patchelf")
    for path in files:
        runpath = subprocess.run(
            [patchelf, "--print-rpath", str(path)], capture_output=True, text=True, check=True
        ).stdout.strip()
        kept = [entry for entry in runpath.split(":") if entry.startswith(("$ORIGIN", "${ORIGIN}"))]
        if runpath and kept != runpath.split(":"):
            change = ["--set-rpath", ":".join(kept)] if kept else ["--remove-rpath"]
            run([patchelf, *change, str(path)])
    if misaligned := [str(path.relative_to(root)) for path in files if not loadable(path)]:
        raise SystemExit(f"build: stripping left segments the loader refuses: {misaligned}")


def tool(name: str) -> str:
    """A build tool from the system; CI installs them (``install-linux-deps.sh test``)."""
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"build: {name} is missing: bash packaging/install-linux-deps.sh test")
    return found


def loadable(path: Path) -> bool:
    """Whether every PT_LOAD segment's file offset and address agree modulo its
    alignment, as ld.so demands before it maps a file."""
    with path.open("rb") as handle:
        header = handle.read(64)
        table_offset = struct.unpack_from("<Q", header, 0x20)[0]
        entry_size, count = struct.unpack_from("<HH", header, 0x36)
        handle.seek(table_offset)
        table = handle.read(entry_size * count)
    for index in range(count):
        kind, _flags, offset, vaddr, _paddr, _filesz, _memsz, align = struct.unpack_from(
            "<IIQQQQQQ", table, index * entry_size
        )
        if kind == 1 and align > 1 and (vaddr - offset) % align:  # PT_LOAD
            return False
    return True


def make_tarball(bundle: Path, out: Path, name: str) -> Path:
    """``<name>.tar.gz`` holding the bundle as the folder ``<name>/``."""
    path = out / f"{name}.tar.gz"
    with tarfile.open(path, "w:gz", compresslevel=6) as archive:
        archive.add(bundle, arcname=name, filter=_reset_owner)
    return path


def _reset_owner(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Tar entries owned by root, not by whoever built."""
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def normalize_modes(root: Path) -> None:
    """Directories and executables 0755, other files 0644 (what dpkg and lintian expect).

    Shared libraries are 0644 too: they are loaded, not run (lintian's
    shared-library-is-executable), though the wheels ship most of them executable.
    """
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        executable = path.is_dir() or mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        if path.is_file() and re.search(r"\.so(\.[\d.]+)?$", path.name):
            executable = False
        path.chmod(0o755 if executable else 0o644)


def debian_changelog(deb_version: str) -> bytes:
    """``usr/share/doc/distloop/changelog.gz``, which Debian requires of every package:
    one entry for this version, dated by the build."""
    date = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime())
    entry = (
        f"distloop ({deb_version}) unstable; urgency=medium\n\n"
        f"  * Distloop {deb_version}: see {HOMEPAGE} for what changed.\n\n"
        f" -- {MAINTAINER}  {date}\n"
    )
    return gzip.compress(entry.encode("utf-8"), compresslevel=9, mtime=0)


def stage_deb(bundle: Path, staging: Path, deb_version: str, arch: str) -> None:
    """Lays out the package's files and its DEBIAN/control under ``staging``."""
    if staging.exists():
        shutil.rmtree(staging)
    installed = staging / INSTALL_DIR.lstrip("/")
    shutil.copytree(bundle, installed, symlinks=True)
    debianize_elf_files(installed)
    usr_bin = staging / "usr" / "bin"
    usr_bin.mkdir(parents=True)
    # relative, as Debian wants a link within /usr (lintian: symlink-should-be-relative)
    (usr_bin / "distloop").symlink_to(os.path.relpath(installed / "distloop", usr_bin))
    share = staging / "usr" / "share"
    (share / "applications").mkdir(parents=True)
    shutil.copy2(DESKTOP_FILE, share / "applications" / "distloop.desktop")
    for size in ICON_SIZES:
        target = share / "icons" / "hicolor" / f"{size}x{size}" / "apps"
        target.mkdir(parents=True)
        shutil.copy2(ICONS / f"distloop-{size}.png", target / "distloop.png")
    scalable = share / "icons" / "hicolor" / "scalable" / "apps"
    scalable.mkdir(parents=True)
    shutil.copy2(ICONS / "distloop.svg", scalable / "distloop.svg")
    doc = share / "doc" / "distloop"
    doc.mkdir(parents=True)
    (doc / "copyright").write_text(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
        "Upstream-Name: distloop\n\n"
        "Files: *\nCopyright: Distloop developers\nLicense: Apache-2.0\n"
        " On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0.\n"
        f" {INSTALL_DIR}/_internal holds Python, TensorFlow, Qt (LGPLv3) and PySide6 (LGPLv3)\n"
        " with their own licenses, as shipped in their wheels.\n",
        encoding="utf-8",
    )
    (doc / "changelog.gz").write_bytes(debian_changelog(deb_version))
    overrides = share / "lintian" / "overrides"
    overrides.mkdir(parents=True)
    shutil.copy2(LINTIAN_OVERRIDES, overrides / "distloop")
    normalize_modes(staging)

    depends, recommends, needed = debian_dependencies(bundle)
    installed_kib = (dir_size(staging) + 1023) // 1024
    control = [
        "Package: distloop",
        f"Version: {deb_version}",
        f"Architecture: {arch}",
        f"Maintainer: {MAINTAINER}",
        f"Installed-Size: {installed_kib}",
        f"Depends: {', '.join(depends)}",
        *([f"Recommends: {', '.join(recommends)}"] if recommends else []),
        "Section: science",
        "Priority: optional",
        f"Homepage: {HOMEPAGE}",
        "Description: TensorFlow distributed training with custom loops (desktop app and CLI)",
        " Distloop configures and runs TensorFlow distributed training with custom",
        " training loops: a PySide6 desktop app and the headless `distloop run`",
        " command. Self-contained: Python, TensorFlow and Qt are bundled in",
        f" {INSTALL_DIR}.",
    ]
    debian = staging / "DEBIAN"
    debian.mkdir()
    (debian / "control").write_text("\n".join(control) + "\n", encoding="utf-8")
    print("system libraries (ldd):", ", ".join(sorted(needed)))
    print("Depends:", ", ".join(depends))
    if recommends:
        print("Recommends:", ", ".join(recommends))


def build_deb(bundle: Path, out: Path, work: Path, compression: str) -> Path:
    """``distloop_<version>_<arch>.deb`` built with ``dpkg-deb`` (root-owned files)."""
    arch = debian_arch()
    deb_version = debian_version(version())
    staging = work / "deb-root"
    stage_deb(bundle, staging, deb_version, arch)
    path = out / f"distloop_{deb_version}_{arch}.deb"
    run(["dpkg-deb", "--root-owner-group", f"-Z{compression}", "--build", str(staging), str(path)])
    shutil.rmtree(staging)
    return path


# --- macOS (not exercised) -----------------------------------------------------------


def build_dmg(dist: Path) -> Path:
    """``Distloop-<version>-macos-<arch>.dmg``: the .app and a link to /Applications."""
    app = dist / "Distloop.app"
    if not app.is_dir():
        raise SystemExit(f"build: {app} is missing (the spec makes it on macOS)")
    staging = dist / "dmg"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    run(["ditto", str(app), str(staging / "Distloop.app")])
    (staging / "Applications").symlink_to("/Applications")
    path = dist / f"Distloop-{version()}-macos-{platform.machine()}.dmg"
    path.unlink(missing_ok=True)
    run(
        [
            "hdiutil",
            "create",
            "-volname",
            f"Distloop {version()}",
            "-srcfolder",
            str(staging),
            "-fs",
            "HFS+",
            "-format",
            "UDZO",
            "-ov",
            str(path),
        ]
    )
    shutil.rmtree(staging)
    return path


# --- Windows (not exercised) ---------------------------------------------------------


def find_iscc() -> str:
    """Inno Setup's compiler: on PATH or in its default install folders."""
    found = shutil.which("ISCC") or shutil.which("iscc")
    if found:
        return found
    for base in (os.environ.get("PROGRAMFILES(X86)"), os.environ.get("PROGRAMFILES")):
        if base and (candidate := Path(base) / "Inno Setup 6" / "ISCC.exe").is_file():
            return str(candidate)
    raise SystemExit("build: ISCC.exe (Inno Setup 6) not found; install it or put it on PATH")


def build_windows_installer(bundle: Path, out: Path) -> Path:
    """``distloop-<version>-windows-x64-setup.exe`` from packaging/windows/distloop.iss."""
    run(
        [
            find_iscc(),
            f"/DAppVersion={version()}",
            f"/DBundleDir={bundle}",
            f"/DOutputDir={out}",
            str(ROOT / "packaging" / "windows" / "distloop.iss"),
        ]
    )
    return out / f"distloop-{version()}-windows-x64-setup.exe"


# --- main ----------------------------------------------------------------------------


def report(paths: Iterable[Path], bundle: Path, seconds: float) -> None:
    """Prints the bundle's and the outputs' sizes and the time taken."""
    print(f"\nbundle  {bundle}  {mib(dir_size(bundle))}")
    for path in paths:
        print(f"output  {path}  {mib(path.stat().st_size)}")
    print(f"took {seconds / 60:.1f} min")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line of build.py."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="output folder")
    parser.add_argument(
        "--work", type=Path, default=ROOT / "build" / "packaging", help="PyInstaller's work folder"
    )
    parser.add_argument(
        "--skip-bundle", action="store_true", help="package an existing DIST/distloop bundle"
    )
    parser.add_argument(
        "--only",
        choices=("tar", "deb"),
        action="append",
        help="on Linux, make only this package (repeatable; default: tar and deb)",
    )
    parser.add_argument(
        "--deb-compression",
        default="xz",
        choices=("xz", "gzip", "zstd", "none"),
        help="dpkg-deb compressor (xz: smallest and readable by every dpkg; gzip: fastest)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Builds the bundle and this platform's installers; prints sizes and time."""
    args = parse_args(argv)
    started = time.monotonic()
    dist: Path = args.dist.resolve()
    work: Path = args.work.resolve()
    dist.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    bundle = dist / "distloop"
    if not args.skip_bundle:
        bundle = build_bundle(dist, work)
    if not bundle.is_dir():
        raise SystemExit(f"build: no bundle at {bundle}")
    check_bundle(bundle, version())
    outputs: list[Path] = []
    if sys.platform.startswith("linux"):
        wanted = set(args.only or ("tar", "deb"))
        if "tar" in wanted:
            name = f"distloop-{version()}-linux-{platform.machine()}"
            outputs.append(make_tarball(bundle, dist, name))
        if "deb" in wanted:
            outputs.append(build_deb(bundle, dist, work, args.deb_compression))
    elif sys.platform == "darwin":
        outputs.append(build_dmg(dist))
    elif sys.platform == "win32":
        outputs.append(build_windows_installer(bundle, dist))
    report(outputs, bundle, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The ``launch`` section: how ``distloop launch`` reaches a TF_CONFIG host over SSH when
its TF_CONFIG name is not the way in, and what it runs there.

TF_CONFIG names each task's host as the other tasks reach it (its network name or
address); the launcher's way in may differ: another user, a name only this machine
knows, an sshd on another port, Distloop in a virtual environment, a scratch disk
for the runs. Everything here is optional: a host not listed is reached by its
TF_CONFIG name, runs ``distloop`` and writes under ``~/distloop-runs``. The
launcher's ``--remote-command`` and ``--remote-dir`` win over every host's entry.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, Field

from ..tf_config import parse_address
from ._strict import _Strict

_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_SSH_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}")
"""A host name, an address or a ``Host`` alias of ssh's configuration. Never a leading
``-``: ssh would read the destination as an option (``-oProxyCommand=...``)."""
_RUN_NAME_LENGTH = 255
"""A folder name's longest on the file systems runs go to."""


def _destination(text: str) -> str:
    user, at, host = text.rpartition("@")
    if at and not _USER.fullmatch(user):
        raise ValueError(
            f"{user!r} is not a user name (letters, digits, '_', '.', '-'; not first '-')"
        )
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(
                f"{host!r} is not an IPv6 address; give the port as port, not after ':'"
            ) from None
        parse_address(f"[{host}]:1")  # its zone an interface name, as TF_CONFIG's hosts
    elif not _SSH_NAME.fullmatch(host):
        raise ValueError(
            f"{host!r} is not a host name, address or ssh alias "
            "(letters, digits, '_', '.', '-'; not first '-')"
        )
    return text


def _one_line(text: str) -> str:
    """A value printed in notices and run by a shell: printable characters only, so a line
    break, a terminal escape or a bidirectional mark can neither hide what runs nor
    rewrite the notice that says it."""
    if not text.isprintable():
        raise ValueError(
            f"{text[:80]!r} must be one line of printable characters "
            "(no control or bidirectional characters)"
        )
    if text != text.strip():
        raise ValueError("has spaces around it")
    return text


def _plain_name(text: str) -> str:
    """A run's folder name on its hosts: one folder, inside the remote folder."""
    _one_line(text)
    if "/" in text or "\\" in text or text in (".", "..") or text.startswith("-"):
        raise ValueError(f"{text!r} is not a plain folder name (no '/', '..', leading '-')")
    return text


def _tf_config_host(text: str) -> str:
    """A host as TF_CONFIG's addresses name it (``[v6]`` without its brackets)."""
    parse_address(f"[{text}]:1" if ":" in text else f"{text}:1")
    return text


class SshHost(_Strict):
    """One TF_CONFIG host as the launcher reaches it; each field unset keeps the default."""

    destination: Annotated[str, AfterValidator(_destination)] | None = Field(
        None,
        min_length=1,
        max_length=320,
        description="ssh's destination, name or user@name (a name or a Host alias of the ssh "
        "configuration); unset: the TF_CONFIG host name.",
    )
    port: int | None = Field(None, ge=1, le=65535, description="sshd's port (ssh -p).")
    command: Annotated[str, AfterValidator(_one_line)] | None = Field(
        None,
        min_length=1,
        max_length=1000,
        description="How the host runs Distloop, a shell command line (/opt/venv/bin/distloop); "
        "unset: distloop.",
    )
    remote_dir: Annotated[str, AfterValidator(_one_line)] | None = Field(
        None,
        min_length=1,
        max_length=4096,
        description="Where the runs' folders go on the host (relative: to the user's home); "
        "unset: distloop-runs.",
    )


class LaunchConfig(_Strict):
    """Per TF_CONFIG host (as its addresses name it), how ``distloop launch`` reaches it."""

    hosts: dict[Annotated[str, AfterValidator(_tf_config_host)], SshHost] = Field(
        default_factory=dict, max_length=1000
    )


class LaunchSettings(_Strict):
    """What a launch keeps in its run folder's ``status.json`` for a resume and a dump
    (``SshLaunch.settings``). A run folder may come from anyone, so these are read back
    as strictly as the project's own ``launch`` section: a run name that is one folder
    (never ``../../elsewhere``), commands and folders printable on one line. ``seal`` says
    whether this user launched it on this machine (``engine.cluster.launch_trust``)."""

    run_name: Annotated[str, AfterValidator(_plain_name)] = Field(
        min_length=1, max_length=_RUN_NAME_LENGTH
    )
    ssh_config: Annotated[str, AfterValidator(_one_line)] | None = Field(
        None, min_length=1, max_length=4096
    )
    remote_command: Annotated[str, AfterValidator(_one_line)] | None = Field(
        None, min_length=1, max_length=1000
    )
    remote_dir: Annotated[str, AfterValidator(_one_line)] | None = Field(
        None, min_length=1, max_length=4096
    )
    seal: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")

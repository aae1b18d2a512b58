"""Whether a launch's run folder was made by this user on this machine: its seal.

``distloop launch --resume`` and ``cluster --dump`` run what a launch's folder names: an
ssh configuration file (whose ProxyCommand runs here) and host command lines (run by the
hosts' shells). A folder from someone else ("resume my run") may name anything there.
The launch that made the folder seals what it runs beyond Distloop with a key only this
user has (an HMAC, the key in the user's data folder, readable by the user alone); a
folder whose seal does not match what it would run was made by another user, on another
machine or edited since, and runs only when the user says so (``--trust-launch``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from ..fileio import read_regular_file

KEY_FILE = "launch-key"
_KEY_BYTES = 32


def seal(unusual: list[str]) -> str | None:
    """The seal of a launch that runs ``unusual`` (``SshLaunch.unusual``); None when the
    user's data folder cannot hold the key (a resume then asks, as for anyone's folder)."""
    message = "\n".join(unusual).encode("utf-8", "surrogatepass")
    try:
        return hmac.new(_key(), message, hashlib.sha256).hexdigest()
    except OSError:
        return None


def sealed_here(unusual: list[str], found: str | None) -> bool:
    """Whether ``found`` is this user's seal of ``unusual``: nothing to ask about when it
    is, or when the launch runs nothing beyond Distloop."""
    if not unusual:
        return True
    expected = seal(unusual)
    return expected is not None and found is not None and hmac.compare_digest(expected, found)


def _key_path() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("distloop", appauthor=False)) / KEY_FILE


def _key() -> bytes:
    """The user's key, made at its first use (two launches at once agree on one: the
    first link wins); an unreadable or damaged key file is replaced, which only means
    that earlier launches are asked about again."""
    path = _key_path()
    try:
        key = read_regular_file(path, _KEY_BYTES)
    except FileNotFoundError:
        key = b""
    except OSError:
        key = b"damaged"
    if len(key) == _KEY_BYTES:
        return key
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(secrets.token_bytes(_KEY_BYTES))
    try:
        if key:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
    except FileExistsError:
        pass
    finally:
        temporary.unlink(missing_ok=True)
    return read_regular_file(path, _KEY_BYTES)

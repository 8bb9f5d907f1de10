"""Private files under a corral home: folders 0700, files 0600, written atomically.

The home holds personal data (logs) and trusted material (the model-signing key), so
nothing in it may be readable by other users, and a crash must never leave half a file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) if needed; each folder corral creates is 0700.

    Folders that exist are left as they are. Every missing one is made here, not by
    ``mkdir(parents=True)``, which gives the parents it makes the umask's mode (0755).
    """
    if path.is_dir():
        return path
    missing = [path, *(p for p in path.parents if not p.is_dir())]
    for folder in reversed(missing):
        if folder.is_dir():
            continue
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
        folder.chmod(DIR_MODE)  # mkdir's mode is reduced by the umask only, never widened
    return path


def tighten(path: Path) -> None:
    """Take group and other permissions off a folder or file we own (older homes were 0755)."""
    with contextlib.suppress(OSError):
        info = path.stat()
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
            path.chmod(stat.S_IMODE(info.st_mode) & ~0o077)


def write_private(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename), mode 0600.

    A reader sees the old content or the new one, never a mix; a crash leaves at most a
    stray ``.tmp`` file, which the next write does not depend on.

    ``sync=False`` leaves out the fsync, and with it the promise for an OS crash or a
    power loss (the file may then be found empty): for a file derived from the store and
    rewritten from it (a run's JSONL log), which the next write repairs. For readers and
    for a crash of this process the rename stays atomic.
    """
    private_dir(path.parent)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:  # mkstemp creates the file 0600
            out.write(data)
            if sync:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def owned_private(path: Path) -> bool:
    """True when ``path`` is a regular file of ours that no other user can read or write."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_uid == os.getuid()
        and not stat.S_IMODE(info.st_mode) & 0o077
    )

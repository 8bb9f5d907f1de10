"""Pickles that corral trusts: signed with a key kept private in the home, checked first.

A fitted model is a pickle, and unpickling runs code. A file planted in a cache folder
(or handed over as ``--model``) must never be unpickled, so every model corral writes
starts with an HMAC-SHA256 of its bytes under ``<cache>/signing.key`` (0600, ours), and
nothing is unpickled before that MAC checks out.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import pickle
import secrets
import tempfile
from pathlib import Path

from corral.errors import ConfigInvalidError
from corral.files import owned_private, private_dir, write_private

MAGIC = b"corral-signed-pickle/1\n"
KEY_FILE = "signing.key"
_MAC_SIZE = hashlib.sha256().digest_size
_KEY_SIZE = 32


def signing_key(folder: Path) -> bytes:
    """The key under ``folder``, created on first use (0600).

    A key file that is not ours, or that others may read or write, is replaced: anyone
    who could write it could sign a pickle.
    """
    path = folder / KEY_FILE
    if owned_private(path):
        key = path.read_bytes()
        if len(key) >= _KEY_SIZE:
            return key
    private_dir(folder)
    handle, temp = tempfile.mkstemp(dir=folder, prefix=".signing.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(secrets.token_bytes(_KEY_SIZE))
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temp, path)  # only if absent: concurrent first uses agree on one key
        except FileExistsError:
            if not owned_private(path) or len(path.read_bytes()) < _KEY_SIZE:
                os.replace(temp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    return path.read_bytes()


def _mac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


def dump_signed(value: object, path: Path, key: bytes) -> None:
    """Pickle ``value`` to ``path`` (atomically, 0600) behind its MAC."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    write_private(path, MAGIC + _mac(key, data) + data)


def load_signed(path: Path, key: bytes) -> object:
    """Unpickle ``path`` only if it was signed with ``key``; ``ConfigInvalidError`` otherwise."""
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise ConfigInvalidError(f"cannot read the model {path}: {exc.strerror}") from None
    start = len(MAGIC)
    mac, data = blob[start : start + _MAC_SIZE], blob[start + _MAC_SIZE :]
    if not blob.startswith(MAGIC) or not hmac.compare_digest(mac, _mac(key, data)):
        raise ConfigInvalidError(
            f"{path} is not a model signed by this corral home; it was not loaded",
            hint="corral loads only models it trained with the same home "
            f"({KEY_FILE} in its cache folder); train it again with `corral intent train`",
        )
    return pickle.loads(data)  # authenticated above

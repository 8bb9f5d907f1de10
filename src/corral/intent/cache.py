"""One on-disk cache for fitted intent models, keyed by a hash of what they were fitted on.

Entries are signed pickles (``corral.intent.signed``): an entry that is not signed with
the cache folder's key, planted or damaged, is deleted and refitted without being read.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from corral.errors import ConfigInvalidError
from corral.intent.signed import dump_signed, load_signed, signing_key

M = TypeVar("M")


def sklearn_missing() -> ConfigInvalidError:
    """The error of a trained classifier without scikit-learn (and numpy) installed."""
    return ConfigInvalidError(
        "the trained intent classifier needs scikit-learn", hint="pip install 'corral[ml]'"
    )


def fit_cached(
    cache_dir: Path | None,
    file_name: str,
    kind: type[M],
    fit: Callable[[], M],
    load: Callable[[Path, bytes], object] = load_signed,
    save: Callable[[M, Path, bytes], None] = dump_signed,
) -> M:
    """The model cached under ``cache_dir/file_name``, or a freshly fitted (and saved) one.

    ``load`` and ``save`` take the folder's signing key. A stale, unsigned or broken
    cache entry is deleted and refitted, never trusted.
    """
    if cache_dir is None:
        return fit()
    key = signing_key(cache_dir)
    path = cache_dir / file_name
    if path.is_file():
        try:
            cached = load(path, key)
            if isinstance(cached, kind):
                return cached
        except (ConfigInvalidError, pickle.UnpicklingError, EOFError, ImportError, AttributeError):
            pass
        path.unlink(missing_ok=True)
    model = fit()
    save(model, path, key)
    return model

"""One on-disk cache for fitted intent models, keyed by a hash of what they were fitted on."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from corral.errors import ConfigInvalidError

M = TypeVar("M")


def _load_pickle(path: Path) -> object:
    return pickle.loads(path.read_bytes())  # only our own cache files


def fit_cached(
    cache_dir: Path | None,
    file_name: str,
    kind: type[M],
    fit: Callable[[], M],
    load: Callable[[Path], object] = _load_pickle,
    save: Callable[[M, Path], None] | None = None,
) -> M:
    """The model cached under ``cache_dir/file_name``, or a freshly fitted (and saved) one.

    A stale or broken cache entry is deleted and refitted, never trusted.
    """
    if cache_dir is None:
        return fit()
    path = cache_dir / file_name
    if path.is_file():
        try:
            cached = load(path)
            if isinstance(cached, kind):
                return cached
        except (ConfigInvalidError, pickle.UnpicklingError, EOFError, AttributeError):
            pass
        path.unlink(missing_ok=True)
    model = fit()
    if save is not None:
        save(model, path)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(model))
    return model

"""Labelled intent data: CSV files (``text,label``) and ``seq.in`` / ``label`` folders.

A *split* is one file or one folder with ``seq.in`` and ``label``. A *corpus* is a folder
of splits (``train/``, ``valid/``, ``test/``) with, optionally, out-of-scope splits under
``id-oos/`` and ``ood-oos/`` whose examples are labelled :data:`OOS_LABEL` (the
BANKING77-OOS / CLINC layout).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from corral.errors import ConfigInvalidError

OOS_LABEL = "oos"
"""The label of out-of-scope examples."""


@dataclass(frozen=True)
class LabelledTexts:
    """Parallel lists of texts and labels."""

    texts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    def __add__(self, other: LabelledTexts) -> LabelledTexts:
        return LabelledTexts(self.texts + other.texts, self.labels + other.labels)

    def __len__(self) -> int:
        return len(self.texts)


def _read_folder(folder: Path, force_label: str | None) -> LabelledTexts:
    texts = (folder / "seq.in").read_text(encoding="utf-8").splitlines()
    if force_label is not None:
        labels = [force_label] * len(texts)
    else:
        labels = (folder / "label").read_text(encoding="utf-8").splitlines()
        if len(labels) != len(texts):
            raise ConfigInvalidError(f"{folder}: {len(texts)} texts but {len(labels)} labels")
    return _examples(folder / "label", texts, labels)


def _examples(
    where: Path, texts: list[str], labels: list[str], lines: list[int] | None = None
) -> LabelledTexts:
    """The pairs that say something.

    A blank text is dropped (BANKING77's train split has one); a blank label is refused
    with its line (``lines``: each example's, else one line each; it would train a class
    named "").
    """
    kept = LabelledTexts()
    numbers = lines or list(range(1, len(texts) + 1))
    for number, text, label in zip(numbers, texts, labels, strict=True):
        if not label.strip():
            raise ConfigInvalidError(
                f"{where}:{number}: the example has no label",
                hint="every example needs a label; delete or fill it",
            )
        if text.strip():
            kept.texts.append(text.strip())
            kept.labels.append(label.strip())
    return kept


def _read_csv(path: Path) -> LabelledTexts:
    texts: list[str] = []
    labels: list[str] = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or not {"text", "label"} <= set(reader.fieldnames):
            raise ConfigInvalidError(f"{path}: needs a header with 'text' and 'label' columns")
        lines: list[int] = []
        for row in reader:
            texts.append(row["text"] or "")
            labels.append(row["label"] or "")
            lines.append(reader.line_num)  # the row's last line: quoted fields span several
    return _examples(path, texts, labels, lines)


def read_split(path: Path, *, force_label: str | None = None) -> LabelledTexts:
    """One split: a CSV file or a ``seq.in`` folder (``CONFIG_INVALID`` if unreadable).

    A file that is not UTF-8 (a CSV saved by Excel as GBK, say) or not CSV at all (NUL
    bytes) is said to be so, with its name, not shown as a traceback.
    """
    try:
        if path.is_file():
            return _read_csv(path)
        if (path / "seq.in").is_file():
            return _read_folder(path, force_label)
    except UnicodeDecodeError as exc:
        raise ConfigInvalidError(
            f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})",
            hint="save the file as UTF-8",
        ) from None
    except csv.Error as exc:
        raise ConfigInvalidError(f"{path}: not a CSV file ({exc})") from None
    raise ConfigInvalidError(
        f"{path} is neither a CSV file (text,label), a folder with seq.in and label, nor a "
        "corpus folder (train/, valid/, test/)",
        hint="an agent's own classifier is trained from its intents' examples when it "
        "loads; `corral eval AGENT_DIR` measures the agent",
    )


@dataclass(frozen=True)
class Corpus:
    """Train, validation and test data, each with its out-of-scope examples added."""

    train: LabelledTexts
    valid: LabelledTexts
    test: LabelledTexts
    held_out: bool = True
    """False for a single split used as all three: its scores are on the training data."""


def _split(root: Path, name: str) -> LabelledTexts:
    found = LabelledTexts()
    if (root / name).exists():
        found = found + read_split(root / name)
    for oos in ("id-oos", "oos"):
        if (root / oos / name / "seq.in").is_file():
            found = found + read_split(root / oos / name, force_label=OOS_LABEL)
    return found


def read_corpus(path: Path) -> Corpus:
    """A corpus folder, or a single split (used as train, valid and test alike)."""
    if path.is_dir() and (path / "train").exists():
        return Corpus(_split(path, "train"), _split(path, "valid"), _split(path, "test"))
    single = read_split(path)
    return Corpus(single, single, single, held_out=False)

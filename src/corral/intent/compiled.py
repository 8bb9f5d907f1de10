"""A fitted intent classifier as plain arrays: what an agent classifies with, without sklearn.

Importing scikit-learn (and the SciPy it loads) takes about a second, at every start of a
command whose agent has a trained classifier, though classifying one message needs none of
it: ``corral.intent.fast_path`` computes a message's logits from the fitted vocabularies,
idf weights and regression. This module holds those numbers, the two analyzers
``corral.intent.classifier`` fits (sklearn's ``char_wb`` and ``word``, written out here),
and the cache key, so that ``load_classifier`` can find a model fitted before and use it
with numpy alone. ``fast_path.scorer_for`` puts these analyzers in a model's compiled form
only after checking that they give sklearn's own n-grams on the texts it was fitted on and
on probes; otherwise the fitted sklearn model is used, as before.
"""

from __future__ import annotations

import logging
import pickle
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from corral.contracts import IntentResult
from corral.errors import ConfigInvalidError
from corral.hashing import stable_hash
from corral.intent.cache import sklearn_missing
from corral.intent.datasets import OOS_LABEL, LabelledTexts
from corral.intent.signed import dump_signed, load_signed, signing_key

logger = logging.getLogger(__name__)

FORMAT_VERSION = 3
"""Of the fitted model (``classifier.py``). 3: two-label models use ``[0, z]`` log-odds
(2 doubled them), so their temperatures differ."""
COMPILED_FORMAT = 1
"""Of the compiled form kept beside it, and in its file name: a version of corral whose
analyzers differ reads (and writes) its own file, not another version's."""

_WHITE_SPACES = re.compile(r"\s\s+")
"""What sklearn's analyzers collapse to one space first."""


@dataclass(frozen=True)
class ClassifierSettings:
    """Hyper-parameters; part of the cache key."""

    c: float = 10.0
    """Inverse regularisation of the logistic regression."""
    char_ngrams: tuple[int, int] = (2, 5)
    word_ngrams: tuple[int, int] = (1, 2)
    calibration_share: float = 0.2
    """Share of the training data held out to fit the temperature (then refit on all)."""
    seed: int = 13


def sklearn_version() -> str:
    """The installed scikit-learn's version, read without importing it (the cache key).

    A bundle that ships sklearn without its package metadata (a frozen app) is asked
    the version by importing it.
    """
    try:
        return metadata.version("scikit-learn")
    except metadata.PackageNotFoundError:
        if find_spec("sklearn") is None:
            raise sklearn_missing() from None
    import sklearn

    return str(sklearn.__version__)


def content_hash(data: LabelledTexts, settings: ClassifierSettings) -> str:
    """Cache key: the examples, their labels, the settings and the library versions."""
    return stable_hash(
        [data.texts, data.labels, repr(settings), sklearn_version(), FORMAT_VERSION],
        20,
        escape_non_ascii=True,  # the keys cached models were first written under
    )


# ---------------------------------------------------------------------- the analyzers


@dataclass(frozen=True, slots=True)
class CharWbAnalyzer:
    """sklearn's ``analyzer="char_wb"``: n-grams inside words, padded with a space."""

    ngram_range: tuple[int, int]
    lowercase: bool

    def __call__(self, text: str) -> list[str]:
        if self.lowercase:
            text = text.lower()
        min_n, max_n = self.ngram_range
        grams: list[str] = []
        for word in _WHITE_SPACES.sub(" ", text).split():
            padded = f" {word} "
            size = len(padded)
            for n in range(min_n, max_n + 1):
                offset = 0
                grams.append(padded[:n])
                while offset + n < size:
                    offset += 1
                    grams.append(padded[offset : offset + n])
                if offset == 0:  # a word shorter than n counts once, as sklearn's
                    break
        return grams


@dataclass(frozen=True, slots=True)
class WordAnalyzer:
    """sklearn's ``analyzer="word"`` with a token pattern and no stop words."""

    token_pattern: str
    ngram_range: tuple[int, int]
    lowercase: bool

    def __call__(self, text: str) -> list[str]:
        if self.lowercase:
            text = text.lower()
        tokens: list[str] = re.findall(self.token_pattern, text)
        min_n, max_n = self.ngram_range
        if max_n == 1:
            return tokens
        grams = list(tokens) if min_n == 1 else []
        for n in range(max(min_n, 2), min(max_n + 1, len(tokens) + 1)):
            for i in range(len(tokens) - n + 1):
                grams.append(" ".join(tokens[i : i + n]))
        return grams


OWN_ANALYZERS = (CharWbAnalyzer, WordAnalyzer)


# ---------------------------------------------------------------------- one text's logits


@dataclass(frozen=True, eq=False)
class Block:
    """One fitted vectorizer: its analyzer, vocabulary, idf weights and column offset."""

    analyze: Callable[[str], Sequence[str]]
    vocabulary: dict[str, int]
    idf: Any
    sublinear: bool
    l2: bool
    offset: int


def tf_idf(block: Block, text: str) -> tuple[Any, Any]:
    """``text``'s columns of ``block`` and their weights: (sublinear) tf, idf, l2 norm."""
    counts: dict[int, int] = {}
    vocabulary = block.vocabulary
    for token in block.analyze(text):
        column = vocabulary.get(token)
        if column is not None:
            counts[column] = counts.get(column, 0) + 1
    columns = np.fromiter(counts, dtype=np.intp, count=len(counts))
    values = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
    if block.sublinear:
        values = np.log(values) + 1.0
    if block.idf is not None:
        values *= block.idf[columns]
    if block.l2:
        norm = float(np.sqrt(values @ values))
        if norm:
            values /= norm
    return columns + block.offset, values


@dataclass(frozen=True, eq=False)
class OneTextScorer:
    """The logits of one text, as ``model.decision_function(features.transform([text]))``."""

    blocks: tuple[Block, ...]
    coef: Any
    intercept: Any

    def logits(self, text: str) -> Any:
        """One row of log-odds; a single column for a two-label regression, like sklearn."""
        parts = [tf_idf(block, text) for block in self.blocks]
        columns = np.concatenate([c for c, _ in parts])
        values = np.concatenate([v for _, v in parts])
        scores = self.coef[:, columns] @ values + self.intercept
        return scores[None, :] if scores.shape[0] > 1 else scores

    @property
    def portable(self) -> bool:
        """Whether it needs no sklearn object: every analyzer is one of this module's."""
        return all(isinstance(block.analyze, OWN_ANALYZERS) for block in self.blocks)


# ---------------------------------------------------------------------- classifying


def label_columns(logits: Any) -> Any:
    """One column per label: a two-label regression's one column ``z`` becomes ``[0, z]``.

    Its softmax is then the regression's own sigmoid.
    """
    if logits.ndim == 1:
        logits = np.stack([np.zeros_like(logits), logits], axis=1)
    return logits


def softmax(logits: Any, temperature: float) -> Any:
    """Calibrated probabilities, one row per row of ``logits``."""
    scaled = logits / temperature
    scaled = scaled - scaled.max(axis=1, keepdims=True)
    exp = np.exp(scaled)
    return exp / exp.sum(axis=1, keepdims=True)


def intent_result(label: str, confidence: float) -> IntentResult | None:
    """What the ``IntentClassifier`` protocol answers: ``None`` for out of scope."""
    if label == OOS_LABEL:
        return None
    return IntentResult(
        label=label,
        confidence=round(confidence, 4),  # also turns float noise above 1 into 1.0
        source="classifier",
        evidence=f"classifier p={confidence:.2f}",
    )


@dataclass(eq=False)
class CompiledClassifier:
    """A fitted classifier reduced to its numbers; classifies as the model it came from."""

    scorer: OneTextScorer
    labels: list[str]
    temperature: float
    oos_threshold: float = 0.0
    """Below this confidence a message is out of scope."""

    def classify(self, text: str) -> IntentResult | None:
        """The ``IntentClassifier`` protocol (``IntentClassifierModel.classify``'s numbers)."""
        probabilities = softmax(label_columns(self.scorer.logits(text)), self.temperature)[0]
        index = int(probabilities.argmax())
        confidence = float(probabilities[index])
        label = OOS_LABEL if confidence < self.oos_threshold else self.labels[index]
        return intent_result(label, confidence)


# ---------------------------------------------------------------------- the cache


def load_classifier(
    data: LabelledTexts, cache_dir: Path | None, oos_threshold: float
) -> CompiledClassifier | Any:
    """The classifier fitted on ``data``: its compiled form from the cache when there is one.

    Otherwise the model is fitted (or loaded: ``classifier.train_cached``, which imports
    sklearn), compiled, and the compiled form is kept beside it. A model whose analyzers
    this module cannot reproduce is returned as it is (``IntentClassifierModel``).
    """
    settings = ClassifierSettings()
    path = None
    if cache_dir is not None:
        path = cache_dir / f"intent-{content_hash(data, settings)}.compiled-{COMPILED_FORMAT}.pkl"
        found = _load(path, signing_key(cache_dir))
        if found is not None:
            return replace(found, oos_threshold=oos_threshold)
    from corral.intent.classifier import train_cached  # sklearn: only to fit or compile

    model = train_cached(data, cache_dir, settings)
    model.oos_threshold = oos_threshold
    compiled = model.compiled(data.texts)
    if compiled is None:
        return model
    if path is not None and cache_dir is not None:
        payload = {"format": COMPILED_FORMAT, "compiled": compiled}
        try:
            dump_signed(payload, path, signing_key(cache_dir))
        except OSError as exc:  # a read-only cache: the next start compiles it again
            logger.debug("could not keep the compiled classifier in %s: %s", cache_dir, exc)
    return compiled


def _load(path: Path, key: bytes) -> CompiledClassifier | None:
    """The compiled form at ``path``; a stale, unsigned or broken one is deleted."""
    if not path.is_file():
        return None
    try:
        payload = load_signed(path, key)
        if isinstance(payload, dict) and payload.get("format") == COMPILED_FORMAT:
            compiled = payload.get("compiled")
            if isinstance(compiled, CompiledClassifier):
                return compiled
    except (ConfigInvalidError, pickle.UnpicklingError, EOFError, ImportError, AttributeError):
        pass
    path.unlink(missing_ok=True)
    return None

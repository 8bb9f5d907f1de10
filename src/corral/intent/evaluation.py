"""Evaluation of an intent classifier: the figures a team needs before shipping it."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from corral.intent.classifier import IntentClassifierModel
from corral.intent.datasets import OOS_LABEL, LabelledTexts


@dataclass(frozen=True)
class IntentReport:
    """In-scope accuracy, out-of-scope recall and precision, confusions, latency, calibration."""

    examples: int
    in_scope: int
    out_of_scope: int
    accuracy: float
    """Share of in-scope examples given their right label (after the OOS threshold)."""
    oos_recall: float | None
    oos_precision: float | None
    threshold: float
    confusions: list[tuple[str, str, int]]
    """(true label, predicted label, count), most frequent first."""
    latency_ms: float
    """Mean classification time per message, batch of one."""
    calibration_error: float
    """Expected calibration error (10 bins) of the top label on in-scope examples."""

    def as_json(self) -> dict[str, object]:
        """JSON-ready figures."""
        return {
            "examples": self.examples,
            "in_scope": self.in_scope,
            "out_of_scope": self.out_of_scope,
            "accuracy": round(self.accuracy, 4),
            "oos_recall": None if self.oos_recall is None else round(self.oos_recall, 4),
            "oos_precision": None if self.oos_precision is None else round(self.oos_precision, 4),
            "threshold": self.threshold,
            "confusions": [list(c) for c in self.confusions],
            "latency_ms": round(self.latency_ms, 4),
            "calibration_error": round(self.calibration_error, 4),
        }


def _calibration_error(confidences: list[float], correct: list[bool], bins: int = 10) -> float:
    total = len(confidences)
    if not total:
        return 0.0
    error = 0.0
    for b in range(bins):
        low, high = b / bins, (b + 1) / bins
        members = [i for i, c in enumerate(confidences) if low < c <= high or (b == 0 and c == 0.0)]
        if members:
            accuracy = sum(correct[i] for i in members) / len(members)
            mean_conf = sum(confidences[i] for i in members) / len(members)
            error += len(members) / total * abs(accuracy - mean_conf)
    return error


def evaluate(
    model: IntentClassifierModel,
    data: LabelledTexts,
    *,
    top_confusions: int = 5,
    latency_samples: int = 200,
) -> IntentReport:
    """Score ``model`` on ``data`` at its tuned threshold."""
    predictions = model.predict(data.texts)
    raw = model.predict(data.texts, threshold=0.0)
    in_scope = [i for i, label in enumerate(data.labels) if label != OOS_LABEL]
    out_scope = [i for i, label in enumerate(data.labels) if label == OOS_LABEL]
    accuracy = (
        sum(predictions[i][0] == data.labels[i] for i in in_scope) / len(in_scope)
        if in_scope
        else 0.0
    )
    flagged = [i for i, (label, _) in enumerate(predictions) if label == OOS_LABEL]
    recall = (
        sum(1 for i in out_scope if predictions[i][0] == OOS_LABEL) / len(out_scope)
        if out_scope
        else None
    )
    precision = (
        sum(1 for i in flagged if data.labels[i] == OOS_LABEL) / len(flagged)
        if flagged and out_scope
        else (0.0 if out_scope else None)
    )
    confusions = Counter(
        (data.labels[i], predictions[i][0])
        for i in range(len(data))
        if predictions[i][0] != data.labels[i]
    )
    sample = data.texts[:latency_samples]
    started = time.perf_counter()
    for text in sample:
        model.predict([text])
    latency = (time.perf_counter() - started) / max(len(sample), 1) * 1000
    calibration = _calibration_error(
        [raw[i][1] for i in in_scope], [raw[i][0] == data.labels[i] for i in in_scope]
    )
    return IntentReport(
        examples=len(data),
        in_scope=len(in_scope),
        out_of_scope=len(out_scope),
        accuracy=accuracy,
        oos_recall=recall,
        oos_precision=precision,
        threshold=model.oos_threshold,
        confusions=[(t, p, n) for (t, p), n in confusions.most_common(top_confusions)],
        latency_ms=latency,
        calibration_error=calibration,
    )

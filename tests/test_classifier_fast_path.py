"""One message's logits without sklearn's per-call machinery: the same numbers as sklearn."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion

from corral.intent.classifier import ClassifierSettings, IntentClassifierModel
from corral.intent.datasets import LabelledTexts
from corral.intent.fast_path import scorer_for
from tests.test_classifier import synthetic
from tests.test_classifier_exact import TWO

# Texts the models never saw: unknown words, empty, Chinese, mixed case, repeated n-grams.
PROBES = [
    "where is my package OD999",
    "我要退款 refund REFUND refund",
    "",
    "   ",
    "zzz qqq unseen words only",
    "改地址 to Beijing 北京 please",
    "a",
]


def sklearn_logits(model: IntentClassifierModel, text: str) -> np.ndarray:
    return np.asarray(model.model.decision_function(model.features.transform([text])))


@pytest.mark.parametrize("data", [synthetic(1), TWO], ids=["four labels", "two labels"])
def test_one_text_logits_equal_sklearns(data: LabelledTexts) -> None:
    model = IntentClassifierModel.fit(data)
    scorer = scorer_for(model.features, model.model)
    assert scorer is not None
    for text in PROBES:
        ours, theirs = scorer.logits(text), sklearn_logits(model, text)
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


def test_classify_and_batch_predict_agree_message_by_message() -> None:
    model = IntentClassifierModel.fit(synthetic(1))
    batch = model.predict(PROBES)
    for text, (label, confidence) in zip(PROBES, batch, strict=True):
        ((one_label, one_confidence),) = model.predict([text])  # the one-text path
        assert one_label == label
        assert one_confidence == pytest.approx(confidence, rel=1e-9)


def test_a_bare_vectorizer_and_no_idf_are_reproduced() -> None:
    data = synthetic(2)
    for vectorizer in (
        TfidfVectorizer(),
        TfidfVectorizer(use_idf=False, norm=None, analyzer="char", ngram_range=(1, 3)),
    ):
        matrix = vectorizer.fit_transform(data.texts)
        regression = LogisticRegression(max_iter=500).fit(matrix, data.labels)
        scorer = scorer_for(vectorizer, regression)
        assert scorer is not None
        for text in PROBES:
            expected = regression.decision_function(vectorizer.transform([text]))
            np.testing.assert_allclose(scorer.logits(text), expected, rtol=1e-9, atol=1e-12)


def test_parts_it_does_not_reproduce_keep_sklearns_path() -> None:
    data = synthetic(3)
    weighted = FeatureUnion(
        [("a", TfidfVectorizer()), ("b", TfidfVectorizer(analyzer="char"))],
        transformer_weights={"a": 2.0, "b": 1.0},
    )
    for features in (weighted, TfidfVectorizer(binary=True), TfidfVectorizer(norm="l1")):
        matrix = features.fit_transform(data.texts)
        regression = LogisticRegression(max_iter=500).fit(matrix, data.labels)
        assert scorer_for(features, regression) is None
        model = IntentClassifierModel(
            ClassifierSettings(),
            features,  # type: ignore[arg-type]
            regression,
            [str(c) for c in regression.classes_],
        )
        expected = regression.decision_function(features.transform([PROBES[0]]))
        np.testing.assert_allclose(model.logits([PROBES[0]]), expected)


def test_a_pickled_model_leaves_the_scorer_out_and_rebuilds_it() -> None:
    model = IntentClassifierModel.fit(synthetic(1))
    before = model.classify(PROBES[0])
    assert model._scorer is not None  # built by the call above
    copy = pickle.loads(pickle.dumps(model))
    assert copy._scorer is None
    assert copy.classify(PROBES[0]) == before

"""The trained intent classifier, pinned exactly: probabilities, calibration, threshold.

``test_classifier.py`` checks that a realistic model works. These tests pin the numbers a
user relies on (the confidence the agent compares with its threshold, the tuned
out-of-scope threshold) on corpora small enough to fit in a fraction of a second, so the
mutation run can afford them for every planted bug.

The threshold tests score a fixed table of probabilities (``Scripted``): what is under test
is how a cut is chosen from the confidences, not how the confidences were learned.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sklearn
import yaml
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion

from corral import MemoryStore, RunStatus, Runtime, load_agent
from corral.agent import classifier_examples, train_classifier
from corral.errors import ConfigInvalidError
from corral.intent.classifier import (
    FORMAT_VERSION,
    ClassifierSettings,
    IntentClassifierModel,
    _fit_temperature,
    _softmax,
    content_hash,
    train_cached,
)
from corral.intent.compiled import CompiledClassifier
from corral.intent.datasets import OOS_LABEL, LabelledTexts
from corral.intent.signed import dump_signed
from corral.testing import FixedEffects
from tests.helpers import write_agent
from tests.test_classifier import synthetic

TWO = LabelledTexts(
    ["查物流", "where is it", "track my parcel", "退款", "refund", "money back"],
    ["track"] * 3 + ["refund"] * 3,
)
THREE = TWO + LabelledTexts(["new address", "改地址", "ship it elsewhere"], ["address"] * 3)
ASK = ["where is my parcel", "refund please", "改一下地址", "TRACK MY PARCEL"]
REPEATED = "refund refund refund where"
"""Words repeated in one message count sublinearly (1 + log tf)."""
GOLDEN_PLAIN = [
    [0.033, 0.03, 0.937],
    [0.056, 0.888, 0.056],
    [0.553, 0.228, 0.219],
    [0.048, 0.054, 0.898],
    [0.062, 0.825, 0.113],
]
GOLDEN_TEMPERATURE = 0.449
GOLDEN_CALIBRATED = [
    [0.001, 0.002, 0.001, 0.997],
    [0.0, 0.0, 1.0, 0.0],
    [0.934, 0.009, 0.02, 0.038],
    [0.001, 0.001, 0.001, 0.997],
]


def corpus(per_label: dict[str, int]) -> LabelledTexts:
    """``n`` distinct examples per label, built from a few words each."""
    words = {
        "track": ["track", "parcel", "物流", "where"],
        "refund": ["refund", "money", "退款", "back"],
        "address": ["address", "地址", "ship", "move"],
    }
    texts, labels = [], []
    for label, count in per_label.items():
        for i in range(count):
            texts.append(f"{words[label][i % 4]} {words[label][(i + 1) % 4]} {i}")
            labels.append(label)
    return LabelledTexts(texts, labels)


# Fitted afresh for each test (a few milliseconds): mutmut credits a module-scoped
# fixture's fit to the first test only, so a later test could not kill a fitting mutant.
@pytest.fixture
def two() -> IntentClassifierModel:
    return IntentClassifierModel.fit(TWO)


@pytest.fixture
def three() -> IntentClassifierModel:
    return IntentClassifierModel.fit(THREE)


def own_probabilities(model: IntentClassifierModel, texts: list[str]) -> Any:
    """What the logistic regression itself says (``predict_proba``)."""
    return model.model.predict_proba(model.features.transform(texts))


# ------------------------------------------------------------------ probabilities


def test_uncalibrated_confidence_is_the_regressions_own_with_two_intents(
    two: IntentClassifierModel,
) -> None:
    """A two-intent agent's confidence is not inflated.

    sklearn gives one log-odds column for two classes; turning it into ``[-z, z]``
    doubled it, so "92 % sure" was reported as "99 % sure" and an agent's confidence
    threshold let guesses through.
    """
    assert not two.calibrated and two.temperature == 1.0
    assert two.labels == ["refund", "track"]
    probs = two.probabilities(ASK)
    assert probs.shape == (4, 2)
    assert np.allclose(probs, own_probabilities(two, ASK), atol=1e-9)
    assert [label for label, _ in two.predict(ASK[:2])] == ["track", "refund"]


def test_uncalibrated_confidence_is_the_regressions_own_with_three_intents(
    three: IntentClassifierModel,
) -> None:
    probs = three.probabilities(ASK)
    assert probs.shape == (4, 3)
    assert np.allclose(probs, own_probabilities(three, ASK), atol=1e-9)
    assert [label for label, _ in three.predict(ASK)] == ["track", "refund", "address", "track"]


def test_letter_case_does_not_change_the_confidence(three: IntentClassifierModel) -> None:
    """Both the character and the word features ignore case."""
    lower, upper = three.probabilities(["track my parcel", "TRACK MY PARCEL"])
    assert np.allclose(lower, upper, atol=1e-12)
    assert three.predict(["Refund Please"]) == three.predict(["refund please"])


def test_a_temperature_divides_the_log_odds(three: IntentClassifierModel) -> None:
    """Temperature scaling: at temperature 2 every log-odds ratio is half as large."""
    base = three.probabilities(ASK)
    hot = IntentClassifierModel(
        three.settings, three.features, three.model, three.labels, temperature=2.0
    ).probabilities(ASK)
    assert np.allclose(np.log(hot[:, 0] / hot[:, 1]), np.log(base[:, 0] / base[:, 1]) / 2)
    assert np.allclose(hot.sum(axis=1), 1.0)
    assert (hot.max(axis=1) < base.max(axis=1)).all()  # a higher temperature is less sure


def test_softmax_is_exact_and_stable_for_large_logits() -> None:
    third = math.log(3.0)
    logits = np.array([[0.0, third, 0.0], [1000.0, 1000.0 + third, 1000.0]])
    expected = [0.2, 0.6, 0.2]
    probs = _softmax(logits, 1.0)
    assert np.allclose(probs, [expected, expected], atol=1e-12)
    # rows with very different scales: each row is normalised on its own
    mixed = _softmax(np.array([[2000.0, 2000.0 + third, 2000.0], [0.0, third, 0.0]]), 1.0)
    assert np.allclose(mixed, [expected, expected], atol=1e-12)
    halved = _softmax(np.array([[0.0, 2 * third, 0.0]]), 2.0)
    assert np.allclose(halved, [expected], atol=1e-12)


@pytest.mark.parametrize("temperature", [4.0, 0.5])
def test_the_fitted_temperature_is_the_one_that_explains_held_out_data(
    temperature: float,
) -> None:
    """Logits ``z`` with the right answer 75 % of the time are explained by ``z / T = ln 3``."""
    logits = np.array([[0.0, temperature * math.log(3.0)]] * 8)
    truth = np.array([1, 1, 1, 0, 1, 1, 1, 0])
    assert _fit_temperature(logits, truth) == pytest.approx(temperature, rel=1e-3)


def test_a_certain_wrong_answer_on_held_out_data_still_gives_a_temperature() -> None:
    """A held-out probability of exactly 0 does not make the fit infinite or NaN."""
    logits = np.array([[0.0, 2000.0], [0.0, 2000.0], [0.0, 2000.0], [0.0, 2000.0]])
    found = _fit_temperature(logits, np.array([1, 1, 1, 0]))
    assert math.isfinite(found) and 0.05 <= found <= 20.0
    assert found > 19.0  # as unsure as the bounds allow: one certain answer was wrong


# ------------------------------------------------------------------ fitting


@pytest.mark.parametrize(
    ("per_label", "calibrated"),
    [
        ({"track": 20, "refund": 20}, True),  # 40 examples, 20 per label
        ({"track": 20, "refund": 19}, False),  # 39 examples: too few to hold some out
        ({"track": 36, "refund": 4}, True),  # 4 of the rarest label is enough
        ({"track": 37, "refund": 3}, False),  # 3 is not
    ],
)
def test_calibration_needs_forty_examples_and_four_of_each_label(
    per_label: dict[str, int], calibrated: bool
) -> None:
    data = corpus(per_label)
    fitted = IntentClassifierModel.fit(data)
    assert fitted.calibrated is calibrated
    assert (fitted.temperature != 1.0) is calibrated
    assert fitted.meta == {
        "examples": len(data),
        "labels": 2,
        "sklearn": sklearn.__version__,
    }


def test_the_calibrated_model_is_fitted_on_all_the_data() -> None:
    """Calibration holds data out only to fit the temperature; the model sees it all."""
    base = corpus({"track": 20, "refund": 20, "address": 20})
    data = LabelledTexts([f"{t} w{i}" for i, t in enumerate(base.texts)], base.labels)
    fitted = IntentClassifierModel.fit(data)
    assert fitted.calibrated and 0.05 <= fitted.temperature <= 20.0
    words = fitted.features.transformer_list[1][1].vocabulary_
    assert all(f"w{i}" in words for i in range(60))  # each example's own word was seen


def test_one_letter_words_are_features() -> None:
    """Word features keep one-letter words: "plan a" and "plan b" are different requests."""
    data = LabelledTexts(
        ["plan a", "plan a please", "plan b", "plan b please"], ["a"] * 2 + ["b"] * 2
    )
    fitted = IntentClassifierModel.fit(data)
    assert {"a", "b", "plan a", "plan b"} <= set(fitted.features.transformer_list[1][1].vocabulary_)


def test_one_label_is_refused_with_a_message() -> None:
    with pytest.raises(ConfigInvalidError) as caught:
        IntentClassifierModel.fit(LabelledTexts(["a", "b"], ["x", "x"]))
    assert caught.value.message == "a classifier needs examples of at least two labels"


@pytest.mark.parametrize(("size", "kept"), [(1999, True), (2000, False), (5000, False)])
def test_on_a_large_corpus_a_one_off_character_ngram_is_dropped(size: int, kept: bool) -> None:
    """From 2000 examples on, a character n-gram seen in one example only is noise (a typo);
    one seen twice is kept. 5000 examples take the solver for large corpora."""
    texts = ["ab" if i % 2 else "cd" for i in range(size - 3)] + ["ab zq", "ab xy", "cd xy"]
    labels = ["x" if i % 2 else "y" for i in range(size - 3)] + ["x", "x", "y"]
    fitted = IntentClassifierModel.fit(LabelledTexts(texts, labels))
    characters = fitted.features.transformer_list[0][1].vocabulary_
    assert ("zq" in characters) is kept
    assert "xy" in characters and "ab" in characters


def test_a_fit_is_reproducible() -> None:
    """The cache key names the data, the settings, sklearn's version and FORMAT_VERSION, not
    the code: a change to the features or the fit must bump FORMAT_VERSION. These figures
    pin one small fit and one calibration (sklearn 1.9); update them with FORMAT_VERSION."""
    assert FORMAT_VERSION == 3
    plain = IntentClassifierModel.fit(THREE)
    assert np.allclose(plain.probabilities([*ASK, REPEATED]), GOLDEN_PLAIN, atol=2e-3)
    calibrated = IntentClassifierModel.fit(synthetic(1))
    assert calibrated.temperature == pytest.approx(GOLDEN_TEMPERATURE, abs=1e-3)
    assert np.allclose(calibrated.probabilities(ASK), GOLDEN_CALIBRATED, atol=2e-3)


def test_explicit_settings_are_used() -> None:
    settings = ClassifierSettings(c=0.01)
    weak = IntentClassifierModel.fit(THREE, settings)
    assert weak.settings is settings
    strong = IntentClassifierModel.fit(THREE)
    assert strong.settings == ClassifierSettings()
    # heavy regularisation: the weak model is much less sure of the same answer
    assert weak.probabilities(ASK).max(axis=1).max() < strong.probabilities(ASK).max(axis=1).min()


# ------------------------------------------------------------------ a fixed table


class Scripted(IntentClassifierModel):
    """A classifier whose probabilities are a fixed table, keyed by text."""

    def __init__(self, labels: list[str], table: dict[str, list[float]]) -> None:
        super().__init__(ClassifierSettings(), FeatureUnion([]), LogisticRegression(), labels)
        self.table = table

    def probabilities(self, texts: Sequence[str]) -> Any:
        return np.array([self.table[t] for t in texts])


def scripted(rows: dict[str, tuple[str, float]]) -> Scripted:
    """Rows ``text: (predicted label, confidence)`` over labels a, b, c; the rest spread out."""
    labels = ["a", "b", "c"]
    table = {}
    for text, (label, confidence) in rows.items():
        rest = (1.0 - confidence) / 2
        table[text] = [confidence if name == label else rest for name in labels]
    return Scripted(labels, table)


# Two in-scope messages (right) and two out-of-scope ones (given an in-scope label).
BALANCED = {"i1": ("a", 0.9), "i2": ("b", 0.6), "o1": ("a", 0.4), "o2": ("b", 0.45)}
BALANCED_TRUTH = LabelledTexts(["i1", "i2", "o1", "o2"], ["a", "b", OOS_LABEL, OOS_LABEL])


def test_the_threshold_is_the_lowest_cut_that_flags_all_out_of_scope_messages() -> None:
    """Every cut from 0.46 to 0.60 flags both out-of-scope messages and no in-scope one.

    The lowest is kept: a cut at a confidence does not flag it (0.45 leaves o2 in scope).
    """
    model = scripted(BALANCED)
    assert model.tune_threshold(BALANCED_TRUTH) == 0.46
    assert model.oos_threshold == 0.46
    assert [label for label, _ in model.predict(["i1", "i2", "o1", "o2"])] == [
        "a",
        "b",
        OOS_LABEL,
        OOS_LABEL,
    ]


def test_the_threshold_trades_a_lost_answer_against_out_of_scope_f1() -> None:
    """Flagging o1 (0.6) costs i2 (0.5): accuracy 1/2, F1 4/5, mean 0.65 < 0.83 at 0.36."""
    model = scripted({"i1": ("a", 0.9), "i2": ("b", 0.5), "o1": ("a", 0.6), "o2": ("c", 0.35)})
    truth = LabelledTexts(["i1", "i2", "o1", "o2"], ["a", "b", OOS_LABEL, OOS_LABEL])
    assert model.tune_threshold(truth) == 0.36


def test_a_cut_equal_to_a_confidence_does_not_flag_it() -> None:
    """o1 sits at exactly 0.7: the cut 0.70 leaves it in scope, so 0.71 is needed.

    (i2 is answered wrongly, so flagging it along the way costs no accuracy.)
    """
    model = scripted({"i1": ("a", 0.9), "i2": ("c", 0.5), "o1": ("a", 0.7)})
    truth = LabelledTexts(["i1", "i2", "o1"], ["a", "b", OOS_LABEL])
    assert model.tune_threshold(truth) == 0.71


def test_without_out_of_scope_examples_nothing_is_flagged() -> None:
    model = scripted({"i1": ("a", 0.9), "i2": ("b", 0.3), "i3": ("c", 0.2)})
    truth = LabelledTexts(["i1", "i2", "i3"], ["a", "b", "b"])
    assert model.tune_threshold(truth) == 0.0


def test_with_only_out_of_scope_examples_the_threshold_flags_them() -> None:
    model = scripted({"o1": ("a", 0.5), "o2": ("b", 0.7)})
    truth = LabelledTexts(["o1", "o2"], [OOS_LABEL, OOS_LABEL])
    assert model.tune_threshold(truth) == 0.71


@pytest.mark.parametrize("top", [0.951, 0.97])
def test_the_threshold_never_rejects_every_message(top: float) -> None:
    """Even when only a cut above every confidence would help, the cut stops at 0.95."""
    model = scripted({"i1": ("b", top), "o1": ("a", top + 0.001), "o2": ("b", top + 0.002)})
    truth = LabelledTexts(["i1", "o1", "o2"], ["a", OOS_LABEL, OOS_LABEL])
    assert model.tune_threshold(truth) == 0.0


def test_when_flagging_costs_more_than_it_gains_nothing_is_flagged() -> None:
    """Cuts up to 0.30 flag nothing and keep the one answer: better than any other cut."""
    model = scripted({"i1": ("a", 0.35), "o1": ("b", 0.9)})
    truth = LabelledTexts(["i1", "o1"], ["a", OOS_LABEL])
    assert model.tune_threshold(truth) == 0.0


def test_out_of_scope_f1_and_accuracy_weigh_the_same() -> None:
    """At 0.41, one answer lost (accuracy 1/2) buys an out-of-scope F1 of 1/2: no gain."""
    model = scripted({"i1": ("a", 0.4), "i2": ("a", 0.5), "o1": ("a", 0.4), "o2": ("a", 0.5)})
    truth = LabelledTexts(["i1", "i2", "o1", "o2"], ["a", "a", OOS_LABEL, OOS_LABEL])
    assert model.tune_threshold(truth) == 0.0


def test_the_tuned_threshold_flags_what_it_was_tuned_to_flag() -> None:
    """The cut that flags a confidence of 0.69 is 0.70, and 0.70 applied does flag it.

    Cuts built by ``np.arange`` carried float noise (0.6900000000000001 flagged 0.69), so
    the stored 0.69 was not the cut that had been scored.
    """
    model = scripted({"i1": ("a", 0.9), "o1": ("b", 0.69)})
    truth = LabelledTexts(["i1", "o1"], ["a", OOS_LABEL])
    threshold = model.tune_threshold(truth)
    assert threshold == 0.7 and repr(threshold) == "0.7"
    assert [label for label, _ in model.predict(["i1", "o1"])] == ["a", OOS_LABEL]


# ------------------------------------------------------------------ predicting


def test_predict_flags_below_the_threshold_and_keeps_a_confidence_at_it() -> None:
    model = scripted({"x": ("a", 0.5), "y": ("b", 0.8)})
    model.oos_threshold = 0.5
    assert model.predict(["x", "y"]) == [("a", 0.5), ("b", 0.8)]
    assert model.predict(["x", "y"], threshold=0.51) == [(OOS_LABEL, 0.5), ("b", 0.8)]
    model.oos_threshold = 0.9
    assert model.predict(["x"]) == [(OOS_LABEL, 0.5)]
    # an explicit threshold of 0 wins over the tuned one
    assert model.predict(["x", "y"], threshold=0.0) == [("a", 0.5), ("b", 0.8)]


def test_classify_reports_the_confidence_and_none_for_out_of_scope() -> None:
    model = Scripted(
        ["a", OOS_LABEL], {"x": [0.123456, 0.876544], "y": [0.876544, 0.123456], "z": [1.0, 0.0]}
    )
    assert model.classify("x") is None  # the out-of-scope class itself won
    result = model.classify("y")
    assert result is not None
    assert (result.label, result.confidence, result.source) == ("a", 0.8765, "classifier")
    assert result.evidence == "classifier p=0.88"
    model.oos_threshold = 0.9
    assert model.classify("y") is None
    model.table["w"] = [1.0000000000000002, 0.0]  # float noise above 1 is clipped
    model.oos_threshold = 0.0
    certain = model.classify("w")
    assert certain is not None and certain.confidence == 1.0


# ------------------------------------------------------------------ persistence and cache


def test_save_and_load_round_trip(tmp_path: Path, three: IntentClassifierModel) -> None:
    path = tmp_path / "m.pkl"
    three.save(path, b"k" * 32)
    loaded = IntentClassifierModel.load(path, b"k" * 32)
    assert loaded.labels == three.labels
    assert np.allclose(loaded.probabilities(ASK), three.probabilities(ASK))


@pytest.mark.parametrize(
    "payload",
    [
        {"format": FORMAT_VERSION - 1, "model": None},
        {"model": None},
        ["not", "a", "dict"],
    ],
)
def test_load_refuses_other_versions(tmp_path: Path, payload: object) -> None:
    path = tmp_path / "old.pkl"
    dump_signed(payload, path, b"k" * 32)
    with pytest.raises(ConfigInvalidError) as caught:
        IntentClassifierModel.load(path, b"k" * 32)
    assert caught.value.message == f"{path} is not a corral intent model of this version"


def test_the_cache_key_depends_on_texts_labels_and_settings() -> None:
    key = content_hash(TWO, ClassifierSettings())
    assert len(key) == 20 and int(key, 16) >= 0
    assert key == content_hash(TWO, ClassifierSettings())
    relabelled = LabelledTexts(TWO.texts, list(reversed(TWO.labels)))
    others = {
        content_hash(relabelled, ClassifierSettings()),
        content_hash(THREE, ClassifierSettings()),
        content_hash(TWO, ClassifierSettings(seed=14)),
    }
    assert key not in others and len(others) == 3


def refit_forbidden(*args: object) -> IntentClassifierModel:
    raise AssertionError("the cached model was fitted again")


def test_train_cached_fits_with_the_given_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = ClassifierSettings(c=0.5)
    fitted = train_cached(THREE, tmp_path, settings)
    assert fitted.settings == settings
    [entry] = tmp_path.glob("intent-*.pkl")
    assert entry.name == f"intent-{content_hash(THREE, settings)}.pkl"
    monkeypatch.setattr(IntentClassifierModel, "fit", refit_forbidden)
    again = train_cached(THREE, tmp_path, settings)  # read back, not fitted again
    assert np.allclose(again.probabilities(ASK), fitted.probabilities(ASK))
    monkeypatch.undo()
    assert train_cached(THREE, None).settings == ClassifierSettings()
    assert [p.name for p in tmp_path.glob("intent-*.pkl")] == [entry.name]


# ------------------------------------------------------------------ a two-intent agent, whole


def two_intent_agent(folder: Path, per_intent: int) -> Path:
    """An agent with two intents and no rules: the classifier alone decides."""
    examples = corpus({"track": per_intent, "refund": per_intent})
    intents = [
        {
            "name": name,
            "route": "reply",
            "reply": name,
            "examples": [
                t for t, lab in zip(examples.texts, examples.labels, strict=True) if lab == name
            ],
        }
        for name in ("track", "refund")
    ]
    config = {
        "name": "two",
        "default_language": "en",
        "limits": {"intent_confidence": 0.5},
        "classifier": {"enabled": True},
        "intents": intents,
        "templates": {
            "track": {"zh": "查", "en": "tracked"},
            "refund": {"zh": "退", "en": "refunded"},
        },
    }
    return write_agent(folder, yaml.safe_dump(config, allow_unicode=True), "")


@pytest.mark.parametrize("per_intent", [20, 3])
async def test_a_two_intent_agent_trains_and_reports_the_regressions_confidence(
    tmp_path: Path, per_intent: int
) -> None:
    """20 examples each: enough to calibrate, which crashed for two labels. 3 each: the
    confidence the run reports is the regression's own probability, not an inflated one."""
    agent = load_agent(two_intent_agent(tmp_path / "agent", per_intent), cache_dir=tmp_path / "c")
    compiled = train_classifier(agent.config, tmp_path / "c")  # the cached one the agent uses
    assert isinstance(compiled, CompiledClassifier)  # its numbers, loaded without sklearn
    model = train_cached(classifier_examples(agent.config), tmp_path / "c")  # what it came from
    assert model.calibrated is (per_intent == 20)
    summary = await Runtime(agent, MemoryStore(), effects=FixedEffects()).start("refund money back")
    assert summary.status is RunStatus.FINISHED and summary.reply == "refunded"
    assert summary.intent is not None and summary.intent.label == "refund"
    expected = float(model.probabilities(["refund money back"]).max())
    assert summary.intent.confidence == round(expected, 4)
    if not model.calibrated:
        own = float(own_probabilities(model, ["refund money back"]).max())
        assert summary.intent.confidence == round(own, 4)

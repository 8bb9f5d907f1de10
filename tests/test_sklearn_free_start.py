"""An agent's start without importing scikit-learn, and the same answers as with it.

Importing sklearn (and SciPy) took about a second at every start of a command whose agent
has a trained classifier or capability matching (``corral run`` on the orders example:
1.7 s, of it 1.0 s that import). A classifier fitted before is now loaded in its compiled
form (``corral.intent.compiled``) and the capability index is TF-IDF in numpy; both must
give sklearn's numbers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from sklearn.feature_extraction.text import TfidfVectorizer

from corral import load_agent, tool
from corral.agent import classifier_examples, train_classifier
from corral.decision.capabilities import NGRAMS, CapabilityIndex
from corral.intent.classifier import IntentClassifierModel, train_cached
from corral.intent.compiled import CharWbAnalyzer, CompiledClassifier, WordAnalyzer
from corral.intent.fast_path import scorer_for
from corral.tools.registry import ToolRegistry
from tests.conftest import ORDERS
from tests.test_classifier import synthetic
from tests.test_classifier_exact import TWO

ROOT = Path(__file__).resolve().parents[1]

TEXTS = st.text(
    st.one_of(
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
        st.sampled_from(list(" \t\n\u3000\u00a0.,!?-'我的快递到哪了ÉéİßAaZz0123")),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, low=st.integers(1, 3), span=st.integers(0, 3))
def test_the_analyzers_split_as_sklearns(text: str, low: int, span: int) -> None:
    ngrams = (low, low + span)
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=ngrams).build_analyzer()
    assert CharWbAnalyzer(ngrams, lowercase=True)(text) == char(text)
    pattern = r"(?u)\b\w+\b"
    word = TfidfVectorizer(ngram_range=ngrams, token_pattern=pattern).build_analyzer()
    assert WordAnalyzer(pattern, ngrams, lowercase=True)(text) == word(text)


@pytest.mark.parametrize("data", [synthetic(1), TWO], ids=["four labels", "two labels"])
def test_a_compiled_classifier_answers_as_its_model(data: object) -> None:
    model = IntentClassifierModel.fit(data)  # type: ignore[arg-type]
    model.oos_threshold = 0.3
    compiled = model.compiled(data.texts)  # type: ignore[attr-defined]
    assert isinstance(compiled, CompiledClassifier) and compiled.scorer.portable
    asks = [*data.texts, "where is my parcel", "我要退款", "", "zzz unseen", "TRACK IT"]  # type: ignore[attr-defined]
    for text in asks:
        assert compiled.classify(text) == model.classify(text), text


def test_a_model_whose_analyzer_is_not_reproduced_is_not_compiled() -> None:
    features = TfidfVectorizer(analyzer="char_wb", strip_accents="unicode")
    model = IntentClassifierModel.fit(TWO)
    plain = scorer_for(model.features, model.model, check=TWO.texts)
    assert plain is not None and plain.portable
    features.fit(TWO.texts)
    other = scorer_for(features, model.model, check=TWO.texts)
    assert other is not None and not other.portable  # sklearn's own analyzer kept


def test_the_cache_keeps_the_compiled_form_and_mends_a_damaged_one(tmp_path: Path) -> None:
    agent = load_agent(ORDERS, data_dir=tmp_path / "data", cache_dir=tmp_path / "cache")
    first = train_classifier(agent.config, tmp_path / "cache")
    assert isinstance(first, CompiledClassifier)
    assert first.oos_threshold == agent.config.classifier.oos_threshold
    (compiled_file,) = (tmp_path / "cache").glob("intent-*.compiled-1.pkl")
    model = train_cached(classifier_examples(agent.config), tmp_path / "cache")
    model.oos_threshold = first.oos_threshold
    for text in ["我的快递到哪了 OD2611200002", "where is my order", "hello", "退货"]:
        assert first.classify(text) == model.classify(text), text
    compiled_file.write_bytes(compiled_file.read_bytes()[:-7] + b"damaged")
    again = train_classifier(agent.config, tmp_path / "cache")
    assert isinstance(again, CompiledClassifier)  # the damaged one deleted, made again
    assert compiled_file.is_file() and again.classify("退货") == first.classify("退货")


class Hit(BaseModel):
    hit: str


def test_capability_scores_are_sklearns() -> None:
    descriptions = {
        "refund_order": "Refund an order's payment 退款",
        "cancel_order": "Cancel an order before it ships 取消订单",
        "track_parcel": "Where a parcel is now 查物流 tracking",
        "change_address": "Change the delivery address 改地址",
    }
    specs = []
    for name, words in descriptions.items():

        def looked(order_id: str) -> Hit:
            return Hit(hit=order_id)

        looked.__name__, looked.__doc__ = name, words
        specs.append(tool(looked))
    index = CapabilityIndex.build(ToolRegistry(specs))
    assert index is not None
    documents = [f"{s.name.replace('_', ' ')} {s.description}" for s in specs]
    theirs = TfidfVectorizer(analyzer="char_wb", ngram_range=NGRAMS, sublinear_tf=True)
    matrix = theirs.fit_transform(documents)
    for query in ["track my parcel", "我要退款", "nothing known qqq", "", "CANCEL it"]:
        expected = (matrix @ theirs.transform([query]).T).toarray().ravel()
        found = index.similarity(query)
        for name, score in zip(descriptions, expected, strict=True):
            assert abs(found[name] - float(score)) <= 1e-4 + 1e-12, (query, name)


def test_a_warm_start_and_a_run_import_no_sklearn(tmp_path: Path) -> None:
    """The orders example: a trained classifier and capability matching, as `corral run`."""
    agent_dir = tmp_path / "orders"
    shutil.copytree(ORDERS, agent_dir, ignore=shutil.ignore_patterns(".data", "__pycache__"))
    script = f"""
import asyncio, json, sys
from pathlib import Path
from corral import MemoryStore, Runtime, load_agent
agent = load_agent({str(agent_dir)!r}, data_dir=Path({str(tmp_path / "data")!r}),
                   cache_dir=Path({str(tmp_path / "cache")!r}))
summary = asyncio.run(Runtime(agent, MemoryStore()).start("我的快递到哪了 OD2611200002"))
print(json.dumps([summary.status.value, summary.intent.label, summary.intent.confidence,
                  "sklearn" in sys.modules, "scipy" in sys.modules]))
"""
    answers = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(2)
    ]
    cold, warm = answers
    assert cold[:3] == warm[:3] and warm[0] == "finished"
    assert cold[3] is True  # fitting needs sklearn
    assert warm[3] is False and warm[4] is False  # the second start: numpy only
    assert np.isfinite(warm[2])


def test_a_read_only_cache_still_loads_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache with the fitted model but where the compiled form cannot be written."""
    import corral.intent.compiled as compiled_module

    agent = load_agent(ORDERS, data_dir=tmp_path / "data", cache_dir=tmp_path / "cache")
    for kept in (tmp_path / "cache").glob("intent-*.compiled*.pkl"):
        kept.unlink()  # as a cache made before the compiled form existed

    def read_only(*_: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(compiled_module, "dump_signed", read_only)
    again = train_classifier(agent.config, tmp_path / "cache")
    assert isinstance(again, CompiledClassifier)  # compiled, only not kept
    assert again.classify("我的快递到哪了 OD2611200002") is not None


def test_sklearn_without_its_package_metadata_still_keys_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A frozen app may ship sklearn without its dist-info: its version is then imported."""
    import sklearn

    import corral.intent.compiled as compiled_module

    def no_metadata(name: str) -> str:
        raise compiled_module.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(compiled_module.metadata, "version", no_metadata)
    assert compiled_module.sklearn_version() == sklearn.__version__


def test_without_the_ml_extra_a_classifier_agent_says_what_to_install(tmp_path: Path) -> None:
    """numpy, sklearn and SciPy missing: CONFIG_INVALID with the extra to install."""
    script = f"""
import sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numpy", "sklearn", "scipy"):
            raise ModuleNotFoundError(f"No module named {{name!r}}")
        return None

sys.meta_path.insert(0, Missing())
from pathlib import Path
from corral import load_agent
from corral.errors import ConfigInvalidError
try:
    load_agent({str(ORDERS)!r}, data_dir=Path({str(tmp_path / "d")!r}),
               cache_dir=Path({str(tmp_path / "c")!r}))
except ConfigInvalidError as exc:
    print(exc.code.value, exc.hint)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "CONFIG_INVALID pip install 'corral[ml]'", done.stderr

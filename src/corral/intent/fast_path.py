"""One message's logits without sklearn's per-call machinery.

An agent classifies one message at a time. For one text, sklearn's ``FeatureUnion.transform``
and ``decision_function`` spend nearly all their time in joblib dispatch, parameter
validation and sparse-matrix construction, not in arithmetic: about 1.5 ms per message on
a 150-intent model, growing with load. ``OneTextScorer`` (``corral.intent.compiled``)
computes the same numbers directly from the fitted vectorizers and regression: count the
analyzer's tokens that are in the vocabulary, apply the sublinear tf and idf weights and
the l2 norm of each vectorizer, and take the regression's weights of those columns only.
The result equals sklearn's up to float summation order (checked in
tests/test_classifier_fast_path.py).

Only what ``corral.intent.classifier`` fits is supported: ``TfidfVectorizer`` with l2 or
no norm, alone or in a ``FeatureUnion`` without weights; :func:`scorer_for` returns
``None`` for anything else and the caller keeps sklearn's path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion

from corral.intent.compiled import Block, CharWbAnalyzer, OneTextScorer, WordAnalyzer

PROBES = (
    "",
    "  Hello,  WORLD  ",
    "我的快递到哪了 OD2611200002",
    "a\tb\nc  d\u3000e",
    "Straße ÉCOLE İstanbul",
    "x",
    "don't stop-me now!! 12.50 元",
    "a\x1cb\x1dc\x1ed\x1ff\x85g\u2028h\u2029i\u200bj\ufeffk\xa0l",
    "ẞ ǅ ﬁ ς İ\u0307",
    "w" * 300,
)
"""Texts an own analyzer must also split as sklearn's does (``_own_analyzer``)."""


def _vectorizers(features: Any) -> list[TfidfVectorizer] | None:
    if isinstance(features, TfidfVectorizer):
        return [features]
    if not isinstance(features, FeatureUnion) or features.transformer_weights:
        return None
    found = [step for _, step in features.transformer_list]
    if all(isinstance(step, TfidfVectorizer) for step in found):
        return found
    return None


def _own_analyzer(
    vectorizer: TfidfVectorizer, check: Sequence[str]
) -> CharWbAnalyzer | WordAnalyzer | None:
    """The own analyzer for ``vectorizer``, if it splits ``check`` as sklearn's does.

    Only plain settings have one (no preprocessor, tokenizer, accent stripping or stop
    words); it is compared with sklearn's own analyzer on ``check`` and ``PROBES``.
    """
    plain = (
        vectorizer.preprocessor is None
        and vectorizer.tokenizer is None
        and not vectorizer.strip_accents
        and vectorizer.stop_words is None
        and vectorizer.input == "content"
    )
    if not plain:
        return None
    ngrams = tuple(vectorizer.ngram_range)
    own: CharWbAnalyzer | WordAnalyzer
    if vectorizer.analyzer == "char_wb":
        own = CharWbAnalyzer((ngrams[0], ngrams[1]), bool(vectorizer.lowercase))
    elif vectorizer.analyzer == "word" and vectorizer.token_pattern:
        own = WordAnalyzer(
            vectorizer.token_pattern, (ngrams[0], ngrams[1]), bool(vectorizer.lowercase)
        )
    else:
        return None
    theirs = vectorizer.build_analyzer()
    if all(own(text) == list(theirs(text)) for text in (*check, *PROBES)):
        return own
    return None


def scorer_for(
    features: Any, model: LogisticRegression, check: Sequence[str] | None = None
) -> OneTextScorer | None:
    """A scorer for these fitted parts, or ``None`` when they are not ones it reproduces.

    With ``check`` (the texts the model was fitted on), each vectorizer's analyzer is
    corral's own when it splits them as sklearn's does, so the scorer needs no sklearn
    object (``OneTextScorer.portable``); without, sklearn's analyzers are used.
    """
    vectorizers = _vectorizers(features)
    if vectorizers is None or not isinstance(model, LogisticRegression):
        return None
    blocks: list[Block] = []
    offset = 0
    for vectorizer in vectorizers:
        if vectorizer.norm not in ("l2", None) or vectorizer.binary:
            return None
        own = _own_analyzer(vectorizer, check) if check is not None else None
        analyze: Callable[[str], Sequence[str]] = own or vectorizer.build_analyzer()
        blocks.append(
            Block(
                analyze=analyze,
                vocabulary=vectorizer.vocabulary_,
                idf=vectorizer.idf_ if vectorizer.use_idf else None,
                sublinear=vectorizer.sublinear_tf,
                l2=vectorizer.norm == "l2",
                offset=offset,
            )
        )
        offset += len(vectorizer.vocabulary_)
    return OneTextScorer(tuple(blocks), model.coef_, model.intercept_)

"""Capability matching (seed 004 §2.1): tools found by similarity to their descriptions.

The index is TF-IDF over character n-grams of each tool's name and description, so
Chinese and English queries both work. Retrieval proposes candidates; hard constraints
from config then filter them (``tool_constraints``), and health and cost rank the rest.

It is sklearn's ``TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4),
sublinear_tf=True)`` computed with numpy, as ``corral.intent.compiled`` weighs a message
(``tests/test_sklearn_free_start.py`` checks the scores against sklearn's): a handful of
tool descriptions need none of sklearn, whose import took a second at every start of a
command whose agent matches capabilities. It is offered with the ``ml`` extra all the
same (``corral[ml]``); without scikit-learn, ``CapabilityIndex.build`` returns ``None``
and candidates come from declared equivalence groups only.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from corral.tools.registry import ToolRegistry
from corral.tools.spec import ToolSpec


def interchangeable(a: ToolSpec, b: ToolSpec) -> bool:
    """Same parameters and same output model: one can run a step planned for the other."""
    return (
        set(a.input_model.model_fields) == set(b.input_model.model_fields)
        and a.returns == b.returns
    )


if TYPE_CHECKING:
    from corral.intent.compiled import Block

NGRAMS = (2, 4)
"""The character n-grams of the index (inside words, as sklearn's ``char_wb``)."""


@dataclass
class CapabilityIndex:
    """Tool names and descriptions, vectorised once per agent."""

    names: list[str]
    block: Block
    """The analyzer, vocabulary and idf weights of the tools' descriptions."""
    matrix: Any
    """One l2-normalised row of tf-idf weights per tool (numpy, imported with the index)."""

    @classmethod
    def build(cls, registry: ToolRegistry) -> CapabilityIndex | None:
        """Index every tool; ``None`` when scikit-learn is not installed."""
        if find_spec("sklearn") is None:
            return None
        specs = list(registry)
        if not specs:
            return None
        import numpy as np

        from corral.intent.compiled import Block, CharWbAnalyzer, tf_idf

        analyze = CharWbAnalyzer(NGRAMS, lowercase=True)
        documents = [f"{s.name.replace('_', ' ')} {s.description}" for s in specs]
        grams = [set(analyze(document)) for document in documents]
        vocabulary = {gram: i for i, gram in enumerate(sorted(set().union(*grams)))}
        frequency = np.zeros(len(vocabulary))
        for found in grams:
            frequency[[vocabulary[gram] for gram in found]] += 1
        idf = np.log((1 + len(specs)) / (1 + frequency)) + 1  # sklearn's smooth idf
        block = Block(analyze, vocabulary, idf, sublinear=True, l2=True, offset=0)
        matrix = np.zeros((len(specs), len(vocabulary)))
        for row, document in enumerate(documents):
            columns, weights = tf_idf(block, document)
            matrix[row, columns] = weights
        return cls([s.name for s in specs], block, matrix)

    def search(self, query: str, limit: int = 5) -> list[tuple[str, float]]:
        """Tools by cosine similarity to ``query``, best first."""
        from corral.intent.compiled import tf_idf

        columns, weights = tf_idf(self.block, query)
        scores = self.matrix[:, columns] @ weights
        ranked = sorted(zip(self.names, scores, strict=True), key=lambda item: -item[1])
        return [(name, round(float(score), 4)) for name, score in ranked[:limit]]

    def similarity(self, query: str) -> dict[str, float]:
        """Every tool's similarity to ``query``."""
        return dict(self.search(query, limit=len(self.names)))

"""Capability matching (seed 004 §2.1): tools found by similarity to their descriptions.

The index is TF-IDF over character n-grams of each tool's name and description, so
Chinese and English queries both work. Retrieval proposes candidates; hard constraints
from config then filter them (``tool_constraints``), and health and cost rank the rest.
It needs scikit-learn (``corral[ml]``); without it, ``CapabilityIndex.build`` returns
``None`` and candidates come from declared equivalence groups only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from corral.tools.registry import ToolRegistry
from corral.tools.spec import ToolSpec


def interchangeable(a: ToolSpec, b: ToolSpec) -> bool:
    """Same parameters and same output model: one can run a step planned for the other."""
    return (
        set(a.input_model.model_fields) == set(b.input_model.model_fields)
        and a.returns == b.returns
    )


@dataclass
class CapabilityIndex:
    """Tool names and descriptions, vectorised once per agent."""

    names: list[str]
    vectorizer: Any
    matrix: Any

    @classmethod
    def build(cls, registry: ToolRegistry) -> CapabilityIndex | None:
        """Index every tool; ``None`` when scikit-learn is not installed."""
        try:
            from sklearn.feature_extraction.text import TfidfVectorizer
        except ImportError:
            return None
        specs = list(registry)
        if not specs:
            return None
        documents = [f"{s.name.replace('_', ' ')} {s.description}" for s in specs]
        vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True)
        matrix = vectorizer.fit_transform(documents)
        return cls([s.name for s in specs], vectorizer, matrix)

    def search(self, query: str, limit: int = 5) -> list[tuple[str, float]]:
        """Tools by cosine similarity to ``query``, best first."""
        scores = (self.matrix @ self.vectorizer.transform([query]).T).toarray().ravel()
        ranked = sorted(zip(self.names, scores, strict=True), key=lambda item: -item[1])
        return [(name, round(float(score), 4)) for name, score in ranked[:limit]]

    def similarity(self, query: str) -> dict[str, float]:
        """Every tool's similarity to ``query``."""
        return dict(self.search(query, limit=len(self.names)))

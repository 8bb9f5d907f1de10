"""Intent classifier latency at 150 intents: corral's predict path against sklearn's own.

    PYTHONPATH=src .venv/bin/python benchmarks/classifier_scale.py \
        [--data ../shared/data/banking77] [--per-intent 100] [--messages 0] [--quick]

150 intents: the 77 of BANKING77 (CC BY 4.0; ``train.csv`` and ``test.csv`` with
``text,category`` columns, read from ``--data``) plus 73 synthetic ones built from
templates (verbs x objects of other domains: travel, home, health, ...), so that the
label space is the size the issue measured. corral's classifier is trained once; then each
test message is classified alone, as an agent classifies one message at a time, through:

- the baseline: sklearn's pipeline, ``model.decision_function(features.transform([text]))``
  and the calibrated softmax, which is what ``classify`` did before;
- corral's ``IntentClassifierModel.classify``.

Prints ms per message (p50 / p95 / mean), accuracy on the test split for both (all, the
BANKING77 test split alone, the synthetic intents alone), and how many predictions differ
(the fast path must give the same labels).
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from corral.intent.classifier import IntentClassifierModel, _softmax
from corral.intent.datasets import LabelledTexts

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "banking77"

DOMAINS = {
    "flight": ["flight", "plane ticket", "boarding pass", "seat", "layover"],
    "hotel": ["hotel room", "reservation", "room booking", "late checkout", "suite"],
    "car": ["rental car", "car hire", "pickup time", "car insurance", "child seat"],
    "weather": ["forecast", "weather", "rain outlook", "temperature", "storm warning"],
    "music": ["playlist", "song", "album", "radio station", "podcast"],
    "home": ["thermostat", "lights", "alarm system", "smart plug", "vacuum robot"],
    "health": ["doctor appointment", "prescription", "vaccine slot", "lab results", "dentist"],
    "food": ["dinner order", "pizza delivery", "table for two", "grocery list", "recipe"],
    "work": ["meeting", "calendar invite", "timesheet", "vacation request", "expense report"],
    "utility": ["electricity bill", "water meter", "internet plan", "gas supply", "phone plan"],
}
ACTIONS = {
    "book": ["book", "reserve", "get me", "arrange", "set up"],
    "cancel": ["cancel", "call off", "drop", "scrap", "undo"],
    "change": ["change", "move", "reschedule", "modify", "update"],
    "status": ["check the status of", "track", "where is", "what happened to", "look up"],
    "price": ["how much is", "what does it cost for", "price of", "quote for", "fee for"],
    "complain": [
        "complain about",
        "report a problem with",
        "something is wrong with",
        "I am unhappy with",
        "there is an issue with",
    ],
    "help": ["help me with", "explain", "how does it work", "tell me about", "info on"],
    "remind": [
        "remind me about",
        "set a reminder for",
        "alert me about",
        "notify me on",
        "ping me about",
    ],
}
FRAMES = [
    "{a} my {o}",
    "can you {a} the {o}",
    "i need to {a} my {o} please",
    "please {a} {o} for tomorrow",
    "could you {a} my {o} asap",
    "{a} {o}",
    "hey, {a} the {o} for me",
    "i'd like to {a} a {o}",
    "is it possible to {a} my {o} today",
    "want to {a} {o} this week",
]
FILLER = ["", "", "", " thanks", " right now", " if you can", " quickly", " again", " today"]


def synthetic(count: int, per_intent: int, seed: int) -> tuple[LabelledTexts, LabelledTexts]:
    """``count`` intents named ``<domain>_<action>``: train and test examples for each."""
    rng = random.Random(seed)
    pairs = [(d, a) for d in DOMAINS for a in ACTIONS][:count]
    train, test = LabelledTexts(), LabelledTexts()
    for domain, action in pairs:
        label = f"{domain}_{action}"
        seen: set[str] = set()
        texts: list[str] = []
        for _ in range(per_intent * 20):
            if len(texts) >= per_intent + per_intent // 3:
                break
            text = rng.choice(FRAMES).format(
                a=rng.choice(ACTIONS[action]), o=rng.choice(DOMAINS[domain])
            ) + rng.choice(FILLER)
            if text not in seen:
                seen.add(text)
                texts.append(text)
        cut = len(texts) * 3 // 4
        train.texts.extend(texts[:cut])
        train.labels.extend([label] * cut)
        test.texts.extend(texts[cut:])
        test.labels.extend([label] * (len(texts) - cut))
    return train, test


def read_banking77(path: Path, per_intent: int) -> LabelledTexts:
    """At most ``per_intent`` examples of each BANKING77 category, in file order."""
    if not path.is_file():
        sys.exit(f"BANKING77 file not found: {path} (pass --data DIR with train.csv, test.csv)")
    kept = LabelledTexts()
    counts: dict[str, int] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            label = row["category"]
            if counts.get(label, 0) < per_intent:
                counts[label] = counts.get(label, 0) + 1
                kept.texts.append(row["text"])
                kept.labels.append(label)
    return kept


def sklearn_path(model: IntentClassifierModel, text: str) -> tuple[str, float]:
    """The baseline: sklearn's FeatureUnion and decision_function on one message."""
    logits = model.model.decision_function(model.features.transform([text]))
    probs = _softmax(logits, model.temperature)[0]
    best = int(probs.argmax())
    return model.labels[best], float(probs[best])


def corral_path(model: IntentClassifierModel, text: str) -> tuple[str, float]:
    result = model.classify(text)
    assert result is not None  # no oos class and no threshold here
    return result.label, result.confidence


def timed(
    predict: Any, model: IntentClassifierModel, texts: list[str]
) -> tuple[list[float], list[str]]:
    millis: list[float] = []
    labels: list[str] = []
    for text in texts:
        started = time.perf_counter()
        label, _ = predict(model, text)
        millis.append((time.perf_counter() - started) * 1000)
        labels.append(label)
    return millis, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT, help="BANKING77 folder (CSV)")
    parser.add_argument("--per-intent", type=int, default=100, help="training examples each")
    parser.add_argument("--messages", type=int, default=0, help="test messages timed (0: all)")
    parser.add_argument("--intents", type=int, default=150)
    parser.add_argument("--quick", action="store_true", help="20 examples each, 200 messages")
    args = parser.parse_args()
    if args.quick:
        args.per_intent, args.messages = 20, 200
    bank_train = read_banking77(args.data / "train.csv", args.per_intent)
    bank_test = read_banking77(args.data / "test.csv", 10**9)
    extra = args.intents - len(set(bank_train.labels))
    syn_train, syn_test = synthetic(extra, args.per_intent, seed=7)
    train, test = bank_train + syn_train, bank_test + syn_test
    order = list(range(len(test)))
    random.Random(3).shuffle(order)
    order = order[: args.messages or None]
    from_bank = [i < len(bank_test) for i in order]
    texts = [test.texts[i] for i in order]
    truth = [test.labels[i] for i in order]
    started = time.perf_counter()
    model = IntentClassifierModel.fit(train)
    train_s = time.perf_counter() - started
    for predict in (sklearn_path, corral_path):  # warm both (first-call imports, caches)
        predict(model, texts[0])
    results = {}
    for name, predict in (("sklearn pipeline (baseline)", sklearn_path), ("corral", corral_path)):
        results[name] = timed(predict, model, texts)
    table = Table(
        title=f"{len(model.labels)} intents, {len(train)} training examples, "
        f"{len(texts)} messages one at a time (train {train_s:.1f} s)"
    )
    columns = ("predict path", "p50 ms", "p95 ms", "mean ms", "accuracy %")
    columns += ("BANKING77 %", "synthetic %")
    for column in columns:
        table.add_column(column, justify="right")
    for name, (millis, labels) in results.items():
        right = np.array([p == t for p, t in zip(labels, truth, strict=True)])
        bank = np.array(from_bank)
        table.add_row(
            name,
            f"{statistics.median(millis):.3f}",
            f"{np.percentile(millis, 95):.3f}",
            f"{statistics.fmean(millis):.3f}",
            f"{right.mean() * 100:.1f}",
            f"{right[bank].mean() * 100:.1f}" if bank.any() else "–",
            f"{right[~bank].mean() * 100:.1f}" if (~bank).any() else "–",
        )
    Console(width=None if sys.stdout.isatty() else 140).print(table)
    base, fast = (labels for _, labels in results.values())
    differ = sum(a != b for a, b in zip(base, fast, strict=True))
    Console().print(f"predictions that differ between the two paths: {differ} of {len(texts)}")


if __name__ == "__main__":
    main()

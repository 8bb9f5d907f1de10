"""Valid-plan rate of the repair pipeline on a real local model (SmolLM2-135M, GGUF).

    bash scripts/venv.sh local      # builds llama-cpp-python (6-20 minutes the first time)
    .venv/bin/python benchmarks/local_planner.py [--n 10] [--max-tokens 300]

Each request asks the model planner for a plan (grammar-constrained JSON). For every raw
output the table counts: parses as JSON without repair; valid after repair against the
plan schema; passes static validation (tools, dependencies, references, types) and the
grounding check; and, with the pipeline's re-asks (at most 2), how many requests ended with
a valid plan and how many re-asks that took. The baseline is the raw first answer.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral import Agent, parse_config
from corral.errors import CorralError
from corral.models.resolve import resolve_model
from corral.models.structured import Attempt, ask_structured, parse_json
from corral.planning.model_planner import draft_model, plan_problems, plan_request
from tests.test_models import CONFIG, forecast, lookup

MESSAGES = [
    "weather for order A{n} tomorrow?",
    "will it rain where order A{n} is shipped?",
    "A{n}: do I need an umbrella at the delivery city?",
    "weather at the city of order A{n}",
    "check order A{n} and tell me the forecast there",
]


async def main(n: int, max_tokens: int) -> None:
    model = resolve_model("local:smollm2")
    agent = Agent.build(parse_config(CONFIG), [lookup, forecast], model=model)
    context = agent.plan_context("ask")
    tools = [agent.tools.get(t) for t in ("forecast", "lookup")]
    output = draft_model(tools, 10)
    raw_json = repaired_ok = valid_first = final_valid = reasks = 0

    async def call(m, request):  # type: ignore[no-untyped-def]
        return await m.complete(request)

    for i in range(n):
        message = MESSAGES[i % len(MESSAGES)].format(n=i + 1)
        entities = {"order_id": f"A{i + 1}"}
        request = dataclasses.replace(
            plan_request(message, "ask", tools, entities, 10, 0.0), max_tokens=max_tokens
        )
        attempts: list[Attempt] = []
        try:
            await ask_structured(
                model,
                request,
                output,
                call,
                attempts.append,
                check=lambda d, m=message, e=entities: plan_problems(d, "ask", context, m, e),
            )
            final_valid += 1
        except CorralError:  # invalid after the re-asks, or the model failed
            pass
        if not attempts:
            continue
        first = attempts[0]
        try:
            json.loads(first.response.text)
            raw_json += 1
        except json.JSONDecodeError:
            pass
        try:
            output.model_validate(parse_json(first.response.text)[0])
            repaired_ok += 1
        except ValueError:
            pass
        valid_first += first.accepted
        reasks += len(attempts) - 1
        print(
            f"request {i + 1}/{n}: {len(attempts)} attempts, first accepted: "
            f"{first.accepted}, repaired: {first.repaired}",
            flush=True,
        )
    table = Table(title=f"SmolLM2-135M planner, {n} requests")
    table.add_column("measure")
    table.add_column("rate", justify="right")
    for name, value in [
        ("raw output parses as JSON (baseline)", raw_json),
        ("valid plan schema after repair", repaired_ok),
        ("first answer passes static validation and grounding", valid_first),
        ("valid plan after repair and ≤ 2 re-asks", final_valid),
    ]:
        table.add_row(name, f"{value}/{n} = {value / n:.0%}")
    table.add_row("re-asks used", str(reasks))
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=300,
        help="per answer; a 135M model loops until the limit, 300 fits 3 steps",
    )
    args = parser.parse_args()
    asyncio.run(main(args.n, args.max_tokens))

"""Tokens per model call on a 10-step task: corral's context budget against full history.

    .venv/bin/python benchmarks/context_budget.py [--steps 10] [--budget 1500]

Each step's tool returns a realistic order/logistics payload (~0.5 KB). Before each step a
layer asks the model once (a judge or replan prompt). The baseline sends the whole history
(every earlier prompt, answer and raw payload), as a single-prompt agent does; corral sends
the goal, the known entities, the rolling one-line summaries within the budget, and the
current result only. Tokens are counted with corral's estimator for both (no model needed).
"""

from __future__ import annotations

import argparse
import json
import statistics

from rich.console import Console
from rich.table import Table

from corral.models.base import Message, ModelRequest, estimate_tokens
from corral.models.context import clip, fit_summaries
from corral.verify.judge import judge_request

GOAL = "我上周买的耳机到哪了？订单号 OD2611200002，顺便看看能不能改地址"
ENTITIES = {"order_id": "OD2611200002", "product": "earphones"}


def payload(step: int) -> dict[str, object]:
    return {
        "order_id": "OD2611200002",
        "step": step,
        "carrier": "顺丰速运",
        "events": [
            {
                "ts": f"2026-11-{20 + i:02d} 09:{i:02d}",
                "location": f"转运中心 {i}",
                "event": "到达集散中心，正在分拣，预计明天派送",
            }
            for i in range(4)
        ],
        "address": "北京市朝阳区建国路 1 号",
        "status": "shipped",
        "amount_cny": 459,
    }


def tokens(request: ModelRequest) -> int:
    return sum(estimate_tokens(m.content) for m in request.messages)


def main(steps: int, budget: int) -> None:
    history: list[Message] = [Message("user", GOAL)]
    summaries: list[str] = []
    full, fenced = [], []
    for step in range(1, steps + 1):
        data = payload(step)
        criterion = "the parcel is moving and the address is complete"
        # Baseline: everything so far plus this result, in one growing conversation.
        history.append(
            Message("user", f"step {step} result: {json.dumps(data, ensure_ascii=False)}")
        )
        baseline = ModelRequest("judge", (Message("system", "You are an agent."), *history))
        full.append(tokens(baseline))
        history.append(Message("assistant", '{"passed": true, "reason": "ok"}'))
        # corral: the judge's slice, with the rolling summaries inside the budget.
        request = judge_request(criterion, "get_logistics", data)
        context = " | ".join(fit_summaries(summaries, budget // 2))
        sliced = ModelRequest(
            "judge",
            (*request.messages, Message("user", clip(f"{GOAL} {ENTITIES} {context}", budget // 2))),
        )
        fenced.append(tokens(sliced))
        summaries.append(f"s{step} get_logistics: shipped, 顺丰速运, 转运中心 3")
    table = Table(title=f"{steps}-step task, context budget {budget} tokens")
    for column in ("call", "full history", "corral slice"):
        table.add_column(column, justify="right")
    for i, (a, b) in enumerate(zip(full, fenced, strict=True), start=1):
        table.add_row(str(i), str(a), str(b))
    table.add_row("mean", f"{statistics.fmean(full):.0f}", f"{statistics.fmean(fenced):.0f}")
    table.add_row("total", str(sum(full)), str(sum(fenced)))
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--budget", type=int, default=1500)
    args = parser.parse_args()
    main(args.steps, args.budget)

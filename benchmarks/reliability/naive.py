"""The baseline: a "puppet agent" (seed 000, 木偶Agent) written the way such agents are.

One prompt with the tool list, and a loop that calls whatever tool the model names with
whatever arguments it gives, up to ``max_turns`` turns, retrying any error, then replies
with whatever the model says. It keeps no durable state: a crash starts the case over.

Fairness: its tools are the same agent's tools, behind the same ``FaultInjector`` (same
profile, seed and case name: the n-th call of a tool meets the same fault corral's n-th
call meets), and its model answers pass through the same injector, so model faults strike
it too. Its model is a ``ScriptedModel`` that replays what corral did on the case with no
faults (``Behaviour``): it names those calls in turn, ignoring their results as a puppet's
model does, then says the work is done. Its transcript is judged by the same
``ReliabilityReport`` as corral's.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from corral.hashing import stable_hash
from corral.models.base import Message, ModelRequest
from corral.models.scripted import ScriptedModel
from corral.testing.faults import FaultInjector, SimulatedCrash
from corral.testing.reliability import CallRecord, Claim, Transcript
from corral.tools.context import ToolContext

if TYPE_CHECKING:
    from corral.agent import Agent
    from corral.contracts import Language
    from corral.models.base import Model
    from corral.testing.evaluation import EvalCase
    from corral.tools.spec import ToolSpec

DONE = {"zh": "已为您办理完成。", "en": "Done: your request has been completed."}
_CJK = re.compile(r"[\u4e00-\u9fff]")
_BLOCK = re.compile(r"\{.*\}", re.DOTALL)
_SAYS_DONE = re.compile(r"done|complet|success|完成|成功", re.IGNORECASE)
"""A reply that tells the user the work happened."""


@dataclass(frozen=True)
class Behaviour:
    """What corral did on one case with no faults: the calls in order, and whether it passed.

    The naive model replays it, so both agents are asked for the same work.
    """

    calls: tuple[tuple[str, dict[str, Any]], ...]
    passed: bool


def language(texts: list[str]) -> Language:
    """``zh`` when the user wrote Chinese, else ``en``: the language of the "done" answer."""
    return "zh" if any(_CJK.search(t) for t in texts) else "en"


def _parse(text: str) -> dict[str, Any] | None:
    """The JSON object in the answer (prose around it tolerated, as puppets do), or None."""
    for candidate in (text, *(m.group(0) for m in _BLOCK.finditer(text))):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


@dataclass
class NaiveAgent:
    """One case's puppet loop over ``agent``'s tools, through ``effects``."""

    agent: Agent
    effects: FaultInjector
    behaviour: Behaviour
    max_turns: int = 0
    """0: twice the recorded calls, plus four."""
    max_retries: int | None = None
    """Retries of a failed call; ``None``: the tool's own policy, corral's budget too."""
    restarts: int = 3
    """How often a crashed case is started over from its first message."""
    _position: int = 0
    _calls: list[CallRecord] = field(default_factory=list)
    _drive_from: int = 0
    """Where the last drive's calls start (a crash starts a new drive)."""
    _tool_calls: int = 0
    _tokens: int = 0
    _done: str = ""
    _language: Language = "zh"
    model: Model | None = None
    """A real model (``--real-model``) instead of the recorded behaviour."""
    _model: Model = field(init=False)
    _asked: int = 0

    def __post_init__(self) -> None:
        self._model = self.model or ScriptedModel(function=self._answer, name="naive-scripted")
        if not self.max_turns:
            self.max_turns = 2 * len(self.behaviour.calls) + 4

    def _answer(self, _request: ModelRequest) -> str:
        """The scripted model: the next recorded call, or the "done" answer."""
        if self._position < len(self.behaviour.calls):
            tool, args = self.behaviour.calls[self._position]
            return json.dumps({"tool": tool, "args": args}, ensure_ascii=False)
        return json.dumps({"text": self._done}, ensure_ascii=False)

    async def run(self, case: EvalCase) -> Transcript:
        """Play ``case``; a crash starts it over (nothing was kept)."""
        started = time.perf_counter()
        self._language = language(case.messages)
        self._done = DONE[self._language]
        reply = ""
        for _ in range(self.restarts + 1):
            self._drive_from = len(self._calls)
            try:
                reply = await self._drive(case)
                break
            except SimulatedCrash:  # a new process starts the case over, with live effects
                self._position = 0
                self.effects = self.effects.reborn()
        return self._transcript(case, reply, time.perf_counter() - started)

    async def _drive(self, case: EvalCase) -> str:
        tools = "\n".join(
            f"- {s.name}({', '.join(s.input_model.model_fields)}): {s.description}"
            for s in self.agent.tools
        )
        prompt = (
            f"You are a helpful agent. Tools:\n{tools}\nAnswer with JSON: "
            '{"tool": NAME, "args": {...}} to call a tool, or {"text": REPLY} when done.'
        )
        history = [Message("system", prompt), *(Message("user", t) for t in case.messages)]
        for _ in range(self.max_turns):
            request = ModelRequest("naive", tuple(history), max_tokens=256)
            self._asked += 1
            response = await self.effects.call_model(self._model, request)
            self._tokens += response.usage.total
            history.append(Message("assistant", response.text))
            data = _parse(response.text)
            if data is None or "tool" not in data:  # whatever the model says is the reply
                return str(data.get("text", response.text)) if data else response.text
            result = await self._call(case, data.get("tool"), data.get("args"))
            history.append(Message("user", f"tool result: {result}"))
        return "Done."  # out of turns: a puppet still tells the user it is done

    async def _call(self, case: EvalCase, tool: Any, args: Any) -> str:
        """Call the named tool, retrying any error; ``args`` as given."""
        spec = next((s for s in self.agent.tools if s.name == tool), None)
        if spec is None or not isinstance(args, dict):
            return f"error: no tool {tool!r}"  # the model is told; it says the next thing
        self._position += 1
        key = _key(case, spec.name, args)
        error = ""
        retries = spec.policy.retry.max_retries if self.max_retries is None else self.max_retries
        for _ in range(retries + 1):
            self._tool_calls += 1
            try:
                output = await self._attempt(spec, args, key)
            except Exception as exc:  # the puppet retries any error
                error = f"{type(exc).__name__}: {exc}"
                continue
            self._record(spec, args, key, succeeded=True, output=output)
            return json.dumps(output, ensure_ascii=False, default=str)
        self._record(spec, args, key, succeeded=False, output=None)
        return f"error: {error}"

    async def _attempt(self, spec: ToolSpec, args: dict[str, Any], key: str) -> Any:
        validated = spec.input_model.model_validate(args)
        facts: dict[str, Any] = {}  # what its conversation holds: every result so far
        for call in self._calls:
            if call.succeeded and isinstance(call.output, dict):
                facts.update(call.output)
        renderer, lang = self.agent.renderer, self._language
        context = ToolContext(
            run_id="naive",
            step_id=spec.name,
            idempotency_key=key,
            deps=self.agent.deps,
            facts=facts,
            language=lang,
            received_at=self.effects.now(),
            render=lambda name, values: renderer.render(name, values, lang),
        )
        try:
            output = await self.effects.call_tool(spec, validated, context, spec.policy.timeout_s)
        except SimulatedCrash:
            self._record(spec, args, key, succeeded=False, output=None)  # it had called it
            raise
        return output.model_dump(mode="json") if hasattr(output, "model_dump") else output

    def _record(
        self, spec: ToolSpec, args: dict[str, Any], key: str, *, succeeded: bool, output: Any
    ) -> None:
        write = spec.policy.kind == "write"
        self._calls.append(CallRecord(spec.name, args, write, key, succeeded, output))

    def _transcript(self, case: EvalCase, reply: str, wall_s: float) -> Transcript:
        """Judged like corral: success is the recorded work done, by the last drive.

        A reply that says the work is done claims every write of the work as applied: each
        write it called, and each recorded write it never got to (its model lost the turn).
        Any other reply (a refusal, an empty answer) claims nothing.
        """
        last = [(c.tool, c.args) for c in self._calls[self._drive_from :] if c.succeeded]
        passed = self.behaviour.passed and last == list(self.behaviour.calls) and bool(reply)
        writes = {s.name for s in self.agent.tools if s.policy.kind == "write"}
        called = {(c.tool, c.key) for c in self._calls}
        missed = [
            CallRecord(tool, args, True, _key(case, tool, args), succeeded=False)
            for tool, args in self.behaviour.calls
            if tool in writes and (tool, _key(case, tool, args)) not in called
        ]
        claim: Claim = "applied" if _SAYS_DONE.search(reply) else "none"
        calls = [c if not c.write else replace(c, claim=claim) for c in [*self._calls, *missed]]
        # the recorded behaviour's arguments count as given; a real model's do not (a write
        # it never called is a claim, not a call: its recorded arguments invent nothing)
        given = [c.args for c in missed] if self.model else [a for _, a in self.behaviour.calls]
        return Transcript(
            case.name, case.tier, passed, False, list(case.messages),
            calls, given, [], self.effects.ledger, self._tool_calls,
            self._asked, self._tokens, 0.0, wall_s,
        )  # fmt: skip


def _key(case: EvalCase, tool: str, args: dict[str, Any]) -> str:
    """The idempotency key of a logical operation: case, tool and arguments."""
    return stable_hash([case.name, tool, args], 32)

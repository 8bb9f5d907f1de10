"""Fault injection at the effects boundary: seeded, reproducible, no agent code changed.

A ``FaultProfile`` says how often each kind of fault strikes a tool call or a model answer.
``FaultInjector`` wraps any ``Effects`` and, for the n-th call of a tool (or the n-th
model call of a layer) in a case, draws the fault from a generator seeded with
(profile seed, case, tool or layer, n). The same case therefore meets the same faults
whatever agent runs it and whatever else runs beside it: corral and the benchmark's naive
agent face identical schedules.

What each tool fault does, and whether the real tool was entered (its effect happened):

=================  =======================================================  =========
kind               what the caller sees                                     entered
=================  =======================================================  =========
``timeout_before`` ``TimeoutError`` before the tool starts                  no
``transient``      ``TransientToolError(applied=False)`` (503, refused)     no
``permanent``      ``ToolFailedError`` (a business refusal)                 no
``ambiguous``      ``ConnectionResetError`` after the tool acted            yes
``timeout_after``  ``TimeoutError`` after the tool acted (answer lost)      yes
``malformed``      the tool acted, its answer comes back partial            yes
``slow``           the answer comes ``slow_s`` late (a timeout if longer    yes/no
                   than the tool's)
``crash``          the process dies right after the tool acted              yes
=================  =======================================================  =========

A model fault rewrites the model's answer: malformed JSON, prose around the JSON, an
unregistered tool, a cyclic or over-long plan, wrong argument types, invented ids and
dates, an answer that contradicts a tool result, an empty answer, a refusal. A fault that
does not fit the answer (a cyclic plan for an intent answer) is not injected and not
counted.

The ``FaultLedger`` is the instrument: every fault injected, and every time the real tool
was entered, per tool and idempotency key. "Entered twice for one key" is counted here,
inside the boundary, not by counting rows a tool wrote.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from corral.effects import WrappedEffects
from corral.errors import ConfigInvalidError, ToolFailedError, TransientToolError
from corral.hashing import stable_hash
from corral.models.base import PURPOSES, ModelResponse
from corral.safe_yaml import read_yaml_file
from corral.tools.invoke import effect_applied
from corral.validation import validation_problems

if TYPE_CHECKING:
    from corral.models.base import Model, ModelRequest
    from corral.tools.context import ToolContext
    from corral.tools.spec import ToolSpec

ToolFault = Literal[
    "timeout_before",
    "transient",
    "permanent",
    "ambiguous",
    "timeout_after",
    "malformed",
    "slow",
]
ModelFault = Literal[
    "malformed_json",
    "prose",
    "unknown_tool",
    "cyclic_plan",
    "long_plan",
    "wrong_types",
    "invented_ids",
    "contradiction",
    "empty",
    "refusal",
]
TOOL_FAULTS: tuple[ToolFault, ...] = ToolFault.__args__  # type: ignore[attr-defined]
MODEL_FAULTS: tuple[ModelFault, ...] = ModelFault.__args__  # type: ignore[attr-defined]
ENTERED = frozenset({"ambiguous", "timeout_after", "malformed", "slow", "crash"})
"""Faults that let the call reach the real tool: its effect happened."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Rate = Annotated[float, Field(ge=0, le=1)]
"""A probability."""


class ToolFaultRates(_Strict):
    """The chance that one tool call meets each fault (together at most 1)."""

    timeout_before: Rate = 0.0
    transient: Rate = 0.0
    permanent: Rate = 0.0
    ambiguous: Rate = 0.0
    timeout_after: Rate = 0.0
    malformed: Rate = 0.0
    slow: Rate = 0.0
    slow_s: float = Field(2.0, gt=0)
    """How late a slow answer comes (effects time: a test clock does not really wait)."""


class ModelFaultRates(_Strict):
    """The chance that one model answer is rewritten by each fault (together at most 1)."""

    malformed_json: Rate = 0.0
    prose: Rate = 0.0
    unknown_tool: Rate = 0.0
    cyclic_plan: Rate = 0.0
    long_plan: Rate = 0.0
    wrong_types: Rate = 0.0
    invented_ids: Rate = 0.0
    contradiction: Rate = 0.0
    empty: Rate = 0.0
    refusal: Rate = 0.0


class CrashRule(_Strict):
    """Kill the run's process right after a tool acted, before anything was recorded."""

    rate: Rate = 0.0
    """The chance that a case crashes once (at most once per case)."""
    writes_only: bool = True
    """Crash only after a write tool acted: the point where exactly-once is at stake."""


class FaultProfile(_Strict):
    """How often each fault strikes; named (``flaky-10``) or read from a YAML file."""

    name: str = "custom"
    description: str = ""
    tools: ToolFaultRates = ToolFaultRates()
    models: ModelFaultRates = ModelFaultRates()
    crash: CrashRule = CrashRule()
    at: dict[str, list[str | None]] = Field(default_factory=dict)
    """Faults at chosen calls, before any rate: target (a tool, or ``model:LAYER``) -> the
    fault of its 1st, 2nd... call (``null``: none). ``crash`` after a tool's call kills
    the process there: ``{create_exchange_order: [crash]}``."""
    only_tools: tuple[str, ...] = ()
    """Tools the tool faults strike (empty: every read and write; ``compute`` tools are
    local functions and never meet infrastructure faults)."""

    def model_post_init(self, _context: Any) -> None:
        """Reject rates that add up past 1 and faults that do not exist."""
        for target, kinds in self.at.items():
            model = target.startswith("model:")
            if model and target.removeprefix("model:") not in PURPOSES:
                raise ValueError(  # a typo (model:plann) struck nothing, and the eval passed
                    f"at.{target}: no layer asks a model as {target.removeprefix('model:')!r}; "
                    f"the layers: {', '.join(PURPOSES)}"
                )
            known = set(MODEL_FAULTS) if model else {*TOOL_FAULTS, "crash"}
            unknown = sorted({k for k in kinds if k is not None} - known)
            if unknown:
                what = "a model layer" if model else "a tool"
                raise ValueError(
                    f"at.{target}: {unknown} cannot strike {what}; known: {sorted(known)}"
                )
        for label, rates in (("tools", self.tools), ("models", self.models)):
            total = sum(v for k, v in rates.model_dump().items() if k != "slow_s")
            if total > 1.0 + 1e-9:
                raise ValueError(f"{label} fault rates add up to {total:g}, more than 1")

    @property
    def active(self) -> bool:
        """Whether any fault can strike."""
        return bool(self.tool_rates() or self.model_rates() or self.crash.rate)

    def tool_rates(self) -> dict[str, float]:
        """Fault -> rate, for the tool faults that can strike."""
        rates = self.tools.model_dump(exclude={"slow_s"})
        return {k: v for k, v in rates.items() if v > 0}

    def model_rates(self) -> dict[str, float]:
        """Fault -> rate, for the model faults that can strike."""
        return {k: v for k, v in self.models.model_dump().items() if v > 0}


def _flaky(percent: int) -> FaultProfile:
    """Infrastructure that fails ``percent`` % of tool calls, mostly retryable."""
    rate = percent / 100
    return FaultProfile(
        name=f"flaky-{percent}",
        description=f"{percent} % of tool calls fail: transient errors, timeouts before and "
        "after the effect, lost connections, slow answers",
        tools=ToolFaultRates(
            transient=rate * 0.4,
            timeout_before=rate * 0.2,
            ambiguous=rate * 0.2,
            timeout_after=rate * 0.1,
            slow=rate * 0.1,
            slow_s=0.5,
        ),
    )


def named_profiles() -> dict[str, FaultProfile]:
    """The profiles ``--faults`` knows by name."""
    share = 1 / len(MODEL_FAULTS)
    return {
        "none": FaultProfile(name="none", description="no faults"),
        "flaky-10": _flaky(10),
        "flaky-30": _flaky(30),
        "hostile-model": FaultProfile(
            name="hostile-model",
            description="every model answer is wrong in one of the ways models are wrong",
            models=ModelFaultRates(**dict.fromkeys(MODEL_FAULTS, share)),
        ),
        "crashy": FaultProfile(
            name="crashy",
            description="half the cases lose their process right after a write acted",
            crash=CrashRule(rate=0.5),
        ),
    }


def load_profile(name_or_path: str) -> FaultProfile:
    """A named profile, or one read from a YAML file; ``CONFIG_INVALID`` otherwise."""
    profiles = named_profiles()
    if name_or_path in profiles:
        return profiles[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise ConfigInvalidError(
            f"unknown fault profile {name_or_path!r}",
            hint=f"use one of {', '.join(profiles)} or a YAML file",
        )
    data = read_yaml_file(path) or {}
    if not isinstance(data, dict):
        raise ConfigInvalidError(f"{path}: a fault profile is a mapping")
    data.setdefault("name", path.stem)
    try:
        return FaultProfile.model_validate(data)
    except ValidationError as exc:
        raise ConfigInvalidError(f"{path}: {validation_problems(exc, 5)}") from None


class SimulatedCrash(BaseException):
    """The process "dies" here: nothing after this point is recorded.

    A ``BaseException``, so no ``except Exception`` on the way up (a tool's retry, a gate's
    guard) can handle it: like SIGKILL, it ends the drive. The eval then resumes the run
    from its store in a fresh ``Runtime``, as a restarted process would.
    """


@dataclass(frozen=True)
class InjectedFault:
    """One fault that struck: where (a tool or a model layer), which, and the call's number."""

    target: str
    kind: str
    call: int


@dataclass
class FaultLedger:
    """What was injected, and how often each write was really entered, per idempotency key."""

    faults: list[InjectedFault] = field(default_factory=list)
    entries: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(write tool, idempotency key) -> times the real tool was entered."""
    applied: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(write tool, idempotency key) -> times the real tool returned: it acted."""
    maybe: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(write tool, idempotency key) -> times it raised without proof that it did not act."""
    crashed: bool = False
    idempotent: set[str] = field(default_factory=set)
    """Write tools whose policy declares them idempotent by key (``ToolPolicy.idempotent``):
    entered again with the same key, they find their earlier effect instead of acting."""

    def _again(self, idempotent: bool) -> int:
        """Entries that could have acted, beyond the first per key, of (non-)idempotent tools."""
        counts = self.applied + self.maybe
        return sum(
            n - 1
            for (tool, _), n in counts.items()
            if n > 1 and (tool in self.idempotent) == idempotent
        )

    @property
    def duplicate_effects(self) -> int:
        """Entries that could have acted, beyond the first, over every key: must be zero.

        An entry that failed with proof that nothing happened (``applied=False``, a
        business refusal) does not count: entering again after it is a retry, not a
        duplicate. Nor does entering an idempotent write again with the same key: the
        tool finds its first effect by that key (``replays`` counts those entries).
        """
        return self._again(idempotent=False)

    @property
    def replays(self) -> int:
        """Same-key entries of idempotent writes beyond the first: retries, not duplicates."""
        return self._again(idempotent=True)

    def acted(self, tool: str, key: str) -> bool | None:
        """Whether the write acted: yes, no, or ``None`` when only its reconciler knows."""
        if self.applied[(tool, key)]:
            return True
        return None if self.maybe[(tool, key)] else False


@dataclass
class FaultSchedule:
    """Seeded draws: the n-th call of a target in a case always meets the same fault."""

    profile: FaultProfile
    seed: int
    case: str
    calls: Counter[str] = field(default_factory=Counter)

    def rng(self, target: str, n: int) -> random.Random:
        """The generator of the n-th call of ``target`` in this case, under this seed."""
        return random.Random(stable_hash([self.seed, self.case, target, n], 16))

    def next_call(self, target: str) -> int:
        """Count one more call of ``target``; its number (1-based)."""
        self.calls[target] += 1
        return self.calls[target]

    def draw(self, target: str, n: int, rates: Mapping[str, float]) -> str | None:
        """The fault the n-th call of ``target`` meets, or ``None``: as scripted, else drawn."""
        scripted = self.profile.at.get(target)
        if scripted is not None and n <= len(scripted):
            return scripted[n - 1]
        if not rates:
            return None
        roll = self.rng(target, n).random()
        edge = 0.0
        for kind, rate in rates.items():
            edge += rate
            if roll < edge:
                return kind
        return None

    def crashes(self) -> bool:
        """Whether this case loses its process (once, after its first eligible tool acted)."""
        rate = self.profile.crash.rate
        return bool(rate) and self.rng("crash", 0).random() < rate


@dataclass
class FaultInjector(WrappedEffects):
    """``Effects`` that pass every call to ``inner``, except where the schedule strikes."""

    schedule: FaultSchedule = field(default_factory=lambda: FaultSchedule(FaultProfile(), 0, ""))
    ledger: FaultLedger = field(default_factory=FaultLedger)
    dead: bool = False
    """This "process" crashed: nothing it still runs may reach a tool, a model or a clock."""
    in_flight: set[asyncio.Task[Any]] = field(default_factory=set)

    def crash(self, reason: str) -> NoReturn:
        """Die as SIGKILL would: every other call of this process stops where it is."""
        self.dead = True
        self.ledger.crashed = True
        self.ledger.faults.append(InjectedFault("process", "crash", 1))
        current = asyncio.current_task()
        for task in self.in_flight - {current} if current else self.in_flight:
            task.cancel()
        raise SimulatedCrash(reason)

    def reborn(self) -> FaultInjector:
        """The effects of the process that restarts: the same schedule and ledger, alive."""
        return FaultInjector(self.inner, self.schedule, self.ledger)

    def _alive(self) -> None:
        """End, quietly, a step of the dead process that reaches for a tool or a model.

        The crash itself travels up the run's own task as ``SimulatedCrash``.
        """
        if self.dead:
            raise asyncio.CancelledError("the process is dead")

    # ------------------------------------------------------------------ tools

    async def call_tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        """The call, or the fault the schedule holds for it."""
        self._alive()
        current = asyncio.current_task()
        if current is not None:
            self.in_flight.add(current)
        try:
            return await self._tool(spec, args, context, timeout_s)
        finally:
            if current is not None:
                self.in_flight.discard(current)

    async def _tool(
        self, spec: ToolSpec, args: BaseModel, context: ToolContext, timeout_s: float
    ) -> Any:
        profile = self.schedule.profile
        n = self.schedule.next_call(spec.name)
        # a compute tool is a local function: no network, no service to fail (unless scripted)
        targeted = spec.name in profile.at or (
            spec.policy.kind != "compute"
            and (not profile.only_tools or spec.name in profile.only_tools)
        )
        kind = self.schedule.draw(spec.name, n, profile.tool_rates()) if targeted else None
        write = spec.policy.kind == "write"
        if kind is not None and kind != "crash":  # a crash is counted when it strikes
            self.ledger.faults.append(InjectedFault(spec.name, kind, n))
        if kind == "timeout_before" or (kind == "slow" and profile.tools.slow_s >= timeout_s):
            await self.inner.sleep(timeout_s)
            raise TimeoutError
        if kind == "transient":
            raise TransientToolError("injected: service unavailable (503)", applied=False)
        if kind == "permanent":
            raise ToolFailedError("injected: the service refused the request")
        if kind == "slow":
            await self.inner.sleep(profile.tools.slow_s)
        key = (spec.name, context.idempotency_key)
        if write:
            self.ledger.entries[key] += 1
            if spec.policy.idempotent:
                self.ledger.idempotent.add(spec.name)
        try:
            result = await self.inner.call_tool(spec, args, context, timeout_s)
        except Exception as exc:  # the real tool failed: did it act?
            if write and effect_applied(exc) is not False:
                self.ledger.maybe[key] += 1  # it may have: only its reconciler knows
            raise
        if write:
            self.ledger.applied[key] += 1
        eligible = write or not profile.crash.writes_only
        chosen = kind == "crash" or (eligible and self.schedule.crashes())
        if chosen and not self.ledger.crashed:
            self.crash(f"injected crash after {spec.name} acted")
        if kind == "ambiguous":
            raise ConnectionResetError("injected: connection lost after the request was sent")
        if kind == "timeout_after":
            raise TimeoutError
        if kind == "malformed":
            return _partial(result)
        return result

    # ------------------------------------------------------------------ models

    async def call_model(
        self, model: Model, request: ModelRequest, deadline_s: float | None = None
    ) -> ModelResponse:
        """The model's answer, or that answer rewritten by the fault the schedule holds."""
        self._alive()
        response = await self.inner.call_model(model, request, deadline_s)
        self._alive()
        target = f"model:{request.purpose}"
        n = self.schedule.next_call(target)
        kind = self.schedule.draw(target, n, self.schedule.profile.model_rates())
        if kind is None:
            return response
        rng = self.schedule.rng(f"{target}:content", n)
        text = rewrite_answer(kind, response.text, rng)
        if text is None:  # the fault does not fit this answer
            return response
        self.ledger.faults.append(InjectedFault(target, kind, n))
        return ModelResponse(text, response.usage, response.model, response.latency_ms)


def _partial(result: Any) -> Any:
    """A partial payload: half the fields of the tool's answer dropped."""
    data = result.model_dump() if isinstance(result, BaseModel) else result
    if isinstance(data, dict) and data:
        keys = sorted(data)
        return {k: data[k] for k in keys[: len(keys) // 2]}
    return {"partial": True}


# ---------------------------------------------------------------------- model answers

_ID = re.compile(r"\b[A-Z]{2,}\d{5,}\b")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _first_scalar_path(value: Any) -> list[Any] | None:
    """The path to the first string or number inside ``value`` (depth first)."""
    if isinstance(value, dict):
        items: list[tuple[Any, Any]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return None
    for key, item in items:
        if isinstance(item, str | int | float) and not isinstance(item, bool):
            return [key]
        inner = _first_scalar_path(item)
        if inner is not None:
            return [key, *inner]
    return None


def _wrong_type(data: Any) -> Any:
    path = _first_scalar_path(data)
    if path is None:
        return None
    holder = data
    for part in path[:-1]:
        holder = holder[part]
    old = holder[path[-1]]
    holder[path[-1]] = [old] if isinstance(old, str) else f"about {old}"
    return data


def _plan_steps(data: Any) -> list[dict[str, Any]] | None:
    steps = data.get("steps") if isinstance(data, dict) else None
    if isinstance(steps, list) and steps and all(isinstance(s, dict) for s in steps):
        return steps
    return None


def rewrite_answer(kind: str, text: str, rng: random.Random) -> str | None:
    """``text`` with the model fault ``kind`` in it, or ``None`` when it does not fit."""
    if kind == "empty":
        return ""
    if kind == "refusal":
        return "I'm sorry, but I can't help with that request."
    if kind == "prose":
        return f"Sure! Here is what you asked for:\n```json\n{text}\n```\nHope this helps."
    if kind == "malformed_json":
        return text[: max(1, len(text) // 2)] if text.strip().startswith(("{", "[")) else None
    data = _json(text)
    if kind == "invented_ids":
        if not (_ID.search(text) or _DATE.search(text)):
            return None
        invented = _ID.sub(lambda _: f"ZZ{rng.randrange(10**7, 10**8)}", text)
        return _DATE.sub(lambda _: f"20{rng.randrange(40, 99)}-0{rng.randrange(1, 9)}-11", invented)
    if kind == "contradiction":
        return _contradict(data)
    steps = _plan_steps(data)
    if kind == "wrong_types":  # a plan's arguments, else the first value of the answer
        args = [s["args"] for s in steps or () if isinstance(s.get("args"), dict) and s["args"]]
        changed = _wrong_type(args[0] if args else data)
        return None if changed is None else json.dumps(data, ensure_ascii=False)
    if steps is None:
        return None
    if kind == "unknown_tool":
        steps[rng.randrange(len(steps))]["tool"] = "transfer_all_funds"
    elif kind == "cyclic_plan":
        first, last = steps[0], steps[-1]
        first["depends_on"] = [last.get("id", "s1")]
        last.setdefault("depends_on", [])
        if first.get("id") not in last["depends_on"]:
            last["depends_on"].append(first.get("id", "s1"))
    elif kind == "long_plan":
        template = steps[-1]
        for i in range(len(steps) + 1, 41):
            steps.append({**template, "id": f"s{i}", "depends_on": [f"s{i - 1}"]})
    else:
        return None
    return json.dumps(data, ensure_ascii=False)


def _contradict(data: Any) -> str | None:
    """A verdict flipped, or a reply that claims the opposite of what happened."""
    if isinstance(data, dict) and isinstance(data.get("passed"), bool):
        return json.dumps({**data, "passed": not data["passed"]}, ensure_ascii=False)
    if isinstance(data, dict) and isinstance(data.get("text"), str):
        claim = "All done: your request was completed successfully. 已为您办理成功。"
        return json.dumps({**data, "text": claim}, ensure_ascii=False)
    if data is None:
        return "All done: your request was completed successfully. 已为您办理成功。"
    return None

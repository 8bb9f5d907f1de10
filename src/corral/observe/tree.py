"""A run as a readable tree in the terminal, built from its folded state.

Every piece of text that came from a user, a tool or a model is redacted and has its
control characters made visible: it is printed as plain ``Text``, never as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.text import Text
from rich.tree import Tree

from corral.contracts import RunStatus, StepStatus
from corral.events import Event, ModelCall, ToolAttempt
from corral.observe.logs import model_call_brief
from corral.observe.redact import Redactor, keeping_ids
from corral.observe.terminal import visible

if TYPE_CHECKING:  # observe sits below runtime: the fold's type is named, never imported
    from corral.runtime.state import RunState

_STATUS_STYLE = {
    RunStatus.FINISHED: "green",
    RunStatus.HANDED_OFF: "yellow",
    RunStatus.FAILED: "red",
    RunStatus.AWAITING_CONFIRM: "cyan",
    RunStatus.AWAITING_USER: "cyan",
}
_STEP_MARK = {
    StepStatus.SUCCEEDED: ("✓", "green"),
    StepStatus.FAILED: ("✗", "red"),
    StepStatus.SKIPPED: ("⤼", "yellow"),
    StepStatus.BLOCKED: ("⊘", "dim"),
    StepStatus.RUNNING: ("…", "cyan"),
    StepStatus.PENDING: ("○", "dim"),
    StepStatus.UNKNOWN: ("?", "magenta"),
}


def run_tree(
    state: RunState,
    title: str | None = None,
    redactor: Redactor | None = None,
    events: Sequence[Event] = (),
) -> Tree:
    """The run as a tree: intent, route, plan steps with attempts and errors, reply.

    With the run's ``events``, its model calls are listed too (purpose, attempt, status,
    tokens, latency): where a model was asked, and what it cost, shows without ``traces``.
    """
    hide = redactor or Redactor()

    def shown(value: Any) -> str:
        return visible(hide.text(value if isinstance(value, str) else str(value)))

    style = _STATUS_STYLE.get(state.status, "white")
    head = Text()
    if title:
        head.append(f"{visible(title)}  ", style="bold")
    head.append(visible(keeping_ids(hide.text, state.run_id, [state.run_id])), style="bold")
    head.append(f"  [{state.status.value}]", style=style)
    if state.outcome:
        head.append(f" {shown(state.outcome)}", style=style)
    tree = Tree(head)
    for message in state.messages:
        tree.add(Text(f"user: {shown(message)[:120]}", style="bold"))
    intent = state.intent
    if intent is not None:
        entities = ", ".join(
            f"{shown(k)}={shown(v)}"
            for k, v in hide.value(
                {k: v["text"] if isinstance(v, dict) else v for k, v in state.entities.items()}
            ).items()
        )
        label = shown(intent.label) if intent.label else "(none)"
        tree.add(
            Text(
                f"intent: {label}  conf {intent.confidence:.2f} via {shown(intent.source)}"
                + (f"  entities: {entities}" if entities else "")
            )
        )
    if state.route is not None:
        tree.add(Text(f"route: {state.route.action.value}  ({shown(state.route.reason)})"))
    if state.plan is not None:
        plan = tree.add(
            Text(
                f"plan {shown(state.plan.plan_id)} from {shown(state.plan.source)} "
                f"{shown(state.plan.template or '')}".rstrip()
            )
        )
        tried = _tools_tried(events)
        for step in state.steps.values():
            mark, mark_style = _STEP_MARK[step.status]
            line = Text(f"{mark} ", style=mark_style)
            line.append(f"{shown(step.id)} {shown(step.tool_used or step.tool)}")
            if step.tool_used and step.tool_used != step.tool:
                line.append(f" (instead of {shown(step.tool)})", style="yellow")
            before = [
                f"{shown(tool)} failed {failed}×"
                for tool, failed in tried.get(step.id, {}).items()
                if tool != (step.tool_used or step.tool) and failed
            ]
            if before:  # it fell back: the attempts were not all the tool shown
                line.append(f" (after {', '.join(before)})", style="yellow")
            if step.attempts:
                line.append(f"  {step.attempts} attempt{'s' * (step.attempts > 1)}", style="dim")
                line.append(f"  {step.duration_ms:.1f} ms", style="dim")
            if step.error_code:
                line.append(f"  {shown(step.error_code)}", style="red")
            if step.result is not None and step.result.ok:
                line.append(f"  {shown(step.result.summary)[:80]}", style="dim")
            elif step.reason:
                line.append(f"  {shown(step.reason)[:80]}", style="dim")
            if state.pending and state.pending.step_id == step.id:
                line.append("  awaiting confirmation", style="cyan")
            plan.add(line)
    _add_model_calls(tree, events, shown)
    if state.handoff is not None:
        reason = shown(state.handoff.reason)[:100]
        tree.add(Text(f"handoff: {shown(state.handoff.reason_code)} — {reason}", style="yellow"))
    if state.reply:
        tree.add(Text(f"reply: {shown(state.reply)}", style="bold green"))
    return tree


def _tools_tried(events: Sequence[Event]) -> dict[str, dict[str, int]]:
    """Step id -> each tool it called, in order, with how many of its calls failed."""
    tried: dict[str, dict[str, int]] = {}
    for event in events:
        attempt = event.payload
        if isinstance(attempt, ToolAttempt) and not attempt.in_flight:
            tools = tried.setdefault(attempt.step_id, {})
            tools[attempt.tool] = tools.get(attempt.tool, 0) + (attempt.status == "error")
    return tried


def _add_model_calls(tree: Tree, events: Sequence[Event], shown: Any) -> None:
    """A branch with one line per ``model_call`` event, when there are any."""
    calls = [model_call_brief(e.payload) for e in events if isinstance(e.payload, ModelCall)]
    if not calls:
        return
    branch = tree.add(Text(f"model calls: {len(calls)}"))
    for call in calls:
        accepted = call["status"] == "success"
        line = Text(f"{'✓' if accepted else '✗'} ", style="green" if accepted else "red")
        retried = f" try {call['try']}" if call["try"] > 1 else ""
        line.append(f"{shown(call['purpose'])} #{call['attempt']}{retried} {shown(call['status'])}")
        if call["error_code"]:
            line.append(f"  {shown(call['error_code'])}", style="red")
        if call["prompt_tokens"] is not None:
            estimated = " estimated" if call["estimated"] else ""
            line.append(
                f"  {call['prompt_tokens']}+{call['completion_tokens']} tokens{estimated}",
                style="dim",
            )
        if isinstance(call["latency_ms"], int | float):
            line.append(f"  {call['latency_ms']:.1f} ms", style="dim")
        line.append(f"  {shown(call['model'])}", style="dim")
        branch.add(line)

"""A run as a readable tree in the terminal, built from its folded state."""

from __future__ import annotations

from rich.text import Text
from rich.tree import Tree

from corral.contracts import RunStatus, StepStatus
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


def run_tree(state: RunState, title: str | None = None) -> Tree:
    """The run as a tree: intent, route, plan steps with attempts and errors, reply."""
    style = _STATUS_STYLE.get(state.status, "white")
    head = Text()
    if title:
        head.append(f"{title}  ", style="bold")
    head.append(state.run_id, style="bold")
    head.append(f"  [{state.status.value}]", style=style)
    if state.outcome:
        head.append(f" {state.outcome}", style=style)
    tree = Tree(head)
    for message in state.messages:
        tree.add(Text(f"user: {message[:120]}", style="bold"))
    intent = state.intent
    if intent is not None:
        entities = ", ".join(
            f"{k}={v['text'] if isinstance(v, dict) else v}" for k, v in state.entities.items()
        )
        label = intent.label or "(none)"
        tree.add(
            f"intent: {label}  conf {intent.confidence:.2f} via {intent.source}"
            + (f"  entities: {entities}" if entities else "")
        )
    if state.route is not None:
        tree.add(f"route: {state.route.action.value}  ({state.route.reason})")
    if state.plan is not None:
        plan = tree.add(
            f"plan {state.plan.plan_id} from {state.plan.source} "
            f"{state.plan.template or ''}".rstrip()
        )
        for step in state.steps.values():
            mark, mark_style = _STEP_MARK[step.status]
            line = Text(f"{mark} ", style=mark_style)
            line.append(f"{step.id} {step.tool_used or step.tool}")
            if step.tool_used and step.tool_used != step.tool:
                line.append(f" (instead of {step.tool})", style="yellow")
            if step.attempts:
                line.append(f"  {step.attempts} attempt{'s' * (step.attempts > 1)}", style="dim")
                line.append(f"  {step.duration_ms:.1f} ms", style="dim")
            if step.error_code:
                line.append(f"  {step.error_code}", style="red")
            if step.result is not None and step.result.ok:
                line.append(f"  {step.result.summary[:80]}", style="dim")
            elif step.reason:
                line.append(f"  {step.reason[:80]}", style="dim")
            if state.pending and state.pending.step_id == step.id:
                line.append("  awaiting confirmation", style="cyan")
            plan.add(line)
    if state.handoff is not None:
        tree.add(
            Text(
                f"handoff: {state.handoff.reason_code} — {state.handoff.reason[:100]}",
                style="yellow",
            )
        )
    if state.reply:
        tree.add(Text(f"reply: {state.reply}", style="bold green"))
    return tree

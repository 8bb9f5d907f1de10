"""The scheduler's incremental bookkeeping agrees with rescanning the whole plan.

``StepBook`` keeps per-step counts and a queue of steps to block instead of looking at
every step on every pass. Over random plans and random ways their steps settle, it must
name the same ready steps, and block the same steps with the same reasons in the same
order, as the rescan it replaced.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.contracts import StepStatus
from corral.runtime.book import BAD, UNSETTLED, StepBook
from corral.runtime.state import StepState

ENDINGS = [StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED, StepStatus.UNKNOWN]
"""How a step may end; one in five choices only starts it (running, still unsettled)."""


def graph(deps: list[list[int]], waits: list[list[int]]) -> Any:
    ids = [f"s{i}" for i in range(len(deps))]
    steps = {
        sid: SimpleNamespace(
            step=SimpleNamespace(id=sid, depends_on=[ids[d] for d in deps[i]]),
            waits_for=frozenset(ids[w] for w in waits[i] if w != i),
        )
        for i, sid in enumerate(ids)
    }
    dependents = {sid: tuple(o for o in ids if sid in steps[o].step.depends_on) for sid in ids}
    waited_by: dict[str, list[str]] = {}
    for sid in ids:
        for producer in steps[sid].waits_for:
            waited_by.setdefault(producer, []).append(sid)
    return SimpleNamespace(
        order=tuple(ids),
        steps=steps,
        dependents=dependents,
        position={sid: i for i, sid in enumerate(ids)},
        depends={sid: tuple(dict.fromkeys(steps[sid].step.depends_on)) for sid in ids},
        waited_by={producer: tuple(waiters) for producer, waiters in waited_by.items()},
    )


def rescan_ready(g: Any, states: dict[str, StepState]) -> list[str]:
    status = {sid: s.status for sid, s in states.items()}
    return [
        sid
        for sid in g.order
        if status[sid] in UNSETTLED
        and all(status[d] is StepStatus.SUCCEEDED for d in g.steps[sid].step.depends_on)
        and not any(status.get(o) in UNSETTLED for o in g.steps[sid].waits_for)
    ]


def rescan_block(
    g: Any, states: dict[str, StepState], *, wait: bool = True
) -> list[tuple[str, list[str]]]:
    """A pending step with a dependency that did not succeed, and none still unsettled."""
    blocked = []
    for sid in g.order:
        if states[sid].status is not StepStatus.PENDING:
            continue
        depends_on = g.steps[sid].step.depends_on
        if wait and any(states[d].status in UNSETTLED for d in depends_on):
            continue
        bad = [d for d in g.steps[sid].step.depends_on if states[d].status in BAD]
        if bad:
            blocked.append((sid, bad))
            states[sid].status = StepStatus.BLOCKED
    return blocked


def book_block(
    book: StepBook, states: dict[str, StepState], *, wait: bool = True
) -> list[tuple[str, list[str]]]:
    blocked = []
    if not wait:
        book.queue_waiting_again()
    while (found := book.next_blocked(wait=wait)) is not None:
        blocked.append(found)
        states[found[0]].status = StepStatus.BLOCKED
        book.note(found[0])
    return blocked


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[list[int]], list[list[int]], list[int]]:
    n = draw(st.integers(1, 9))
    deps = [draw(st.lists(st.integers(0, i - 1), max_size=3)) if i else [] for i in range(n)]
    waits = [draw(st.lists(st.integers(0, n - 1), max_size=2)) for _ in range(n)]
    choices = draw(st.lists(st.integers(0, 10_000), min_size=n * 2, max_size=n * 2))
    return deps, waits, choices


@settings(max_examples=80)
@given(plans())
def test_the_book_names_what_a_rescan_names(plan: Any) -> None:
    deps, waits, choices = plan
    g = graph(deps, waits)
    states = {sid: StepState(sid, "t") for sid in g.order}
    mirror = {sid: StepState(sid, "t") for sid in g.order}
    book = StepBook(g, states)
    for choice in choices:
        assert book_block(book, states) == rescan_block(g, mirror)
        ready = rescan_ready(g, mirror)
        assert book.ready() == ready
        if not ready:
            break
        sid = ready[choice % len(ready)]
        ending = ENDINGS[choice % len(ENDINGS)] if choice % 5 else StepStatus.RUNNING
        for step in (states[sid], mirror[sid]):
            step.status, step.args = ending, {"n": choice}
            step.result = None
        book.note(sid)
    # Nothing runs any more (a stop): a step that waited for a running one is blocked now.
    assert book_block(book, states, wait=False) == rescan_block(g, mirror, wait=False)
    assert len(book.started) == sum(s.args is not None for s in states.values())


def test_a_resumed_book_blocks_what_an_earlier_process_left_failed() -> None:
    g = graph([[], [0], [1], [0]], [[], [], [], []])
    states = {sid: StepState(sid, "t") for sid in g.order}
    states["s0"].status = StepStatus.FAILED
    book = StepBook(g, states)
    assert book.ready() == []
    assert book_block(book, states) == [("s1", ["s0"]), ("s2", ["s1"]), ("s3", ["s0"])]


def settle(book: StepBook, states: dict[str, StepState], sid: str, status: StepStatus) -> None:
    states[sid].status = status
    book.note(sid)


def test_a_step_waits_for_its_running_dependencies_before_it_is_blocked() -> None:
    """Blocked with every dependency that did not succeed, once none is still running."""
    for late_ending, reason in [
        (StepStatus.SUCCEEDED, ["s0"]),
        (StepStatus.FAILED, ["s0", "s1"]),
    ]:
        g = graph([[], [], [0, 1]], [[], [], []])
        states = {sid: StepState(sid, "t") for sid in g.order}
        book = StepBook(g, states)
        book.started_step("s0")
        book.started_step("s1")
        states["s1"].status = StepStatus.RUNNING
        settle(book, states, "s0", StepStatus.FAILED)
        assert book_block(book, states) == []  # s1 still runs
        settle(book, states, "s1", late_ending)  # its ending queues s2 again, either way
        assert book_block(book, states) == [("s2", reason)]


def test_when_nothing_runs_any_more_a_waiting_step_is_blocked() -> None:
    """A stop leaves an interrupted dependency ``running``: the run ends without it."""
    g = graph([[], [], [0, 1], [2]], [[], [], [], []])
    states = {sid: StepState(sid, "t") for sid in g.order}
    book = StepBook(g, states)
    book.started_step("s1")
    states["s1"].status = StepStatus.RUNNING
    settle(book, states, "s0", StepStatus.FAILED)
    assert book_block(book, states) == []
    assert book_block(book, states, wait=False) == [
        ("s2", ["s0"]),
        ("s3", ["s2"]),
    ]

"""Commands that talk: the interactive chat and the scripted demo."""

from __future__ import annotations

import contextlib
import json
import secrets
import shlex
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from corral.cli.common import (
    HomeOption,
    JsonOption,
    ModelOption,
    StoreOption,
    _fails_cleanly,
    _home,
    _load,
    _open_store,
    _print_summary,
    _runtime,
    app,
    console,
    recorded_model,
)
from corral.cli.examples import example_dir
from corral.errors import CorralError
from corral.intent.confirmation import confirmation_answer
from corral.observe.terminal import visible

if TYPE_CHECKING:
    from corral.contracts import RunSummary
    from corral.runtime.runtime import Runtime

YES_OR_NO = {"zh": "请回答 是 或 不 (yes / no)", "en": "Please answer yes or no (是 / 不)"}
"""What the chat asks when a confirmation's answer is neither, in the run's language."""
LEFT_WAITING = {
    "zh": "（确认仍在等待：{resume} --approve 或 --reject）",
    "en": "(the confirmation is left waiting: {resume} --approve or --reject)",
}
"""Said when a second unclear line is taken as a new message instead."""


def resume_command(run_id: str, home: Path | None, store: str | None) -> str:
    """The ``corral resume`` that finds the run: the chat's own --home and --store.

    A store URL is not printed (it may hold a password): ``--store URL`` says to give it.
    """
    command = f"corral resume {run_id}"
    if home is not None:
        command += f" --home {shlex.quote(str(home))}"
    if store is not None:
        command += " --store URL"
    return command


@app.command()
@_fails_cleanly
def chat(
    agent_dir: Annotated[Path, typer.Argument(help="Folder with agent.yaml and tools.py")],
    session: Annotated[str | None, typer.Option("--session", help="Session id")] = None,
    model: ModelOption = None,
    home: HomeOption = None,
    store: StoreOption = None,
) -> None:
    """Talk to an agent in the terminal; the state is shown after each turn.

    Answer a confirmation with yes/no (是/不, "yes please", "不用了"); a second line that is
    neither is a new message, the confirmation left waiting. /quit or an empty line ends it.
    A continued --session keeps the model its last run used, unless --model names another.
    """
    import asyncio

    folder = _home(home)
    if model is None and session is not None:
        model = _session_model(folder, session, store)
    runtime = _runtime(_load(agent_dir, folder, model, store=store), folder, store)
    # two chats started in the same second are two sessions (one user's order carried
    # over to the other's)
    session_id = session or f"chat-{int(time.time())}-{secrets.token_hex(3)}"
    console.print(Text(f"session {visible(session_id)} — /quit to leave", style="dim"))
    # undecodable bytes arrive as surrogates, so one bad line is refused, not the session
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdin.reconfigure(errors="surrogateescape")  # type: ignore[union-attr]
    try:
        _converse(runtime, session_id, partial(resume_command, home=home, store=store))
    finally:
        asyncio.run(runtime.aclose())


def _converse(runtime: Runtime, session_id: str, resume: Callable[[str], str]) -> None:
    """The chat's turns, until /quit, an empty line or the end of input."""
    import asyncio

    from corral.contracts import RunStatus

    waiting: RunSummary | None = None
    language = "zh"  # the waiting run's: a chat in English is asked in English
    unclear = False  # the last line was neither yes nor no: a second is a new message
    while True:
        try:
            line = input("you> ").strip()
        except EOFError:
            break
        if not line or line in ("/quit", "/exit"):
            break
        try:
            confirm = (
                waiting
                if waiting and waiting.pending and waiting.pending.kind == "confirm"
                else None
            )
            shown = confirm.pending if confirm is not None else None
            answer = confirmation_answer(line, shown.prompt) if shown is not None else None
            if confirm is not None and answer is not None:  # about the call shown, no other
                summary = asyncio.run(
                    runtime.resume(
                        confirm.run_id,
                        approve=answer,
                        step_id=shown.step_id if shown else None,
                        call=shown.call if shown else None,
                    )
                )
            elif confirm is not None and not unclear:  # the question again, with its subject
                unclear = True
                prompt = visible(confirm.pending.prompt if confirm.pending else "")
                console.print(Text(f"agent> {YES_OR_NO[language]}: {prompt}"))
                continue
            else:  # a second unclear line is a new message: nobody is stuck on a question
                if confirm is not None:
                    left = LEFT_WAITING[language].format(resume=resume(confirm.run_id))
                    console.print(Text(left, style="dim"))
                summary = asyncio.run(runtime.start(line, session_id=session_id))
            unclear = False
        except CorralError as exc:  # one bad line is reported; the conversation goes on
            console.print(Text(f"error {exc.code.value}: {visible(exc.message)}", style="red"))
            if confirm is not None:  # answered elsewhere, or asks about another call now
                now = _asking_now(runtime, confirm.run_id)
                if now is not None and now.pending is not None and now.pending != confirm.pending:
                    console.print(Text(f"agent> {visible(now.pending.prompt)}"))
                # else the same question stands (the run was busy, the store down): a yes
                # still names the step and call shown, never what the run asks next
                waiting = now or confirm
            continue
        console.print(Text(f"agent> {visible(summary.reply or '')}"))
        state = asyncio.run(runtime.load_state(summary.run_id))
        intent = summary.intent.label if summary.intent else None
        entities = ", ".join(
            f"{k}={v['text'] if isinstance(v, dict) else v}" for k, v in state.entities.items()
        )
        console.print(
            Text(
                visible(
                    f"  state: {summary.status.value} · intent {intent} · "
                    f"entities {entities or '-'} · run {summary.run_id}"
                ),
                style="dim",
            )
        )
        waiting = summary if summary.status is RunStatus.AWAITING_CONFIRM else None
        language = state.language


def _asking_now(runtime: Runtime, run_id: str) -> RunSummary | None:
    """The run's summary while it waits for a confirmation: what a yes or no is about now.

    ``None`` while it does not (another client drives it), or when it cannot be read.
    """
    import asyncio

    from corral.contracts import RunStatus
    from corral.runtime.runtime import summarize_run

    try:
        state = asyncio.run(runtime.load_state(run_id))
    except CorralError:  # the store is down: the chat goes on, as for the error before
        return None
    return summarize_run(state) if state.status is RunStatus.AWAITING_CONFIRM else None


def _session_model(folder: Path, session_id: str, url: str | None = None) -> str | None:
    """The model the session's latest run was started with, if the session exists."""
    from datetime import UTC, datetime

    store = _open_store(folder, url, read_only=True)  # a missing SQLite file reads as empty
    found = store.get_session(session_id, datetime.now(UTC))
    turns = found.turns if found else []
    last = turns[-1].get("run_id") if turns else None
    return recorded_model(store.load_events(last)) if isinstance(last, str) else None


DEMO_SCRIPT: list[tuple[str, str, list[tuple[str, Any]]]] = [
    (
        "exchange in warranty, confirmed",
        "我的打印机上周坏了，订单号 HD20240501，能换新吗？",
        [("approve", True)],
    ),
    (
        "exchange out of warranty, refused",
        "Can I get a replacement for my scanner? Order HD20230315.",
        [],
    ),
    (
        "missing order id, asked for; then declined",
        "我想申请换新，显示器突然黑屏了",
        [("answer", "订单号是 HD20250920"), ("approve", False)],
    ),
    ("complaint, handed off with no tool", "你们这个打印机真是气死我了！", []),
    ("chit-chat, canned reply", "Hello! Nice weather today, isn't it?", []),
    ("gibberish, clarified", "asdfgh 啊啊啊 ？？？", []),
]


OPS_DEMO_SCRIPT: list[tuple[str, str, list[tuple[str, Any]]]] = [
    ("weather: an umbrella is weather, not travel", "明天要不要带伞", []),
    ("weather in English, over a weekend", "will it rain in Shanghai this weekend", []),
    (
        "sales: two weeks fetched side by side, week-over-week, posted once approved",
        "帮我把上周的销售数据拉出来，做个环比分析，再把结论发到工作群",
        [("approve", True)],
    ),
    ("flights, urgent: the fast search", "明天上午去上海的航班，急！", []),
    ("flights, on a budget: the cheap search", "下周去成都的机票，越便宜越好", []),
    (
        "flights, urgent, the fast search down (503 twice): the cheap one answers",
        "明天上午去上海的航班，急！",
        [
            (
                "arrange",
                [
                    {
                        "post": "${OPS_API_URL}/faults",
                        "json": {"path": "/flights/fast", "status": 503, "times": 2},
                    }
                ],
            )
        ],
    ),
]
"""The ops example (seed 001) against its loopback API and MCP server; the fault is armed
through the API's own controls before the message, as its eval does."""
DEMOS = {"aftersales": DEMO_SCRIPT, "ops": OPS_DEMO_SCRIPT}


@app.command()
@_fails_cleanly
def demo(
    example: Annotated[
        str,
        typer.Option(
            "--example",
            help="aftersales (offline, SQLite) or ops (starts its loopback API and MCP server)",
        ),
    ] = "aftersales",
    as_json: JsonOption = False,
    home: HomeOption = None,
    store: StoreOption = None,
) -> None:
    """Run an example agent on scripted Chinese and English messages, offline."""
    import asyncio
    import tempfile

    from corral.errors import ConfigInvalidError
    from corral.testing.arrange import arrange, parse_arrange

    if example not in DEMOS:
        raise ConfigInvalidError(
            f"no demo for {example!r}", hint=f"demos: {', '.join(sorted(DEMOS))}"
        )
    folder = _home(home) if home else Path(tempfile.mkdtemp(prefix="corral-demo-"))
    agent = _load(example_dir(example), folder, store=store)
    runtime = _runtime(agent, folder, store)
    results: list[dict[str, Any]] = []
    unscripted: list[str] = []
    started = time.perf_counter()
    try:
        for title, message, steps in DEMOS[example]:
            before = [value for kind, value in steps if kind == "arrange"]
            for requests in before:
                asyncio.run(arrange(parse_arrange(requests, title), agent.deps, title))
            summary = asyncio.run(runtime.start(message))
            if not as_json:
                _print_summary(summary, runtime, False, title)
            for kind, value in steps:
                if kind == "arrange":
                    continue
                if not summary.status.paused:  # a home used before: HD20240501 was exchanged
                    unscripted.append(title)
                    if not as_json:
                        console.print(
                            f"  [yellow]↳ not as scripted: it did not wait for {kind} "
                            "(the home's data was changed by an earlier demo)[/yellow]"
                        )
                    break
                if kind == "approve":
                    summary = asyncio.run(runtime.resume(summary.run_id, approve=bool(value)))
                    label = "operator approves" if value else "user declines"
                else:
                    summary = asyncio.run(runtime.resume(summary.run_id, answer=str(value)))
                    label = f"user answers: {value}"
                if not as_json:
                    _print_summary(summary, runtime, False, f"  ↳ {label}")
            results.append(
                {
                    "case": title,
                    "as_scripted": title not in unscripted,
                    **summary.model_dump(mode="json", exclude={"pending", "handoff"}),
                }
            )
    finally:
        asyncio.run(runtime.aclose())  # stops the services the example started
    elapsed = time.perf_counter() - started
    if as_json:
        typer.echo(json.dumps({"cases": results, "wall_s": round(elapsed, 3)}, ensure_ascii=False))
        return
    statuses = ", ".join(f"{r['case'].split(',')[0]}: {r['status']}" for r in results)
    console.print(
        f"\n[bold]{len(results)} scenarios in {elapsed * 1000:.0f} ms[/bold] "
        f"(state in {folder})\n{statuses}"
    )
    if unscripted:
        console.print(
            f"[yellow]{len(unscripted)} scenario(s) did not go as scripted: {folder} holds "
            "the data of an earlier demo (aftersales: the exchange it made). A demo without "
            "--home starts from fresh data.[/yellow]"
        )
    console.print(f"Try: corral traces <run_id> --home {folder}")

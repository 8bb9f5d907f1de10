"""Runs of a server started with ``--enqueue``: its requests enqueue drives for the workers.

``corral serve --store postgresql://... --enqueue`` drives no run in its own process: a
start or a resume becomes a drive on the agent's DBOS queue (``RunQueue``, the same as the
CLI and the benchmark use), and ``corral worker`` processes run it. The server learns how
a drive went from DBOS's table (``workers.status.run_drives``) and what it did from the
store, which both the server and the workers share.

Only a request's own input is checked here (valid text, within the agent's length
limit), so a message that would be refused is refused with the same code as without
``--enqueue``; what depends on the run's state (a second answer, a run that ended) is
the worker's to refuse, and shows as the drive's error.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from corral.contracts import RunSummary
from corral.errors import InputTooLargeError, RunBusyError
from corral.server.live_rows import LiveRow
from corral.server.queries import RunFilter

if TYPE_CHECKING:
    import sqlalchemy as sa

    from corral.runtime.inputs import OpenRunInput
    from corral.runtime.runtime import Runtime
    from corral.workers.client import RunQueue

QUEUED_LISTED = 500
"""The most first drives not ended that ``GET /runs`` reads (``GET /workers`` counts all)."""

CORRECTION_WAIT_S = 10.0
"""How long a request that corrects a confirmation waits for a worker to decline it."""

POLL_S = 0.1
"""How often a waiting request or a following stream looks at the drive and the store."""


@dataclass
class QueuedRuns:
    """The workers' queue as the server uses it: enqueue, and see how drives went."""

    queue: RunQueue
    engine: sa.Engine
    """The store's engine: DBOS's tables live in the same database."""
    poll_s: float = POLL_S

    async def start(
        self,
        runtime: Runtime,
        message: str,
        session_id: str | None,
        priority: str | None,
        message_id: str | None = None,
    ) -> str | RunSummary:
        """Enqueue the drive that handles a user's message; its workflow id (or a summary).

        A session's message that answers the session's paused run, or says yes or no to
        it, is that run's next drive, as ``Runtime.start`` would give it to that run: the
        answer then names the run that takes it (a new run's id would name a run that
        never exists). Any other message is a new run's first drive. The queue checks
        the input.

        ``message_id``: a message whose id a stored turn took is not enqueued again: the
        answer is that run's summary (``Runtime.answer_of_message``). One sent again
        before a worker stored it is answered with the drive that holds its id
        (``RunQueue._enqueue``), which DBOS runs once.
        """
        agent = runtime.agent
        limit = agent.config.limits.max_message_chars
        if len(message) > limit:
            raise InputTooLargeError(
                f"the message has {len(message)} characters; the limit is {limit}",
                hint="split it, or raise limits.max_message_chars",
            )
        if message_id is not None:
            answered = await runtime.answer_of_message(
                message, session_id=session_id, message_id=message_id
            )
            if answered is not None:
                return answered
        if session_id is not None:
            given = await runtime.open_run_input(message, session_id=session_id)
            if given is not None and given.corrects:  # declined first, then a new run's
                await self._declined(agent.name, given, message, session_id)
                given = None
            if given is not None:
                return await self.resume(
                    agent.name,
                    given.run_id,
                    given.approve,
                    given.answer,
                    None,
                    said=given.said(message),
                    message_id=message_id,
                    session_id=session_id,
                )
        start = partial(
            self.queue.start_drive,
            agent.name,
            message,
            session_id=session_id,
            priority=priority,
            message_id=message_id,
        )
        return await asyncio.to_thread(start)

    async def _declined(
        self, agent: str, given: OpenRunInput, message: str, session_id: str
    ) -> None:
        """Enqueue the decline a correction brings ("不对，是 OD…") and wait until it ends.

        A confirmation's no, or the answer that takes a question's request back ("算了，
        帮我查下我的订单"). The new run that follows reads the session the decline leaves.
        A decline no worker takes within ``CORRECTION_WAIT_S`` is ``RUN_BUSY``: the same
        message sent again names the same drive (DBOS keeps it once) and waits for it again.
        """
        run_id, said = given.run_id, given.said(message)
        declined = await self.resume(
            agent, run_id, given.approve, given.answer, None, said=said, session_id=session_id
        )
        try:
            await asyncio.wait_for(self.settled(declined), CORRECTION_WAIT_S)
        except TimeoutError:
            raise RunBusyError(
                f"run {run_id}'s confirmation is being declined by a queued drive",
                hint="send the message again: it follows once a worker has run the decline",
            ) from None

    async def resume(
        self,
        agent: str,
        run_id: str,
        approve: bool | None,
        answer: str | None,
        step_id: str | None,
        call: str | None = None,
        *,
        said: str | None = None,
        message_id: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """Enqueue the drive that brings this input; its workflow id.

        The same input names the same drive, which DBOS keeps once (the queue checks the
        input). ``said``, ``message_id``, ``session_id``: the session's message that gave
        the input, its id and its session (``RunQueue.resume``).
        """
        resume = partial(
            self.queue.resume,
            agent,
            run_id,
            approve=approve,
            answer=answer,
            step_id=step_id,
            call=call,
            said=said,
            message_id=message_id,
            session_id=session_id,
        )
        return await asyncio.to_thread(resume)

    async def outcome(self, workflow_id: str) -> RunSummary | None:
        """The summary the drive ended with; None while it goes on; its error, raised."""
        try:
            answer = await asyncio.to_thread(self.queue.wait, workflow_id, 0.0)
        except RunBusyError:
            return None
        return RunSummary.model_validate(answer)

    async def settled(self, workflow_id: str) -> RunSummary:
        """Wait for the drive to end (a pause or the run's end): its summary, or its error."""
        while True:
            summary = await self.outcome(workflow_id)
            if summary is not None:
                return summary
            await asyncio.sleep(self.poll_s)

    async def drives(self, run_id: str) -> dict[str, str]:
        """The run's enqueued drives (workflow ids, the latest last) and their DBOS statuses."""
        from corral.workers.status import run_drives

        return await asyncio.to_thread(run_drives, self.engine, run_id)

    async def unsaved_rows(self, wanted: RunFilter) -> list[LiveRow]:
        """Listing rows of the runs whose first drive has not ended, that the filters keep.

        ``list_runs`` keeps those with no stored row yet (a worker stores a run at its
        first pause, its end or before a write), as it does for the runs a server drives
        itself. What only the run knows (its intent, its trace) is not known yet: a filter
        on it leaves these rows out, as does one on a status (they are ``queued`` or
        ``running``, not a state of the run). At most the newest ``QUEUED_LISTED`` first
        drives not ended are read.
        """
        if wanted.status is not None or wanted.intent is not None or wanted.trace_id is not None:
            return []  # none of them is known before the run is
        newest = QUEUED_LISTED
        if (wanted.session_id, wanted.since, wanted.until) == (None, None, None):
            # one beyond the page (the agent is filtered in SQL): ``list_runs`` sees that
            # another page follows
            newest = min(wanted.offset + wanted.limit + 1, QUEUED_LISTED)
        read = partial(self.queue.queued_starts, newest, wanted.agent)
        starts = await asyncio.to_thread(read)
        rows = [
            LiveRow(
                run_id=start.run_id,
                agent=start.agent,
                status=start.status,
                intent=None,
                session_id=start.session_id,
                trace_id="",
                created_at=start.created_at,
                updated_at=start.updated_at,
            )
            for start in starts
        ]
        return [row for row in rows if row.matches(wanted)]

    def close(self) -> None:
        """Let go of the queue's connections."""
        self.queue.close()

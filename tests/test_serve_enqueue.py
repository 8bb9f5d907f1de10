"""``corral serve --enqueue``: the server enqueues drives, ``corral worker`` processes run them.

The server runs in this process (uvicorn in a thread) over a fresh PostgreSQL database;
the worker is a real subprocess. A start is answered before any worker exists, so it
cannot have been run in the request; the stream then follows the run from the store.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from corral.store.registry import sql_target
from tests.conftest import AFTERSALES
from tests.extras import REQUIRE_ALL, import_extra
from tests.helpers import corral_cli
from tests.serving import EXCHANGE, client, load, seq_of, serving, sse
from tests.test_request_at_question import COMPLAINT, EXCHANGE_NO_ORDER
from tests.workers_support import WorkerPool, worker_pool

import_extra("dbos", REQUIRE_ALL)


@contextmanager
def enqueuing(workers: WorkerPool) -> Iterator[Any]:
    """An HTTP client of ``corral serve --enqueue`` (aftersales) over the pool's database."""
    agent = load(AFTERSALES, workers.home)
    store = sql_target(workers.store_url)
    with (
        serving(agent, home=workers.home, store=store, enqueue=True) as base,
        client(base) as http,
    ):
        yield http


def streamed(
    http: Any, run_id: str, after_seq: int = 0, last_event_id: str | None = None
) -> list[dict[str, Any]]:
    """The run's SSE messages until the stream closes, data decoded."""
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    params = {"after_seq": after_seq}
    with http.stream("GET", f"/runs/{run_id}/stream", params=params, headers=headers) as answer:
        assert answer.status_code == 200
        return [
            {"event": m["event"], "id": m.get("id"), "data": json.loads(m["data"])}
            for m in sse(answer.iter_lines())
        ]


def exchanges(home: Path) -> int:
    with sqlite3.connect(home / "data" / "aftersales" / "aftersales.db") as db:
        return int(db.execute("SELECT count(*) FROM exchanges").fetchone()[0])


def test_a_start_is_enqueued_at_once_and_its_stream_follows_it_to_the_pause_and_the_end(
    tmp_path: Path,
) -> None:
    with worker_pool(tmp_path) as workers:
        home = workers.home
        with enqueuing(workers) as http:
            body = {"message": EXCHANGE}  # with --enqueue a request waits for no worker
            started = http.post("/agents/aftersales/runs", json=body)
            assert started.status_code == 202  # no worker runs yet: it was only enqueued
            run_id = started.json()["run_id"]
            assert started.json() == {"run_id": run_id, "status": "running"}
            assert http.get(f"/runs/{run_id}/events").status_code == 404  # nothing ran here
            # but it is listed (on main it was not, until a worker stored it)
            listed = http.get("/runs").json()["runs"]
            assert [(r["run_id"], r["agent"], r["status"]) for r in listed] == [
                (run_id, "aftersales", "queued")
            ]
            assert http.get("/runs", params={"agent": "aftersales"}).json()["runs"] == listed
            for other in ({"status": "parsing"}, {"intent": "换货"}, {"session_id": "s"}):
                assert http.get("/runs", params=other).json()["runs"] == [], other
            busy = http.post(f"/runs/{run_id}/resume", json={})  # queued, not taken: not "no run"
            assert busy.status_code == 409 and busy.json()["error"]["code"] == "RUN_BUSY"
            too_long = {"message": EXCHANGE, "session_id": "u" * 129}  # refused before a 202
            refused = http.post("/agents/aftersales/runs", json=too_long)
            assert refused.status_code == 422 and "over 128" in refused.json()["error"]["message"]

            workers.start("w-1", AFTERSALES)
            paused = streamed(http, run_id)  # opened while the drive waits in the queue
            summary = paused[-1]
            assert summary["event"] == "summary"
            assert summary["data"]["status"] == "awaiting_confirm"
            events = [m["data"] for m in paused if m["event"] == "event"]
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert events[0]["type"] == "run_started"
            assert "confirmation_requested" in [e["type"] for e in events]
            assert [seq_of(m) for m in paused[:-1]] == [e["seq"] for e in events]
            # a client whose copy of the paused run diverged is told so, and sent it all
            seq, mark = paused[2]["id"].split("-")
            stale = f"{seq}-{int(mark, 16) ^ 1:08x}"
            again = streamed(http, run_id, last_event_id=stale)
            assert again[0]["event"] == "reset" and again[0]["data"]["after_seq"] == 0
            assert again[1:] == paused
            beyond = f"{len(events) + 1}-{mark}"  # the run is paused: its log is whole
            assert streamed(http, run_id, last_event_id=beyond)[0]["event"] == "reset"

            step = summary["data"]["pending"]["step_id"]
            approve = {"approve": True, "step_id": step, "wait": False}
            resumed = http.post(f"/runs/{run_id}/resume", json=approve)
            assert resumed.status_code == 202 and resumed.json()["run_id"] == run_id
            rest = streamed(http, run_id, after_seq=events[-1]["seq"])
            assert rest[-1]["data"]["status"] == "finished"
            later = [m["data"] for m in rest if m["event"] == "event"]
            assert [e["seq"] for e in later] == list(
                range(len(events) + 1, len(events) + 1 + len(later))
            )
            assert {"confirmation_given", "run_finished"} <= {e["type"] for e in later}

            # the same approval again is the same drive: answered with the run's summary
            again = http.post(f"/runs/{run_id}/resume", json={**approve, "wait": True})
            assert again.status_code == 200 and again.json()["status"] == "finished"
            # and a start that asks to wait gets the summary, as without --enqueue (the
            # order was exchanged: it is not proposed again)
            waited = http.post("/agents/aftersales/runs", json={"message": EXCHANGE, "wait": True})
            assert waited.status_code == 200
            assert waited.json()["status"] == "finished"
            assert waited.json()["outcome"] == "refused"
            too_long = http.post("/agents/aftersales/runs", json={"message": "x" * 4001})
            assert too_long.status_code == 413  # refused here, as without --enqueue
            assert too_long.json()["error"]["code"] == "INPUT_TOO_LARGE"
            missing = http.get("/runs/run_0123456789abcdef/stream")
            assert missing.status_code == 404
            assert missing.json()["error"]["code"] == "RUN_NOT_FOUND"
            panel = http.get("/workers").json()  # the dashboard's workers page reads this
        figures = corral_cli(home, "workers", "--store", workers.store_url, "--json")
        listed = json.loads(figures.stdout)
        queue = listed["queues"][0]
        assert (queue["name"], queue["finished"], queue["in_flight"]) == ("aftersales", 3, 0)
        assert [w["executor_id"] for w in listed["workers"]] == ["w-1"]
        assert panel["queues"] == listed["queues"] and panel["workers"] == listed["workers"]
    assert exchanges(home) == 1  # approved once, written once


def test_a_drive_cancelled_by_an_operator_is_answered_with_a_corral_error(
    tmp_path: Path,
) -> None:
    """DBOS's own tools may cancel a drive (``dbos workflow cancel``): its waiters get a code.

    A start that waits, the run's stream and ``RunQueue.wait`` all learned of it as an
    exception of DBOS's (a 500 with no error body, a stream error with no code).
    """
    import threading

    from dbos import DBOSClient

    from corral.errors import CorralError, ErrorCode
    from corral.workers import names
    from corral.workers.client import RunQueue
    from tests.workers_support import sql, until

    with worker_pool(tmp_path) as workers:  # its database; no worker ever runs
        with enqueuing(workers) as http:
            answers: list[Any] = []
            waiting = threading.Thread(
                target=lambda: answers.append(
                    http.post("/agents/aftersales/runs", json={"message": EXCHANGE, "wait": True})
                )
            )
            waiting.start()
            drives = "SELECT workflow_uuid FROM dbos.workflow_status WHERE name = %s"
            until(lambda: bool(sql(workers.store_url, drives, names.DRIVE_WORKFLOW)), "a drive")
            drive = str(sql(workers.store_url, drives, names.DRIVE_WORKFLOW)[0][0])
            operator = DBOSClient(
                system_database_url=names.system_database_url(workers.store_url),
                dbos_system_schema=names.SYSTEM_SCHEMA,
            )
            operator.cancel_workflow(drive)
            operator.destroy()
            waiting.join(timeout=60)
            run_id = names.run_of(drive)[0]
            ended = streamed(http, run_id)
        with RunQueue(workers.store_url) as queue:
            try:
                queue.wait(drive, 5.0)
                raised: Exception | None = None
            except Exception as exc:
                raised = exc
    assert answers and answers[0].status_code == 409
    assert answers[0].json()["error"]["code"] == "RUN_NOT_RESUMABLE"
    assert ended[-1]["event"] == "error"
    assert ended[-1]["data"]["error"]["code"] == "RUN_NOT_RESUMABLE"
    assert isinstance(raised, CorralError) and raised.code is ErrorCode.RUN_NOT_RESUMABLE
    assert "cancelled" in raised.message


def test_a_session_message_that_answers_a_paused_run_is_that_runs_next_drive(
    tmp_path: Path,
) -> None:
    """Found on main: an answer typed in a session was answered 202 with a new run's id.

    The worker gave the message to the session's paused run, as ``Runtime.start`` does, so
    that run never existed: its stream and ``GET /runs/{id}`` were a 404, and a client
    never saw its answer land. The server now gives the message to the paused run itself,
    by the runtime's own rule (``Runtime.open_run_input``), and enqueues that run's drive.
    """
    with worker_pool(tmp_path) as workers:
        home = workers.home
        workers.start("w-1", AFTERSALES)
        with enqueuing(workers) as http:
            session = {"session_id": "s-enq"}
            first = {"message": EXCHANGE_NO_ORDER, "wait": True, **session}
            asked = http.post("/agents/aftersales/runs", json=first)
            assert asked.status_code == 200 and asked.json()["status"] == "awaiting_user"
            run_id = asked.json()["run_id"]

            answer = http.post("/agents/aftersales/runs", json={"message": "HD20240501", **session})
            assert answer.status_code == 202
            assert answer.json() == {"run_id": run_id, "status": "running"}
            paused = streamed(http, run_id)  # follows the answer's drive to the next pause
            assert paused[-1]["data"]["status"] == "awaiting_confirm"
            assert paused[-1]["data"]["run_id"] == run_id

            yes = {"message": "好的", "wait": True, **session}
            done = http.post("/agents/aftersales/runs", json=yes)
            assert done.status_code == 200, done.text
            assert (done.json()["run_id"], done.json()["status"]) == (run_id, "finished")
            events = http.get(f"/runs/{run_id}/events").json()["events"]
            said = [e["data"].get("text") for e in events if e["type"] == "user_message"]
            assert said[-1] == "好的"  # logged before the yes, as without --enqueue
            listed = http.get("/runs", params=session).json()["runs"]
            assert [row["run_id"] for row in listed] == [run_id]  # one run, no phantom
    assert exchanges(home) == 1


def test_a_message_id_makes_a_retry_safe_before_and_after_a_worker_took_it(
    tmp_path: Path,
) -> None:
    """On main ``--enqueue`` refused ``message_id`` (422): a retry would have run twice.

    Now a retry while the first waits in the queue names the same drive (a run id derived
    from the id), and one after a worker stored it is answered with that run's summary;
    another message under a taken id is refused. A routed answer or yes keeps its id too.
    """
    with worker_pool(tmp_path) as workers:
        home = workers.home
        with enqueuing(workers) as http:
            body = {"message": EXCHANGE, "message_id": "m-1", "session_id": "s-id"}
            first = http.post("/agents/aftersales/runs", json=body)
            assert first.status_code == 202, first.text
            run_id = first.json()["run_id"]
            again = http.post("/agents/aftersales/runs", json=body)  # no worker yet
            assert again.status_code == 202 and again.json()["run_id"] == run_id
            other = http.post("/agents/aftersales/runs", json={**body, "message": "我要退货"})
            assert other.status_code == 422 and other.json()["error"]["code"] == "INVALID_INPUT"
            assert len(http.get("/runs").json()["runs"]) == 1  # one queued run, not two

            workers.start("w-1", AFTERSALES)
            paused = streamed(http, run_id)
            assert paused[-1]["data"]["status"] == "awaiting_confirm"
            retried = http.post("/agents/aftersales/runs", json=body)  # stored now
            assert retried.status_code == 200, retried.text
            assert (retried.json()["run_id"], retried.json()["status"]) == (
                run_id,
                "awaiting_confirm",
            )
            other = http.post("/agents/aftersales/runs", json={**body, "message": "我要退货"})
            assert other.status_code == 422 and other.json()["error"]["code"] == "INVALID_INPUT"

            yes = {"message": "好的", "message_id": "m-2", "session_id": "s-id", "wait": True}
            done = http.post("/agents/aftersales/runs", json=yes)
            assert done.status_code == 200, done.text
            assert (done.json()["run_id"], done.json()["status"]) == (run_id, "finished")
            later = http.post("/agents/aftersales/runs", json=yes)  # a lost answer, asked again
            assert later.status_code == 200 and later.json()["run_id"] == run_id
            assert later.json()["status"] == "finished"
            listed = http.get("/runs", params={"session_id": "s-id"}).json()["runs"]
            assert [row["run_id"] for row in listed] == [run_id]
    assert exchanges(home) == 1


def test_while_drives_wait_in_the_queue_message_ids_hold_and_the_listing_pages(
    tmp_path: Path,
) -> None:
    """Found by a review of the above, each on this suite's first version:

    - the same answer under two ids was one drive, and the second id was never kept (its
      retry was handled afresh, as a new run);
    - a new request under an id whose answer waited in the queue got a 202 of its own;
    - a message-id start whose drive failed (cancelled) answered every retry with that
      failure;
    - ``GET /runs`` read only ``offset + limit`` drives, resume drives among them: a page
      said it was the last with queued runs still to show, and a stored run showed twice.
    """
    from dbos import DBOSClient

    from corral.workers import names

    with worker_pool(tmp_path) as workers, enqueuing(workers) as http:
        runs = "/agents/aftersales/runs"
        worker = workers.start("w-1", AFTERSALES)
        first = {"message": EXCHANGE_NO_ORDER, "session_id": "s1", "wait": True}
        asked = http.post(runs, json=first)
        assert asked.json()["status"] == "awaiting_user"
        waiting = asked.json()["run_id"]
        proposed = http.post(runs, json={"message": EXCHANGE, "session_id": "s2", "wait": True})
        assert proposed.json()["status"] == "awaiting_confirm"
        workers.stop(worker)  # from here on, drives wait in the queue

        cancelled = http.post(runs, json={"message": EXCHANGE, "message_id": "m-c"}).json()
        operator = DBOSClient(
            system_database_url=names.system_database_url(workers.store_url),
            dbos_system_schema=names.SYSTEM_SCHEMA,
        )
        operator.cancel_workflow(names.workflow_id(cancelled["run_id"], 0))
        operator.destroy()
        again = http.post(runs, json={"message": EXCHANGE, "message_id": "m-c"})
        assert again.status_code == 202, again.text  # a new attempt, not the cancellation
        assert again.json()["run_id"] == cancelled["run_id"]
        plain = http.post(runs, json={"message": EXCHANGE}).json()["run_id"]
        other = http.post(runs, json={"message": EXCHANGE, "session_id": "s3"}).json()["run_id"]

        answer = {"message": "HD20240501", "session_id": "s1", "message_id": "a1"}
        first = http.post(runs, json=answer)
        assert first.status_code == 202 and first.json()["run_id"] == waiting
        twice = http.post(runs, json={**answer, "message_id": "a2"})  # the same words again
        assert twice.status_code == 409 and twice.json()["error"]["code"] == "RUN_BUSY"
        for message in (COMPLAINT, "HD20240502"):  # another message under the queued id
            refused = http.post(runs, json={**answer, "message": message})
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"]["code"] == "INVALID_INPUT"
        retried = http.post(runs, json=answer)
        assert retried.status_code == 202 and retried.json()["run_id"] == waiting

        listed = [row["run_id"] for row in http.get("/runs").json()["runs"]]
        newest_first = [other, plain, cancelled["run_id"], proposed.json()["run_id"], waiting]
        assert listed == newest_first
        paged, offset = [], 0
        while offset is not None:
            page = http.get("/runs", params={"limit": 2, "offset": offset}).json()
            paged += [row["run_id"] for row in page["runs"]]
            offset = page["next_offset"]
        assert paged == newest_first
        session = http.get("/runs", params={"session_id": "s3", "limit": 1}).json()
        assert [row["run_id"] for row in session["runs"]] == [other]

        workers.start("w-2", AFTERSALES)
        applied = http.post(runs, json={**answer, "wait": True})  # the answer's drive, awaited
        assert applied.status_code == 200, applied.text
        assert (applied.json()["run_id"], applied.json()["status"]) == (waiting, "awaiting_confirm")
        resumed = http.post(runs, json={"message": EXCHANGE, "message_id": "m-c", "wait": True})
        assert resumed.json()["status"] == "awaiting_confirm"


def _declined_then_enqueued(
    tmp_path: Path, first: str, paused_at: str, line: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """With ``--enqueue``: ``first`` pauses at ``paused_at``, then ``line`` declines that run
    and is a new run's drive. The new run's answer, and the declined run as it ended; no
    exchange was made."""
    with worker_pool(tmp_path) as workers:
        home = workers.home
        workers.start("w-1", AFTERSALES)
        with enqueuing(workers) as http:
            session = {"session_id": "s-decline"}
            opened = {"message": first, "wait": True, **session}
            asked = http.post("/agents/aftersales/runs", json=opened)
            assert asked.status_code == 200 and asked.json()["status"] == paused_at
            waiting = asked.json()["run_id"]
            sent = {"message": line, "wait": True, **session}
            answered = http.post("/agents/aftersales/runs", json=sent)
            assert answered.status_code == 200, answered.text
            assert answered.json()["run_id"] != waiting
            declined = http.get(f"/runs/{waiting}").json()
            assert (declined["status"], declined["outcome"]) == ("finished", "cancelled")
    assert exchanges(home) == 0
    return answered.json(), declined


def test_a_correction_at_a_confirmation_declines_it_then_enqueues_a_run_of_its_own(
    tmp_path: Path,
) -> None:
    """A "不对，是 HD…" at an exchange's confirmation, with ``--enqueue``, as without it: the
    drive that declines the wrong order's exchange ends first, and the message is then a
    new run's drive, which proposes the exchange of the order it names."""
    fixed, _ = _declined_then_enqueued(
        tmp_path, EXCHANGE, "awaiting_confirm", "不对，是 HD20250920"
    )
    assert fixed["status"] == "awaiting_confirm"
    assert "HD20250920" in fixed["reply"]


def test_a_withdrawal_then_a_question_at_a_question_ends_it_then_enqueues_a_run_of_its_own(
    tmp_path: Path,
) -> None:
    """ "算了，打印机保修多久" asked for an exchange's order, with ``--enqueue``, as without it:
    the drive that takes the exchange back (its answer) ends first, then the question is a
    new run's drive, answered."""
    line = "算了，打印机保修多久"
    answered, _ = _declined_then_enqueued(tmp_path, EXCHANGE_NO_ORDER, "awaiting_user", line)
    assert answered["outcome"] == "success", answered
    assert "60 个月" in answered["reply"]

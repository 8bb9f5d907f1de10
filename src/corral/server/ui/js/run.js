// The run page: timeline, intent and entities, plan graph, steps, reply, handoff packet,
// and the actions a paused run waits for. A run still going follows its event stream.

import { ApiError, follow, get, post } from "./api.js";
import { badge, duration, facts, fill, h, pre, when } from "./dom.js";
import { statusLabel, t } from "./i18n.js";
import { drawPlan } from "./plangraph.js";
import { drawTimeline, unfolded } from "./timeline.js";

const TERMINAL = new Set(["finished", "failed", "handed_off"]);
const PAUSED = new Set(["awaiting_confirm", "awaiting_user"]);

const WATCH_MS = 3000;
const RETRIES = 5;

/** Render run `id` into `view`; `signal` stops its stream and polling when the page is left. */
export async function runPage(view, id, signal) {
  const page = { id, view, signal, detail: null, events: [], timer: null, following: false };
  signal.addEventListener("abort", () => clearInterval(page.timer));
  fill(view, h("p", { class: "muted" }, t("common.loading")));
  try {
    await load(page);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return fill(view, back(), h("p", { class: "error" }, t("run.notfound")));
    throw err;
  }
}

async function load(page) {
  const [detail, events] = await Promise.all([
    get(`/runs/${encodeURIComponent(page.id)}`),
    get(`/runs/${encodeURIComponent(page.id)}/events`, { after_seq: 0 }),
  ]);
  if (page.signal.aborted) return; // the person moved on while this page loaded
  page.detail = detail;
  page.events = events.events || [];
  render(page);
  clearInterval(page.timer);
  if (PAUSED.has(detail.status)) page.timer = setInterval(() => watch(page), WATCH_MS);
  else if (!TERMINAL.has(detail.status)) live(page).catch((err) => liveFailed(page, err));
}

/** A paused run may be resumed elsewhere (the CLI, another tab): reload when it moves on. */
async function watch(page) {
  const now = await get(`/runs/${encodeURIComponent(page.id)}`).catch(() => null);
  if (!page.signal.aborted && now && now.status !== page.detail.status) {
    clearInterval(page.timer);
    await load(page);
  }
}

/**
 * Follow the run's stream from the last event shown, redrawing as events arrive. A dropped
 * connection is picked up again from the last `seq` seen, so no event is missed.
 */
async function live(page) {
  if (page.following) return;
  page.following = true;
  const note = page.view.querySelector("#live-note");
  if (note) note.hidden = false;
  let pending = null;
  let stopped = null;
  const onEvent = (name, data) => {
    if (name === "error") stopped = data.error; // the run failed or the server stopped it
    if (name !== "event" || data.seq <= (page.events.at(-1)?.seq ?? 0)) return;
    page.events.push(data);
    pending =
      pending ||
      setTimeout(() => {
        pending = null;
        drawDynamic(page);
      }, 120);
  };
  try {
    for (let tries = 0; !page.signal.aborted; ) {
      try {
        const path = `/runs/${encodeURIComponent(page.id)}/stream`;
        await follow(path, { after_seq: page.events.at(-1)?.seq ?? 0 }, onEvent, page.signal);
        break; // the stream ended: the run paused or ended
      } catch (err) {
        if (page.signal.aborted) return;
        if (++tries > RETRIES || (err instanceof ApiError && err.status < 500)) throw err;
        await new Promise((resolve) => setTimeout(resolve, 1000 * tries));
      }
    }
  } finally {
    page.following = false;
  }
  if (!page.signal.aborted) await load(page); // show the run as it now stands
  if (stopped && !page.signal.aborted) {
    const hint = stopped.hint ? ` (${stopped.hint})` : "";
    page.view.prepend(h("p", { class: "error", id: "stream-error" }, `${t("run.stream_error")}: ${stopped.code ?? ""} ${stopped.message}${hint}`));
  }
}

function liveFailed(page, err) {
  const note = page.view.querySelector("#live-note");
  if (note) fill(note, `${t("common.error")}: ${err.message}`);
}

function back() {
  return h("a", { href: "#/runs", class: "back" }, t("run.back"));
}

function render(page) {
  const { detail, view } = page;
  fill(
    view,
    back(),
    h(
      "h1",
      {},
      t("run.title", { id: detail.run_id }),
      " ",
      badge(detail.status, statusLabel(detail.status)),
      h("span", { id: "live-note", class: "live", hidden: true }, t("run.live")),
    ),
    facts([
      [t("run.agent"), detail.agent],
      [t("runs.created"), when(detail.created_at)],
      [t("runs.updated"), when(detail.updated_at)],
      [t("run.outcome"), detail.outcome],
      [t("run.error_code"), detail.error_code],
      [t("run.trace"), detail.trace_id],
    ], true),
    actions(page),
    h("section", {}, h("h2", {}, t("run.timeline")), h("p", { class: "muted small" }, t("run.timeline.note")), h("div", { id: "timeline", class: "chart" })),
    conversation(page.events),
    h("section", { class: "two" }, intentSection(page), h("div", {}, h("h2", {}, t("run.plan")), h("div", { id: "plan", class: "chart" }))),
    h("section", {}, h("h2", {}, t("run.steps")), h("div", { id: "steps" })),
    h("section", {}, h("h2", {}, t("run.reply")), h("blockquote", { id: "reply" }, detail.reply ?? "—")),
    detail.handoff ? h("section", {}, h("h2", {}, t("run.handoff")), pre(detail.handoff)) : null,
    detail.model_calls && detail.model_calls.length
      ? h("section", {}, h("details", {}, h("summary", {}, `${t("run.model_calls")} (${detail.model_calls.length})`), pre(detail.model_calls)))
      : null,
  );
  drawDynamic(page);
}

/** The parts that change while a run goes on: timeline, plan graph, steps. */
function drawDynamic(page) {
  const { view, events } = page;
  const timeline = view.querySelector("#timeline");
  if (!timeline) return;
  drawTimeline(timeline, events);
  const steps = planSteps(events);
  const statuses = stepStatuses(events);
  const planEl = view.querySelector("#plan");
  if (steps.length) drawPlan(planEl, steps, statuses);
  else fill(planEl, h("p", { class: "muted" }, t("run.noplan")));
  fill(view.querySelector("#steps"), stepCards(events, steps, statuses));
}

/** What the user said and was asked, in order (the user's words, as text). */
function conversation(events) {
  const said = {
    user_message: "run.user",
    user_answered: "run.user",
    question_asked: "run.agent_said",
    confirmation_requested: "run.agent_said",
  };
  const lines = events.filter((e) => said[e.type]);
  return h(
    "section",
    { id: "conversation" },
    h("h2", {}, t("run.conversation")),
    h("ol", { class: "conversation" }, lines.map((e) => h("li", { data: { who: said[e.type] === "run.user" ? "user" : "agent" } }, h("span", { class: "muted small" }, t(said[e.type])), " ", e.data.text ?? e.data.prompt))),
  );
}

function intentSection(page) {
  const intent = page.detail.intent;
  const entities = {};
  for (const e of page.events) if (e.type === "entities_merged") Object.assign(entities, e.data.entities || {});
  return h(
    "div",
    {},
    h("h2", {}, t("run.intent")),
    intent
      ? facts([
          [t("run.intent"), intent.label ?? "—"],
          [t("run.confidence"), typeof intent.confidence === "number" ? intent.confidence.toFixed(2) : intent.confidence],
          [t("run.source"), intent.source],
        ])
      : h("p", { class: "muted" }, t("common.none")),
    h("h3", {}, t("run.entities")),
    Object.keys(entities).length ? facts(Object.entries(entities)) : h("p", { class: "muted" }, t("common.none")),
  );
}

/** The steps of the run's latest plan. */
function planSteps(events) {
  const plans = events.filter((e) => e.type === "plan_created");
  return plans.length ? plans.at(-1).data.plan.steps || [] : [];
}

/** Each step's status so far, from its events. */
function stepStatuses(events) {
  const statuses = new Map();
  for (const e of events) {
    const id = e.data && e.data.step_id;
    if (e.type === "step_started") statuses.set(id, "running");
    else if (e.type === "step_finished") statuses.set(id, e.data.status);
    else if (e.type === "step_skipped") statuses.set(id, "skipped");
    else if (e.type === "step_blocked") statuses.set(id, "blocked");
  }
  return statuses;
}

/** One card per step: arguments, tool attempts, envelope and verdicts. */
function stepCards(events, steps, statuses) {
  const ids = steps.map((s) => s.id);
  for (const id of statuses.keys()) if (!ids.includes(id)) ids.push(id);
  return ids.map((id) => {
    const mine = unfolded(events).filter((e) => e.data && e.data.step_id === id);
    const started = mine.filter((e) => e.type === "step_started").at(-1);
    const ended = mine.filter((e) => ["step_finished", "step_skipped", "step_blocked"].includes(e.type)).at(-1);
    const attempts = mine.filter((e) => e.type === "tool_attempt");
    const verdicts = [
      ...mine.filter((e) => e.type === "verified").map((e) => e.data.verdict),
      ...(ended && ended.data.verdict ? [ended.data.verdict] : []),
    ];
    const planned = steps.find((s) => s.id === id);
    const tool = started?.data.tool ?? planned?.tool ?? "";
    const status = statuses.get(id) || "pending";
    return h(
      "details",
      { class: "step", data: { step: id } },
      h(
        "summary",
        {},
        h("strong", {}, id),
        ` · ${tool} `,
        badge(status, status),
        attempts.length ? ` · ${t("run.attempts")}: ${attempts.length}` : "",
        attempts.some((a) => a.data.attempt > 1) ? " ↻" : "",
      ),
      h("h4", {}, t("run.args")),
      pre(started ? started.data.args : planned?.args),
      attempts.length
        ? h(
            "ul",
            { class: "attempts" },
            attempts.map((a) =>
              h("li", {}, `#${a.data.attempt} ${a.data.status} · ${duration(a.data.duration_ms || 0)}${a.data.error_code ? ` · ${a.data.error_code}` : ""}${a.data.error_message ? ` — ${a.data.error_message}` : ""}`),
            ),
          )
        : null,
      h("h4", {}, t("run.envelope")),
      pre(ended ? envelope(ended) : null),
      h("h4", {}, t("run.verdict")),
      verdicts.length ? verdicts.map((v) => pre(v)) : pre(null),
    );
  });
}

function envelope(ended) {
  const { result, status, error_code, reason } = ended.data;
  return result ?? { status, error_code, reason };
}

/** Approve / reject a confirmation, or answer a question, through POST /runs/{id}/resume. */
function actions(page) {
  const pending = page.detail.pending;
  if (!pending || !PAUSED.has(page.detail.status)) return null;
  const result = h("p", { class: "muted", id: "action-result" });
  const send = async (body, buttons) => {
    clearInterval(page.timer); // this page drives the run now
    for (const b of buttons) b.disabled = true;
    try {
      const summary = await post(`/runs/${encodeURIComponent(page.id)}/resume`, { ...body, step_id: pending.step_id ?? null });
      fill(result, t("run.sent", { s: statusLabel(summary.status) }));
      await load(page);
    } catch (err) {
      if (err.status === 409) {
        // decided elsewhere, or it asks about another call now: show what it asks (the
        // buttons then send that call), with why nothing was decided
        await load(page);
        const shown = document.getElementById("action-result");
        if (shown) fill(shown, `${t("common.error")}: ${err.message}`);
        return;
      }
      fill(result, `${t("common.error")}: ${err.message}`);
      for (const b of buttons) b.disabled = false;
    }
  };
  const box = h("section", { class: "actions", id: "actions" }, h("h2", {}, t("run.waiting")), h("blockquote", {}, pending.prompt));
  if (pending.kind === "confirm") {
    const approve = h("button", { type: "button", id: "approve", class: "primary" }, t("run.approve"));
    const reject = h("button", { type: "button", id: "reject" }, t("run.reject"));
    // the decision is about the call shown here: if the run asks about another now, 409
    const call = pending.call ?? null;
    approve.addEventListener("click", () => send({ approve: true, call }, [approve, reject]));
    reject.addEventListener("click", () => send({ approve: false, call }, [approve, reject]));
    box.append(h("div", { class: "buttons" }, approve, reject));
  } else {
    const input = h("input", { type: "text", id: "answer", "aria-label": t("run.answer"), placeholder: t("run.answer") });
    const button = h("button", { type: "button", id: "send-answer", class: "primary" }, t("run.send"));
    button.addEventListener("click", () => input.value.trim() && send({ answer: input.value }, [button]));
    box.append(h("div", { class: "buttons" }, input, button));
  }
  box.append(result);
  return box;
}

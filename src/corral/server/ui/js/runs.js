// The runs page: filters (agent, status, intent, time window) kept in the address, a status
// at a glance, and the list, refreshed every few seconds while the page is open.

import { get } from "./api.js";
import { badge, fill, h, when } from "./dom.js";
import { statusLabel, t } from "./i18n.js";

export const STATUSES = [
  "parsing",
  "planning",
  "deciding",
  "executing",
  "awaiting_confirm",
  "awaiting_user",
  "finished",
  "failed",
  "handed_off",
];
const WINDOWS = ["15m", "1h", "24h", "7d"];
const FILTERS = ["agent", "status", "intent", "since"];
const POLL_S = 3;
const GLANCE = 200;
const PAGE = 50;
/** The most runs one request lists (GET /runs ``limit``, at most 500). */
const MAX_LISTED = 500;

/** The filters in the address (`#/runs?status=...`). */
function filtersOf(query) {
  return Object.fromEntries(FILTERS.map((name) => [name, query.get(name) || ""]));
}

function select(name, current, options) {
  return h(
    "select",
    { name, id: `filter-${name}` },
    h("option", { value: "" }, t("common.all")),
    options.map(([value, label]) => h("option", { value, selected: value === current }, label)),
  );
}

/** Render the runs page into `view`; returns nothing, stops polling when `signal` aborts. */
export async function runsPage(view, query, signal) {
  const filters = filtersOf(query);
  const agents = (await get("/agents").catch(() => ({ agents: [] }))).agents || [];
  if (signal.aborted) return; // the person moved on while this page loaded
  const intents = [...new Set(agents.flatMap((a) => a.intents || []))];
  const form = h(
    "form",
    { class: "filters", id: "filters" },
    h("label", {}, t("runs.agent"), select("agent", filters.agent, agents.map((a) => [a.name, a.name]))),
    h("label", {}, t("runs.status"), select("status", filters.status, STATUSES.map((s) => [s, statusLabel(s)]))),
    h(
      "label",
      {},
      t("runs.intent"),
      h("input", { name: "intent", id: "filter-intent", list: "intent-list", value: filters.intent, autocomplete: "off" }),
      h("datalist", { id: "intent-list" }, intents.map((i) => h("option", { value: i }))),
    ),
    h("label", {}, t("runs.since"), select("since", filters.since, WINDOWS.map((w) => [w, t(`since.${w}`)]))),
  );
  form.addEventListener("submit", (e) => e.preventDefault());
  form.addEventListener("change", () => {
    const chosen = new URLSearchParams();
    for (const name of FILTERS) if (form.elements[name].value) chosen.set(name, form.elements[name].value);
    location.hash = `#/runs${chosen.toString() ? `?${chosen}` : ""}`;
  });
  const glance = h("div", { class: "glance", id: "glance" });
  const table = h("div", { id: "runs-table" });
  const more = h("button", { type: "button", id: "more", hidden: true }, t("runs.more"));
  const capped = h("p", { class: "muted small", id: "runs-capped", hidden: true }, t("runs.capped", { n: MAX_LISTED }));
  fill(view, h("h1", {}, t("runs.title")), form, glance, h("p", { class: "muted small" }, t("runs.polling", { s: POLL_S })), table, more, capped);

  let shown = PAGE;
  const refresh = async () => {
    const [list, recent] = await Promise.all([
      get("/runs", { ...filters, limit: shown, offset: 0 }),
      get("/runs", { ...filters, status: "", limit: GLANCE, offset: 0 }),
    ]);
    if (signal.aborted) return;
    drawGlance(glance, recent.runs || [], filters);
    drawTable(table, list.runs || []);
    const older = list.next_offset !== null && list.next_offset !== undefined;
    more.hidden = !older || shown >= MAX_LISTED;
    capped.hidden = !older || shown < MAX_LISTED;
  };
  more.addEventListener("click", () => {
    shown = Math.min(shown + PAGE, MAX_LISTED); // more was refused (422), and the list froze
    refresh();
  });
  await refresh();
  if (signal.aborted) return;
  const timer = setInterval(() => refresh().catch(() => {}), POLL_S * 1000);
  signal.addEventListener("abort", () => clearInterval(timer));
}

/** Counts by status under the other filters; a click filters by that status. */
function drawGlance(el, runs, filters) {
  const counts = new Map();
  for (const run of runs) counts.set(run.status, (counts.get(run.status) || 0) + 1);
  const chips = STATUSES.filter((s) => counts.has(s)).map((status) => {
    const chosen = new URLSearchParams({ ...Object.fromEntries(Object.entries(filters).filter(([, v]) => v)), status });
    return h(
      "a",
      { href: `#/runs?${chosen}`, class: `chip${filters.status === status ? " on" : ""}`, data: { status, count: String(counts.get(status)) } },
      badge(status, statusLabel(status)),
      h("b", {}, String(counts.get(status))),
    );
  });
  fill(el, h("span", { class: "muted small" }, t("runs.glance", { n: runs.length })), chips);
}

function drawTable(el, runs) {
  if (!runs.length) return fill(el, h("p", { class: "muted" }, t("runs.empty")));
  const head = ["runs.created", "runs.run", "runs.agent", "runs.intent", "runs.status", "runs.session", "runs.updated"];
  fill(
    el,
    h(
      "table",
      { class: "runs" },
      h("thead", {}, h("tr", {}, head.map((k) => h("th", {}, t(k))))),
      h(
        "tbody",
        {},
        runs.map((run) =>
          h(
            "tr",
            { data: { run: run.run_id, status: run.status } },
            h("td", {}, when(run.created_at)),
            h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(run.run_id)}` }, run.run_id)),
            h("td", {}, run.agent ?? "—"),
            h("td", {}, run.intent ?? "—"),
            h("td", {}, badge(run.status, statusLabel(run.status))),
            h("td", {}, run.session_id ?? "—"),
            h("td", {}, when(run.updated_at)),
          ),
        ),
      ),
    ),
  );
}

// The workers sharing this server's PostgreSQL store (GET /workers, what `corral workers`
// prints): who is alive, each queue's figures, and the runs taken over from a dead worker.
// Refreshed every few seconds while the page is open.

import { get } from "./api.js";
import { fill, h, when } from "./dom.js";
import { t } from "./i18n.js";

const POLL_S = 3;

export async function workersPage(view, signal) {
  const refresh = async () => {
    const found = await get("/workers");
    if (signal.aborted) return; // the person moved on while this page loaded
    fill(view, h("h1", {}, t("workers.title")), ...sections(found));
  };
  await refresh();
  if (signal.aborted) return;
  const timer = setInterval(() => refresh().catch(() => {}), POLL_S * 1000);
  signal.addEventListener("abort", () => clearInterval(timer));
}

function sections(found) {
  const workers = found.workers || [];
  const orphaned = found.orphaned || [];
  return [
    h("h2", {}, `${t("workers.live")}: ${workers.length}`),
    workers.length
      ? table(
          ["workers.executor", "workers.since", "workers.host", "workers.in_flight"],
          workers.map((w) => [w.executor_id, when(w.since), w.host, w.in_flight]),
          "workers",
        )
      : h("p", { class: "muted" }, t("workers.none")),
    orphaned.length
      ? [
          h("h2", {}, t("workers.orphaned")),
          table(["workers.executor", "workers.in_flight"], orphaned.map((o) => [o.executor_id, o.in_flight]), "orphaned"),
        ]
      : null,
    h("h2", {}, t("workers.queues")),
    table(
      ["workers.queue", "workers.enqueued", "workers.in_flight", "workers.finished", "workers.failed"],
      (found.queues || []).map((q) => [`${q.kind} ${q.name}`, q.enqueued, q.in_flight, q.finished, q.failed]),
      "queues",
    ),
    h("h2", {}, `${t("workers.recovered")}: ${found.recovered_total ?? 0}`),
    table(
      ["runs.run", "workers.status", "workers.executor", "workers.dispatches"],
      (found.recovered || []).map((r) => [
        h("a", { href: `#/runs/${encodeURIComponent(r.run_id)}` }, r.run_id),
        r.status,
        r.executor_id ?? "—",
        r.dispatches,
      ]),
      "recovered",
    ),
  ];
}

function table(head, rows, name) {
  return h(
    "table",
    { class: "runs", data: { table: name } },
    h("thead", {}, h("tr", {}, head.map((k) => h("th", {}, t(k))))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c))))),
  );
}

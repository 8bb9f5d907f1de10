// The handoff queue a person works from: newest first, each with the reason, what the user
// said and the facts already known, so nobody has to ask the user again.

import { get } from "./api.js";
import { facts, fill, h, pre, when } from "./dom.js";
import { t } from "./i18n.js";

export async function handoffsPage(view, signal) {
  const { handoffs = [] } = await get("/handoffs", { limit: 100 });
  if (signal.aborted) return; // the person moved on while this page loaded
  fill(
    view,
    h("h1", {}, t("handoffs.title")),
    handoffs.length ? handoffs.map(card) : h("p", { class: "muted" }, t("handoffs.empty")),
  );
}

function card(item) {
  const packet = item.packet || {};
  return h(
    "article",
    { class: "card handoff", data: { run: item.run_id } },
    h(
      "h3",
      {},
      h("a", { href: `#/runs/${encodeURIComponent(item.run_id)}` }, item.run_id),
      h("span", { class: "muted small" }, ` · ${item.agent ?? ""} · ${when(item.created_at)}`),
    ),
    facts([
      [t("handoffs.reason"), item.reason ?? packet.reason],
      [t("run.error_code"), packet.reason_code],
      [t("run.intent"), packet.intent ? packet.intent.label : null],
    ]),
    h("h4", {}, t("handoffs.messages")),
    h("ul", {}, (packet.user_messages || []).map((m) => h("li", {}, m))),
    Object.keys(packet.facts || {}).length ? [h("h4", {}, t("handoffs.facts")), facts(Object.entries(packet.facts))] : null,
    h("details", {}, h("summary", {}, t("handoffs.packet")), pre(packet)),
  );
}

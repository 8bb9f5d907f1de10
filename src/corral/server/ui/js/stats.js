// The stats page: the figures of `corral stats` (GET /stats) as charts: stage durations,
// tool success rates, handoff reasons and runs over time.

import { ApiError, get } from "./api.js";
import { facts, fill, h } from "./dom.js";
import { t } from "./i18n.js";

const WINDOWS = ["1h", "24h", "7d", ""];

/** `{name: number}` or `[{name, count}]` as `[[name, number], ...]`. */
export function pairs(value, key = "count") {
  if (!value) return [];
  if (Array.isArray(value)) return value.map((v) => [String(v.name ?? v.reason ?? v.tool ?? v.code ?? v.key ?? "?"), Number(v[key] ?? v.value ?? 0)]);
  return Object.entries(value).map(([k, v]) => [k, typeof v === "number" ? v : Number(v?.[key] ?? 0)]);
}

const pct = (x) => (typeof x === "number" ? `${(x * 100).toFixed(1)} %` : "—");

export async function statsPage(view, query, signal) {
  const since = query.get("since") ?? "24h";
  const picker = h(
    "select",
    { id: "stats-since" },
    WINDOWS.map((w) => h("option", { value: w, selected: w === since }, w ? t(`since.${w}`) : t("common.all"))),
  );
  picker.addEventListener("change", () => {
    location.hash = `#/stats?since=${encodeURIComponent(picker.value)}`;
  });
  fill(view, h("h1", {}, t("stats.title")), h("label", { class: "filters" }, t("runs.since"), picker), h("div", { id: "stats-body" }, t("common.loading")));
  const body = view.querySelector("#stats-body");
  let stats;
  try {
    stats = await get("/stats", { since });
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return fill(body, h("p", { class: "error", id: "stats-missing" }, t("stats.missing")));
    throw err;
  }
  if (signal.aborted) return;
  const runs = typeof stats.runs === "object" && stats.runs ? stats.runs : { total: stats.runs };
  fill(
    body,
    facts([
      [t("stats.runs"), runs.total ?? stats.total_runs ?? "—"],
      [t("stats.completion"), pct(stats.completion_rate)],
      [t("stats.partial"), pct(stats.partial_completion_rate ?? stats.partial_rate)],
      [t("stats.handoff_rate"), pct(stats.handoff_rate)],
    ]),
    h("div", { class: "grid" }, ...CHARTS.map(([id, key]) => h("section", {}, h("h2", {}, t(key)), h("div", { id, class: "chart small-chart" })))),
  );
  for (const [id, , option] of CHARTS) draw(body.querySelector(`#${id}`), option(stats));
}

function draw(el, option) {
  if (!option) return fill(el, h("p", { class: "muted" }, t("stats.nodata")));
  const chart = echarts.init(el);
  chart.setOption({ animation: false, tooltip: { trigger: "axis", renderMode: "richText" }, grid: { left: 130, right: 20, top: 30, bottom: 30 }, ...option });
  el.dataset.drawn = "1";
}

function bars(names, series) {
  if (!names.length) return null;
  return {
    legend: { top: 0 },
    yAxis: { type: "category", data: names, inverse: true },
    xAxis: { type: "value" },
    series: series.map(([name, data, color]) => ({ type: "bar", name, data, itemStyle: color ? { color } : undefined })),
  };
}

function stageOption(stats) {
  const p95 = new Map(pairs(stats.stage_p95_ms));
  const p50 = new Map(pairs(stats.stage_p50_ms));
  const names = [...new Set([...p50.keys(), ...p95.keys()])];
  return bars(names, [
    ["p50", names.map((n) => p50.get(n) ?? null)],
    ["p95", names.map((n) => p95.get(n) ?? null)],
  ]);
}

function toolOption(stats) {
  const tools = stats.tools || stats.tool_calls || {};
  const calls = new Map(pairs(tools, "calls"));
  const failed = new Map(pairs(stats.tool_failures?.by_tool ?? stats.tool_failures, "failures"));
  const names = [...new Set([...calls.keys(), ...failed.keys()])];
  const rate = (n) => {
    const total = calls.get(n);
    return total ? Math.round((1 - (failed.get(n) || 0) / total) * 1000) / 10 : null;
  };
  const option = bars(names, [[t("stats.success"), names.map(rate), "#4caf7a"]]);
  if (option) option.xAxis = { type: "value", max: 100, axisLabel: { formatter: "{value} %" } };
  return option;
}

function reasonOption(stats) {
  const reasons = pairs(stats.handoff_reasons ?? stats.handoffs?.reasons);
  return bars(reasons.map(([k]) => k), [[t("stats.reasons"), reasons.map(([, v]) => v), "#e8833a"]]);
}

function overTimeOption(stats) {
  const points = pairs(stats.runs_over_time ?? stats.runs_by_hour ?? stats.runs_by_day);
  if (!points.length) return null;
  return {
    xAxis: { type: "category", data: points.map(([k]) => k) },
    yAxis: { type: "value", minInterval: 1 },
    grid: { left: 40, right: 20, top: 20, bottom: 40 },
    series: [{ type: "line", name: t("stats.runs"), data: points.map(([, v]) => v), areaStyle: {} }],
  };
}

const CHARTS = [
  ["chart-stages", "stats.stages", stageOption],
  ["chart-tools", "stats.tools", toolOption],
  ["chart-reasons", "stats.reasons", reasonOption],
  ["chart-over-time", "stats.over_time", overTimeOption],
];

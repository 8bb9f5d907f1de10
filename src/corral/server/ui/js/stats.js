// The stats page: the figures of `corral stats` (GET /stats) as charts: stage durations,
// tool success rates and durations, handoff reasons, runs by status. Runs over time are
// counted here from the latest runs GET /runs lists (the stats have no time series).

import { ApiError, get } from "./api.js";
import { facts, fill, h } from "./dom.js";
import { statusLabel, t } from "./i18n.js";

const WINDOWS = ["1h", "24h", "7d", ""];

/** A `{name: number}` object of the stats as `[[name, number], ...]`. */
export function pairs(value) {
  return Object.entries(value || {}).map(([k, v]) => [k, Number(v)]);
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
  let recent;
  try {
    [stats, recent] = await Promise.all([get("/stats", { since }), get("/runs", { since, limit: RECENT })]);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return fill(body, h("p", { class: "error", id: "stats-missing" }, t("stats.missing")));
    throw err;
  }
  if (signal.aborted) return;
  const tokens = stats.tokens || {};
  fill(
    body,
    facts([
      [t("stats.runs"), `${stats.runs} (${t("stats.ended")}: ${stats.ended ?? "—"})`],
      [t("stats.completion"), pct(stats.completion_rate)],
      [t("stats.partial"), pct(stats.partial_completion_rate)],
      [t("stats.handoff_rate"), pct(stats.handoff_rate)],
      [t("stats.avg"), `${num(stats.avg_steps)} / ${num(stats.avg_tool_calls)}`],
      [t("stats.models"), `${stats.model_calls ?? 0} · ${tokens.input ?? 0} / ${tokens.output ?? 0} · ${stats.cost ?? 0}`],
    ]),
    h("div", { class: "grid" }, ...CHARTS.map(([id, key]) => h("section", {}, h("h2", {}, t(key, { n: (recent.runs || []).length })), h("div", { id, class: "chart small-chart" })))),
  );
  for (const [id, , option] of CHARTS) draw(body.querySelector(`#${id}`), option(stats, recent.runs || []));
}

const RECENT = 500;
const num = (x) => (typeof x === "number" ? String(x) : "—");

function draw(el, option) {
  if (!option) return fill(el, h("p", { class: "muted" }, t("stats.nodata")));
  const chart = echarts.init(el);
  chart.setOption({ animation: false, tooltip: { trigger: "axis", renderMode: "richText" }, grid: { left: 130, right: 20, top: 30, bottom: 30 }, ...option });
  el.dataset.drawn = "1";
  el.dataset.names = JSON.stringify(option.yAxis?.data ?? option.xAxis?.data ?? []);
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

/** p50 and p95 bars of a `{name: ms}` pair of figures. */
function percentiles(p50s, p95s) {
  const p50 = new Map(pairs(p50s));
  const p95 = new Map(pairs(p95s));
  const names = [...new Set([...p50.keys(), ...p95.keys()])];
  return bars(names, [
    ["p50", names.map((n) => p50.get(n) ?? null), "#8aa4c8"],
    ["p95", names.map((n) => p95.get(n) ?? null), "#2f6fde"],
  ]);
}

const stageOption = (stats) => percentiles(stats.stage_p50_ms, stats.stage_p95_ms);
const toolTimeOption = (stats) => percentiles(stats.tool_p50_ms, stats.tool_p95_ms);

function statusOption(stats) {
  const counts = pairs(stats.by_status);
  return bars(counts.map(([k]) => statusLabel(k)), [[t("stats.runs"), counts.map(([, v]) => v), "#5b8def"]]);
}

/** Success rate per tool: attempts that did not fail, over attempts (in %). */
function toolOption(stats) {
  const calls = new Map(pairs(stats.tool_calls));
  const failed = new Map(pairs(stats.tool_failures?.by_tool));
  const names = [...calls.keys()];
  const rate = (n) => Math.round((1 - (failed.get(n) || 0) / calls.get(n)) * 1000) / 10;
  const option = bars(names, [[t("stats.success"), names.map(rate), "#4caf7a"]]);
  if (option) option.xAxis = { type: "value", max: 100, axisLabel: { formatter: "{value} %" } };
  return option;
}

function reasonOption(stats) {
  const reasons = pairs(stats.handoff_reasons);
  return bars(reasons.map(([k]) => k), [[t("stats.reasons"), reasons.map(([, v]) => v), "#e8833a"]]);
}

/** Runs started per hour (per day past two days), from the latest runs GET /runs lists. */
export function perPeriod(runs) {
  const times = runs.map((r) => new Date(r.created_at)).filter((d) => !Number.isNaN(d.getTime()));
  if (!times.length) return [];
  const span = Math.max(...times) - Math.min(...times);
  const key = (d) => (span > 2 * 86400e3 ? d.toISOString().slice(0, 10) : `${d.toISOString().slice(0, 13)}:00`);
  const counts = new Map();
  for (const d of times.sort((a, b) => a - b)) counts.set(key(d), (counts.get(key(d)) || 0) + 1);
  return [...counts.entries()];
}

function overTimeOption(stats, runs) {
  const points = perPeriod(runs);
  if (!points.length) return null;
  return {
    xAxis: { type: "category", data: points.map(([k]) => k) },
    yAxis: { type: "value", minInterval: 1 },
    grid: { left: 40, right: 20, top: 20, bottom: 40 },
    series: [{ type: "bar", name: t("stats.runs"), data: points.map(([, v]) => v), itemStyle: { color: "#5b8def" } }],
  };
}

const CHARTS = [
  ["chart-stages", "stats.stages", stageOption],
  ["chart-tools", "stats.tools", toolOption],
  ["chart-reasons", "stats.reasons", reasonOption],
  ["chart-over-time", "stats.over_time", overTimeOption],
  ["chart-tool-times", "stats.tool_times", toolTimeOption],
  ["chart-status", "stats.by_status", statusOption],
];

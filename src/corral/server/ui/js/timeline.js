// The run's Gantt timeline, computed from its events and drawn with ECharts (custom series).
//
// Rows: one per layer (intent … reply), then one per step, so steps that ran in parallel
// sit on rows of their own and overlap in time. A step's bar spans step_started to its
// end; its tool attempts are drawn inside it, a retry (attempt > 1) marked ↻. A pause
// (waiting for a confirmation or the user) can last hours, so it is drawn as a short grey
// gap with its real length written on it: the axis counts active time.
//
// The computed bars are exposed on the chart element (`data-bars`) and as
// `window.corralTimeline`, so a test or a person can read what was drawn.

import { h, duration } from "./dom.js";
import { t } from "./i18n.js";

/**
 * The events with every tool attempt as an event of its own: a step whose tool succeeded
 * at its first and only attempt has no tool_attempt, its step_finished stands for it
 * (sole_attempt; docs/store.md), so one is put before that step_finished.
 */
export function unfolded(events) {
  const out = [];
  for (const e of events) {
    const d = e.data || {};
    if (e.type === "step_finished" && d.sole_attempt && d.result) {
      const data = { step_id: d.step_id, tool: d.result.tool, attempt: 1, status: "success", duration_ms: d.duration_ms, data: d.result.data };
      out.push({ ...e, type: "tool_attempt", data });
    }
    out.push(e);
  }
  return out;
}

export const LAYERS = ["intent", "route", "plan", "decide", "execute", "verify", "reply"];
const PAUSED = new Set(["awaiting_confirm", "awaiting_user"]);
const STEP_END = new Set(["step_finished", "step_skipped", "step_blocked"]);

/** Milliseconds since the epoch of an ISO time, keeping its microseconds. */
export function toMs(iso) {
  const match = /^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$/.exec(iso || "");
  if (!match) return Date.parse(iso);
  const fraction = match[2] ? Number(match[2]) * 1000 : 0;
  return Date.parse(match[1] + match[3]) + fraction;
}

/** The pauses of a run: [start, end] in ms since its first event (end: last event if open). */
function pausesOf(events, t0, last) {
  const pauses = [];
  let open = null;
  for (const e of events) {
    if (e.type !== "status_changed") continue;
    const at = toMs(e.ts) - t0;
    if (PAUSED.has(e.data.to) && open === null) open = { start: at, reason: e.data.to };
    else if (!PAUSED.has(e.data.to) && open !== null) {
      pauses.push({ ...open, end: at });
      open = null;
    }
  }
  if (open !== null) pauses.push({ ...open, end: Math.max(last, open.start), open: true });
  return pauses;
}

/** Map real time to drawn time: each pause shrinks to `gap`. */
function squeeze(pauses, gap) {
  return (at) => {
    let cut = 0;
    for (const p of pauses) {
      const length = p.end - p.start;
      if (at >= p.end) cut += length - Math.min(gap, length);
      else if (at > p.start) return p.start - cut + Math.min(gap, length) * ((at - p.start) / length);
    }
    return at - cut;
  };
}

/** Which active stretch (between pauses) a time falls in; the answer ending a pause opens the next. */
function stretchOf(pauses, at) {
  return pauses.filter((p) => p.start < at).length;
}

/**
 * The timeline of a run: `{rows, bars, pauses, span}`. Bars carry `row`, `kind` (layer,
 * step, attempt), `name`, `start`/`end` (real ms since the first event), `x0`/`x1` (drawn
 * ms), and for steps and attempts `step`, `tool`, `status`, `attempt`, `retry`.
 */
export function buildTimeline(events) {
  if (!events.length) return { rows: [], bars: [], pauses: [], span: 0 };
  const t0 = toMs(events[0].ts);
  const at = (e) => toMs(e.ts) - t0;
  const last = at(events[events.length - 1]);
  const pauses = pausesOf(events, t0, last);
  const active = Math.max(last - pauses.reduce((s, p) => s + (p.end - p.start), 0), 0.001);
  const gap = Math.max(active * 0.08, 0.02);
  const x = squeeze(pauses, gap);

  const bars = [];
  // layers: one bar per active stretch, from the stage's first event to its last
  const spans = new Map();
  for (const e of events) {
    const stage = e.type === "user_message" ? "intent" : e.stage;
    if (!LAYERS.includes(stage)) continue;
    const end = at(e);
    const start = Math.max(0, end - (e.data && e.type === "intent_classified" ? e.data.duration_ms || 0 : 0));
    const key = `${stage}/${stretchOf(pauses, end)}`;
    const span = spans.get(key);
    if (span) span.end = Math.max(span.end, end);
    else spans.set(key, { kind: "layer", name: stage, start, end });
  }
  // steps and their attempts
  const open = new Map();
  const stepOrder = [];
  const seen = (id) => stepOrder.includes(id) || stepOrder.push(id);
  for (const e of unfolded(events)) {
    const d = e.data || {};
    if (e.type === "step_started") {
      seen(d.step_id);
      const bar = { kind: "step", name: d.step_id, step: d.step_id, tool: d.tool, start: at(e), end: at(e), status: "running" };
      open.set(d.step_id, bar);
      bars.push(bar);
    } else if (e.type === "tool_attempt") {
      seen(d.step_id);
      const end = at(e);
      const start = Math.max(end - (d.duration_ms || 0), open.get(d.step_id)?.start ?? 0);
      const attempt = d.attempt || 1;
      bars.push({ kind: "attempt", name: d.step_id, step: d.step_id, tool: d.tool, start, end, status: d.status, attempt, retry: attempt > 1, error: d.error_code || null });
    } else if (STEP_END.has(e.type)) {
      seen(d.step_id);
      const bar = open.get(d.step_id);
      const status = d.status || e.type.replace("step_", "");
      if (bar) {
        Object.assign(bar, { end: at(e), status });
        open.delete(d.step_id);
      } else {
        bars.push({ kind: "step", name: d.step_id, step: d.step_id, tool: null, start: at(e), end: at(e), status });
      }
    }
  }
  for (const bar of open.values()) bar.end = last; // still running: up to the latest event

  const layerRows = LAYERS.filter((name) => [...spans.values()].some((s) => s.name === name));
  const rows = [...layerRows.map((name) => ({ kind: "layer", name })), ...stepOrder.map((name) => ({ kind: "step", name }))];
  const rowOf = (kind, name) => rows.findIndex((r) => r.kind === kind && r.name === name);
  const all = [...spans.values(), ...bars].map((bar) => ({
    ...bar,
    row: rowOf(bar.kind === "layer" ? "layer" : "step", bar.name),
    x0: x(bar.start),
    x1: x(bar.end),
  }));
  const drawnPauses = pauses.map((p) => ({ ...p, x0: x(p.start), x1: x(p.start) + Math.min(gap, p.end - p.start || gap) }));
  return { rows, bars: all, pauses: drawnPauses, span: x(last) };
}

const COLORS = {
  layer: "#8aa4c8",
  succeeded: "#4caf7a",
  success: "#2e8b57",
  running: "#f0b429",
  failed: "#d64545",
  error: "#d64545",
  skipped: "#9e9e9e",
  blocked: "#9e9e9e",
  retry: "#e8833a",
};

function colorOf(bar) {
  if (bar.kind === "layer") return COLORS.layer;
  if (bar.kind === "attempt" && bar.retry) return COLORS.retry;
  return COLORS[bar.status] || "#6c7a89";
}

function tooltipFor(bar) {
  const lines = [
    bar.kind === "layer" ? `${t("row.layer")} ${t(`layer.${bar.name}`)}` : `${t("row.step")} ${bar.name}${bar.tool ? ` · ${bar.tool}` : ""}`,
    `${duration(bar.end - bar.start)} (${bar.start.toFixed(2)} → ${bar.end.toFixed(2)} ms)`,
  ];
  if (bar.status) lines.push(String(bar.status));
  if (bar.kind === "attempt") lines.push(`${bar.retry ? "↻ " : ""}attempt ${bar.attempt}${bar.error ? ` · ${bar.error}` : ""}`);
  return h("div", {}, lines.map((line) => h("div", {}, line))); // an element: never parsed as HTML
}

/** The ECharts option that draws `timeline`. */
export function timelineOption(timeline) {
  const { rows, bars, pauses, span } = timeline;
  const rowLabel = (r) => (r.kind === "layer" ? t(`layer.${r.name}`) : `${r.name}${toolOf(bars, r.name)}`);
  const items = bars.map((bar, i) => ({ value: [bar.row, bar.x0, bar.x1, i] }));
  const renderBar = (params, api) => {
    const bar = bars[api.value(3)];
    const [xs, yc] = api.coord([api.value(1), api.value(0)]);
    const [xe] = api.coord([api.value(2), api.value(0)]);
    const band = api.size([0, 1])[1];
    const height = bar.kind === "attempt" ? band * 0.34 : band * 0.62;
    const shape = { x: xs, y: yc - height / 2, width: Math.max(xe - xs, 3), height };
    const rect = { type: "rect", shape, style: { fill: colorOf(bar), opacity: bar.kind === "step" ? 0.35 : 1 } };
    if (!(bar.kind === "attempt" && bar.retry)) return rect;
    const mark = { type: "text", style: { text: `↻${bar.attempt}`, x: shape.x + shape.width + 2, y: yc, verticalAlign: "middle", fill: COLORS.retry, font: "bold 11px sans-serif" } };
    return { type: "group", children: [rect, mark] };
  };
  const renderPause = (params, api) => {
    const p = pauses[api.value(2)];
    const [xs] = api.coord([p.x0, 0]);
    const [xe] = api.coord([p.x1, 0]);
    const { y, height } = params.coordSys;
    const label = p.open ? t("run.waiting_since") : t("run.paused", { d: duration(p.end - p.start) });
    return {
      type: "group",
      children: [
        { type: "rect", shape: { x: xs, y, width: Math.max(xe - xs, 6), height }, style: { fill: "rgba(120,120,120,0.18)", stroke: "#999", lineDash: [4, 3] } },
        { type: "text", style: { text: label, x: xs + 3, y: y + 3, fill: "#555", font: "11px sans-serif" } },
      ],
    };
  };
  return {
    animation: false,
    grid: { left: 150, right: 50, top: 12, bottom: 44 },
    tooltip: { trigger: "item", formatter: (p) => (p.seriesIndex === 0 ? tooltipFor(bars[p.value[3]]) : "") },
    xAxis: {
      type: "value",
      min: 0,
      max: Math.max(span, ...pauses.map((p) => p.x1), 0.001),
      name: t("run.axis"),
      nameLocation: "middle",
      nameGap: 26,
      axisLabel: { formatter: (v) => String(+v.toFixed(2)) },
    },
    yAxis: { type: "category", inverse: true, data: rows.map(rowLabel), axisTick: { show: false } },
    series: [
      { type: "custom", name: "bars", renderItem: renderBar, encode: { x: [1, 2], y: 0 }, data: items, clip: true },
      { type: "custom", name: "pauses", renderItem: renderPause, data: pauses.map((p, i) => [p.x0, p.x1, i]), silent: true },
    ],
  };
}

function toolOf(bars, step) {
  const bar = bars.find((b) => b.kind === "step" && b.step === step && b.tool);
  return bar ? ` · ${bar.tool}` : "";
}

/** Draw (or redraw) the timeline of `events` into `el`; returns the computed timeline. */
export function drawTimeline(el, events) {
  const timeline = buildTimeline(events);
  el.style.height = `${Math.max(160, 56 + timeline.rows.length * 26)}px`;
  const chart = echarts.getInstanceByDom(el) || echarts.init(el);
  chart.resize();
  chart.off("finished"); // before setOption: the first frame may be drawn within it
  chart.on("finished", () => {
    el.dataset.drawn = String(events.length); // the canvas holds this many events' bars
    el.dataset.drawnMs = performance.now().toFixed(1); // since the page's navigation began
  });
  chart.setOption(timelineOption(timeline), true);
  const exposed = { rows: timeline.rows, bars: timeline.bars, pauses: timeline.pauses };
  el.dataset.bars = JSON.stringify(exposed.bars);
  el.dataset.rows = JSON.stringify(exposed.rows);
  el.dataset.pauses = JSON.stringify(exposed.pauses);
  el.dataset.events = String(events.length);
  window.corralTimeline = exposed;
  return timeline;
}

// The run's plan as a graph (ECharts graph series): one node per step, an arrow from each
// dependency (`depends_on`) to the step that waits for it. Steps are laid out in columns by
// depth, so steps that may run in parallel stand one above the other.

const STATUS_COLORS = {
  succeeded: "#4caf7a",
  failed: "#d64545",
  skipped: "#9e9e9e",
  blocked: "#9e9e9e",
  running: "#f0b429",
  pending: "#c9d3e0",
};

/** Column (depth) of each step: 0 for a step with no dependency, else 1 + its deepest. */
export function depths(steps) {
  const byId = new Map(steps.map((s) => [s.id, s]));
  const memo = new Map();
  const depth = (id, trail = new Set()) => {
    if (memo.has(id)) return memo.get(id);
    if (trail.has(id) || !byId.has(id)) return 0; // a cycle or unknown id: plans are DAGs
    trail.add(id);
    const deps = byId.get(id).depends_on || [];
    const d = deps.length ? 1 + Math.max(...deps.map((dep) => depth(dep, trail))) : 0;
    memo.set(id, d);
    return d;
  };
  return new Map(steps.map((s) => [s.id, depth(s.id)]));
}

/** The graph's nodes and edges; `statuses` maps step id to its status so far. */
export function planGraph(steps, statuses) {
  const columns = depths(steps);
  const perColumn = new Map();
  const nodes = steps.map((s) => {
    const column = columns.get(s.id);
    const row = perColumn.get(column) || 0;
    perColumn.set(column, row + 1);
    const status = statuses.get(s.id) || "pending";
    return {
      id: s.id,
      name: `${s.id}\n${s.tool}`,
      x: column * 200,
      y: row * 70,
      status,
      itemStyle: { color: STATUS_COLORS[status] || "#6c7a89" },
    };
  });
  const edges = steps.flatMap((s) => (s.depends_on || []).map((dep) => ({ source: dep, target: s.id })));
  return { nodes, edges };
}

/** The ECharts option for a plan graph. */
export function planOption(graph) {
  return {
    animation: false,
    tooltip: { show: false },
    series: [
      {
        type: "graph",
        layout: "none",
        roam: true,
        symbol: "roundRect",
        symbolSize: [104, 36],
        label: { show: true, color: "#111", fontSize: 11, lineHeight: 14 },
        edgeSymbol: ["none", "arrow"],
        edgeSymbolSize: 9,
        lineStyle: { color: "#667", width: 1.5, curveness: 0.08 },
        data: graph.nodes.map(({ status, ...node }) => node),
        links: graph.edges,
      },
    ],
  };
}

/** Draw the plan graph into `el`; the nodes and edges are exposed as `data-graph`. */
export function drawPlan(el, steps, statuses) {
  const graph = planGraph(steps, statuses);
  const rows = Math.max(1, ...[...depthCounts(graph.nodes).values()]);
  el.style.height = `${Math.max(140, rows * 70 + 40)}px`;
  const chart = echarts.getInstanceByDom(el) || echarts.init(el);
  chart.resize();
  chart.setOption(planOption(graph), true);
  el.dataset.graph = JSON.stringify({ nodes: graph.nodes.map((n) => ({ id: n.id, x: n.x, y: n.y, status: n.status })), edges: graph.edges });
  return graph;
}

function depthCounts(nodes) {
  const counts = new Map();
  for (const n of nodes) counts.set(n.x, (counts.get(n.x) || 0) + 1);
  return counts;
}

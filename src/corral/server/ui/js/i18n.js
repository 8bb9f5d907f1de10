// Every label of the dashboard in English and Chinese. The language comes from the toggle
// (kept in localStorage) or else from the browser; data from the API is never translated.

const LABELS = {
  "nav.runs": ["Runs", "运行"],
  "nav.handoffs": ["Handoffs", "转人工"],
  "nav.stats": ["Stats", "统计"],
  "nav.workers": ["Workers", "工作进程"],
  "nav.logout": ["Sign out", "退出"],
  "login.title": ["Sign in", "登录"],
  "login.help": [
    "Paste the API token (CORRAL_API_TOKEN, or the token file in the home).",
    "请粘贴 API 令牌（CORRAL_API_TOKEN，或 home 目录中的令牌文件）。",
  ],
  "login.token": ["API token", "API 令牌"],
  "login.submit": ["Sign in", "登录"],
  "login.rejected": ["The token was refused (401).", "令牌无效（401）。"],
  "common.loading": ["Loading…", "加载中…"],
  "common.none": ["none", "无"],
  "common.all": ["all", "全部"],
  "common.error": ["The request failed", "请求失败"],
  "common.live": ["live", "实时"],
  "common.refresh": ["Refresh", "刷新"],
  "runs.title": ["Runs", "运行列表"],
  "runs.agent": ["Agent", "智能体"],
  "runs.status": ["Status", "状态"],
  "runs.intent": ["Intent", "意图"],
  "runs.since": ["Time window", "时间范围"],
  "runs.created": ["Started", "开始时间"],
  "runs.updated": ["Updated", "更新时间"],
  "runs.run": ["Run", "运行 ID"],
  "runs.session": ["Session", "会话"],
  "runs.empty": ["No run matches these filters.", "没有符合筛选条件的运行。"],
  "runs.glance": ["Status at a glance (latest {n} runs)", "状态概览（最近 {n} 次运行）"],
  "runs.more": ["Older runs", "更早的运行"],
  "runs.capped": ["The newest {n} runs are listed: narrow the filters to see older ones.", "只列出最新的 {n} 个运行：请缩小筛选范围查看更早的运行。"],
  "runs.polling": ["Updates every {s} s", "每 {s} 秒自动更新"],
  "since.15m": ["last 15 min", "最近 15 分钟"],
  "since.1h": ["last hour", "最近 1 小时"],
  "since.24h": ["last 24 h", "最近 24 小时"],
  "since.7d": ["last 7 days", "最近 7 天"],
  "status.parsing": ["parsing", "解析中"],
  "status.planning": ["planning", "规划中"],
  "status.deciding": ["deciding", "决策中"],
  "status.executing": ["executing", "执行中"],
  "status.awaiting_confirm": ["awaiting confirmation", "待确认"],
  "status.awaiting_user": ["awaiting the user", "待用户回复"],
  "status.finished": ["finished", "已完成"],
  "status.failed": ["failed", "失败"],
  "status.handed_off": ["handed off", "已转人工"],
  "status.queued": ["queued", "排队中"],
  "status.running": ["running", "运行中"],
  "run.title": ["Run {id}", "运行 {id}"],
  "run.back": ["← All runs", "← 全部运行"],
  "run.timeline": ["Timeline", "时间线"],
  "run.timeline.note": [
    "Layers and steps; parallel steps on their own rows; ↻ marks a retry; a grey gap is a pause (shortened).",
    "各层与各步骤；并行步骤各占一行；↻ 表示重试；灰色间隔表示暂停（已压缩）。",
  ],
  "run.paused": ["paused {d}", "暂停 {d}"],
  "run.axis": ["ms of active time", "活跃时间（毫秒）"],
  "run.conversation": ["Conversation", "对话"],
  "run.user": ["user:", "用户："],
  "run.agent_said": ["agent:", "助手："],
  "run.waiting_since": ["waiting…", "等待中…"],
  "run.intent": ["Intent", "意图"],
  "run.confidence": ["confidence", "置信度"],
  "run.source": ["source", "来源"],
  "run.entities": ["Entities", "实体"],
  "run.plan": ["Plan", "计划"],
  "run.noplan": ["This run made no plan.", "本次运行没有生成计划。"],
  "run.steps": ["Steps", "步骤"],
  "run.args": ["Arguments", "参数"],
  "run.envelope": ["Envelope (tool result)", "返回信封（工具结果）"],
  "run.verdict": ["Verdict", "校验结论"],
  "run.attempts": ["attempts", "尝试次数"],
  "run.reply": ["Reply", "回复"],
  "run.handoff": ["Handoff packet", "转人工数据包"],
  "run.summary": ["Summary", "概要"],
  "run.outcome": ["outcome", "结果"],
  "run.error_code": ["error code", "错误码"],
  "run.stream_error": ["The run stopped with an error", "运行因错误中止"],
  "run.agent": ["agent", "智能体"],
  "run.trace": ["trace", "追踪 ID"],
  "run.model_calls": ["Model calls", "模型调用"],
  "run.waiting": ["Waiting for you", "等待处理"],
  "run.approve": ["Approve", "批准"],
  "run.reject": ["Reject", "拒绝"],
  "run.answer": ["Answer", "回复用户"],
  "run.send": ["Send", "发送"],
  "run.sent": ["Sent. The run is now: {s}", "已提交，运行状态：{s}"],
  "run.live": ["Following the run live…", "正在实时跟踪运行…"],
  "run.notfound": ["No such run.", "没有这个运行。"],
  "run.events": ["{n} events", "{n} 个事件"],
  "row.layer": ["layer", "层"],
  "row.step": ["step", "步骤"],
  "layer.intent": ["intent", "意图"],
  "layer.route": ["route", "路由"],
  "layer.plan": ["plan", "规划"],
  "layer.decide": ["decide", "决策"],
  "layer.execute": ["execute", "执行"],
  "layer.verify": ["verify", "校验"],
  "layer.reply": ["reply", "回复"],
  "handoffs.title": ["Handoffs: the queue to work", "转人工队列"],
  "handoffs.empty": ["No run was handed off.", "没有转人工的运行。"],
  "handoffs.reason": ["Reason", "原因"],
  "handoffs.messages": ["User messages", "用户消息"],
  "handoffs.facts": ["Facts", "已知事实"],
  "handoffs.packet": ["Whole packet", "完整数据包"],
  "stats.title": ["Stats", "统计"],
  "workers.title": ["Workers", "工作进程"],
  "workers.live": ["Live workers", "在线工作进程"],
  "workers.none": ["No live worker (they share a PostgreSQL store: corral worker).", "没有在线的工作进程（它们共用 PostgreSQL 存储：corral worker）。"],
  "workers.executor": ["Executor", "执行器"],
  "workers.since": ["Since", "启动于"],
  "workers.host": ["Host", "主机"],
  "workers.in_flight": ["In flight", "进行中"],
  "workers.orphaned": ["Runs left by a gone worker (being taken over)", "已退出进程的运行（正在接管）"],
  "workers.queues": ["Queues", "队列"],
  "workers.queue": ["Queue", "队列"],
  "workers.enqueued": ["Enqueued", "排队中"],
  "workers.finished": ["Finished", "已完成"],
  "workers.failed": ["Failed", "失败"],
  "workers.recovered": ["Runs recovered", "已接管的运行"],
  "workers.dispatches": ["Dispatches", "派发次数"],
  "workers.status": ["Status", "状态"],
  "stats.missing": [
    "This server has no statistics endpoint (GET /stats answered 404).",
    "该服务没有统计接口（GET /stats 返回 404）。",
  ],
  "stats.runs": ["Runs", "运行数"],
  "stats.completion": ["Completion rate", "完成率"],
  "stats.partial": ["Partial completion rate", "部分完成率"],
  "stats.handoff_rate": ["Handoff rate", "转人工率"],
  "stats.stages": ["Stage duration (ms)", "各阶段耗时（毫秒）"],
  "stats.tools": ["Tool success rate", "工具成功率"],
  "stats.reasons": ["Handoff reasons", "转人工原因"],
  "stats.over_time": ["Runs over time (latest {n} runs)", "运行数随时间变化（最近 {n} 次运行）"],
  "stats.tool_times": ["Tool call duration (ms)", "工具调用耗时（毫秒）"],
  "stats.ended": ["ended", "已结束"],
  "stats.avg": ["Steps / tool calls per run", "每次运行的步骤数 / 工具调用数"],
  "stats.models": ["Model calls · tokens in / out · cost", "模型调用 · 输入 / 输出 token · 费用"],
  "stats.by_status": ["Runs by status", "按状态统计"],
  "stats.nodata": ["No data in this window.", "该时间范围内没有数据。"],
  "stats.success": ["success", "成功"],
  "stats.failure": ["failure", "失败"],
};

const KEY = "corral.lang";

/** The language in use: the saved toggle, else the browser's first language. */
export function language() {
  const saved = localStorage.getItem(KEY);
  if (saved === "zh" || saved === "en") return saved;
  return (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en";
}

/** Switch language and remember it for the next visit. */
export function setLanguage(lang) {
  localStorage.setItem(KEY, lang);
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
}

/** The label `key` in the current language, with `{name}` filled from `vars`. */
export function t(key, vars = {}) {
  const pair = LABELS[key];
  const text = pair ? pair[language() === "zh" ? 1 : 0] : key;
  return text.replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
}

/** A status word in the current language (an unknown one is shown as it is). */
export function statusLabel(status) {
  return LABELS[`status.${status}`] ? t(`status.${status}`) : String(status);
}

/** Fill every `data-i18n` element under `root` with its label. */
export function translate(root = document) {
  for (const el of root.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
}

export const ALL_LABELS = LABELS;

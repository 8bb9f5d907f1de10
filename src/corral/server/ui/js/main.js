// The dashboard's shell: hash routes (#/runs, #/runs/ID, #/stats, #/handoffs, #/workers), sign-in,
// language toggle. Each page gets an AbortSignal that stops its polling and streams when
// the person moves to another page.

import { setToken, token, tokenFromFragment } from "./api.js";
import { fill, h } from "./dom.js";
import { handoffsPage } from "./handoffs.js";
import { language, setLanguage, t, translate } from "./i18n.js";
import { runPage } from "./run.js";
import { runsPage } from "./runs.js";
import { statsPage } from "./stats.js";
import { workersPage } from "./workers.js";

const view = document.getElementById("view");
const notice = document.getElementById("notice");
let leaving = null;

function parseRoute() {
  const [path, search] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(search || "") };
}

function disposeCharts() {
  for (const el of view.querySelectorAll(".chart")) echarts.getInstanceByDom(el)?.dispose();
}

async function route() {
  tokenFromFragment(); // a link pasted into this tab may bring a new token
  leaving?.abort();
  leaving = new AbortController();
  const signal = leaving.signal;
  notice.hidden = true;
  disposeCharts();
  if (!token()) return login();
  const { parts, query } = parseRoute();
  const page = parts[0] || "runs";
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("on", link.dataset.route === page);
  document.getElementById("logout").hidden = false;
  try {
    if (page === "runs" && parts[1]) await runPage(view, parts[1], signal);
    else if (page === "stats") await statsPage(view, query, signal);
    else if (page === "handoffs") await handoffsPage(view, signal);
    else if (page === "workers") await workersPage(view, signal);
    else await runsPage(view, query, signal);
  } catch (err) {
    if (signal.aborted) return;
    fill(notice, `${t("common.error")}: ${err.message}`);
    notice.hidden = false;
  }
}

function login(message) {
  document.getElementById("logout").hidden = true;
  const form = document.getElementById("login-template").content.firstElementChild.cloneNode(true);
  translate(form);
  if (message) form.append(h("p", { class: "error" }, message));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(form.elements.token.value.trim());
    route();
  });
  fill(view, form);
  form.elements.token.focus();
}

function applyLanguage() {
  setLanguage(language());
  translate();
  document.getElementById("lang-toggle").textContent = language() === "zh" ? "English" : "中文";
}

document.getElementById("lang-toggle").addEventListener("click", () => {
  setLanguage(language() === "zh" ? "en" : "zh");
  applyLanguage();
  route();
});
document.getElementById("logout").addEventListener("click", () => {
  setToken(null);
  route();
});
window.addEventListener("corral:unauthorized", () => {
  setToken(null);
  leaving?.abort();
  login(t("login.rejected"));
});
window.addEventListener("hashchange", route);
window.addEventListener("resize", () => {
  for (const el of view.querySelectorAll(".chart")) echarts.getInstanceByDom(el)?.resize();
});

applyLanguage();
route();

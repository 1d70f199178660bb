// chute's built-in dashboard: plain JavaScript over the Clash-compatible
// API this page is served from. No network beyond this origin.
"use strict";

const $ = (s) => document.querySelector(s);
const params = new URLSearchParams(location.search);
let secret = params.get("token") || localStorage.getItem("chute.secret") || "";
const state = { flows: [], sort: { key: "id", asc: false }, filter: "", sockets: [] };

function api(method, path, body) {
  const headers = {};
  if (secret) headers.Authorization = "Bearer " + secret;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  return fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
    .then(async (r) => {
      if (r.status === 401) { needSecret(); throw new Error("401 Unauthorized"); }
      if (r.status === 204) return null;
      const j = await r.json().catch(() => null);
      if (!r.ok) throw new Error((j && j.message) || r.status + "");
      return j;
    });
}

function setStatus(text, cls) {
  const s = $("#status");
  s.textContent = text;
  s.className = "status " + (cls || "");
}

function needSecret() {
  $("#auth").hidden = false;
  setStatus("secret needed", "bad");
}

$("#auth").addEventListener("submit", (e) => {
  e.preventDefault();
  secret = $("#secret").value;
  localStorage.setItem("chute.secret", secret);
  $("#auth").hidden = true;
  start();
});

function fmtBytes(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

function fmtAge(start) {
  const s = Math.max(0, (Date.now() - Date.parse(start)) / 1000);
  return s < 60 ? s.toFixed(0) + "s" : s < 3600 ? (s / 60).toFixed(0) + "m" : (s / 3600).toFixed(1) + "h";
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

function ws(path, onmsg) {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const sep = path.includes("?") ? "&" : "?";
  const url = proto + "//" + location.host + path + (secret ? sep + "token=" + encodeURIComponent(secret) : "");
  const sock = new WebSocket(url);
  sock.onmessage = (m) => { try { onmsg(JSON.parse(m.data)); } catch (_) { /* a partial line */ } };
  sock.onclose = () => {
    const i = state.sockets.indexOf(sock);
    if (i >= 0) { state.sockets.splice(i, 1); setTimeout(() => state.sockets.push(ws(path, onmsg)), 2000); }
  };
  state.sockets.push(sock);
  return sock;
}

// ---- traffic chart
const points = [];
function drawTraffic(t) {
  points.push(t);
  if (points.length > 120) points.shift();
  $("#rate").textContent = "↑ " + fmtBytes(t.up) + "/s  ↓ " + fmtBytes(t.down) + "/s";
  const c = $("#traffic"), g = c.getContext("2d");
  const w = c.width, h = c.height;
  g.clearRect(0, 0, w, h);
  const max = Math.max(1024, ...points.map((p) => Math.max(p.up, p.down)));
  for (const [key, color] of [["down", "#4fb3ff"], ["up", "#59d185"]]) {
    g.beginPath();
    g.strokeStyle = color;
    g.lineWidth = 2;
    points.forEach((p, i) => {
      const x = w - (points.length - 1 - i) * (w / 119), y = h - 4 - (p[key] / max) * (h - 12);
      i ? g.lineTo(x, y) : g.moveTo(x, y);
    });
    g.stroke();
  }
  g.fillStyle = "#7d8894";
  g.fillText(fmtBytes(max) + "/s", 6, 12);
}

// ---- flows
function flowRow(f) {
  const m = f.metadata;
  return {
    id: Number(f.id), network: m.network, type: m.type,
    source: m.sourceIP + ":" + m.sourcePort,
    dest: (m.host || m.destinationIP) + ":" + m.destinationPort,
    chain: f.chains.slice().reverse().join(" → "),
    rule: f.rule + (f.rulePayload ? " " + f.rulePayload : ""),
    upload: f.upload, download: f.download, start: f.start,
  };
}

function renderFlows() {
  const { key, asc } = state.sort;
  const q = state.filter.toLowerCase();
  const rows = state.flows.map(flowRow)
    .filter((r) => !q || [r.source, r.dest, r.chain, r.rule, r.type].some((v) => v.toLowerCase().includes(q)))
    .sort((a, b) => (a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : 0) * (asc ? 1 : -1));
  const tb = $("#flows tbody");
  tb.replaceChildren(...rows.map((r) => el("tr", { "data-id": r.id },
    el("td", { class: "num" }, String(r.id)), el("td", {}, r.network), el("td", {}, r.type),
    el("td", {}, r.source), el("td", { class: "dest" }, r.dest), el("td", {}, r.chain), el("td", {}, r.rule),
    el("td", { class: "num" }, fmtBytes(r.upload)), el("td", { class: "num" }, fmtBytes(r.download)),
    el("td", { class: "num" }, fmtAge(r.start)),
    el("td", {}, el("button", { class: "close", type: "button", title: "close this flow",
      onclick: () => closeFlow(r.id) }, "✕")))));
  $("#flow-count").textContent = rows.length + " of " + state.flows.length;
  document.querySelectorAll("#flows th").forEach((th) => {
    th.classList.toggle("sorted", th.dataset.key === key);
    th.classList.toggle("asc", th.dataset.key === key && asc);
  });
}

function closeFlow(id) {
  api("DELETE", "/connections/" + id).then(() => {
    state.flows = state.flows.filter((f) => Number(f.id) !== id);
    renderFlows();
  }).catch((e) => setStatus(e.message, "bad"));
}

document.querySelectorAll("#flows th[data-key]").forEach((th) => th.addEventListener("click", () => {
  const k = th.dataset.key;
  state.sort = { key: k, asc: state.sort.key === k ? !state.sort.asc : true };
  renderFlows();
}));
$("#filter").addEventListener("input", (e) => { state.filter = e.target.value; renderFlows(); });
$("#close-all").addEventListener("click", () => api("DELETE", "/connections").then(pollFlows));

function pollFlows() {
  return api("GET", "/connections").then((j) => { state.flows = j.connections || []; renderFlows(); });
}

// ---- proxies and groups
function latency(p) {
  const h = p.history && p.history[p.history.length - 1];
  if (!p.alive) return el("span", { class: "lat down" }, "down");
  return el("span", { class: "lat" }, h ? h.delay + " ms" : "");
}

function renderProxies(j) {
  const all = j.proxies;
  const groups = Object.values(all).filter((p) => p.all && p.name !== "GLOBAL");
  $("#groups").replaceChildren(...groups.map((g) => el("div", { class: "group", "data-group": g.name },
    el("span", { class: "name" }, g.name), el("span", { class: "type" }, g.type),
    el("div", { class: "members" }, ...g.all.map((m) => el("button", {
      class: "member" + (m === g.now ? " now" : ""), type: "button", "data-member": m,
      disabled: g.type === "Selector" ? null : "disabled",
      onclick: () => api("PUT", "/proxies/" + encodeURIComponent(g.name), { name: m })
        .then(loadProxies).catch((e) => setStatus(e.message, "bad")),
    }, m, all[m] ? latency(all[m]) : ""))))));
  const proxies = Object.values(all).filter((p) => !p.all);
  $("#proxies").replaceChildren(el("div", { class: "members" }, ...proxies.map((p) => el("button", {
    class: "member", type: "button", title: "test latency",
    onclick: (e) => {
      const b = e.currentTarget;
      api("GET", "/proxies/" + encodeURIComponent(p.name) + "/delay?timeout=5000")
        .then((d) => { b.lastChild.textContent = d.delay + " ms"; })
        .catch((err) => { b.lastChild.textContent = err.message; });
    },
  }, p.name + " (" + p.type + ")", latency(p)))));
}

function loadProxies() {
  return api("GET", "/proxies").then(renderProxies);
}

// ---- rules, counters, logs, mode
function loadRules() {
  return api("GET", "/rules").then((j) => $("#rules").replaceChildren(
    ...j.rules.map((r) => el("li", {}, r.type + " " + r.payload + " → " + r.proxy))));
}

function loadCounters() {
  return api("GET", "/chute/stats").then((j) => $("#counters").replaceChildren(
    ...Object.entries(j.counters).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))])));
}

let logSock = null;
function followLogs() {
  if (logSock) { const s = logSock; state.sockets.splice(state.sockets.indexOf(s), 1); s.close(); }
  const pre = $("#logs");
  logSock = ws("/logs?level=" + $("#log-level").value, (l) => {
    pre.append(l.type.padEnd(8) + l.payload + "\n");
    while (pre.childNodes.length > 500) pre.removeChild(pre.firstChild);
    pre.scrollTop = pre.scrollHeight;
  });
}
$("#log-level").addEventListener("change", followLogs);

$("#mode").addEventListener("change", (e) =>
  api("PATCH", "/configs", { mode: e.target.value }).catch((err) => { setStatus(err.message, "bad"); loadConfig(); }));
function loadConfig() {
  return api("GET", "/configs").then((c) => { $("#mode").value = c.mode; });
}

let timers = [];
function start() {
  timers.forEach(clearInterval);
  state.sockets.splice(0).forEach((s) => s.close());
  api("GET", "/version").then((v) => {
    $("#version").textContent = v.version;
    setStatus("connected", "ok");
    ws("/traffic", drawTraffic);
    followLogs();
    pollFlows(); loadProxies(); loadRules(); loadCounters(); loadConfig();
    timers = [setInterval(pollFlows, 1000), setInterval(loadProxies, 5000), setInterval(loadCounters, 2000)];
  }).catch((e) => { if (!$("#auth").hidden) return; setStatus(e.message, "bad"); });
}

start();

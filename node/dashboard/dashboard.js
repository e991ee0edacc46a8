// weft dashboard: polls /dashboard/data (node/dashboard.go) and draws the
// cluster as this node's gossip sees it. Plain DOM and inline SVG, no
// library, no network but its own endpoint (the server's CSP forbids the
// rest). Remote strings (addresses, roles) go in textContent only.
"use strict";

const params = new URLSearchParams(location.search);
const pollMs = Math.max(100, Number(params.get("every")) || 1000);
const W = 400, H = 100;

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function svgEl(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}
function ballot(b) { return b ? b.N + ".p" + b.P : "-"; }
function fmt(v, digits) { return v === null || v === undefined ? "-" : v.toFixed(digits); }

// span is the time the charts show: the history so far (at least 30
// samples), at most its capacity, so a young history fills the width.
function span(d) { return Math.min(d.capacity, Math.max(30, d.history.length)) * d.every_ms; }

// x maps a sample time to the chart's width, newest at the right edge.
function xScale(d) {
  const span_ = span(d);
  const right = d.history.length ? d.history[d.history.length - 1].t : d.now;
  return t => W * (1 - (right - t) / span_);
}

// lineChart draws values (null: no measurement, a gap) against the
// sample times; it records what it drew in data- attributes.
function lineChart(svg, d, values, height) {
  height = height || H;
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const x = xScale(d);
  let max = 0, last = null, count = 0;
  for (const v of values) if (v !== null && v !== undefined) { max = Math.max(max, v); last = v; count++; }
  const top = max > 0 ? max * 1.1 : 1;
  let pts = [];
  const flush = () => {
    if (pts.length === 1) pts.push(pts[0].replace(/^([\d.]+)/, m => String(Number(m) + 1)));
    if (pts.length) svg.appendChild(svgEl("polyline", { points: pts.join(" ") }));
    pts = [];
  };
  values.forEach((v, i) => {
    if (v === null || v === undefined) { flush(); return; }
    pts.push(x(d.history[i].t).toFixed(1) + "," + (height - (v / top) * (height - 4)).toFixed(1));
  });
  flush();
  svg.dataset.samples = count;
  svg.dataset.max = max.toFixed(3);
  svg.dataset.last = last === null ? "" : last.toFixed(3);
  return { max, last, count };
}

// upDownStrip draws one bar per sample: green up, red down, amber the
// rest (joining, left, unknown); data-down counts the red ones.
function upDownStrip(svg, d, statuses) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const x = xScale(d);
  const w = Math.max(0.5, W * d.every_ms / span(d));
  let up = 0, down = 0;
  statuses.forEach((s, i) => {
    if (!s) return;
    const cls = s === "UP" ? "up" : (s === "DOWN" || s === "REMOVED") ? "down" : "other";
    if (cls === "up") up++; else if (cls === "down") down++;
    svg.appendChild(svgEl("rect", { x: (x(d.history[i].t) - w).toFixed(1), y: 0, width: w.toFixed(2), height: H, class: cls }));
  });
  svg.dataset.up = up;
  svg.dataset.down = down;
}

// clockCell shows gossip's estimate of a member's clock offset (its clock
// minus this node's), amber beyond the threshold.
function clockCell(m) {
  const off = m.clock_offset_seconds;
  if (off === undefined || off === null) return el("td", { class: "num clock" }, "-");
  const ms = off * 1000;
  return el("td", { class: "num clock" + (m.clock_skewed ? " warn" : "") },
    (ms >= 0 ? "+" : "") + ms.toFixed(1) + " ms");
}

// seedCell marks a member whose seed list differs from the majority's.
function seedCell(m) {
  if (!m.seed_digest) return el("td", { class: "seed" }, "-");
  return el("td", { class: "seed" + (m.seed_mismatch ? " warn" : "") }, m.seed_mismatch ? "DIFFERS " + m.seed_digest : "ok");
}

function renderMembers(d) {
  const tb = document.querySelector("#members tbody");
  tb.replaceChildren();
  let up = 0;
  for (const m of d.members || []) {
    const unknown = m.status === "UNKNOWN";
    if (m.status === "UP" || m.self) up++;
    const tr = el("tr", { "data-id": m.id, class: m.self ? "self" : "" });
    tr.append(
      el("td", {}, m.id + (m.self ? " (this node)" : "")),
      el("td", {}, m.addr || "-"),
      el("td", { class: "num" }, String(m.group)),
      el("td", {}, unknown ? "-" : (m.role || "-")),
      el("td", {}, unknown ? "-" : ballot(m.ballot)),
      el("td", { class: "status status-" + m.status }, m.status),
      el("td", { class: "num phi" }, m.self || unknown ? "-" : m.phi.toFixed(2)),
      el("td", {}, m.load || "-"),
      el("td", { class: "num" }, unknown ? "-" : String(m.generation)),
      clockCell(m), seedCell(m));
    tb.append(tr);
  }
  document.getElementById("members-summary").textContent = d.gossip
    ? up + " of " + (d.members || []).length + " up"
    : "gossip is not enabled on this node: only its own status is known";
}

function renderGroups(d) {
  const groups = new Map();
  for (const m of d.members || []) {
    if (m.status === "UNKNOWN") continue;
    const g = groups.get(m.group) || { leader: null, ballot: null, up: 0, all: 0 };
    g.all++;
    if (m.status === "UP" || m.self) g.up++;
    if (String(m.role).toUpperCase() === "LEADER" && (m.status === "UP" || m.self) &&
        (!g.ballot || m.ballot.N > g.ballot.N || (m.ballot.N === g.ballot.N && m.ballot.P > g.ballot.P))) {
      g.leader = m.id; g.ballot = m.ballot;
    }
    groups.set(m.group, g);
  }
  if (!d.gossip) {
    const s = d.self;
    groups.set(s.group, { leader: s.leader ? s.id : null, ballot: s.ballot, up: 1, all: 1 });
  }
  const tb = document.querySelector("#groups tbody");
  tb.replaceChildren();
  for (const [id, g] of [...groups].sort((a, b) => a[0] - b[0])) {
    const tr = el("tr", { "data-group": id });
    tr.append(el("td", { class: "num" }, String(id)),
      el("td", { class: "leader" }, g.leader === null ? "none known" : "p" + g.leader),
      el("td", {}, ballot(g.ballot)),
      el("td", { class: "num" }, g.up + " / " + g.all));
    tb.append(tr);
  }
}

function renderPeers(d) {
  const peers = new Map();
  for (const m of d.members || []) if (!m.self) peers.set(m.id, m);
  const tb = document.querySelector("#peers tbody");
  tb.replaceChildren();
  for (const [id, m] of [...peers].sort((a, b) => a[0] - b[0])) {
    const pts = d.history.map(s => (s.peers || {})[id] || null);
    const rtt = el("td", { class: "num rtt" });
    const spark = svgEl("svg", { class: "spark rtt-graph", viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none" });
    const strip = svgEl("svg", { class: "spark updown", viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none" });
    const r = lineChart(spark, d, pts.map(p => p && p.rtt_ms !== undefined ? p.rtt_ms : null));
    upDownStrip(strip, d, pts.map(p => p && p.status));
    rtt.textContent = r.last === null ? "-" : r.last.toFixed(2) + " ms (max " + r.max.toFixed(2) + ")";
    const last = pts.length ? pts[pts.length - 1] : null;
    const tr = el("tr", { "data-peer": id });
    const c1 = el("td"), c2 = el("td");
    c1.append(spark); c2.append(strip);
    tr.append(el("td", {}, "p" + id), el("td", { class: "status status-" + m.status }, m.status), rtt, c1, c2,
      el("td", { class: "num flaps" }, last ? String(last.flaps) : "0"));
    tb.append(tr);
  }
  const secs = span(d) / 1000, cap = d.capacity * d.every_ms / 1000;
  const dur = x => x >= 120 ? (x / 60).toFixed(0) + " min" : x.toFixed(0) + " s";
  document.getElementById("window").textContent = "graphs span the last " + dur(secs) + " (history kept: " + dur(cap) +
    "), one sample every " + (d.every_ms / 1000) + " s, " + d.history.length + " so far";
}

function renderRates(d) {
  const t = lineChart(document.getElementById("throughput"), d, d.history.map(s => s.delivery_rate));
  const l = lineChart(document.getElementById("latency"), d, d.history.map(s => s.latency_ms));
  document.getElementById("throughput-now").textContent = t.last === null ? "" : "now " + t.last.toFixed(1) + "/s, max " + t.max.toFixed(1) + "/s";
  document.getElementById("latency-now").textContent = l.last === null ? "(none measured yet)" : "last " + l.last.toFixed(2) + " ms, max " + l.max.toFixed(2) + " ms";
  document.getElementById("delivered").textContent = String(d.self.stats.Delivered);
}

function renderWarnings(d) {
  const ul = document.getElementById("warnings");
  ul.replaceChildren();
  const list = (name, ws) => {
    if (ws === null || ws === undefined) {
      ul.append(el("li", { class: "unmeasured", "data-kind": name }, name + ": not checked (gossip is not enabled on this node)"));
    } else if (!ws.length) {
      ul.append(el("li", { class: "ok", "data-kind": name }, name + ": no warning"));
    } else {
      for (const w of ws) ul.append(el("li", { class: "warn", "data-kind": name }, name + ": " + w));
    }
  };
  list("clock skew", d.clock_skew);
  list("seed list", d.seed_list);
  const r = d.self.readiness;
  if (r && !r.ready) ul.append(el("li", { class: "warn", "data-kind": "readiness" }, "not ready: " + r.reason + (r.detail ? " (" + r.detail + ")" : "")));
}

function render(d) {
  const s = d.self;
  document.getElementById("node").textContent = "p" + s.id + " of group " + s.group + " (" + s.protocol + "), " + s.role + ", ballot " + ballot(s.ballot);
  document.getElementById("updated").textContent = "updated " + new Date(d.now).toLocaleTimeString();
  renderMembers(d);
  renderGroups(d);
  renderPeers(d);
  renderRates(d);
  renderWarnings(d);
  window.weftDashboard = { data: d, renders: (window.weftDashboard ? window.weftDashboard.renders : 0) + 1 };
  document.body.dataset.renders = window.weftDashboard.renders;
}

function showError(msg) {
  const e = document.getElementById("error");
  e.hidden = !msg;
  e.textContent = msg || "";
}

async function poll() {
  const headers = {};
  const tok = sessionStorage.getItem("weft-token");
  if (tok) headers.Authorization = "Bearer " + tok;
  try {
    const r = await fetch("data", { headers, cache: "no-store" });
    if (r.status === 401 || r.status === 403) {
      document.getElementById("tokenform").hidden = false;
      showError((await r.text()).trim());
    } else if (!r.ok) {
      showError("data: " + r.status + " " + (await r.text()).trim());
    } else {
      render(await r.json());
      showError("");
    }
  } catch (e) {
    showError("node unreachable: " + e.message);
  }
  setTimeout(poll, pollMs);
}

document.getElementById("tokenform").addEventListener("submit", ev => {
  ev.preventDefault();
  sessionStorage.setItem("weft-token", document.getElementById("token").value.trim());
  document.getElementById("tokenform").hidden = true;
});
poll();

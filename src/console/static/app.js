// gpuplane console: a small single-page app over the public /v1 API, signed in by an HttpOnly session cookie.
// No framework, no build step: every node is built with h() from text (never innerHTML), so API data cannot
// inject markup, and the page runs under `Content-Security-Policy: default-src 'self'`.
"use strict";

const $ = (sel) => document.querySelector(sel);
const SVG = "http://www.w3.org/2000/svg";
let session = null; // {role, tenant_id, csrf_token}
let poolsById = {};

// ---- DOM helpers ------------------------------------------------------------------------------------------
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}
function s(tag, attrs, ...kids) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const kid of kids.flat()) if (kid) el.append(kid instanceof Node ? kid : document.createTextNode(kid));
  return el;
}
// `rowAttrs(i)`: attributes of the i-th row (optional).
function table(headers, rows, cls, rowAttrs) {
  return h("table", { class: cls || "wide" },
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows.map((r, n) => h("tr", rowAttrs ? rowAttrs(n) : {}, r.map((c, i) => h("td", { "data-label": headers[i] }, c))))));
}
function field(label, input) { return h("label", {}, label, input); }
function flash(msg, ok) { const f = $("#flash"); f.className = ok ? "ok" : ""; f.textContent = msg || ""; }
// Views return their nodes; only the latest navigation's view is shown (a slow earlier one is dropped).
function show(...nodes) { $("#main").replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false)); }
let routeSeq = 0;
function stateTag(st) { return h("span", { class: `state state-${st}` }, st); }
function money(minor, cur) { return `${(minor / 100).toFixed(2)} ${cur || ""}`.trim(); }
// The one short form of an id: its last 8 hex digits. Ids are UUIDv7, whose first 48 bits are the creation time,
// so ids made within a minute share their head (three leases all showed `01a23372`); the tail is random.
function short(id) { return String(id).replace(/-/g, "").slice(-8); }
// The one plural rule: "1 node", "2 nodes".
function plural(n, one, many) { return `${n} ${n === 1 ? one : many || `${one}s`}`; }
// The one memory unit: GB (10^9 bytes), as the API's planner writes it ("fits in 23.9 of 78.5 GB per GPU").
const GB = 1e9;
function gb(bytes) { return `${(bytes / GB).toFixed(1)} GB`; }
// A number as an axis shows it: three significant digits, no trailing zeros (0.15, 2.5, 1200).
function num(v) { return String(Number(v.toPrecision(3))); }
// The top of an axis for values up to `max`: the next of 1, 2, 2.5, 5 times a power of ten, so small values fill
// the chart (0.27 on a 0 to 0.3 axis, not a dot at the bottom of 0 to 1).
function niceMax(max) {
  if (!(max > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  return [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].map((m) => m * p).find((v) => v >= max * 1.0001) || 10 * p;
}
function ago(ts, secs) { return ts ? new Date(ts).toISOString().replace("T", " ").slice(0, secs ? 19 : 16) + " UTC" : "-"; }
function left(ts) {
  if (!ts) return "-";
  const s = Math.round((new Date(ts) - Date.now()) / 1000);
  if (s <= 0) return "ended";
  return s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min` : `${Math.floor(s / 60)} min`;
}
const isAdmin = () => session && session.role === "tenant_admin";
const isOperator = () => session && session.role === "operator";

// ---- API ----------------------------------------------------------------------------------------------------
class Problem extends Error {
  constructor(status, body) {
    super(body && body.detail ? body.detail : `HTTP ${status}`);
    this.status = status; this.body = body || {};
  }
  // In words: what happened, and the fields that were wrong.
  words() {
    const b = this.body;
    const lead = { 402: "Not enough balance", 409: "Conflict", 422: "Some values are not valid", 403: "Not allowed", 404: "Not found" }[this.status];
    const fields = (b.errors || []).map((e) => `${e.field}: ${e.message}`).join("; ");
    return [lead, b.detail, fields].filter(Boolean).join(". ") + (b.code ? ` (${b.code})` : "");
  }
}
function csrf() {
  if (session && session.csrf_token) return session.csrf_token;
  const m = document.cookie.match(/(?:^|; )gp_csrf=([^;]+)/);
  return m ? m[1] : "";
}
async function api(method, path, body, extraHeaders) {
  const headers = Object.assign({ Accept: "application/json" }, extraHeaders || {});
  if (method !== "GET") headers["X-CSRF-Token"] = csrf();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 204) return null;
  const type = res.headers.get("content-type") || "";
  const data = type.includes("json") && !type.includes("ndjson") ? await res.json() : await res.text();
  if (!res.ok) {
    if (res.status === 401 && path !== "/v1/console/session") { session = null; location.hash = "#/signin"; }
    throw new Problem(res.status, typeof data === "object" ? data : { detail: data });
  }
  return data;
}
// Runs an action from a button; shows the problem in words, refreshes the view on success. `okMsg` is the words
// of success, or a function of the action's result that gives them. A refused form also says why inside the form,
// under its button, where the user is looking (the banner at the top may be out of view).
function act(fn, okMsg) {
  return async (ev) => {
    if (ev) ev.preventDefault();
    flash("");
    const form = ev && ev.target && ev.target.closest ? ev.target.closest("form") : null;
    const old = form && form.querySelector(":scope > .form-error");
    if (old) old.remove();
    try { const result = await fn(ev); if (okMsg) flash(typeof okMsg === "function" ? okMsg(result) : okMsg, true); route(); }
    catch (e) {
      const words = e instanceof Problem ? e.words() : String(e);
      flash(words);
      if (form) form.append(h("p", { class: "form-error", role: "alert" }, words));
    }
  };
}

// ---- charts (inline SVG) -----------------------------------------------------------------------------------
const COLORS = ["#0b57d0", "#b3261e", "#146c2e", "#8a5300", "#6a1b9a", "#00695c", "#ad1457", "#37474f"];
// A line chart of series [{label, points:[[x, v]]}], y from 0 to `max` (or a nice number above the data). `x` is
// "time" (ms, ticks as hh:mm:ss) or "step" (a step number).
function lineChart(title, series, opts) {
  const { unit = "", max, x: xKind = "time" } = opts || {};
  const W = 640, H = 200, L = 46, B = 22, T = 8, R = 8;
  const all = series.flatMap((x) => x.points);
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${title} chart` }, s("title", {}, title));
  if (!all.length) { svg.append(s("text", { x: L, y: H / 2 }, "no samples yet")); return svg; }
  const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]));
  const ymax = max || niceMax(Math.max(...all.map((p) => p[1])));
  const x = (t) => L + (t1 === t0 ? 0.5 : (t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => H - B - (v / ymax) * (H - B - T);
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), s("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const f of [0, 0.5, 1]) svg.append(s("text", { x: 2, y: y(ymax * f) + 4, "data-tick": f }, `${num(ymax * f)}${unit}`));
  const tick = (t) => (xKind === "step" ? `step ${t}` : new Date(t).toISOString().slice(11, 19));
  svg.append(s("text", { x: L, y: H - 6 }, tick(t0)), s("text", { x: W - R - 70, y: H - 6 }, tick(t1)));
  series.forEach((ser, i) => {
    const d = ser.points.map((p, j) => `${j ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join("");
    const color = COLORS[i % COLORS.length];
    svg.append(s("path", { d, fill: "none", stroke: color, "stroke-width": 2, "data-points": ser.points.length }, s("title", {}, ser.label)));
    if (ser.points.length < 3) for (const p of ser.points) svg.append(s("circle", { cx: x(p[0]), cy: y(p[1]), r: 3, fill: color }));
  });
  return svg;
}
// One column per day from the first day with a value to the last (a day without one shows as a gap), y from 0 to a
// nice number above the largest: a single day is one column that fills most of the height.
function dayChart(id, title, days, fmt, unit) {
  const W = 640, H = 200, L = 46, B = 22, T = 20, R = 8, DAY = 86400 * 1000;
  const label = `${title}${unit ? ` (${unit})` : ""}`;
  const svg = s("svg", { id, class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${label}: ${days.map(([d, v]) => `${d} ${fmt(v)}`).join(", ") || "none"}` }, s("title", {}, label));
  if (!days.length) { svg.append(s("text", { x: L, y: H / 2 }, "nothing yet")); return svg; }
  const first = Date.parse(days[0][0]), count = Math.min(400, Math.round((Date.parse(days[days.length - 1][0]) - first) / DAY) + 1);
  const value = Object.fromEntries(days), ymax = niceMax(Math.max(...days.map((d) => d[1])));
  const slot = (W - L - R) / count, width = Math.min(48, Math.max(1, slot * 0.7));
  const y = (v) => H - B - (v / ymax) * (H - B - T);
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), s("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const f of [0, 0.5, 1]) svg.append(s("text", { x: 2, y: y(ymax * f) + 4, "data-tick": f }, num(ymax * f)));
  // A week or less: each day's date under its column and its amount on top; longer: the first and last date.
  const few = count <= 7;
  for (let i = 0; i < count; i++) {
    const day = new Date(first + i * DAY).toISOString().slice(0, 10), v = value[day] || 0, mid = L + (i + 0.5) * slot;
    if (v > 0) svg.append(s("rect", { x: mid - width / 2, y: y(v), width, height: H - B - y(v), fill: COLORS[0], "data-day": day, "data-value": v }, s("title", {}, `${day}: ${fmt(v)}`)));
    if (few) svg.append(s("text", { x: mid, y: H - 6, "text-anchor": "middle" }, day));
    if (few && v > 0) svg.append(s("text", { x: mid, y: y(v) - 4, "text-anchor": "middle" }, fmt(v)));
  }
  if (!few) svg.append(s("text", { x: L, y: H - 6 }, days[0][0]), s("text", { x: W - R - 70, y: H - 6 }, days[days.length - 1][0]));
  return svg;
}
function legend(series) {
  return h("div", { class: "legend" }, series.map((ser, i) => h("span", {},
    s("svg", { width: 10, height: 10, "aria-hidden": "true" }, s("rect", { width: 10, height: 10, fill: COLORS[i % COLORS.length] })), ` ${ser.label}`)));
}
// A horizontal stacked bar of [{label, value, color}].
function stackBar(label, parts) {
  const total = parts.reduce((a, p) => a + p.value, 0) || 1;
  const svg = s("svg", { class: "chart", viewBox: "0 0 300 18", role: "img", "aria-label": `${label}: ${parts.map((p) => `${p.value} ${p.label}`).join(", ")}` });
  let at = 0;
  for (const p of parts) {
    const w = (p.value / total) * 300;
    svg.append(s("rect", { x: at, y: 0, width: w, height: 18, fill: p.color }, s("title", {}, `${p.value} ${p.label}`)));
    at += w;
  }
  return svg;
}

// Horizontal bars [{label, value, text}], one per row (spend per pool).
function barChart(title, rows) {
  const W = 640, row = 22, L = 150, H = rows.length * row + 4;
  const max = Math.max(1, ...rows.map((r) => r.value));
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${title}: ${rows.map((r) => `${r.label} ${r.text}`).join(", ")}` }, s("title", {}, title));
  rows.forEach((r, i) => svg.append(s("text", { x: 4, y: i * row + 16 }, r.label),
    s("rect", { x: L, y: i * row + 4, width: Math.max(1, (r.value / max) * (W - L - 110)), height: row - 8, fill: COLORS[i % COLORS.length] }, s("title", {}, `${r.label}: ${r.text}`)),
    s("text", { x: L + (r.value / max) * (W - L - 110) + 6, y: i * row + 16 }, r.text)));
  return svg;
}
// One stacked bar of parts [{label, value}] against a limit (drawn as a line), with a legend of values.
function partsChart(id, title, parts, limit, fmt) {
  const W = 640, H = 40, total = parts.reduce((a, p) => a + p.value, 0), scale = Math.max(total, limit || 0) || 1;
  const svg = s("svg", { id, class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${title}: ${parts.map((p) => `${p.label} ${fmt(p.value)}`).join(", ")}${limit ? `; limit ${fmt(limit)}` : ""}` }, s("title", {}, title));
  let at = 0;
  parts.forEach((p, i) => {
    if (p.value <= 0) return;
    const w = (p.value / scale) * (W - 2);
    svg.append(s("rect", { x: 1 + at, y: 6, width: w, height: 22, fill: COLORS[i % COLORS.length], "data-part": p.label }, s("title", {}, `${p.label}: ${fmt(p.value)}`)));
    at += w;
  });
  if (limit) { const x = 1 + (limit / scale) * (W - 2); svg.append(s("line", { class: "limit", x1: x, y1: 0, x2: x, y2: H - 4 }, s("title", {}, `limit ${fmt(limit)}`))); }
  return [svg, h("div", { class: "legend" }, parts.map((p, i) => h("span", {},
    s("svg", { width: 10, height: 10, "aria-hidden": "true" }, s("rect", { width: 10, height: 10, fill: COLORS[i % COLORS.length] })), ` ${p.label} ${fmt(p.value)}`)),
  limit ? h("span", {}, `| limit ${fmt(limit)}`) : null)];
}
// A plan's layout in one line (the advice table, the plan viewer, the lease form and each job say it alike).
function layout(plan) {
  return `tp ${plan.tp} x pp ${plan.pp} x dp ${plan.dp}, micro-batch ${plan.micro_batch}, ZeRO ${plan.zero_stage}${plan.global_batch ? `, global batch ${plan.global_batch}` : ""}`;
}
// The plan viewer: memory per GPU against the GPU's usable memory, and where a step's time goes.
function planView(plan, heading) {
  const m = plan.memory;
  const mem = [["weights", m.weights], ["gradients", m.gradients], ["optimizer", m.optimizer], ["activations", m.activations], ["KV cache", m.kv_cache],
    ["comm buffers", m.comm_buffers], ["fragmentation", m.fragmentation]].map(([label, value]) => ({ label, value })).filter((p) => p.value > 0);
  const bubble = plan.bubble_fraction || 0, comm = plan.comm_fraction || 0, compute = Math.max(0, 1 - bubble - comm);
  const step = [{ label: "compute", value: compute }, { label: "communication", value: comm }, { label: "pipeline bubble", value: bubble }];
  const secs = (f) => `${(f * plan.step_time_s).toFixed(3)} s (${(f * 100).toFixed(0)} %)`;
  return h("section", { class: "plan", id: "plan-view", "aria-label": heading },
    h("h2", {}, heading),
    h("p", { id: "plan-summary" }, `${layout(plan)}; ${Math.round(plan.tokens_per_s)} tokens/s, MFU ${(plan.mfu * 100).toFixed(0)} %`),
    h("h3", {}, `Memory per GPU: ${gb(m.total)} of ${gb(m.usable)} usable`), partsChart("plan-memory", "Memory per GPU", mem, m.usable, gb),
    h("h3", {}, `Step time: ${plan.step_time_s.toFixed(3)} s`), partsChart("plan-step", "Step time split", step, 0, secs),
    h("p", { class: "muted" }, plan.explanation), (plan.notes || []).length ? h("ul", {}, plan.notes.map((n) => h("li", {}, n))) : null);
}
// Per-GPU heatmap: a row per GPU, a column per bucket, colour by utilization (0 % pale to 100 % dark).
function heatmap(tele) {
  const W = 640, L = 60, row = 16, gpus = tele.gpus;
  const from = Date.parse(tele.from), to = Date.parse(tele.to), cols = Math.max(1, Math.ceil((to - from) / 1000 / tele.step_s)), cw = (W - L) / cols;
  const svg = s("svg", { id: "heatmap", class: "chart", viewBox: `0 0 ${W} ${gpus.length * row + 20}`, role: "img", "aria-label": `GPU utilization heatmap, ${plural(gpus.length, "GPU")}, ${ago(tele.from)} to ${ago(tele.to)}` }, s("title", {}, "GPU utilization per GPU"));
  gpus.forEach((g, i) => {
    svg.append(s("text", { x: 2, y: i * row + 12 }, `GPU ${g.index}`));
    for (const p of g.points) {
      const c = Math.floor((Date.parse(p.t) - from) / 1000 / tele.step_s), u = Math.max(0, Math.min(100, p.gpu_util));
      svg.append(s("rect", { x: L + c * cw, y: i * row + 1, width: Math.max(1, cw - 0.5), height: row - 2, fill: `hsl(215, 85%, ${92 - u * 0.62}%)`, "data-util": u.toFixed(0) },
        s("title", {}, `GPU ${g.index} ${new Date(p.t).toISOString().slice(11, 16)}: ${u.toFixed(0)} %`)));
    }
  });
  svg.append(s("text", { x: L, y: gpus.length * row + 14 }, ago(tele.from)), s("text", { x: W - 130, y: gpus.length * row + 14 }, ago(tele.to)));
  return svg;
}

// ---- sign in -----------------------------------------------------------------------------------------------
function viewSignIn() {
  $("#nav").replaceChildren(); $("#who").textContent = ""; $("#signout").hidden = true;
  const key = h("input", { id: "api-key", name: "api_key", type: "password", autocomplete: "off", required: true, placeholder: "gpk_...", "aria-describedby": "key-help" });
  show(h("section", { class: "signin" },
    h("h1", {}, "Sign in to gpuplane"),
    h("form", { class: "inline", id: "signin-form", onsubmit: async (ev) => {
      ev.preventDefault(); flash("");
      try {
        session = await api("POST", "/v1/console/session", { api_key: key.value.trim() });
        key.value = "";
        location.hash = isOperator() ? "#/fleet" : "#/pools";
        route();
      } catch (e) { flash(e instanceof Problem ? e.words() : String(e)); }
    } },
      field("API key", key),
      h("p", { id: "key-help", class: "muted" }, "Your key is exchanged for a short-lived session; it is not stored in the browser."),
      h("button", { type: "submit" }, "Sign in"))));
  key.focus();
}

// ---- tenant views ------------------------------------------------------------------------------------------
async function loadPools() {
  const pools = await api("GET", "/v1/pools");
  poolsById = Object.fromEntries(pools.map((p) => [p.id, p]));
  return pools;
}
// A plan carried from the advice to a lease and on to its first job: the model and workload asked about and the
// chosen plan's layout as pins. Kept in the tab (sessionStorage) under the lease's id once the lease exists.
function carriedPlan(query, plan) {
  const pins = { tp: plan.tp, pp: plan.pp, dp: plan.dp, micro_batch: plan.micro_batch, zero_stage: plan.zero_stage };
  return { model: query.model, workload: query.workload, pins, layout: layout(plan) };
}
function describeCarried(c) {
  const w = c.workload || {};
  return `${c.model.preset} ${w.kind}${w.seq_len ? `, sequence ${w.seq_len}` : ""}${w.global_batch ? `, batch ${w.global_batch}` : ""}; ${c.layout}`;
}
function rememberPlan(leaseId, carried) { try { sessionStorage.setItem(`gp-plan-${leaseId}`, JSON.stringify(carried)); } catch { /* storage off: the job form starts empty */ } }
function recalledPlan(leaseId) { try { return JSON.parse(sessionStorage.getItem(`gp-plan-${leaseId}`) || "null"); } catch { return null; } }
const idempotencyKey = () => ({ "Idempotency-Key": `console-${Date.now()}-${Math.random().toString(36).slice(2)}` });
// A link to a lease or job by its short id, the full id on hover.
function idLink(href, id) { return h("a", { href, title: id, class: "id" }, short(id)); }

function leaseForm(pools, preset) {
  preset = preset || {};
  const pool = h("select", { id: "lease-pool", name: "pool_id" }, pools.map((p) => h("option", { value: p.id, selected: preset.pool_id === p.id }, `${p.name} (${p.gpu_model.key}, ${p.free_gpus} free)`)));
  const gpus = h("input", { id: "lease-gpus", name: "gpu_count", type: "number", min: 1, max: 4096, value: preset.gpu_count || 1, required: true });
  const placement = h("select", { id: "lease-placement", name: "placement" }, ["pack", "single_node", "spread"].map((p) => h("option", { value: p }, p)));
  const hours = h("input", { id: "lease-hours", name: "duration_hours", type: "number", min: 1, max: 8760, value: preset.hours || 1, required: true });
  return h("form", { class: "inline", id: "lease-form", "aria-label": "Create a lease", onsubmit: act(async () => {
    const lease = await api("POST", "/v1/leases", { pool_id: pool.value, gpu_count: Number(gpus.value), placement: placement.value, duration_hours: Number(hours.value) }, idempotencyKey());
    if (preset.plan) rememberPlan(lease.id, preset.plan);
    location.hash = `#/lease/${lease.id}`;
  }, "Lease created") },
    field("Pool", pool), field("GPUs", gpus), field("Placement", placement), field("Hours", hours),
    h("button", { type: "submit", id: "create-lease" }, "Create lease"),
    preset.plan ? h("p", { id: "lease-plan", class: "carried" }, `With the plan: ${describeCarried(preset.plan)}. Once the lease is active, its page starts a job with it.`) : null);
}
async function viewPools() {
  const pools = await loadPools();
  return [h("h1", {}, "GPU pools"),
    table(["Pool", "GPU", "Region", "Free / total", "Largest block", "Price per GPU-hour"],
      pools.map((p) => [p.name, p.gpu_model.key, p.region, `${p.free_gpus} / ${p.total_gpus}`, String(p.largest_free_block), money(p.price_per_gpu_hour_minor, p.currency)])),
    isAdmin() ? [h("h2", {}, "Rent GPUs"), leaseForm(pools)] : h("p", { class: "muted" }, "Members can view pools; a tenant admin creates leases.")];
}
async function ledgerByLease() {
  const page = await api("GET", "/v1/billing/ledger?limit=200");
  const sums = {};
  for (const e of page.items) if (e.lease_id && e.kind === "usage") sums[e.lease_id] = (sums[e.lease_id] || 0) - e.amount_minor;
  return sums;
}
async function viewLeases() {
  const [page, , cost] = await Promise.all([api("GET", "/v1/leases?limit=100"), loadPools(), ledgerByLease()]);
  return [h("h1", {}, "Leases"),
    page.items.length ? table(["Lease", "State", "Pool", "GPUs", "Nodes", "Time left", "Charged so far"], page.items.map((l) => {
      const p = poolsById[l.pool_id];
      return [idLink(`#/lease/${l.id}`, l.id), stateTag(l.state), p ? p.name : short(l.pool_id), String(l.gpu_count),
        [...new Set(l.gpus.map((g) => g.hostname))].join(", ") || "-", l.state === "active" ? left(l.ends_at) : "-", money(cost[l.id] || 0, p && p.currency)];
    })) : h("p", {}, "No leases yet. ", h("a", { href: "#/pools" }, "Rent GPUs"), " or ", h("a", { href: "#/advice" }, "ask what to rent"), ".")];
}
function gib(bytes) { return `${(bytes / 2 ** 30).toFixed(2)} GiB`; }
async function viewVolumes() {
  const [volumes, pools] = await Promise.all([api("GET", "/v1/volumes"), loadPools()]);
  const deletable = (v) => isAdmin() && ["creating", "ready", "failed"].includes(v.state) && !v.attached_to.length;
  const rows = volumes.map((v) => [v.name, v.pool_name, v.kind, `${v.size_gib} GiB`, stateTag(v.state),
    v.used_bytes == null ? "-" : gib(v.used_bytes), v.attached_to.length ? v.attached_to.map((l) => idLink(`#/lease/${l}`, l)) : "-",
    money(v.charged_minor, v.currency),
    deletable(v) ? h("button", { type: "button", class: "danger", "data-delete-volume": v.name,
      onclick: act(() => api("DELETE", `/v1/volumes/${v.id}`), `Volume ${v.name} deleted: its data is destroyed`) }, "Delete") : ""]);
  const name = h("input", { id: "volume-name", required: true, maxlength: 63 });
  const pool = h("select", { id: "volume-pool" }, pools.map((p) => h("option", { value: p.id }, p.name)));
  const size = h("input", { id: "volume-size", type: "number", min: 1, max: 65536, value: 10, required: true });
  const form = h("form", { class: "inline", id: "volume-form", "aria-label": "Create a volume", onsubmit: act(
    () => api("POST", "/v1/volumes", { name: name.value, pool_id: pool.value, size_gib: Number(size.value) }),
    (v) => `Volume ${v.name} created on ${v.node}: ready at its agent's next heartbeat`) },
    field("Name", name), field("Pool", pool), field("GiB", size), h("button", { type: "submit", id: "create-volume" }, "Create volume"));
  return [h("h1", {}, "Volumes"),
    h("p", { class: "muted" }, "Storage that outlives a lease, billed per GiB-second: attach a volume to a lease and every node sees it at /volumes/<mount>."),
    volumes.length ? table(["Name", "Pool", "Kind", "Size", "State", "Used", "Attached to", "Charged", ""], rows) : h("p", {}, "No volumes yet."),
    isAdmin() ? [h("h2", {}, "New volume"), form] : null];
}
async function viewServices() {
  const page = await api("GET", "/v1/services?limit=200");
  return [h("h1", {}, "Services"),
    h("p", { class: "muted" }, "Jobs that serve: each has a URL on the gateway that its callers reach with one of its keys (or without, when public)."),
    page.items.length ? table(["Service", "Job", "URL", "Ready replicas", "Access", "Limit"], page.items.map((s) => [
      idLink(`#/service/${s.id}`, s.id), idLink(`#/lease/${s.lease_id}`, s.job_id), h("code", {}, s.url),
      `${s.ready_replicas} of ${s.replicas}`, s.public ? "public" : "keys", s.rate_limit_per_minute ? `${s.rate_limit_per_minute}/min per caller` : "none"]))
      : h("p", {}, "No services yet: start a job with ", h("code", {}, "serve"), " on a lease.")];
}
async function viewService(id) {
  const [s, keys] = await Promise.all([api("GET", `/v1/services/${id}`), api("GET", `/v1/services/${id}/keys`)]);
  const hour = s.last_hour || {};
  const ms = (v) => (v == null ? "-" : `${v} ms`);
  const created = h("div", { id: "service-key-created", "aria-live": "polite" });
  const name = h("input", { id: "service-key-name", required: true, maxlength: 100 });
  const limit = h("input", { id: "service-limit", type: "number", min: 1, max: 1000000, value: s.rate_limit_per_minute || "" });
  const admin = isAdmin() ? [
    h("h2", {}, "Access"),
    h("button", { type: "button", id: "service-public", onclick: act(() => api("PATCH", `/v1/services/${id}`, { public: !s.public }),
      s.public ? "The service needs a key again" : "The service is public: callers need no key") }, s.public ? "Require a key" : "Make public"),
    h("form", { class: "inline", "aria-label": "Rate limit", onsubmit: act(() => api("PATCH", `/v1/services/${id}`,
      { rate_limit_per_minute: limit.value ? Number(limit.value) : null }), "Rate limit saved") },
      field("Requests a minute per caller (empty: none)", limit), h("button", { type: "submit" }, "Save")),
    h("h2", {}, "New key"),
    h("form", { class: "inline", "aria-label": "New service key", onsubmit: async (ev) => {
      ev.preventDefault(); flash("");
      try {
        const k = await api("POST", `/v1/services/${id}/keys`, { name: name.value });
        created.replaceChildren(h("p", {}, "Copy this key now; it is never shown again:"), h("p", { class: "secret", id: "service-key-secret" }, k.secret));
      } catch (e) { flash(e instanceof Problem ? e.words() : String(e)); }
    } }, field("Name", name), h("button", { type: "submit", id: "create-service-key" }, "Create key")), created] : null;
  return [h("h1", {}, "Service ", short(id)),
    h("p", {}, "URL: ", h("code", { id: "service-url" }, s.url), ` · ${s.protocol} · port ${s.port} · health ${s.health_path} · job `, idLink(`#/lease/${s.lease_id}`, s.job_id), ` (${s.job_state})`),
    h("p", { id: "service-replicas" }, `${s.ready_replicas} of ${s.replicas} replicas ready`),
    h("h2", {}, "The last hour"),
    table(["Requests", "Requests/s", "Errors", "Refused", "p50", "p99", "Output tokens/s"], [[String(hour.requests ?? 0),
      (hour.requests_per_s ?? 0).toFixed(2), String(hour.errors ?? 0), String(hour.refused ?? 0), ms(hour.p50_ms), ms(hour.p99_ms),
      (hour.output_tokens_per_s ?? 0).toFixed(1)]]),
    h("h2", {}, "Keys"),
    keys.length ? table(["Name", "Prefix", "Created", "State", ""], keys.map((k) => [k.name, k.prefix, ago(k.created_at), k.revoked_at ? "revoked" : "active",
      !k.revoked_at && isAdmin() ? h("button", { type: "button", class: "danger", onclick: act(() => api("DELETE", `/v1/services/${id}/keys/${k.id}`), "Key revoked") }, "Revoke") : ""]))
      : h("p", {}, "No keys yet."),
    admin];
}
async function viewLease(id) {
  const lease = await api("GET", `/v1/leases/${id}`);
  // The lease's last hour at most, in about 120 buckets (so a young lease shows seconds, not one minute).
  const to = lease.ended_at ? Date.parse(lease.ended_at) : Date.now();
  const from = Math.max(Date.parse(lease.starts_at || lease.created_at), to - 3600 * 1000);
  const step = Math.max(1, Math.ceil((to - from) / 1000 / 120));
  const range = `from=${encodeURIComponent(new Date(from).toISOString())}&to=${encodeURIComponent(new Date(to).toISOString())}&step_s=${step}`;
  const startsJobs = isAdmin() && lease.state === "active";
  const [tele, insights, cost, jobs, templates] = await Promise.all([
    api("GET", `/v1/leases/${id}/telemetry?${range}`).catch(() => ({ gpus: [] })),
    api("GET", `/v1/leases/${id}/insights`).catch(() => ({ insights: [] })), ledgerByLease(), api("GET", `/v1/leases/${id}/jobs`).catch(() => ({ items: [] })),
    startsJobs ? api("GET", "/v1/templates").catch(() => []) : []]);
  const series = (metric, scale) => tele.gpus.map((g) => ({ label: `${g.hostname} GPU ${g.index}`, points: g.points.map((p) => [Date.parse(p.t), scale ? scale(p[metric]) : p[metric]]) }));
  const live = ["active", "queued"].includes(lease.state);
  const hours = h("input", { id: "extend-hours", type: "number", min: 1, max: 8760, value: 1 });
  return [h("h1", {}, `Lease ${short(lease.id)} `, stateTag(lease.state)),
    h("p", {}, `${plural(lease.gpu_count, "GPU")}, ${lease.placement}; ends ${ago(lease.ends_at)} (${live ? left(lease.ends_at) + " left" : lease.end_reason || "ended"}); charged so far `,
      h("strong", { id: "lease-charge" }, money(cost[lease.id] || 0, "USD"))),
    live ? idleLine(lease) : null,
    isAdmin() && live ? h("form", { class: "inline", "aria-label": "Lease actions", onsubmit: act(() => api("POST", `/v1/leases/${id}/extend`, { hours: Number(hours.value) }), "Lease extended") },
      field("Extend by hours", hours), h("button", { type: "submit", class: "secondary" }, "Extend"),
      h("button", { type: "button", id: "release-lease", class: "danger", onclick: act(() => api("POST", `/v1/leases/${id}/release`), (l) => l.state === "active" ? "Release begun: the lease's jobs were told to checkpoint and stop; it is released once they have" : "Lease released") }, "Release")) : null,
    h("h2", {}, "GPU utilization"), lineChart("GPU utilization", series("gpu_util"), { unit: "%", max: 100 }), legend(series("gpu_util")),
    h("h2", {}, "Memory used"), lineChart("Memory used", series("fb_used_mib", (mib) => (mib * 2 ** 20) / GB), { unit: " GB" }),
    h("h2", {}, "Power"), lineChart("Power", series("power_w"), { unit: " W" }),
    h("h2", {}, "Insights"), insights.insights.length ? h("ul", {}, insights.insights.map((i) => h("li", {}, h("strong", {}, i.message), " ", i.suggestion))) : h("p", { class: "muted" }, "No findings."),
    h("h2", {}, "GPUs"), table(["Node", "GPU", "UUID"], lease.gpus.map((g) => [g.hostname, String(g.index), g.uuid])),
    h("h2", {}, "Jobs"), startsJobs ? jobForm(lease, templates, recalledPlan(lease.id)) : null, jobsTable(jobs.items)];
}
// The lease's idle and release state (`idle_since`, `idle_release_after_minutes`, `release_deadline`;
// docs/leases.md).
function idleLine(lease) {
  const parts = [];
  if (lease.release_deadline) parts.push(`Being released: its jobs were told to stop and checkpoint; released once they have, by ${ago(lease.release_deadline)} at the latest.`);
  else if (lease.idle_since) parts.push(`Idle since ${ago(lease.idle_since)} (every GPU under the service's idle threshold).`);
  if (lease.idle_release_after_minutes && !lease.release_deadline) parts.push(`Released once idle for ${plural(lease.idle_release_after_minutes, "minute")}.`);
  return parts.length ? h("p", { id: "lease-idle", class: lease.idle_since ? null : "muted" }, parts.join(" ")) : null;
}
// Start a job on an active lease (`POST /v1/leases/{id}/jobs`): a template, the program, and optionally a model
// with its workload and pins for the planner; a plan carried from the advice fills them in.
function jobForm(lease, templates, carried) {
  const c = carried || {}, w = c.workload || {}, pins = c.pins || {};
  const template = h("select", { id: "job-template" }, h("option", { value: "auto" }, "auto (the planner picks)"),
    templates.map((t) => h("option", { value: t.name }, t.builtin ? t.name : `${t.name} (v${t.version})`)));
  const command = h("input", { id: "job-command", placeholder: "train.py --epochs 3", size: 28, "aria-describedby": "job-help" });
  const model = h("input", { id: "job-model", placeholder: "llama2-7b", value: (c.model && c.model.preset) || "" });
  const kind = h("select", { id: "job-kind" }, ["lora", "train", "inference"].map((k) => h("option", { value: k, selected: w.kind === k }, k)));
  const seq = h("input", { id: "job-seq", type: "number", min: 1, placeholder: "4096", value: w.seq_len || "" });
  const batch = h("input", { id: "job-batch", type: "number", min: 1, placeholder: "512", value: w.global_batch || "" });
  const pin = (key) => h("input", { id: `job-pin-${key}`, "data-pin": key, type: "number", min: key === "zero_stage" ? 0 : 1, max: key === "zero_stage" ? 3 : 4096, value: pins[key] ?? "" });
  const pinInputs = ["tp", "pp", "dp", "micro_batch", "zero_stage"].map((k) => [k, pin(k)]);
  const optional = (input) => (input.value === "" ? undefined : Number(input.value));
  return h("form", { class: "inline", id: "job-form", "aria-label": "Start a job", onsubmit: act(async () => {
    const body = { template: template.value, command: command.value.trim().split(/\s+/).filter(Boolean) };
    if (model.value.trim()) {
      body.model = { preset: model.value.trim() };
      body.workload = { kind: kind.value, seq_len: optional(seq), global_batch: kind.value === "inference" ? undefined : optional(batch) };
      body.pins = Object.fromEntries(pinInputs.filter(([, i]) => i.value !== "").map(([k, i]) => [k, Number(i.value)]));
    }
    const job = await api("POST", `/v1/leases/${lease.id}/jobs`, body);
    flash(`Job ${short(job.id)} started`, true);
  }) },
    h("h3", { class: "form-title" }, "Start a job"),
    carried ? h("p", { id: "job-plan", class: "carried" }, `The plan from the advice: ${describeCarried(carried)}.`) : null,
    field("Template", template), field("Command (split at spaces)", command),
    field("Model preset (empty: no plan)", model), field("Workload", kind), field("Sequence length", seq), field("Global batch", batch),
    pinInputs.map(([k, i]) => field(`Pin ${k.replace("_", " ")}`, i)),
    h("p", { id: "job-help", class: "muted" }, "With a model the planner plans the job for this lease's GPUs; pins fix its layout (empty: the planner chooses)."),
    h("button", { type: "submit", id: "start-job" }, "Start job"));
}
const JOB_ENDED = ["succeeded", "failed", "cancelled"];
function jobsTable(jobs) {
  if (!jobs.length) return h("p", { class: "muted" }, "No jobs on this lease.");
  const exit = (code) => (code === null || code === undefined ? "-" : String(code));
  return h("div", {}, jobs.map((j) => h("section", { class: "card job", id: `job-${j.id}`, "data-job": j.id },
    h("h3", {}, `Job ${short(j.id)} (${j.template}${j.template_version ? ` v${j.template_version}` : ""}) `, stateTag(j.state),
      " ", h("a", { href: `#/logs/${j.id}`, class: "job-logs-link", "data-logs": j.id }, "Logs")),
    // Why it failed or was cancelled, in view: not folded into the output below.
    j.reason ? h("p", { class: `job-reason state-${j.state}` }, h("strong", {}, j.state === "failed" ? "Failed: " : "Stopped: "), j.reason) : null,
    j.plan ? h("p", { class: "muted job-layout" }, `Plan: ${layout(j.plan)}`) : null,
    isAdmin() && !JOB_ENDED.includes(j.state) && !j.cancel_requested
      ? h("button", { type: "button", class: "danger", onclick: act(() => api("POST", `/v1/jobs/${j.id}/cancel`), "Cancel requested") }, "Cancel job") : null,
    generationsTable(j),
    isAdmin() && j.state === "running" && !j.cancel_requested ? replanForm(j) : null,
    table(["Node", "Rank", "State", "Exit", "Reason"], j.nodes.map((n) => [n.hostname, String(n.node_rank), stateTag(n.state), exit(n.exit_code), n.reason || "-"])),
    stepsView(j),
    // A failed node's output is open: its last lines usually say why.
    j.nodes.map((n) => h("details", { open: n.state === "failed" }, h("summary", {}, `Output of ${n.hostname}`), h("pre", {}, (n.output_tail || []).join("\n") || "(no output yet)"))))));
}
// Every plan the job ran, newest first (the API lists them oldest first, a pending replan last): its number and
// state, its layout, when it was asked for, started and ended, and why it was asked for (`created`, a replan with who asked and
// a retune with the measured figures). The generation that ran when its job ended is `ended` with it: it is
// shown with the job's state (succeeded, failed, cancelled), which says more.
function generationsTable(j) {
  const gens = [...(j.generations || [])].sort((a, b) => b.generation - a.generation);
  if (!gens.length) return null;
  const endedWithJob = (g) => JOB_ENDED.includes(j.state) && g.generation === j.generation && g.state !== "pending";
  return h("div", { class: "generations", id: `generations-${j.id}` }, h("h4", {}, `Generations (${gens.length})`),
    table(["Generation", "State", "Plan", "Asked", "Started", "Ended", "Why"], gens.map((g) => [String(g.generation), stateTag(endedWithJob(g) ? j.state : g.state),
      g.plan ? layout(g.plan) : "-", ago(g.created_at, true), ago(g.started_at, true), ago(g.ended_at || (endedWithJob(g) ? j.finished_at : null), true), g.reason]),
    "wide", (i) => ({ "data-generation": gens[i].generation })));
}
// A refused replan's words per job, kept across the lease page's live redraws until the next try or another page.
const replanErrors = new Map();
window.addEventListener("hashchange", () => replanErrors.clear());
// Replan a running job (`POST /v1/jobs/{id}/replan`) with optional pins tp, pp and dp and a reason. Whether the job
// can be replanned is the API's answer (only `gpuplane-runtime` jobs with a model are): a refusal (409, 422) is
// shown under the button, where the user is looking, not at the top of the page. On success the page redraws
// with the pending generation listed.
function replanForm(j) {
  const pins = ["tp", "pp", "dp"].map((k) => [k, h("input", { id: `replan-${k}-${j.id}`, "data-replan-pin": k, type: "number", min: 1, max: 4096, placeholder: "any" })]);
  const reason = h("input", { id: `replan-reason-${j.id}`, maxlength: 200, size: 24, placeholder: "more data parallel" });
  const error = h("p", { class: "replan-error", id: `replan-error-${j.id}`, role: "alert" }, replanErrors.get(j.id) || "");
  const button = h("button", { type: "submit", class: "secondary", "data-replan": j.id, "aria-describedby": `replan-help-${j.id} replan-error-${j.id}` }, "Replan");
  const pending = (j.generations || []).find((g) => g.state === "pending");
  return h("form", { class: "inline replan", id: `replan-${j.id}`, "aria-label": `Replan job ${short(j.id)}`, onsubmit: async (ev) => {
    ev.preventDefault();
    flash(""); error.textContent = ""; replanErrors.delete(j.id); button.disabled = true;
    const body = { pins: Object.fromEntries(pins.filter(([, i]) => i.value !== "").map(([k, i]) => [k, Number(i.value)])) };
    if (reason.value.trim()) body.reason = reason.value.trim();
    try {
      const job = await api("POST", `/v1/jobs/${j.id}/replan`, body);
      const next = Math.max(...job.generations.map((g) => g.generation));
      flash(`Job ${short(j.id)}: replan to generation ${next} asked; it starts once the running processes have checkpointed and exited`, true);
      route();
    } catch (e) {
      const words = e instanceof Problem ? e.words() : String(e);
      replanErrors.set(j.id, words); error.textContent = words; button.disabled = false;
    }
  } },
    h("h4", { class: "form-title" }, "Replan"),
    pins.map(([k, i]) => field(`Pin ${k}`, i)), field("Reason (optional)", reason), button, error,
    h("p", { class: "muted replan-help", id: `replan-help-${j.id}` }, `On the same GPUs: the running processes get a stop notice with the job's stop grace, ${plural(j.stop_grace_s, "second")}, to checkpoint and exit, then every node resumes under the new plan. Empty pins: the planner chooses.`,
      pending ? ` Generation ${pending.generation} is pending.` : ""));
}
// A job's full output, live: the last 500 lines, then each line as it arrives (`follow=true`, server-sent
// events, which the browser resumes after a break with `Last-Event-ID`), until the job has ended and its last line
// is out. A node or rank filter starts the view over; the download is every line as text.
let logStream = null;
window.addEventListener("hashchange", () => { if (logStream) { logStream.close(); logStream = null; } });
async function viewLogs(jobId) {
  const job = await api("GET", `/v1/jobs/${jobId}`);
  const node = h("input", { id: "logs-node", type: "number", min: 0, max: 65535, placeholder: "all" });
  const rank = h("input", { id: "logs-rank", type: "number", min: 0, max: 1048575, placeholder: "all" });
  const out = h("pre", { id: "logs-lines", class: "logs", "aria-live": "off" });
  const status = h("p", { id: "logs-status", class: "muted", role: "status" });
  const download = h("a", { id: "logs-download", class: "button secondary" }, "Download");
  const filters = () => {
    const q = new URLSearchParams();
    if (node.value !== "") q.set("node", node.value);
    if (rank.value !== "") q.set("rank", rank.value);
    return q;
  };
  const render = (l) => `${l.rank === undefined ? `[node ${l.node}]` : `[node ${l.node} rank ${l.rank}]`} ${l.text}\n`;
  const start = async () => {
    if (logStream) { logStream.close(); logStream = null; }
    const q = filters();
    const text = new URLSearchParams(q);
    text.set("format", "text");
    download.href = `/v1/jobs/${jobId}/logs?${text}`;
    download.setAttribute("download", `job-${jobId}.log`);
    let page;
    const tail = new URLSearchParams(q);
    tail.set("tail", "500");
    try { page = await api("GET", `/v1/jobs/${jobId}/logs?${tail}`); }
    catch (e) { status.textContent = e instanceof Problem ? e.words() : String(e); return; }
    out.textContent = page.lines.map(render).join("");
    const lost = page.lost_lines ? `; ${plural(page.lost_lines, "line")} lost while a node was cut off` : "";
    const capped = page.first_line > 1 ? `; lines before ${page.first_line} went to the log cap` : "";
    const after = page.lines.length ? page.lines[page.lines.length - 1].line : page.next_after;
    if (page.complete) { status.textContent = `The job has ended: all of its output is here${lost}${capped}.`; return; }
    status.textContent = `Following${capped}...`;
    q.set("follow", "true"); q.set("after", String(after));
    logStream = new EventSource(`/v1/jobs/${jobId}/logs?${q}`);
    logStream.addEventListener("line", (ev) => {
      const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
      out.append(render(JSON.parse(ev.data)));
      if (atEnd) out.scrollTop = out.scrollHeight;
    });
    logStream.addEventListener("end", () => {
      logStream.close(); logStream = null;
      status.textContent = "The job has ended: all of its output is here.";
    });
  };
  [node, rank].forEach((i) => i.addEventListener("change", start));
  start();
  return [h("h1", {}, `Logs of job ${short(jobId)} `, stateTag(job.state)),
    h("p", {}, h("a", { href: `#/lease/${job.lease_id}` }, "Back to its lease"), " ", job.reason ? h("span", { class: "job-reason" }, job.reason) : null),
    h("form", { class: "inline", "aria-label": "Filter the logs", onsubmit: (ev) => { ev.preventDefault(); start(); } },
      field("Node (its rank in the job)", node), field("Rank", rank), download),
    status, out];
}
// The steps the gpuplane runtime measured, against the plan: a summary line, then loss and step time per step.
function stepsView(j) {
  const m = j.measured;
  if (!m) return null;
  const vs = m.step_time_vs_plan ? ` (${m.step_time_vs_plan.toFixed(2)}x the plan's ${m.predicted_step_time_s.toFixed(4)} s)` : "";
  const box = h("div", { class: "job-steps", id: `steps-${j.id}` },
    h("p", {}, `${plural(m.steps, "step")} measured: median step ${m.median_step_time_s.toFixed(3)} s${vs}, ${Math.round(m.tokens_per_s)} tokens/s, loss ${m.first_loss.toFixed(3)} to ${m.last_loss.toFixed(3)}`));
  api("GET", `/v1/jobs/${j.id}/steps?limit=5000`).then((page) => {
    const points = (key) => page.steps.map((x) => [x.step, x[key]]);
    box.append(h("h4", {}, "Loss per step"), lineChart("Loss per step", [{ label: "loss", points: points("loss") }], { x: "step" }),
      h("h4", {}, "Step time"), lineChart("Step time", [{ label: "step time", points: points("step_time_s") }], { unit: " s", x: "step" }));
  }).catch(() => box.append(h("p", { class: "muted" }, "Steps could not be loaded.")));
  return box;
}
async function viewAdvice() {
  const pools = await loadPools();
  const currencies = [...new Set(pools.map((p) => p.currency))];
  const model = h("input", { id: "advice-model", name: "preset", value: "llama2-7b", required: true });
  const kind = h("select", { id: "advice-kind", name: "kind" }, ["lora", "train", "inference"].map((k) => h("option", { value: k }, k)));
  const tokens = h("input", { id: "advice-tokens", type: "number", min: 1, value: 100000000 });
  const seq = h("input", { id: "advice-seq", type: "number", min: 1, max: 1048576, placeholder: "4096" });
  const batch = h("input", { id: "advice-batch", type: "number", min: 1, max: 1048576, placeholder: "512" });
  const budget = h("input", { id: "advice-budget", type: "number", min: 0.01, step: "0.01", placeholder: "no limit" });
  const deadline = h("input", { id: "advice-deadline", type: "number", min: 0.01, step: "0.01", placeholder: "no limit" });
  const out = h("div", { id: "advice-results" });
  const planOut = h("div", { id: "plan-out" });
  const optional = (input, scale) => (input.value === "" ? undefined : Math.round(Number(input.value) * (scale || 1)));
  const poolName = (id) => (poolsById[id] || {}).name || short(id);
  // What an option misses of the asked deadline, budget and load (nothing: "meets all").
  const misses = (o) => [o.meets_budget ? null : "over budget", o.meets_deadline ? null : "misses deadline", o.meets_load ? null : "misses load"].filter(Boolean);
  return [h("h1", {}, "What should I rent?"),
    h("form", { class: "inline", id: "advice-form", "aria-label": "Advice", onsubmit: async (ev) => {
      ev.preventDefault(); flash(""); out.replaceChildren(h("p", {}, "Planning..."));
      try {
        const training = kind.value !== "inference";
        const workload = { kind: kind.value, seq_len: optional(seq), global_batch: training ? optional(batch) : undefined };
        const target = training ? { training_tokens: Number(tokens.value) } : { serving_tokens_per_s: 1000 };
        const query = { model: { preset: model.value.trim() }, workload };
        const r = await api("POST", "/v1/advice", { ...query, target, budget_minor: optional(budget, 100), deadline_hours: deadline.value === "" ? undefined : Number(deadline.value) });
        const showPlan = (o, i) => planOut.replaceChildren(planView(o.plan, `Plan of option ${i + 1}: ${poolName(o.pool_id)}, ${o.gpu_count} x ${o.gpu_key}`));
        const leaseThis = (o) => show(h("h1", {}, "Lease this option"),
          leaseForm(pools, { pool_id: o.pool_id, gpu_count: o.gpu_count, hours: Math.max(1, Math.ceil(o.hours)), plan: carriedPlan(query, o.plan) }),
          planView(o.plan, `The plan: ${poolName(o.pool_id)}, ${o.gpu_count} x ${o.gpu_key}`));
        out.replaceChildren(...[r.options.length ? table(["#", "Pool", "GPUs", "Layout", "Hours", "Cost", "Deadline, budget", "", "", ""], r.options.map((o, i) => [
          String(i + 1), poolName(o.pool_id), `${o.gpu_count} x ${o.gpu_key}`, `tp ${o.plan.tp} pp ${o.plan.pp} dp ${o.plan.dp}`,
          o.hours.toFixed(2), money(o.cost_minor, o.currency),
          h("span", { class: misses(o).length ? "misses" : "meets", "data-misses": misses(o).join(",") }, misses(o).join(", ") || "meets all"),
          [o.cheapest ? "cheapest " : "", o.fastest ? "fastest" : ""].join(""),
          h("button", { type: "button", class: "secondary", "data-plan": i, onclick: () => showPlan(o, i) }, "Plan"),
          isAdmin() ? h("button", { type: "button", class: "secondary", "data-pool": o.pool_id, "data-gpus": o.gpu_count, onclick: () => leaseThis(o) }, "Lease this") : ""]))
          : h("p", {}, "No pool can run this."),
        r.options.length ? h("p", { class: "muted", id: "advice-frontier" }, `The cost/time frontier: nothing left out is both cheaper and faster than an option shown; costs within ${r.cost_tie_bps / 100}% count as equal and the faster is shown. Options meeting the deadline and budget come first.`) : null,
        r.skipped.length ? h("p", { class: "muted" }, "Skipped: " + r.skipped.map((x) => `${poolName(x.pool_id)}: ${x.reason}`).join("; ")) : null].filter(Boolean));
        if (r.options.length) showPlan(r.options[0], 0); else planOut.replaceChildren();
      } catch (e) { out.replaceChildren(); flash(e instanceof Problem ? e.words() : String(e)); }
    } }, field("Model preset", model), field("Workload", kind), field("Training tokens", tokens),
      field("Sequence length", seq), field("Global batch (sequences)", batch),
      field(`Budget (${currencies.length === 1 ? currencies[0] : "the pool's currency"})`, budget), field("Deadline (hours)", deadline),
      h("button", { type: "submit" }, "Get advice")),
    out, planOut];
}
async function viewBilling() {
  const [bal, inv, ledger] = await Promise.all([api("GET", "/v1/billing/balance"), api("GET", "/v1/billing/invoices"), api("GET", "/v1/billing/ledger?limit=200")]);
  const byDay = {};
  let currency = "";
  for (const e of ledger.items) if (e.kind === "usage") { const d = e.period_at.slice(0, 10); byDay[d] = (byDay[d] || 0) - e.amount_minor; currency = e.currency; }
  const days = Object.keys(byDay).sort().map((d) => [d, byDay[d] / 100]);
  const since = new Date(Date.now() - 30 * 86400 * 1000).toISOString();
  const usage = await api("GET", `/v1/billing/usage/export?format=jsonl&from=${encodeURIComponent(since)}`).catch(() => "");
  const perPool = {};
  for (const line of String(usage).split("\n")) {
    if (!line.trim()) continue;
    const u = JSON.parse(line), k = `${u.pool_name} (${u.currency})`;
    perPool[k] = perPool[k] || { label: u.pool_name, value: 0, currency: u.currency };
    perPool[k].value += u.amount_minor;
  }
  const pools = Object.values(perPool).sort((a, b) => b.value - a.value);
  return [h("h1", {}, "Billing"),
    h("div", { class: "cards" }, bal.map((b) => h("div", { class: "card" }, h("h3", {}, "Balance"), h("strong", { id: `balance-${b.currency}` }, money(b.balance_minor, b.currency))))),
    h("h2", {}, "Spend per day"), h("div", { id: "spend-per-day" }, dayChart("spend-per-day-chart", "Spend per day", days, (v) => money(Math.round(v * 100), currency), currency)),
    h("h2", {}, "Spend per pool, last 30 days"), pools.length ? h("div", { id: "spend-per-pool" }, barChart("Spend per pool", pools.map((p) => ({ label: p.label, value: p.value, text: money(p.value, p.currency) }))))
      : h("p", { class: "muted", id: "spend-per-pool" }, "No usage in the last 30 days."),
    h("h2", {}, "Ledger"), table(["When", "Kind", "Amount", "Lease"], ledger.items.slice(0, 50).map((e) => [ago(e.created_at), e.kind, money(e.amount_minor, e.currency), e.lease_id ? idLink(`#/lease/${e.lease_id}`, e.lease_id) : "-"])),
    h("h2", {}, "Invoices"), inv.length ? table(["Month", "State", "Usage", "Credits", "Total"], inv.map((i) => [i.month, i.state, money(i.usage_minor, i.currency), money(i.credits_minor, i.currency), money(i.total_minor, i.currency)])) : h("p", { class: "muted" }, "No invoices yet."),
    h("p", {}, h("a", { class: "button", href: "/v1/billing/usage/export?format=csv", download: "usage.csv" }, "Download usage (CSV)"))];
}
async function viewKeys() {
  const keys = await api("GET", "/v1/tenant/api-keys");
  const name = h("input", { id: "key-name", required: true, maxlength: 100 });
  const role = h("select", { id: "key-role" }, h("option", { value: "tenant_member" }, "tenant_member"), h("option", { value: "tenant_admin" }, "tenant_admin"));
  const created = h("div", { id: "key-created", "aria-live": "polite" });
  return [h("h1", {}, "API keys"),
    table(["Name", "Role", "Prefix", "Created", "Last used", "State", ""], keys.map((k) => [k.name, k.role, k.prefix, ago(k.created_at), ago(k.last_used_at),
      k.revoked_at ? "revoked" : "active", k.revoked_at ? "" : h("button", { type: "button", class: "danger", onclick: act(() => api("DELETE", `/v1/tenant/api-keys/${k.id}`), "Key revoked") }, "Revoke")])),
    h("h2", {}, "New key"),
    h("form", { class: "inline", onsubmit: async (ev) => {
      ev.preventDefault(); flash("");
      try {
        const k = await api("POST", "/v1/tenant/api-keys", { name: name.value, role: role.value });
        created.replaceChildren(h("p", {}, "Copy this key now; it is never shown again:"), h("p", { class: "secret" }, k.api_key));
      } catch (e) { flash(e instanceof Problem ? e.words() : String(e)); }
    } }, field("Name", name), field("Role", role), h("button", { type: "submit" }, "Create key")), created];
}

// ---- operator views ----------------------------------------------------------------------------------------
async function allPages(path) {
  let items = [], after = null;
  for (let i = 0; i < 20; i++) {
    const page = await api("GET", `${path}${path.includes("?") ? "&" : "?"}limit=200${after ? `&after=${after}` : ""}`);
    items = items.concat(page.items);
    if (!page.next_after) break;
    after = page.next_after;
  }
  return items;
}
async function viewFleet() {
  // Node and GPU counts per pool come counted from the server: paging through 10,000 nodes would take seconds.
  const [pools, fleet] = await Promise.all([loadPools(), api("GET", "/v1/admin/fleet")]);
  const counts = Object.fromEntries(fleet.map((f) => [f.pool_id, f]));
  const utils = await Promise.all(pools.map((p) => api("GET", `/v1/admin/pools/${p.id}/utilization`).catch(() => ({}))));
  // Revenue today (UTC), per pool.
  const midnight = new Date(new Date().toISOString().slice(0, 10) + "T00:00:00Z");
  const revenue = await api("GET", `/v1/admin/billing/revenue?from=${encodeURIComponent(midnight.toISOString())}&to=${encodeURIComponent(new Date(Date.now() + 1000).toISOString())}`).catch(() => ({ pools: [] }));
  const earned = Object.fromEntries(revenue.pools.map((r) => [r.pool_id, r]));
  return [h("h1", {}, "Fleet"), h("div", { class: "cards", id: "fleet" }, pools.map((p, i) => {
    const c = counts[p.id] || { nodes: 0, nodes_ready: 0, gpus_unhealthy: 0 };
    const unhealthy = c.gpus_unhealthy;
    const leased = p.total_gpus - p.free_gpus;
    const free = Math.max(0, p.free_gpus - unhealthy);
    const u = utils[i].avg_gpu_util;
    return h("section", { class: "card", "data-pool": p.id },
      h("h3", {}, `${p.name} (${p.gpu_model.key})`),
      stackBar(`${p.name} GPUs`, [{ label: "leased", value: leased, color: "#0b57d0" }, { label: "free", value: free, color: "#8bc34a" }, { label: "unhealthy", value: unhealthy, color: "#b3261e" }]),
      h("p", {}, `${free} free, ${leased} leased, ${unhealthy} unhealthy of ${plural(p.total_gpus, "GPU")}`),
      h("p", {}, `${plural(c.nodes, "node")} (${c.nodes_ready} ready); utilization ${u === null || u === undefined ? "-" : u.toFixed(0) + " %"}`),
      h("p", {}, `Revenue today: ${money((earned[p.id] || {}).amount_minor || 0, (earned[p.id] || {}).currency || p.currency)}`));
  }))];
}
// One page of 200 nodes at a time (`#/nodes/<after>` for the next), so the page stays fast with 10,000 nodes.
async function viewNodes(after) {
  const [page] = await Promise.all([api("GET", `/v1/admin/nodes?limit=200${after ? `&after=${encodeURIComponent(after)}` : ""}`), loadPools()]);
  const nodes = page.items;
  const action = (n, what, label, cls) => h("button", { type: "button", class: cls || "secondary", "data-action": what, "data-node": n.hostname,
    onclick: act(() => api("POST", `/v1/admin/nodes/${n.id}/${what}`), `${n.hostname}: ${label.toLowerCase()} done`) }, label);
  return [h("h1", {}, "Nodes"), table(["Host", "Pool", "State", "GPUs", "Last heartbeat", "Actions"], nodes.map((n) => [h("a", { href: `#/node/${n.id}` }, n.hostname), (poolsById[n.pool_id] || {}).name || short(n.pool_id), stateTag(n.state),
    `${n.gpus.length} (${n.gpus.filter((g) => !g.healthy).length} unhealthy)`, ago(n.last_heartbeat_at),
    nodeActions(n, action)])),
    h("p", {}, after ? h("a", { href: "#/nodes" }, "First page") : null, after && page.next_after ? " | " : null,
      page.next_after ? h("a", { href: `#/nodes/${page.next_after}`, id: "nodes-next" }, "Next 200 nodes") : null)];
}
function nodeActions(n, action) {
  return h("span", {}, n.state === "ready" ? [action(n, "cordon", "Cordon"), " ", action(n, "drain", "Drain"), " ", action(n, "maintenance", "Maintenance")]
    : n.state === "maintenance" ? action(n, "uncordon", "Uncordon") : [action(n, "uncordon", "Uncordon"), " ", action(n, "maintenance", "Maintenance")]);
}
async function viewNode(id) {
  const to = new Date(), from = new Date(to - 3600 * 1000);
  const [n, tele] = await Promise.all([api("GET", `/v1/admin/nodes/${id}`),
    api("GET", `/v1/admin/nodes/${id}/telemetry?from=${encodeURIComponent(from.toISOString())}&to=${encodeURIComponent(to.toISOString())}&step_s=60`), loadPools()]);
  const action = (node, what, label) => h("button", { type: "button", class: what === "maintenance" ? "danger" : "secondary", "data-action": what, "data-node": node.hostname,
    onclick: act(() => api("POST", `/v1/admin/nodes/${node.id}/${what}`), `${node.hostname}: ${label.toLowerCase()} done`) }, label);
  return [h("h1", {}, `Node ${n.hostname} `, stateTag(n.state)),
    h("p", {}, `${(poolsById[n.pool_id] || {}).name || short(n.pool_id)}; ${plural(n.gpus.length, "GPU")} (${n.gpus.filter((g) => !g.healthy).length} unhealthy); ${n.address}; last heartbeat ${ago(n.last_heartbeat_at)}`),
    nodeActions(n, action),
    h("h2", {}, `GPU utilization, last hour${tele.avg_gpu_util === null || tele.avg_gpu_util === undefined ? "" : ` (mean ${tele.avg_gpu_util.toFixed(0)} %)`}`),
    tele.gpus.length ? [heatmap(tele), h("p", { class: "muted" }, "One column a minute; pale: idle, dark blue: 100 % busy, blank: no samples. Hover a cell for its value.")]
      : h("p", { class: "muted", id: "heatmap-empty" }, "No samples in the last hour."),
    h("h2", {}, "GPUs"), table(["GPU", "UUID", "Healthy"], n.gpus.map((g) => [String(g.index), g.uuid, g.healthy ? "yes" : "no"])),
    h("h2", {}, "Launchers"),
    n.external ? h("p", { class: "muted" }, "External node: no agent runs jobs here.")
      : n.launchers ? table(["Launcher", "Version"], Object.entries(n.launchers).map(([k, v]) => [k, v || "-"]))
      : h("p", { class: "muted" }, "Its agent has not reported launchers (no agent yet, or an older one): jobs are not checked against them.")];
}
async function tenantNames() {
  return Object.fromEntries((await allPages("/v1/admin/tenants")).map((t) => [t.id, t.name]));
}
async function viewAllLeases() {
  const [leases, names] = await Promise.all([allPages("/v1/admin/leases?state=active"), tenantNames(), loadPools()]);
  return [h("h1", {}, "Active leases, all tenants"), leases.length ? table(["Lease", "Tenant", "Pool", "GPUs", "Time left", ""], leases.map((l) => [
    h("span", { class: "id", title: l.id }, short(l.id)), names[l.tenant_id] || short(l.tenant_id),
    (poolsById[l.pool_id] || {}).name || short(l.pool_id), String(l.gpu_count), left(l.ends_at),
    h("button", { type: "button", class: "danger", onclick: act(() => {
      const reason = prompt("Reason for terminating this lease (shown to the tenant):");
      if (!reason) throw new Error("A reason is needed to terminate a lease.");
      return api("POST", `/v1/admin/leases/${l.id}/terminate`, { reason });
    }, "Lease terminated") }, "Terminate")])) : h("p", {}, "No active leases.")];
}
async function viewTenants() {
  const tenants = await allPages("/v1/admin/tenants");
  const limit = (v) => (v === "" ? null : Number(v));
  return [h("h1", {}, "Tenants"), table(["Tenant", "Status", "Balance", "Quotas (empty: no limit)", "Top up (USD)", ""], tenants.map((t) => {
    const amount = h("input", { type: "number", min: 1, step: "0.01", "aria-label": `Top-up amount for ${t.name}`, value: 100 });
    const q = t.quotas || {};
    const leases = h("input", { type: "number", min: 0, max: 1000000, value: q.max_concurrent_leases ?? "", "data-quota": "leases" });
    const gpus = h("input", { type: "number", min: 0, max: 1000000, value: q.max_gpus_per_pool ?? "", "data-quota": "gpus" });
    return [t.name, stateTag(t.status),
      h("span", { class: "balance", "data-tenant": t.name }, (t.balances || []).map((b) => money(b.balance_minor, b.currency)).join(", ") || money(0, "USD")),
      h("form", { class: "inline", "aria-label": `Quotas of ${t.name}`, onsubmit: act(() => api("PUT", `/v1/admin/tenants/${t.id}/quotas`,
        { max_concurrent_leases: limit(leases.value), max_gpus_per_pool: limit(gpus.value), pools: q.pools || [] }), `${t.name}: quotas saved`) },
        field("Leases at once", leases), field("GPUs per pool", gpus), (q.pools || []).length ? h("span", { class: "muted" }, `${plural(q.pools.length, "pool limit")} kept`) : null,
        h("button", { type: "submit", class: "secondary" }, "Save quotas")),
      h("form", { class: "inline", onsubmit: act(() => api("POST", `/v1/admin/tenants/${t.id}/ledger`, { kind: "topup", amount_minor: Math.round(Number(amount.value) * 100), currency: "USD", reason: "console top-up" },
        idempotencyKey()), `${t.name} topped up`) }, amount, h("button", { type: "submit", class: "secondary" }, "Top up")),
      h("button", { type: "button", class: t.status === "active" ? "danger" : "secondary", onclick: act(() => api("PATCH", `/v1/admin/tenants/${t.id}`, { status: t.status === "active" ? "suspended" : "active" }), "Tenant updated") },
        t.status === "active" ? "Suspend" : "Reactivate")];
  }))];
}

async function viewPrices() {
  const pools = await loadPools();
  const prices = await Promise.all(pools.map((p) => api("GET", `/v1/admin/pools/${p.id}/prices`)));
  return [h("h1", {}, "Prices"), pools.map((p, i) => {
    const hour = h("input", { type: "number", min: 0, step: "0.01", required: true, "data-price-pool": p.name });
    const from = h("input", { type: "datetime-local" });
    return h("section", { class: "card", "data-pool": p.id }, h("h3", {}, `${p.name} (${p.gpu_model.key}): now ${money(p.price_per_gpu_hour_minor, p.currency)} per GPU-hour`),
      table(["Effective from", "Per GPU-hour", "Per GPU-month"], prices[i].map((x) => [ago(x.effective_from), money(x.price_per_gpu_hour_minor, p.currency),
        x.price_per_gpu_month_minor === null || x.price_per_gpu_month_minor === undefined ? "-" : money(x.price_per_gpu_month_minor, p.currency)])),
      h("form", { class: "inline", "aria-label": `New price for ${p.name}`, onsubmit: act(() => api("POST", `/v1/admin/pools/${p.id}/prices`,
        { price_per_gpu_hour_minor: Math.round(Number(hour.value) * 100), effective_from: from.value ? new Date(from.value).toISOString() : null }), `${p.name}: price added`) },
        field(`Per GPU-hour (${p.currency})`, hour), field("Effective from (local time; empty: now)", from), h("button", { type: "submit", class: "secondary" }, "Add price")));
  })];
}
async function viewInvoices(month) {
  month = month || new Date().toISOString().slice(0, 7);
  const [invoices, names] = await Promise.all([api("GET", `/v1/admin/invoices?month=${encodeURIComponent(month)}`), tenantNames()]);
  const pick = h("input", { id: "invoice-month", type: "month", value: month, required: true });
  const step = (i, what, label) => h("button", { type: "button", class: "secondary", "data-invoice": what, onclick: act(() => api("POST", `/v1/admin/invoices/${i.id}/${what}`), `Invoice ${label.toLowerCase()}`) }, label);
  return [h("h1", {}, `Invoices, ${month}`),
    h("form", { class: "inline", "aria-label": "Invoice month", onsubmit: (ev) => { ev.preventDefault(); location.hash = `#/invoices/${pick.value}`; } },
      field("Month", pick), h("button", { type: "submit", class: "secondary" }, "Show"),
      h("button", { type: "button", id: "generate-invoices", onclick: act(() => api("POST", "/v1/admin/invoices", { month: pick.value }), "Draft invoices generated") }, "Generate drafts")),
    invoices.length ? table(["Tenant", "State", "Usage", "Credits", "Total", ""], invoices.map((i) => [names[i.tenant_id] || short(i.tenant_id), stateTag(i.state),
      money(i.usage_minor, i.currency), money(i.credits_minor, i.currency), money(i.total_minor, i.currency),
      i.state === "draft" ? (i.month_closed ? step(i, "issue", "Issue") : h("span", { class: "muted", "data-invoice": "open" }, "month still open"))
        : i.state === "issued" ? step(i, "pay", "Mark paid") : ago(i.paid_at)])) : h("p", { class: "muted" }, "No invoices for this month."),
    h("p", { class: "muted" }, "A month's drafts can be issued once it has ended and all its usage is metered; until then each generation refreshes them.")];
}

// ---- routing -----------------------------------------------------------------------------------------------
const TENANT_NAV = [["#/pools", "Pools"], ["#/leases", "Leases"], ["#/volumes", "Volumes"], ["#/services", "Services"], ["#/advice", "What to rent"], ["#/billing", "Billing"], ["#/keys", "API keys", "admin"]];
const OPERATOR_NAV = [["#/fleet", "Fleet"], ["#/nodes", "Nodes"], ["#/all-leases", "Leases"], ["#/tenants", "Tenants"], ["#/prices", "Prices"], ["#/invoices", "Invoices"]];
const VIEWS = { pools: viewPools, leases: viewLeases, volumes: viewVolumes, services: viewServices, service: viewService, lease: viewLease, logs: viewLogs, advice: viewAdvice, billing: viewBilling, keys: viewKeys, fleet: viewFleet, nodes: viewNodes, "all-leases": viewAllLeases, tenants: viewTenants, node: viewNode, prices: viewPrices, invoices: viewInvoices };

async function route() {
  const [, name, arg] = (location.hash || "#/").split("/");
  if (!session) {
    try { session = await api("GET", "/v1/console/session"); } catch { session = null; }
  }
  if (!session || name === "signin") return viewSignIn();
  const nav = (isOperator() ? OPERATOR_NAV : TENANT_NAV).filter((n) => !n[2] || isAdmin());
  const current = name || nav[0][0].slice(2);
  $("#nav").replaceChildren(...nav.map(([href, label]) => h("a", { href, "aria-current": href === `#/${current}` ? "page" : null }, label)));
  $("#who").textContent = session.role.replace("_", " ");
  $("#signout").hidden = false;
  const view = VIEWS[current] || VIEWS[nav[0][0].slice(2)];
  const seq = ++routeSeq;
  try { const nodes = await view(arg); if (seq === routeSeq) show(...nodes); }
  catch (e) { if (seq === routeSeq) show(h("h1", {}, "Something went wrong"), h("p", {}, e instanceof Problem ? e.words() : String(e))); }
  document.title = `gpuplane: ${current}`;
}
window.addEventListener("hashchange", () => { flash(""); route(); });
// Live pages (a lease's charts, the fleet, a node's heatmap) redraw every 20 s while the tab is visible, unless
// the user touched the page in the last 10 s (a form being filled in, a button about to be pressed).
const LIVE_VIEWS = new Set(["lease", "fleet", "node"]);
let lastTouch = 0;
["keydown", "mousedown", "touchstart", "focusin"].forEach((t) => document.addEventListener(t, () => { lastTouch = Date.now(); }, true));
setInterval(() => {
  const name = (location.hash || "#/").split("/")[1];
  if (session && LIVE_VIEWS.has(name) && document.visibilityState === "visible" && Date.now() - lastTouch > 10000) route();
}, 20000);
document.addEventListener("DOMContentLoaded", () => {
  $("#signout").addEventListener("click", async () => {
    await api("DELETE", "/v1/console/session").catch(() => {});
    session = null; location.hash = "#/signin"; route();
  });
  route();
});

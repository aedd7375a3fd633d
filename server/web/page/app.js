"use strict";
// hpod's dashboard: one page routed by the URL's fragment (#sweep/3, #trial/17). Every request is
// relative to the page, so the dashboard works under a reverse proxy's path prefix and through an
// SSH tunnel. Live updates come as server-sent events from the sweep's event log; what they
// change is fetched again (the trial table's page, the header, and the charts at most every
// two seconds).

const $ = (sel, root = document) => root.querySelector(sel);
let csrf = "";
let charts = {};     // canvas id -> Chart
let source = null;   // the open EventSource
let timers = [];

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children.flat()) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

async function api(path, opts = {}) {
  const r = await fetch(path, {credentials: "same-origin", ...opts});
  if (!r.ok) {
    let msg = r.status + " " + r.statusText;
    try { msg = (await r.json()).error; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return r.json();
}

function post(path, body) {
  return api(path, {method: "POST", body: JSON.stringify(body || {}),
                    headers: {"Content-Type": "application/json", "X-HPO-CSRF": csrf}});
}

function fmt(v) {
  if (v === null || v === undefined || v === "") return "–";
  if (typeof v === "number") {
    if (!isFinite(v)) return String(v);
    if (Number.isInteger(v) && Math.abs(v) < 1e9) return String(v);
    return Number(v.toPrecision(5)).toString();
  }
  return String(v);
}
const short = s => String(s || "").replace(/^(TRIAL|SWEEP)_STATE_/, "");
const paramText = v => v === undefined ? "–" :
  ("float_value" in v ? fmt(v.float_value) : "int_value" in v ? fmt(Number(v.int_value)) :
   "bool_value" in v ? String(v.bool_value) : "string_value" in v ? v.string_value : "–");
function duration(s) {
  if (!isFinite(s) || s < 0) return "–";
  if (s < 90) return s.toFixed(1) + "s";
  if (s < 5400) return Math.floor(s / 60) + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
}
const ts = t => t ? Date.parse(t) / 1000 : NaN;
const stateTag = s => el("span", {class: "state " + short(s)}, short(s));

function chart(id, config) {
  if (charts[id]) charts[id].destroy();
  const canvas = document.getElementById(id);
  if (!canvas) return null;
  config.options = Object.assign({animation: false, responsive: true, maintainAspectRatio: false},
                                 config.options || {});
  charts[id] = new Chart(canvas, config);
  return charts[id];
}

function reset() {
  if (source) source.close();
  source = null;
  for (const t of timers) clearInterval(t), clearTimeout(t);
  timers = [];
  for (const c of Object.values(charts)) c.destroy();
  charts = {};
  $("#live").className = "";
}

const FINAL = new Set(["COMPLETED", "GOAL_REACHED", "CANCELED", "FAILED", "TIMED_OUT"]);
const ended = sweep => FINAL.has(short(sweep.state));

// Follows a sweep's event log from now on (server-sent events; no replay of its history, which
// may be hundreds of thousands of events). `onChange` runs at each opening, for what happened
// since the page fetched (also after a reconnect), and at each event. The server ends the stream
// once the sweep ended; `isDone()` (async) then says whether to stop, where the browser would
// otherwise reconnect for ever.
function live(url, onChange, isDone) {
  if (source) source.close();
  const mine = source = new EventSource(url);
  mine.onopen = () => { $("#live").className = "on"; onChange(); };
  mine.onerror = () => {
    $("#live").className = "";
    isDone().then(done => { if (done && source === mine) { mine.close(); source = null; } }).catch(() => {});
  };
  mine.onmessage = m => onChange(JSON.parse(m.data));
}

function crumbs(...parts) {
  $("#crumbs").replaceChildren(...parts.flatMap((p, i) => i ? [" / ", p] : [p]));
}

// --- the list of sweeps

async function sweepsPage() {
  crumbs(el("a", {href: "#"}, "sweeps"));
  const main = $("#main");
  const body = el("tbody");
  main.replaceChildren(el("h1", {}, "Sweeps"), el("table", {id: "sweeps-table"},
    el("thead", {}, el("tr", {}, ["id", "name", "state", "backend", "trials", "best", "GPU-hours"]
      .map(h => el("th", {}, h)))), body));
  async function load() {
    const sweeps = await api("api/sweeps");
    body.replaceChildren(...sweeps.map(s => {
      const counts = Object.entries(s.trial_counts || {}).map(([k, n]) => `${k} ${n}`).join(", ");
      const best = (s.objectives || []).length > 1 ? `front of ${s.pareto_front_size}` :
        (Number(s.best_trial_id) ? fmt(s.best_objective) : "–");
      return el("tr", {onclick: () => { location.hash = "sweep/" + s.id; }},
        el("td", {class: "num"}, s.id), el("td", {}, s.name), el("td", {}, stateTag(s.state)),
        el("td", {}, s.backend), el("td", {}, counts || "–"), el("td", {class: "num"}, best),
        el("td", {class: "num"}, fmt(s.charged_gpu_seconds / 3600)));
    }));
    if (!sweeps.length) body.append(el("tr", {}, el("td", {colspan: 7, class: "muted"}, "No sweeps yet.")));
  }
  await load();
  timers.push(setInterval(() => load().catch(() => {}), 2000));
}

// --- one sweep

async function sweepPage(id) {
  const st = {id, sweep: null, selected: null,
              query: {offset: 0, limit: 50, sort: "number", desc: false, states: [], ranges: {}}};
  const main = $("#main");
  main.replaceChildren(
    el("h1", {id: "sweep-title"}, `Sweep ${id}`),
    el("div", {class: "stats card", id: "sweep-stats"}),
    el("div", {class: "toolbar", id: "actions"}),
    el("div", {class: "grid"},
      card("Learning curves", "chart-curves"), card("Objective by trial", "chart-objective"),
      card("Parallel coordinates (drag on an axis to filter)", "chart-parallel", true),
      card("Parameter importance", "chart-importance"),
      card("GPU timeline", "chart-timeline", true), card("Pareto front", "chart-pareto")),
    el("h2", {}, "Trials"), el("div", {class: "toolbar", id: "filters"}),
    el("table", {id: "trial-table"}, el("thead"), el("tbody")),
    el("div", {class: "toolbar", id: "pager"}));
  st.sweep = await api(`api/sweeps/${id}`);
  crumbs(el("a", {href: "#"}, "sweeps"), el("a", {href: "#sweep/" + id}, `${id} ${st.sweep.name}`));
  header(st);
  actions(st);
  filters(st);
  await table(st);
  await drawCharts(st);
  // The charts are drawn again at most every two seconds, and after the last change.
  let pending = false, chartsWanted = false, chartsDue = Date.now() + 2000, chartsLater = false;
  const redraw = async () => {
    chartsLater = false;
    chartsDue = Date.now() + 2000;
    await drawCharts(st);
  };
  const refresh = async () => {
    pending = false;
    st.sweep = await api(`api/sweeps/${id}`);
    header(st);
    await table(st);
    if (!chartsWanted) return;
    chartsWanted = false;
    const wait = chartsDue - Date.now();
    if (wait <= 0) await redraw();
    else if (!chartsLater) { chartsLater = true; timers.push(setTimeout(() => redraw().catch(() => {}), wait)); }
  };
  // An event, or a reopening of the stream (events may have been missed): the header, the table
  // and the charts. The first opening: the header and the table, for what happened since they
  // were fetched.
  let opened = false;
  const changed = event => {
    if (event || opened) chartsWanted = true;
    if (!event) opened = true;
    if (!pending) { pending = true; timers.push(setTimeout(() => refresh().catch(() => {}), 200)); }
  };
  st.follow = () => live(`api/sweeps/${id}/events?since=now`, changed,
                         async () => ended(st.sweep = await api(`api/sweeps/${id}`)));
  st.follow();
  timers.push(setInterval(() => header(st), 1000));  // the elapsed time
}

function card(title, id, custom) {
  return el("div", {class: "card"}, el("h2", {}, title),
            el("div", {class: "chart-box"},
               el("canvas", {id, "data-custom": custom ? "1" : null})),
            el("div", {class: "muted", id: id + "-note"}));
}

function header(st) {
  const s = st.sweep;
  const end = s.ended_at ? ts(s.ended_at) : Date.now() / 1000;
  const counts = Object.entries(s.trial_counts || {}).map(([k, n]) => el("span", {}, stateTag(k), " ", n));
  const multi = (s.objectives || []).length > 1;
  const best = multi ? `Pareto front of ${s.pareto_front_size} trial(s)` :
    (Number(s.best_trial_id) ? `best ${s.objective_metric} ${fmt(s.best_objective)} (trial ${s.best_trial_id})`
                             : `best ${s.objective_metric} –`);
  $("#sweep-title").textContent = `Sweep ${s.id}: ${s.name}`;
  $("#sweep-stats").replaceChildren(
    el("span", {}, stateTag(s.state)), el("span", {}, "elapsed ", el("b", {}, duration(end - ts(s.created_at)))),
    ...counts, el("span", {id: "best"}, best),
    el("span", {}, "GPU-hours ", el("b", {}, fmt(s.charged_gpu_seconds / 3600)),
       s.gpu_hours_budget ? ` of ${fmt(s.gpu_hours_budget)}` : ""),
    ...planned(s),
    search(s),
    ...quarantined(s),
    el("span", {class: "muted"}, s.message || ""));
}

// What the sweep searches with: its sampler and stopper, and for `auto` what each chose, does
// now and why.
function search(s) {
  const part = (label, name, choice) =>
    el("span", {}, `${label} `, el("b", {}, name || "–"), choice ? ` (${choice})` : "");
  return el("span", {id: "search"}, part("algorithm", s.algorithm, s.algorithm_choice), "; ",
            part("early stopping", s.early_stopping, s.early_stopping_choice));
}

// What the sweep was expected to cost when it was submitted (hpo plan), next to what it used.
function planned(s) {
  const p = s.plan;
  if (!p || !p.trials) return [];
  const range = (r, f) => r.low === r.high ? f(r.expected) : `${f(r.expected)} (${f(r.low)}–${f(r.high)})`;
  const parts = [`${range(p.trials, fmt)} trials`];
  if (p.has_cost) {
    parts.push(`${range(p.gpu_hours, fmt)} GPU-hours`, `${range(p.wall_seconds, duration)} wall time`);
  }
  return [el("span", {id: "plan", title: p.basis || ""}, "plan ", el("b", {}, parts.join(", ")))];
}

// The sweep's quarantined nodes (none of its trials runs there), with the command that lets one
// back in.
function quarantined(s) {
  const nodes = (s.nodes || []).filter(n => n.quarantined);
  if (!nodes.length) return [];
  return [el("span", {id: "quarantined", title: `hpo nodes ${s.id} --allow NODE lets one back in`},
             "quarantined ", el("b", {}, nodes.map(n => n.node).join(", ")),
             ` (${nodes.map(n => n.failures).join(", ")} infrastructure failure(s))`)];
}

// A key for one change: its retries carry the same one, and hpod applies it once.
function requestId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, b => b.toString(16).padStart(2, "0")).join("");
}

// POSTs a change, sent again (same body, same key) while hpod does not answer or answers 503.
async function postOnce(path, body) {
  for (let attempt = 1; ; attempt++) {
    try { return await post(path, body); }
    catch (e) {
      const retry = e instanceof TypeError || /unavailable|did not answer/i.test(e.message);
      if (!retry || attempt >= 4) throw e;
      await new Promise(r => setTimeout(r, 1000 * attempt));
    }
  }
}

function actions(st) {
  if (!st.sweep.can_operate) {  // a viewer's role: nothing to press
    $("#actions").replaceChildren(el("span", {class: "muted"}, "read only"));
    return;
  }
  const act = async (verb, body) => {
    try {
      st.sweep = await postOnce(`api/sweeps/${st.id}/${verb}`, {...body, request_id: requestId()});
      header(st);
      if (!source && !ended(st.sweep)) st.follow();  // extended or resumed after its end
    }
    catch (e) { alert(`${verb}: ${e.message}`); }
  };
  $("#actions").replaceChildren(
    el("button", {id: "pause", onclick: () => act("pause")}, "Pause"),
    el("button", {id: "resume", onclick: () => act("resume")}, "Resume"),
    el("button", {id: "extend", onclick: () => {
      const n = prompt("How many more trials?", "10");
      if (n) act("extend", {add_trials: Number(n)});
    }}, "More trials…"),
    el("button", {id: "cancel", onclick: () => { if (confirm("Cancel this sweep?")) act("cancel"); }}, "Cancel"));
}

const STATES = ["PENDING", "RUNNING", "COMPLETED", "STOPPED", "FAILED", "CANCELED", "LOST"];

function filters(st) {
  const boxes = STATES.map(s => el("label", {}, el("input", {type: "checkbox", value: s, onchange: ev => {
    st.query.states = [...document.querySelectorAll("#filters input:checked")].map(i => i.value);
    st.query.offset = 0;
    table(st);
  }}), " ", s));
  const ranges = Object.entries(st.query.ranges).map(([name, [lo, hi]]) =>
    el("button", {title: "remove this filter", onclick: () => {
      delete st.query.ranges[name]; st.query.offset = 0; filters(st); table(st); drawParallel(st);
    }}, `${name} in [${fmt(lo)}, ${fmt(hi)}] ×`));
  const checked = new Set(st.query.states);
  for (const b of boxes) b.firstChild.checked = checked.has(b.firstChild.value);
  $("#filters").replaceChildren(el("span", {class: "muted"}, "states:"), ...boxes, ...ranges);
}

async function table(st) {
  const q = st.query;
  const params = new URLSearchParams({offset: q.offset, limit: q.limit, sort: q.sort, desc: q.desc ? 1 : 0});
  if (q.states.length) params.set("state", q.states.join(","));
  for (const [name, [lo, hi]] of Object.entries(q.ranges)) params.append("range", `${name}:${lo}:${hi}`);
  const page = await api(`api/sweeps/${st.id}/trials?${params}`);
  const rows = page.rows;
  const names = [...new Set(rows.flatMap(r => Object.keys(r.params || {})))].sort();
  const multi = (st.sweep.objectives || []).length > 1;
  const metrics = [...new Set(rows.flatMap(r => Object.keys(r.last_metrics || {})))].sort()
    .filter(m => multi || m !== st.sweep.objective_metric);
  const cols = [["number", "#", r => r.number], ["state", "state", r => stateTag(r.state)],
    ...names.map(n => ["param:" + n, n, r => paramText((r.params || {})[n])]),
    ["step", "step", r => Number(r.step) >= 0 ? r.step : "–"],
    ["objective", multi ? "Pareto rank" : st.sweep.objective_metric,
     r => multi ? (r.pareto_rank >= 0 ? (r.pareto_rank ? r.pareto_rank + 1 : "front") : "–")
                : (r.has_objective ? fmt(r.objective) : "–")],
    ...metrics.map(m => ["metric:" + m, m, r => fmt((r.last_metrics || {})[m])]),
    ["runtime", "runtime", r => duration(r.runtime_s)], ["", "GPUs", r => r.gpus || "–"]];
  const thead = $("#trial-table thead"), tbody = $("#trial-table tbody");
  thead.replaceChildren(el("tr", {}, cols.map(([key, label]) => el("th", {onclick: () => {
    if (!key) return;
    if (q.sort === key) q.desc = !q.desc; else { q.sort = key; q.desc = false; }
    table(st);
  }}, label + (q.sort === key ? (q.desc ? " ▼" : " ▲") : "")))));
  tbody.replaceChildren(...rows.map(r => {
    const tr = el("tr", {"data-trial": r.id, class: st.selected === Number(r.id) ? "selected" : "",
                         onclick: () => { st.selected = Number(r.id); table(st); drawCurves(st); }},
      cols.map(([key, label, f], i) => {
        const v = f(r);
        return el("td", {class: typeof v === "string" && !/[a-z]/i.test(v) || typeof v === "number" ? "num" : ""},
                  i === 0 ? el("a", {href: "#trial/" + r.id, title: "open the trial"}, v) : v);
      }));
    return tr;
  }));
  const last = Math.min(q.offset + q.limit, page.total);
  $("#pager").replaceChildren(
    el("button", {onclick: () => { q.offset = Math.max(0, q.offset - q.limit); table(st); }}, "‹ previous"),
    el("span", {id: "page-info"}, `${page.total ? q.offset + 1 : 0}–${last} of ${page.total}`),
    el("button", {onclick: () => { if (last < page.total) { q.offset += q.limit; table(st); } }}, "next ›"));
}

async function drawCharts(st) {
  await Promise.all([drawCurves(st), drawObjective(st), drawParallel(st), drawImportance(st),
                     drawTimeline(st)].map(p => p.catch(e => console.error(e))));
}

const COLORS = {RUNNING: "#16a34a", COMPLETED: "#2563eb", STOPPED: "#9ca3af"};

async function drawCurves(st) {
  const data = await api(`api/sweeps/${st.id}/curves?max=40&points=200`);
  let curves = data.curves;
  if (st.selected && !curves.some(c => Number(c.trial) === st.selected)) {
    const one = await api(`api/sweeps/${st.id}/curves?trials=${st.selected}&points=200`);
    curves = curves.concat(one.curves);
  }
  const datasets = curves.map(c => {
    const state = short(c.state), selected = Number(c.trial) === st.selected;
    return {label: `trial ${c.trial}`, data: c.points.map(([x, y]) => ({x, y})),
            borderColor: selected ? "#ea580c" : (COLORS[state] || "#6b7280"),
            borderWidth: selected ? 3 : 1, borderDash: state === "STOPPED" ? [4, 3] : [],
            pointRadius: c.points.map((p, i) => state === "STOPPED" && i === c.points.length - 1 ? 4 : 0),
            pointStyle: "crossRot", showLine: true, order: selected ? 0 : 1};
  });
  chart("chart-curves", {type: "scatter", data: {datasets},
    options: {plugins: {legend: {display: false}},
              scales: {x: {title: {display: true, text: "step"}}, y: {title: {display: true, text: data.metric}}}}});
  $("#chart-curves-note").textContent = `${curves.length} trial(s): the best finished and the running; dashed: stopped early (×); orange: the selected trial`;
}

async function drawObjective(st) {
  const data = await api(`api/sweeps/${st.id}/objective`);
  if (data.pareto) {
    drawPareto(st, data);
    const objectives = data.objectives.map(o => o.metric).join(", ");
    chart("chart-objective", {type: "scatter", data: {datasets: [
      {label: data.objectives[0].metric, data: data.pareto.map(p => ({x: p[1], y: p[2][0]})), backgroundColor: "#2563eb"}]},
      options: {scales: {x: {title: {display: true, text: "trial number"}}, y: {title: {display: true, text: data.objectives[0].metric}}}}});
    $("#chart-objective-note").textContent = `objectives: ${objectives}`;
    return;
  }
  $("#chart-pareto-note").textContent = "one objective: no Pareto front";
  chart("chart-pareto", {type: "scatter", data: {datasets: []}});
  chart("chart-objective", {type: "scatter", data: {datasets: [
    {label: data.metric, data: data.points.map(p => ({x: p[0], y: p[1]})),
     backgroundColor: data.points.map(p => short(p[3]) === "STOPPED" ? "#9ca3af" : "#2563eb")},
    {label: "best so far", data: data.best.map(p => ({x: p[0], y: p[1]})), showLine: true,
     stepped: true, borderColor: "#ea580c", pointRadius: 0}]},
    options: {scales: {x: {title: {display: true, text: "trial number"}}, y: {title: {display: true, text: data.metric}}}}});
  $("#chart-objective-note").textContent = `${data.total} finished trial(s) (${data.direction})` +
    (data.points.length < data.total ? `; shown: each new best and ${data.points.length} in all, evenly spread` : "");
}

function drawPareto(st, data) {
  const [a, b] = data.objectives;
  const front = data.pareto.filter(p => p[3] === 0), rest = data.pareto.filter(p => p[3] !== 0);
  chart("chart-pareto", {type: "scatter", data: {datasets: [
    {label: "completed", data: rest.map(p => ({x: p[2][0], y: p[2][1]})), backgroundColor: "#9ca3af"},
    {label: "Pareto front", data: front.map(p => ({x: p[2][0], y: p[2][1]})), backgroundColor: "#ea580c",
     pointRadius: 5}]},
    options: {scales: {x: {title: {display: true, text: `${a.metric} (${a.direction})`}},
                       y: {title: {display: true, text: `${b.metric} (${b.direction})`}}}}});
  $("#chart-pareto-note").textContent = `${front.length} trial(s) on the front of ${data.total}` +
    (data.pareto.length < data.total ? ` (${data.pareto.length} shown: the front and an even spread)` : "");
}

async function drawImportance(st) {
  const data = await api(`api/sweeps/${st.id}/importance`);
  chart("chart-importance", {type: "bar", data: {labels: data.importance.map(i => i.param),
    datasets: [{label: "share of variance", data: data.importance.map(i => i.share), backgroundColor: "#2563eb"}]},
    options: {indexAxis: "y", plugins: {legend: {display: false}}, scales: {x: {min: 0, max: 1}}}});
  $("#chart-importance-note").textContent = data.importance.length
    ? `main effects over ${data.trials} trial(s)` + (data.sampled < data.trials ? ` (an even spread of ${data.sampled})` : "") +
      (data.step >= 0 ? `, compared at step ${data.step}` : "")
    : "needs at least 5 trials with a value";
}

// A canvas sized to its box at the screen's pixel density, and its 2D context in CSS pixels.
function sharp(canvas) {
  const box = canvas.parentElement.getBoundingClientRect();
  const dpr = window.devicePixelRatio || 1;
  canvas.width = box.width * dpr; canvas.height = box.height * dpr;
  canvas.style.width = box.width + "px"; canvas.style.height = box.height + "px";
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  return {box, g};
}

// Parallel coordinates on a canvas: an axis per parameter (log axes for log parameters) and the
// objective last; dragging on an axis filters the table to that range.
async function drawParallel(st) {
  const data = await api(`api/sweeps/${st.id}/parallel`);
  const canvas = $("#chart-parallel");
  const {box, g} = sharp(canvas);
  const W = box.width, H = box.height, top = 28, bottom = H - 28;
  const objs = data.trials.map(t => t[1]);
  const axes = data.axes.map((a, i) => Object.assign({}, a, {index: i}));
  axes.push({name: data.metric, type: "float", low: Math.min(...objs), high: Math.max(...objs), objective: true});
  const x = i => 40 + i * (W - 80) / Math.max(1, axes.length - 1);
  const unit = (a, v) => {
    if (v === null || v === undefined) return null;
    if (a.type === "categorical") return a.choices.length > 1 ? v / (a.choices.length - 1) : 0.5;
    const lo = a.log ? Math.log(a.low) : a.low, hi = a.log ? Math.log(a.high) : a.high;
    const w = a.log ? Math.log(v) : v;
    return hi > lo ? (w - lo) / (hi - lo) : 0.5;
  };
  const y = u => bottom - u * (bottom - top);
  const inRanges = t => axes.every(a => {
    const r = st.query.ranges[a.name];
    if (!r || a.objective) return true;
    const v = t[3][a.index];
    return v !== null && v >= r[0] && v <= r[1];
  });
  g.clearRect(0, 0, W, H);
  const lo = Math.min(...objs), hi = Math.max(...objs), maximize = data.direction === "maximize";
  for (const t of data.trials) {
    const good = hi > lo ? (t[1] - lo) / (hi - lo) : 0.5;
    const q = maximize ? good : 1 - good;
    const on = inRanges(t);
    g.strokeStyle = on ? `hsla(${220 - 200 * q}, 80%, 45%, 0.55)` : "rgba(156,163,175,0.15)";
    g.beginPath();
    axes.forEach((a, i) => {
      const u = unit(a, a.objective ? t[1] : t[3][a.index]);
      if (u === null) return;
      i ? g.lineTo(x(i), y(u)) : g.moveTo(x(i), y(u));
    });
    g.stroke();
  }
  g.fillStyle = "#1d232a"; g.strokeStyle = "#1d232a"; g.font = "11px system-ui"; g.textAlign = "center";
  axes.forEach((a, i) => {
    g.beginPath(); g.moveTo(x(i), top); g.lineTo(x(i), bottom); g.stroke();
    g.fillText(a.name + (a.log ? " (log)" : ""), x(i), top - 14);
    const ends = a.type === "categorical" ? [a.choices[0], a.choices[a.choices.length - 1]] : [fmt(a.low), fmt(a.high)];
    g.fillText(ends[1], x(i), top - 3); g.fillText(ends[0], x(i), bottom + 12);
    const r = st.query.ranges[a.name];
    if (r && !a.objective) {
      g.fillStyle = "rgba(37,99,235,0.25)";
      const u0 = unit(a, r[0]), u1 = unit(a, r[1]);
      g.fillRect(x(i) - 6, y(u1), 12, y(u0) - y(u1));
      g.fillStyle = "#1d232a";
    }
  });
  // Brushing: a drag along an axis sets that parameter's range.
  canvas.onmousedown = ev => {
    const rect = canvas.getBoundingClientRect();
    const px = ev.clientX - rect.left, py0 = ev.clientY - rect.top;
    const i = axes.findIndex((a, k) => Math.abs(x(k) - px) < 14);
    if (i < 0 || axes[i].objective || axes[i].type === "categorical") return;
    canvas.onmouseup = up => {
      const py1 = up.clientY - rect.top;
      const a = axes[i];
      const back = py => {
        const u = Math.min(1, Math.max(0, (bottom - py) / (bottom - top)));
        const l = a.log ? Math.log(a.low) : a.low, h = a.log ? Math.log(a.high) : a.high;
        const w = l + u * (h - l);
        return a.log ? Math.exp(w) : w;
      };
      if (Math.abs(py1 - py0) < 4) delete st.query.ranges[a.name];
      else st.query.ranges[a.name] = [back(Math.max(py0, py1)), back(Math.min(py0, py1))].sort((p, q) => p - q);
      st.query.offset = 0;
      canvas.onmouseup = null;
      filters(st); table(st); drawParallel(st);
    };
  };
  $("#chart-parallel-note").textContent = `${data.total} finished trial(s), coloured by ${data.metric}` +
    (data.trials.length < data.total ? `; ${data.trials.length} drawn: the best half and an even spread of the rest` : "");
}

// Which GPU (node and index) ran which trial, when.
async function drawTimeline(st) {
  const data = await api(`api/sweeps/${st.id}/timeline`);
  const canvas = $("#chart-timeline");
  const {box, g} = sharp(canvas);
  g.clearRect(0, 0, box.width, box.height);
  const lanes = [...new Set(data.bars.map(b => b.lane))].sort();
  if (!lanes.length) {
    $("#chart-timeline-note").textContent = "no trial held a GPU";
    g.fillStyle = "#6b7280"; g.font = "12px system-ui"; g.fillText("no GPU trials", 20, 30);
    return;
  }
  const t0 = Math.min(...data.bars.map(b => b.start)), t1 = Math.max(data.now, ...data.bars.map(b => b.end));
  const left = 70, right = box.width - 10, laneH = Math.min(28, (box.height - 30) / lanes.length);
  const x = t => left + (t - t0) / Math.max(1e-9, t1 - t0) * (right - left);
  g.font = "11px system-ui";
  lanes.forEach((lane, i) => { g.fillStyle = "#1d232a"; g.fillText(lane, 4, 20 + i * laneH + laneH / 2); });
  for (const b of data.bars) {
    const i = lanes.indexOf(b.lane);
    g.fillStyle = COLORS[short(b.state)] || "#6b7280";
    const w = Math.max(1, x(b.end) - x(b.start));
    g.fillRect(x(b.start), 10 + i * laneH + 2, w, laneH - 4);
    if (w > 24) { g.fillStyle = "#fff"; g.fillText("#" + b.number, x(b.start) + 3, 10 + i * laneH + laneH / 2 + 4); }
  }
  $("#chart-timeline-note").textContent = `${data.bars.length} trial segment(s) on ${lanes.length} GPU(s) over ${duration(t1 - t0)}`;
}

// --- one trial

async function trialPage(id) {
  const main = $("#main");
  main.replaceChildren(el("h1", {id: "trial-title"}, `Trial ${id}`),
    el("div", {class: "grid"},
      el("div", {class: "card", id: "trial-info"}),
      el("div", {class: "card"}, el("h2", {}, "Curves"),
         el("div", {class: "chart-box"}, el("canvas", {id: "chart-trial"})))),
    el("h2", {}, "History"), el("table", {id: "history"}),
    el("h2", {}, "Output"), el("div", {class: "toolbar"},
      el("label", {}, el("input", {type: "radio", name: "stream", value: "stdout", checked: "", onchange: () => log()}), " stdout"),
      el("label", {}, el("input", {type: "radio", name: "stream", value: "stderr", onchange: () => log()}), " stderr")),
    el("pre", {class: "log", id: "log"}));
  let data = null;
  const load = async () => {
    data = await api(`api/trials/${id}`);
    const t = data.trial;
    crumbs(el("a", {href: "#"}, "sweeps"), el("a", {href: "#sweep/" + data.sweep.id}, `${data.sweep.id} ${data.sweep.name}`),
           el("a", {href: "#trial/" + id}, `trial ${id}`));
    $("#trial-title").textContent = `Trial ${t.id} (#${t.number}) of sweep ${data.sweep.id}`;
    const rows = [["state", stateTag(t.state)], ["message", t.message || "–"],
      ...Object.entries(t.params || {}).sort().map(([k, v]) => [k, paramText(v)]),
      ...Object.entries(t.last_metrics || {}).sort().map(([k, v]) => [k, fmt(v)]),
      ["step", t.step], ["runtime", duration(t.runtime_s)], ["segment", t.segment],
      ["where", t.backend_id || "–"], ["GPUs", t.gpus || "–"], ["directory", t.trial_dir]];
    $("#trial-info").replaceChildren(el("table", {}, el("tbody", {}, rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))))));
    $("#history").replaceChildren(el("thead", {}, el("tr", {}, ["time", "state", "segment", "where", "why"].map(h => el("th", {}, h)))),
      el("tbody", {}, data.history.map(h => el("tr", {}, el("td", {}, new Date(h.time * 1000).toLocaleString()),
        el("td", {}, stateTag(h.state)), el("td", {class: "num"}, h.segment), el("td", {}, h.backend_id || "–"), el("td", {}, h.message)))));
    const palette = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2"];
    chart("chart-trial", {type: "scatter", data: {datasets: Object.entries(data.curves).map(([m, pts], i) => ({
      label: m, data: pts.map(([x, y]) => ({x, y})), showLine: true, pointRadius: 1,
      borderColor: palette[i % palette.length], backgroundColor: palette[i % palette.length]}))},
      options: {scales: {x: {title: {display: true, text: "step"}}}}});
  };
  const log = async () => {
    const stream = (document.querySelector("input[name=stream]:checked") || {}).value || "stdout";
    try {
      const r = await api(`api/trials/${id}/log?stream=${stream}&bytes=16384`);
      const pre = $("#log"), bottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.textContent = (r.truncated ? "…\n" : "") + (r.data || "(nothing yet)");
      if (bottom) pre.scrollTop = pre.scrollHeight;
    } catch (e) { $("#log").textContent = e.message; }
  };
  await load();
  await log();
  live(`api/sweeps/${data.sweep.id}/events?since=now`, e => {
    if (!e || (e.trial && Number(e.trial.id) === Number(id))) load().catch(() => {});
  }, async () => ended(await api(`api/sweeps/${data.sweep.id}`)));
  timers.push(setInterval(() => { if (short(data.trial.state) === "RUNNING") log(); }, 1000));
}

// --- routing

async function route() {
  reset();
  const [page, id] = location.hash.replace(/^#/, "").split("/");
  try {
    if (page === "sweep" && id) await sweepPage(id);
    else if (page === "trial" && id) await trialPage(id);
    else await sweepsPage();
  } catch (e) {
    $("#main").replaceChildren(el("p", {class: "error"}, e.message));
  }
}

(async () => {
  const session = await api("api/session");
  csrf = session.csrf;
  $("#user").textContent = session.user;
  $("#logout").addEventListener("click", async () => {
    try { await post("logout"); } catch (e) { /* gone already */ }
    if (source) source.close();
    $("#main").replaceChildren(el("p", {}, "Logged out. Run `hpo dashboard` for a new link."));
  });
  window.addEventListener("hashchange", route);
  await route();
})();

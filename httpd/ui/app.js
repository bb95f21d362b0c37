"use strict";
const $ = id => document.getElementById(id);
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  for (const c of kids) if (c != null) e.append(c);
  return e;
}
const SVG = "http://www.w3.org/2000/svg";
function sv(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  for (const c of kids) if (c != null) e.append(c);
  return e;
}
// Only http(s) URLs ever become hrefs; everything else is plain text.
const link = (url, text) => /^https?:\/\//i.test(url) ? el("a", {href: url, rel: "noopener noreferrer"}, text || url) : el("span", null, text || url || "—");
const isTime = s => typeof s === "string" && /^\d{4}-\d\d-\d\d/.test(s) && !isNaN(new Date(s));
function fmtTime(s) {
  if (s == null || s === "") return "—";
  return isTime(s) ? el("time", {datetime: s}, new Date(s).toLocaleString()) : String(s);
}
const never = s => s ? fmtTime(s) : "never";
// ago shows how old a timestamp is, the full time in its tooltip.
function ago(s) {
  if (!isTime(s)) return "—";
  const sec = Math.max(0, (Date.now() - new Date(s)) / 1000);
  const txt = sec < 2 ? "just now" : sec < 90 ? Math.round(sec) + " s ago" : sec < 5400 ? Math.round(sec / 60) + " min ago" : new Date(s).toLocaleString();
  return el("time", {datetime: s, title: new Date(s).toLocaleString()}, txt);
}
const show = (box, ...nodes) => box.replaceChildren(...nodes);
const errNode = msg => el("p", {class: "err", role: "alert"}, msg);
const dash = v => v == null || v === "" ? "—" : v;
// dl builds a definition list from [term, value, id?] rows.
function dl(box, rows) {
  box.replaceChildren();
  for (const [k, v, id] of rows) box.append(el("dt", null, k), el("dd", id ? {id} : null, dash(v)));
  return box;
}

/* The API key (or the node's admin token) lives in this tab's
   sessionStorage only and goes with every API call as a bearer token. */
const KEY = "linkraft.apiKey";
let apiKey = "";
try { apiKey = sessionStorage.getItem(KEY) || ""; } catch (_) {}
// call fetches an API path with the key; a refusal throws an Error whose
// message says what to do and whose status is the HTTP status.
async function call(path, opts = {}) {
  opts.headers = Object.assign({Accept: "application/json"}, opts.headers);
  if (apiKey) opts.headers.Authorization = "Bearer " + apiKey;
  opts.cache = "no-store";
  let res, data = null;
  try { res = await fetch(path, opts); } catch (e) { throw new Error("Network error: " + e.message); }
  if ((res.headers.get("Content-Type") || "").includes("json")) try { data = await res.json(); } catch (_) {}
  if (!res.ok) {
    let msg = (data && (data.detail || data.title || data.error)) || "HTTP " + res.status + " " + res.statusText;
    if (res.status === 401) {
      msg = (apiKey ? "The API key was refused (unknown, revoked or expired)" : "This needs an API key") + ": enter a valid API key above.";
    } else if (res.status === 403) {
      const m = /lacks the (\S+) scope/.exec(msg);
      if (m) msg = "This key lacks the " + m[1] + " scope.";
    } else if (res.status === 429) {
      const ra = res.headers.get("Retry-After");
      msg += ra ? " Retry after " + ra + (/^\d+$/.test(ra) ? " s." : ".") : " Please retry later.";
    }
    throw Object.assign(new Error(msg), {status: res.status});
  }
  return {data, res};
}
function onSubmit(id, fn) {
  $(id).addEventListener("submit", async ev => {
    ev.preventDefault();
    const b = ev.target.querySelector("button[type=submit]");
    b.disabled = true;
    try { await fn(); } finally { b.disabled = false; }
  });
}
const linkHash = code => "#/link/" + encodeURIComponent(code);
// confirmed is a button that asks before it acts: a click shows the
// question with "Yes" and "Cancel", and only "Yes" runs act.
function confirmed(verb, what, act) {
  const box = el("span", {class: "cf"}), b = el("button", {type: "button", class: "sec", "aria-label": verb + " " + what}, verb);
  const reset = () => box.replaceChildren(b);
  b.addEventListener("click", () => {
    const yes = el("button", {type: "button", class: "danger"}, "Yes, " + verb.toLowerCase()), no = el("button", {type: "button", class: "sec"}, "Cancel");
    yes.addEventListener("click", async () => {
      yes.disabled = no.disabled = true;
      try { await act(); } finally { reset(); }
    });
    no.addEventListener("click", () => { reset(); b.focus(); });
    box.replaceChildren(el("span", null, verb + " " + what + "?"), yes, no);
    no.focus();
  });
  reset();
  return box;
}

/* Pollers run fn now and then every ms while on and the tab is visible;
   a call that arrives while fn runs is queued, never run twice at once. */
const pollers = [];
function poller(fn, ms) {
  let on = false, busy = false, again = false, timer = null;
  const p = {
    async tick() {
      clearTimeout(timer);
      if (!on) return;
      if (busy) { again = true; return; }
      busy = true;
      try { await fn(); } catch (e) { console.warn(e); }
      busy = false;
      if (again) { again = false; return p.tick(); }
      if (on && !document.hidden) timer = setTimeout(p.tick, ms);
    },
    start() { on = true; p.tick(); },
    stop() { on = false; clearTimeout(timer); },
    get on() { return on; },
  };
  pollers.push(p);
  return p;
}
// A hidden tab lets its pending timers lapse; showing it again refreshes.
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) for (const p of pollers) if (p.on) p.tick();
});

/* Shorten: a created (or reused) link opens its link page. */
let flash = null;
onSubmit("f-s", async () => {
  const out = $("s-out"), v = id => $(id).value.trim(), body = {original_url: v("s-url")};
  const code = v("s-code"), ws = v("s-ws"), exp = v("s-exp"), st = $("s-strat").value;
  if (code) body.custom_code = code;
  if (ws) body.workspace = ws;
  if (exp) {
    if (!/^\d+$/.test(exp) || +exp < 1) { show(out, errNode("Expiry must be a whole number of hours (1 or more).")); return $("s-exp").focus(); }
    body.expires_in_hours = parseInt(exp, 10);
  }
  if ($("s-dedupe").checked) body.dedupe = true;
  if (st) body.strategy = st;
  try {
    const {data: d, res} = await call("/api/v1/urls", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    show(out);
    flash = d.existing || res.status === 200 ? "An existing link for this URL was reused." : "Short link created.";
    go(linkHash(d.short_code));
  } catch (e) { show(out, errNode(e.message)); }
});

/* Look up: accepts a bare code or a full short URL (last path segment). */
function parseCode(v) {
  v = v.trim();
  try { v = new URL(v).pathname; } catch (_) {}
  v = v.split(/[?#]/)[0].split("/").filter(Boolean).pop() || "";
  try { v = decodeURIComponent(v); } catch (_) {}
  return v;
}
onSubmit("f-st", () => {
  const code = parseCode($("st-code").value);
  if (!code) return show($("st-out"), errNode("Enter a short code."));
  show($("st-out"));
  go(linkHash(code));
});

/* Links: every link the key may see (or one workspace's), newest first,
   a page at a time. */
const LS = {cursor: null, seq: 0};
async function loadLinks(reset) {
  const list = $("ls-list"), more = $("ls-more"), msg = $("ls-msg"), ws = $("ls-ws").value.trim(), seq = ++LS.seq;
  const p = {limit: 20};
  if (ws) p.workspace = ws;
  if (!reset && LS.cursor) p.cursor = LS.cursor;
  more.disabled = true;
  try {
    const {data} = await call("/api/v1/urls?" + new URLSearchParams(p));
    if (seq !== LS.seq) return; // a newer load started meanwhile
    if (reset) list.replaceChildren();
    for (const l of data.links || []) list.append(linkItem(l));
    LS.cursor = data.next_cursor || null;
    more.hidden = !LS.cursor;
    show(msg, list.children.length ? "" : el("p", null, ws ? "No links in this workspace." : "No links yet."));
  } catch (e) {
    if (seq !== LS.seq) return;
    if (reset) { list.replaceChildren(); more.hidden = true; }
    show(msg, errNode(e.message));
  }
  more.disabled = false;
}
function linkItem(l) {
  const code = l.short_code, li = el("li", {"data-code": code});
  li.append(el("div", {class: "lh"}, el("a", {href: linkHash(code), "aria-label": "Link page for " + code}, code), " ", link(l.short_url)),
    el("small", null, "→ ", link(l.original_url)),
    el("small", null, "workspace " + l.workspace + " · " + plural(l.click_count ?? 0) + " · created ", fmtTime(l.created_at),
      l.expires_at ? " · expires " : null, l.expires_at ? fmtTime(l.expires_at) : null),
    confirmed("Delete", "link " + code, async () => {
      try {
        await call("/api/v1/urls/" + encodeURIComponent(code), {method: "DELETE"});
        li.remove();
        show($("ls-msg"), el("p", {class: "okc"}, "Deleted link " + code + "."));
      } catch (e) { show($("ls-msg"), errNode(e.message)); }
    }));
  return li;
}
onSubmit("f-ls", () => loadLinks(true));
$("ls-more").addEventListener("click", () => loadLinks(false));

/* Keys: an admin lists, creates and revokes API keys. */
async function loadKeys() {
  const list = $("kl-list"), msg = $("kl-msg");
  try {
    const {data} = await call("/admin/keys");
    const keys = (data.keys || []).sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)));
    list.replaceChildren(...keys.map(keyItem));
    show(msg, keys.length ? "" : el("p", null, "No keys yet."));
    $("k-admin").hidden = false;
  } catch (e) {
    list.replaceChildren();
    $("k-admin").hidden = true;
    show(msg, e.status === 403 ? el("p", null, e.message + " Only an admin key can see, create and revoke keys.") : errNode(e.message));
  }
}
function keyItem(k) {
  const li = el("li", {"data-id": k.id}), name = k.name || "(no name)";
  const expired = isTime(k.expires_at) && new Date(k.expires_at) <= Date.now();
  li.append(el("div", {class: "lh"}, el("strong", null, name), " ", el("code", null, k.id), expired ? el("span", {class: "err"}, " expired") : null),
    el("small", null, "scopes " + (k.scopes || []).join(", ") + " · workspaces " + (k.workspaces || []).join(", ")),
    el("small", null, "created ", fmtTime(k.created_at), k.created_by ? " by " + k.created_by : null, " · expires ", never(k.expires_at)),
    confirmed("Revoke", "key " + name + " (" + k.id + ")", async () => {
      try {
        await call("/admin/keys/" + encodeURIComponent(k.id), {method: "DELETE"});
        li.remove();
        show($("kl-msg"), el("p", {class: "okc"}, "Revoked key " + name + " (" + k.id + ")."));
      } catch (e) { show($("kl-msg"), errNode(e.message)); }
    }));
  return li;
}
onSubmit("f-k", async () => {
  const out = $("k-out"), days = $("k-exp").value.trim();
  const body = {name: $("k-name").value.trim(),
    scopes: [...document.querySelectorAll("#f-k [name=scope]:checked")].map(c => c.value),
    workspaces: $("k-ws").value.split(",").map(w => w.trim()).filter(Boolean)};
  if (!body.scopes.length) return show(out, errNode("Choose at least one scope."));
  if (!body.workspaces.length) { show(out, errNode("Name the workspaces the key may use, or * for all.")); return $("k-ws").focus(); }
  if (days) {
    if (!/^\d+$/.test(days) || +days < 1) { show(out, errNode("Expiry must be a whole number of days (1 or more).")); return $("k-exp").focus(); }
    body.expires_at = new Date(Date.now() + days * 86400000).toISOString();
  }
  hideSecret();
  try {
    const {data: k} = await call("/admin/keys", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    show(out);
    $("k-secret").value = k.key;
    $("k-new").hidden = false;
    $("f-k").reset();
    await loadKeys();
    $("k-secret").focus(); // scrolls the secret into view
  } catch (e) { show(out, errNode(e.message)); }
});
// The secret of a new key is shown until the view is left or redrawn.
function hideSecret() {
  $("k-new").hidden = true;
  $("k-secret").value = "";
  show($("k-copied"));
}

/* Link page: the link, its QR code and its clicks over time. */
const LP = {code: null, iv: "hour", seq: 0, series: null};
const RANGE = {hour: "the last 24 hours", day: "the last 30 days"};
// copyFrom copies a read-only field's text and says so in out.
const copyTimers = new Map();
async function copyFrom(inp, out) {
  const text = inp.value;
  let ok = false;
  try { await navigator.clipboard.writeText(text); ok = true; } catch (_) {
    // No clipboard API (plain http on another host) or no permission:
    // select the text so the user can copy it, and try the legacy command.
    inp.focus(); inp.select();
    try { ok = document.execCommand("copy"); } catch (_) {}
  }
  out.className = ok ? "okc" : "";
  out.textContent = ok ? "Copied to the clipboard." : "Selected: press Ctrl+C (⌘C) to copy.";
  clearTimeout(copyTimers.get(out));
  copyTimers.set(out, setTimeout(() => { out.textContent = ""; }, 3000));
}
$("l-copy").addEventListener("click", () => copyFrom($("l-short"), $("l-copied")));
$("k-copy").addEventListener("click", () => copyFrom($("k-secret"), $("k-copied")));
$("k-secret").addEventListener("focus", e => e.target.select());
$("l-short").addEventListener("focus", e => e.target.select());

function openLink(code) {
  if (LP.code !== code) {
    LP.code = code; LP.series = null;
    $("l-body").hidden = $("l-stats").hidden = true;
    $("l-qr").removeAttribute("src");
    show($("l-chart")); show($("l-sum")); show($("l-copied"));
    show($("l-msg"), el("p", null, "Loading…"));
  }
  $("h-l").textContent = "Link " + code;
  document.title = code + " · linkraft";
}
async function refreshLink() {
  const code = LP.code, iv = LP.iv, seq = ++LP.seq, enc = encodeURIComponent(code);
  try {
    const [{data: l}, {data: st}] = await Promise.all([
      call("/api/v1/urls/" + enc), call("/api/v1/urls/" + enc + "/stats?interval=" + iv)]);
    if (seq !== LP.seq) return; // the code or interval changed meanwhile
    $("l-short").value = l.short_url;
    const open = $("l-open");
    /^https?:\/\//i.test(l.short_url) ? open.setAttribute("href", l.short_url) : open.removeAttribute("href");
    const qr = "/api/v1/urls/" + enc + "/qr?size=352";
    if ($("l-qr").getAttribute("src") !== qr) {
      $("l-qr").src = qr;
      $("l-qr").alt = "QR code for " + l.short_url;
    }
    dl($("l-info"), [["Original URL", link(l.original_url)], ["Created", fmtTime(l.created_at)],
      ["Total clicks", String(st.clicks ?? l.click_count ?? 0), "l-clicks"], ["Last accessed", never(st.last_accessed_at)],
      ["Workspace", l.workspace], ["Expires", never(l.expires_at)]]);
    show($("l-msg"), flash ? el("p", {class: "okc"}, flash) : "");
    flash = null;
    $("l-body").hidden = $("l-stats").hidden = false;
    LP.series = st;
    drawChart();
    $("l-upd").textContent = "Updated " + new Date().toLocaleTimeString() + "; refreshes every 5 seconds while this tab is visible.";
  } catch (e) {
    if (seq !== LP.seq) return;
    // Retrying cannot help a missing link or a refused key; a new key
    // restarts the page.
    if ([401, 403, 404, 410].includes(e.status)) { $("l-body").hidden = $("l-stats").hidden = true; linkPoll.stop(); }
    show($("l-msg"), errNode(e.message));
  }
}
const linkPoll = poller(refreshLink, 5000);
for (const b of document.querySelectorAll("[data-iv]")) b.addEventListener("click", () => {
  LP.iv = b.dataset.iv;
  for (const o of document.querySelectorAll("[data-iv]")) o.setAttribute("aria-pressed", String(o === b));
  linkPoll.tick();
});
$("l-refresh").addEventListener("click", () => linkPoll.tick());

// niceMax is the top of the y axis: n itself up to 10, above that the
// smallest 1, 2 or 5 times a power of ten at or above n.
function niceMax(n) {
  if (n <= 10) return Math.max(1, n);
  const mag = Math.pow(10, Math.floor(Math.log10(n)));
  for (const f of [1, 2, 5, 10]) if (f * mag >= n) return f * mag;
}
const hourFmt = {hour: "2-digit", minute: "2-digit"}, dayFmt = {month: "short", day: "numeric"};
const plural = n => n === 1 ? "1 click" : n.toLocaleString() + " clicks";
// drawChart renders the last stats answer as SVG bars at the box's width,
// so labels keep their size on a phone.
function drawChart() {
  const box = $("l-chart"), st = LP.series;
  if (!st) return;
  const pts = st.series || [], n = pts.length, hourly = st.interval === "hour";
  const top = niceMax(pts.reduce((m, p) => Math.max(m, p.clicks), 0)), y = v => T + ph - v / top * ph;
  // The left margin fits the widest y label (the top one).
  const W = Math.max(280, Math.round(box.clientWidth || 600)), H = 220, L = 14 + 7 * top.toLocaleString().length, R = 8, T = 10, B = 40;
  const pw = W - L - R, ph = H - T - B;
  const total = pts.reduce((s, p) => s + p.clicks, 0);
  let peak = null;
  for (const p of pts) if (p.clicks > 0 && (!peak || p.clicks > peak.clicks)) peak = p;
  const when = p => new Date(p.start).toLocaleString([], hourly ? {weekday: "short", ...dayFmt, ...hourFmt} : {weekday: "short", ...dayFmt, year: "numeric"});
  const sum = total ? plural(total) + " in " + RANGE[st.interval] + "; busiest " + (hourly ? "hour" : "day") + " " + when(peak) + " with " + plural(peak.clicks) + "."
    : "No clicks in " + RANGE[st.interval] + ".";
  show($("l-sum"), sum);
  const svg = sv("svg", {viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img", "aria-label": "Clicks per " + st.interval + " over " + RANGE[st.interval] + ". " + sum});
  // Gridlines at 0, half and the top; the half line only when it is whole.
  for (const v of [0, top / 2, top]) {
    if (v !== Math.floor(v)) continue;
    svg.append(sv("line", {class: v ? "grid" : "axis", x1: L, x2: W - R, y1: y(v), y2: y(v)}),
      sv("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, v.toLocaleString()));
  }
  const band = n ? pw / n : pw, bw = Math.max(1, band * 0.78);
  const every = Math.max(1, Math.ceil(n / Math.max(1, Math.floor(pw / (hourly ? 52 : 60)))));
  pts.forEach((p, i) => {
    const x = L + i * band;
    // A bar of at least 2 px for any click, so one huge bar cannot hide
    // the small ones next to it.
    const h = p.clicks ? Math.max(2, p.clicks / top * ph) : 0;
    svg.append(sv("g", {class: "bar", "data-start": p.start, "data-clicks": p.clicks},
      sv("title", null, when(p) + ": " + plural(p.clicks)),
      sv("rect", {class: "h", x: x, y: T, width: band, height: ph}),
      sv("rect", {class: "b", x: x + (band - bw) / 2, y: T + ph - h, width: bw, height: h})));
    if (i % every === 0) {
      const d = new Date(p.start);
      svg.append(sv("text", {x: x + band / 2, y: H - B + 16, "text-anchor": "middle"}, hourly ? d.toLocaleTimeString([], {hour: "numeric"}) : d.toLocaleDateString([], dayFmt)));
      if (hourly && (i === 0 || d.getHours() < (new Date(pts[i - every].start)).getHours()))
        svg.append(sv("text", {x: x + band / 2, y: H - B + 30, "text-anchor": "middle"}, d.toLocaleDateString([], dayFmt)));
    }
  });
  if (!total) svg.append(sv("text", {class: "empty", x: L + pw / 2, y: T + ph / 2, "text-anchor": "middle"}, "No clicks yet"));
  show(box, svg);
}
if (window.ResizeObserver) {
  let lastW = 0;
  new ResizeObserver(() => { const w = $("l-chart").clientWidth; if (w && w !== lastW) { lastW = w; drawChart(); } }).observe($("l-chart"));
}

/* Cluster: the leader's view of every server (an admin key's). */
async function loadCluster() {
  const out = $("c-out");
  try {
    const {data: c} = await call("/admin/cluster");
    const row = (tag, cells, attrs) => el("tr", attrs, ...cells.map(v => el(tag, tag === "th" ? {scope: "col"} : typeof v === "number" ? {class: "n"} : null, v)));
    // Only the leader and the answering node know their roles; a reachable
    // voter that is not the leader follows it.
    // A read replica is a Raft non-voter (--read-replica, or joined with non_voter).
    const replica = s => s.suffrage === "Nonvoter";
    const role = s => s.leader ? "leader" : s.id === c.node_id ? c.role : !s.reachable ? "—" : s.suffrage === "Voter" ? "follower" : String(s.suffrage || "—").toLowerCase();
    const tb = el("tbody", null, ...(c.servers || []).map(s => row("td", [
      el("span", null, s.id, s.leader ? " " : null, s.leader ? el("span", {class: "badge", title: "Raft leader"}, "★ leader") : null,
        replica(s) ? " " : null, replica(s) ? el("span", {class: "badge", title: "read replica: a Raft non-voter, never counted towards the quorum"}, "replica") : null), role(s),
      dash(s.http_addr), s.raft_addr, s.reachable ? "yes" : el("span", {class: "err"}, "no"), s.applied_index ?? "—", s.replication_lag ?? "—", ago(s.last_contact)],
      {"data-id": s.id, "data-leader": String(!!s.leader), "data-reachable": String(!!s.reachable), "data-suffrage": String(s.suffrage || "")})));
    show(out,
      dl(el("dl"), [["Answered by", c.node_id + " (" + c.role + ")"], ["Leader", (c.leader || "none") + (c.leader_raft_addr ? " (" + c.leader_raft_addr + ")" : "")],
        ["Term", c.term], ["Commit index", c.commit_index], ["Applied index", c.applied_index]]),
      // The wrapper scrolls on a phone; it is focusable so keys scroll it too.
      el("div", {class: "tw", tabindex: "0", role: "region", "aria-label": "Raft servers table"}, el("table", {id: "c-table"}, el("caption", null, "Raft servers"),
        el("thead", null, row("th", ["ID", "Role", "HTTP address", "Raft address", "Reachable", "Applied", "Lag", "Last contact"])), tb)),
      el("p", {class: "hint"}, "Applied is the last log index a server applied; lag is how many entries that is behind the leader. Unreachable servers show —."));
    $("c-upd").textContent = "Updated " + new Date().toLocaleTimeString() + "; refreshes every 5 seconds while this tab is visible.";
  } catch (e) {
    show(out, errNode(e.message));
    // Without a valid admin key retrying cannot help; a new key restarts it.
    if (e.status === 401 || e.status === 403) { clusterPoll.stop(); $("c-upd").textContent = ""; }
  }
}
const clusterPoll = poller(loadCluster, 5000);

/* Health: every 5 s while the tab is visible. */
async function health() {
  const h = $("health");
  try {
    const res = await fetch("/health", {headers: {Accept: "application/json"}, cache: "no-store"});
    const d = await res.json().catch(() => { throw new Error("HTTP " + res.status); });
    h.replaceChildren(el("span", {class: res.ok ? "okc" : "err"}, "● " + (d.status || res.status)),
      " · node " + d.node_id + " · role " + d.role + " · leader " + (d.leader || "none") + " · " + d.links + " links · applied " + d.applied_index + (d.version ? " · " + d.version : ""));
  } catch (e) {
    h.replaceChildren(el("span", {class: "err"}, "● unreachable"), " · " + e.message + " · retrying");
  }
}

/* The key field: a new key redraws the current view with it. */
function showKey() {
  const m = /^lr_([a-z0-9]{12})_/.exec(apiKey);
  $("k-state").textContent = (!apiKey ? "No key: enter an API key (or the node's admin token) to list, read and manage links."
    : m ? "Using key " + m[1] + "." : "Using a token that is not an lr_ API key, such as the admin token.") + " It is kept in this tab only.";
  $("k-forget").hidden = !apiKey;
}
function setKey(k) {
  apiKey = k;
  try { k ? sessionStorage.setItem(KEY, k) : sessionStorage.removeItem(KEY); } catch (_) {}
  $("k-in").value = k;
  showKey();
  show($("s-out"));
  render(false);
}
onSubmit("f-key", () => {
  const k = $("k-in").value.trim();
  // Keys and tokens are ASCII; fetch refuses most else with a vague error.
  if (/[^\x20-\x7e]/.test(k)) return show($("k-state"), errNode("That is not a key: keys and tokens are plain ASCII text."));
  setKey(k);
});
$("k-forget").addEventListener("click", () => { setKey(""); $("k-in").focus(); });
$("k-in").value = apiKey;
showKey();

/* Views: #/ (shorten and look up), #/links, #/keys, #/link/{code},
   #/cluster. */
const VIEWS = {home: "h-s", links: "h-ls", keys: "h-k", link: "h-l", cluster: "h-c"};
const TITLES = {home: "linkraft", links: "Links · linkraft", keys: "Keys · linkraft", cluster: "Cluster · linkraft"};
function route() {
  const h = location.hash.replace(/^#\/?/, ""), m = /^link\/([^/]+)/.exec(h);
  if (m) { try { return {view: "link", code: decodeURIComponent(m[1])}; } catch (_) { return {view: "link", code: m[1]}; } }
  return {view: ["links", "keys", "cluster"].includes(h) ? h : "home"};
}
function render(moveFocus) {
  const r = route();
  for (const v in VIEWS) $("v-" + v).hidden = v !== r.view;
  for (const v in TITLES) r.view === v ? $("n-" + v).setAttribute("aria-current", "page") : $("n-" + v).removeAttribute("aria-current");
  linkPoll.stop(); clusterPoll.stop();
  if (r.view === "link") { openLink(r.code); linkPoll.start(); }
  else document.title = TITLES[r.view];
  if (r.view === "links") loadLinks(true);
  if (r.view === "keys") { hideSecret(); loadKeys(); }
  if (r.view === "cluster") clusterPoll.start();
  if (moveFocus) $(VIEWS[r.view]).focus();
}
// go shows a view; the same hash again (a reused link) fires no hashchange.
function go(hash) { location.hash === hash ? render(true) : location.hash = hash; }
window.addEventListener("hashchange", () => render(true));
poller(health, 5000).start();
render(false);

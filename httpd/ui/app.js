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
// HIDDEN matches what shows nothing of itself yet changes how the text
// around it looks: bidi controls (U+202E turns "gpj.exe" into "exe.jpg"),
// zero-width characters, word joiners, the byte order mark, fillers and
// other default-ignorable code points. A target holding one can pass for
// another, so the page never shows them as themselves (see shown).
const HIDDEN = /[\p{Bidi_Control}\p{Default_Ignorable_Code_Point}]/gu;
// codePoint names c as JavaScript writes it: \u202E, \u{E0041}.
function codePoint(c) {
  const h = c.codePointAt(0).toString(16).toUpperCase();
  return h.length > 4 ? "\\u{" + h + "}" : "\\u" + h.padStart(4, "0");
}
// shown is text as the page shows a URL: each hidden character as its
// code point in a marked span, the rest as it is. Plain text stays a
// string; text with hidden characters becomes a fragment.
function shown(text) {
  text = String(text);
  const parts = [];
  let at = 0;
  for (const m of text.matchAll(HIDDEN)) {
    if (m.index > at) parts.push(text.slice(at, m.index));
    const cp = codePoint(m[0]);
    parts.push(el("span", {class: "hid", title: "A hidden character (" + cp + "): it would change how the text around it looks"}, cp));
    at = m.index + m[0].length;
  }
  if (!parts.length) return text;
  if (at < text.length) parts.push(text.slice(at));
  const f = document.createDocumentFragment();
  f.append(...parts);
  return f;
}
// Only http(s) URLs ever become hrefs; everything else is plain text. The
// href is the URL as stored, so the link goes where it says; the text
// shows its hidden characters.
const link = (url, text) => /^https?:\/\//i.test(url) ? el("a", {href: url, rel: "noopener noreferrer"}, shown(text || url)) : el("span", null, text || url ? shown(text || url) : "—");
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

/* Without a leader the cluster takes no writes, and says so with a 503
   whose detail starts with "no leader available" (the cluster's error),
   while every node goes on redirecting from its own copy of the links.
   The page says what that means and what the operator can do: in the
   message of every write that fails so, and above every view while
   /health says the node has no leader. */
const NO_LEADER = /no leader available/i;
const NO_LEADER_MSG = "Writes are paused: there is no leader. The cluster has lost its majority of voters, or is electing a leader (about a second). " +
  "Redirects keep working: every node serves them from its own copy of the links. " +
  "Operators: check the other nodes (linkraft status on each) and bring a majority of the voters back up; see docs/DEPLOY.md, section 7 (a majority lost for good: linkraft recover).";
function noLeaderNote() {
  return [el("strong", null, "Writes are paused: this node knows no leader."),
    el("p", null, "The cluster has lost its majority of voters (more than half are down, or cut off from this node), or it is electing a leader, which takes about a second. Creating, editing and deleting links fail until a leader is back."),
    el("p", null, "Redirects keep working: every node serves them from its own copy of the links (a code this node does not hold yet answers 404 until a leader is back)."),
    el("p", null, "Operators: check the other nodes (", el("code", null, "linkraft status"), " on each, and whether their processes run), and bring a majority of the voters back up: writes resume about a second later. See ",
      el("code", null, "docs/DEPLOY.md"), ", section 7, Removing a node; if a majority is gone for good, the README's Lost quorum (", el("code", null, "linkraft recover"), ")."),
  ];
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
    } else if (res.status === 503 && NO_LEADER.test(msg)) {
      const ra = res.headers.get("Retry-After");
      msg = NO_LEADER_MSG + (/^\d+$/.test(ra || "") ? " Try again in " + ra + " s." : "");
      health(); // the note above the views, at once rather than at the next poll
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
/* A link is named by its code and, off the default domain, its domain:
   API paths and page hashes carry the domain as ?domain=. */
const withDomain = (path, domain, params) => {
  const q = new URLSearchParams(params || {});
  if (domain) q.set("domain", domain);
  const qs = q.toString();
  return qs ? path + "?" + qs : path;
};
const apiLink = (code, domain, sub, params) => withDomain("/api/v1/urls/" + encodeURIComponent(code) + (sub || ""), domain, params);
const linkHash = (code, domain) => withDomain("#/link/" + encodeURIComponent(code), domain);
const editHash = (code, domain) => withDomain("#/edit/" + encodeURIComponent(code), domain);
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
    go(linkHash(d.short_code, d.domain));
  } catch (e) { show(out, errNode(e.message)); }
});

/* Shorten many: one target per line, optionally a space and a custom
   code; one bulk call creates them all, and each line shows its outcome. */
const MAX_BULK = 1000;
onSubmit("f-b", async () => {
  const out = $("b-out"), ws = $("b-ws").value.trim(), items = [];
  const lines = $("b-lines").value.split(/\r?\n/).map((text, i) => ({n: i + 1, text: text.trim()})).filter(x => x.text);
  if (!lines.length) { show(out, errNode("Enter at least one URL.")); return $("b-lines").focus(); }
  if (lines.length > MAX_BULK) { show(out, errNode("At most " + MAX_BULK + " lines at once; this has " + lines.length + ".")); return $("b-lines").focus(); }
  for (const x of lines) {
    const parts = x.text.split(/\s+/);
    if (parts.length > 2) { x.result = {error: "Expected a URL, or a URL, a space and a custom code."}; continue; }
    const item = {original_url: parts[0]};
    if (parts[1]) item.custom_code = parts[1];
    if (ws) item.workspace = ws;
    x.item = items.length;
    items.push(item);
  }
  if (items.length) {
    show(out, el("p", null, "Shortening " + (items.length === 1 ? "1 URL" : items.length + " URLs") + "…"));
    try {
      const {data} = await call("/api/v1/urls/bulk", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({links: items})});
      for (const x of lines) if (x.item != null) x.result = (data.results || [])[x.item] || {error: "No answer for this line."};
    } catch (e) { return show(out, errNode(e.message)); }
  }
  let ok = 0;
  const ol = el("ol", {id: "b-results", class: "bulk"}, ...lines.map(x => {
    const r = x.result, good = r.link && (r.status === 200 || r.status === 201);
    if (good) ok++;
    return el("li", {"data-line": x.n, "data-status": r.status || 0, class: good ? "" : "bad"},
      el("small", null, "Line " + x.n + ": ", el("code", null, shown(x.text))),
      good ? el("div", null, el("span", {class: "okc"}, r.status === 200 ? "Reused " : "Created "), link(r.link.short_url), " · ",
        el("a", {href: linkHash(r.link.short_code, r.link.domain), "aria-label": "Link page for " + r.link.short_code}, "link page"))
        : el("div", {class: "err"}, (r.status ? r.status + ": " : "") + (r.error || "refused")));
  }));
  const bad = lines.length - ok;
  show(out, el("p", {class: bad ? "err" : "okc"}, ok + " of " + lines.length + " lines shortened" + (bad ? "; " + bad + (bad === 1 ? " line" : " lines") + " failed, listed below." : ".")), ol);
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

/* Links: the links the key may see (or one workspace's), filtered by text
   and tag, newest or most clicked first, a page at a time. */
const LS = {cursor: null, seq: 0, timer: null, seen: new Map()};
function lsFilter() {
  return {q: $("ls-q").value.trim(), tag: $("ls-tag").value, sort: $("ls-sort").value, ws: $("ls-ws").value.trim()};
}
async function loadLinks(reset) {
  clearTimeout(LS.timer);
  const list = $("ls-list"), more = $("ls-more"), msg = $("ls-msg"), f = lsFilter(), seq = ++LS.seq;
  const p = {limit: 20, sort: f.sort};
  if (f.q) p.q = f.q;
  if (f.tag) p.tag = f.tag;
  if (f.ws) p.workspace = f.ws;
  if (!reset && LS.cursor) p.cursor = LS.cursor;
  more.disabled = true;
  try {
    const {data} = await call("/api/v1/urls?" + new URLSearchParams(p));
    if (seq !== LS.seq) return; // a newer load started meanwhile
    if (reset) { list.replaceChildren(); LS.seen.clear(); }
    for (const l of data.links || []) list.append(linkItem(l));
    LS.cursor = data.next_cursor || null;
    more.hidden = !LS.cursor;
    const n = list.children.length, filtered = f.q || f.tag;
    show(msg, n ? el("p", {class: "hint"}, "Showing " + (n === 1 ? "1 link" : n + " links") + (filtered ? " that match" : "") + (LS.cursor ? "; More shows the next ones." : "."))
      : el("p", null, filtered ? "No links match." : f.ws ? "No links in this workspace." : "No links yet."));
  } catch (e) {
    if (seq !== LS.seq) return;
    if (reset) { list.replaceChildren(); more.hidden = true; }
    show(msg, errNode(e.message));
  }
  more.disabled = false;
}
// loadTags fills the tag filter with the tags of the links the key sees
// (or of the workspace), keeping the chosen one.
async function loadTags() {
  const sel = $("ls-tag"), ws = $("ls-ws").value.trim();
  let tags;
  try {
    const {data} = await call("/api/v1/tags" + (ws ? "?" + new URLSearchParams({workspace: ws}) : ""));
    tags = data.tags || [];
  } catch (_) { return; } // the list's own call says what went wrong
  const cur = sel.value;
  sel.replaceChildren(el("option", {value: ""}, "Any tag"),
    ...tags.map(t => el("option", {value: t.tag}, t.tag + " (" + (t.links === 1 ? "1 link" : t.links + " links") + ")")));
  pickTag(cur);
}
// pickTag selects tag in the filter, adding it if the list lacks it.
function pickTag(tag) {
  const sel = $("ls-tag");
  if (tag && ![...sel.options].some(o => o.value.toLowerCase() === tag.toLowerCase())) sel.append(el("option", {value: tag}, tag));
  sel.value = [...sel.options].find(o => o.value.toLowerCase() === tag.toLowerCase())?.value ?? "";
}
const lockSVG = () => sv("svg", {viewBox: "0 0 16 16", width: 12, height: 12, "aria-hidden": "true", focusable: "false"},
  sv("path", {d: "M4.5 7V5a3.5 3.5 0 0 1 7 0v2", fill: "none", stroke: "currentColor", "stroke-width": "1.6"}),
  sv("rect", {x: 2.5, y: 7, width: 11, height: 8, rx: 1.5, fill: "currentColor"}));
const visits = n => n === 1 ? "1 visit" : n.toLocaleString() + " visits";
// chips shows tags; in the list each one is a button that filters by it.
function chips(tags, filter) {
  if (!tags || !tags.length) return null;
  return el("span", {class: "chips"}, ...tags.map(t => {
    if (!filter) return el("span", {class: "chip"}, t);
    const b = el("button", {type: "button", class: "chip", title: "Show the links tagged " + t, "aria-label": "Show the links tagged " + t}, t);
    b.addEventListener("click", () => { pickTag(t); loadLinks(true); $("ls-tag").focus(); });
    return b;
  }));
}
function linkItem(l) {
  const code = l.short_code, li = el("li", {"data-code": code});
  if (l.domain) li.dataset.domain = l.domain;
  LS.seen.set((l.domain || "") + "/" + code, l);
  li.append(...[el("div", {class: "lh"}, el("a", {href: linkHash(code, l.domain), "aria-label": "Link page for " + code}, code), " ", link(l.short_url),
      l.password_protected ? el("span", {class: "flag", "data-flag": "password", title: "Visitors need a password"}, lockSVG(), " password") : null),
    l.title ? el("div", {class: "lt"}, l.title) : null,
    el("small", null, "→ ", link(l.original_url)),
    chips(l.tags, true),
    el("small", null, "workspace " + l.workspace + " · " + plural(l.click_count ?? 0) + " · created ", fmtTime(l.created_at),
      l.expires_at ? " · expires " : null, l.expires_at ? fmtTime(l.expires_at) : null,
      l.max_visits != null ? " · at most " + visits(l.max_visits) : null, l.domain ? " · domain " + l.domain : null),
    el("div", {class: "acts"}, el("a", {class: "btn", href: editHash(code, l.domain), "aria-label": "Edit link " + code}, "Edit"),
      confirmed("Delete", "link " + code, async () => {
        try {
          await call(apiLink(code, l.domain), {method: "DELETE"});
          li.remove();
          show($("ls-msg"), el("p", {class: "okc"}, "Deleted link " + code + "."));
        } catch (e) { show($("ls-msg"), errNode(e.message)); }
      }))].filter(Boolean));
  return li;
}
onSubmit("f-ls", () => Promise.all([loadTags(), loadLinks(true)]));
$("ls-more").addEventListener("click", () => loadLinks(false));
// Typing searches once it pauses; a new tag, order or workspace at once.
$("ls-q").addEventListener("input", () => { clearTimeout(LS.timer); LS.timer = setTimeout(() => loadLinks(true), 300); });
$("ls-tag").addEventListener("change", () => loadLinks(true));
$("ls-sort").addEventListener("change", () => loadLinks(true));
$("ls-ws").addEventListener("change", () => { loadTags(); loadLinks(true); });

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
const LP = {code: null, domain: "", iv: "hour", seq: 0, series: null};
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

function openLink(code, domain) {
  if (LP.code !== code || LP.domain !== domain) {
    LP.code = code; LP.domain = domain; LP.series = null;
    $("l-body").hidden = $("l-stats").hidden = $("l-vis").hidden = $("l-hist").hidden = true;
    $("l-qr").removeAttribute("src");
    show($("l-chart")); show($("l-sum")); show($("l-copied")); show($("l-versions"));
    show($("l-msg"), el("p", null, "Loading…"));
  }
  $("h-l").textContent = "Link " + code + (domain ? " on " + domain : "");
  $("l-edit").setAttribute("href", editHash(code, domain));
  document.title = code + " · linkraft";
}
// ruleText says what a redirect rule asks for and where it sends.
function ruleText(r) {
  const w = r.when || {}, c = [];
  if (w.device) c.push("device " + w.device);
  if (w.language) c.push("language " + w.language);
  for (const k in w.query || {}) c.push("query " + k + "=" + w.query[k]);
  if (w.country) c.push("country " + w.country);
  if (w.after) c.push("after " + new Date(w.after).toLocaleString());
  if (w.before) c.push("before " + new Date(w.before).toLocaleString());
  return el("li", null, (c.join(", ") || "always") + " → ", link(r.url));
}
// byKey says who made a change: "admin-token" is the root token's id.
const byKey = id => id === "admin-token" ? " with the admin token" : " by key " + id;
async function refreshLink() {
  const code = LP.code, domain = LP.domain, iv = LP.iv, seq = ++LP.seq;
  try {
    const [{data: l}, {data: st}, {data: h}, vis] = await Promise.all([
      call(apiLink(code, domain)), call(apiLink(code, domain, "/stats", {interval: iv})), call(apiLink(code, domain, "/history")),
      fetchVisits(p => apiLink(code, domain, "/stats", p), LV.days)]);
    if (seq !== LP.seq) return; // the code or interval changed meanwhile
    $("l-short").value = l.short_url;
    const open = $("l-open");
    /^https?:\/\//i.test(l.short_url) ? open.setAttribute("href", l.short_url) : open.removeAttribute("href");
    const qr = apiLink(code, domain, "/qr", {size: 352});
    if ($("l-qr").getAttribute("src") !== qr) {
      $("l-qr").src = qr;
      $("l-qr").alt = "QR code for " + l.short_url;
    }
    const opts = [l.password_protected && "password protected", l.forward_query && "forwards the query string", l.public_stats && "public statistics"].filter(Boolean);
    const rows = [["Original URL", link(l.original_url), "l-target"]];
    if (l.title) rows.push(["Title", l.title, "l-title"]);
    if (l.tags && l.tags.length) rows.push(["Tags", chips(l.tags, false), "l-tags"]);
    rows.push(["Created", fmtTime(l.created_at)], ["Total clicks", String(st.clicks ?? l.click_count ?? 0), "l-clicks"], ["Last accessed", never(st.last_accessed_at)],
      ["Workspace", l.workspace]);
    if (l.domain) rows.push(["Domain", l.domain]);
    rows.push(["Expires", never(l.expires_at)]);
    if (l.valid_since) rows.push(["Valid from", fmtTime(l.valid_since)]);
    if (l.max_visits != null) rows.push(["Visit limit", visits(l.max_visits)]);
    rows.push(["Options", opts.length ? opts.join(" · ") : "none", "l-opts"]);
    if (l.rules && l.rules.length) rows.push(["Rules", el("ol", {class: "rl"}, ...l.rules.map(ruleText)), "l-rules"]);
    dl($("l-info"), rows);
    const vs = h.versions || [];
    $("l-versions").replaceChildren(...vs.map((v, i) => el("li", {"data-url": v.original_url},
      link(v.original_url), i === vs.length - 1 ? el("span", {class: "badge"}, "current") : null,
      el("small", null, i ? "from " : "created ", fmtTime(v.changed_at), v.key_id ? byKey(v.key_id) : null))));
    show($("l-msg"), flash ? el("p", {class: "okc"}, flash) : "");
    flash = null;
    $("l-body").hidden = $("l-stats").hidden = $("l-vis").hidden = $("l-hist").hidden = false;
    LP.series = st;
    drawChart();
    LV.panel.update(vis);
    $("l-upd").textContent = "Updated " + new Date().toLocaleTimeString() + "; refreshes every 5 seconds while this tab is visible.";
  } catch (e) {
    if (seq !== LP.seq) return;
    // Retrying cannot help a missing link or a refused key; a new key
    // restarts the page.
    if ([401, 403, 404, 410].includes(e.status)) { $("l-body").hidden = $("l-stats").hidden = $("l-vis").hidden = $("l-hist").hidden = true; linkPoll.stop(); }
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

/* Edit: a form for one link's target and options. It sends only the
   fields that differ from the link as loaded. */
const ED = {code: null, domain: "", link: null, rules0: "", rulesTouched: false, seq: 0, rid: 0};
const pad2 = n => String(n).padStart(2, "0");
// The datetime-local fields show local time to the minute. Each keeps the
// time it was filled with, so an untouched field sends that time exactly.
function setWhen(inp, iso) {
  const d = iso ? new Date(iso) : null;
  inp.value = d && !isNaN(d) ? d.getFullYear() + "-" + pad2(d.getMonth() + 1) + "-" + pad2(d.getDate()) + "T" + pad2(d.getHours()) + ":" + pad2(d.getMinutes()) : "";
  inp.dataset.init = inp.value;
  inp.dataset.iso = iso || "";
}
// whenOf is a datetime-local field's time in RFC 3339 UTC, null if empty.
function whenOf(inp) {
  if (!inp.value) return null;
  if (inp.value === inp.dataset.init && inp.dataset.iso) return inp.dataset.iso;
  const d = new Date(inp.value); // no offset: local time
  if (isNaN(d)) throw fieldError(inp, "Enter a complete date and time.");
  return d.toISOString().replace(/\.000Z$/, "Z");
}
const fieldError = (inp, msg) => Object.assign(new Error(msg), {field: inp});
const tagList = v => v.split(",").map(t => t.trim()).filter(Boolean);

function addRule(r) {
  const id = "r" + (++ED.rid), w = (r && r.when) || {}, rows = $("e-rows");
  const box = el("fieldset", {class: "rule", id});
  const f = (key, label, input, hint) => {
    input.id = id + "-" + key;
    input.dataset.k = key;
    return el("div", null, el("label", {for: input.id}, label, hint ? " " : null, hint ? el("span", {class: "hint"}, hint) : null), input);
  };
  const dev = el("select", null, ...["", "ios", "android", "mobile", "desktop"].map(v => el("option", {value: v}, v || "any")));
  dev.value = w.device || "";
  const lang = el("input", {type: "text", autocomplete: "off", spellcheck: "false", placeholder: "en, pt-BR"});
  lang.value = w.language || "";
  const q = el("input", {type: "text", autocomplete: "off", spellcheck: "false", placeholder: "utm_source=mail"});
  q.value = Object.entries(w.query || {}).map(([k, v]) => k + "=" + v).join("&");
  const after = el("input", {type: "datetime-local"}), before = el("input", {type: "datetime-local"});
  setWhen(after, w.after); setWhen(before, w.before);
  const url = el("input", {type: "url", autocomplete: "off", spellcheck: "false", placeholder: "https://…"});
  url.value = (r && r.url) || "";
  if (w.country) box.dataset.country = w.country; // kept as it was: this form cannot set it
  const rm = el("button", {type: "button", class: "sec"}, "Remove rule");
  rm.addEventListener("click", () => {
    const next = box.nextElementSibling || box.previousElementSibling;
    box.remove();
    ED.rulesTouched = true;
    numberRules();
    (next ? next.querySelector("select") : $("e-add")).focus();
  });
  box.append(el("legend"), el("div", {class: "row"}, f("device", "Device", dev), f("language", "Language", lang), f("query", "Query", q, "(name=value&…)")),
    el("div", {class: "row"}, f("after", "From", after, "(optional)"), f("before", "Until", before, "(optional)")), f("url", "Send to", url), rm);
  rows.append(box);
  numberRules();
  return box;
}
function numberRules() {
  [...$("e-rows").children].forEach((box, i) => {
    box.querySelector("legend").textContent = "Rule " + (i + 1);
    box.querySelector("button").setAttribute("aria-label", "Remove rule " + (i + 1));
  });
}
// readRules is the rules the form shows; a rule with every field empty
// is left out.
function readRules() {
  const out = [];
  [...$("e-rows").children].forEach((box, i) => {
    const g = k => box.querySelector("[data-k=" + k + "]"), when = {};
    const url = g("url").value.trim(), lang = g("language").value.trim(), qs = g("query").value.trim();
    if (!url && !g("device").value && !lang && !qs && !g("after").value && !g("before").value) return;
    if (g("device").value) when.device = g("device").value;
    if (lang) when.language = lang;
    if (qs) {
      when.query = {};
      for (const part of qs.split("&")) {
        const eq = part.indexOf("=");
        if (eq < 1) throw fieldError(g("query"), "Rule " + (i + 1) + ": write each query condition as name=value.");
        when.query[part.slice(0, eq)] = part.slice(eq + 1);
      }
    }
    if (box.dataset.country) when.country = box.dataset.country;
    const after = whenOf(g("after")), before = whenOf(g("before"));
    if (after) when.after = after;
    if (before) when.before = before;
    if (!url) throw fieldError(g("url"), "Rule " + (i + 1) + ": enter the URL it sends to.");
    out.push({when, url});
  });
  return out;
}
$("e-add").addEventListener("click", () => { ED.rulesTouched = true; addRule().querySelector("select").focus(); });
// The rules are read, checked and compared only once they were touched.
$("e-rules").addEventListener("input", () => { ED.rulesTouched = true; });
$("e-pw-rm").addEventListener("change", e => { $("e-pw").disabled = e.target.checked; });
// A change to the form retires the last save's error.
$("f-e").addEventListener("input", () => { if ($("e-out").querySelector(".err")) show($("e-out")); });

// noteHidden says under a URL field which hidden characters the URL in it
// holds: the field itself cannot mark them.
function noteHidden(box, url) {
  const s = shown(url);
  box.hidden = typeof s === "string";
  box.replaceChildren(...(box.hidden ? [] : ["This URL holds hidden characters, shown here as their code points: ", el("code", null, s)]));
}
$("e-url").addEventListener("input", () => noteHidden($("e-url-hid"), $("e-url").value));

function fillEdit(l) {
  ED.link = l;
  $("e-code").value = l.short_code;
  $("e-url").value = l.original_url;
  noteHidden($("e-url-hid"), l.original_url);
  $("e-title").value = l.title || "";
  $("e-tags").value = (l.tags || []).join(", ");
  setWhen($("e-exp"), l.expires_at);
  setWhen($("e-since"), l.valid_since);
  $("e-max").value = l.max_visits ?? "";
  $("e-pw").value = "";
  $("e-pw").disabled = $("e-pw-rm").checked = false;
  $("e-pw-rm").disabled = !l.password_protected;
  $("e-pw-hint").textContent = l.password_protected ? "(empty: keep the current one; 8 to 128 characters)" : "(empty: none; 8 to 128 characters)";
  $("e-fwd").checked = !!l.forward_query;
  $("e-pub").checked = !!l.public_stats;
  $("e-rows").replaceChildren();
  for (const r of l.rules || []) addRule(r);
  ED.rulesTouched = false;
  try { ED.rules0 = JSON.stringify(readRules()); } catch (_) { ED.rules0 = ""; } // shown in a way it cannot read back: a touched rule sends them all
  $("e-cancel").setAttribute("href", linkHash(l.short_code, l.domain));
}
async function openEdit(code, domain) {
  const seq = ++ED.seq;
  ED.code = code; ED.domain = domain; ED.link = null;
  $("h-e").textContent = "Edit link " + code + (domain ? " on " + domain : "");
  document.title = "Edit " + code + " · linkraft";
  $("f-e").hidden = true;
  show($("e-out"));
  show($("e-msg"), el("p", null, "Loading…"));
  try {
    const {data: l} = await call(apiLink(code, domain));
    if (seq !== ED.seq) return;
    fillEdit(l);
    show($("e-msg"));
    $("f-e").hidden = false;
  } catch (e) {
    if (seq !== ED.seq) return;
    // An expired link cannot be read, but it can be edited: the Links
    // view's copy of it fills the form.
    const listed = e.status === 410 && LS.seen.get(domain + "/" + code);
    if (!listed) return show($("e-msg"), errNode(e.message));
    fillEdit(listed);
    show($("e-msg"), el("p", {class: "err", role: "alert"}, "This link has expired; a later expiry, or none, brings it back. The form shows it as the Links view last listed it."));
    $("f-e").hidden = false;
  }
}
// editBody is what changed, as the fields of an edit.
function editBody() {
  const l = ED.link, body = {}, v = id => $(id).value.trim();
  // Checked only when changed: a link imported with a code outside these
  // rules keeps it through other edits.
  const code = v("e-code");
  if (code !== l.short_code) {
    // Letters of any script and emoji too: the server's rules decide, and say why.
    if (!code) throw fieldError($("e-code"), "The code cannot be empty.");
    body.short_code = code;
  }
  if ($("e-url").value !== l.original_url) body.original_url = v("e-url");
  if ($("e-title").value !== (l.title || "")) body.title = v("e-title");
  const tags = tagList($("e-tags").value);
  if (tags.join("\n") !== (l.tags || []).join("\n")) body.tags = tags;
  if ($("e-exp").value !== $("e-exp").dataset.init) body.expires_at = whenOf($("e-exp"));
  if ($("e-since").value !== $("e-since").dataset.init) body.valid_since = whenOf($("e-since"));
  const max = v("e-max");
  if ($("e-max").validity.badInput || max && !/^\d+$/.test(max) || max === "0") throw fieldError($("e-max"), "Max visits must be a whole number (1 or more), or empty for no limit.");
  if (max !== String(l.max_visits ?? "")) body.max_visits = max ? Number(max) : null;
  if ($("e-pw-rm").checked) body.password = null;
  else if ($("e-pw").value) body.password = $("e-pw").value;
  if ($("e-fwd").checked !== !!l.forward_query) body.forward_query = $("e-fwd").checked;
  if ($("e-pub").checked !== !!l.public_stats) body.public_stats = $("e-pub").checked;
  if (ED.rulesTouched) {
    const rules = readRules();
    if (JSON.stringify(rules) !== ED.rules0) body.rules = rules;
  }
  return body;
}
onSubmit("f-e", async () => {
  const out = $("e-out");
  if (!ED.link) return;
  let body;
  try { body = editBody(); } catch (e) {
    show(out, errNode(e.message));
    return e.field && e.field.focus();
  }
  if (!Object.keys(body).length) return show(out, el("p", null, "Nothing to save: no field was changed."));
  try {
    const {data: l} = await call(apiLink(ED.code, ED.domain), {method: "PATCH", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    show(out);
    flash = "Saved: " + Object.keys(body).join(", ").replace(/_/g, " ") + ".";
    go(linkHash(l.short_code, l.domain));
  } catch (e) { show(out, errNode(e.message)); }
});

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

/* Visits: where the clicks of a link, or of a workspace's links, came
   from, in whole UTC days; crawlers and link previews are counted apart.
   A panel shows a daily chart and one card per breakdown. */
const DIMS = [["referrer", "Referrers"], ["country", "Countries"], ["device", "Devices"], ["browser", "Browsers"], ["os", "Operating systems"]];
const DIM_NOUN = {referrer: "referrer", country: "country", device: "device", browser: "browser", os: "operating system"};
const NAMES = {direct: "Direct (no referrer)", other: "Other", chrome: "Chrome", safari: "Safari", firefox: "Firefox", edge: "Edge", opera: "Opera",
  windows: "Windows", macos: "macOS", linux: "Linux", ios: "iOS", android: "Android", chromeos: "ChromeOS",
  desktop: "Desktop", mobile: "Mobile", tablet: "Tablet"};
let regions = null;
try { regions = new Intl.DisplayNames(undefined, {type: "region"}); } catch (_) {}
// valueName is how a breakdown's value reads: a country by its name and
// code, a referrer host as it is.
function valueName(by, v) {
  if (by === "country") {
    if (v === "XX") return "Unknown";
    let name = null;
    try { name = regions && regions.of(v); } catch (_) {}
    return name && name !== v ? name + " (" + v + ")" : v;
  }
  if (by === "referrer" && v !== "direct" && v !== "other") return v;
  return NAMES[v] || v;
}
const countOf = (n, one, many) => n === 1 ? "1 " + one : n.toLocaleString() + " " + many;
const botText = (c, p) => countOf(c, "crawler", "crawlers") + ", " + countOf(p, "preview", "previews");
const utcDay = {...dayFmt, timeZone: "UTC"};
// dayStart is the first of the last n whole UTC days, today included.
function dayStart(n) {
  const d = new Date();
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() - n + 1)).toISOString().replace(/\.000Z$/, "Z");
}
// fetchVisits asks for every breakdown at once; url(params) is the stats
// path with those query parameters.
async function fetchVisits(url, days) {
  const from = dayStart(days);
  const answers = await Promise.all(DIMS.map(([by]) => call(url({group_by: by, from}))));
  const groups = {};
  DIMS.forEach(([by], i) => { groups[by] = answers[i].data.visits.groups || []; });
  return {base: answers[0].data, groups, days};
}

// download fetches a CSV with the key and hands it to the browser as a
// file: a plain link could not send the key.
async function download(path, fallback, out) {
  try {
    const res = await fetch(path, {headers: apiKey ? {Authorization: "Bearer " + apiKey} : {}, cache: "no-store"});
    if (!res.ok) throw new Error("HTTP " + res.status + " " + res.statusText);
    const m = /filename="([^"]+)"/.exec(res.headers.get("Content-Disposition") || "");
    const url = URL.createObjectURL(await res.blob()), a = el("a", {href: url, download: m ? m[1] : fallback, hidden: ""});
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
    show(out);
  } catch (e) { show(out, errNode("Download failed: " + e.message)); }
}
function csvButton(label, what, act) {
  const b = el("button", {type: "button", class: "sec csv", "aria-label": "Download " + what + " as CSV"}, label);
  b.addEventListener("click", async () => { b.disabled = true; try { await act(); } finally { b.disabled = false; } });
  return b;
}

// breakdownCard lists a breakdown's values, most clicks first, each with
// its clicks, its share in words and a bar as wide as that share.
const CARD_ROWS = 8;
function breakdownCard(by, title, groups, period, csv) {
  const total = groups.reduce((s, g) => s + g.clicks, 0), id = "vc-" + by + "-" + (++breakdownCard.n);
  const card = el("div", {class: "card", "data-by": by, role: "group", "aria-labelledby": id},
    el("div", {class: "ch"}, el("h3", {id}, title), csv));
  if (!total) return card.append(el("p", {class: "hint empty"}, "No visits in this period.")), card;
  const pct = n => Math.round(n / total * 100);
  const ol = el("ol", {class: "bars", "aria-label": "Clicks by " + DIM_NOUN[by] + ", " + period}, ...groups.slice(0, CARD_ROWS).map(g => {
    const fill = el("span", {class: "bf"});
    fill.style.width = Math.max(1, g.clicks / total * 100) + "%"; // CSSOM: the page's policy refuses style attributes
    return el("li", {"data-value": g.value, "data-clicks": g.clicks},
      el("span", {class: "bl"}, valueName(by, g.value)),
      el("span", {class: "bn"}, plural(g.clicks) + " · " + pct(g.clicks) + "%"),
      el("span", {class: "bt", "aria-hidden": "true"}, fill));
  }));
  card.append(ol);
  const rest = groups.slice(CARD_ROWS);
  if (rest.length) card.append(el("p", {class: "hint more"}, countOf(rest.length, "more value", "more values") + " with " +
    plural(rest.reduce((s, g) => s + g.clicks, 0)) + "; the CSV has them all."));
  return card;
}
breakdownCard.n = 0;

// drawDays renders one bar per day: clicks solid, bots stacked above them
// in a muted, hatched style, each day's numbers in its tooltip.
function drawDays(box, days, period) {
  const W = Math.max(280, Math.round(box.clientWidth || 600)), H = 200;
  const top = niceMax(days.reduce((m, d) => Math.max(m, d.clicks + d.crawlers + d.previews), 0));
  const L = 14 + 7 * top.toLocaleString().length, R = 8, T = 10, B = 28, pw = W - L - R, ph = H - T - B;
  const y = v => T + ph - v / top * ph, hgt = v => v ? Math.max(2, v / top * ph) : 0;
  const clicks = days.reduce((s, d) => s + d.clicks, 0), bots = days.reduce((s, d) => s + d.crawlers + d.previews, 0);
  const svg = sv("svg", {viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img",
    "aria-label": "Clicks per day, " + period + ": " + plural(clicks) + " and " + countOf(bots, "bot visit", "bot visits") + "."});
  for (const v of [0, top / 2, top]) {
    if (v !== Math.floor(v)) continue;
    svg.append(sv("line", {class: v ? "grid" : "axis", x1: L, x2: W - R, y1: y(v), y2: y(v)}),
      sv("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, v.toLocaleString()));
  }
  const band = pw / Math.max(1, days.length), bw = Math.max(1, band * 0.78);
  const every = Math.max(1, Math.ceil(days.length / Math.max(1, Math.floor(pw / 60))));
  days.forEach((d, i) => {
    const x = L + i * band + (band - bw) / 2, b = d.crawlers + d.previews, hc = hgt(d.clicks), hb = hgt(b);
    const when = new Date(d.start).toLocaleDateString([], {weekday: "short", ...utcDay});
    svg.append(sv("g", {class: "bar", "data-start": d.start, "data-clicks": d.clicks, "data-bots": b},
      sv("title", null, when + ": " + plural(d.clicks) + (b ? "; bots apart: " + botText(d.crawlers, d.previews) : "")),
      sv("rect", {class: "h", x: L + i * band, y: T, width: band, height: ph}),
      sv("rect", {class: "b", x, y: T + ph - hc, width: bw, height: hc}),
      sv("rect", {class: "bot", x, y: T + ph - hc - hb, width: bw, height: hb})));
    if (i % every === 0) svg.append(sv("text", {x: L + i * band + band / 2, y: H - B + 16, "text-anchor": "middle"}, new Date(d.start).toLocaleDateString([], utcDay)));
  });
  if (!clicks && !bots) svg.append(sv("text", {class: "empty", x: L + pw / 2, y: T + ph / 2, "text-anchor": "middle"}, "No visits in this period"));
  show(box, svg);
}

// visitsPanel fills box with a daily chart, a bots line and the cards;
// csv(by, days) is the path of a breakdown's CSV ("" by: the days').
function visitsPanel(box, csv) {
  const sum = el("p", {class: "vsum"}), chart = el("div", {class: "chart days"}), bots = el("p", {class: "bots"});
  const cards = el("div", {class: "cards"}), out = el("div", {class: "out", "aria-live": "polite"});
  let last = null, shown = "";
  const dayCSV = csvButton("Download CSV", "clicks per day", () => download(csv("", last.days), "days.csv", out));
  box.replaceChildren(el("div", {class: "ch"}, el("h3", null, "Clicks per day"), dayCSV), sum, chart,
    el("p", {class: "legend hint", "aria-hidden": "true"}, el("span", {class: "sw b"}), " clicks ", el("span", {class: "sw bot"}, ""), " bots (crawlers and previews)"),
    bots, cards, out);
  const draw = () => last && drawDays(chart, last.base.visits.days || [], last.period);
  if (window.ResizeObserver) {
    let lastW = 0;
    new ResizeObserver(() => { const w = chart.clientWidth; if (w && w !== lastW) { lastW = w; draw(); } }).observe(chart);
  }
  return {
    update(r) {
      const v = r.base.visits, period = "the last " + r.days + " days";
      // An unchanged answer leaves the panel alone, so a refresh does not
      // take the focus from its buttons.
      const seen = JSON.stringify([r.days, v, r.groups]);
      if (seen === shown) return;
      shown = seen;
      last = Object.assign({period}, r);
      let peak = null;
      for (const d of v.days || []) if (d.clicks && (!peak || d.clicks > peak.clicks)) peak = d;
      sum.textContent = v.clicks ? plural(v.clicks) + " in " + period + "; busiest day " + new Date(peak.start).toLocaleDateString([], utcDay) + " with " + plural(peak.clicks) + "."
        : "No clicks in " + period + ".";
      bots.textContent = "Bots apart: " + botText(v.crawlers, v.previews) + " in " + period + ".";
      draw();
      cards.replaceChildren(...DIMS.map(([by, title]) => breakdownCard(by, title, r.groups[by], period,
        csvButton("CSV", title.toLowerCase(), () => download(csv(by, r.days), by + ".csv", out)))));
    },
  };
}
// rangeButtons makes a group of data-days buttons pick one range.
function rangeButtons(group, onPick) {
  const bs = [...group.querySelectorAll("[data-days]")];
  for (const b of bs) b.addEventListener("click", () => {
    for (const o of bs) o.setAttribute("aria-pressed", String(o === b));
    onPick(Number(b.dataset.days));
  });
}

/* The link page's visits. */
const LV = {days: 30, panel: null};
LV.panel = visitsPanel($("l-vout"), (by, days) => by
  ? apiLink(LP.code, LP.domain, "/stats", {group_by: by, from: dayStart(days), format: "csv"})
  : apiLink(LP.code, LP.domain, "/stats", {interval: "day", from: dayStart(days), format: "csv"}));
rangeButtons($("l-vis"), days => { LV.days = days; linkPoll.tick(); });

/* Overview: the totals and visits of a workspace's links (or of every
   workspace the key sees), optionally of one tag. */
const OV = {days: 30, seq: 0};
function ovFilter() {
  const p = {}, ws = $("ov-ws").value, tag = $("ov-tag").value;
  if (ws) p.workspace = ws;
  if (tag) p.tag = tag;
  return p;
}
const statsPath = params => "/api/v1/stats?" + new URLSearchParams(Object.assign(ovFilter(), params));
OV.panel = visitsPanel($("ov-out"), (by, days) => statsPath(Object.assign(by ? {group_by: by} : {}, {from: dayStart(days), format: "csv"})));
async function loadOverview() {
  const seq = ++OV.seq;
  try {
    const r = await fetchVisits(statsPath, OV.days);
    if (seq !== OV.seq) return; // the filter changed meanwhile
    dl($("ov-totals"), [["Links", r.base.links.toLocaleString(), "ov-links"], ["Clicks, all time", plural(r.base.clicks), "ov-clicks"],
      ["Clicks, last " + r.days + " days", plural(r.base.visits.clicks), "ov-range"]]);
    OV.panel.update(r);
    $("ov-out").hidden = false;
    show($("ov-msg"));
    $("ov-upd").textContent = "Updated " + new Date().toLocaleTimeString() + "; refreshes every 5 seconds while this tab is visible.";
  } catch (e) {
    if (seq !== OV.seq) return;
    show($("ov-msg"), errNode(e.message));
    if (e.status === 401 || e.status === 403) { overviewPoll.stop(); $("ov-out").hidden = true; $("ov-totals").replaceChildren(); $("ov-upd").textContent = ""; }
  }
}
const overviewPoll = poller(loadOverview, 5000);
// fillSelect offers the first option and then values, keeping the choice.
function fillSelect(sel, values, label) {
  const cur = sel.value;
  sel.replaceChildren(sel.options[0], ...values.map(v => el("option", {value: v}, label ? label(v) : v)));
  if (cur && !values.includes(cur)) sel.append(el("option", {value: cur}, cur));
  sel.value = cur;
}
// No API lists a key's workspaces: those of the newest 1000 links it
// sees are offered. The tags are the chosen workspace's.
async function loadOverviewChoices() {
  try {
    const {data} = await call("/api/v1/urls?limit=1000");
    fillSelect($("ov-ws"), [...new Set((data.links || []).map(l => l.workspace))].sort());
  } catch (_) {} // the stats call says what went wrong
  await loadOverviewTags();
}
async function loadOverviewTags() {
  const ws = $("ov-ws").value;
  try {
    const {data} = await call("/api/v1/tags" + (ws ? "?" + new URLSearchParams({workspace: ws}) : ""));
    const tags = data.tags || [];
    fillSelect($("ov-tag"), tags.map(t => t.tag), t => t + " (" + countOf(tags.find(x => x.tag === t).links, "link", "links") + ")");
  } catch (_) {}
}
$("ov-ws").addEventListener("change", async () => { await loadOverviewTags(); overviewPoll.tick(); });
$("ov-tag").addEventListener("change", () => overviewPoll.tick());
$("f-ov").addEventListener("submit", ev => { ev.preventDefault(); overviewPoll.tick(); });
rangeButtons($("f-ov"), days => { OV.days = days; overviewPoll.tick(); });

/* Cluster: the leader's view of every server (an admin key's). */
async function loadCluster() {
  const out = $("c-out");
  try {
    const {data: c} = await call("/admin/cluster");
    const row = (tag, cells, attrs) => el("tr", attrs, ...cells.map(v => el(tag, tag === "th" ? {scope: "col"} : typeof v === "number" ? {class: "n"} : null, v)));
    // Only the leader and the answering node know their roles; a reachable
    // voter that is not the leader follows it.
    // A read replica is a Raft non-voter (--read-replica, or joined with non_voter);
    // a learner is one that joined to vote and is catching up (promoted once caught up).
    const replica = s => s.suffrage === "Nonvoter" && !s.catching_up;
    const learner = s => s.suffrage === "Nonvoter" && !!s.catching_up;
    const role = s => s.leader ? "leader" : s.id === c.node_id ? c.role : !s.reachable ? "—" : s.suffrage === "Voter" ? "follower" : String(s.suffrage || "—").toLowerCase();
    const tb = el("tbody", null, ...(c.servers || []).map(s => row("td", [
      el("span", null, s.id, s.leader ? " " : null, s.leader ? el("span", {class: "badge", title: "Raft leader"}, "★ leader") : null,
        replica(s) ? " " : null, replica(s) ? el("span", {class: "badge", title: "read replica: a Raft non-voter, never counted towards the quorum"}, "replica") : null,
        learner(s) ? " " : null, learner(s) ? el("span", {class: "badge", title: "learner: receiving the state as a non-voter; the leader makes it a voter once it has caught up"}, "catching up") : null), role(s),
      dash(s.http_addr), s.raft_addr, s.reachable ? "yes" : el("span", {class: "err"}, "no"), s.applied_index ?? "—", s.replication_lag ?? "—", ago(s.last_contact)],
      {"data-id": s.id, "data-leader": String(!!s.leader), "data-reachable": String(!!s.reachable), "data-suffrage": String(s.suffrage || ""), "data-catching-up": String(!!s.catching_up)})));
    show(out,
      dl(el("dl"), [["Answered by", c.node_id + " (" + c.role + ")"], ["Leader", (c.leader || "none") + (c.leader_raft_addr ? " (" + c.leader_raft_addr + ")" : "")],
        ["Term", c.term], ["Commit index", c.commit_index], ["Applied index", c.applied_index]]),
      // The wrapper scrolls on a phone; it is focusable so keys scroll it too.
      el("div", {class: "tw", tabindex: "0", role: "region", "aria-label": "Raft servers table"}, el("table", {id: "c-table"}, el("caption", null, "Raft servers"),
        el("thead", null, row("th", ["ID", "Role", "HTTP address", "Raft address", "Reachable", "Applied", "Lag", "Last contact"])), tb)),
      el("p", {class: "hint"}, "Applied is the last log index a server applied; lag is how many entries that is behind the leader. Unreachable servers show —. A server catching up joined to vote: it counts towards the quorum once the leader promotes it."));
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
    // A node without a leader still serves redirects (200), but takes no
    // creates: say so next to the status, where a failed create sends one.
    const writes = d.writes === "unavailable" ? el("span", {class: "err"}, " · writes unavailable (" + (d.writes_reason || "?") + ")") : "";
    h.replaceChildren(el("span", {class: res.ok ? "okc" : "err"}, "● " + (d.status || res.status) + (d.reason ? " (" + d.reason + ")" : "")), writes,
      " · node " + d.node_id + " · role " + d.role + " · leader " + (d.leader || "none") + " · " + d.links + " links · applied " + d.applied_index + (d.version ? " · " + d.version : ""));
    // A node says no_leader as its reason, or as why writes are refused
    // (writes_reason) where /health stays 200 without a leader.
    const paused = d.reason === "no_leader" || d.writes_reason === "no_leader";
    $("paused").hidden = !paused;
    if (paused) show($("paused"), ...noLeaderNote());
    else show($("paused"));
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

/* Views: #/ (shorten and look up), #/links, #/overview, #/keys,
   #/link/{code}, #/edit/{code} (those two with ?domain= off the default
   domain), #/cluster. */
const VIEWS = {home: "h-s", links: "h-ls", overview: "h-ov", keys: "h-k", link: "h-l", edit: "h-e", cluster: "h-c"};
const TITLES = {home: "linkraft", links: "Links · linkraft", overview: "Overview · linkraft", keys: "Keys · linkraft", cluster: "Cluster · linkraft"};
function route() {
  const h = location.hash.replace(/^#\/?/, ""), m = /^(link|edit)\/([^/?]+)(?:\?(.*))?$/.exec(h);
  if (m) {
    let code = m[2];
    try { code = decodeURIComponent(code); } catch (_) {}
    return {view: m[1], code, domain: new URLSearchParams(m[3] || "").get("domain") || ""};
  }
  return {view: ["links", "overview", "keys", "cluster"].includes(h) ? h : "home"};
}
function render(moveFocus) {
  const r = route();
  for (const v in VIEWS) $("v-" + v).hidden = v !== r.view;
  for (const v in TITLES) r.view === v ? $("n-" + v).setAttribute("aria-current", "page") : $("n-" + v).removeAttribute("aria-current");
  linkPoll.stop(); clusterPoll.stop(); overviewPoll.stop();
  if (r.view === "link") { openLink(r.code, r.domain); linkPoll.start(); }
  else if (r.view === "edit") openEdit(r.code, r.domain);
  else document.title = TITLES[r.view];
  if (r.view === "links") { loadTags(); loadLinks(true); }
  if (r.view === "overview") { loadOverviewChoices(); overviewPoll.start(); }
  if (r.view === "keys") { hideSecret(); loadKeys(); }
  if (r.view === "cluster") clusterPoll.start();
  if (moveFocus) $(VIEWS[r.view]).focus();
}
// go shows a view; the same hash again (a reused link) fires no hashchange.
function go(hash) { location.hash === hash ? render(true) : location.hash = hash; }
window.addEventListener("hashchange", () => render(true));
poller(health, 5000).start();
render(false);

// Switchboard operator console. Plain JavaScript, no build step, served
// from the gateway binary. The admin token lives in sessionStorage (this
// tab only) and travels in the Authorization header; live data comes over
// the gateway's own Server-Sent Events, read with fetch so that the
// header can be sent (EventSource cannot send one).
"use strict";

const TOKEN_KEY = "switchboard.adminToken";
const $ = (sel) => document.querySelector(sel);
let live = null; // AbortController of the open stream, if any

function token() { return sessionStorage.getItem(TOKEN_KEY); }
function auth() { return { Authorization: "Bearer " + token() }; }

// Builds an element; children are nodes or text (never parsed as HTML:
// message contents come from agents).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function status(text) { $("#status").textContent = text; }

async function api(path, options = {}) {
  const res = await fetch("/api/admin" + path, {
    ...options,
    headers: { ...auth(), ...(options.body ? { "Content-Type": "application/json" } : {}) },
  });
  const body = await res.json().catch(() => ({}));
  if (res.status === 401) { signOut("The admin token was refused."); throw new Error("unauthorized"); }
  if (!res.ok) throw new Error((body.error && body.error.message) || ("HTTP " + res.status));
  return body;
}

// Reads a text/event-stream with fetch; calls onEvent(name, data) per
// event. Resolves when the stream ends; reconnection is the caller's.
async function stream(path, onEvent, signal) {
  const res = await fetch("/api/admin" + path, { headers: auth(), signal });
  if (res.status === 401) { signOut("The admin token was refused."); return; }
  if (!res.ok) throw new Error("HTTP " + res.status);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let name = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) onEvent(name, JSON.parse(data));
    }
  }
}

// Keeps a stream open: reconnects one second after it ends or fails.
function follow(path, onEvent) {
  if (live) live.abort();
  const ctl = new AbortController();
  live = ctl;
  (async () => {
    while (!ctl.signal.aborted) {
      try { status("live"); await stream(path, onEvent, ctl.signal); }
      catch (e) { if (ctl.signal.aborted) return; status("reconnecting: " + e.message); }
      await new Promise((r) => setTimeout(r, 1000));
    }
  })();
}

function signOut(reason) {
  sessionStorage.removeItem(TOKEN_KEY);
  if (live) live.abort();
  $("#tabs").hidden = true;
  $("#view").hidden = true;
  $("#login").hidden = false;
  $("#login-error").textContent = reason || "";
}

async function signIn(e) {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
  $("#token").value = "";
  try { await api("/nodes"); } catch (err) {
    if (token()) { sessionStorage.removeItem(TOKEN_KEY); $("#login-error").textContent = err.message; }
    return;
  }
  route();
}

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return Math.round(s / 3600) + " h";
}

// ---- Nodes -------------------------------------------------------------

function nodesPage(view) {
  const table = el("table", { id: "nodes" });
  view.append(el("h2", {}, "Nodes"), table,
    el("p", { class: "muted" }, "Every node sharing this store; each reports every 2 s."));
  follow("/nodes/live", (name, data) => {
    if (name !== "nodes") return;
    table.replaceChildren(el("tr", {}, ["node", "version", "uptime", "connections", "held polls",
      "feeds", "deliveries/s", "p99 delivery", "canary", "Bays"].map((h) => el("th", {}, h))));
    for (const n of data.nodes) {
      const conns = Object.entries(n.connections).map(([t, c]) => t + " " + c).join(", ") || "none";
      table.append(el("tr", { "data-node": n.id },
        el("td", {}, n.id, n.id === data.self ? el("span", { class: "muted" }, " (this node)") : null),
        el("td", {}, n.version), el("td", {}, ago(n.startedMs)), el("td", {}, conns),
        el("td", {}, n.heldPolls), el("td", {}, n.feeds),
        el("td", {}, n.deliveriesPerSecond.toFixed(1)),
        el("td", {}, n.deliveryP99Ms == null ? "–" : "≤ " + n.deliveryP99Ms + " ms"),
        el("td", {}, n.canaryMs == null ? "–" : n.canaryMs.toFixed(1) + " ms"),
        el("td", {}, n.bays.map((b) => el("a", { href: "#/bays/" + encodeURIComponent(b) }, b, " ")))));
    }
  });
}

// ---- Bays and conversations -------------------------------------------

function bayPicker(view, target) {
  const input = el("input", { id: "bay-id", placeholder: "Bay id", required: "" });
  view.append(el("form", { id: "bay-form", onsubmit: (e) => {
    e.preventDefault(); location.hash = target + encodeURIComponent(input.value.trim());
  } }, input, el("button", { type: "submit" }, "Open")));
}

async function baysPage(view, bay) {
  view.append(el("h2", {}, "Bays"));
  bayPicker(view, "#/bays/");
  if (!bay) {
    const { bays } = await api("/bays");
    view.append(el("table", { id: "bays" },
      el("tr", {}, ["Bay", "name", "agents", "humans", "conversations", "present now", "feeds on"].map((h) => el("th", {}, h))),
      bays.map((b) => el("tr", { "data-bay": b.id },
        el("td", {}, el("a", { href: "#/bays/" + encodeURIComponent(b.id) }, b.id)),
        el("td", {}, b.name), el("td", {}, b.agents), el("td", {}, b.humans),
        el("td", {}, b.conversations), el("td", {}, b.online),
        el("td", {}, b.feedsOn.length ? b.feedsOn.join(", ") : el("span", { class: "muted" }, "no node"))))),
    el("p", { class: "muted" }, bays.length + " Bays in the store."));
    return;
  }
  const data = await api("/bays/" + encodeURIComponent(bay) + "/conversations");
  const table = el("table", { id: "conversations" },
    el("tr", {}, ["conversation", "type", "title", "members"].map((h) => el("th", {}, h))));
  for (const c of data.conversations) {
    table.append(el("tr", {},
      el("td", {}, el("a", { href: "#/bays/" + encodeURIComponent(bay) + "/" + encodeURIComponent(c.id),
        "data-conversation": c.id }, c.id)),
      el("td", {}, c.type), el("td", {}, c.title || ""),
      el("td", {}, c.members.map((m) => m.name || m.id).join(", "))));
  }
  view.append(el("h3", {}, data.bay.name + " (" + bay + ")"), table,
    el("p", {}, el("a", { href: "#/webhooks/" + encodeURIComponent(bay) }, "Webhooks of this Bay")));
}

function conversationPage(view, bay, cid) {
  const members = el("table", { id: "members" });
  const messages = el("ul", { class: "messages", id: "messages" });
  const routing = el("div", { id: "routing" });
  const as = el("select", { id: "post-as" });
  const text = el("textarea", { id: "post-text", placeholder: "Message (mention agents with @Name)" });
  const form = el("form", { class: "post", id: "post-form", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const r = await api("/bays/" + encodeURIComponent(bay) + "/conversations/" + encodeURIComponent(cid) + "/messages",
        { method: "POST", body: JSON.stringify({ as: as.value, content: text.value }) });
      text.value = "";
      routing.replaceChildren(el("h3", {}, "Routing of the last post"), el("table", {},
        el("tr", {}, el("th", {}, "recipient"), el("th", {}, "shouldRespond")),
        r.recipients.map((p) => el("tr", { "data-recipient": p.id }, el("td", {}, p.name || p.id, " ", el("span", { class: "muted" }, p.kind)),
          el("td", { class: p.shouldRespond ? "yes" : "no" }, String(p.shouldRespond))))));
    } catch (err) { routing.replaceChildren(el("p", { class: "error" }, err.message)); }
  } }, as, text, el("button", { type: "submit" }, "Post"));
  view.append(el("h2", {}, "Conversation " + cid, el("span", { class: "muted" }, " in " + bay)),
    el("div", { class: "columns" },
      el("div", { class: "card" }, el("h3", {}, "Members"), members),
      el("div", { class: "card" }, el("h3", {}, "Messages"), messages, form, routing)));

  const state = { members: new Map(), byId: new Map() };
  const drawMembers = () => {
    members.replaceChildren(...[...state.members.values()].map((m) =>
      el("tr", { "data-member": m.id, "data-presence": m.presence, "data-transports": (m.transports || []).join(" ") },
        el("td", {}, m.name || m.id, el("div", { class: "muted" }, m.kind + " · " + (m.role || ""))),
        el("td", {}, el("span", { class: "presence " + m.presence }, m.presence),
          el("div", { class: "ways" }, ways(m))))));
    const chosen = as.value;
    as.replaceChildren(...[...state.members.values()].map((m) => el("option", { value: m.id }, "as " + (m.name || m.id))));
    if (chosen) as.value = chosen;
  };
  // Each transport with where it lands: the node of a session, or the
  // webhook's health.
  const ways = (m) => {
    const out = [];
    for (const s of m.sessions || []) {
      for (const t of s.transports) {
        out.push(el("span", { class: "transport" + (s.lingering ? " lingering" : ""), "data-transport": t,
          title: (s.lingering ? "ended, lingering on " : "on node ") + s.node }, t, el("small", {}, " " + s.node.slice(-6))));
      }
    }
    if (m.webhook) {
      const node = m.webhook.node;
      out.push(el("span", { class: "transport" + (m.webhook.failing ? " failing" : ""), "data-transport": "webhook",
        title: m.webhook.url + (node ? ", delivered by node " + node : ", no node delivering now") },
        "webhook", el("small", {}, (node ? " " + node.slice(-6) : "") + (m.webhook.failing ? " failing" : ""))));
    }
    return out;
  };
  const name = (id) => (state.members.get(id) || {}).name || id;
  const drawMessage = (m) => {
    const li = el("li", { "data-message-id": m.id, class: m.streaming ? "streaming" : "" },
      el("span", { class: "who" }, m.sender.name), el("span", { class: "content" }, m.deleted ? "(deleted)" : m.content),
      el("div", { class: "routing" }, m.suppressed ? "round cap: nobody should respond"
        : m.respondents.length ? "should respond: " + m.respondents.map(name).join(", ") : ""));
    const old = state.byId.get(m.id);
    if (old) old.replaceWith(li); else messages.append(li);
    state.byId.set(m.id, li);
    messages.scrollTop = messages.scrollHeight;
  };
  follow("/bays/" + encodeURIComponent(bay) + "/conversations/" + encodeURIComponent(cid) + "/live", (name, d) => {
    if (name === "view") {
      state.members = new Map(d.members.map((m) => [m.id, m]));
      drawMembers();
      messages.replaceChildren(); state.byId.clear();
      d.messages.forEach(drawMessage);
    } else if (name === "message") drawMessage(d);
    else if (name === "delta") {
      const li = state.byId.get(d.id);
      const c = li && li.querySelector(".content");
      if (c) c.textContent = c.textContent.slice(0, d.offset) + d.text;
    } else if (name === "ended") {
      const li = state.byId.get(d.id);
      if (li) { li.classList.remove("streaming"); li.querySelector(".routing").textContent = d.state; }
    } else if (name === "sessions") {
      for (const w of d.members) {
        const m = state.members.get(w.id);
        if (m) { m.transports = w.transports; m.sessions = w.sessions; m.webhook = w.webhook; }
      }
      drawMembers();
    } else if (name === "presence") {
      const m = state.members.get(d.participant);
      if (m) { m.presence = d.state; drawMembers(); }
    } else if (name === "roster" || name === "reset") {
      follow.restart();
    }
  });
  follow.restart = () => route();
}

// ---- Webhooks ----------------------------------------------------------

async function webhooksPage(view, bay) {
  view.append(el("h2", {}, "Webhooks"));
  bayPicker(view, "#/webhooks/");
  if (!bay) return;
  const when = (t) => (t ? new Date(t).toLocaleString() : "–");
  const table = el("table", { id: "webhooks" });
  const updated = el("p", { class: "muted", id: "webhooks-updated" });
  view.append(el("h3", {}, "Bay " + bay), table, updated);
  // Pushed by the gateway whenever a delivery succeeds or fails or a
  // backlog moves; nothing here polls.
  follow("/bays/" + encodeURIComponent(bay) + "/webhooks/live", (name, data) => {
    if (name === "error") { updated.textContent = "store trouble: " + data.message; return; }
    if (name !== "webhooks") return;
    table.replaceChildren(
      el("tr", {}, ["agent", "url", "last delivery", "last error", "failing since", "backlog"].map((h) => el("th", {}, h))),
      ...data.webhooks.map((w) => el("tr", { "data-agent": w.agent, "data-failing": w.failingSince ? "yes" : "no" },
        el("td", {}, w.name, el("div", { class: "muted" }, w.agent)),
        el("td", {}, w.url || el("span", { class: "muted" }, "none")),
        el("td", {}, when(w.lastDeliveredAt)), el("td", { class: w.lastError ? "error" : "" }, w.lastError || "–"),
        el("td", { class: w.failingSince ? "error" : "" }, when(w.failingSince)),
        el("td", {}, w.backlog + (w.backlogCapped ? "+" : "")))));
    updated.textContent = "Live; last change " + new Date().toLocaleTimeString() + ".";
  });
}

// ---- Routing -----------------------------------------------------------

async function route() {
  if (!token()) { signOut(); return; }
  if (live) { live.abort(); live = null; }
  $("#login").hidden = true;
  $("#tabs").hidden = false;
  const view = $("#view");
  view.hidden = false;
  view.replaceChildren();
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const tab = parts[0] || "nodes";
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.tab === tab);
  try {
    if (tab === "bays" && parts[2]) conversationPage(view, parts[1], parts[2]);
    else if (tab === "bays") await baysPage(view, parts[1]);
    else if (tab === "webhooks") await webhooksPage(view, parts[1]);
    else nodesPage(view);
  } catch (err) { view.append(el("p", { class: "error" }, err.message)); }
}

$("#login-form").addEventListener("submit", signIn);
$("#logout").addEventListener("click", () => signOut());
window.addEventListener("hashchange", route);
route();

// The console's page: it reads the daemon's JSON API every few seconds and answers
// approvals. Everything shown is put in as text, never as markup.
"use strict";

const REFRESH_MS = 2000;

async function api(path, options = {}) {
  const answer = await fetch(path, { credentials: "same-origin", ...options });
  if (answer.status === 401) {
    location.replace("/");
    throw new Error("logged out");
  }
  const body = answer.status === 204 ? null : await answer.json();
  if (!answer.ok) {
    throw new Error((body && body.error) || `the daemon answered ${answer.status}`);
  }
  return body;
}

function element(tag, text, className) {
  const made = document.createElement(tag);
  if (text !== undefined) made.textContent = text;
  if (className) made.className = className;
  return made;
}

function when(ms) {
  return new Date(ms).toLocaleString();
}

function showStatus(status) {
  const parts = [`ryvosd ${status.version}`, `store ${status.store}`, status.sandbox];
  if (status.parked && status.parked.length) parts.push(`${status.parked.length} parked`);
  document.getElementById("daemon").textContent = parts.join(" · ");
}

// Keeps list `listId` showing one item per entry of `entries` (by `keyOf`), made by `make`:
// items already shown stay as they are (a reason being typed is kept), gone ones leave.
function showKeyed(listId, emptyId, entries, keyOf, make) {
  const list = document.getElementById(listId);
  document.getElementById(emptyId).hidden = entries.length > 0;
  const kept = new Set(entries.map(keyOf));
  for (const item of [...list.children]) {
    if (!kept.has(item.dataset.key)) item.remove();
  }
  const shown = new Set([...list.children].map((item) => item.dataset.key));
  for (const entry of entries) {
    if (shown.has(keyOf(entry))) continue;
    const item = make(entry);
    item.dataset.key = keyOf(entry);
    list.append(item);
  }
}

function showApprovals(approvals) {
  showKeyed("approvals", "no-approvals", approvals, (a) => a.request_id, approvalItem);
}

function approvalItem(approval) {
  const item = element("li", undefined, "approval");
  item.append(element("h3", `${approval.tool} (${approval.tier})`));
  item.append(element("p", `session ${approval.session_id} · asked ${when(approval.asked_at_ms)}`));
  item.append(element("pre", JSON.stringify(approval.input, null, 2)));
  const reason = element("input");
  reason.placeholder = "reason (optional)";
  reason.setAttribute("aria-label", `reason for ${approval.request_id}`);
  const approve = element("button", "Approve", "approve");
  const deny = element("button", "Deny", "deny");
  for (const [button, action] of [[approve, "approve"], [deny, "deny"]]) {
    button.type = "button";
    const path = `/api/approvals/${encodeURIComponent(approval.request_id)}/${action}`;
    button.addEventListener("click", () => act(path, { reason: reason.value || null }, item));
  }
  item.append(reason, approve, deny);
  return item;
}

function showParked(parked) {
  showKeyed("parked", "no-parked", parked, (p) => p.run_id, parkedItem);
}

function parkedItem(run) {
  const item = element("li", undefined, "approval");
  item.append(element("h3", `run ${run.run_id} (${run.reason})`));
  item.append(element("p", `session ${run.session_id} · ${run.cost_cents.toFixed(2)} cents spent`));
  const budget = element("input");
  budget.type = "number";
  budget.min = "0";
  budget.placeholder = "new budget, cents";
  budget.setAttribute("aria-label", `new budget for ${run.run_id}, in cents`);
  const go = element("button", "Continue", "approve");
  const stop = element("button", "Stop", "deny");
  go.type = stop.type = "button";
  go.addEventListener("click", () => {
    const cents = budget.value === "" ? null : Number(budget.value);
    act(`/api/runs/${encodeURIComponent(run.run_id)}/continue`, { budget_cents: cents }, item);
  });
  stop.addEventListener("click", () => act(`/api/runs/${encodeURIComponent(run.run_id)}/stop`, {}, item));
  item.append(budget, go, stop);
  return item;
}

// POSTs `body` to `path` for the list item's buttons; the item leaves once it is done.
async function act(path, body, item) {
  for (const button of item.querySelectorAll("button")) button.disabled = true;
  try {
    await api(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    item.remove();
    refresh();
  } catch (e) {
    problem(e);
    for (const button of item.querySelectorAll("button")) button.disabled = false;
  }
}

function showSessions(sessions) {
  const body = document.getElementById("sessions");
  body.replaceChildren(
    ...sessions.map((session) => {
      const row = element("tr");
      const open = element("button", session.title || session.session_id, "open");
      open.type = "button";
      open.addEventListener("click", () => openSession(session.session_id));
      const name = element("td");
      name.append(open);
      row.append(
        name,
        element("td", session.last_run ? session.last_status || "running" : "none"),
        element("td", when(session.updated_at_ms)),
        element("td", session.workspace || ""),
      );
      return row;
    }),
  );
}

function problem(e) {
  document.getElementById("problem").textContent = e ? String(e.message || e) : "";
}

async function refresh() {
  const filter = document.getElementById("status-filter").value;
  const query = filter ? `?status=${encodeURIComponent(filter)}` : "";
  try {
    const [status, approvals, sessions] = await Promise.all([
      api("/api/status"),
      api("/api/approvals"),
      api(`/api/sessions${query}`),
    ]);
    showStatus(status);
    showParked(status.parked || []);
    showApprovals(approvals);
    showSessions(sessions);
    problem(null);
  } catch (e) {
    problem(e);
  }
}

// The session shown: its stored messages, then its events as they happen.
let following = null;

function messageText(message) {
  if (message.content !== undefined && typeof message.content === "string") return message.content;
  if (message.text) return message.text;
  return JSON.stringify(message);
}

async function openSession(id) {
  const panel = document.getElementById("session");
  panel.hidden = false;
  opened = id;
  document.getElementById("session-title").textContent = `Session ${id}`;
  document.getElementById("rewind-state").textContent = "";
  const history = await api(`/api/sessions/${encodeURIComponent(id)}`).catch((e) => {
    problem(e);
    return { messages: [], turns: [] };
  });
  const turns = history.turns || [];
  document.getElementById("messages").replaceChildren(
    ...history.messages.flatMap((stored) => {
      const message = stored.message;
      const item = element("li", undefined, `message ${message.role}`);
      item.append(element("strong", `${message.role} `), element("span", messageText(message)));
      for (const call of message.tool_calls || []) {
        item.append(element("pre", `${call.name} ${call.arguments}`));
      }
      const ended = turns.filter((turn) => turn.last_seq === stored.seq);
      return [item, ...ended.map((turn) => turnItem(id, turn))];
    }),
  );
  document.getElementById("undo-rewind").hidden = !(history.session && history.session.last_rewind);
  follow(id);
  document.getElementById("close-session").focus();
}

// The session open, for its buttons.
let opened = null;

// Where a turn ended: what it can be rewound to, or why not.
function turnItem(id, turn) {
  const item = element("li", undefined, "turn");
  item.append(element("span", `Turn ${turn.turn} (run ${turn.run_id}, its turn ${turn.run_turn}) `));
  if (turn.not_rewindable) {
    item.append(element("span", `cannot be gone back to: ${turn.not_rewindable}`));
    return item;
  }
  const rewind = element("button", `Rewind to turn ${turn.turn}`, "rewind");
  const fork = element("button", `Fork at turn ${turn.turn}`, "fork");
  rewind.type = fork.type = "button";
  const body = { turn: turn.turn };
  armed(rewind, `Confirm: files and conversation back to turn ${turn.turn}`, () => rewindTo(id, body, rewind));
  fork.addEventListener("click", () => forkAt(id, body, fork));
  item.append(rewind, fork);
  return item;
}

// A button that acts on its second press: the first says what it will do.
function armed(button, confirming, action) {
  const label = button.textContent;
  const disarm = () => { delete button.dataset.armed; button.textContent = label; };
  button.addEventListener("click", () => {
    if (!button.dataset.armed) {
      button.dataset.armed = "yes";
      button.textContent = confirming;
      return;
    }
    disarm();
    action();
  });
  button.addEventListener("blur", disarm);
}

async function rewindTo(id, body, button) {
  button.disabled = true;
  try {
    const done = await api(`/api/sessions/${encodeURIComponent(id)}/rewind`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    await openSession(id);
    const left = done.not_undone.length ? ` Not undone: ${done.not_undone.join("; ")}.` : "";
    document.getElementById("rewind-state").textContent =
      `Went back to ${done.to}: ${done.files_written} written and ${done.files_removed} removed in ${done.workspace}.${left}`;
    refresh();
  } catch (e) {
    problem(e);
  }
  button.disabled = false;
}

async function forkAt(id, body, button) {
  button.disabled = true;
  try {
    const made = await api(`/api/sessions/${encodeURIComponent(id)}/fork`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    document.getElementById("rewind-state").textContent =
      `Forked at ${made.at} as session ${made.session_id}, working in ${made.workspace} (${made.files} paths copied).`;
    refresh();
  } catch (e) {
    problem(e);
  }
  button.disabled = false;
}

function follow(id) {
  if (following) following.close();
  const live = document.getElementById("live");
  const text = document.getElementById("live-text");
  const state = document.getElementById("live-state");
  live.replaceChildren();
  text.textContent = "";
  following = new EventSource(`/api/sessions/${encodeURIComponent(id)}/events`);
  following.onopen = () => { state.textContent = "Following the session as it runs."; };
  following.onerror = () => { state.textContent = "Reconnecting…"; };
  following.addEventListener("lagged", (sent) => {
    live.append(element("li", `${sent.data} events were missed`));
  });
  following.onmessage = (sent) => {
    const event = JSON.parse(sent.data);
    if (event.type === "TextDelta") {
      text.textContent += event.text;
      return;
    }
    if (event.type === "ModelUsage") return;
    live.append(element("li", describe(event)));
    if (["RunComplete", "ApprovalRequested", "ApprovalResolved", "RunParked"].includes(event.type)) {
      refresh();
    }
  };
}

function describe(event) {
  switch (event.type) {
    case "ToolStart": return `tool ${event.name} ${JSON.stringify(event.input)}`;
    case "ToolEnd": return `${event.name} ${event.is_error ? "failed" : "done"}: ${event.output}`;
    case "CheckpointSaved": return `turn ${event.turn} stored`;
    case "ApprovalRequested": return `waiting for approval: ${event.tool}`;
    case "ApprovalResolved": return `${event.approved ? "approved" : "denied"} by ${event.by}`;
    case "RunComplete": return `run ${event.status}${event.reason ? `: ${event.reason}` : ""}`;
    default: return `${event.type}${event.message ? `: ${event.message}` : ""}`;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("close-session").addEventListener("click", () => {
    if (following) following.close();
    following = null;
    document.getElementById("session").hidden = true;
  });
  const undo = document.getElementById("undo-rewind");
  armed(undo, "Confirm: back to before the last rewind", () => {
    if (opened) rewindTo(opened, { undo: true }, undo);
  });
  document.getElementById("status-filter").addEventListener("change", refresh);
  document.getElementById("log-out").addEventListener("click", async () => {
    await api("/api/logout", { method: "POST" }).catch(() => {});
    location.replace("/");
  });
  refresh();
  setInterval(refresh, REFRESH_MS);
});

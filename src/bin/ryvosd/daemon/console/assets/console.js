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

function showApprovals(approvals) {
  const list = document.getElementById("approvals");
  document.getElementById("no-approvals").hidden = approvals.length > 0;
  const kept = new Set(approvals.map((a) => a.request_id));
  for (const item of [...list.children]) {
    if (!kept.has(item.dataset.request)) item.remove();
  }
  for (const approval of approvals) {
    if (list.querySelector(`[data-request="${CSS.escape(approval.request_id)}"]`)) continue;
    list.append(approvalItem(approval));
  }
}

function approvalItem(approval) {
  const item = element("li", undefined, "approval");
  item.dataset.request = approval.request_id;
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
    button.addEventListener("click", () => answer(approval.request_id, action, reason.value, item));
  }
  item.append(reason, approve, deny);
  return item;
}

async function answer(requestId, action, reason, item) {
  for (const button of item.querySelectorAll("button")) button.disabled = true;
  try {
    await api(`/api/approvals/${encodeURIComponent(requestId)}/${action}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ reason: reason || null }),
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
      row.append(
        element("td", session.title || session.session_id),
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
    showApprovals(approvals);
    showSessions(sessions);
    problem(null);
  } catch (e) {
    problem(e);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("status-filter").addEventListener("change", refresh);
  document.getElementById("log-out").addEventListener("click", async () => {
    await api("/api/logout", { method: "POST" }).catch(() => {});
    location.replace("/");
  });
  refresh();
  setInterval(refresh, REFRESH_MS);
});

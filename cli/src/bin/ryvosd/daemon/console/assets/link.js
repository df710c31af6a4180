// An approval link's page: the link (in the address's fragment, which the browser never
// sends to a server) is read, the request it is for is shown, and nothing happens until the
// person clicks. A link preview fetches the page and acts on nothing.
"use strict";

let link = null;

function say(text) {
  document.getElementById("link-status").textContent = text;
}

function requestId() {
  return decodeURIComponent(location.pathname.split("/").pop());
}

async function post(what, body) {
  const answer = await fetch(`/api/links/${encodeURIComponent(requestId())}/${what}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const said = await answer.json().catch(() => ({}));
  if (!answer.ok) throw new Error(said.error || `the daemon answered ${answer.status}`);
  return said;
}

function show(looked) {
  const request = looked.request;
  document.getElementById("link-tool").textContent = `${request.tool} (run ${request.run_id})`;
  document.getElementById("link-tier").textContent = `Tier ${request.tier}`;
  document.getElementById("link-input").textContent = JSON.stringify(request.input, null, 2);
  const reasons = document.getElementById("link-reasons");
  for (const reason of request.reasons || []) {
    const item = document.createElement("li");
    item.textContent = reason;
    reasons.append(item);
  }
  const act = document.getElementById("link-act");
  act.textContent = looked.action === "approve" ? "Approve" : "Deny";
  act.className = looked.action;
  document.getElementById("link-request").hidden = false;
  say(`This link will ${looked.action} the call below, once.`);
  act.focus();
}

async function use(event) {
  event.preventDefault();
  const act = document.getElementById("link-act");
  act.disabled = true;
  const reason = document.getElementById("link-reason").value.trim() || null;
  try {
    const answered = await post("use", { link, reason });
    say(answered.approved ? "Approved: the run goes on." : "Denied: the run was told.");
    document.getElementById("link-form").hidden = true;
  } catch (error) {
    say(error.message);
    act.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", async () => {
  link = new URLSearchParams(location.hash.slice(1)).get("link");
  history.replaceState(null, "", location.pathname);
  document.getElementById("link-form").addEventListener("submit", use);
  if (!link) {
    say("This address holds no link: open the whole link from the notification.");
    return;
  }
  try {
    show(await post("look", { link }));
  } catch (error) {
    say(error.message);
  }
});

// Trades the one-time code for a session: from the address's fragment (which the browser
// never sends to a server), or typed in. The fragment is cleared at once.
"use strict";

async function logIn(code) {
  const status = document.getElementById("login-status");
  status.textContent = "Logging in…";
  const answer = await fetch("/api/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ code }),
    credentials: "same-origin",
  });
  if (answer.ok) {
    location.replace("/");
    return;
  }
  const body = await answer.json().catch(() => ({}));
  status.textContent = body.error || "The login was refused.";
}

document.addEventListener("DOMContentLoaded", () => {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const code = fragment.get("code");
  if (code) {
    history.replaceState(null, "", location.pathname);
    logIn(code);
  }
  document.getElementById("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    logIn(document.getElementById("login-code").value.trim());
  });
});

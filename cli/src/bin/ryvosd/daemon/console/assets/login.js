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

// The code in the address's fragment, if any, taken out of the address bar and used.
function codeFromAddress() {
  const code = new URLSearchParams(location.hash.slice(1)).get("code");
  if (code) {
    history.replaceState(null, "", location.pathname);
    logIn(code);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  codeFromAddress();
  // A link pasted into this page's own tab changes only the fragment: no new page loads.
  window.addEventListener("hashchange", codeFromAddress);
  document.getElementById("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    logIn(document.getElementById("login-code").value.trim());
  });
});

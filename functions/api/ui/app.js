// The page: the token (pasted, or minted where the server allows it), then designs, batches,
// schedules and webhooks.

import { api, token, tenantOf } from "./api.js";
import { $, announce } from "./dom.js";
import * as designs from "./designs.js";
import * as batches from "./batches.js";
import * as schedules from "./schedules.js";
import * as webhooks from "./webhooks.js";
import * as live from "./live.js";

async function signIn(t) {
  token.set(t);
  try {
    await designs.loadList();
  } catch (e) {
    token.clear();
    announce(e.status === 401 ? "The server did not accept that token." : `Signing in failed: ${e.message}`, true);
    return;
  }
  const tenant = tenantOf(t);
  $("who").textContent = tenant ? `Tenant ${tenant}` : "Signed in";
  $("signed-in").hidden = false;
  $("token-form").hidden = true;
  $("mint-form").hidden = true;
  $("signed-as").hidden = false;
  $("signed-as-text").textContent = tenant ? `Signed in as tenant ${tenant} with a token kept for this tab.` : "Signed in.";
  $("token-input").value = "";
  announce(tenant ? `Signed in as tenant ${tenant}.` : "Signed in.");
  live.start();
  await Promise.all([
    designs.loadTargets().catch((e) => announce(`The device list could not be read: ${e.message}`, true)),
    batches.loadList().catch((e) => announce(`The batches could not be read: ${e.message}`, true)),
    schedules.loadSchedules().catch((e) => announce(`The schedules could not be read: ${e.message}`, true)),
    webhooks.loadList().catch((e) => announce(`The webhooks could not be read: ${e.message}`, true)),
  ]);
}

function signOut(message = "The token was forgotten.") {
  live.stop();
  token.clear();
  designs.reset();
  batches.reset();
  schedules.resetSchedules();
  webhooks.reset();
  $("signed-in").hidden = true;
  $("signed-as").hidden = true;
  $("token-form").hidden = false;
  offerMinting();
  $("who").textContent = "Not signed in";
  announce(message, message !== "The token was forgotten.");
  $("token-input").focus();
}

/** Offers minting only where the server does (`openqq up --dev-tokens`): elsewhere the route is 404. */
async function offerMinting() {
  const offered = await api("/v1/dev/tokens").catch(() => null);
  $("mint-form").hidden = !offered?.enabled;
}

async function mint(event) {
  event.preventDefault();
  try {
    const body = await api("/v1/dev/tokens", { method: "POST", body: { tenant_id: $("mint-tenant").value.trim() } });
    await signIn(body.token);
  } catch (e) {
    announce(`No token was minted: ${e.message}`, true);
  }
}

function main() {
  designs.init();
  batches.init();
  schedules.initSchedules();
  webhooks.init();
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    signIn($("token-input").value.trim());
  });
  $("mint-form").addEventListener("submit", mint);
  $("sign-out").addEventListener("click", () => signOut());
  window.addEventListener("openqq:unauthorized", () => {
    if (!$("signed-in").hidden) signOut("The server no longer accepts this token (it may have expired): paste or mint another.");
  });
  offerMinting();
  const kept = token.get();
  if (kept) signIn(kept);
}

main();

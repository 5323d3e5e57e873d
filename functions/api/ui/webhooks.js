// Webhooks: register one (its secret is shown once), send a test, rotate the secret, delete it,
// and follow its deliveries.

import { api } from "./api.js";
import { h, $, announce, time, badge, fill } from "./dom.js";

export const KINDS = [
  "design.submitted", "generation.started", "generation.finished", "synthesis.started", "synthesis.finished",
  "simulation.finished", "equivalence.finished", "validation.started", "validation.finished", "results.ready",
  "design.failed", "batch.completed",
];

let watching = null; // the webhook whose deliveries are shown
let deliveriesTimer = null;

function actions(w) {
  const label = w.description || w.url;
  return h("td", { class: "actions" },
    h("button", { type: "button", class: "secondary", "aria-label": `Send test to ${label}`, onclick: () => test(w) }, "Send test"),
    h("button", { type: "button", class: "secondary", "aria-label": `Deliveries of ${label}`, onclick: () => showDeliveries(w) }, "Deliveries"),
    h("button", { type: "button", class: "secondary", "aria-label": `Rotate secret of ${label}`, onclick: () => rotate(w) }, "Rotate secret"),
    h("button", { type: "button", class: "danger", "aria-label": `Delete ${label}`, onclick: () => remove(w) }, "Delete"));
}

export async function loadList() {
  let body;
  try {
    body = await api("/v1/webhooks");
  } catch (e) {
    if (e.status === 404) {
      $("webhooks-unavailable").hidden = false;
      $("webhook-form").hidden = true;
      return;
    }
    throw e;
  }
  $("webhooks-unavailable").hidden = true;
  $("webhook-form").hidden = false;
  const items = body.items || [];
  fill($("webhook-table").tBodies[0], items.map((w) => h("tr", { "data-webhook": w.id },
    h("td", {}, h("span", { class: "mono" }, w.url), w.description ? h("div", { class: "help" }, w.description) : null),
    h("td", {}, (w.kinds || []).join(", ")),
    h("td", {}, time(w.created_at)),
    actions(w))));
  $("no-webhooks").hidden = items.length > 0;
  $("webhook-table").hidden = items.length === 0;
}

function showSecret(w, secret) {
  $("webhook-secret-for").textContent = w.description || w.url;
  $("webhook-secret-value").textContent = secret;
  $("webhook-secret").hidden = false;
  $("webhook-secret-done").focus();
}

async function create(event) {
  event.preventDefault();
  const kinds = [...document.querySelectorAll("#webhook-kinds input:checked")].map((i) => i.value);
  if (!kinds.length) {
    announce("Choose at least one event to send.", true);
    return;
  }
  const body = { url: $("webhook-url").value.trim(), kinds };
  const description = $("webhook-description").value.trim();
  if (description) body.description = description;
  try {
    const w = await api("/v1/webhooks", { method: "POST", body });
    announce(`The webhook to ${w.url} was added.`);
    event.target.reset();
    checkDefaults();
    await loadList();
    showSecret(w, w.secret);
  } catch (e) {
    announce(`The webhook was not added: ${e.message}`, true);
  }
}

async function test(w) {
  try {
    await api(`/v1/webhooks/${w.id}/test`, { method: "POST" });
    announce(`A test delivery to ${w.url} was queued.`);
    await showDeliveries(w);
  } catch (e) {
    announce(`The test was not sent: ${e.message}`, true);
  }
}

async function rotate(w) {
  if (!confirm(`Make a new secret for ${w.url}? The current one keeps signing for 24 hours.`)) return;
  try {
    const r = await api(`/v1/webhooks/${w.id}/rotate`, { method: "POST", body: {} });
    announce(`The secret was rotated; the old one is valid until ${new Date(r.previous_valid_until).toLocaleString()}.`);
    showSecret(w, r.secret);
  } catch (e) {
    announce(`The secret was not rotated: ${e.message}`, true);
  }
}

async function remove(w) {
  if (!confirm(`Delete the webhook to ${w.url}? Its pending deliveries go with it.`)) return;
  try {
    await api(`/v1/webhooks/${w.id}`, { method: "DELETE" });
    announce(`The webhook to ${w.url} was deleted.`);
    if (watching?.id === w.id) hideDeliveries();
    await loadList();
  } catch (e) {
    announce(`The webhook was not deleted: ${e.message}`, true);
  }
}

function answer(d) {
  if (d.last_status_code) return `HTTP ${d.last_status_code}`;
  return d.last_error || "—";
}

async function loadDeliveries() {
  const w = watching;
  if (!w) return;
  const body = await api(`/v1/webhooks/${w.id}/deliveries`);
  if (watching !== w) return;
  const items = body.items || [];
  fill($("delivery-table").tBodies[0], items.map((d) => h("tr", { "data-delivery": d.message_id, "data-status": d.status },
    h("td", {}, d.kind, d.design_id ? h("div", { class: "help mono" }, d.design_id) : null),
    h("td", {}, badge(d.status)),
    h("td", {}, d.attempts),
    h("td", {}, answer(d)),
    h("td", {}, d.status === "pending" ? time(d.next_attempt_at) : "—"),
    h("td", {}, time(d.updated_at)))));
  $("no-deliveries").hidden = items.length > 0;
  clearTimeout(deliveriesTimer);
  // While any delivery is still pending, read them again.
  if (items.some((d) => d.status === "pending") || !items.length) {
    deliveriesTimer = setTimeout(() => loadDeliveries().catch(() => {}), 1500);
  }
}

async function showDeliveries(w) {
  watching = w;
  $("deliveries").hidden = false;
  $("deliveries-title").textContent = `Deliveries to ${w.url}`;
  try {
    await loadDeliveries();
    $("deliveries-title").focus();
  } catch (e) {
    announce(`The deliveries could not be read: ${e.message}`, true);
  }
}

function hideDeliveries() {
  watching = null;
  clearTimeout(deliveriesTimer);
  $("deliveries").hidden = true;
}

function checkDefaults() {
  for (const input of document.querySelectorAll("#webhook-kinds input")) {
    input.checked = input.value === "results.ready" || input.value === "design.failed";
  }
}

export function init() {
  $("webhook-kinds").replaceChildren(...KINDS.map((k) => h("label", {},
    h("input", { type: "checkbox", name: "kinds", value: k }), k)));
  checkDefaults();
  $("webhook-form").addEventListener("submit", create);
  $("refresh-webhooks").addEventListener("click", () => loadList().catch((e) => announce(e.message, true)));
  $("refresh-deliveries").addEventListener("click", () => loadDeliveries().catch((e) => announce(e.message, true)));
  $("webhook-secret-done").addEventListener("click", () => {
    $("webhook-secret").hidden = true;
    $("webhook-secret-value").textContent = "";
  });
}

export function reset() {
  hideDeliveries();
  fill($("webhook-table").tBodies[0], []);
}

// Batches: the tenant's batches with their progress (the items by status as one bar, the
// verdicts), read again every POLL_MS while any of them is still open; one batch's facts and
// its items a page at a time, filtered by status; cancelling a batch. Batches are submitted
// through the API (`POST /v1/batches`) or `openqq batch submit`; a batch submitted elsewhere
// shows up when the tenant's feed next moves. The schedules that submit batches on a timetable
// are in schedules.js.

import { api } from "./api.js";
import { h, $, announce, time, badge, fill } from "./dom.js";
import { onEvent } from "./live.js";
import { open as openDesign } from "./designs.js";

/** Item statuses, in the order the bar draws them: ended ones first, then those on their way. */
const STATUSES = ["ready", "failed", "rejected", "cancelled", "validating", "queued"];
const FINAL = new Set(["completed", "cancelled", "failed"]);
const POLL_MS = 1500;
/** Batches per page of the list, and items per page of a batch. */
const LIST_PAGE = 20;
const ITEMS_PAGE = 20;

let shown = 0; // batches listed (the pages read so far)
let cursor = null; // the list's next page
let pollTimer = null;
let feedTimer = null;
let current = null; // the open batch's id
let pages = [null]; // the `after` of each items page read so far; the last is the one shown
let nextAfter = null;

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  el.append(...children);
  return el;
}

const total = (b) => STATUSES.reduce((n, s) => n + (b.counts?.[s] ?? 0), 0);
const done = (b) => total(b) - (b.counts?.queued ?? 0) - (b.counts?.validating ?? 0);

/** The counts in words: `412 of 1000 done: 400 ready, 10 failed, 2 rejected; 64 validating, 524 queued`. */
export function countsText(b) {
  const said = (list) => list.filter((s) => b.counts?.[s]).map((s) => `${b.counts[s]} ${s}`).join(", ");
  const ended = said(["ready", "failed", "rejected", "cancelled"]);
  const open = said(["validating", "queued"]);
  return `${done(b)} of ${total(b)} done${ended ? `: ${ended}` : ""}${open ? `; ${open}` : ""}`;
}

/** The items by status as one bar (each status a segment as wide as its count), and in words. */
function progress(b) {
  const n = Math.max(total(b), 1);
  let x = 0;
  const segments = STATUSES.filter((s) => b.counts?.[s]).map((s) => {
    const rect = svg("rect", { class: `seg seg-${s}`, x, y: 0, width: b.counts[s], height: 1, "data-status": s });
    x += b.counts[s];
    return rect;
  });
  const words = countsText(b);
  const bar = svg("svg", { class: "progress", viewBox: `0 0 ${n} 1`, preserveAspectRatio: "none", role: "img", "aria-label": words },
    svg("rect", { class: "seg-track", x: 0, y: 0, width: n, height: 1 }), ...segments);
  return h("div", { class: "batch-progress" }, bar, h("div", { class: "help counts" }, words));
}

const verdicts = (b) => `${b.verdicts?.pass ?? 0} pass, ${b.verdicts?.fail ?? 0} fail`;

function row(b) {
  const countAttrs = Object.fromEntries(STATUSES.map((s) => [`data-${s}`, b.counts?.[s] ?? 0]));
  const cancelButton = FINAL.has(b.status) || b.status === "cancelling" ? null
    : h("button", { type: "button", class: "danger", "aria-label": `Cancel batch ${b.name}`, onclick: () => cancel(b) }, "Cancel");
  return h("tr", { "data-batch": b.batch_id, "data-status": b.status, "data-done": done(b), "data-total": total(b), ...countAttrs },
    h("td", {}, h("button", { type: "button", class: "link", onclick: () => openBatch(b.batch_id) }, b.name || b.batch_id)),
    h("td", {}, badge(b.status)),
    h("td", { class: "progress-cell" }, progress(b)),
    h("td", { class: "verdicts" }, verdicts(b)),
    h("td", {}, time(b.created_at)),
    h("td", { class: "actions" }, cancelButton));
}

/** Reads the list (the pages read so far, or one more page) and keeps reading while a batch is open. */
export async function loadList(more = false) {
  let page;
  const limit = more ? LIST_PAGE : Math.min(100, Math.max(LIST_PAGE, shown));
  try {
    page = await api(`/v1/batches?limit=${limit}${more && cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
  } catch (e) {
    if (e.status === 404) {
      $("batches-unavailable").hidden = false;
      $("batch-list").hidden = true;
      return;
    }
    throw e;
  }
  $("batches-unavailable").hidden = true;
  $("batch-list").hidden = false;
  const list = page.batches || [];
  const tbody = $("batch-table").tBodies[0];
  if (more) tbody.append(...list.map(row)); else fill(tbody, list.map(row));
  shown = tbody.rows.length;
  cursor = page.next || null;
  $("more-batches").hidden = !cursor;
  $("no-batches").hidden = shown > 0;
  $("batch-table").hidden = shown === 0;
  if (current) await refreshOpen();
  schedule();
}

/** Reads again in POLL_MS while any batch shown (or the open one) is not final. */
function schedule() {
  clearTimeout(pollTimer);
  pollTimer = null;
  const rows = [...$("batch-table").tBodies[0].rows];
  const openOne = rows.some((r) => !FINAL.has(r.dataset.status)) || (current && !FINAL.has($("batch-detail").dataset.status));
  $("batches-live").textContent = openOne ? `Progress is read again every ${POLL_MS / 1000} s while a batch runs.` : "";
  if (openOne) pollTimer = setTimeout(() => loadList().catch((e) => announce(`The batches could not be read: ${e.message}`, true)), POLL_MS);
}

async function cancel(b) {
  if (!window.confirm(`Cancel batch ${b.name}? Its items not yet started are cancelled; those on their way finish.`)) return;
  try {
    const after = await api(`/v1/batches/${b.batch_id}/cancel`, { method: "POST" });
    announce(`Batch ${b.name} is ${after.status}: ${countsText(after)}.`);
    await loadList();
  } catch (e) {
    announce(`Batch ${b.name} was not cancelled: ${e.message}`, true);
  }
}

// ---- one batch -----------------------------------------------------------------------------

function facts(b) {
  const items = [
    ["Name", b.name], ["Id", h("code", {}, b.batch_id)], ["Status", badge(b.status)],
    ["Items", countsText(b)], ["Verdicts", verdicts(b)],
    ["Created", time(b.created_at)], ["Started", time(b.started_at)], ["Finished", time(b.finished_at)],
  ];
  if (b.max_failed !== undefined && b.max_failed !== null) items.push(["Fails past", `${b.max_failed} failed items`]);
  if (b.reason) items.push(["Reason", b.reason]);
  $("batch-facts").replaceChildren(...items.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function itemRow(i) {
  const design = i.design_id
    ? h("button", { type: "button", class: "link mono", "aria-label": `Open design ${i.design_id} of item ${i.index}`, onclick: () => openDesign(i.design_id) }, i.design_id)
    : "—";
  return h("tr", { "data-index": i.index, "data-status": i.status },
    h("td", { class: "num" }, i.index),
    h("td", {}, i.custom_id ?? "—"),
    h("td", {}, design),
    h("td", {}, badge(i.status)),
    h("td", {}, i.verdict ? badge(i.verdict, "v") : "—"),
    h("td", { class: "message" }, i.reason ?? ""));
}

/** Reads the items page shown (its `after` is the last of `pages`). */
async function loadItems() {
  const id = current;
  const status = $("batch-item-status").value;
  const after = pages[pages.length - 1];
  const page = await api(`/v1/batches/${id}/items?limit=${ITEMS_PAGE}${status ? `&status=${status}` : ""}${after !== null ? `&after=${after}` : ""}`);
  if (id !== current) return;
  const items = page.items || [];
  fill($("batch-items").tBodies[0], items.map(itemRow));
  nextAfter = page.next ?? null;
  $("no-batch-items").hidden = items.length > 0;
  $("batch-items").hidden = items.length === 0;
  $("batch-items-prev").disabled = pages.length === 1;
  $("batch-items-next").disabled = nextAfter === null;
  const range = items.length ? `items ${items[0].index} to ${items[items.length - 1].index}` : "no items";
  $("batch-items-range").textContent = `Page ${pages.length}: ${range}${status ? ` with status ${status}` : ""}.`;
}

/** Reads the open batch and, while it runs, its items page again. */
async function refreshOpen() {
  const id = current;
  const b = await api(`/v1/batches/${id}`);
  if (id !== current) return;
  const wasFinal = FINAL.has($("batch-detail").dataset.status);
  $("batch-detail").dataset.status = b.status;
  $("batch-title").textContent = `Batch ${b.name}`;
  facts(b);
  if (!wasFinal) await loadItems();
}

export async function openBatch(id) {
  current = id;
  pages = [null];
  $("batch-detail").dataset.status = "";
  $("batch-detail").hidden = false;
  try {
    await refreshOpen();
    $("batch-title").focus();
    schedule();
  } catch (e) {
    announce(`The batch could not be read: ${e.message}`, true);
  }
}

function turnPage(forward) {
  if (forward && nextAfter !== null) pages.push(nextAfter);
  else if (!forward && pages.length > 1) pages.pop();
  else return;
  loadItems().catch((e) => announce(`The items could not be read: ${e.message}`, true));
}

export function init() {
  const filter = $("batch-item-status");
  filter.replaceChildren(h("option", { value: "" }, "any status"), ...STATUSES.map((s) => h("option", { value: s }, s)));
  filter.addEventListener("change", () => {
    pages = [null];
    loadItems().catch((e) => announce(`The items could not be read: ${e.message}`, true));
  });
  $("batch-items-prev").addEventListener("click", () => turnPage(false));
  $("batch-items-next").addEventListener("click", () => turnPage(true));
  $("refresh-batches").addEventListener("click", () => loadList().catch((e) => announce(e.message, true)));
  $("more-batches").addEventListener("click", () => loadList(true).catch((e) => announce(e.message, true)));
  // A batch submitted elsewhere (its items' entries, or `batch.completed`): read the list again
  // a moment later, unless it is being read every POLL_MS already.
  onEvent(() => {
    if (pollTimer || feedTimer || $("signed-in").hidden) return;
    feedTimer = setTimeout(() => {
      feedTimer = null;
      loadList().catch(() => {});
    }, 500);
  });
}

export function reset() {
  clearTimeout(pollTimer);
  clearTimeout(feedTimer);
  pollTimer = feedTimer = null;
  current = null;
  cursor = null;
  shown = 0;
  pages = [null];
  $("batch-detail").hidden = true;
  fill($("batch-table").tBodies[0], []);
}

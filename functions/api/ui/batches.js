// Batches: the tenant's batches with their progress (the items by status as one bar, the
// verdicts), read again every POLL_MS while any of them is still open; one batch's facts and
// its items a page at a time, filtered by status; cancelling a batch. Batches are submitted
// through the API (`POST /v1/batches`) or `openqq batch submit`; a batch submitted elsewhere
// shows up when the tenant's feed next moves. The schedules that submit batches on a timetable
// follow (`loadSchedules`).

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

// ---- schedules -----------------------------------------------------------------------------
// Schedules submit batches on a timetable (`POST /v1/schedules`, `openqq schedule add`), so they
// live beside the batches they submit: the tenant's schedules with their expression, zone, state
// and next five fires, each paused, resumed or fired now from its row; one schedule's facts and
// its fire ledger, newest first, a page at a time, each fire's batch a click away. The list is
// read again when the soonest next fire has come and when the tenant's feed moves (a fire's
// batch enters it).

const FIRES_PAGE = 20;
let openSchedule = null; // the open schedule's id
let firePages = [null]; // the `after` of each ledger page read so far; the last is the one shown
let olderFires = null;
let fireTimer = null;
let scheduleFeedTimer = null;
let listedSchedules = null; // the list as last drawn, so reading it again redraws only a change
let refocus = null; // [schedule id, button selector]: the button to focus once its row is redrawn

const stateOf = (s) => (s.paused ? "paused" : "active");

/** The template in words, as `openqq schedule` says it. */
function templateText(t) {
  if (typeof t?.items === "number") return `${t.items} fixed item${t.items === 1 ? "" : "s"}`;
  if (t?.revalidate === "all") return "revalidate every design";
  if (t?.revalidate?.name_prefix !== undefined) return `revalidate designs named ${t.revalidate.name_prefix}*`;
  return "—";
}

function scheduleRow(s) {
  const toggle = s.paused
    ? h("button", { type: "button", class: "secondary", "aria-label": `Resume schedule ${s.name}`, onclick: () => setPaused(s, false) }, "Resume")
    : h("button", { type: "button", class: "secondary", "aria-label": `Pause schedule ${s.name}`, onclick: () => setPaused(s, true) }, "Pause");
  const next = (s.next_fires || []).length ? h("ol", { class: "fires" }, s.next_fires.map((t) => h("li", {}, time(t)))) : "—";
  return h("tr", { "data-schedule": s.schedule_id, "data-state": stateOf(s) },
    h("td", {}, h("button", { type: "button", class: "link", onclick: () => openScheduleDetail(s.schedule_id) }, s.name || s.schedule_id)),
    h("td", {}, h("code", {}, s.expression)),
    h("td", {}, s.time_zone),
    h("td", {}, badge(stateOf(s))),
    h("td", {}, next),
    h("td", { class: "actions" }, toggle,
      h("button", { type: "button", "aria-label": `Fire now: schedule ${s.name}`, onclick: () => trigger(s) }, "Fire now")));
}

/** Reads every schedule of the tenant (at most 100: one page, unless that changes). */
export async function loadSchedules() {
  const list = [];
  let cursor = null;
  try {
    do {
      const page = await api(`/v1/schedules?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      list.push(...(page.schedules || []));
      cursor = page.next || null;
    } while (cursor);
  } catch (e) {
    if (e.status === 404) {
      $("schedules-unavailable").hidden = false;
      $("schedule-list").hidden = true;
      return;
    }
    throw e;
  }
  $("schedules-unavailable").hidden = true;
  $("schedule-list").hidden = false;
  const drawn = JSON.stringify(list);
  if (drawn !== listedSchedules) fill($("schedule-table").tBodies[0], list.map(scheduleRow));
  listedSchedules = drawn;
  if (refocus) $("schedule-table").querySelector(`tr[data-schedule="${refocus[0]}"] td.actions button${refocus[1]}`)?.focus();
  refocus = null;
  $("no-schedules").hidden = list.length > 0;
  $("schedule-table").hidden = list.length === 0;
  wakeAtNextFire(list);
  if (openSchedule) await refreshSchedule();
}

/** Reads the list again once the soonest next fire of a running schedule has come. */
function wakeAtNextFire(list) {
  clearTimeout(fireTimer);
  fireTimer = null;
  const soonest = Math.min(...list.filter((s) => !s.paused && s.next_fires?.length).map((s) => Date.parse(s.next_fires[0])));
  if (!Number.isFinite(soonest)) return;
  const wait = Math.min(Math.max(soonest - Date.now() + 2000, 1000), 3_600_000);
  fireTimer = setTimeout(() => loadSchedules().catch(() => {}), wait);
}

/** Reads the list again, the focus put back on the row's `which` button as soon as it is redrawn. */
function reloadKeepingFocus(id, which) {
  refocus = [id, which];
  return loadSchedules();
}

async function setPaused(s, paused) {
  try {
    const after = await api(`/v1/schedules/${s.schedule_id}`, { method: "PATCH", body: { paused } });
    announce(`Schedule ${after.name} is ${stateOf(after)}${paused ? ": none of its fires runs until it is resumed" : ""}.`);
    await reloadKeepingFocus(s.schedule_id, ":first-child");
  } catch (e) {
    announce(`Schedule ${s.name} was not ${paused ? "paused" : "resumed"}: ${e.message}`, true);
  }
}

/** What a fire on request did, in words. */
function firedText(s, f) {
  if (f.outcome === "deduplicated") return `Schedule ${s.name} had fired at that time already (${f.recorded_outcome}): nothing more was submitted.`;
  if (f.batch_id) return `Schedule ${s.name} fired: batch ${f.batch_id} ${f.outcome}.`;
  return `Schedule ${s.name} fired: ${f.outcome}${f.reason ? `: ${f.reason}` : ""}.`;
}

async function trigger(s) {
  if (!window.confirm(`Fire schedule ${s.name} now? It submits its batch at once, paused or not.`)) return;
  try {
    const f = await api(`/v1/schedules/${s.schedule_id}/trigger`, { method: "POST" });
    announce(firedText(s, f), f.outcome === "failed");
    if (openSchedule === s.schedule_id) firePages = [null];
    await reloadKeepingFocus(s.schedule_id, ":last-child");
    if (f.batch_id) loadList().catch(() => {});
  } catch (e) {
    announce(`Schedule ${s.name} did not fire: ${e.message}`, true);
  }
}

// ---- one schedule ----------------------------------------------------------------------------

const batchLink = (id) => h("button", { type: "button", class: "link mono", onclick: () => openBatch(id) }, id);

function scheduleFacts(s) {
  const items = [
    ["Name", s.name], ["Id", h("code", {}, s.schedule_id)], ["State", badge(stateOf(s))],
    ["Expression", h("span", {}, h("code", {}, s.expression), ` in ${s.time_zone}`)],
    ["Template", templateText(s.template)], ["Overlap", s.overlap], ["Catch-up", s.catch_up], ["Jitter", s.jitter ?? "none"],
    ["Created", time(s.created_at)], ["Updated", time(s.updated_at)],
  ];
  if (s.last_batch_id) items.push(["Last batch", batchLink(s.last_batch_id)]);
  $("schedule-facts").replaceChildren(...items.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function fireRow(f) {
  return h("tr", { "data-nominal": f.nominal_time, "data-outcome": f.outcome, "data-batch": f.batch_id },
    h("td", {}, time(f.nominal_time)),
    h("td", {}, time(f.fired_at)),
    h("td", {}, badge(f.outcome, "fire")),
    h("td", {}, f.batch_id ? batchLink(f.batch_id) : "—"),
    h("td", { class: "message" }, f.reason ?? ""));
}

/** Reads the ledger page shown (its `after` is the last of `firePages`). */
async function loadFires() {
  const id = openSchedule;
  const after = firePages[firePages.length - 1];
  const page = await api(`/v1/schedules/${id}/fires?limit=${FIRES_PAGE}${after !== null ? `&after=${encodeURIComponent(after)}` : ""}`);
  if (id !== openSchedule) return;
  const fires = page.items || [];
  fill($("schedule-fires").tBodies[0], fires.map(fireRow));
  $("schedule-detail").dataset.schedule = id;
  olderFires = page.next ?? null;
  $("no-schedule-fires").hidden = fires.length > 0 || firePages.length > 1;
  $("schedule-fires").hidden = fires.length === 0;
  $("schedule-fires-newer").disabled = firePages.length === 1;
  $("schedule-fires-older").disabled = olderFires === null;
  $("schedule-fires-range").textContent = `Page ${firePages.length}: ${fires.length} fire${fires.length === 1 ? "" : "s"}.`;
}

async function refreshSchedule() {
  const id = openSchedule;
  const s = await api(`/v1/schedules/${id}`);
  if (id !== openSchedule) return;
  $("schedule-title").textContent = `Schedule ${s.name}`;
  scheduleFacts(s);
  await loadFires();
}

export async function openScheduleDetail(id) {
  openSchedule = id;
  firePages = [null];
  delete $("schedule-detail").dataset.schedule;
  $("schedule-detail").hidden = false;
  try {
    await refreshSchedule();
    $("schedule-title").focus();
  } catch (e) {
    announce(`The schedule could not be read: ${e.message}`, true);
  }
}

function turnFirePage(older) {
  if (older && olderFires !== null) firePages.push(olderFires);
  else if (!older && firePages.length > 1) firePages.pop();
  else return;
  loadFires().catch((e) => announce(`The fires could not be read: ${e.message}`, true));
}

export function initSchedules() {
  $("schedule-fires-newer").addEventListener("click", () => turnFirePage(false));
  $("schedule-fires-older").addEventListener("click", () => turnFirePage(true));
  $("refresh-schedules").addEventListener("click", () => loadSchedules().catch((e) => announce(e.message, true)));
  onEvent(() => {
    if (scheduleFeedTimer || $("signed-in").hidden) return;
    scheduleFeedTimer = setTimeout(() => {
      scheduleFeedTimer = null;
      loadSchedules().catch(() => {});
    }, 1000);
  });
}

export function resetSchedules() {
  clearTimeout(fireTimer);
  clearTimeout(scheduleFeedTimer);
  fireTimer = scheduleFeedTimer = null;
  openSchedule = null;
  firePages = [null];
  listedSchedules = null;
  $("schedule-detail").hidden = true;
  fill($("schedule-table").tBodies[0], []);
}

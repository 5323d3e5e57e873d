// Schedules: they submit batches on a timetable (`POST /v1/schedules`, `openqq schedule add`), so they
// live beside the batches they submit: the tenant's schedules with their expression, zone, state
// and next five fires, each paused, resumed or fired now from its row; one schedule's facts and
// its fire ledger, newest first, a page at a time, each fire's batch a click away. The list is
// read again when the soonest next fire has come and when the tenant's feed moves (a fire's
// batch enters it).

import { api } from "./api.js";
import { h, $, announce, time, badge, fill } from "./dom.js";
import { onEvent } from "./live.js";
import { loadList, openBatch } from "./batches.js";

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

// Designs: the list, the submission form (files read in the browser; large payloads go through
// an upload), and one design's facts, live timeline and report (with its HDL checks).

import { api, ApiError } from "./api.js";
import { h, $, announce, time, badge, fill } from "./dom.js";
import * as report from "./report.js";
import { onEvent, liveMode } from "./live.js";

/** Netlists and bitstreams larger than this are uploaded first, then referenced. */
const INLINE_MAX_BYTES = 4 * 1024 * 1024 - 64 * 1024;
/** The largest upload the API takes. */
const UPLOAD_MAX_BYTES = 64 * 1024 * 1024;
const TERMINAL = new Set(["ready", "failed"]);

let current = null; // the open design's id
let cursor = null;
let pollTimer = null;
let refreshTimer = null;
let listTimer = null;

// ---- the list ------------------------------------------------------------------------------

function row(d) {
  return h("tr", { "data-design": d.design_id },
    h("td", {}, h("button", { type: "button", class: "link", onclick: () => open(d.design_id) }, d.name || d.design_id)),
    h("td", {}, badge(d.status)),
    h("td", {}, d.revision),
    h("td", {}, time(d.updated_at)));
}

export async function loadList(more = false) {
  const page = await api(`/v1/designs?limit=20${more && cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
  const tbody = $("design-table").tBodies[0];
  const rows = (page.designs || []).map(row);
  if (more) tbody.append(...rows); else fill(tbody, rows);
  cursor = page.next_cursor || null;
  $("more-designs").hidden = !cursor;
  $("no-designs").hidden = tbody.rows.length > 0;
  $("design-table").hidden = tbody.rows.length === 0;
}

// ---- targets -------------------------------------------------------------------------------

let devices = [];

function fillPackages() {
  const d = devices.find((x) => x.device === $("design-device").value);
  const select = $("design-package");
  select.replaceChildren(...(d ? d.packages : []).map((p) => h("option", { value: p, selected: p === d.default_package }, p)));
}

export async function loadTargets() {
  const body = await api("/v1/targets");
  devices = body.devices || [];
  const select = $("design-device");
  select.replaceChildren(...devices.map((d) => h("option", { value: d.device, selected: d.device === "hx8k" }, d.device)));
  fillPackages();
}

// ---- submitting ----------------------------------------------------------------------------

async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Uploads `bytes` as the API's upload grant says, and answers the reference to name it by. */
async function upload(bytes) {
  const grant = await api("/v1/uploads", { method: "POST", body: { sha256: await sha256Hex(bytes), bytes: bytes.byteLength } });
  if (!grant.present) {
    const resp = await fetch(grant.upload.url, { method: grant.upload.method, headers: grant.upload.headers, body: bytes });
    if (!resp.ok) throw new ApiError(resp.status, await resp.json().catch(() => null));
  }
  return grant.object;
}

function base64(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; i += 0x8000) out += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(out);
}

async function submit(event) {
  event.preventDefault();
  const form = event.target;
  const button = form.querySelector("button[type=submit]");
  button.disabled = true;
  try {
    const netlistFile = $("design-netlist").files[0];
    const pcfFile = $("design-pcf").files[0];
    const bitFile = $("design-bitstream").files[0];
    for (const f of [netlistFile, pcfFile, bitFile]) {
      if (f && f.size > UPLOAD_MAX_BYTES) throw new Error(`${f.name} is larger than 64 MiB, the most the platform takes`);
    }
    const parts = {
      name: JSON.stringify($("design-name").value.trim()),
      target: JSON.stringify({ device: $("design-device").value, package: $("design-package").value }),
      // The device's family decides the format: PCF for iCE40, LPF for ECP5.
      constraints: JSON.stringify({
        format: devices.find((d) => d.device === $("design-device").value)?.constraints || "pcf",
        text: await pcfFile.text(),
      }),
    };
    const options = { allow_unconstrained: $("design-unconstrained").checked };
    if ($("design-top").value.trim()) options.top = $("design-top").value.trim();
    parts.options = JSON.stringify(options);
    announce("Reading the files…");
    if (netlistFile.size > INLINE_MAX_BYTES) {
      announce("Uploading the netlist…");
      parts.netlist_ref = JSON.stringify(await upload(new Uint8Array(await netlistFile.arrayBuffer())));
    } else {
      const text = await netlistFile.text();
      try { JSON.parse(text); } catch { throw new Error(`${netlistFile.name} is not JSON: choose the netlist Yosys wrote (write_json)`); }
      parts.netlist = text;
    }
    if (bitFile) {
      const bytes = new Uint8Array(await bitFile.arrayBuffer());
      if (bytes.byteLength > INLINE_MAX_BYTES / 2) parts.bitstream_ref = JSON.stringify(await upload(bytes));
      else parts.bitstream_base64 = JSON.stringify(base64(bytes));
    }
    // The netlist goes in as the file says it, not parsed and written again.
    const raw = `{${Object.entries(parts).map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(",")}}`;
    announce("Submitting…");
    const accepted = await api("/v1/designs", { method: "POST", raw });
    announce(`Design ${$("design-name").value.trim()} was accepted.`);
    form.reset();
    fillPackages();
    await loadList();
    await open(accepted.design_id);
  } catch (e) {
    announce(`The design was not submitted: ${e.message}`, true);
  } finally {
    button.disabled = false;
  }
}

// ---- one design ----------------------------------------------------------------------------

function facts(d) {
  const items = [
    ["Name", d.name], ["Id", h("code", {}, d.design_id)], ["Status", badge(d.status)],
    ["Revision", d.revision], ["Updated", time(d.updated_at)],
  ];
  if (d.verdict) items.push(["Verdict", badge(d.verdict, "v")]);
  if (d.failure_reason) items.push(["Why it failed", d.failure_reason]);
  $("detail-facts").replaceChildren(...items.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function timeline(events) {
  $("timeline").replaceChildren(...events.map((e) => h("li", { "data-kind": e.kind },
    h("span", { class: "kind" }, e.kind), ` revision ${e.revision}`, time(e.occurred_at))));
}

async function refresh() {
  const id = current;
  if (!id) return;
  const [d, t] = await Promise.all([
    api(`/v1/designs/${id}`),
    api(`/v1/designs/${id}/events`),
  ]);
  if (id !== current) return;
  $("detail-title").textContent = `Design ${d.name}`;
  facts(d);
  timeline(t.events || []);
  // A report exists once the revision is done (a failed one may have none: 404).
  if (TERMINAL.has(d.status)) {
    try {
      const r = await api(`/v1/designs/${id}/report`);
      if (id === current) report.render(r, `${id}@${r.revision}`);
    } catch (e) {
      if (e.status !== 404) throw e;
    }
  }
  clearTimeout(pollTimer);
  // Without a live feed, the open design is read again until it is done.
  if (!TERMINAL.has(d.status) && !["stream", "poll"].includes(liveMode())) {
    pollTimer = setTimeout(() => refresh().catch(() => {}), 1000);
  }
  return d;
}

export async function open(id) {
  current = id;
  report.clear();
  $("timeline").replaceChildren();
  $("detail").hidden = false;
  try {
    await refresh();
    $("detail-title").focus();
  } catch (e) {
    announce(`The design could not be read: ${e.message}`, true);
  }
}

/** Reacts to one feed entry: the open design is read again, and the list, a moment later. */
function onFeed(entry) {
  if (entry.design_id && entry.design_id === current) {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(() => refresh().catch(() => {}), 100);
  }
  clearTimeout(listTimer);
  listTimer = setTimeout(() => loadList().catch(() => {}), 300);
}

export function init() {
  report.init(() => api(`/v1/designs/${current}/report/full`));
  $("submit-form").addEventListener("submit", submit);
  $("design-device").addEventListener("change", fillPackages);
  $("refresh-designs").addEventListener("click", () => loadList().catch((e) => announce(e.message, true)));
  $("more-designs").addEventListener("click", () => loadList(true).catch((e) => announce(e.message, true)));
  onEvent(onFeed);
}

export function reset() {
  current = null;
  cursor = null;
  clearTimeout(pollTimer);
  $("detail").hidden = true;
  fill($("design-table").tBodies[0], []);
}

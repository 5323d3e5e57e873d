// A validation report: the verdict, the HDL checks of a design given as source (checks.js),
// utilisation as bars against capacity, and the findings as a table sortable by any column
// (click or Enter/Space on its header).

import { h, $, badge, fill } from "./dom.js";
import * as checks from "./checks.js";

const SEVERITY_RANK = { error: 0, warning: 1, info: 2 };
let findings = [];
let sortKey = "severity";
let sortDir = "ascending";

/** A finding's location as one line: `file:line`, port, pin, cell. */
export function where(loc = {}) {
  const parts = [];
  if (loc.file) parts.push(loc.line ? `${loc.file}:${loc.line}` : loc.file);
  else if (loc.line) parts.push(`line ${loc.line}`);
  if (loc.port) parts.push(`port ${loc.port}`);
  if (loc.pin) parts.push(`pin ${loc.pin}`);
  if (loc.cell) parts.push(`cell ${loc.cell}`);
  return parts.join(", ");
}

function compare(a, b) {
  let x, y;
  if (sortKey === "severity") { x = SEVERITY_RANK[a.severity] ?? 9; y = SEVERITY_RANK[b.severity] ?? 9; }
  else if (sortKey === "location") { x = where(a.location); y = where(b.location); }
  else { x = a[sortKey] ?? ""; y = b[sortKey] ?? ""; }
  const order = typeof x === "number" ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true });
  return sortDir === "ascending" ? order : -order;
}

function renderFindings() {
  const sorted = [...findings].sort(compare);
  fill($("findings").tBodies[0], sorted.map((f) => h("tr", {},
    h("td", {}, badge(f.severity, "sev")),
    h("td", { class: "mono" }, f.code),
    h("td", {}, f.message),
    h("td", { class: "mono" }, where(f.location) || "—"),
  )));
  for (const th of $("findings").tHead.rows[0].cells) {
    th.setAttribute("aria-sort", th.dataset.key === sortKey ? sortDir : "none");
  }
  $("no-findings").hidden = findings.length > 0;
  $("findings").hidden = findings.length === 0;
}

/** Wires the sortable headers and the full report's button once; `loadFull` fetches the whole report. */
export function init(loadFull) {
  $("full-report").addEventListener("click", async () => {
    try {
      render(await loadFull());
      $("findings-title").scrollIntoView();
    } catch (e) {
      $("findings-truncated-text").textContent = `The full report could not be read: ${e.message}`;
    }
  });
  for (const th of $("findings").tHead.rows[0].cells) {
    th.querySelector("button").addEventListener("click", () => {
      if (sortKey === th.dataset.key) sortDir = sortDir === "ascending" ? "descending" : "ascending";
      else { sortKey = th.dataset.key; sortDir = "ascending"; }
      renderFindings();
    });
  }
}

export function clear() {
  $("report").hidden = true;
  findings = [];
  checks.clear();
}

/** Shows `report`; `key` names the design's revision whose report it is (the full report, read
 * for its findings, has none and leaves the checks as they are). */
export function render(report, key) {
  $("report").hidden = false;
  if (key !== undefined) checks.render(report.checks, key);
  const verdict = report.verdict || "unknown";
  $("report-verdict").replaceChildren("Verdict: ", badge(verdict, "v"), ` (revision ${report.revision})`);
  $("utilisation").replaceChildren(...(report.utilization || []).map((u) => {
    const pct = u.available ? (100 * u.used) / u.available : 0;
    const label = `${u.resource}: ${u.used} of ${u.available} used (${pct.toFixed(1)}%)`;
    return h("li", {},
      h("span", { class: "mono" }, u.resource),
      h("meter", { min: 0, max: Math.max(u.available, 1), value: u.used, low: u.available * 0.8,
        high: u.available * 0.95, optimum: 0, "aria-label": label, title: label }),
      h("span", { class: "count" }, `${u.used} / ${u.available}`));
  }));
  findings = report.findings || [];
  const t = report.truncated;
  $("findings-truncated").hidden = !t;
  if (t) {
    $("findings-truncated-text").textContent = `Showing ${t.findings_kept} of ${t.findings_total} findings.`;
    $("full-report").hidden = !report.full_report;
  }
  renderFindings();
}

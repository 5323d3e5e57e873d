// The HDL checks of a design given as source or written by a model (the report's `checks`): its
// source files (each file's code read when it is opened), each generation attempt (tokens, time,
// what failed, its Verilog), each check's verdict, and a failing testbench's waveform drawn
// around its first failure. Files and dumps are the tenant's objects (`GET /v1/objects/{digest}`).

import { request } from "./api.js";
import { h, $ } from "./dom.js";
import { parseVcd, humanTime } from "./vcd.js";
import { drawWaveform } from "./wave.js";

/** What the page shows, so a report read again (every feed entry) is not drawn again. */
let shown = null;

const GOOD = new Set(["ok", "pass", "equivalent"]);
const SO_SO = new Set(["unknown", "skipped"]);

/** A check's verdict as a badge coloured by what it means for the design. */
function verdict(word) {
  const tone = GOOD.has(word) ? "pass" : SO_SO.has(word) ? "warn" : "fail";
  return h("span", { class: `badge v-${tone}`, "data-verdict": word }, word ?? "—");
}

const took = (ms) => (typeof ms !== "number" ? "—" : ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`);
const size = (n) => (typeof n !== "number" ? "" : n < 10240 ? `${n} B` : `${(n / 1024).toFixed(1)} KiB`);

/** One of the tenant's objects as text. */
async function object(digest) {
  const resp = await request(`/v1/objects/${encodeURIComponent(digest)}`);
  if (!resp.ok) throw new Error(`the object could not be read (${resp.status})`);
  return resp.text();
}

/** A file that shows its code when opened (read then, once). */
function codeBlock(title, digest, bytes) {
  const pre = h("pre", { class: "code", tabindex: "0", "aria-label": title }, "Reading…");
  const details = h("details", { class: "source-file", "data-digest": digest },
    h("summary", {}, h("span", { class: "mono" }, title), bytes ? ` (${size(bytes)})` : ""), pre);
  details.addEventListener("toggle", async () => {
    if (!details.open || details.dataset.read) return;
    details.dataset.read = "1";
    try {
      pre.textContent = await object(digest);
      details.dataset.loaded = "1";
    } catch (e) {
      pre.textContent = `The file could not be read: ${e.message}`;
    }
  });
  return details;
}

function sources(source) {
  const sets = [[`Design (top ${source.top})`, source]];
  for (const t of source.tests || []) sets.push([`Testbench ${t.testbench} (top ${t.top})`, t]);
  if (source.reference) sets.push([`Reference (top ${source.reference.top})`, source.reference]);
  return h("div", { id: "hdl-sources" }, h("h4", {}, "Source files"), ...sets.map(([title, set]) => h("div", { class: "file-set" },
    h("p", { class: "help" }, title),
    ...(set.files || []).map((f) => codeBlock(f.name, f.digest, f.bytes)))));
}

function attempts(g) {
  const rows = (g.attempts || []).map((a) => h("tr", { "data-attempt": a.attempt, "data-failed": a.failed || "" },
    h("td", {}, a.attempt),
    h("td", { class: "num" }, `${a.prompt_tokens ?? "—"} / ${a.completion_tokens ?? "—"}`),
    h("td", { class: "num" }, took(a.duration_ms)),
    h("td", {}, a.failed ? h("span", { class: "badge v-fail" }, `failed: ${a.failed}`) : verdict("pass")),
    h("td", {}, (a.messages || []).slice(0, 3).map((m) => h("div", { class: "mono message" }, m))),
    h("td", {}, a.hdl ? codeBlock(`attempt ${a.attempt} (${a.top || "?"})`, a.hdl.digest, a.hdl.bytes) : "—")));
  const stopped = String(g.stopped || "?").replace(/_/g, " ");
  return h("div", { id: "hdl-attempts" },
    h("h4", { id: "attempts-title" }, "Generation attempts"),
    h("p", { class: "help" }, `${rows.length} of at most ${g.max_attempts ?? "?"} attempts; stopped: ${stopped}.`),
    h("div", { class: "scroll", tabindex: "0", role: "region", "aria-labelledby": "attempts-title" },
      h("table", { class: "data", id: "attempts-table", "aria-labelledby": "attempts-title" },
        h("thead", {}, h("tr", {}, ...["Attempt", "Tokens (prompt / completion)", "Took", "Outcome", "What failed", "Verilog"]
          .map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, rows))));
}

/** Why a check did not pass, in one line. */
function detail(c) {
  const steps = c.counterexample?.steps;
  if (steps?.length) {
    const last = steps[steps.length - 1];
    const differs = (last.design_outputs || []).find((o) => (last.reference_outputs || []).some((r) => r.name === o.name && r.value !== o.value));
    if (differs) {
      const theirs = last.reference_outputs.find((r) => r.name === differs.name).value;
      return `at step ${last.step}: ${differs.name} is ${differs.value}, the reference's ${theirs}`;
    }
  }
  return c.reason || c.messages?.[0] || c.findings?.[0]?.message || (c.family ? `${c.family}` : "");
}

function verdicts(checks) {
  const rows = [];
  const add = (name, c) => rows.push(h("tr", { "data-check": name },
    h("th", { scope: "row" }, name), h("td", {}, verdict(c.verdict)), h("td", { class: "num" }, took(c.elapsed_ms)),
    h("td", {}, detail(c))));
  if (checks.synthesis) add("synthesis", checks.synthesis);
  for (const t of checks.simulation || []) add(`testbench ${t.testbench}`, t);
  if (checks.equivalence) add("equivalence", checks.equivalence);
  return h("div", {},
    h("h4", { id: "checks-title" }, "Checks"),
    h("div", { class: "scroll", tabindex: "0", role: "region", "aria-labelledby": "checks-title" },
      h("table", { class: "data", id: "checks-table", "aria-labelledby": "checks-title" },
        h("thead", {}, h("tr", {}, ...["Check", "Verdict", "Took", "Detail"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, rows))),
    checks.details_omitted ? h("p", { class: "help" }, "The checks' details were too large for the report: only their verdicts were kept.") : null);
}

/** A failing testbench's waveform: read, parsed and drawn, or why not. */
function waveform(test) {
  const w = test.waveform;
  const at = humanTime(w.first_failure_time, w.timescale);
  const box = h("div", { class: "waveform-box", "data-testbench": test.testbench },
    h("h4", {}, `Waveform of testbench ${test.testbench}`),
    h("p", { class: "help" }, `First failure at ${at}${test.messages?.[0] ? `: ${test.messages[0]}` : ""}`
      + `${w.truncated ? " (the dump was cut to a window around it)" : ""}.`));
  if (!w.ref?.digest) {
    box.append(h("p", { class: "help" }, "Its dump was not kept."));
    return box;
  }
  const status = h("p", { class: "help" }, "Reading the dump…");
  box.append(status);
  object(w.ref.digest).then((text) => {
    status.replaceWith(drawWaveform(parseVcd(text), { failure: w.first_failure_time, timescale: w.timescale, name: test.testbench }));
  }).catch((e) => { status.textContent = `The dump could not be read: ${e.message}`; });
  return box;
}

export function clear() {
  shown = null;
  $("hdl").hidden = true;
  $("hdl").replaceChildren();
}

/** Shows `checks` (absent for a design given as a netlist); `key` names the design's revision. */
export function render(checks, key) {
  if (!checks) { clear(); return; }
  if (shown === key) return;
  shown = key;
  const parts = [h("h3", { id: "hdl-title" }, "HDL checks")];
  if (checks.source) parts.push(sources(checks.source));
  if (checks.generation) parts.push(attempts(checks.generation));
  parts.push(verdicts(checks));
  for (const t of checks.simulation || []) if (t.waveform) parts.push(waveform(t));
  $("hdl").replaceChildren(...parts);
  $("hdl").hidden = false;
}

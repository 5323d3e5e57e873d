// A failing testbench's waveform drawn as SVG: the testbench's own signals (its top scope) over
// a window of time around the first failure, a line marking the failure, a time axis; and, for
// reading without the picture, each signal's value at the failure.

import { h } from "./dom.js";
import { valueAt, hex, humanTime } from "./vcd.js";

const SVG = "http://www.w3.org/2000/svg";
/** Signals drawn at most (the top scope's first ones). */
export const MAX_SIGNALS = 16;
const WIDTH = 880, LABEL = 150, RIGHT = 12, AXIS = 40, ROW = 30, LEVEL = 18;

/** An SVG element: `s("path", {d: "…"})`. Text children become text nodes, never markup. */
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/** The smallest of 1, 2, 5 × 10^k at least `x`. */
function nice(x) {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  return [1, 2, 5, 10].map((m) => m * p).find((n) => n >= x) ?? 10 * p;
}

/** The signals shown: the top scope's, one per name. */
export function shownSignals(vcd) {
  const seen = new Set();
  return vcd.signals.filter((sig) => sig.depth === 1 && !seen.has(sig.name) && seen.add(sig.name)).slice(0, MAX_SIGNALS);
}

/**
 * The time window drawn: about 80 of the fastest signal's shortest intervals (so edges stay
 * apart), three quarters of it before the failure, within the dump.
 */
export function timeWindow(vcd, signals, failure) {
  const start = vcd.start, end = Math.max(vcd.end, failure, start + 1);
  let gap = Infinity;
  for (const sig of signals) {
    const ch = vcd.changes.get(sig.code) || [];
    for (let k = 1; k < ch.length; k += 1) if (ch[k].t > ch[k - 1].t) gap = Math.min(gap, ch[k].t - ch[k - 1].t);
  }
  const span = Math.min(end - start, Number.isFinite(gap) ? Math.max(gap * 80, 1) : end - start);
  let from = Math.max(start, failure - 0.75 * span);
  const to = Math.min(end, from + span);
  from = Math.max(start, Math.min(from, to - span));
  return { from, to: Math.max(to, from + 1) };
}

function label(sig) {
  const name = sig.name.split(".").pop();
  return sig.width > 1 && !["real", "integer"].includes(sig.kind) ? `${name}[${sig.width - 1}:0]` : name;
}

/** A scalar's path: high for 1, low for 0, the middle for x and z. */
function scalarPath(changes, from, to, x, top) {
  const y = (v) => (v === "1" ? top : v === "0" ? top + LEVEL : top + LEVEL / 2);
  let v = valueAt(changes, from);
  let d = `M${x(from).toFixed(1)} ${y(v)}`;
  for (const c of changes) {
    if (c.t <= from || c.t > to) continue;
    d += ` H${x(c.t).toFixed(1)} V${y(c.v)}`;
    v = c.v;
  }
  return `${d} H${x(to).toFixed(1)}`;
}

/** A vector's segments, each `{a, b, v}` in time, covering [from, to]. */
function segments(changes, from, to) {
  const out = [];
  let a = from, v = valueAt(changes, from);
  for (const c of changes) {
    if (c.t <= from || c.t > to) continue;
    if (c.v === v) continue;
    out.push({ a, b: c.t, v });
    a = c.t; v = c.v;
  }
  out.push({ a, b: to, v });
  return out;
}

/**
 * The waveform of `vcd` around `failure` (in the dump's units) as an element: the SVG, then the
 * values at the failure as a list. `name` is the testbench's.
 */
export function drawWaveform(vcd, { failure, timescale, name }) {
  const signals = shownSignals(vcd);
  const { from, to } = timeWindow(vcd, signals, failure);
  const x1 = WIDTH - RIGHT;
  const x = (t) => LABEL + ((t - from) / (to - from)) * (x1 - LABEL);
  const height = AXIS + ROW * signals.length + 8;
  const when = (t) => humanTime(t, timescale);
  const svg = s("svg", {
    viewBox: `0 0 ${WIDTH} ${height}`, role: "img", class: "wave",
    "aria-label": `Waveform of testbench ${name}: ${signals.map(label).join(", ")} from ${when(from)} to ${when(to)}, first failure at ${when(failure)}`,
    "data-from": from, "data-to": to,
  });
  // The time axis: round steps, about six of them.
  const step = nice((to - from) / 6);
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
    svg.append(s("line", { class: "tick", x1: x(t), x2: x(t), y1: AXIS - 6, y2: height }));
    // A label near the right edge ends at its tick rather than past the picture.
    const end = x(t) > WIDTH - 70;
    svg.append(s("text", { class: "axis", x: end ? x(t) - 2 : x(t) + 2, y: AXIS - 8, "text-anchor": end ? "end" : "start" }, when(t)));
  }
  signals.forEach((sig, k) => {
    const top = AXIS + k * ROW + (ROW - LEVEL) / 2;
    const changes = vcd.changes.get(sig.code) || [];
    svg.append(s("text", { class: "name", x: 4, y: top + LEVEL / 2 + 4 }, label(sig)));
    if (sig.width === 1 && sig.kind !== "real") {
      svg.append(s("path", { class: "signal", "data-signal": sig.name, d: scalarPath(changes, from, to, x, top) }));
      return;
    }
    let d = "";
    for (const seg of segments(changes, from, to)) {
      const [a, b] = [x(seg.a), x(seg.b)];
      const slope = Math.min(3, (b - a) / 2);
      const mid = top + LEVEL / 2;
      d += `M${a.toFixed(1)} ${mid} L${(a + slope).toFixed(1)} ${top} H${(b - slope).toFixed(1)} L${b.toFixed(1)} ${mid} `
        + `L${(b - slope).toFixed(1)} ${top + LEVEL} H${(a + slope).toFixed(1)} Z `;
      const text = seg.v === null ? "" : hex(seg.v, sig.width);
      if (text && b - a > text.length * 7 + 8) {
        svg.append(s("text", { class: "value", x: (a + b) / 2, y: mid + 4, "text-anchor": "middle" }, text));
      }
    }
    svg.prepend(s("path", { class: "signal bus", "data-signal": sig.name, d: d.trim() }));
  });
  const fx = x(Math.min(Math.max(failure, from), to));
  svg.append(s("line", { class: "failure", "data-time": failure, x1: fx, x2: fx, y1: 4, y2: height }));
  // Above the axis's labels, on the side of the line with more room.
  const right = fx < WIDTH - 170;
  svg.append(s("text", { class: "failure-label", x: right ? fx + 4 : fx - 4, y: 13, "text-anchor": right ? "start" : "end" },
    `first failure, ${when(failure)}`));

  const values = h("dl", { class: "facts wave-values" }, ...signals.flatMap((sig) => {
    const v = valueAt(vcd.changes.get(sig.code) || [], failure);
    const shown = v === null ? "—" : sig.width === 1 ? v : hex(v, sig.width);
    return [h("dt", {}, label(sig)), h("dd", { class: "mono", "data-signal": sig.name }, shown)];
  }));
  const more = vcd.signals.filter((sig) => sig.depth === 1).length - signals.length;
  return h("figure", { class: "waveform" },
    h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": `Waveform of ${name}` }, svg),
    h("figcaption", {}, `Signals of the testbench's top scope around its first failure (${when(failure)}), `
      + `${when(from)} to ${when(to)}${more > 0 ? `; ${more} more not drawn` : ""}. Values at the failure:`),
    values);
}

// Value change dumps (VCD) as Icarus Verilog writes them, read whole: the timescale, the
// declared signals and each signal's changes. A dump is as hostile as the testbench that wrote
// it: what this does not understand it skips, and nothing it reads becomes markup.

/** Splits `text` on whitespace. */
function tokens(text) {
  return text.split(/\s+/).filter(Boolean);
}

/**
 * The dump in `text`: `{ timescale, signals: [{code, name, width, kind, depth}], changes:
 * Map(code → [{t, v}]), start, end }`. Times are numbers of the timescale's unit; values are
 * `0`, `1`, `x`, `z` for scalars, the bits for vectors, the number's text for reals.
 */
export function parseVcd(text) {
  const toks = tokens(text);
  const out = { timescale: null, signals: [], changes: new Map(), start: null, end: 0 };
  const scopes = [];
  let i = 0;
  const section = () => {
    const words = [];
    while (i < toks.length && toks[i] !== "$end") words.push(toks[i++]);
    i += 1;
    return words;
  };
  while (i < toks.length) {
    const tok = toks[i++];
    if (tok === "$enddefinitions") { section(); break; }
    const words = section();
    if (tok === "$timescale") out.timescale = words.join("");
    else if (tok === "$scope") scopes.push(words[1] ?? "?");
    else if (tok === "$upscope") scopes.pop();
    else if (tok === "$var" && words.length >= 4) {
      out.signals.push({
        code: words[2], name: [...scopes, words[3]].join("."), width: Number(words[1]) || 1,
        kind: words[0], depth: scopes.length,
      });
    }
  }
  let now = 0;
  const add = (code, v) => {
    if (!out.changes.has(code)) out.changes.set(code, []);
    out.changes.get(code).push({ t: now, v });
    if (out.start === null) out.start = now;
  };
  while (i < toks.length) {
    const tok = toks[i++];
    const c = tok[0];
    if (c === "#") {
      const t = Number(tok.slice(1));
      if (Number.isFinite(t) && t >= 0) { now = t; out.end = Math.max(out.end, t); }
    } else if (tok === "$comment") {
      while (i < toks.length && toks[i] !== "$end") i += 1;
      i += 1;
    } else if ("bBrR".includes(c)) {
      if (i < toks.length) add(toks[i++], tok.slice(1).toLowerCase());
    } else if ("01xXzZ".includes(c) && tok.length > 1) {
      add(tok.slice(1), c.toLowerCase());
    }
  }
  if (out.start === null) out.start = 0;
  return out;
}

/** The value of a signal's changes at time `t`: the last change at or before it, or null. */
export function valueAt(changes, t) {
  let lo = 0, hi = (changes?.length ?? 0) - 1, found = null;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (changes[mid].t <= t) { found = changes[mid].v; lo = mid + 1; } else hi = mid - 1;
  }
  return found;
}

/**
 * A vector's bits as hex, extended to `width` bits as VCD says (`x` and `z` extend themselves,
 * anything else with 0); a nibble holding x or z prints as that letter; a real as it is.
 */
export function hex(bits, width) {
  if (bits === null || bits === undefined) return "";
  if (!/^[01xz]+$/.test(bits)) return bits;
  const lead = "xz".includes(bits[0]) ? bits[0] : "0";
  const full = Math.ceil(Math.max(width, bits.length) / 4) * 4;
  const padded = lead.repeat(full - bits.length) + bits;
  let out = "";
  for (let k = 0; k < padded.length; k += 4) {
    const nibble = padded.slice(k, k + 4);
    out += nibble.includes("x") ? "x" : nibble.includes("z") ? "z" : parseInt(nibble, 2).toString(16);
  }
  return out;
}

/** Seconds of one unit of a timescale (`1ps` → 1e-12), or null. */
export function unitSeconds(timescale) {
  const m = /^(\d+)\s*(s|ms|us|ns|ps|fs)$/.exec(String(timescale ?? "").trim());
  if (!m) return null;
  const scale = { s: 1, ms: 1e-3, us: 1e-6, ns: 1e-9, ps: 1e-12, fs: 1e-15 }[m[2]];
  return Number(m[1]) * scale;
}

/** `count` units of `timescale` read in the largest unit that keeps it at least 1 (`20 ns`). */
export function humanTime(count, timescale) {
  const unit = unitSeconds(timescale);
  if (unit === null) return `${count} × ${timescale}`;
  const seconds = count * unit;
  if (seconds === 0) return `0 ${String(timescale).replace(/^\d+\s*/, "")}`;
  for (const [name, size] of [["s", 1], ["ms", 1e-3], ["us", 1e-6], ["ns", 1e-9], ["ps", 1e-12], ["fs", 1e-15]]) {
    if (seconds >= size * 0.9999999) return `${Number((seconds / size).toFixed(3))} ${name}`;
  }
  return `${count} × ${timescale}`;
}

// The tenant's event feed, live: `GET /v1/events/stream` (server-sent events) read with fetch,
// since EventSource cannot send a bearer token; it resumes after the last `id:` it saw. Where
// the server has no stream it polls `GET /v1/events?after=N`, and where it has neither the
// open design polls its own timeline (designs.js). Listeners get each feed entry.

import { request, api } from "./api.js";

const listeners = new Set();
let controller = null;
let lastSeq = 0;
let mode = "off"; // "stream" | "poll" | "none" | "off"

const SAY = {
  stream: "Updates arrive live from the event stream.",
  poll: "Updates are read from the event feed every few seconds.",
  none: "This server has no event feed: the open design is read again every second.",
  off: "",
};

/** Records how entries arrive, on the page too (`data-live` on the body, and in words). */
function setMode(m) {
  if (m === mode) return;
  mode = m;
  document.body.dataset.live = m;
  const say = document.getElementById("live-state");
  if (say) say.textContent = SAY[m];
}

export function onEvent(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/** Whether feed entries arrive live ("stream" or "poll"); "none" when the server has no feed. */
export const liveMode = () => mode;

function emit(entry) {
  if (typeof entry.seq === "number" && entry.seq > lastSeq) lastSeq = entry.seq;
  for (const fn of listeners) {
    try { fn(entry); } catch (e) { console.error(e); }
  }
}

/** Parses a server-sent event block into its fields. */
function parseBlock(block) {
  const ev = { data: [] };
  for (const line of block.split(/\r?\n/)) {
    if (!line || line.startsWith(":")) continue;
    const at = line.indexOf(":");
    const field = at < 0 ? line : line.slice(0, at);
    let value = at < 0 ? "" : line.slice(at + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") ev.data.push(value);
    else ev[field] = value;
  }
  return ev;
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
});

async function stream(signal) {
  const resp = await request(`/v1/events/stream?after=${lastSeq}`, {
    signal,
    headers: { accept: "text/event-stream", ...(lastSeq ? { "last-event-id": String(lastSeq) } : {}) },
  });
  if (resp.status === 404) return "missing";
  if (!resp.ok || !resp.body) return "error";
  setMode("stream");
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return "closed";
    buffer += value;
    let cut;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
      const ev = parseBlock(block);
      if (!ev.data.length) continue;
      try {
        const entry = JSON.parse(ev.data.join("\n"));
        if (!entry.kind && ev.event) entry.kind = ev.event;
        emit(entry);
      } catch { /* a comment or an event this page does not know */ }
    }
  }
}

async function poll(signal) {
  while (!signal.aborted) {
    let page;
    try {
      page = await api(`/v1/events?after=${lastSeq}&limit=100`, { signal });
    } catch (e) {
      if (e.status === 404) return "missing";
      await sleep(2000, signal);
      continue;
    }
    setMode("poll");
    for (const entry of page.items || []) emit(entry);
    if (typeof page.next_after === "number") lastSeq = Math.max(lastSeq, page.next_after);
    if (!(page.items || []).length) await sleep(1500, signal);
  }
  return "closed";
}

/** Starts following the feed (from its start: listeners only act on what concerns them). */
export async function start() {
  stop();
  controller = new AbortController();
  const { signal } = controller;
  let backoff = 500;
  while (!signal.aborted) {
    let how;
    try { how = await stream(signal); } catch { how = signal.aborted ? "closed" : "error"; }
    if (signal.aborted) break;
    if (how === "missing") {
      how = await poll(signal).catch(() => "error");
      if (how === "missing") { setMode("none"); return; }
    }
    await sleep(backoff, signal);
    backoff = Math.min(backoff * 2, 10000);
    if (how === "closed") backoff = 500;
  }
}

export function stop() {
  if (controller) controller.abort();
  controller = null;
  setMode("off");
  lastSeq = 0;
}

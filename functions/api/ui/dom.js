// Small DOM helpers: elements built from data (never from HTML strings, so nothing a server or
// a file says can become markup), the status line, and dates.

/** An element: `h("td", {class: "x"}, "text", child)`. Attributes starting with `on` are listeners. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export const $ = (id) => document.getElementById(id);

/** Says `message` in the status line (read out by screen readers); `error` marks a failure. */
export function announce(message, error = false) {
  const status = $("status");
  status.textContent = message;
  status.classList.toggle("error", error);
}

/** A `<time>` for an RFC 3339 timestamp, in the reader's locale. */
export function time(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return h("time", { datetime: iso, title: iso }, d.toLocaleString());
}

/** A status or verdict as a coloured badge that also says it in words. */
export function badge(word, prefix = "st") {
  return h("span", { class: `badge ${prefix}-${word}` }, word);
}

/** Replaces a table body's rows. */
export function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

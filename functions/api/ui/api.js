// The API of this origin, with the tab's bearer token. Errors are the API's problem documents.

const TOKEN_KEY = "openqq.token";

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (t) => sessionStorage.setItem(TOKEN_KEY, t),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** An error answer: `status`, and the problem document's `title`, `detail` and `field`. */
export class ApiError extends Error {
  constructor(status, problem) {
    const detail = problem?.detail || problem?.title || `the server answered ${status}`;
    super(detail);
    this.status = status;
    this.problem = problem;
  }
}

function headers(extra = {}) {
  const out = { accept: "application/json", ...extra };
  const t = token.get();
  if (t) out.authorization = `Bearer ${t}`;
  return out;
}

/** `fetch` relative to this origin; resolves to the parsed JSON body (or null), throws ApiError. */
export async function api(path, { method = "GET", body, raw, signal } = {}) {
  const init = { method, headers: headers(), signal };
  if (raw !== undefined) {
    init.body = raw;
    init.headers["content-type"] = "application/json";
  } else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  const resp = await fetch(path, init);
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  // A refused token (expired, or signed with another secret): the page signs out.
  if (resp.status === 401 && token.get()) window.dispatchEvent(new CustomEvent("openqq:unauthorized"));
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

/** `fetch` with the token, as it is (for streams). */
export function request(path, init = {}) {
  return fetch(path, { ...init, headers: headers(init.headers) });
}

/** The tenant a token names (its `tenant_id` claim), read without verifying: for display only. */
export function tenantOf(t) {
  try {
    const part = t.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "===".slice((part.length + 3) % 4))).tenant_id || null;
  } catch {
    return null;
  }
}

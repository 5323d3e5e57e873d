// The "batches" scenario of drive.mjs: batches submitted through the API (`POST /v1/batches`,
// JSON lines, with the page's own token) while the page is open, followed on the page as a
// person would.
//
//   OPENQQ_UI_BATCH_FILE   JSON lines, submitted as batch `ui-batch` (`on_invalid=skip`): its row
//                          must appear without a reload or a click, move while it runs and end
//                          `completed`; its items are then read a page at a time and filtered
//   OPENQQ_UI_CANCEL_FILE  JSON lines, submitted as batch `ui-cancel`, cancelled from its row
//                          while it runs
//
// What was seen goes into the summary (batch, seen, pages, rejected, cancelled) for the test to
// assert against the API.

import { readFileSync } from "node:fs";

/** Submits `file` as a batch named `name` through the API, with the page's token. */
async function submitBatch(page, name, file) {
  const body = readFileSync(file, "utf8");
  const answer = await page.evaluate(async ({ name, body }) => {
    const resp = await fetch(`/v1/batches?name=${encodeURIComponent(name)}&on_invalid=skip`, {
      method: "POST",
      headers: { authorization: `Bearer ${sessionStorage.getItem("openqq.token")}`, "content-type": "application/x-ndjson" },
      body,
    });
    return { status: resp.status, body: await resp.json() };
  }, { name, body });
  if (answer.status !== 202) throw new Error(`POST /v1/batches answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  return answer.body.batch_id;
}

/** The row of a batch as the page shows it: its status, counts and words. */
async function rowState(row) {
  return row.evaluate((tr) => ({
    status: tr.dataset.status,
    done: Number(tr.dataset.done),
    total: Number(tr.dataset.total),
    counts: Object.fromEntries(["queued", "validating", "ready", "failed", "rejected", "cancelled"].map((s) => [s, Number(tr.dataset[s])])),
    verdicts: tr.querySelector("td.verdicts")?.textContent.trim(),
    words: tr.querySelector(".counts")?.textContent.trim(),
    segments: [...tr.querySelectorAll("svg.progress rect.seg")].map((r) => r.dataset.status),
  }));
}

/** Reads the items table: each row's index, custom id, status and reason. */
const itemRows = (page) => page.locator("#batch-items tbody tr").evaluateAll((rows) => rows.map((tr) => ({
  index: Number(tr.dataset.index),
  custom_id: tr.cells[1].textContent.trim(),
  status: tr.dataset.status,
  reason: tr.cells[5].textContent.trim(),
})));

export async function batchesScenario({ page, env, step, check, shot, axe, summary, navigations }) {
  await page.locator("#no-batches").waitFor({ state: "visible" });
  step("a tenant without batches is told how to submit one");
  const loadsBefore = navigations();

  const id = await submitBatch(page, "ui-batch", env("OPENQQ_UI_BATCH_FILE"));
  step(`batch ${id} was submitted through the API`);
  const row = page.locator(`#batch-table tbody tr[data-batch="${id}"]`);
  await row.waitFor();
  step("its row appeared without a reload or a click");
  // Sample the row until the batch ends: the states it went through, as a person would see them.
  summary.seen = [];
  const deadline = Date.now() + 90_000;
  for (;;) {
    const state = await rowState(row);
    const last = summary.seen[summary.seen.length - 1];
    if (!last || last.status !== state.status || last.done !== state.done) summary.seen.push({ status: state.status, done: state.done, total: state.total });
    if (state.status === "completed") break;
    check(Date.now() < deadline, `the batch did not show as completed within 90 s: ${JSON.stringify(state)}`);
    await page.waitForTimeout(150);
  }
  check(navigations() === loadsBefore, "the page reloaded to show the batch's progress");
  summary.batch = await rowState(row);
  const moving = summary.seen.filter((s) => s.done < s.total);
  step(`the row moved live through ${summary.seen.map((s) => `${s.status} ${s.done}/${s.total}`).join(" → ")}`);
  check(moving.length > 0, `the row never showed the batch in progress: ${JSON.stringify(summary.seen)}`);
  await shot("batches", page.locator("#batches"));

  await row.getByRole("button", { name: "ui-batch" }).click();
  await page.locator("#batch-title", { hasText: "ui-batch" }).waitFor();
  await page.locator("#batch-items tbody tr").first().waitFor();
  summary.pages = [];
  for (;;) {
    const rows = await itemRows(page);
    summary.pages.push(rows.map((r) => r.index));
    const next = page.getByRole("button", { name: "Next page" });
    if (await next.isDisabled()) break;
    const first = rows[0].index;
    await next.click();
    await page.waitForFunction((n) => Number(document.querySelector("#batch-items tbody tr")?.dataset.index) !== n, first);
  }
  step(`its items read a page at a time: ${summary.pages.map((p) => p.length).join(" + ")}`);
  await page.getByRole("button", { name: "Previous page" }).click();
  await page.waitForFunction((n) => Number(document.querySelector("#batch-items tbody tr")?.dataset.index) === n, summary.pages[summary.pages.length - 2][0]);
  await page.getByLabel("Show items with").selectOption("rejected");
  await page.waitForFunction(() => [...document.querySelectorAll("#batch-items tbody tr")].every((tr) => tr.dataset.status === "rejected"));
  summary.rejected = await itemRows(page);
  step(`filtered to rejected items: ${summary.rejected.map((r) => `${r.index} ${r.custom_id}: ${r.reason}`).join("; ")}`);
  await axe("a batch and its items");
  await shot("batch-items", page.locator("#batch-detail"));

  const cancelId = await submitBatch(page, "ui-cancel", env("OPENQQ_UI_CANCEL_FILE"));
  const cancelRow = page.locator(`#batch-table tbody tr[data-batch="${cancelId}"]`);
  await cancelRow.getByRole("button", { name: "Cancel batch ui-cancel" }).click();
  await page.locator(`#batch-table tbody tr[data-batch="${cancelId}"][data-status="cancelled"]`).waitFor({ timeout: 60_000 });
  summary.cancelled = await rowState(cancelRow);
  check(!(await cancelRow.getByRole("button", { name: "Cancel batch ui-cancel" }).count()), "an ended batch still offers Cancel");
  step(`batch ${cancelId} was cancelled from its row: ${summary.cancelled.words}`);
}

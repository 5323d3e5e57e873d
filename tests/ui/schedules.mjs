// The "schedules" scenario of drive.mjs: schedules the test created through the API for the
// signed-in tenant, read and used on the page as a person would.
//
//   OPENQQ_UI_SCHEDULES        how many schedules the tenant has: each must be listed with its
//                              expression, zone, state and next five fires
//   OPENQQ_UI_PAGED_SCHEDULE   a schedule with a ledger longer than a page: opened, its fires read
//                              a page at a time (older, then newer again)
//   OPENQQ_UI_FIRED_SCHEDULE   a running schedule: paused and resumed from its row (the focus
//                              staying on the button), fired now, its fire seen in its ledger and
//                              the fire's batch opened from there
//
// What was seen goes into the summary (schedules, fire_pages, states, fired) for the test to
// assert against the API.

/** The schedules table as the page shows it. */
const scheduleRows = (page) => page.locator("#schedule-table tbody tr").evaluateAll((rows) => rows.map((tr) => ({
  id: tr.dataset.schedule,
  state: tr.dataset.state,
  name: tr.cells[0].textContent.trim(),
  expression: tr.cells[1].textContent.trim(),
  time_zone: tr.cells[2].textContent.trim(),
  next_fires: [...tr.cells[4].querySelectorAll("time")].map((t) => t.getAttribute("datetime")),
})));

/** The ledger page shown: each fire's nominal time, outcome and batch. */
const fireRows = (page) => page.locator("#schedule-fires tbody tr").evaluateAll((rows) => rows.map((tr) => ({
  nominal: tr.dataset.nominal,
  outcome: tr.dataset.outcome,
  batch: tr.dataset.batch ?? null,
  reason: tr.cells[4].textContent.trim(),
})));

/** Opens the schedule `name` (id `id`) from its row and waits for its ledger's first page. */
async function openSchedule(page, name, id) {
  await page.locator("#schedule-table tbody tr").getByRole("button", { name, exact: true }).click();
  await page.locator(`#schedule-detail[data-schedule="${id}"]`).waitFor();
  const title = await page.locator("#schedule-title").textContent();
  if (title !== `Schedule ${name}`) throw new Error(`schedule ${name} opened under the title ${title}`);
}

export async function schedulesScenario({ page, env, step, check, shot, axe, summary }) {
  const count = Number(env("OPENQQ_UI_SCHEDULES"));
  await page.waitForFunction((n) => document.querySelectorAll("#schedule-table tbody tr").length === n, count);
  summary.schedules = await scheduleRows(page);
  for (const s of summary.schedules) {
    check(s.next_fires.length === 5, `schedule ${s.name} shows ${s.next_fires.length} next fires, not 5`);
  }
  step(`the schedules are listed: ${summary.schedules.map((s) => `${s.name} (${s.expression}, ${s.time_zone}, ${s.state})`).join("; ")}`);
  await axe("the schedules");
  await shot("schedules", page.locator("#schedules"));

  const idOf = (name) => {
    const id = summary.schedules.find((s) => s.name === name)?.id;
    check(id, `no schedule ${name} is listed`);
    return id;
  };
  const paged = env("OPENQQ_UI_PAGED_SCHEDULE");
  await openSchedule(page, paged, idOf(paged));
  summary.fire_pages = [];
  for (;;) {
    const fires = await fireRows(page);
    summary.fire_pages.push(fires.map((f) => f.nominal));
    const older = page.getByRole("button", { name: "Older fires" });
    if (await older.isDisabled()) break;
    await older.click();
    await page.waitForFunction((n) => document.querySelector("#schedule-fires tbody tr")?.dataset.nominal !== n, fires[0].nominal);
  }
  step(`the ledger of ${paged} read a page at a time: ${summary.fire_pages.map((p) => p.length).join(" + ")}`);
  check(summary.fire_pages.length > 1, "the ledger fit one page: the test needs a longer one");
  await page.getByRole("button", { name: "Newer fires" }).click();
  await page.waitForFunction((n) => document.querySelector("#schedule-fires tbody tr")?.dataset.nominal === n,
    summary.fire_pages[summary.fire_pages.length - 2][0]);
  check(await page.getByRole("button", { name: "Older fires" }).isEnabled(), "a newer page offers no older fires");
  await axe("a schedule and its fires");
  await shot("schedule-fires", page.locator("#schedule-detail"));

  const fired = env("OPENQQ_UI_FIRED_SCHEDULE");
  const id = idOf(fired);
  const row = `#schedule-table tbody tr[data-schedule="${id}"]`;
  summary.states = [];
  for (const [action, after, then] of [["Pause", "paused", "Resume"], ["Resume", "active", "Pause"]]) {
    await page.locator(row).getByRole("button", { name: `${action} schedule ${fired}` }).click();
    await page.locator(`${row}[data-state="${after}"]`).waitFor();
    summary.states.push(after);
    const focused = await page.evaluate(() => document.activeElement?.getAttribute("aria-label"));
    check(focused === `${then} schedule ${fired}`, `after ${action} the focus is on ${focused}, not the ${then} button`);
  }
  step(`${fired} was paused and resumed from its row: ${summary.states.join(" → ")}`);

  await page.locator(row).getByRole("button", { name: `Fire now: schedule ${fired}` }).click();
  await page.locator("#status", { hasText: `Schedule ${fired} fired` }).waitFor();
  summary.fired_status = (await page.locator("#status").textContent()).trim();
  await openSchedule(page, fired, id);
  const [fire] = await fireRows(page);
  summary.fired = fire;
  step(`${fired} was fired now: ${summary.fired_status}`);
  check(fire.outcome === "submitted" && fire.batch, `the fire shows no submitted batch: ${JSON.stringify(fire)}`);
  await page.locator("#schedule-fires tbody tr").first().getByRole("button", { name: fire.batch }).click();
  await page.locator("#batch-title", { hasText: fired }).waitFor();
  check((await page.locator("#batch-facts").textContent()).includes(fire.batch), "the fire's batch did not open");
  step(`the fire's batch ${fire.batch} opened from the ledger`);
}

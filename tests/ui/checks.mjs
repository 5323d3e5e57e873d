// The "checks" scenario of drive.mjs: designs the test submitted as HDL for the signed-in tenant
// are read from the page, as a person would.
//
//   OPENQQ_UI_SOURCE_DESIGN     a design given as source whose testbench fails: its page must
//                               show each check's verdict, its source files (one opened: its
//                               code), and the testbench's waveform drawn (a path per signal, a
//                               line at the first failure, the values there)
//   OPENQQ_UI_FAILURE_TIME      the first failure's time the waveform must mark
//   OPENQQ_UI_GENERATED_DESIGN  a design written by a model: a row per attempt, the first one's
//                               failure named and its Verilog readable
//
// What was seen goes into the summary (checks, waveform, attempts) for the test to assert on.

/** Opens the design named `name` from the list and waits for its HDL checks. */
async function openDesign(page, name) {
  await page.locator("#design-table tbody tr", { hasText: name }).getByRole("button", { name }).click();
  await page.locator("#detail-title", { hasText: name }).waitFor();
  await page.locator("#hdl").waitFor({ state: "visible" });
}

export async function hdlChecks({ page, env, step, check, shot, axe, summary }) {
  const failing = env("OPENQQ_UI_SOURCE_DESIGN");
  const failure = env("OPENQQ_UI_FAILURE_TIME");
  await page.locator("#design-table tbody tr", { hasText: failing }).waitFor();
  await openDesign(page, failing);
  summary.checks = await page.locator("#checks-table tbody tr").evaluateAll((rows) =>
    rows.map((tr) => [tr.dataset.check, tr.querySelector("[data-verdict]")?.dataset.verdict]));
  const verdictOf = (name) => summary.checks.find(([c]) => c === name)?.[1];
  check(verdictOf("synthesis") === "ok", `synthesis is not shown as ok: ${JSON.stringify(summary.checks)}`);
  const testbench = summary.checks.find(([c]) => c.startsWith("testbench "));
  check(testbench?.[1] === "fail", `no failing testbench among the checks: ${JSON.stringify(summary.checks)}`);
  step(`the checks show their verdicts: ${summary.checks.map((c) => c.join(" ")).join(", ")}`);

  const svg = page.locator("figure.waveform svg.wave");
  await svg.waitFor();
  summary.waveform = await svg.evaluate((el) => ({
    signals: [...el.querySelectorAll("path[data-signal]")].map((p) => p.dataset.signal),
    drawn: [...el.querySelectorAll("path[data-signal]")].every((p) => (p.getAttribute("d") || "").split(/[MHVLZ]/).length > 3),
    failure: el.querySelector("line.failure")?.dataset.time,
    failure_x: Number(el.querySelector("line.failure")?.getAttribute("x1")),
    from: Number(el.dataset.from),
    to: Number(el.dataset.to),
    label: el.getAttribute("aria-label"),
  }));
  summary.waveform.values = Object.fromEntries(await page.locator("figure.waveform dd[data-signal]")
    .evaluateAll((dds) => dds.map((dd) => [dd.dataset.signal, dd.textContent.trim()])));
  const w = summary.waveform;
  check(w.signals.length >= 2 && w.drawn, `the waveform draws no signals: ${JSON.stringify(w)}`);
  check(w.failure === failure, `the failure is marked at ${w.failure}, not ${failure}`);
  check(w.from <= Number(failure) && Number(failure) <= w.to, `the window ${w.from}..${w.to} misses the failure`);
  step(`the waveform draws ${w.signals.join(", ")} with the first failure marked at ${w.failure}`);
  await shot("waveform", page.locator("figure.waveform"));

  const file = page.locator("#hdl-sources details.source-file").first();
  await file.locator("summary").click();
  await file.locator("pre.code", { hasText: "module" }).waitFor();
  summary.source_file = (await file.locator("summary").textContent()).trim();
  step(`the source file ${summary.source_file} opens on its code`);
  await axe("a failing testbench's checks and waveform");
  await page.locator("#hdl").scrollIntoViewIfNeeded();
  await shot("checks");

  const generated = env("OPENQQ_UI_GENERATED_DESIGN");
  await openDesign(page, generated);
  await page.locator("#attempts-table tbody tr").first().waitFor();
  summary.attempts = await page.locator("#attempts-table tbody tr").evaluateAll((rows) => rows.map((tr) => ({
    attempt: tr.dataset.attempt,
    failed: tr.dataset.failed,
    tokens: tr.cells[1].textContent.trim(),
  })));
  check(summary.attempts.length >= 2, `fewer than two attempts shown: ${JSON.stringify(summary.attempts)}`);
  const first = page.locator("#attempts-table tbody tr").first().locator("details.source-file");
  await first.locator("summary").click();
  await first.locator("pre.code", { hasText: "module" }).waitFor();
  step(`the generated design shows ${summary.attempts.length} attempts, the first failed at ${summary.attempts[0].failed}, its Verilog readable`);
  await axe("a generated design's attempts");
  await shot("attempts", page.locator("#hdl-attempts"));
}

// Drives the web UI of a running `openqq up --dev-tokens` in Chromium, as a person would, and
// checks it with axe-core. Run by the e2e suite's `ui` module (tests/e2e/ui.rs), which starts
// the server and a webhook receiver and reads the JSON summary this prints on its last line.
//
//   node drive.mjs   with, in the environment:
//     OPENQQ_UI_URL        the server, e.g. http://127.0.0.1:41234
//     OPENQQ_UI_CHROMIUM   the Chromium binary
//     OPENQQ_UI_OUT        where screenshots go (created)
//     OPENQQ_UI_NETLIST    a Yosys JSON netlist;  OPENQQ_UI_PCF  its PCF
//     OPENQQ_UI_FINDING    a finding code the report must show
//     OPENQQ_UI_TENANT     the tenant to mint a token for
//     OPENQQ_UI_VIEWPORT   "desktop" (the whole flow) or "phone" (390x844: design and report)
//     OPENQQ_UI_SCENARIO   "submit" (the default: the flow below), "checks": designs the test
//                          submitted as HDL for the tenant are read instead (checks.mjs says what),
//                          "batches": batches followed, read and cancelled (batches.mjs says what),
//                          or "schedules": schedules listed, their fires paged through, paused,
//                          resumed and fired (schedules.mjs says what)
//     OPENQQ_UI_HOOK_URL   a receiver on 127.0.0.1 for a webhook (desktop only; empty: skip)
//     OPENQQ_UI_FINDINGS_TOTAL  when set, the report is capped and the page must load all of them
//     OPENQQ_UI_BITSTREAM  when set, a second design is submitted with this bitstream, the netlist
//                          OPENQQ_UI_BIT_NETLIST and PCF OPENQQ_UI_BIT_PCF for OPENQQ_UI_BIT_TARGET
//                          (`device/package`); its report must show OPENQQ_UI_BIT_FINDING
//
// Exits non-zero, saying what went wrong, when the UI does not do what a person expects.

import { chromium } from "playwright-core";
import { createRequire } from "node:module";
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hdlChecks } from "./checks.mjs";
import { batchesScenario } from "./batches.mjs";
import { schedulesScenario } from "./schedules.mjs";

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
const base = env("OPENQQ_UI_URL");
const out = env("OPENQQ_UI_OUT");
const viewport = env("OPENQQ_UI_VIEWPORT", "desktop");
const phone = viewport === "phone";
const scenario = env("OPENQQ_UI_SCENARIO", "submit");
const hookUrl = env("OPENQQ_UI_HOOK_URL", "");
const tenant = env("OPENQQ_UI_TENANT");
const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
const TIMEOUT = 60_000;

const summary = { viewport, steps: [], screenshots: [], axe: [] };
const step = (what) => { summary.steps.push(what); console.error(`ui: ${what}`); };
function check(ok, message) { if (!ok) throw new Error(message); }

mkdirSync(out, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), "openqq-ui-profile-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: env("OPENQQ_UI_CHROMIUM"),
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  viewport: phone ? { width: 390, height: 844 } : { width: 1280, height: 900 },
  deviceScaleFactor: phone ? 2 : 1,
  isMobile: phone,
  hasTouch: phone,
  acceptDownloads: false,
});
context.setDefaultTimeout(TIMEOUT);

// Anything the page logs as an error (a CSP refusal, a failed import, an exception) fails the run.
const problems = [];
const page = context.pages()[0] ?? (await context.newPage());
page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
page.on("console", (m) => { if (m.type() === "error") problems.push(`console error: ${m.text()}`); });
page.on("dialog", (d) => d.accept());
page.on("response", (r) => { if (r.status() >= 400) problems.push(`${r.request().method()} ${r.url()} answered ${r.status()}`); });
let navigations = 0;
page.on("framenavigated", (f) => { if (f === page.mainFrame()) navigations += 1; });

/** A screenshot of the whole page, or of one element (a locator). */
async function shot(name, element) {
  const path = join(out, `${viewport}-${name}.png`);
  await (element ? element.screenshot({ path }) : page.screenshot({ path, fullPage: true }));
  summary.screenshots.push(path);
}

/** axe-core on the page as it is; serious and critical violations fail the run. */
async function axe(name) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, {
    runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"] },
  }));
  const bad = result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  summary.axe.push({ at: name, violations: result.violations.map((v) => `${v.impact} ${v.id}`), passes: result.passes.length });
  check(!bad.length, `axe-core (${name}): ${bad.map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join("; ")}`).join(" | ")}`);
}

/** The page loads with its policy, and the first Tab reaches the skip link. */
async function load() {
  const resp = await page.goto(base + "/");
  check(resp.ok(), `GET / answered ${resp.status()}`);
  const csp = resp.headers()["content-security-policy"] || "";
  check(csp.includes("script-src 'self'"), `the page has no strict Content-Security-Policy: ${csp}`);
  step("the page loaded");
  await page.keyboard.press("Tab");
  check(await page.evaluate(() => document.activeElement?.classList.contains("skip")), "the first Tab does not reach the skip link");
}

/** A refused token is said to be refused; a minted one signs in. */
async function signIn() {
  await page.getByLabel("Bearer token").fill("not.a.token");
  await page.getByRole("button", { name: "Use token" }).click();
  await page.locator("#status.error", { hasText: "did not accept" }).waitFor();
  check(await page.locator("#signed-in").isHidden(), "a refused token signed in");
  step("a pasted token the server refuses is said to be refused");
  problems.length = 0; // the refusal's 401 was the point

  const mint = page.getByRole("button", { name: "Mint token" });
  await mint.waitFor();
  await page.getByLabel("Tenant for a development token").fill(tenant);
  await axe("signed out");
  await mint.click();
  await page.locator("#signed-in").waitFor({ state: "visible" });
  check((await page.locator("#who").textContent()).includes(tenant), "the page does not say which tenant is signed in");
  check(!(await page.locator("#token-form").isVisible()) && !(await page.locator("#mint-form").isVisible()),
    "the token forms stay on screen after signing in");
  step("a token was minted and the page signed in");
}

/** A design submitted from its files is followed live to its report. */
async function submitAndFollow() {
  const finding = env("OPENQQ_UI_FINDING");
  await page.getByLabel("Name", { exact: true }).fill(`ui-${viewport}`);
  await page.locator("#design-device option[value=hx8k]").waitFor({ state: "attached" });
  await page.getByLabel("Device", { exact: true }).selectOption("hx8k");
  await page.getByLabel("Package", { exact: true }).selectOption("ct256");
  await page.getByLabel("Netlist (Yosys JSON)").setInputFiles(env("OPENQQ_UI_NETLIST"));
  await page.getByLabel("Pin constraints (PCF)").setInputFiles(env("OPENQQ_UI_PCF"));
  const loadsBefore = navigations;
  await page.getByRole("button", { name: "Submit design" }).click();
  await page.locator("#detail").waitFor({ state: "visible" });
  step("the design was submitted");

  await page.locator('#timeline li[data-kind="design.submitted"]').first().waitFor();
  await page.locator('#timeline li[data-kind="results.ready"]').first().waitFor({ timeout: TIMEOUT });
  check(navigations === loadsBefore, "the page reloaded to show the timeline");
  const live = await page.evaluate(() => document.body.dataset.live);
  check(live === "stream", `the timeline did not follow the event stream (updates: ${live})`);
  const kinds = await page.locator("#timeline li").evaluateAll((lis) => lis.map((li) => li.dataset.kind));
  summary.timeline = kinds;
  check(kinds.indexOf("validation.started") < kinds.indexOf("results.ready"), `timeline out of order: ${kinds}`);
  step(`the timeline reached results.ready without a reload: ${kinds.join(" → ")}`);

  await page.locator("#report").waitFor({ state: "visible" });
  const row = page.locator("#findings tbody tr", { hasText: finding }).first();
  await row.waitFor();
  const cells = await row.locator("td").allTextContents();
  check(!["", "—"].includes(cells[3].trim()), `the finding ${finding} shows no location: ${cells}`);
  summary.finding = cells.map((c) => c.trim());
  const bars = await page.locator("#utilisation meter").count();
  check(bars > 0, "the report shows no utilisation bars");
  // Sorting by keyboard: focus the column's header button and press Enter.
  await page.getByRole("button", { name: "Code" }).focus();
  await page.keyboard.press("Enter");
  check((await page.locator('#findings th[data-key="code"]').getAttribute("aria-sort")) === "ascending", "sorting by code does not say so");
  step(`the report shows ${finding} at ${cells[3].trim()} and ${bars} utilisation bars`);
  const total = Number(env("OPENQQ_UI_FINDINGS_TOTAL", "0"));
  if (total) {
    await page.locator("#findings-truncated").waitFor({ state: "visible" });
    const kept = await page.locator("#findings tbody tr").count();
    check(kept < total, `a capped report shows ${kept} of ${total} findings`);
    await page.getByRole("button", { name: "Show every finding" }).click();
    await page.waitForFunction((n) => document.querySelectorAll("#findings tbody tr").length === n, total);
    check(await page.locator("#findings-truncated").isHidden(), "the full report still says it is capped");
    step(`the capped report showed ${kept} findings, the full one all ${total}`);
  }
  await page.locator("#design-table tbody tr", { hasText: `ui-${viewport}` }).locator(".badge", { hasText: "ready" }).waitFor();
  step("the design list shows the design ready");
  await page.locator("#detail").scrollIntoViewIfNeeded();
  await shot("report");

  if (phone) {
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 1, `the page is ${overflow}px wider than a phone's window`);
    step("nothing is wider than the phone's window");
  }
}

/** A webhook is added, tested, rotated and deleted. */
async function webhooks() {
  check(await page.locator("#webhook-form").isVisible(), "the page offers no webhooks");
  await page.getByLabel("Endpoint URL").fill(hookUrl);
  await page.getByLabel("Description (optional)").fill("ui test receiver");
  await page.getByRole("button", { name: "Add webhook" }).click();
  const secret = page.locator("#webhook-secret-value");
  await page.locator("#webhook-secret").waitFor({ state: "visible" });
  summary.webhook_secret = (await secret.textContent()).trim();
  check(summary.webhook_secret.startsWith("whsec_"), `the secret shown is not a whsec_ secret: ${summary.webhook_secret}`);
  await page.getByRole("button", { name: "I have kept it" }).click();
  check(!(await page.locator("#webhook-secret").isVisible()), "the secret stays on screen");
  step("a webhook was added and its secret shown once");
  await page.getByRole("button", { name: "Send test to ui test receiver" }).click();
  await page.locator('#delivery-table tbody tr[data-status="delivered"]').first().waitFor({ timeout: TIMEOUT });
  summary.delivery = (await page.locator('#delivery-table tbody tr[data-status="delivered"]').first().locator("td").allTextContents()).map((c) => c.trim());
  step(`the test delivery shows as delivered: ${summary.delivery.join(" | ")}`);
  await shot("webhooks");
  await page.getByRole("button", { name: "Rotate secret of ui test receiver" }).click();
  await page.locator("#webhook-secret").waitFor({ state: "visible" });
  const rotated = (await secret.textContent()).trim();
  check(rotated.startsWith("whsec_") && rotated !== summary.webhook_secret, "rotating shows no new secret");
  await page.getByRole("button", { name: "I have kept it" }).click();
  step("the secret was rotated and the new one shown once");
  await page.getByRole("button", { name: "Delete ui test receiver" }).click();
  await page.locator("#no-webhooks").waitFor({ state: "visible" });
  check(await page.locator("#deliveries").isHidden(), "the deleted webhook's deliveries stay on screen");
  step("the webhook was deleted");
}

/** A second design, with a bitstream, reports what only a bitstream that reached the validator can. */
async function bitstreamDesign(bitstream) {
  const [device, pkg] = env("OPENQQ_UI_BIT_TARGET").split("/");
  await page.getByLabel("Name", { exact: true }).fill("ui-bitstream");
  await page.getByLabel("Device", { exact: true }).selectOption(device);
  // The packages follow the device.
  await page.getByLabel("Package", { exact: true }).selectOption(pkg);
  await page.getByLabel("Netlist (Yosys JSON)").setInputFiles(env("OPENQQ_UI_BIT_NETLIST"));
  await page.getByLabel("Pin constraints (PCF)").setInputFiles(env("OPENQQ_UI_BIT_PCF"));
  await page.getByLabel("Bitstream (optional)").setInputFiles(bitstream);
  await page.getByRole("button", { name: "Submit design" }).click();
  await page.locator("#detail-title", { hasText: "ui-bitstream" }).waitFor();
  await page.locator('#timeline li[data-kind="results.ready"]').first().waitFor();
  const code = env("OPENQQ_UI_BIT_FINDING");
  await page.locator("#findings tbody tr", { hasText: code }).first().waitFor();
  step(`a design with a bitstream for ${device}/${pkg} was submitted and its report shows ${code}`);
}

try {
  await load();
  await signIn();
  if (scenario === "checks") {
    await hdlChecks({ page, env, step, check, shot, axe, summary });
  } else if (scenario === "batches") {
    await batchesScenario({ page, env, step, check, shot, axe, summary, navigations: () => navigations });
  } else if (scenario === "schedules") {
    await schedulesScenario({ page, env, step, check, shot, axe, summary });
  } else {
    await submitAndFollow();
    if (hookUrl) await webhooks();
    const bitstream = env("OPENQQ_UI_BITSTREAM", "");
    if (bitstream) await bitstreamDesign(bitstream);
  }
  await axe("signed in, with a report");
  await shot("page");
  check(!problems.length, problems.join("\n"));
  summary.ok = true;
} catch (e) {
  summary.ok = false;
  summary.error = `${e.message}${problems.length ? `\n${problems.join("\n")}` : ""}`;
  await shot("failure").catch(() => {});
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(summary));
process.exit(summary.ok ? 0 : 1);

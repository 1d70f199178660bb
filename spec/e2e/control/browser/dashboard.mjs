// Drives chute's dashboard (/ui/) in Debian's Chromium through
// playwright-core: waits for a live flow to appear in the flows table,
// selects a group member by clicking, closes the flow by clicking, and
// saves a screenshot. Prints one JSON line of what it saw.
//
//   node dashboard.mjs API SECRET HOST_PORT GROUP MEMBER SCREENSHOT
import { chromium } from "playwright-core";

const [api, secret, dest, group, member, shot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--headless=new", "--disable-gpu"],
});
const out = {};
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(api + "/ui/?token=" + encodeURIComponent(secret));
  await page.waitForSelector("#status.ok", { timeout: 10000 });
  out.version = await page.textContent("#version");

  const row = page.locator("#flows tbody tr", { has: page.locator("td.dest", { hasText: dest }) });
  await row.first().waitFor({ timeout: 10000 });
  out.flowId = await row.first().getAttribute("data-id");
  await page.waitForFunction(() => document.querySelector("#rate").textContent.length > 0, null, { timeout: 5000 });
  out.rate = await page.textContent("#rate");
  await page.screenshot({ path: shot, fullPage: true });

  const button = page.locator(`[data-group="${group}"] button[data-member="${member}"]`);
  await button.click();
  await page.waitForSelector(`[data-group="${group}"] button.now[data-member="${member}"]`, { timeout: 10000 });
  out.selected = member;

  await row.first().locator("button.close").click();
  await page.waitForFunction((id) => !document.querySelector(`#flows tbody tr[data-id="${id}"]`),
    out.flowId, { timeout: 10000 });
  out.closed = out.flowId;
  out.logLines = (await page.textContent("#logs")).split("\n").filter(Boolean).length;
  out.errors = errors;
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));

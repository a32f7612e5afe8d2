// Drives the console in Chromium against a running `sluice serve` that a Rust
// integration test set up (two tenants, pipelines streaming into Kafka). Everything
// comes from SLUICE_* environment variables. Prints "ok - ..." for each step and
// stops with a non-zero exit at the first failure.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`not ok - ${name} is not set`);
    process.exit(2);
  }
  return value;
}

const url = required('SLUICE_CONSOLE_URL');
const tenant = required('SLUICE_TENANT');
const tenantToken = required('SLUICE_TENANT_TOKEN');
const otherTenant = required('SLUICE_OTHER_TENANT');
const otherPipeline = required('SLUICE_OTHER_PIPELINE');
const operatorToken = required('SLUICE_OPERATOR_TOKEN');
const streaming = required('SLUICE_STREAMING_PIPELINE');
const rejecting = required('SLUICE_REJECTING_PIPELINE');
const deployModulePath = required('SLUICE_DEPLOY_MODULE_PATH');
const expectedLetters = JSON.parse(required('SLUICE_EXPECTED_LETTERS'));
const injected = required('SLUICE_INJECTED');
const screenshots = required('SLUICE_SCREENSHOTS');
const replayTopic = required('SLUICE_REPLAY_TOPIC');

const pipelineHash = (t, name) => `#/tenants/${encodeURIComponent(t)}/pipelines/${encodeURIComponent(name)}`;

let passed = 0;
let step = 'launching Chromium';

/** Runs one step; its name is printed when it passes and named when it fails. */
async function check(name, body) {
  step = name;
  await body();
  passed += 1;
  console.log(`ok - ${name}`);
}

// A loaded CI machine runs this beside every other integration test: waits are long,
// and a step that passes returns as soon as the page shows it.
const WAIT = 90_000;

/** Calls `probe` until it returns something truthy, or fails with `what` after `timeout` ms. */
async function poll(what, probe, timeout = WAIT) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    last = await probe();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout / 1000} s waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

mkdirSync(screenshots, { recursive: true });
const browser = await chromium.launch({
  executablePath: process.env.SLUICE_CHROMIUM || '/usr/bin/chromium',
  // playwright-core passes --headless, which is Chromium's new headless mode.
  headless: true,
  args: ['--no-sandbox'],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
context.setDefaultTimeout(WAIT);
const page = await context.newPage();

// Every API call the page makes, and anything the page or its CSP complains about.
const apiCalls = [];
const urls = [];
const complaints = [];
page.on('request', (request) => {
  urls.push(request.url());
  const { pathname } = new URL(request.url());
  if (pathname.startsWith('/v1/')) apiCalls.push(pathname);
});
page.on('console', (message) => {
  if (message.type() === 'error' && /Content.Security.Policy/i.test(message.text())) complaints.push(message.text());
});
page.on('pageerror', (error) => complaints.push(`page error: ${error.message}`));

const byTestId = (id) => page.getByTestId(id);
const shoot = (name) => page.screenshot({ path: path.join(screenshots, name), fullPage: true });
const pwned = () => page.evaluate(() => window.__pwned);
const attr = async (locator, name) => locator.getAttribute(name);

async function assertNotPwned() {
  assert.equal(await pwned(), undefined, 'injected HTML ran: window.__pwned is set');
  // The console itself uses no <img> and no inline <script>: any there were injected.
  const planted = await page.locator('img, script:not([src])').count();
  assert.equal(planted, 0, `${planted} injected <img>/<script> elements are in the page`);
}

async function signIn(token) {
  await byTestId('sign-in-token').fill(token);
  await byTestId('sign-in-submit').click();
  await byTestId('signed-in-as').waitFor();
}

/** The row of a pipeline in the pipelines table. */
const row = (t, name) => page.locator(`[data-testid="pipeline-row"][data-pipeline="${t}/${name}"]`);

async function main() {
  await check('the console opens on the sign-in page without calling the API', async () => {
    await page.goto(url);
    await byTestId('sign-in-token').waitFor();
    assert.equal(await byTestId('sign-in-token').getAttribute('type'), 'password');
    assert.deepEqual(apiCalls, [], `API calls before sign-in: ${apiCalls.join(', ')}`);
    await shoot('sign-in.png');
  });

  await check('an empty token is refused without a call', async () => {
    await byTestId('sign-in-submit').click();
    await byTestId('sign-in-error').waitFor();
    assert.deepEqual(apiCalls, []);
  });

  await check('a wrong token is refused and no data is fetched', async () => {
    await byTestId('sign-in-token').fill(`wrong-${Date.now()}`);
    await byTestId('sign-in-submit').click();
    await poll('the refusal', async () => /not accepted/.test(await byTestId('sign-in-error').innerText()));
    assert.ok(apiCalls.length > 0 && apiCalls.every((p) => p === '/v1/whoami'), `calls: ${apiCalls.join(', ')}`);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('sluice.token')), null);
  });

  await check(`signs in as tenant ${tenant} and lists only its pipelines`, async () => {
    await signIn(tenantToken);
    assert.equal((await byTestId('signed-in-as').innerText()).trim(), `tenant ${tenant}`);
    await byTestId('pipelines-table').waitFor();
    await row(tenant, streaming).waitFor();
    await row(tenant, rejecting).waitFor();
    const shown = await page.locator('[data-testid="pipeline-row"]').evaluateAll((rows) =>
      rows.map((r) => r.getAttribute('data-pipeline')),
    );
    for (const name of shown) assert.ok(name.startsWith(`${tenant}/`), `another tenant's pipeline is listed: ${name}`);
    const table = await byTestId('pipelines-table').innerText();
    assert.ok(!table.includes(otherPipeline), `${otherPipeline} of ${otherTenant} is listed`);
    assert.ok(!table.includes(otherTenant), `${otherTenant} appears in the table`);
    assert.ok(!apiCalls.some((p) => p.includes(`/tenants/${otherTenant}`)), `the console asked for ${otherTenant}`);
  });

  await check('each pipeline shows its module, language and state', async () => {
    // Module names are plain ([A-Za-z0-9_-]); injected markup comes through logs and
    // dead letters, checked below.
    await poll('the streaming row names its module', async () => {
      const text = await row(tenant, streaming).innerText();
      return text.includes('running') && text.includes('rust');
    });
    await assertNotPwned();
  });

  await check(`the throughput chart of ${streaming} moves`, async () => {
    await row(tenant, streaming).getByRole('link', { name: streaming, exact: true }).click();
    const chart = byTestId('throughput-chart');
    await chart.waitFor();
    const before = Number(await attr(chart, 'data-points'));
    await poll(
      'more history points with rows/s above 0',
      async () =>
        Number(await attr(chart, 'data-points')) > before &&
        Number(await attr(chart, 'data-last-rows-per-second')) > 0,
      2 * WAIT,
    );
    await byTestId('lag-chart').waitFor();
  });

  await check(`the state of ${streaming} shows its keys and changelog`, async () => {
    await byTestId('state').waitFor();
    await poll('the counter in the state', async () => (await byTestId('state-keys').innerText()).trim() === '1');
    assert.match(await byTestId('state').innerText(), /sluice-state-/);
    await byTestId('deploy-reset-state').waitFor();
  });

  const state = async () => (await byTestId('pipeline-state').innerText()).trim();

  await check('pause shows paused', async () => {
    await byTestId('pause').click();
    await poll('the state paused', async () => (await state()) === 'paused');
  });

  await check('resume shows running', async () => {
    await byTestId('resume').click();
    await poll('the state running', async () => (await state()) === 'running');
  });

  let deployedDigest;
  await check('uploading and deploying a module switches the pipeline to it', async () => {
    const digestBefore = (await byTestId('module-digest').innerText()).trim();
    const swapsBefore = Number(await byTestId('swaps').innerText());
    const digest = createHash('sha256').update(readFileSync(deployModulePath)).digest('hex');
    await byTestId('deploy-file').setInputFiles(deployModulePath);
    await byTestId('deploy-sample-rows').fill('10');
    await byTestId('deploy-submit').click();
    const result = byTestId('deploy-result');
    const text = await poll('the deploy result', async () => (await result.count()) && (await result.innerText()), 3 * WAIT);
    assert.match(text, /switched/, `the deploy did not switch: ${text}`);
    await poll(
      'the new digest and one more swap',
      async () => {
        deployedDigest = (await byTestId('module-digest').innerText()).trim();
        return (
          deployedDigest !== digestBefore &&
          deployedDigest.includes(digest) &&
          Number(await byTestId('swaps').innerText()) > swapsBefore
        );
      },
      2 * WAIT,
    );
    // By now the charts hold several points, and the swap shows.
    await shoot('pipeline.png');
  });

  await check('the pipelines page draws the last minutes of each pipeline', async () => {
    await page.goto(url);
    await row(tenant, streaming).locator('svg.sparkline').waitFor();
    await shoot('pipelines.png');
  });

  let rejectingDigest;
  await check(`the logs of ${rejecting} show injected HTML as text`, async () => {
    await page.goto(url + pipelineHash(tenant, rejecting));
    rejectingDigest = (await byTestId('module-digest').innerText()).trim();
    await byTestId('logs').waitFor();
    await byTestId('log-line').filter({ hasText: injected }).first().waitFor();
    await assertNotPwned();
  });

  await check(`a shadow of ${rejecting} shows its comparison, and discarding it ends it`, async () => {
    await byTestId('deploy-module').selectOption(rejectingDigest);
    await byTestId('deploy-shadow').check();
    await byTestId('deploy-submit').click();
    const result = byTestId('deploy-result');
    const text = await poll('the shadow result', async () => (await result.count()) && (await result.innerText()), 3 * WAIT);
    assert.match(text, /shadow of .* started/, `the shadow did not start: ${text}`);
    await byTestId('shadow').waitFor();
    assert.equal(await attr(byTestId('shadow'), 'data-phase'), 'running');
    assert.match(await byTestId('shadow-summary').innerText(), /^running: compared \d+ batches/);
    await shoot('shadow.png');
    await byTestId('shadow-discard').click();
    await byTestId('shadow').waitFor({ state: 'detached' });
  });

  await check(`a replay of ${streaming} started from the console shows its progress until it finishes`, async () => {
    await page.goto(url + pipelineHash(tenant, streaming));
    await byTestId('replay-form').waitFor();
    await byTestId('replay-from').fill('0');
    await byTestId('replay-topic').fill(replayTopic);
    await byTestId('replay-submit').click();
    const result = byTestId('replay-result');
    const text = await poll('the replay result', async () => (await result.count()) && (await result.innerText()), WAIT);
    assert.match(text, /^Replay .* started; it finishes after version \d+/, `the replay did not start: ${text}`);
    await byTestId('replay-link').click();
    const progress = byTestId('replay-progress');
    await poll('the replay to finish', async () => (await progress.count()) && /^Finished/.test(await progress.innerText()), 2 * WAIT);
    await shoot('replay.png');
    await page.goto(url + pipelineHash(tenant, rejecting));
    await byTestId('dead-letters-link').waitFor();
  });

  await check(`the dead letters of ${rejecting} list the rejected rows`, async () => {
    await byTestId('dead-letters-link').click();
    await byTestId('dead-letters-table').waitFor();
    for (const { version, row: r } of expectedLetters) {
      await page.locator(`[data-testid="dead-letter"][data-version="${version}"][data-row="${r}"]`).first().waitFor();
    }
    // In the row data the string is inside JSON, so its quotes are escaped.
    const escaped = JSON.stringify(injected).slice(1, -1);
    const texts = [
      ...(await byTestId('dead-letter-error').allInnerTexts()),
      ...(await byTestId('dead-letter-data').allInnerTexts()),
    ];
    assert.ok(
      texts.some((t) => t.includes(injected) || t.includes(escaped)),
      'the injected HTML is not shown as text in any dead letter',
    );
    await assertNotPwned();
    await shoot('dead-letters.png');
  });

  await check('the modules page lists the modules and the pipelines using them', async () => {
    await page.getByRole('link', { name: 'Modules', exact: true }).click();
    await byTestId('modules-table').waitFor();
    const usedBy = async (digest) =>
      page.locator(`[data-testid="module-row"][data-digest="${digest}"]`).first().innerText();
    assert.ok((await usedBy(deployedDigest)).includes(streaming), `${streaming} is not shown using the deployed module`);
    assert.ok((await usedBy(rejectingDigest)).includes(rejecting), `${rejecting} is not shown using its module`);
    await assertNotPwned();
    await shoot('modules.png');
  });

  await check('sign out returns to the sign-in page and forgets the token', async () => {
    await byTestId('sign-out').click();
    await byTestId('sign-in-token').waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('sluice.token')), null);
  });

  await check("signs in as operator and sees both tenants' pipelines", async () => {
    await signIn(operatorToken);
    assert.equal((await byTestId('signed-in-as').innerText()).trim(), 'operator');
    await row(tenant, streaming).waitFor();
    await row(otherTenant, otherPipeline).waitFor();
  });

  await check('the operator page shows host memory', async () => {
    await page.getByRole('link', { name: 'Operator', exact: true }).click();
    await byTestId('operator-page').waitFor();
    await byTestId('host-memory').waitFor();
    assert.match(await byTestId('host-memory').innerText(), /B/);
    await shoot('operator.png');
  });

  await check('no injected HTML ran, no token was put in a URL and the CSP was kept', async () => {
    await assertNotPwned();
    for (const token of [tenantToken, operatorToken]) {
      assert.ok(!urls.some((u) => u.includes(token)), 'a token appeared in a request URL');
    }
    assert.deepEqual(complaints, []);
  });
}

try {
  await main();
  console.log(`${passed} passed, 0 failed`);
} catch (error) {
  console.error(`not ok - ${step}: ${error.message}`);
  console.error(`${passed} passed, 1 failed`);
  await page.screenshot({ path: path.join(screenshots, 'failure.png'), fullPage: true }).catch(() => {});
  process.exitCode = 1;
} finally {
  await browser.close();
}

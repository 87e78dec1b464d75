// The dashboard (/ui) in a real browser: headless Debian Chromium driven by
// playwright-core, against delayqd processes this test starts. Jobs are put
// and checked through the HTTP API; the pages are opened, their numbers
// read, their buttons clicked, and the API asked whether the jobs moved.
// A page may log no console error. Each page's screenshot is written to
// $DELAYQ_UI_SCREENSHOTS (default: screenshots/ beside this file).
//   DELAYQD    path of the delayqd binary (default: build/delayqd)
//   CHROMIUM   path of the browser (default: /usr/bin/chromium)
// Run: ./run.sh (installs node_modules with `npm ci` first if needed).
'use strict';

const {test, before, after} = require('node:test');
const assert = require('node:assert/strict');
const {spawn} = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {freePort} = require('../free_port.js');
const {chromium} = require('playwright-core');

const ROOT = path.resolve(__dirname, '..', '..');
const SHOTS = process.env.DELAYQ_UI_SCREENSHOTS || path.join(__dirname, 'screenshots');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A delayqd on free loopback ports, in memory, with `args` more; resolves
// once its HTTP port answers /healthz.
async function startDelayqd(args = []) {
  const binary = process.env.DELAYQD || path.join(ROOT, 'build', 'delayqd');
  const port = await freePort();
  const http = await freePort();
  const proc = spawn(binary, ['-l', '127.0.0.1', '-p', String(port), '--http-port', String(http), '--in-memory', ...args],
      {stdio: ['ignore', 'ignore', 'pipe']});
  const log = [];
  proc.stderr.on('data', (d) => log.push(d.toString()));
  const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({code, signal})));
  const base = `http://127.0.0.1:${http}`;
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      if ((await fetch(base + '/healthz')).ok) break;
    } catch (_) { /* not listening yet */ }
    if (proc.exitCode !== null) throw new Error('delayqd exited early:\n' + log.join(''));
    if (Date.now() > deadline) throw new Error('delayqd did not answer /healthz within 20 s');
    await sleep(20);
  }
  return {proc, base, log, exited};
}

async function stopDelayqd(s) {
  if (!s) return;
  s.proc.kill('SIGTERM');
  const {code} = await s.exited;
  assert.equal(code, 0, 'delayqd exits cleanly:\n' + s.log.join(''));
}

// The HTTP API, as a client of the test's own (not the page's).
async function call(server, method, route, body, secret) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (secret) headers.Authorization = 'Bearer ' + secret;
  const res = await fetch(server.base + route, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  const text = await res.text();
  return {status: res.status, json: text && res.headers.get('content-type').startsWith('application/json') ? JSON.parse(text) : text};
}

async function ok(server, method, route, body) {
  const r = await call(server, method, route, body);
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${route}: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json;
}

const put = (s, topic, job) => ok(s, 'POST', `/topics/${encodeURIComponent(topic)}/jobs`, job);

// Puts n jobs in `topic`, reserves n (the topic's oldest ready ones) and
// buries them with their leases: the ids buried.
async function putBuried(s, topic, n) {
  for (let i = 0; i < n; i++) await put(s, topic, {body: `buried ${i}`});
  const r = await ok(s, 'POST', `/topics/${encodeURIComponent(topic)}/reserve`, {count: n, timeout_ms: 0});
  assert.equal(r.jobs.length, n);
  for (const j of r.jobs) await ok(s, 'POST', `/jobs/${j.id}/bury`, {lease: j.lease});
  return r.jobs.map((j) => j.id);
}

const stats = async (s, topic) => (await ok(s, 'GET', '/topics/' + encodeURIComponent(topic))).jobs;

let browser = null;
before(async () => {
  fs.mkdirSync(SHOTS, {recursive: true});
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  console.log(`screenshots: ${SHOTS}`);
});
after(async () => {
  if (browser) await browser.close();
});

// A new page that records console errors and uncaught exceptions; `allow`
// filters out errors the test expects (a 401 the login page answers).
async function openPage(allow = () => false) {
  const context = await browser.newContext({viewport: {width: 1280, height: 860}});
  const page = await context.newPage();
  page.errors = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && !allow(m.text())) page.errors.push(m.text());
  });
  page.on('pageerror', (e) => page.errors.push('uncaught: ' + e.message));
  return page;
}

async function shot(page, name) {
  const file = path.join(SHOTS, name + '.png');
  await page.screenshot({path: file, fullPage: true});
  console.log(`screenshot ${name}: ${file}`);
}

const text = (page, sel) => page.locator(sel).innerText();
// The number a card or cell shows ("1,234" -> 1234).
const num = async (page, sel) => Number((await text(page, sel)).split('\n').find((l) => /^[\d,]+$/.test(l.trim())).replace(/,/g, ''));

async function waitFor(what, fn, ms = 10000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
    await sleep(50);
  }
}

test('every page, its numbers and its actions, against the API', async () => {
  const s = await startDelayqd();
  const page = await openPage();
  try {
    // orders: 3 ready, 2 delayed, 4 buried; payments: 1 ready, keyed, JSON;
    // mails: 2 ready.
    for (let i = 0; i < 3; i++) await put(s, 'orders', {body: `order ${i}`});
    for (let i = 0; i < 2; i++) await put(s, 'orders', {body: `later ${i}`, delay_ms: 3600000});
    await putBuried(s, 'orders', 4);
    const paid = await put(s, 'payments', {key: 'pay-42', body: '{"order":42,"amount":"19.90"}'});
    for (let i = 0; i < 2; i++) await put(s, 'mails', {body: `mail ${i}`});

    // Overview.
    await page.goto(s.base + '/ui');
    await page.waitForSelector('#count-ready');
    assert.equal(await num(page, '#count-ready'), 6);
    assert.equal(await num(page, '#count-delayed'), 2);
    assert.equal(await num(page, '#count-buried'), 4);
    assert.equal(await num(page, '#count-reserved'), 0);
    assert.equal(await num(page, '#count-total'), 12);
    assert.equal(await num(page, '#count-topics'), 4); // and 'default'
    // Rates come from two scrapes: put while the page refreshes.
    for (let i = 0; i < 20; i++) await put(s, 'bulk', {body: `b${i}`});
    await waitFor('a put rate', async () => (await text(page, '#rate-put')).match(/[1-9]/));
    // A job due in 50 ms, reserved: the lateness and ready-wait p99 show.
    await put(s, 'late', {body: 'x', delay_ms: 50});
    await sleep(150);
    await ok(s, 'POST', '/topics/late/reserve', {timeout_ms: 0});
    await waitFor('lateness', async () => /(µs|ms|s)$/.test((await text(page, '#lateness-p99')).split('\n')[1]));
    assert.match(await text(page, '#health-server'), /serving/);
    assert.match(await text(page, '#health-backend'), /healthy/);
    await shot(page, 'overview');

    // Topics: counts per state, filter, sort.
    await page.goto(s.base + '/ui#/topics');
    await page.waitForSelector('#topic-table tr[data-topic="orders"]');
    const row = (t, st) => page.locator(`#topic-table tr[data-topic="${t}"] td[data-state="${st}"]`).innerText();
    assert.equal(await row('orders', 'ready'), '3');
    assert.equal(await row('orders', 'delayed'), '2');
    assert.equal(await row('orders', 'buried'), '4');
    assert.equal(await row('payments', 'ready'), '1');
    await shot(page, 'topics');
    await page.click('#topic-table th[data-sort="buried"]'); // most buried first
    assert.equal(await page.locator('#topic-table tbody tr').first().getAttribute('data-topic'), 'orders');
    await page.fill('#topic-filter', 'pay');
    await waitFor('the filter', async () => (await page.locator('#topic-table tbody tr').count()) === 1);
    assert.equal(await page.locator('#topic-table tbody tr').first().getAttribute('data-topic'), 'payments');

    // A topic: its buried jobs, kick 2, pause and resume.
    await page.goto(s.base + '/ui#/topics/orders/buried');
    await page.waitForSelector('#job-table');
    assert.equal(await page.locator('#job-table tbody tr').count(), 4);
    assert.equal(await text(page, '#tab-count-buried'), '4');
    await shot(page, 'topic');
    await page.fill('#kick-count', '2');
    await page.click('#kick');
    await waitFor('the kick', async () => /Kicked 2 jobs/.test(await text(page, '#flash')));
    let counts = await stats(s, 'orders');
    assert.equal(counts.buried, 2);
    assert.equal(counts.ready, 5);
    await waitFor('the list', async () => (await page.locator('#job-table tbody tr').count()) === 2);
    await page.fill('#pause-seconds', '120');
    await page.click('#pause');
    await page.waitForSelector('#resume');
    assert.equal((await ok(s, 'GET', '/topics/orders')).paused, true);
    assert.match(await text(page, '#topic-status'), /Paused/);
    await page.click('#resume');
    await page.waitForSelector('#pause');
    assert.equal((await ok(s, 'GET', '/topics/orders')).paused, false);

    // Clear asks first, naming the topic and what goes; cancel keeps all.
    await page.click('#clear');
    await page.waitForSelector('#confirm[open]');
    const ask = await text(page, '#confirm-body');
    assert.match(ask, /orders/);
    assert.match(ask, /9 jobs now \(5 ready, 2 delayed, 2 buried\)/);
    assert.ok(await page.locator('#confirm-ok').isDisabled(), 'confirm waits for the typed name');
    await page.click('#confirm-cancel');
    assert.equal((await stats(s, 'orders')).ready, 5);
    await page.click('#clear');
    await page.fill('#confirm-typed', 'orders');
    await page.click('#confirm-ok');
    await waitFor('the clear', async () => /Cleared 9 jobs/.test(await text(page, '#flash')));
    const cleared = await call(s, 'GET', '/topics/orders');
    assert.ok(cleared.status === 404 || cleared.json.jobs.ready + cleared.json.jobs.buried + cleared.json.jobs.delayed === 0,
        JSON.stringify(cleared.json));

    // Pagination: 60 jobs, 50 a page, oldest or newest first.
    const bulkIds = [];
    for (let i = 0; i < 60; i++) bulkIds.push((await put(s, 'pages', {body: `p${i}`})).id);
    await page.goto(s.base + '/ui#/topics/pages/ready');
    await page.waitForSelector('#job-table');
    const shownIds = async () => page.locator('#job-table tbody tr').evaluateAll((rs) => rs.map((r) => Number(r.dataset.job)));
    assert.deepEqual(await shownIds(), bulkIds.slice(0, 50));
    await page.click('#page-next');
    await waitFor('page 2', async () => (await text(page, '#page-number')) === 'page 2');
    assert.deepEqual(await shownIds(), bulkIds.slice(50));
    assert.ok(await page.locator('#page-next').isDisabled());
    await page.click('#page-prev');
    await waitFor('page 1', async () => (await text(page, '#page-number')) === 'page 1');
    await page.click('#order');
    await waitFor('newest first', async () => (await shownIds())[0] === bulkIds[59]);
    assert.deepEqual(await shownIds(), bulkIds.slice(10).reverse());

    // A job: its fields, its body as JSON, text and hex.
    await page.goto(s.base + `/ui#/jobs/${paid.id}`);
    await page.waitForSelector('#job-fields');
    assert.equal(await text(page, '#job-fields tr[data-field="key"] td'), 'pay-42');
    assert.equal(await text(page, '#job-fields tr[data-field="state"] td'), 'ready');
    assert.equal(await text(page, '#job-fields tr[data-field="topic"] td'), 'payments');
    assert.equal(await text(page, '#job-body'), '{\n  "order": 42,\n  "amount": "19.90"\n}');
    await shot(page, 'job');
    await page.click('#body-text');
    assert.equal(await text(page, '#job-body'), '{"order":42,"amount":"19.90"}');
    await page.click('#body-hex');
    assert.match(await text(page, '#job-body'), /^00000000 {2}7b 22 6f 72 64 65 72 22/);

    // Kick a buried job from its page; delete another after confirming.
    const [buried, doomed] = await putBuried(s, 'mails', 2);
    await page.goto(s.base + `/ui#/jobs/${buried}`);
    await page.waitForSelector('#job-kick');
    await page.click('#job-kick');
    await waitFor('the kick', async () => /Kicked job/.test(await text(page, '#flash')));
    assert.equal((await ok(s, 'GET', `/jobs/${buried}`)).state, 'ready');
    await page.goto(s.base + `/ui#/jobs/${doomed}`);
    await page.waitForSelector('#job-delete');
    await page.click('#job-delete');
    await page.waitForSelector('#confirm[open]');
    assert.match(await text(page, '#confirm-body'), new RegExp(`job ${doomed} of topic mails`));
    await page.click('#confirm-ok');
    await waitFor('the delete', async () => /Deleted job/.test(await text(page, '#flash')));
    assert.equal((await call(s, 'GET', `/jobs/${doomed}`)).status, 404);

    // Search from the bar: by key, then by id (which opens the job).
    await page.fill('#search-input', 'pay-42');
    await page.press('#search-input', 'Enter');
    await page.waitForSelector('#found-jobs');
    assert.deepEqual(await page.locator('#found-jobs tbody tr').evaluateAll((rs) => rs.map((r) => Number(r.dataset.job))), [paid.id]);
    await shot(page, 'search');
    await page.fill('#search-input', String(buried));
    await page.press('#search-input', 'Enter');
    await page.waitForSelector('#job-fields');
    assert.equal(await text(page, '#job-fields tr[data-field="id"] td'), String(buried));

    assert.deepEqual(page.errors, []);
  } finally {
    await page.context().close();
    await stopDelayqd(s);
  }
});

test('the topics page shows the first 500 topics and finds the others by filter', async () => {
  const s = await startDelayqd();
  const page = await openPage();
  try {
    for (let i = 0; i < 520; i++) await put(s, `t${String(i).padStart(3, '0')}`, {body: 'x'});
    await page.goto(s.base + '/ui#/topics');
    await page.waitForSelector('#topic-table');
    assert.equal(await page.locator('#topic-table tbody tr').count(), 500);
    assert.match(await text(page, '#topic-count'), /the first 500 of 521 topics/);  // and 'default'
    await page.fill('#topic-filter', 't519');
    await waitFor('the filter', async () => (await page.locator('#topic-table tbody tr').count()) === 1);
    assert.equal(await page.locator('#topic-table tbody tr').first().getAttribute('data-topic'), 't519');
    assert.deepEqual(page.errors, []);
  } finally {
    await page.context().close();
    await stopDelayqd(s);
  }
});

test('--ui-read-only shows no action that changes the queue', async () => {
  const s = await startDelayqd(['--ui-read-only']);
  const page = await openPage();
  try {
    await putBuried(s, 'orders', 1);
    const {id} = await put(s, 'orders', {body: 'x'});
    await page.goto(s.base + '/ui#/topics/orders/buried');
    await page.waitForSelector('#job-table');
    assert.equal(await page.locator('#read-only-note').count(), 1);
    for (const b of ['#kick', '#clear', '#pause', '#resume']) assert.equal(await page.locator(b).count(), 0, b);
    await page.goto(s.base + `/ui#/jobs/${id}`);
    await page.waitForSelector('#job-fields');
    assert.equal(await page.locator('#job-delete').count(), 0);
    assert.equal(await page.locator('#job-kick').count(), 0);
    await waitFor('the read-only mark', async () => /read-only/.test(await text(page, '#who')));
    assert.deepEqual(page.errors, []);
  } finally {
    await page.context().close();
    await stopDelayqd(s);
  }
});

test('outside the trusted networks the page asks for a token, and shows only what it may do', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'delayq-ui-'));
  const digest = (secret) => crypto.createHash('sha256').update(secret).digest('hex');
  const tokens = [
    ['admin', 'dq_ui-admin-secret', '["*"]', '["admin", "produce", "consume"]'],
    ['worker', 'dq_ui-worker-secret', '["orders.*"]', '["produce", "consume"]'],
  ];
  fs.writeFileSync(path.join(dir, 'tokens.toml'), tokens.map(([name, secret, topics, rights]) =>
    `[[token]]\nname = "${name}"\nsha256 = "${digest(secret)}"\ntopics = ${topics}\nrights = ${rights}\n`).join('\n'));
  const s = await startDelayqd(['--auth-file', path.join(dir, 'tokens.toml'), '--trusted-networks', 'none']);
  // The page's first request is refused (401) before it asks for a token.
  const page = await openPage((t) => /status of 401/.test(t));
  try {
    await call(s, 'POST', '/topics/orders.eu/jobs', {body: 'x'}, tokens[0][1]);
    await call(s, 'POST', '/topics/payments/jobs', {body: 'y'}, tokens[0][1]);
    await page.goto(s.base + '/ui');
    await page.waitForSelector('#login-form');
    await page.fill('#token-secret', 'dq_not-a-token');
    await page.click('#login-form button');
    await waitFor('the refusal', async () => /No token has this secret/.test(await text(page, '#login-error')));
    await shot(page, 'login');

    await page.fill('#token-secret', tokens[1][1]);
    await page.click('#login-form button');
    await page.waitForSelector('#count-ready');
    assert.equal(await num(page, '#count-ready'), 1); // orders.eu only: payments is not its
    assert.equal(await num(page, '#count-topics'), 1);
    await waitFor('who the page says we are', async () => /token worker/.test(await text(page, '#who')));
    await page.goto(s.base + '/ui#/topics/orders.eu/ready');
    await page.waitForSelector('#job-table');
    assert.match(await text(page, '#read-only-note'), /no admin right/);
    assert.equal(await page.locator('#clear').count(), 0);

    await page.click('#logout');
    await page.waitForSelector('#login-form');
    await page.fill('#token-secret', tokens[0][1]);
    await page.click('#login-form button');
    await page.waitForSelector('#count-ready');
    assert.equal(await num(page, '#count-ready'), 2);
    await page.goto(s.base + '/ui#/topics/payments/ready');
    await page.waitForSelector('#clear');
    assert.deepEqual(page.errors, []);
  } finally {
    await page.context().close();
    await stopDelayqd(s);
    fs.rmSync(dir, {recursive: true, force: true});
  }
});

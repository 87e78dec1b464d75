// Black-box test of delayqd with a real third-party beanstalkd client for
// Node.js: jackd (https://github.com/getjackd/jackd), a maintained,
// dependency-free, promise-based client that covers the whole 1.12 protocol.
//
// Starts its own delayqd on a free loopback port and stops it at the end.
//   DELAYQD         path of the delayqd binary (default: build/delayqd)
//   BEANSTALKD_ADDR host:port of a running server to use instead (e.g.
//                   Debian's beanstalkd, to check the test itself)
// Run: ./run.sh (installs node_modules with `npm ci` first if needed), or
//   node --test jackd.test.js
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const net = require('node:net');
const path = require('node:path');
const {freePort} = require('../../free_port.js');
const fs = require('node:fs');
const os = require('node:os');
const crypto = require('node:crypto');
const Jackd = require('jackd');

const ROOT = path.resolve(__dirname, '..', '..', '..');
let server = null; // { proc, port, exited: Promise<{code, signal}>, log: string[] }
let host = '127.0.0.1';
let port = 0;
const clients = [];

function canConnect(p) {
  return new Promise((resolve) => {
    const sock = net.connect(p, '127.0.0.1');
    sock.once('connect', () => { sock.destroy(); resolve(true); });
    sock.once('error', () => resolve(false));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Starts delayqd on a free loopback port with `args` after -l and -p, and
// waits until it accepts. Returns { proc, port, exited, log }.
async function startDelayqd(args) {
  const binary = process.env.DELAYQD || path.join(ROOT, 'build', 'delayqd');
  const p = await freePort();
  const proc = spawn(binary, ['-l', '127.0.0.1', '-p', String(p), ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const log = [];
  proc.stderr.on('data', (d) => log.push(d.toString()));
  const exited = new Promise((resolve) => {
    proc.once('exit', (code, signal) => resolve({ code, signal }));
    // Not started at all (a wrong path): no 'exit' comes.
    proc.once('error', (e) => { log.push(`${binary}: ${e.message}\n`); resolve({ code: null, signal: null }); });
  });
  let gone = false;
  exited.then(() => { gone = true; });
  const deadline = Date.now() + 20000;
  while (!(await canConnect(p))) {
    if (gone) throw new Error(`delayqd exited early:\n${log.join('')}`);
    if (Date.now() > deadline) throw new Error('delayqd did not accept connections within 20 s');
    await sleep(20);
  }
  return { proc, port: p, exited, log };
}

// SIGTERM, and the exit: code 0, no signal.
async function stopDelayqd(s) {
  s.proc.kill('SIGTERM');
  const timer = setTimeout(() => s.proc.kill('SIGKILL'), 10000);
  const { code, signal } = await s.exited;
  clearTimeout(timer);
  assert.equal(signal, null, `delayqd was killed by ${signal}:\n${s.log.join('')}`);
  assert.equal(code, 0, `delayqd exited with ${code}:\n${s.log.join('')}`);
}

before(async () => {
  if (process.env.BEANSTALKD_ADDR) {
    [host, port] = process.env.BEANSTALKD_ADDR.split(':');
    port = Number(port);
    return;
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'delayqd-jackd-data-'));
  process.on('exit', () => fs.rmSync(dataDir, { recursive: true, force: true }));
  server = await startDelayqd(['-b', dataDir]);
  port = server.port;
});

after(async () => {
  for (const c of clients) {
    try { await c.disconnect(); } catch { /* already closed */ }
  }
  if (server) await stopDelayqd(server);
});

async function connect(toPort = port) {
  const c = new Jackd();
  await c.connect({ host, port: toPort });
  clients.push(c);
  return c;
}

// A tube of its own for each test (the server is shared).
function tubeName(label) {
  return `nj-${label}-${crypto.randomBytes(4).toString('hex')}`;
}

// jackd hands YAML replies back as text; these are flat "key: value" maps
// or "- item" lists.
function yamlMap(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const m = /^([a-z-]+): (.*)$/.exec(line);
    if (m) out[m[1]] = /^-?\d+$/.test(m[2]) ? Number(m[2]) : m[2];
  }
  return out;
}
function yamlList(text) {
  return text.split('\n').filter((l) => l.startsWith('- ')).map((l) => l.slice(2));
}

async function clientOn(label) {
  const c = await connect();
  const tube = tubeName(label);
  assert.equal(await c.use(tube), tube);
  assert.equal(await c.watch(tube), 2);
  assert.equal(await c.ignore('default'), 1);
  return { c, tube };
}

test('put, reserve, delete', async () => {
  const { c } = await clientOn('basic');
  const id = await c.put('hello', { priority: 5, ttr: 30 });
  assert.match(id, /^\d+$/);
  const job = await c.reserve();
  assert.equal(job.id, id);
  assert.equal(job.payload.toString(), 'hello');
  const st = yamlMap(await c.statsJob(id));
  assert.equal(st.state, 'reserved');
  assert.equal(st.pri, 5);
  assert.equal(st.ttr, 30);
  await c.delete(id);
  await assert.rejects(c.delete(id), /NOT_FOUND/);
  await assert.rejects(c.peek(id), /NOT_FOUND/);
});

// jackd 2.2.2 JSON-encodes a Buffer payload (its `typeof === 'object'` test
// comes first), so raw bytes cannot be sent through it; strings go as UTF-8.
test('string and JSON payloads round-trip', async () => {
  const { c } = await clientOn('payloads');
  const text = 'line one\r\nline two\r\n\u00e9\u4e2d\u{1f600}\u0000end';
  const id1 = await c.put(text);
  const id2 = await c.put({ order: 42, items: ['a', 'b'] });
  const j1 = await c.reserve();
  assert.equal(j1.id, id1);
  assert.deepEqual(j1.payload, Buffer.from(text));
  const j2 = await c.reserve();
  assert.equal(j2.id, id2);
  assert.deepEqual(JSON.parse(j2.payload.toString()), { order: 42, items: ['a', 'b'] });
});

// jackd pipelines commands issued without awaiting each one (its reserve
// replies must not be pipelined: it cannot parse two of them in a row, with
// beanstalkd too, so reserves are awaited one by one).
test('pipelined commands resolve in order', async () => {
  const { c } = await clientOn('pipeline');
  const ids = await Promise.all(Array.from({ length: 200 }, (_, i) => c.put(`p${i}`)));
  assert.equal(new Set(ids).size, 200);
  const nums = ids.map(Number);
  assert.deepEqual(nums, [...nums].sort((a, b) => a - b));
  const jobs = [];
  for (let i = 0; i < ids.length; i++) jobs.push(await c.reserveWithTimeout(1));
  assert.deepEqual(jobs.map((j) => j.payload.toString()), ids.map((_, i) => `p${i}`));
  await Promise.all(jobs.map((j) => c.delete(j.id)));
  assert.equal(yamlMap(await c.statsTube(await c.listTubeUsed()))['cmd-delete'], 200);
});

test('priorities and release', async () => {
  const { c } = await clientOn('release');
  const low = await c.put('low', { priority: 20 });
  const high = await c.put('high', { priority: 10 });
  let job = await c.reserve();
  assert.equal(job.id, high);
  await c.release(job.id, { priority: 30 });
  assert.equal((await c.reserve()).id, low);
  job = await c.reserve();
  assert.equal(job.id, high);
  const st = yamlMap(await c.statsJob(job.id));
  assert.equal(st.pri, 30);
  assert.equal(st.releases, 1);
  await c.release(job.id, { priority: 1, delay: 100 });
  assert.equal((await c.peekDelayed()).id, high);
  await assert.rejects(c.release(job.id), /NOT_FOUND/);
});

test('bury, peek-buried, kick and kick-job', async () => {
  const { c } = await clientOn('bury');
  const a = await c.put('a');
  const b = await c.put('b');
  await c.reserve();
  await c.reserve();
  await c.bury(a, 7);
  await c.bury(b);
  assert.equal((await c.peekBuried()).id, a);
  assert.equal(yamlMap(await c.statsJob(a)).buries, 1);
  assert.equal(await c.kick(1), 1);
  assert.equal(yamlMap(await c.statsJob(a)).state, 'ready');
  await c.kickJob(b);
  assert.equal(yamlMap(await c.statsJob(b)).kicks, 1);
  await assert.rejects(c.kickJob(b), /NOT_FOUND/);
  await assert.rejects(c.peekBuried(), /NOT_FOUND/);
  const d = await c.put('d', { delay: 100 });
  assert.equal(await c.kick(5), 1);
  assert.equal(yamlMap(await c.statsJob(d)).state, 'ready');
});

test('touch extends the TTR; an expired TTR returns the job', async () => {
  const { c, tube } = await clientOn('ttr');
  const id = await c.put('slow', { ttr: 2 });
  await c.reserve();
  await sleep(1200);
  await c.touch(id);
  await sleep(1200);
  assert.equal(yamlMap(await c.statsJob(id)).state, 'reserved');
  // Stop touching: another worker gets it once the TTR runs out.
  const other = await connect();
  await other.watch(tube);
  const started = Date.now();
  const job = await other.reserveWithTimeout(5);
  assert.equal(job.id, id);
  assert.ok(Date.now() - started < 4500);
  assert.equal(yamlMap(await other.statsJob(id)).timeouts, 1);
  await assert.rejects(c.touch(id), /NOT_FOUND/);
});

test('reserve-with-timeout, DEADLINE_SOON and reserve-job', async () => {
  const { c } = await clientOn('timeouts');
  await assert.rejects(c.reserveWithTimeout(0), /TIMED_OUT/);
  const started = Date.now();
  await assert.rejects(c.reserveWithTimeout(1), /TIMED_OUT/);
  assert.ok(Date.now() - started >= 900);
  const id = await c.put('short', { ttr: 1 });
  await c.reserveWithTimeout(0);
  await assert.rejects(c.reserveWithTimeout(0), /DEADLINE_SOON/);
  await c.delete(id);
  const delayed = await c.put('delayed', { delay: 100 });
  const job = await c.reserveJob(delayed);
  assert.equal(job.id, delayed);
  assert.equal(job.payload.toString(), 'delayed');
  await assert.rejects(c.reserveJob(delayed), /NOT_FOUND/);
});

test('a job put on one connection is reserved by a waiting one', async () => {
  const { c, tube } = await clientOn('cross');
  const worker = await connect();
  await worker.watch(tube);
  await worker.ignore('default');
  const waiting = worker.reserve();
  await sleep(200);
  const id = await c.put('cross');
  const job = await waiting;
  assert.equal(job.id, id);
  assert.equal(job.payload.toString(), 'cross');
  await worker.delete(id);
});

test('peek by id, ready and delayed', async () => {
  const { c } = await clientOn('peek');
  await assert.rejects(c.peekReady(), /NOT_FOUND/);
  await assert.rejects(c.peekDelayed(), /NOT_FOUND/);
  const r = await c.put('r', { priority: 3 });
  const d = await c.put('d', { delay: 60 });
  assert.equal((await c.peekReady()).id, r);
  assert.equal((await c.peekDelayed()).id, d);
  const p = await c.peek(d);
  assert.equal(p.id, d);
  assert.equal(p.payload.toString(), 'd');
});

test('tubes: use, watch, ignore, list', async () => {
  const c = await connect();
  const t = tubeName('tubes');
  assert.equal(await c.listTubeUsed(), 'default');
  assert.equal(await c.use(t), t);
  assert.equal(await c.getCurrentTube(), t);
  assert.equal(await c.watch(`${t}-a`), 2);
  assert.equal(await c.watch(`${t}-a`), 2);
  assert.equal(await c.watch(`${t}-b`), 3);
  assert.deepEqual(yamlList(await c.listTubesWatched()), ['default', `${t}-a`, `${t}-b`]);
  assert.equal(await c.ignore('default'), 2);
  assert.equal(await c.ignore(`${t}-a`), 1);
  await assert.rejects(c.ignore(`${t}-b`), /NOT_IGNORED/);
  const all = yamlList(await c.listTubes());
  assert.ok(all.includes('default'));
  assert.ok(all.includes(t));
  assert.ok(all.includes(`${t}-b`));
  assert.ok(!all.includes(`${t}-a`));
  await assert.rejects(c.use('bad name'), /BAD_FORMAT/);
  await assert.rejects(c.watch('-bad'), /BAD_FORMAT/);
});

test('stats, stats-tube, stats-job', async () => {
  const { c, tube } = await clientOn('stats');
  await c.put('x', { priority: 1 });
  await c.put('y', { priority: 5000 });
  const id = await c.put('z', { delay: 50, ttr: 7 });
  const ts = yamlMap(await c.statsTube(tube));
  assert.equal(ts.name, tube);
  assert.equal(ts['current-jobs-urgent'], 1);
  assert.equal(ts['current-jobs-ready'], 2);
  assert.equal(ts['current-jobs-delayed'], 1);
  assert.equal(ts['total-jobs'], 3);
  assert.equal(ts['current-using'], 1);
  assert.equal(ts['current-watching'], 1);
  const js = yamlMap(await c.statsJob(id));
  assert.equal(js.id, Number(id));
  assert.equal(js.tube, tube);
  assert.equal(js.state, 'delayed');
  assert.equal(js.delay, 50);
  assert.equal(js.ttr, 7);
  const s = yamlMap(await c.stats());
  for (const k of ['current-jobs-ready', 'cmd-put', 'total-jobs', 'current-connections', 'pid',
    'uptime', 'max-job-size', 'draining', 'version']) {
    assert.ok(k in s, `stats has ${k}`);
  }
  assert.equal(s['max-job-size'], 65535);
  assert.equal(s.draining, 'false');
  await assert.rejects(c.statsTube('no-such-tube-x'), /NOT_FOUND/);
  await assert.rejects(c.statsJob('999999999'), /NOT_FOUND/);
});

test('job too big is refused and the connection stays usable', async () => {
  const { c } = await clientOn('toobig');
  await assert.rejects(c.put('x'.repeat(65536)), /JOB_TOO_BIG/);
  const id = await c.put('y'.repeat(65535));
  const job = await c.reserve();
  assert.equal(job.id, id);
  assert.equal(job.payload.length, 65535);
});

test('many concurrent clients each get distinct jobs', async () => {
  const { c, tube } = await clientOn('many');
  const workers = await Promise.all(Array.from({ length: 20 }, async () => {
    const w = await connect();
    await w.watch(tube);
    await w.ignore('default');
    return w;
  }));
  const ids = await Promise.all(Array.from({ length: 100 }, (_, i) => c.put(`m${i}`)));
  const got = [];
  await Promise.all(workers.map(async (w) => {
    for (;;) {
      let job;
      try {
        job = await w.reserveWithTimeout(0);
      } catch (e) {
        if (/TIMED_OUT/.test(e.message)) return;
        throw e;
      }
      got.push(job.id);
      await w.delete(job.id);
    }
  }));
  assert.deepEqual([...got].sort(), [...ids].sort());
});

// jackd 2.2.2 writes pause-tube without its CRLF (with beanstalkd too, the
// command then never completes): the test ends the line through the
// client's own write().
test('pause-tube holds back the tube\'s reserves', async () => {
  const { c, tube } = await clientOn('pause');
  const id = await c.put('paused');
  const paused = c.pauseTube(tube, { delay: 1 });
  await c.write(Buffer.from('\r\n', 'ascii'));
  await paused;
  assert.equal(yamlMap(await c.statsTube(tube)).pause, 1);
  const started = Date.now();
  const job = await c.reserveWithTimeout(5);
  assert.equal(job.id, id);
  assert.ok(Date.now() - started >= 600, `reserved after ${Date.now() - started} ms`);
  const missing = c.pauseTube('no-such-tube-here', { delay: 1 });
  await c.write(Buffer.from('\r\n', 'ascii'));
  await assert.rejects(missing, /NOT_FOUND/);
});

test('quit ends the connection, and its reserved job is ready again', async () => {
  const { c, tube } = await clientOn('quit');
  const id = await c.put('orphan');
  assert.equal((await c.reserve()).id, id);
  const other = await connect();
  assert.equal(yamlMap(await other.statsJob(id)).state, 'reserved');
  const closed = new Promise((resolve) => c.socket.once('close', resolve));
  await c.quit();
  await closed;
  await other.watch(tube);
  const job = await other.reserveWithTimeout(5);
  assert.equal(job.id, id);
  assert.equal(yamlMap(await other.statsJob(id)).reserves, 2);
});

// A command delayqd does not know, through jackd's own command machinery
// (jackd sends none such by itself).
test('an unknown command: UNKNOWN_COMMAND, and the connection goes on', async () => {
  const { c, tube } = await clientOn('unknown');
  const frobnicate = c.createCommandHandler(() => Buffer.from('frobnicate 1 2\r\n', 'ascii'), [
    async (reply) => reply.toString('ascii'),
  ]);
  assert.equal(await frobnicate(), 'UNKNOWN_COMMAND');
  assert.equal(await c.listTubeUsed(), tube);
});

// jackd sizes its own puts right: the bad one goes through its write().
// Its reply reaches the next command waiting, a put, which jackd rejects
// with EXPECTED_CRLF; that put itself ran.
test('a body not followed by CRLF: EXPECTED_CRLF, and the next command runs', async () => {
  const { c, tube } = await clientOn('crlf');
  await c.write(Buffer.from('put 0 0 60 3\r\nabcde', 'ascii'));
  await assert.rejects(c.put('next'), /EXPECTED_CRLF/);
  const other = await connect();
  await other.use(tube);
  const ready = await other.peekReady();
  assert.equal(ready.payload.toString(), 'next');
  assert.equal(yamlMap(await other.statsTube(tube))['total-jobs'], 1);
});

// SIGUSR1 puts the server in drain mode, as beanstalkd: puts get DRAINING,
// the rest goes on. On a delayqd of its own: drain mode lasts until the exit.
test('drain mode after SIGUSR1: puts get DRAINING', { skip: !!process.env.BEANSTALKD_ADDR }, async () => {
  const own = await startDelayqd(['--in-memory']);
  try {
    const c = await connect(own.port);
    const id = await c.put('before');
    own.proc.kill('SIGUSR1');
    const deadline = Date.now() + 5000;
    while (yamlMap(await c.stats()).draining !== 'true' && Date.now() < deadline) await sleep(20);
    assert.equal(yamlMap(await c.stats()).draining, 'true');
    await assert.rejects(c.put('after'), /DRAINING/);
    const job = await c.reserveWithTimeout(0);
    assert.equal(job.id, id);
    await c.delete(id);
    assert.equal(yamlMap(await c.stats())['total-jobs'], 1);
    await c.quit();
  } finally {
    await stopDelayqd(own);
  }
});

// The delayq dashboard (docs/operations.md, "Dashboard"): a page of plain
// JavaScript, no build step, drawn from the HTTP API (docs/http-api.md) with
// the user's token. Pages, by the address after '#':
//   /                        overview: jobs by state, rates, lateness, health
//   /topics                  every topic: counts, pause, rate; sort, filter
//   /topics/NAME[/STATE]     a topic: its jobs by state, pause, kick, clear
//   /jobs/ID                 a job: every field, its body, kick, delete
//   /search/TEXT             jobs by id or key, topics by name
//   /login                   a token's secret, kept for this tab only
// Every value from the server is put in the page as text, never as markup.
'use strict';

(() => {
  const READ_ONLY = document.body.dataset.readOnly === 'true';
  const REFRESH_MS = 2000;
  const HISTORY = 60; // samples kept for the rate charts
  const TOKEN_KEY = 'delayq.token';
  const STATES = ['ready', 'delayed', 'reserved', 'buried'];
  const PAGE_SIZE = 50;
  const P99_SAMPLES = 30;  // the overview's p99: over the last 30 refreshes (a minute)
  const MAX_TOPIC_ROWS = 500;

  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  let page = null; // the page shown: {refresh()} or null
  let timer = null;
  let afterLogin = '#/';
  const overviewSamples = []; // {t, put, reserve, finish, timeout, lateness, wait}
  const topicSamples = new Map(); // topic -> {t, total}

  // ---- talking to the API ------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const opts = {method, headers: {}, cache: 'no-store'};
    if (token) opts.headers.Authorization = 'Bearer ' + token;
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(path, opts);
    const text = await res.text();
    if (!res.ok) {
      let code = 'http_' + res.status;
      let message = text || res.statusText;
      try {
        const e = JSON.parse(text).error;
        code = e.code;
        message = e.message;
      } catch (_) { /* not the API's error object */ }
      throw new ApiError(res.status, code, message);
    }
    const type = res.headers.get('Content-Type') || '';
    return type.startsWith('application/json') ? JSON.parse(text) : text;
  }

  // Who the server takes us for, and our rights on `topic` (or on every
  // topic): GET /whoami.
  function whoami(topic) {
    return api('GET', '/whoami' + (topic === undefined ? '' : '?topic=' + encodeURIComponent(topic)));
  }

  // ---- building the page -------------------------------------------------

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    appendAll(el, children);
    return el;
  }

  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.setAttribute('class', v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }

  function appendAll(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : String(c));
    }
  }

  function svg(tag, attrs, ...children) {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    setAttrs(el, attrs);
    appendAll(el, children);
    return el;
  }

  function show(...nodes) {
    const main = document.getElementById('main');
    main.replaceChildren(...nodes.flat(Infinity).filter((n) => n));
  }

  function flash(text, isError) {
    const el = document.getElementById('flash');
    el.textContent = text;
    el.className = isError ? 'error' : 'ok';
    el.hidden = false;
    clearTimeout(flash.timer);
    flash.timer = setTimeout(() => { el.hidden = true; }, isError ? 8000 : 4000);
  }

  function errorBox(e) {
    return h('p', {class: 'error-box'}, e instanceof ApiError ? `${e.status} ${e.code}: ${e.message}` : String(e));
  }

  // ---- numbers and times -------------------------------------------------

  const fmtInt = (n) => Number(n).toLocaleString('en-US');

  function fmtRate(r) {
    if (r === null || r === undefined || !isFinite(r)) return '–';
    return r < 10 ? r.toFixed(1) : Math.round(r).toLocaleString('en-US');
  }

  function fmtSeconds(s) {
    if (s === null || s === undefined || !isFinite(s)) return '–';
    if (s < 0.001) return Math.round(s * 1e6) + ' µs';
    if (s < 1) return (s * 1e3).toFixed(1) + ' ms';
    return s.toFixed(2) + ' s';
  }

  function fmtDuration(ms) {
    const neg = ms < 0;
    let s = Math.abs(ms) / 1000;
    let out;
    if (s < 1) out = Math.round(Math.abs(ms)) + ' ms';
    else if (s < 60) out = s.toFixed(1) + ' s';
    else if (s < 3600) out = Math.floor(s / 60) + ' min ' + Math.round(s % 60) + ' s';
    else if (s < 86400) out = Math.floor(s / 3600) + ' h ' + Math.round((s % 3600) / 60) + ' min';
    else out = Math.floor(s / 86400) + ' d ' + Math.round((s % 86400) / 3600) + ' h';
    return neg ? '-' + out : out;
  }

  function fmtTime(ms) {
    if (!ms) return '–';
    const iso = new Date(ms).toISOString().replace('T', ' ').replace('Z', ' UTC');
    const d = ms - Date.now();
    return `${iso} (${d >= 0 ? 'in ' + fmtDuration(d) : fmtDuration(-d) + ' ago'})`;
  }

  // ---- Prometheus text (GET /metrics) --------------------------------------

  function parseMetrics(text) {
    const out = [];
    for (const line of text.split('\n')) {
      if (!line || line[0] === '#') continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const labels = {};
      for (const l of (m[2] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
        labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
      out.push({name: m[1], labels, value: Number(m[3])});
    }
    return out;
  }

  // The sum of the samples of `name` whose labels include `match`; null if
  // there is none.
  function metricSum(samples, name, match) {
    let sum = null;
    for (const s of samples) {
      if (s.name !== name) continue;
      if (match && Object.entries(match).some(([k, v]) => s.labels[k] !== v)) continue;
      sum = (sum || 0) + s.value;
    }
    return sum;
  }

  // A histogram's cumulative buckets: [{le, count}] by le.
  function buckets(samples, name) {
    return samples.filter((s) => s.name === name + '_bucket')
        .map((s) => ({le: s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), count: s.value}))
        .sort((a, b) => a.le - b.le);
  }

  // The q-quantile of cumulative buckets, interpolated within its bucket as
  // Prometheus's histogram_quantile does; null when there are no counts.
  function quantile(q, bs) {
    if (!bs.length) return null;
    const total = bs[bs.length - 1].count;
    if (total <= 0) return null;
    const rank = q * total;
    let prevLe = 0;
    let prevCount = 0;
    for (const b of bs) {
      if (b.count >= rank) {
        if (b.le === Infinity) return prevLe;
        const inBucket = b.count - prevCount;
        return inBucket > 0 ? prevLe + (b.le - prevLe) * ((rank - prevCount) / inBucket) : b.le;
      }
      prevLe = b.le;
      prevCount = b.count;
    }
    return prevLe;
  }

  // Cumulative buckets a - b (observations made between two scrapes).
  function bucketDelta(a, b) {
    if (!b || a.length !== b.length) return a;
    return a.map((x, i) => ({le: x.le, count: x.count - b[i].count}));
  }

  // ---- charts (plain SVG) --------------------------------------------------

  function sparkline(values, label) {
    const w = 180;
    const hgt = 40;
    const max = Math.max(1, ...values);
    const step = values.length > 1 ? w / (HISTORY - 1) : 0;
    const x0 = w - step * (values.length - 1);
    const points = values.map((v, i) => `${(x0 + i * step).toFixed(1)},${(hgt - 2 - (v / max) * (hgt - 4)).toFixed(1)}`);
    return svg('svg', {class: 'spark', viewBox: `0 0 ${w} ${hgt}`, width: w, height: hgt, role: 'img', 'aria-label': label},
        svg('polyline', {points: points.join(' '), fill: 'none', stroke: 'currentColor', 'stroke-width': 1.5}));
  }

  // A bar split by state.
  function stateBar(counts) {
    const total = STATES.reduce((n, s) => n + (counts[s] || 0), 0);
    const w = 400;
    let x = 0;
    const rects = [];
    for (const s of STATES) {
      const part = total ? ((counts[s] || 0) / total) * w : 0;
      if (part > 0) rects.push(svg('rect', {x, y: 0, width: part, height: 14, class: 'st-' + s}, svg('title', {}, `${s}: ${counts[s]}`)));
      x += part;
    }
    if (!total) rects.push(svg('rect', {x: 0, y: 0, width: w, height: 14, class: 'st-empty'}));
    return svg('svg', {class: 'statebar', viewBox: `0 0 ${w} 14`, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'jobs by state'}, rects);
  }

  // ---- the confirmation dialog ----------------------------------------------

  // Asks before an action that deletes: resolves true when confirmed. With
  // `typed`, the user must type that text first.
  function confirmAction(title, body, okLabel, typed) {
    const dlg = document.getElementById('confirm');
    document.getElementById('confirm-title').textContent = title;
    const ok = document.getElementById('confirm-ok');
    ok.textContent = okLabel;
    const parts = [h('p', {}, body)];
    let input = null;
    if (typed) {
      input = h('input', {id: 'confirm-typed', autocomplete: 'off', 'aria-label': 'type to confirm'});
      parts.push(h('label', {}, 'Type ', h('code', {}, typed), ' to confirm: ', input));
      ok.disabled = true;
      input.addEventListener('input', () => { ok.disabled = input.value !== typed; });
    } else {
      ok.disabled = false;
    }
    document.getElementById('confirm-body').replaceChildren(...parts);
    return new Promise((resolve) => {
      dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), {once: true});
      dlg.returnValue = '';
      dlg.showModal();
      (input || ok).focus();
    });
  }

  // ---- overview ---------------------------------------------------------------

  async function overview() {
    const who = await whoami();
    const root = h('section', {id: 'overview'});
    const refresh = async () => {
      const t = Date.now();
      let counts;
      let topics;
      let info = null;
      let samples = null;
      if (who.rights.admin) {
        const [stats, text] = await Promise.all([api('GET', '/stats'), api('GET', '/metrics')]);
        counts = stats.jobs;
        topics = stats.topics;
        info = stats;
        samples = parseMetrics(text);
      } else {
        // Without the admin right: the sum of the topics this token sees.
        const list = (await api('GET', '/topics?stats=true')).topics;
        counts = Object.fromEntries(STATES.map((s) => [s, list.reduce((n, x) => n + x.jobs[s], 0)]));
        topics = list.length;
      }
      const sample = {t};
      if (samples) {
        const op = (name) => {
          const ok = metricSum(samples, 'delayq_operations_total', {op: name, outcome: 'ok'});
          return ok !== null ? ok : metricSum(samples, 'delayq_requests_total', {op: name});
        };
        sample.put = op('put');
        sample.reserve = op('reserve');
        const finish = op('finish');
        const del = op('delete');
        sample.finish = finish === null && del === null ? null : (finish || 0) + (del || 0);
        const timeouts = metricSum(samples, 'delayq_operations_total', {op: 'timeout'});
        sample.timeout = timeouts !== null ? timeouts : metricSum(samples, 'delayq_ttr_timeouts_total');
        sample.lateness = buckets(samples, 'delayq_job_lateness_seconds');
        sample.wait = buckets(samples, 'delayq_job_ready_wait_seconds');
      }
      // Back after a while (another page, a hidden tab): the old samples
      // would make one rate of the whole time away.
      const prevSample = overviewSamples[overviewSamples.length - 1];
      if (prevSample && t - prevSample.t > 3 * REFRESH_MS) overviewSamples.length = 0;
      overviewSamples.push(sample);
      while (overviewSamples.length > HISTORY + 1) overviewSamples.shift();
      root.replaceChildren(...drawOverview(counts, topics, info, samples, who));
    };
    await refresh();
    return {node: root, refresh};
  }

  function rateSeries(key) {
    const out = [];
    for (let i = 1; i < overviewSamples.length; i++) {
      const a = overviewSamples[i - 1];
      const b = overviewSamples[i];
      if (a[key] === undefined || b[key] === undefined || a[key] === null || b[key] === null) continue;
      const dt = (b.t - a.t) / 1000;
      out.push(dt > 0 ? Math.max(0, (b[key] - a[key]) / dt) : 0);
    }
    return out;
  }

  function card(title, value, extra, id, cls) {
    return h('div', {class: cls ? 'card ' + cls : 'card', id}, h('div', {class: 'card-title'}, title), h('div', {class: 'card-value'}, value), extra || null);
  }

  function drawOverview(counts, topics, info, samples, who) {
    const total = STATES.reduce((n, s) => n + counts[s], 0);
    const out = [];
    out.push(h('h1', {}, 'Overview'));
    if (!who.rights.admin)
      out.push(h('p', {class: 'muted'}, 'Counts of the topics this token may see; rates, lateness and health need the admin right on every topic.'));
    out.push(h('div', {class: 'cards', id: 'job-counts'},
        STATES.map((s) => card(s, fmtInt(counts[s]), null, 'count-' + s, 'st-card-' + s)),
        card('total', fmtInt(total), null, 'count-total'),
        card('topics', fmtInt(topics), h('a', {href: '#/topics'}, 'all topics'), 'count-topics')));
    out.push(stateBar(counts));
    if (samples) {
      const rates = [['put', 'puts'], ['reserve', 'reserves'], ['finish', 'finishes (finish, delete)'], ['timeout', 'TTR timeouts']];
      out.push(h('h2', {}, 'Rates per second'));
      out.push(h('div', {class: 'cards', id: 'rates'}, rates.map(([key, label]) => {
        const series = rateSeries(key);
        const last = series.length ? series[series.length - 1] : null;
        return card(label, fmtRate(last), sparkline(series, label + ' per second'), 'rate-' + key);
      })));
      // The p99 of what was observed over the last minute (the samples
      // kept, up to 30 back): "–" when nothing was, or before a second
      // sample.
      const last = overviewSamples[overviewSamples.length - 1];
      const first = overviewSamples[Math.max(0, overviewSamples.length - 1 - P99_SAMPLES)];
      const windowed = (key) => first === last ? null : quantile(0.99, bucketDelta(last[key], first[key]));
      out.push(h('h2', {}, 'Latency'));
      out.push(h('div', {class: 'cards', id: 'latency'},
          card('lateness p99', fmtSeconds(windowed('lateness')), h('div', {class: 'muted'}, 'after the due time, until ready; last minute'), 'lateness-p99'),
          card('ready wait p99', fmtSeconds(windowed('wait')), h('div', {class: 'muted'}, 'ready, until reserved; last minute'), 'wait-p99')));
      const health = (name) => {
        const v = metricSum(samples, name);
        return v === null ? '–' : v >= 1 ? 'healthy' : 'failing';
      };
      const redis = metricSum(samples, 'delayq_redis_connected');
      out.push(h('h2', {}, 'Health'));
      out.push(h('div', {class: 'cards', id: 'health'},
          card('backend', health('delayq_backend_healthy'), null, 'health-backend'),
          card('store', metricSum(samples, 'delayq_store_healthy') === null && redis === null
            ? 'in memory' : health('delayq_store_healthy'), null, 'health-store'),
          card('redis', redis === null ? '–' : redis >= 1 ? 'connected' : 'disconnected', null, 'health-redis'),
          card('server', info.draining ? 'draining' : 'serving',
              h('div', {class: 'muted'}, `delayqd ${info.version}, up ${fmtDuration(info.uptime_ms)}`), 'health-server')));
    }
    return out;
  }

  // ---- topics -------------------------------------------------------------------

  const topicsView = {sort: 'name', desc: false, filter: ''};

  async function topicsPage() {
    const root = h('section', {id: 'topics'});
    const filter = h('input', {id: 'topic-filter', type: 'search', placeholder: 'Filter topics', value: topicsView.filter, 'aria-label': 'Filter topics'});
    const table = h('div', {});
    let list = [];
    const draw = () => table.replaceChildren(drawTopics(list, draw));
    filter.addEventListener('input', () => {
      topicsView.filter = filter.value;
      draw();
    });
    root.append(h('h1', {}, 'Topics'), filter, table);
    const refresh = async () => {
      list = (await api('GET', '/topics?stats=true')).topics;
      const now = Date.now();
      for (const t of list) {
        const prev = topicSamples.get(t.name);
        t.rate = prev && now > prev.t ? Math.max(0, (t.total_jobs - prev.total) * 1000 / (now - prev.t)) : null;
        topicSamples.set(t.name, {t: now, total: t.total_jobs});
      }
      draw();
    };
    await refresh();
    return {node: root, refresh};
  }

  function drawTopics(list, redraw) {
    const cols = [['name', 'topic'], ...STATES.map((s) => [s, s]), ['total', 'total'], ['rate', 'puts/s'], ['paused', 'paused']];
    const value = (t, key) => key === 'name' ? t.name : key === 'rate' ? (t.rate || 0)
        : key === 'paused' ? (t.paused ? 1 : 0) : key === 'total' ? STATES.reduce((n, s) => n + t.jobs[s], 0) : t.jobs[key];
    const needle = topicsView.filter.toLowerCase();
    const shown = list.filter((t) => t.name.toLowerCase().includes(needle));
    shown.sort((a, b) => {
      const x = value(a, topicsView.sort);
      const y = value(b, topicsView.sort);
      const c = typeof x === 'string' ? x.localeCompare(y) : x - y;
      return topicsView.desc ? -c : c;
    });
    const head = h('tr', {}, cols.map(([key, label]) => h('th', {
      class: topicsView.sort === key ? (topicsView.desc ? 'sorted desc' : 'sorted asc') : '',
      'data-sort': key,
      onclick: () => {
        topicsView.desc = topicsView.sort === key ? !topicsView.desc : key !== 'name';
        topicsView.sort = key;
        redraw();
      },
    }, label)));
    // A page of 10,000 rows redrawn every 2 s would make the browser crawl:
    // the first MAX_TOPIC_ROWS in this order, and the filter for the rest.
    const rows = shown.slice(0, MAX_TOPIC_ROWS).map((t) => h('tr', {'data-topic': t.name},
        h('td', {}, h('a', {href: topicHref(t.name)}, t.name)),
        STATES.map((s) => h('td', {class: 'num', 'data-state': s}, fmtInt(t.jobs[s]))),
        h('td', {class: 'num'}, fmtInt(value(t, 'total'))),
        h('td', {class: 'num'}, fmtRate(t.rate)),
        h('td', {}, t.paused ? `yes (${fmtDuration(t.pause_time_left_ms)} left)` : 'no')));
    return h('div', {},
        h('p', {class: 'muted', id: 'topic-count'}, shown.length > MAX_TOPIC_ROWS
          ? `the first ${MAX_TOPIC_ROWS} of ${shown.length} topics shown (of ${list.length}): filter to find the others`
          : `${shown.length} of ${list.length} topics`),
        h('table', {class: 'grid', id: 'topic-table'}, h('thead', {}, head), h('tbody', {}, rows)));
  }

  const topicHref = (name, state) => '#/topics/' + encodeURIComponent(name) + (state ? '/' + state : '');

  // ---- a topic ------------------------------------------------------------------

  async function topicPage(name, state) {
    state = STATES.includes(state) ? state : 'ready';
    const root = h('section', {id: 'topic'});
    const [who, first] = await Promise.all([whoami(name), topicStats(name)]);
    const canAct = !READ_ONLY && who.rights.admin;
    const head = h('div', {});
    const actions = h('div', {class: 'actions-row'});
    const jobs = h('div', {});
    const nav = {order: 'asc', cursors: [''], at: 0};
    let stats = first;

    const drawHead = () => head.replaceChildren(
        h('h1', {}, 'Topic ', h('span', {class: 'mono', id: 'topic-name'}, name)),
        stats ? h('p', {id: 'topic-status'}, stats.paused
          ? `Paused: ${fmtDuration(stats.pause_time_left_ms)} left of ${fmtDuration(stats.pause_ms)}.`
          : 'Not paused.', ` ${fmtInt(stats.total_jobs)} jobs put so far; ${fmtInt(stats.watching)} watching, ${fmtInt(stats.waiting)} waiting.`)
          : h('p', {class: 'muted'}, 'This topic has no jobs and no watchers.'),
        h('nav', {class: 'tabs', id: 'state-tabs'}, STATES.map((s) => h('a', {
          href: topicHref(name, s), class: s === state ? 'active' : '', 'data-state': s,
        }, s, ' ', h('span', {class: 'badge', id: 'tab-count-' + s}, stats ? fmtInt(stats.jobs[s]) : '0')))));

    // One page at a time: a reply to an earlier load (a double click, the
    // order changed meanwhile) is dropped.
    let loads = 0;
    const loadJobs = async () => {
      const mine = ++loads;
      nav.at = Math.max(0, Math.min(nav.at, nav.cursors.length - 1));
      const order = nav.order;
      const q = new URLSearchParams({state, limit: String(PAGE_SIZE), order});
      if (nav.cursors[nav.at]) q.set('after', nav.cursors[nav.at]);
      let reply;
      try {
        reply = await api('GET', `/topics/${encodeURIComponent(name)}/jobs?${q}`);
      } catch (e) {
        if (mine !== loads) return;
        if (e.status === 401) return goLogin();
        jobs.replaceChildren(drawJobList([], state, nav, loadJobs), errorBox(e));
        return;
      }
      if (mine !== loads || order !== nav.order) return;
      nav.cursors.length = nav.at + 1;
      if (reply.next) nav.cursors.push(reply.next);
      jobs.replaceChildren(drawJobList(reply.jobs, state, nav, loadJobs));
    };

    const drawActions = canAct
      ? topicActions(actions, name, () => stats, async () => {
        stats = await topicStats(name);
        drawHead();
        drawActions();
        await loadJobs();
      })
      : () => actions.replaceChildren(h('p', {class: 'muted', id: 'read-only-note'}, READ_ONLY
        ? 'Read-only dashboard.' : 'This token has no admin right on this topic: nothing to change here.'));
    drawHead();
    drawActions();
    root.append(head, actions, jobs);
    await loadJobs();
    const refresh = async () => {
      const was = stats && stats.paused;
      stats = await topicStats(name);
      drawHead();
      if ((stats && stats.paused) !== was) drawActions();
    };
    return {node: root, refresh};
  }

  // A topic's counts; one that does not exist now (no jobs, no watchers)
  // comes back empty (?empty=true), not as a 404.
  async function topicStats(name) {
    const t = await api('GET', '/topics/' + encodeURIComponent(name) + '?empty=true');
    return t.total_jobs === 0 && t.watching === 0 && STATES.every((s) => t.jobs[s] === 0) ? null : t;
  }

  // The topic's buttons, drawn into `into`: returns the function that draws
  // them again (pause turns to resume); the numbers typed are kept.
  function topicActions(into, name, stats, reload) {
    const act = async (fn) => {
      try {
        flash(await fn());
      } catch (e) {
        if (e.status === 401) return goLogin();
        flash(e instanceof ApiError ? `${e.code}: ${e.message}` : String(e), true);
      }
      await reload();
    };
    const pauseFor = h('input', {type: 'number', min: 1, value: 60, id: 'pause-seconds', 'aria-label': 'seconds to pause'});
    const kickN = h('input', {type: 'number', min: 1, value: 100, id: 'kick-count', 'aria-label': 'jobs to kick'});
    return () => into.replaceChildren(
      h('span', {class: 'group'},
          stats() && stats().paused
            ? h('button', {id: 'resume', onclick: () => act(async () => {
              await api('POST', `/topics/${encodeURIComponent(name)}/pause`, {delay_ms: 0});
              return `Resumed ${name}.`;
            })}, 'Resume')
            : [pauseFor, ' s ', h('button', {id: 'pause', onclick: () => act(async () => {
              const s = Math.max(1, Number(pauseFor.value) || 60);
              await api('POST', `/topics/${encodeURIComponent(name)}/pause`, {delay_ms: Math.round(s * 1000)});
              return `Paused ${name} for ${s} s.`;
            })}, 'Pause')]),
      h('span', {class: 'group'}, kickN, h('button', {id: 'kick', onclick: () => act(async () => {
        const n = Math.max(1, Math.floor(Number(kickN.value) || 1));
        const r = await api('POST', `/topics/${encodeURIComponent(name)}/kick`, {bound: n});
        return `Kicked ${r.kicked} job${r.kicked === 1 ? '' : 's'} of ${name}.`;
      })}, 'Kick')),
      h('span', {class: 'group'}, h('button', {id: 'clear', class: 'danger', onclick: async () => {
        const s = stats();
        const counts = s ? s.jobs : {ready: 0, delayed: 0, buried: 0, reserved: 0};
        const n = counts.ready + counts.delayed + counts.buried;
        const ok = await confirmAction(`Clear topic ${name}?`,
            `This deletes every job of ${name} that is not reserved: ${fmtInt(n)} jobs now ` +
            `(${fmtInt(counts.ready)} ready, ${fmtInt(counts.delayed)} delayed, ${fmtInt(counts.buried)} buried). ` +
            `Its ${fmtInt(counts.reserved)} reserved jobs are kept. This cannot be undone.`, `Delete ${fmtInt(n)} jobs`, name);
        if (!ok) return;
        act(async () => {
          const r = await api('POST', `/topics/${encodeURIComponent(name)}/clear`, {states: ['ready', 'delayed', 'buried']});
          return `Cleared ${r.cleared} job${r.cleared === 1 ? '' : 's'} of ${name}.`;
        });
      }}, 'Clear…')));
  }

  function drawJobList(list, state, nav, load) {
    const timeCol = state === 'delayed' ? ['due', 'due_ms'] : state === 'reserved' ? ['deadline', 'deadline_ms'] : ['created', 'created_ms'];
    const rows = list.map((j) => h('tr', {'data-job': j.id},
        h('td', {}, h('a', {href: '#/jobs/' + j.id}, String(j.id))),
        h('td', {class: 'mono'}, j.key || ''),
        h('td', {class: 'num'}, String(j.priority)),
        h('td', {}, fmtTime(j[timeCol[1]])),
        h('td', {class: 'num'}, String(j.reserves)),
        h('td', {class: 'num'}, String(j.timeouts)),
        h('td', {class: 'num'}, String(j.buries)),
        h('td', {class: 'num'}, fmtInt(j.body_bytes))));
    const pager = h('div', {class: 'pager'},
        h('button', {id: 'order', onclick: () => {
          nav.order = nav.order === 'asc' ? 'desc' : 'asc';
          nav.cursors = [''];
          nav.at = 0;
          load();
        }}, nav.order === 'asc' ? 'Oldest first' : 'Newest first'),
        h('button', {id: 'page-first', disabled: nav.at === 0, onclick: () => { nav.at = 0; load(); }}, 'First'),
        h('button', {id: 'page-prev', disabled: nav.at === 0, onclick: () => { nav.at -= 1; load(); }}, 'Previous'),
        h('span', {class: 'muted', id: 'page-number'}, `page ${nav.at + 1}`),
        h('button', {id: 'page-next', disabled: nav.cursors.length <= nav.at + 1, onclick: () => { nav.at += 1; load(); }}, 'Next'),
        h('button', {id: 'page-reload', onclick: () => load()}, 'Reload'));
    if (!list.length) return h('div', {}, pager, h('p', {class: 'muted', id: 'no-jobs'}, `No ${state} jobs${nav.at ? ' on this page' : ''}.`));
    return h('div', {}, pager, h('table', {class: 'grid', id: 'job-table'},
        h('thead', {}, h('tr', {}, ['id', 'key', 'priority', timeCol[0], 'reserves', 'timeouts', 'buries', 'bytes'].map((c) => h('th', {}, c)))),
        h('tbody', {}, rows)));
  }

  // ---- a job --------------------------------------------------------------------

  function bodyBytes(job) {
    if (job.body_base64 !== undefined) {
      const bin = atob(job.body_base64);
      return Uint8Array.from(bin, (c) => c.charCodeAt(0));
    }
    return new TextEncoder().encode(job.body || '');
  }

  function hexDump(bytes) {
    const lines = [];
    for (let off = 0; off < bytes.length; off += 16) {
      const row = bytes.subarray(off, off + 16);
      const hex = Array.from(row, (b) => b.toString(16).padStart(2, '0')).join(' ');
      const text = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
      lines.push(off.toString(16).padStart(8, '0') + '  ' + hex.padEnd(47) + '  ' + text);
    }
    return lines.join('\n');
  }

  function bodyView(job) {
    const bytes = bodyBytes(job);
    const text = new TextDecoder('utf-8', {fatal: false}).decode(bytes);
    const pre = h('pre', {class: 'body', id: 'job-body'});
    const modes = {
      text: () => text,
      json: () => {
        try {
          return JSON.stringify(JSON.parse(text), null, 2);
        } catch (e) {
          return `(not JSON: ${e.message})`;
        }
      },
      hex: () => hexDump(bytes),
    };
    let mode = 'text';
    try {
      JSON.parse(text);
      mode = 'json';
    } catch (_) { /* text */ }
    const tabs = h('nav', {class: 'tabs small'});
    const draw = () => {
      pre.textContent = modes[mode]();
      tabs.replaceChildren(...Object.keys(modes).map((m) => h('button', {
        type: 'button', class: m === mode ? 'active' : '', id: 'body-' + m, 'aria-pressed': String(m === mode),
        onclick: () => { mode = m; draw(); },
      }, m === 'json' ? 'JSON' : m)));
    };
    draw();
    return h('div', {}, h('h2', {}, `Body (${fmtInt(bytes.length)} bytes)`), tabs, pre);
  }

  async function jobPage(id) {
    const root = h('section', {id: 'job'});
    let job;
    try {
      job = await api('GET', '/jobs/' + encodeURIComponent(id));
    } catch (e) {
      if (e.status === 404) return {node: h('section', {id: 'job'}, h('h1', {}, 'Job ' + id), h('p', {id: 'job-missing'}, 'No such job: it was finished or deleted, or never was.'))};
      throw e;
    }
    const who = await whoami(job.topic);
    const canAct = !READ_ONLY && who.rights.admin;
    const fields = [
      ['id', job.id], ['topic', h('a', {href: topicHref(job.topic, job.state)}, job.topic)], ['key', job.key || '–'],
      ['state', job.state], ['priority', job.priority], ['created', fmtTime(job.created_ms)],
      ['due', job.due_ms ? fmtTime(job.due_ms) : '–'], ['deadline', job.deadline_ms ? fmtTime(job.deadline_ms) : '–'],
      ['delay', fmtDuration(job.delay_ms || 0)], ['time to run', fmtDuration(job.ttr_ms)],
      ['max tries', job.max_tries ? job.max_tries : 'unlimited'],
      ['reserves', job.reserves], ['timeouts', job.timeouts], ['releases', job.releases], ['buries', job.buries], ['kicks', job.kicks],
    ];
    // A push topic's job keeps its last failed try's answer (docs/push.md).
    if (job.last_answer)
      fields.push(['last answer', h('span', {id: 'job-last-answer'}, job.last_answer.status + ': ' +
          (job.last_answer.text !== undefined ? job.last_answer.text : '(not text)'))]);
    for (const [k, v] of Object.entries(job)) {
      const known = ['id', 'topic', 'key', 'state', 'priority', 'created_ms', 'due_ms', 'deadline_ms', 'delay_ms', 'ttr_ms',
        'max_tries', 'reserves', 'timeouts', 'releases', 'buries', 'kicks', 'last_answer', 'body', 'body_base64'];
      if (!known.includes(k)) fields.push([k, typeof v === 'object' ? JSON.stringify(v) : v]);
    }
    const actions = h('div', {class: 'actions-row'});
    if (canAct) {
      if (job.state === 'buried' || job.state === 'delayed')
        actions.append(h('button', {id: 'job-kick', onclick: async () => {
          try {
            await api('POST', `/jobs/${job.id}/kick`);
            flash(`Kicked job ${job.id}: it is ready.`);
          } catch (e) {
            flash(`${e.code || ''}: ${e.message}`, true);
          }
          route();
        }}, 'Kick'));
      actions.append(h('button', {id: 'job-delete', class: 'danger', onclick: async () => {
        const ok = await confirmAction(`Delete job ${job.id}?`,
            `This deletes job ${job.id} of topic ${job.topic} (${job.state}${job.key ? ', key ' + job.key : ''}). This cannot be undone.`, 'Delete');
        if (!ok) return;
        try {
          await api('DELETE', `/jobs/${job.id}`);
          flash(`Deleted job ${job.id} of ${job.topic}.`);
          location.hash = topicHref(job.topic, job.state);
        } catch (e) {
          flash(`${e.code || ''}: ${e.message}`, true);
          route();
        }
      }}, 'Delete…'));
    } else {
      actions.append(h('p', {class: 'muted', id: 'read-only-note'}, READ_ONLY ? 'Read-only dashboard.' : 'This token has no admin right on this topic.'));
    }
    root.append(h('h1', {}, 'Job ', h('span', {class: 'mono'}, String(job.id))), actions,
        h('table', {class: 'fields', id: 'job-fields'}, h('tbody', {}, fields.map(([k, v]) =>
          h('tr', {'data-field': k}, h('th', {}, k), h('td', {}, v instanceof Node ? v : String(v)))))),
        bodyView(job));
    return {node: root};
  }

  // ---- search -------------------------------------------------------------------

  async function searchPage(q) {
    const root = h('section', {id: 'search-results'}, h('h1', {}, 'Search: ', h('span', {class: 'mono'}, q)));
    const found = [];
    const tries = [];
    if (/^[0-9]+$/.test(q)) {
      tries.push(api('GET', '/jobs/' + q).then((j) => found.push(j)).catch((e) => {
        if (e.status === 401) throw e;
      }));
    }
    tries.push(api('GET', '/jobs?key=' + encodeURIComponent(q)).then((r) => {
      for (const j of r.jobs) if (!found.some((f) => f.id === j.id)) found.push(j);
    }).catch((e) => {
      if (e.status === 401) throw e;
    }));
    let topics = [];
    tries.push(api('GET', '/topics').then((r) => {
      topics = r.topics.filter((t) => t.toLowerCase().includes(q.toLowerCase()));
    }).catch((e) => {
      if (e.status === 401) throw e;
    }));
    await Promise.all(tries);
    if (found.length === 1 && !topics.length && String(found[0].id) === q) {
      location.replace('#/jobs/' + found[0].id);
      return null;
    }
    root.append(h('h2', {}, `Jobs (${found.length})`));
    root.append(found.length
      ? h('table', {class: 'grid', id: 'found-jobs'},
          h('thead', {}, h('tr', {}, ['id', 'topic', 'key', 'state'].map((c) => h('th', {}, c)))),
          h('tbody', {}, found.map((j) => h('tr', {'data-job': j.id},
              h('td', {}, h('a', {href: '#/jobs/' + j.id}, String(j.id))),
              h('td', {}, h('a', {href: topicHref(j.topic)}, j.topic)),
              h('td', {class: 'mono'}, j.key || ''), h('td', {}, j.state)))))
      : h('p', {class: 'muted', id: 'no-found-jobs'}, 'No job has this id or key.'));
    root.append(h('h2', {}, `Topics (${topics.length})`));
    root.append(topics.length ? h('ul', {id: 'found-topics'}, topics.map((t) => h('li', {}, h('a', {href: topicHref(t)}, t))))
      : h('p', {class: 'muted'}, 'No topic name holds this text.'));
    return {node: root};
  }

  // ---- login ----------------------------------------------------------------------

  function goLogin() {
    if (!location.hash.startsWith('#/login')) afterLogin = location.hash || '#/';
    location.hash = '#/login';
  }

  function loginPage(message) {
    const secret = h('input', {type: 'password', id: 'token-secret', autocomplete: 'current-password', required: true, 'aria-label': 'token secret'});
    const note = h('p', {class: 'error-box', id: 'login-error', hidden: !message}, message || '');
    const form = h('form', {id: 'login-form', onsubmit: async (ev) => {
      ev.preventDefault();
      token = secret.value.trim();
      try {
        await whoami();
        sessionStorage.setItem(TOKEN_KEY, token);
        location.hash = afterLogin === '#/login' ? '#/' : afterLogin;
      } catch (e) {
        token = '';
        sessionStorage.removeItem(TOKEN_KEY);
        note.textContent = e.status === 401 ? 'No token has this secret.' : `${e.code || ''}: ${e.message}`;
        note.hidden = false;
      }
    }}, h('label', {}, 'Token secret ', secret), h('button', {type: 'submit'}, 'Log in'));
    return {node: h('section', {id: 'login'}, h('h1', {}, 'Log in'),
        h('p', {}, 'This delayqd asks for a token (docs/security.md). Its secret is kept in this browser tab only, and sent with each request.'),
        note, form)};
  }

  // ---- the frame: routing, refresh, who -------------------------------------------

  async function drawWho() {
    const who = document.getElementById('who');
    const logout = document.getElementById('logout');
    logout.hidden = !token;
    try {
      const w = await whoami();
      who.textContent = (w.token ? 'token ' + w.token : w.trusted ? 'trusted network' : '') + (READ_ONLY ? ' · read-only' : '');
    } catch (_) {
      who.textContent = READ_ONLY ? 'read-only' : '';
    }
  }

  let routing = 0;
  async function route() {
    const mine = ++routing;
    const hash = location.hash.replace(/^#/, '') || '/';
    let parts;
    try {
      parts = hash.split('/').slice(1).map(decodeURIComponent);
    } catch (_) {
      parts = [];  // a malformed address: the overview
    }
    for (const id of ['overview', 'topics'])
      document.getElementById('nav-' + id).classList.toggle('active', (parts[0] || 'overview') === id && parts.length <= 1);
    page = null;
    try {
      let p;
      if (parts[0] === 'login') p = loginPage();
      else if (parts[0] === 'topics' && parts[1]) p = await topicPage(parts[1], parts[2]);
      else if (parts[0] === 'topics') p = await topicsPage();
      else if (parts[0] === 'jobs' && parts[1]) p = await jobPage(parts[1]);
      else if (parts[0] === 'search' && parts[1]) p = await searchPage(parts[1]);
      else p = await overview();
      if (mine !== routing || !p) return;
      page = p;
      show(p.node);
      document.body.dataset.page = parts[0] || 'overview';
    } catch (e) {
      if (mine !== routing) return;
      if (e.status === 401) {
        if (token) {
          token = '';
          sessionStorage.removeItem(TOKEN_KEY);
        }
        goLogin();
        return;
      }
      show(h('section', {}, h('h1', {}, 'Error'), errorBox(e)));
    }
    drawWho();
  }

  async function tick() {
    const p = page;
    if (p && p.refresh && document.getElementById('auto-refresh').checked && !document.querySelector('dialog[open]')) {
      try {
        await p.refresh();
      } catch (e) {
        if (e.status === 401) goLogin();
        else flash(`Refresh failed: ${e.message}`, true);
      }
    }
    timer = setTimeout(tick, REFRESH_MS);
  }

  document.getElementById('search').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = document.getElementById('search-input').value.trim();
    if (q) location.hash = '#/search/' + encodeURIComponent(q);
  });
  document.getElementById('logout').addEventListener('click', () => {
    token = '';
    sessionStorage.removeItem(TOKEN_KEY);
    location.hash = '#/';
    route();
  });
  window.addEventListener('hashchange', route);
  route();
  timer = setTimeout(tick, REFRESH_MS);
})();

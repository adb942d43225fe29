// The analytics worksheet (#/analytics), as a storage appliance's analytics has it:
// pick a statistic and a breakdown, add it to the worksheet, watch it live (per
// second) or over history (per minute, per hour), drill down from a breakdown row
// into a further breakdown, and see latency as a heat map. Everything comes from
// GET /api/v1/analytics/{stat}?by=&window=&resolution=&samples=true; admins switch
// statistics and drill-downs on and off (POST .../enable|disable), read-only users
// see the switches' state only.
//
// Drill-downs offered are the ones the engine records jointly, where a further
// breakdown's names carry the row's: an operation's row leads to its latencies
// (op-latency, names "OP BUCKET"), a client's to its operations and files
// (client-op, client-file: "CLIENT OP", "CLIENT SHARE/PATH"), an initiator's to
// its commands (initiator-op), a share's to its files (file: "SHARE/PATH").
// Breakdowns recorded only independently are never joined by guesswork.

import { api, enc } from './api.js';
import { LiveChart, HeatMap, formatBytes, formatCount, bucketIndex } from './chart.js';
import { h, toast, table } from './ui.js';

// What the range picker offers: the window shown, the samples it is made of, and
// how often a card re-reads it.
const RANGES = {
  live: { label: 'Live (last minute, per second)', window: 60, resolution: 'second', every: 1000 },
  tenmin: { label: 'Last 10 minutes (per second)', window: 600, resolution: 'second', every: 2000 },
  hour: { label: 'Last hour (per minute)', window: 3600, resolution: 'minute', every: 10000 },
  day: { label: 'Last day (per minute)', window: 86400, resolution: 'minute', every: 30000 },
  month: { label: 'Last 30 days (per hour)', window: 30 * 86400, resolution: 'hour', every: 60000 },
};
const HISTOGRAMS = new Set(['latency', 'size', 'op-latency']);
const SERIES_SHOWN = 6; // lines on a breakdown's chart: the largest rows

// The worksheet outlives a visit to another page and a reload of this tab, not
// the session: its items' specs are kept in sessionStorage (what to show, no data,
// no credential) until log-out.
const SAVED = 'cairn.worksheet';
const worksheet = [];
let nextId = 1;

function validSpec(s) {
  return s && typeof s.stat === 'string' && typeof (s.by || '') === 'string' && RANGES[s.range] &&
    (!s.within || (drillOf(s.within, s.by) && typeof s.within.name === 'string'));
}

function saveWorksheet() {
  const specs = worksheet.map(({ stat, by, within, range }) => ({ stat, by, within, range }));
  try { sessionStorage.setItem(SAVED, JSON.stringify(specs)); } catch (e) { /* storage off: not kept */ }
}

export function clearWorksheet() {
  for (const item of worksheet) if (item.stop) item.stop();
  worksheet.length = 0;
  try { sessionStorage.removeItem(SAVED); } catch (e) { /* storage off */ }
}

function unitOf(stat) {
  return stat === 'net.bytes' ? 'bytes' : 'count';
}

function formatValue(stat, v) {
  if (stat === 'net.bytes') return formatBytes(v);
  if (stat.endsWith('.usecs') || stat === 'disk.busy') return formatCount(v) + ' us';
  return formatCount(v);
}

export async function showStat(stat, by, range) {
  const q = new URLSearchParams({ window: String(range.window), resolution: range.resolution, samples: 'true' });
  if (by) q.set('by', by);
  return api('GET', `/analytics/${enc(stat)}?${q}`);
}

// The drill-downs from a row of breakdown `from`: [{by, label, keep, show}], keep
// and show narrowing the further breakdown's names to the row's and shortening them.
const JOINT = { keep: (row, name) => name.startsWith(row + ' '), show: (row, name) => name.slice(row.length + 1) };
const DRILLS = {
  op: [{ by: 'op-latency', label: 'Latency ›', ...JOINT }],
  client: [{ by: 'client-op', label: 'Ops ›', ...JOINT }, { by: 'client-file', label: 'Files ›', ...JOINT }],
  initiator: [{ by: 'initiator-op', label: 'Commands ›', ...JOINT }],
  share: [{ by: 'file', label: 'Files ›', show: (row, name) => name,
    keep: (row, name) => name === row || name.startsWith(row.endsWith('/') ? row : row + '/') }],
};
const drillOf = (within, by) => (DRILLS[within.from] || []).find((d) => d.by === by);

// An item's rows from a result: [{name, value}] summed over the window, narrowed
// to the row it was drilled down from (item.within: {from, name}).
function rowsOf(item, values) {
  if (!item.within) return values || [];
  const drill = drillOf(item.within, item.by);
  const row = item.within.name;
  return (values || []).filter((v) => drill.keep(row, v.name)).map((v) => ({ name: drill.show(row, v.name), value: v.value }));
}

try {
  for (const spec of JSON.parse(sessionStorage.getItem(SAVED) || '[]'))
    if (validSpec(spec)) worksheet.push({ stat: spec.stat, by: spec.by || '', within: spec.within, range: spec.range, id: nextId++ });
} catch (e) { /* nothing kept, or not ours: start empty */ }

function itemTitle(item) {
  const range = RANGES[item.range];
  // A drilled item is named by what it adds to the row: "nfs3.ops client 10.0.0.1: by op".
  const by = item.within ? { 'op-latency': 'latency', 'client-op': 'op', 'client-file': 'file', 'initiator-op': 'command' }[item.by] || item.by : item.by;
  return `${item.stat}${item.within ? ` ${item.within.from} ${item.within.name}:` : ''}${by ? ' by ' + by : ''} · ${range.label}`;
}

// One worksheet card: its chart (lines, or a heat map for a histogram), the
// breakdown's rows with their window totals, drill-downs and removal.
function renderItem(item, ctx, statsByName, container) {
  const range = RANGES[item.range];
  const histogram = HISTOGRAMS.has(item.by);
  const status = h('span', { class: 'muted an-status' }, '');
  const plotEl = h('div', { class: 'plot' });
  const rowsEl = h('div', { class: 'an-rows' });
  const card = h('section', { class: 'card an-item', 'data-item': String(item.id), 'data-stat': item.stat,
    'data-by': item.by || '', 'data-within': item.within ? item.within.name : '', 'data-range': item.range },
  h('div', { class: 'card-title' }, h('h3', {}, itemTitle(item)), status,
    h('div', { class: 'actions' }, h('button', { type: 'button', class: 'small ghost an-remove', onclick: () => remove() }, 'Remove'))),
  plotEl, rowsEl);
  container.append(card);

  let chart = null;
  let labels = '';
  let timer = null;
  let stopped = false;

  const remove = () => {
    stop();
    card.remove();
    const i = worksheet.indexOf(item);
    if (i >= 0) worksheet.splice(i, 1);
    saveWorksheet();
  };

  function drawLines(result, rows) {
    // The statistic's total, or the largest rows of the breakdown, per second.
    const names = item.by ? rows.slice(0, SERIES_SHOWN).map((r) => r.name) : ['total'];
    const key = names.join('\n');
    if (!chart || key !== labels) {
      if (chart) chart.destroy();
      plotEl.replaceChildren();
      chart = new LiveChart(plotEl, { labels: names.length ? names : ['(none)'], unit: unitOf(item.stat), keep: range.window });
      labels = key;
    }
    const samples = result.samples || [];
    const series = (names.length ? names : ['(none)']).map((label) => ({ label, values: [] }));
    const sums = new Array(series.length).fill(0);
    for (const s of samples) {
      const secs = s.seconds || 1;
      const by = {};
      for (const v of rowsOf(item, s.values)) by[v.name] = (by[v.name] || 0) + v.value;
      series.forEach((sr, i) => {
        const v = item.by ? by[sr.label] || 0 : s.total || 0;
        sums[i] += v;
        sr.values.push(v / secs);
      });
    }
    chart.setData({ time: samples.map((s) => s.time), series });
    // What the chart's series add up to, for tests and tools: name -> count.
    plotEl.dataset.sums = JSON.stringify(Object.fromEntries(series.map((sr, i) => [sr.label, sums[i]])));
  }

  function drawHeat(result) {
    if (!chart) {
      plotEl.replaceChildren();
      chart = new HeatMap(plotEl, { dim: item.by === 'size' ? 'size' : 'latency' });
    }
    const columns = (result.samples || []).map((s) => ({
      time: s.time,
      cells: rowsOf(item, s.values).map((v) => ({ bucket: bucketIndex(item.by === 'size' ? 'size' : 'latency', v.name), count: v.value }))
        .filter((c) => c.bucket >= 0),
    }));
    chart.setData(columns);
  }

  function drillButtons(row) {
    const stat = statsByName[item.stat];
    if (item.within || !stat || row.name === 'other' || row.name === '-') return '';
    const drills = (DRILLS[item.by] || []).filter((d) => (stat.dims || []).includes(d.by));
    return h('span', { class: 'row-actions' }, drills.map((drill) => h('button', { type: 'button', class: 'small an-drill', 'data-drill': drill.by,
      onclick: () => addItem({ stat: item.stat, by: drill.by, within: { from: item.by, name: row.name }, range: item.range },
        ctx, statsByName, container) },
    drill.label)));
  }

  function drawRows(result, rows) {
    const secs = Math.max(1, (result.to || 0) - (result.from || 0));
    const recording = result.by_enabled;
    const notes = [];
    if (item.by && !recording) notes.push(h('p', { class: 'muted an-off' }, `The ${item.by} drill-down of ${item.stat} is not recording: ` +
      (ctx.admin ? 'switch it on below.' : 'an administrator can switch it on.')));
    // A drill-down's total is its rows' (the operation's), not the statistic's.
    const sum = item.within ? rows.reduce((n, r) => n + r.value, 0) : result.total || 0;
    const total = h('p', { class: 'muted an-total', 'data-total': String(sum) },
      `${item.within ? item.within.name : 'Total'} ${formatValue(item.stat, sum)} in the window (${formatValue(item.stat, sum / secs)}/s on average)`);
    if (!item.by) { rowsEl.replaceChildren(...notes, total); return; }
    const tbl = table([histogram ? 'Bucket' : item.by, 'In the window', 'Per second', ''],
      rows.map((r) => [r.name, formatValue(item.stat, r.value), formatValue(item.stat, r.value / secs), drillButtons(r)]),
      'Nothing recorded in this window.');
    // Each row's name and count as attributes (tests and tools read them).
    tbl.querySelectorAll('tbody tr').forEach((tr, i) => { tr.dataset.name = rows[i].name; tr.dataset.value = String(rows[i].value); });
    rowsEl.replaceChildren(...notes, total, tbl);
  }

  async function refresh() {
    try {
      const result = await showStat(item.stat, item.by, range);
      if (stopped) return;
      const rows = rowsOf(item, result.values);
      if (histogram) drawHeat(result); else drawLines(result, rows);
      drawRows(result, rows);
      status.textContent = `${result.resolution} samples · updated ${new Date().toLocaleTimeString([], { hour12: false })}`;
      card.dataset.updated = String(Date.now());
    } catch (e) {
      if (!stopped) status.textContent = e.message;
    }
    if (!stopped) timer = setTimeout(refresh, range.every);
  }

  function stop() {
    stopped = true;
    clearTimeout(timer);
    if (chart) chart.destroy();
    chart = null;
  }

  item.stop = stop;
  refresh();
}

function addItem(spec, ctx, statsByName, container) {
  const item = { id: nextId++, ...spec };
  worksheet.push(item);
  saveWorksheet();
  renderItem(item, ctx, statsByName, container);
  return item;
}

// The statistics and their drill-downs, recording or not; admins switch them.
function switchesTable(list, ctx, onChange) {
  const rows = [];
  const keys = []; // each row's "STAT" or "STAT by DIM", as an attribute for tests and tools
  for (const s of list.stats || []) {
    const on = (s.dims_enabled || []);
    const line = (what, by, enabled) => [what, enabled ? h('span', { class: 'badge ok' }, 'ON') : h('span', { class: 'badge neutral' }, 'OFF'),
      ctx.admin ? h('button', { type: 'button', class: 'small an-switch', 'data-stat': s.name, 'data-by': by || '',
        onclick: async () => {
          try {
            await api('POST', `/analytics/${enc(s.name)}/${enabled ? 'disable' : 'enable'}`, by ? { by } : {});
            toast(`${s.name}${by ? ' by ' + by : ''} ${enabled ? 'disabled' : 'enabled'}`, 'notice');
            onChange();
          } catch (e) { toast(e.message); }
        } }, enabled ? 'Disable' : 'Enable') : ''];
    rows.push(line(h('span', {}, h('strong', {}, s.name), ' ', h('span', { class: 'muted' }, s.description)), '', !!s.enabled));
    keys.push(s.name);
    for (const d of s.dims || []) {
      rows.push(line(h('span', { class: 'an-dim' }, 'by ' + d), d, !!s.enabled && on.includes(d)));
      keys.push(s.name + ' by ' + d);
    }
  }
  const tbl = table(['Statistic / drill-down', 'Recording', ''], rows, 'No statistics.');
  tbl.querySelectorAll('tbody tr').forEach((tr, i) => { tr.dataset.switch = keys[i]; });
  return tbl;
}

export async function analytics(main, ctx) {
  const list = await api('GET', '/analytics');
  const statsByName = Object.fromEntries((list.stats || []).map((s) => [s.name, s]));
  const statSel = h('select', { id: 'an-stat' }, (list.stats || []).map((s) => h('option', { value: s.name }, s.name)));
  const bySel = h('select', { id: 'an-by' });
  const rangeSel = h('select', { id: 'an-range' }, Object.entries(RANGES).map(([k, r]) => h('option', { value: k }, r.label)));
  const fillBy = () => {
    const s = statsByName[statSel.value];
    bySel.replaceChildren(h('option', { value: '' }, '(total)'),
      ...((s && s.dims) || []).map((d) => h('option', { value: d }, 'by ' + d)));
  };
  statSel.addEventListener('change', fillBy);
  fillBy();
  const container = h('div', { class: 'an-worksheet', id: 'an-worksheet' });
  const add = h('button', { type: 'button', class: 'primary', id: 'an-add',
    onclick: () => addItem({ stat: statSel.value, by: bySel.value, range: rangeSel.value }, ctx, statsByName, container) }, 'Add to worksheet');
  const switchesEl = h('div', { id: 'an-switches' });
  const drawSwitches = async () => {
    try {
      const fresh = await api('GET', '/analytics');
      for (const s of fresh.stats || []) statsByName[s.name] = s;
      switchesEl.replaceChildren(switchesTable(fresh, ctx, drawSwitches));
    } catch (e) { toast(e.message); }
  };
  switchesEl.replaceChildren(switchesTable(list, ctx, drawSwitches));
  main.replaceChildren(
    h('div', { class: 'page-header' }, h('h1', {}, 'Analytics')),
    h('section', { class: 'card an-picker' },
      h('div', { class: 'an-pick-row' },
        h('label', {}, 'Statistic', statSel), h('label', {}, 'Breakdown', bySel), h('label', {}, 'Range', rangeSel), add),
      h('p', { class: 'muted' }, 'Drill down from a row: an operation to its latencies (Latency ›), drawn as a heat map - time across, latency up, colour the count; a client to its operations and files; an initiator to its commands; a share to its files.')),
    container,
    h('h2', { class: 'section' }, 'Statistics recorded'),
    h('p', { class: 'muted' }, ctx.admin ? 'Costly drill-downs (client, file and the joint ones: op-latency, client-op, client-file, initiator-op) are off until switched on.' : 'Read-only: an administrator switches statistics on and off.'),
    switchesEl);
  for (const item of worksheet) renderItem(item, ctx, statsByName, container);
  return () => { for (const item of worksheet) if (item.stop) item.stop(); };
}

// --------------------------------------------- top clients, shares, LUNs (dashboard)

// Over the last minute, from analytics' drill-downs: NFS clients (nfs3 and nfs4
// operations, payload bytes), iSCSI initiators (commands, bytes), NFS shares and
// iSCSI target LUNs (operations). Each a list of {name, ops, bytes} largest first
// ("other" last) with whether its drill-down records.
export async function topActivity() {
  const get = (stat, by) => api('GET', `/analytics/${stat}?by=${by}&window=60&resolution=second`);
  const [v3, v4, nfsBytes, iscsi, iscsiBytes, s3, s4, luns] = await Promise.all([
    get('nfs3.ops', 'client'), get('nfs4.ops', 'client'), get('net.bytes', 'client'),
    get('iscsi.ops', 'initiator'), get('net.bytes', 'initiator'),
    get('nfs3.ops', 'share'), get('nfs4.ops', 'share'), get('iscsi.ops', 'target')]);
  const merge = (opsResults, bytesResult) => {
    const m = new Map();
    const at = (name) => { if (!m.has(name)) m.set(name, { name, ops: 0, bytes: 0 }); return m.get(name); };
    for (const r of opsResults) for (const v of r.values || []) at(v.name).ops += v.value;
    for (const v of (bytesResult && bytesResult.values) || []) at(v.name).bytes += v.value;
    return [...m.values()].sort((a, b) => (a.name === 'other') - (b.name === 'other') || b.ops - a.ops || b.bytes - a.bytes);
  };
  const recording = (...rs) => rs.some((r) => r.by_enabled);
  return {
    nfs: { rows: merge([v3, v4], nfsBytes), recording: recording(v3, v4), what: 'nfs3.ops/nfs4.ops by client' },
    iscsi: { rows: merge([iscsi], iscsiBytes), recording: recording(iscsi), what: 'iscsi.ops by initiator' },
    // "-": calls on no share's file (NULL, EXCHANGE_ID, ...), not a share.
    shares: { rows: merge([s3, s4]).filter((r) => r.name !== '-'), recording: recording(s3, s4), what: 'nfs3.ops/nfs4.ops by share' },
    luns: { rows: merge([luns]), recording: recording(luns), what: 'iscsi.ops by target' },
  };
}

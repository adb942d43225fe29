// The pages: each is render(main, ctx) and may return a function that stops what
// it started (timers, charts) when the user leaves it. ctx: {admin, reload}.
// Change buttons exist only for admins (ctx.admin, from the session's role);
// the API refuses a read-only user's change anyway.

import { api, enc, datasetProps } from './api.js';
import { LiveChart, CounterSampler, formatBytes, formatCount } from './chart.js';
import { h, toast, badge, capacityBar, table, formDialog, confirmDialog } from './ui.js';
import { analytics, topActivity } from './analytics.js';

// Runs a change, shows its error's one line if it fails, reloads the page if not.
async function change(ctx, what, fn) {
  try {
    await fn();
    toast(what, 'notice');
    ctx.reload();
  } catch (e) {
    toast(e.message);
  }
}

function button(label, onclick, cls = '', id) {
  return h('button', { type: 'button', class: 'small ' + cls, onclick, id }, label);
}

function pageHeader(title, ...actions) {
  return h('div', { class: 'page-header' }, h('h1', {}, title), h('div', { class: 'actions' }, actions));
}

// Vdevs of a status tree that are not ONLINE, leaves first (the disks to replace).
function troubledDevices(vdev, out = []) {
  for (const c of vdev.children || []) troubledDevices(c, out);
  if (vdev.type !== 'root' && vdev.state !== 'ONLINE') out.push(vdev);
  return out;
}

// "10G", "512M", "1.5T" or bytes -> bytes (volume sizes).
function parseSize(text) {
  const m = /^(\d+(?:\.\d+)?)\s*([KMGTP]?)(?:i?B)?$/i.exec(text.trim());
  if (!m) throw new Error(`bad size '${text}': a number with K, M, G, T or P`);
  const mult = { '': 1, K: 2 ** 10, M: 2 ** 20, G: 2 ** 30, T: 2 ** 40, P: 2 ** 50 }[m[2].toUpperCase()];
  return Math.round(parseFloat(m[1]) * mult);
}

// ------------------------------------------------------------------ dashboard

async function dashboard(main) {
  const [pools, datasets, shares, targets] = await Promise.all([
    api('GET', '/pools'), api('GET', '/datasets'), api('GET', '/shares'), api('GET', '/iscsi/targets')]);
  const status = {};
  await Promise.all((pools.rows || []).map(async (p) => {
    const s = await api('GET', '/pools/' + enc(p.name));
    status[p.name] = (s.pools || [])[0];
  }));
  const tiles = h('div', { class: 'tiles' },
    tile('Pools', (pools.rows || []).length), tile('Datasets', (datasets.rows || []).length),
    tile('NFS shares', (shares.rows || []).length), tile('iSCSI targets', (targets.targets || []).length));
  const poolCards = (pools.rows || []).map((p) => {
    const st = status[p.name];
    const bad = st ? troubledDevices(st.root) : [];
    return h('section', { class: 'card pool-card', 'data-pool': p.name },
      h('div', { class: 'card-title' }, h('h2', {}, p.name), badge(p.health)),
      capacityBar(p.alloc, p.size),
      h('div', { class: 'muted' }, `${formatBytes(p.alloc)} used of ${formatBytes(p.size)} · ${formatBytes(p.free)} free · compression ${p.compressratio}`),
      bad.length ? h('ul', { class: 'alerts' }, bad.map((v) =>
        h('li', { class: 'alert', 'data-device': v.name },
          badge(v.state), ' ', v.type === 'mirror' || v.type === 'raidz' ? `${v.name} (${v.type})` : `disk ${v.name}`,
          v.read_errors + v.write_errors + v.checksum_errors
            ? ` - errors: ${v.read_errors} read, ${v.write_errors} write, ${v.checksum_errors} checksum` : '')))
        : h('p', { class: 'ok-line' }, 'All devices online'),
      st && st.scrub && st.scrub.state !== 'NONE' ? h('div', { class: 'muted' }, 'Scrub: ' + st.scrub.state.toLowerCase()) : null);
  });
  const charts = h('div', { class: 'charts' });
  const clients = h('div', { class: 'top-clients', id: 'top-clients' });
  main.replaceChildren(pageHeader('Dashboard'), tiles,
    h('div', { class: 'pool-cards' }, poolCards.length ? poolCards : h('p', { class: 'muted' }, 'No pools.')),
    h('h2', { class: 'section' }, 'Live activity'), charts,
    h('h2', { class: 'section' }, 'Top clients, shares and LUNs (last minute)'), clients);
  const stopClients = refreshTopClients(clients);

  const defs = [
    { id: 'nfs-ops', title: 'NFS operations', labels: ['ops'], unit: 'count', pick: (r) => [r.nfs.operations], readout: (r) => formatCount(r.nfs.operations) + ' ops/s' },
    { id: 'nfs-bytes', title: 'NFS throughput', labels: ['read', 'write'], unit: 'bytes', pick: (r) => [r.nfs.read_bytes, r.nfs.written_bytes], readout: (r) => formatBytes(r.nfs.read_bytes + r.nfs.written_bytes) + '/s' },
    { id: 'iscsi-ops', title: 'iSCSI commands', labels: ['commands'], unit: 'count', pick: (r) => [r.iscsi.commands], readout: (r) => formatCount(r.iscsi.commands) + ' cmds/s' },
    { id: 'iscsi-bytes', title: 'iSCSI throughput', labels: ['read', 'write'], unit: 'bytes', pick: (r) => [r.iscsi.read_bytes, r.iscsi.written_bytes], readout: (r) => formatBytes(r.iscsi.read_bytes + r.iscsi.written_bytes) + '/s' },
  ];
  const live = defs.map((d) => {
    const readout = h('span', { class: 'readout', id: d.id + '-rate' }, '-');
    const total = h('span', { class: 'muted total', id: d.id + '-total' }, '');
    const plotEl = h('div', { class: 'plot' });
    charts.append(h('section', { class: 'card chart-card', id: d.id + '-chart' },
      h('div', { class: 'card-title' }, h('h3', {}, d.title), readout), plotEl, total));
    return { d, readout, total, chart: new LiveChart(plotEl, { labels: d.labels, unit: d.unit }) };
  });
  const sampler = new CounterSampler(({ time, rates, totals }) => {
    for (const l of live) {
      l.chart.push(time, l.d.pick(rates));
      l.readout.textContent = l.d.readout(rates);
    }
    live[0].total.textContent = `${totals.nfs.operations} operations since start`;
    live[2].total.textContent = `${totals.iscsi.commands} commands since start`;
  }, (e) => toast(e.message));
  sampler.start();
  return () => { sampler.stop(); stopClients(); live.forEach((l) => l.chart.destroy()); };
}

// NFS clients and iSCSI initiators by operations and payload bytes, NFS shares and
// LUNs by operations, over the last minute (analytics' drill-downs), re-read every 5 s.
function refreshTopClients(el) {
  let timer = null;
  let stopped = false;
  const card = (id, title, column, top, bytes) => {
    const rows = top.rows.slice(0, 10);
    const c = h('section', { class: 'card', id },
      h('div', { class: 'card-title' }, h('h3', {}, title)),
      top.recording || rows.length ? null : h('p', { class: 'muted' }, `Not recorded: the ${top.what} drill-down is off (Analytics page).`),
      table(bytes ? [column, 'Operations', 'Bytes'] : [column, 'Operations'],
        rows.map((r) => [h('span', { class: 'client-name' }, r.name), formatCount(r.ops)].concat(bytes ? [formatBytes(r.bytes)] : [])),
        'No traffic in the last minute.'));
    // Rows' figures as attributes for tests and tools.
    c.querySelectorAll('tbody tr').forEach((tr, i) => Object.assign(tr.dataset, { name: rows[i].name, ops: String(rows[i].ops), bytes: String(rows[i].bytes) }));
    return c;
  };
  const tick = async () => {
    try {
      const t = await topActivity();
      if (stopped) return;
      el.replaceChildren(card('top-nfs-clients', 'NFS clients', 'Client', t.nfs, true),
        card('top-iscsi-initiators', 'iSCSI initiators', 'Initiator', t.iscsi, true),
        card('top-shares', 'NFS shares', 'Share', t.shares, false),
        card('top-luns', 'iSCSI LUNs', 'Target and LUN', t.luns, false));
    } catch (e) {
      if (!stopped) el.replaceChildren(h('p', { class: 'error-line' }, e.message));
    }
    if (!stopped) timer = setTimeout(tick, 5000);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

function tile(label, value) {
  return h('div', { class: 'tile' }, h('div', { class: 'tile-value' }, String(value)), h('div', { class: 'tile-label' }, label));
}

// ---------------------------------------------------------------------- pools

function vdevRows(v, depth, rows) {
  rows.push([h('span', { class: 'vdev', style: { paddingLeft: depth * 1.4 + 'em' } }, v.name),
    v.type, badge(v.state), String(v.read_errors), String(v.write_errors), String(v.checksum_errors),
    v.resilvering ? 'resilvering' : '']);
  for (const c of v.children || []) vdevRows(c, depth + 1, rows);
  return rows;
}

async function pools(main, ctx) {
  const list = await api('GET', '/pools');
  const cards = await Promise.all((list.rows || []).map(async (p) => {
    const st = ((await api('GET', '/pools/' + enc(p.name))).pools || [])[0];
    const scrub = st.scrub || {};
    const scanning = scrub.state === 'SCANNING';
    const pct = scrub.to_examine ? Math.min(100, (100 * scrub.examined) / scrub.to_examine).toFixed(1) + '%' : '';
    const actions = ctx.admin ? [
      scanning
        ? button('Stop scrub', () => change(ctx, 'Scrub stopped', () => api('POST', `/pools/${enc(p.name)}/scrub`, { stop: true })))
        : button('Start scrub', () => change(ctx, 'Scrub started', () => api('POST', `/pools/${enc(p.name)}/scrub`, {})), 'primary', 'scrub-' + p.name),
      button('Clear errors', () => change(ctx, 'Errors cleared', () => api('POST', `/pools/${enc(p.name)}/clear`))),
    ] : [];
    return h('section', { class: 'card' },
      h('div', { class: 'card-title' }, h('h2', {}, p.name), badge(st.state), h('div', { class: 'actions' }, actions)),
      capacityBar(p.alloc, p.size),
      h('p', { class: 'muted' }, `${formatBytes(p.alloc)} of ${formatBytes(p.size)} used · scrub: ${String(scrub.state || 'NONE').toLowerCase()} ${pct}` +
        (scrub.repaired ? ` · repaired ${formatBytes(scrub.repaired)}` : '') + (scrub.errors ? ` · ${scrub.errors} errors` : '')),
      table(['Device', 'Type', 'State', 'Read', 'Write', 'Checksum', ''], vdevRows(st.root, 0, []), ''),
      st.error_count ? h('p', { class: 'error-line' }, `${st.error_count} permanent errors`) : null);
  }));
  main.replaceChildren(pageHeader('Pools'), ...(cards.length ? cards : [h('p', { class: 'muted' }, 'No pools.')]));
}

// ------------------------------------------------------------------- datasets

async function datasets(main, ctx) {
  const list = (await api('GET', '/datasets')).rows || [];
  const props = await Promise.all(list.map((d) => datasetProps(d.name).catch(() => ({}))));
  const val = (p, k) => (p[k] ? p[k].value : '-');
  const rows = list.map((d, i) => {
    const p = props[i];
    const isRoot = !d.name.includes('/');
    return [h('span', { class: 'ds-name' }, d.name), d.type, val(p, 'used'), val(p, 'available'), val(p, 'referenced'),
      d.type === 'volume' ? val(p, 'volsize') : val(p, 'sharenfs'), val(p, 'compression'),
      ctx.admin ? h('span', { class: 'row-actions' },
        button('Set property', async () => {
          const v = await formDialog(`Set a property of ${d.name}`, [
            { name: 'prop', label: 'Property', placeholder: 'e.g. compression, quota, sharenfs' },
            { name: 'value', label: 'Value', placeholder: 'e.g. lz4, 10G, on' }], 'Set');
          if (v) change(ctx, `${v.prop} set on ${d.name}`, () => api('PATCH', '/datasets/' + enc(d.name), { [v.prop]: v.value }));
        }),
        isRoot ? null : button('Destroy', async () => {
          if (await confirmDialog(`Destroy ${d.name}?`, `Every file or block of ${d.name} is lost; this cannot be undone.`))
            change(ctx, `${d.name} destroyed`, () => api('DELETE', '/datasets/' + enc(d.name)));
        }, 'danger')) : ''];
  });
  const create = ctx.admin ? button('Create dataset', async () => {
    const v = await formDialog('Create a dataset', [
      { name: 'name', label: 'Name', placeholder: 'POOL/NAME' },
      { name: 'type', label: 'Type', type: 'select', options: ['filesystem', 'volume'] },
      { name: 'volsize', label: 'Volume size (volumes)', placeholder: 'e.g. 10G', optional: true },
      { name: 'sparse', label: 'Thin (sparse) volume', type: 'checkbox' }], 'Create');
    if (!v) return;
    change(ctx, `${v.name} created`, async () => {
      const body = { name: v.name };
      if (v.type === 'volume') Object.assign(body, { volume: true, volsize: parseSize(v.volsize), sparse: v.sparse });
      await api('POST', '/datasets', body);
    });
  }, 'primary', 'create-dataset') : null;
  main.replaceChildren(pageHeader('Datasets', create),
    table(['Name', 'Type', 'Used', 'Available', 'Referenced', 'Share / size', 'Compression', ''], rows, 'No datasets.'));
}

// ------------------------------------------------------------------ snapshots

async function snapshots(main, ctx) {
  const list = (await api('GET', '/snapshots')).rows || [];
  const props = await Promise.all(list.map((d) => datasetProps(d.name).catch(() => ({}))));
  const rows = list.map((s, i) => {
    const p = props[i];
    const created = p.creation ? new Date(p.creation.numeric * 1000).toLocaleString() : '-';
    return [s.name, p.used ? p.used.value : '-', p.referenced ? p.referenced.value : '-', created,
      ctx.admin ? h('span', { class: 'row-actions' },
        button('Rollback', async () => {
          const v = await formDialog(`Roll back to ${s.name}?`, [
            { name: 'destroy_newer', label: 'Also destroy newer snapshots', type: 'checkbox' }], 'Roll back', true);
          if (v) change(ctx, `rolled back to ${s.name}`, () => api('POST', `/snapshots/${enc(s.name)}/rollback`, v));
        }),
        button('Clone', async () => {
          const v = await formDialog(`Clone ${s.name}`, [{ name: 'name', label: 'New dataset', placeholder: 'POOL/NAME' }], 'Clone');
          if (v) change(ctx, `${v.name} cloned`, () => api('POST', `/snapshots/${enc(s.name)}/clone`, v));
        }),
        button('Destroy', async () => {
          if (await confirmDialog(`Destroy ${s.name}?`, 'The snapshot is lost; this cannot be undone.'))
            change(ctx, `${s.name} destroyed`, () => api('DELETE', '/snapshots/' + enc(s.name)));
        }, 'danger')) : ''];
  });
  const create = ctx.admin ? button('Take snapshot', async () => {
    const names = ((await api('GET', '/datasets')).rows || []).map((d) => d.name);
    const v = await formDialog('Take a snapshot', [
      { name: 'dataset', label: 'Dataset', type: 'select', options: names },
      { name: 'snap', label: 'Snapshot name', placeholder: 'e.g. daily-1' },
      { name: 'recursive', label: 'Its children too', type: 'checkbox' }], 'Take');
    if (v) change(ctx, `${v.dataset}@${v.snap} taken`, () => api('POST', '/snapshots', { name: `${v.dataset}@${v.snap}`, recursive: v.recursive }));
  }, 'primary', 'create-snapshot') : null;
  main.replaceChildren(pageHeader('Snapshots', create),
    table(['Snapshot', 'Used', 'Referenced', 'Created', ''], rows, 'No snapshots.'));
}

// --------------------------------------------------------------------- shares

async function shares(main, ctx) {
  const list = (await api('GET', '/shares')).rows || [];
  const rows = list.map((s) => [s.dataset, s.path, s.options, s.versions, String(s.clients),
    ctx.admin ? button('Unshare', async () => {
      if (await confirmDialog(`Stop sharing ${s.dataset}?`, 'NFS clients lose access (sharenfs=off).', 'Unshare'))
        change(ctx, `${s.dataset} unshared`, () => api('PATCH', '/datasets/' + enc(s.dataset), { sharenfs: 'off' }));
    }, 'danger') : '']);
  const add = ctx.admin ? button('Share a filesystem', async () => {
    const fs = ((await api('GET', '/datasets')).rows || []).filter((d) => d.type === 'filesystem').map((d) => d.name);
    const v = await formDialog('Share a filesystem over NFS', [
      { name: 'dataset', label: 'Filesystem', type: 'select', options: fs },
      { name: 'options', label: 'sharenfs', value: 'on', placeholder: 'on, or export options' }], 'Share');
    if (v) change(ctx, `${v.dataset} shared`, () => api('PATCH', '/datasets/' + enc(v.dataset), { sharenfs: v.options }));
  }, 'primary', 'create-share') : null;
  main.replaceChildren(pageHeader('NFS shares', add),
    h('p', { class: 'muted' }, 'A filesystem is shared by its sharenfs property.'),
    table(['Dataset', 'Path', 'Options', 'NFS versions', 'Clients', ''], rows, 'Nothing is shared.'));
}

// ---------------------------------------------------------------------- iSCSI

async function iscsi(main, ctx) {
  const targets = (await api('GET', '/iscsi/targets')).targets || [];
  const cards = targets.map((t) => h('section', { class: 'card' },
    h('div', { class: 'card-title' }, h('h2', {}, t.name), h('div', { class: 'actions' }, ctx.admin ? [
      button('Add LUN', async () => {
        const vols = ((await api('GET', '/datasets')).rows || []).filter((d) => d.type === 'volume').map((d) => d.name);
        const v = await formDialog(`Add a LUN to ${t.name}`, [
          { name: 'volume', label: 'Volume', type: 'select', options: vols },
          { name: 'lun', label: 'LUN number (empty: the next free)', optional: true }], 'Add');
        if (!v) return;
        const body = { volume: v.volume };
        if (v.lun !== '') Object.assign(body, { lun: Number(v.lun), lun_given: true });
        change(ctx, `LUN added to ${t.name}`, () => api('POST', `/iscsi/targets/${enc(t.name)}/luns`, body));
      }),
      button('Allow initiator', async () => {
        const v = await formDialog(`Allow an initiator on ${t.name}`, [{ name: 'initiator', label: 'Initiator IQN' }], 'Allow');
        if (v) change(ctx, `${v.initiator} allowed`, () => api('POST', `/iscsi/targets/${enc(t.name)}/acl`, v));
      }),
      button('Destroy', async () => {
        if (await confirmDialog(`Destroy ${t.name}?`, 'Its LUNs are removed from it (the volumes stay).'))
          change(ctx, `${t.name} destroyed`, () => api('DELETE', `/iscsi/targets/${enc(t.name)}?force=true`));
      }, 'danger')] : [])),
    table(['LUN', 'Volume', 'Online'], (t.luns || []).map((l) => [String(l.lun), l.volume, l.online ? 'yes' : 'no']), 'No LUNs.'),
    h('p', { class: 'muted' }, `Allowed initiators: ${(t.acl || []).length ? t.acl.join(', ') : 'any'} · CHAP: ${t.chap} · sessions: ${(t.sessions || []).length}`)));
  const create = ctx.admin ? button('Create target', async () => {
    const v = await formDialog('Create an iSCSI target', [{ name: 'name', label: 'IQN', placeholder: 'iqn.2026-11.org.cairn:name' }], 'Create');
    if (v) change(ctx, `${v.name} created`, () => api('POST', '/iscsi/targets', v));
  }, 'primary', 'create-target') : null;
  main.replaceChildren(pageHeader('iSCSI targets', create), ...(cards.length ? cards : [h('p', { class: 'muted' }, 'No targets.')]));
}

export const PAGES = { dashboard, pools, datasets, snapshots, shares, iscsi, analytics };

// Charts: a uPlot line chart fed by JSON series, and the sampler that turns the
// server's running totals (GET /api/v1/counters) into per-second rates.
//
// LiveChart takes data in one shape - {time: [unix seconds], series: [{label,
// values: [...]}]} - whether it comes from a sampler appending points (the
// dashboard) or from a server-side series (an analytics worksheet can call
// setData with what its API returns).

import { api } from './api.js';

const COLORS = ['#2f7ed8', '#e4761b', '#3aa757', '#9b59b6'];

export function formatBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i && n < 10 ? n.toFixed(1) : Math.round(n)) + ' ' + units[i];
}

export function formatCount(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (n >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  return n < 10 && !Number.isInteger(n) ? n.toFixed(1) : String(Math.round(n));
}

export class LiveChart {
  // el: the element to draw in; opts: {labels: [...], unit: 'bytes'|'count',
  // keep: the seconds shown, and the points kept when appending (default 60)}.
  constructor(el, opts) {
    this.el = el;
    this.keep = opts.keep || 60;
    this.unit = opts.unit || 'count';
    this.data = { time: [], series: opts.labels.map((label) => ({ label, values: [] })) };
    const fmt = this.unit === 'bytes' ? (v) => formatBytes(v) + '/s' : (v) => formatCount(v) + '/s';
    const width = Math.max(el.clientWidth, 280);
    this.plot = new uPlot({
      width, height: 180,
      series: [{}].concat(opts.labels.map((label, i) => ({
        label, stroke: COLORS[i % COLORS.length], width: 2,
        fill: COLORS[i % COLORS.length] + '22',
        value: (u, v) => (v == null ? '-' : fmt(v)),
      }))),
      axes: [
        { stroke: '#6b7785', grid: { stroke: '#eef1f4' }, space: 70,
          values: (u, vals) => vals.map((v) => new Date(v * 1000).toLocaleTimeString([], { hour12: false })) },
        { stroke: '#6b7785', grid: { stroke: '#eef1f4' }, size: 70,
          values: (u, vals) => vals.map((v) => (this.unit === 'bytes' ? formatBytes(v) : formatCount(v))) },
      ],
      scales: {
        // A fixed window ending at the newest point, so new samples scroll in from the right.
        x: { time: true, range: (u, min, max) => [max - this.keep, max] },
        y: { range: (u, min, max) => [0, Math.max(max, this.unit === 'bytes' ? 1024 : 10)] },
      },
      legend: { live: true },
    }, this._columns(), el);
    this._onResize = () => this.plot.setSize({ width: Math.max(el.clientWidth, 280), height: 180 });
    window.addEventListener('resize', this._onResize);
  }

  _columns() {
    // What is drawn, also as attributes for tests and tools: points, and the newest values.
    this.el.dataset.points = String(this.data.time.length);
    this.el.dataset.last = this.data.series.map((s) => s.values[s.values.length - 1] ?? '').join(',');
    return [this.data.time].concat(this.data.series.map((s) => s.values));
  }

  // Replaces the data with a whole series (the analytics shape).
  setData(data) {
    this.data = data;
    this.plot.setData(this._columns());
  }

  // Appends one point per series at time t, keeping the last `keep`.
  push(t, values) {
    this.data.time.push(t);
    this.data.series.forEach((s, i) => s.values.push(values[i]));
    if (this.data.time.length > this.keep) {
      this.data.time.shift();
      this.data.series.forEach((s) => s.values.shift());
    }
    this.plot.setData(this._columns());
  }

  destroy() {
    window.removeEventListener('resize', this._onResize);
    this.plot.destroy();
  }
}

// Reads /counters every `interval` ms and calls onRates({time, rates, totals}) with
// the per-second rate of every total since the previous reading (by the server's
// clock, so a late timer does not distort it).
export class CounterSampler {
  constructor(onRates, onError, interval = 1000) {
    this.onRates = onRates;
    this.onError = onError;
    this.interval = interval;
    this.prev = null;
    this.timer = null;
  }

  start() {
    const tick = async () => {
      try {
        const now = await api('GET', '/counters');
        if (this.prev && now.time > this.prev.time) {
          const dt = now.time - this.prev.time;
          const rates = {};
          for (const proto of ['nfs', 'iscsi']) {
            rates[proto] = {};
            for (const k of Object.keys(now[proto]))
              rates[proto][k] = Math.max(0, now[proto][k] - this.prev[proto][k]) / dt;
          }
          this.onRates({ time: now.time, rates, totals: now });
        }
        this.prev = now;
      } catch (e) {
        this.onError(e);
      }
      if (this.timer !== null) this.timer = setTimeout(tick, this.interval);
    };
    this.timer = setTimeout(tick, 0);
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
  }
}

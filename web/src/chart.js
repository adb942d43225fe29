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
  if (n > 0 && n < 0.1) return n.toFixed(2); // a rare event's rate: not "0.0"
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

// The log2 buckets of the analytics engine, by name (an_bucket_name in
// src/util/analytics.c: a bucket is named by its lower bound, in whole units).
function bucketNames(dim) {
  const names = [];
  for (let b = 0; b < 32; b++) {
    if (b === 0) { names.push(dim === 'latency' ? '<1us' : '0'); continue; }
    const v = 2 ** (b - 1);
    if (dim === 'latency') {
      names.push(v >= 1e6 ? Math.floor(v / 1e6) + 's' : v >= 1000 ? Math.floor(v / 1000) + 'ms' : v + 'us');
    } else {
      names.push(v >= 2 ** 30 ? v / 2 ** 30 + 'G' : v >= 2 ** 20 ? v / 2 ** 20 + 'M' : v >= 1024 ? v / 1024 + 'K' : String(v));
    }
  }
  return names;
}
const BUCKETS = { latency: bucketNames('latency'), size: bucketNames('size') };

// The bucket a histogram name is of ("64us", "WRITE 64us": the last word); -1 for none.
export function bucketIndex(dim, name) {
  const word = String(name).split(' ').pop();
  return BUCKETS[dim === 'size' ? 'size' : 'latency'].indexOf(word);
}

// Heat map colours: pale for one event, dark red for the most in any cell.
const HEAT = [[255, 240, 170], [253, 174, 97], [215, 48, 39], [110, 0, 20]];
function heatColour(t) {
  const x = Math.min(0.999, Math.max(0, t)) * (HEAT.length - 1);
  const i = Math.floor(x), f = x - i;
  const c = HEAT[i].map((v, k) => Math.round(v + (HEAT[i + 1][k] - v) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

// A heat map on a canvas: time across (one column per sample), the histogram's
// buckets up (latency or size, log2), colour the count (log scale, so a few slow
// calls show beside many fast ones). setData([{time, cells: [{bucket, count}]}]).
export class HeatMap {
  constructor(el, opts) {
    this.el = el;
    this.dim = opts.dim || 'latency';
    this.columns = [];
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'heatmap';
    el.append(this.canvas);
    this._onResize = () => this.draw();
    window.addEventListener('resize', this._onResize);
  }

  setData(columns) {
    this.columns = columns;
    this.draw();
  }

  draw() {
    const cv = this.canvas;
    const width = Math.max(this.el.clientWidth, 280), height = 220;
    const ratio = window.devicePixelRatio || 1;
    cv.width = width * ratio;
    cv.height = height * ratio;
    cv.style.width = width + 'px';
    cv.style.height = height + 'px';
    const g = cv.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);
    const left = 56, bottom = 20, top = 6, right = 6;
    const plotW = width - left - right, plotH = height - top - bottom;
    g.fillStyle = '#f4f6f9';
    g.fillRect(left, top, plotW, plotH);
    let lo = Infinity, hi = -Infinity, max = 0, total = 0, cells = 0;
    const grid = this.columns.map((col) => {
      const byBucket = new Map();
      for (const c of col.cells) {
        if (!c.count) continue;
        byBucket.set(c.bucket, (byBucket.get(c.bucket) || 0) + c.count);
      }
      for (const [b, n] of byBucket) {
        lo = Math.min(lo, b); hi = Math.max(hi, b); max = Math.max(max, n); total += n; cells++;
      }
      return byBucket;
    });
    this.el.dataset.count = String(total);
    this.el.dataset.cells = String(cells);
    this.el.dataset.columns = String(this.columns.length);
    g.font = '11px system-ui, sans-serif';
    g.fillStyle = '#6b7785';
    if (!cells) {
      g.fillText('no events in this window', left + 10, top + plotH / 2);
      return;
    }
    lo = Math.max(0, lo - 1); hi = Math.min(31, hi + 1); // a bucket of margin each side
    const rows = hi - lo + 1, n = this.columns.length;
    const cw = plotW / n, ch = plotH / rows;
    grid.forEach((byBucket, i) => {
      for (const [b, count] of byBucket) {
        g.fillStyle = heatColour(Math.log1p(count) / Math.log1p(max));
        g.fillRect(left + i * cw, top + (hi - b) * ch, Math.max(cw, 1), Math.max(ch, 1));
      }
    });
    // Bucket names up the left (as many as fit), first and last time along the bottom.
    g.fillStyle = '#6b7785';
    g.textBaseline = 'middle';
    const every = Math.max(1, Math.ceil(12 / ch));
    for (let b = lo; b <= hi; b += every) g.fillText(BUCKETS[this.dim][b], 4, top + (hi - b + 0.5) * ch);
    g.textBaseline = 'alphabetic';
    const t = (s) => new Date(s * 1000).toLocaleTimeString([], { hour12: false });
    g.fillText(t(this.columns[0].time), left, height - 5);
    const last = t(this.columns[n - 1].time);
    g.fillText(last, width - right - g.measureText(last).width, height - 5);
  }

  destroy() {
    window.removeEventListener('resize', this._onResize);
    this.canvas.remove();
  }
}

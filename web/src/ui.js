// DOM helpers of the pages. Text from the API only ever goes in as text nodes
// (never innerHTML), so a dataset named "<img onerror=...>" is just a name.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'style') Object.assign(el.style, v); // CSSOM: allowed by the CSP
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

let toastTimer = null;
// Shows an API error's one-line message (or a notice) at the top of the page.
export function toast(message, kind = 'error') {
  const el = document.getElementById('toast');
  el.textContent = message;
  el.className = 'toast ' + kind;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, kind === 'error' ? 8000 : 3000);
}

export function badge(state) {
  const s = String(state || '').toUpperCase();
  const cls = s === 'ONLINE' || s === 'FINISHED' ? 'ok'
    : s === 'DEGRADED' || s === 'SCANNING' ? 'warn'
      : s === 'NONE' || s === '' ? 'neutral' : 'bad';
  return h('span', { class: 'badge ' + cls }, s || '-');
}

export function capacityBar(used, size) {
  const pct = size ? Math.min(100, (100 * used) / size) : 0;
  const cls = pct >= 90 ? 'bad' : pct >= 80 ? 'warn' : 'ok';
  return h('div', { class: 'capbar', title: pct.toFixed(1) + '% used' },
    h('div', { class: 'capbar-fill ' + cls, style: { width: pct.toFixed(1) + '%' } }));
}

export function table(columns, rows, emptyText) {
  if (!rows.length) return h('p', { class: 'muted empty' }, emptyText);
  return h('table', { class: 'grid' },
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', {}, c)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((cell) => h('td', {}, cell))))));
}

// A modal form: fields [{name, label, type: 'text'|'select'|'checkbox', options,
// value, placeholder}]; resolves to {name: value} or null when cancelled.
export function formDialog(title, fields, submitLabel = 'OK', danger = false) {
  const dlg = document.getElementById('dialog');
  return new Promise((resolve) => {
    const inputs = {};
    const rows = fields.map((f) => {
      let input;
      if (f.type === 'select') {
        input = h('select', { name: f.name }, f.options.map((o) => h('option', { value: o }, o)));
        if (f.value !== undefined) input.value = f.value;
      } else if (f.type === 'checkbox') {
        input = h('input', { type: 'checkbox', name: f.name, checked: !!f.value });
      } else {
        input = h('input', { name: f.name, value: f.value || '', placeholder: f.placeholder || '',
          required: f.optional ? null : true });
      }
      inputs[f.name] = input;
      return h('label', { class: f.type === 'checkbox' ? 'check' : '' }, f.label, input);
    });
    const finish = (values) => { dlg.close(); dlg.replaceChildren(); resolve(values); };
    const form = h('form', { method: 'dialog', class: 'dialog-form',
      onsubmit: (e) => {
        e.preventDefault();
        const values = {};
        for (const [k, el] of Object.entries(inputs)) values[k] = el.type === 'checkbox' ? el.checked : el.value.trim();
        finish(values);
      } },
      h('h3', {}, title), rows,
      h('div', { class: 'dialog-buttons' },
        h('button', { type: 'button', class: 'ghost', onclick: () => finish(null) }, 'Cancel'),
        h('button', { type: 'submit', class: danger ? 'danger' : 'primary', id: 'dialog-ok' }, submitLabel)));
    dlg.replaceChildren(form);
    dlg.oncancel = () => finish(null);
    dlg.showModal();
    const first = Object.values(inputs)[0];
    if (first) first.focus();
  });
}

// A yes/no question before something that cannot be undone.
export async function confirmDialog(title, text, action = 'Destroy') {
  const dlg = document.getElementById('dialog');
  const done = formDialog(title, [], action, true);
  dlg.querySelector('h3').after(h('p', {}, text));
  return (await done) !== null;
}

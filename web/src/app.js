// The web UI's shell: log-in and log-out, the session's role, and the hash
// router (#/dashboard, #/pools, ...) that renders one page of pages.js at a time.

import { api, newSessionEpoch, setUnauthorizedHandler } from './api.js';
import { PAGES } from './pages.js';
import { clearWorksheet } from './analytics.js';
import { h, toast } from './ui.js';

const main = document.getElementById('main');
let session = null; // {user, role} of GET /sessions/current
let leavePage = null; // what the current page started, stopped on leaving it
let routeGeneration = 0; // a page whose rendering was overtaken by another is stopped at once

function showLogin(message) {
  session = null;
  routeGeneration++;
  if (leavePage) { leavePage(); leavePage = null; }
  clearWorksheet(); // the next user starts with an empty one
  document.getElementById('shell').hidden = true;
  document.getElementById('login-view').hidden = false;
  document.getElementById('login-error').textContent = message || '';
  document.getElementById('login-user').focus();
}

async function showShell() {
  document.getElementById('login-view').hidden = true;
  document.getElementById('shell').hidden = false;
  const who = document.getElementById('whoami');
  who.replaceChildren(h('strong', {}, session.user), ' ', h('span', { class: 'role ' + session.role }, session.role));
  document.body.classList.toggle('read-only', session.role !== 'admin');
  await route();
}

async function route() {
  if (!session) return;
  const name = (location.hash.replace(/^#\/?/, '') || 'dashboard').split('/')[0];
  const page = PAGES[name] || PAGES.dashboard;
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === name);
  if (leavePage) { leavePage(); leavePage = null; }
  // Each rendering gets a view of its own: one overtaken by a later route (a quick
  // second click) finishes in a view no longer on the page and is stopped.
  const generation = ++routeGeneration;
  const current = () => generation === routeGeneration;
  const view = h('div', { class: 'view' });
  const ctx = { admin: session.role === 'admin', reload: route };
  main.setAttribute('data-page', name);
  main.classList.add('loading');
  main.replaceChildren(view);
  try {
    const leave = (await page(view, ctx)) || null;
    if (current()) leavePage = leave;
    else if (leave) leave();
  } catch (e) {
    if (e.status !== 401 && current()) {
      view.replaceChildren(h('p', { class: 'error-line' }, e.message));
      toast(e.message);
    }
  } finally {
    if (current()) main.classList.remove('loading');
  }
}

document.getElementById('login-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const user = document.getElementById('login-user').value.trim();
  const password = document.getElementById('login-password').value;
  try {
    const r = await api('POST', '/sessions', { user, password });
    document.getElementById('login-password').value = '';
    newSessionEpoch();
    session = { user: r.user, role: r.role };
    if (!location.hash) history.replaceState(null, '', '#/dashboard');
    await showShell();
  } catch (err) {
    showLogin(err.message);
  }
});

document.getElementById('logout').addEventListener('click', async () => {
  try { await api('DELETE', '/sessions/current'); } catch (e) { /* gone already */ }
  newSessionEpoch();
  showLogin('Logged out.');
});

setUnauthorizedHandler((err) => showLogin(session ? 'Your session has ended: ' + err.message : ''));
window.addEventListener('hashchange', route);
// A message belongs to the page it was shown on.
document.getElementById('nav').addEventListener('click', () => { document.getElementById('toast').hidden = true; });

(async () => {
  try {
    session = await api('GET', '/sessions/current');
    await showShell();
  } catch (e) {
    showLogin('');
  }
})();

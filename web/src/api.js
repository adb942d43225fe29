// The REST API as the pages use it: JSON in and out, the session cookie carried by
// the browser (HttpOnly, SameSite=Strict), and an API error turned into an
// exception whose message is the server's one-line {"error": "..."}.

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

// A resource name in a path: each segment escaped, '/' '@' ':' kept as the API's
// {name} takes them (POOL/FS@SNAP, IQNs).
export function enc(name) {
  return encodeURIComponent(name).replace(/%2F/g, '/').replace(/%40/g, '@').replace(/%3A/g, ':');
}

// A 401 means the session has ended - unless the request was sent before the
// latest log-in or log-out, when it says nothing about the session of now.
let onUnauthorized = () => {};
let sessionEpoch = 0;
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }
export function newSessionEpoch() { sessionEpoch++; }

export async function api(method, path, body) {
  const opts = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const epoch = sessionEpoch;
  let resp;
  try {
    resp = await fetch('/api/v1' + path, opts);
  } catch (e) {
    throw new ApiError('cannot reach cairnd: ' + e.message, 0);
  }
  let json = null;
  try { json = await resp.json(); } catch (e) { /* an empty or non-JSON body */ }
  if (!resp.ok) {
    const err = new ApiError(json && json.error ? json.error : `HTTP ${resp.status}`, resp.status);
    if (resp.status === 401 && path !== '/sessions' && epoch === sessionEpoch) onUnauthorized(err);
    throw err;
  }
  return json || {};
}

// Dataset properties as {name: {value, numeric}} (GET /datasets/{name}).
export async function datasetProps(name) {
  const r = await api('GET', '/datasets/' + enc(name));
  const props = {};
  for (const p of r.props || []) props[p.name] = p;
  return props;
}

// OAuth probe service worker (oauth_probe_test.go). It fetches a plan of
// scenarios from the test's control server, runs each one and posts the
// outcome back; the test judges. config.js, written by the test, sets
// self.PROBE = {control: "http://127.0.0.1:PORT"}.
importScripts('config.js');

const control = self.PROBE.control;

const post = (path, body) =>
  fetch(`${control}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const sleep = ms => new Promise(r => setTimeout(r, ms));
const b64url = bytes => btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

// expand replaces {redirect} (URL-encoded chrome.identity.getRedirectURL('cb'))
// and {state} in a scenario URL.
function expand(url, state) {
  return url.replaceAll('{redirect}', encodeURIComponent(chrome.identity.getRedirectURL('cb'))).replaceAll('{state}', state);
}

async function flow(item) {
  const state = b64url(crypto.getRandomValues(new Uint8Array(12)));
  const details = { url: expand(item.url, state), interactive: item.interactive, ...(item.options ?? {}) };
  const back = await chrome.identity.launchWebAuthFlow(details);
  const q = new URL(back).searchParams;
  return { url: back, detail: q.get('state') === state ? 'state matches' : `state mismatch: ${q.get('state')}` };
}

// mcp is the whole MCP authorization flow against the SDK-based server:
// 401 -> protected resource metadata -> AS metadata -> DCR -> PKCE ->
// launchWebAuthFlow -> token -> tools/call -> expiry -> refresh -> rotation
// -> forced expiry -> refresh.
async function mcp(item) {
  const steps = [];
  const step = s => steps.push(s);
  const check = (cond, what) => {
    if (!cond) throw new Error(`${what} (after: ${steps.join(' | ')})`);
  };
  const rpc = (token, id) =>
    fetch(item.mcp, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(token ? { authorization: `Bearer ${token}` } : {})
      },
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'whoami', arguments: {} } })
    });
  const form = async (url, fields) => {
    const r = await fetch(url, { method: 'POST', body: new URLSearchParams(fields) });
    return { status: r.status, body: await r.json() };
  };

  let r = await rpc(null, 1);
  const www = r.headers.get('www-authenticate') ?? '';
  check(r.status === 401, `unauthenticated call: ${r.status}`);
  step(`401 ${www}`);
  const prmURL = /resource_metadata="([^"]+)"/.exec(www)?.[1];
  check(prmURL, 'no resource_metadata in WWW-Authenticate');
  const prm = await (await fetch(prmURL)).json();
  const issuer = new URL(prm.authorization_servers[0]);
  const asm = await (await fetch(new URL('/.well-known/oauth-authorization-server', issuer))).json();
  step(`AS ${asm.issuer} pkce=${asm.code_challenge_methods_supported} grants=${asm.grant_types_supported}`);

  const redirectUri = chrome.identity.getRedirectURL('oauth');
  const regResp = await fetch(asm.registration_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'OAuth probe',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none'
    })
  });
  const reg = await regResp.json();
  check(regResp.status === 201 && reg.client_id, `DCR: ${regResp.status} ${JSON.stringify(reg)}`);
  step(`DCR client ${reg.client_id}`);

  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  const challenge = b64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  const state = b64url(crypto.getRandomValues(new Uint8Array(12)));
  const auth = new URL(asm.authorization_endpoint);
  auth.search = new URLSearchParams({
    response_type: 'code',
    client_id: reg.client_id,
    redirect_uri: redirectUri,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state,
    scope: (prm.scopes_supported ?? []).join(' '),
    resource: prm.resource
  });
  const back = new URL(await chrome.identity.launchWebAuthFlow({ url: auth.href, interactive: item.interactive }));
  check(back.searchParams.get('state') === state, `state mismatch in ${back}`);
  const code = back.searchParams.get('code');
  check(code, `no code in ${back}`);
  step(`redirect ${back.origin}${back.pathname}`);

  const base = { client_id: reg.client_id, resource: prm.resource };
  let t = await form(asm.token_endpoint, { ...base, grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: redirectUri });
  check(t.status === 200 && t.body.access_token && t.body.refresh_token, `token: ${t.status} ${JSON.stringify(t.body)}`);
  const tok1 = t.body;
  step(`token expires_in=${tok1.expires_in}`);

  r = await rpc(tok1.access_token, 2);
  check(r.status === 200, `call with token: ${r.status}`);
  const who = await r.json();
  step(`whoami ${who.result?.content?.[0]?.text}`);

  await sleep(tok1.expires_in * 1000 + 700);
  r = await rpc(tok1.access_token, 3);
  check(r.status === 401, `call after expiry: ${r.status}`);
  step(`after ${tok1.expires_in}s: 401 ${r.headers.get('www-authenticate')}`);

  t = await form(asm.token_endpoint, { ...base, grant_type: 'refresh_token', refresh_token: tok1.refresh_token });
  check(t.status === 200 && t.body.access_token, `refresh: ${t.status} ${JSON.stringify(t.body)}`);
  const tok2 = t.body;
  r = await rpc(tok2.access_token, 4);
  check(r.status === 200, `call with refreshed token: ${r.status}`);
  step('refreshed: 200');

  t = await form(asm.token_endpoint, { ...base, grant_type: 'refresh_token', refresh_token: tok1.refresh_token });
  check(t.status === 400 && t.body.error === 'invalid_grant', `reused refresh token: ${t.status} ${JSON.stringify(t.body)}`);
  step('old refresh token: invalid_grant');

  if (item.forceExpire) {
    await fetch(new URL('/test/expire', issuer), { method: 'POST' });
    r = await rpc(tok2.access_token, 5);
    check(r.status === 401, `call after /test/expire: ${r.status}`);
    t = await form(asm.token_endpoint, { ...base, grant_type: 'refresh_token', refresh_token: tok2.refresh_token });
    check(t.status === 200, `refresh after /test/expire: ${t.status}`);
    r = await rpc(t.body.access_token, 6);
    check(r.status === 200, `call after second refresh: ${r.status}`);
    step('forced expiry: 401, refresh, 200');
  }
  return { url: back.href, detail: steps.join(' | ') };
}

async function main() {
  const plan = await (await fetch(`${control}/plan`)).json();
  await post('/hello', { redirectURL: chrome.identity.getRedirectURL(), id: chrome.runtime.id, ua: navigator.userAgent });
  for (const item of plan) {
    const t0 = performance.now();
    let res;
    try {
      res = { ok: true, ...(await (item.kind === 'mcp' ? mcp(item) : flow(item))) };
    } catch (e) {
      res = { ok: false, error: String(e?.message ?? e) };
    }
    await post('/result', { name: item.name, ms: Math.round(performance.now() - t0), ...res });
  }
  await post('/done', {});
}

// Run once per browser, even if the worker restarts.
chrome.storage.session.get('started').then(({ started }) => {
  if (started) return;
  chrome.storage.session.set({ started: true });
  main().catch(e => post('/result', { name: 'main', ok: false, error: String(e?.message ?? e) }));
});

// A custom server with pre-registered credentials on the worker's side
// (sw/remote.js): the options page's client ID and secret are checked, kept
// with the server's entry in chrome.storage.local, handed to the RemoteServer,
// and never shown in the options page's status or the bridge's remote.list.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as remote from '../sw/remote.js';
import { workTracker } from './remote/work.js';

class FakeServer {
  static instances = [];
  constructor(config, platform, { onChange } = {}) {
    this.config = config;
    this.onChange = onChange;
    FakeServer.instances.push(this);
  }
  get state() {
    return 'connected';
  }
  get message() {
    return '';
  }
  get tools() {
    return [];
  }
  async connect() {}
  async signIn() {}
  async disconnect() {}
  async signOut() {}
  async refreshToken() {}
  tokenExpiry() {
    return 0;
  }
}

const SECRET = 'pre-registered s3cret';
const manager = () => {
  const work = workTracker();
  const mgr = new remote.RemoteManager({ RemoteServer: FakeServer, notify: () => {}, onWork: work.onWork });
  mgr.idle = work.idle; // the test's, not the extension's (test/remote/work.js)
  return mgr;
};
const config = async () => (await chrome.storage.local.get(remote.CONFIG_KEY))[remote.CONFIG_KEY];

beforeEach(() => {
  installFakeChrome();
  FakeServer.instances = [];
});

test('parseClientCredentials: optional, trimmed, printable; a secret needs its client id and is never repeated', () => {
  assert.deepEqual(remote.parseClientCredentials('', ''), {});
  assert.deepEqual(remote.parseClientCredentials(undefined, undefined), {});
  assert.deepEqual(remote.parseClientCredentials(' id-1 ', ''), { clientId: 'id-1' });
  assert.deepEqual(remote.parseClientCredentials('id-1', ` ${SECRET}\n`), { clientId: 'id-1', clientSecret: SECRET });
  assert.throws(() => remote.parseClientCredentials('', SECRET), /needs the client ID/);
  assert.throws(() => remote.parseClientCredentials('id\u0001', ''), /client ID/);
  for (const bad of [`${SECRET}\u0000`, 'x'.repeat(1025), 'sécret']) {
    assert.throws(
      () => remote.parseClientCredentials('id', bad),
      (err) => {
        assert.match(err.message, /client secret/);
        assert.ok(!err.message.includes(bad.trim()), 'the error repeats the secret');
        return true;
      },
    );
  }
});

test('remote.addServer keeps the credentials with the server entry and gives them to its RemoteServer only', async () => {
  const mgr = manager();
  await assert.rejects(
    mgr.pageMessage({ type: 'remote.addServer', url: 'https://mcp.acme.dev/mcp', clientSecret: SECRET }),
    /needs the client ID/,
  );
  assert.deepEqual((await config())?.custom ?? [], [], 'nothing is stored from a refused form');

  const { id } = await mgr.pageMessage({
    type: 'remote.addServer',
    url: 'https://mcp.acme.dev/mcp',
    clientId: 'acme-client',
    clientSecret: SECRET,
  });
  await mgr.idle();
  assert.deepEqual((await config()).custom, [
    { id, title: 'mcp.acme.dev', url: 'https://mcp.acme.dev/mcp', clientId: 'acme-client', clientSecret: SECRET },
  ]);
  const srv = FakeServer.instances.filter((s) => s.config.id === id).at(-1);
  assert.deepEqual(srv.config, { id, url: 'https://mcp.acme.dev/mcp', clientId: 'acme-client', clientSecret: SECRET });

  const status = await mgr.pageMessage({ type: 'remote.status' });
  assert.ok(!JSON.stringify(status).includes(SECRET), 'the secret in the options page status');
  assert.ok(!JSON.stringify(await mgr.list()).includes(SECRET), 'the secret in remote.list');
  const session = await chrome.storage.session.get(null);
  assert.ok(!JSON.stringify(session).includes(SECRET), 'the secret in session storage');

  // A client id alone is a public client; built-ins never get a secret.
  const pub = await mgr.pageMessage({ type: 'remote.addServer', url: 'https://mcp.other.dev/mcp', clientId: 'other' });
  await mgr.idle();
  assert.deepEqual(FakeServer.instances.filter((s) => s.config.id === pub.id).at(-1).config, {
    id: pub.id,
    url: 'https://mcp.other.dev/mcp',
    clientId: 'other',
  });
  await mgr.pageMessage({ type: 'remote.setEnabled', id: 'notion', enabled: true });
  await mgr.idle();
  const notion = FakeServer.instances.filter((s) => s.config.id === 'notion').at(-1);
  assert.equal(notion.config.clientSecret, undefined);

  // Removing the server deletes the secret with its entry.
  await mgr.pageMessage({ type: 'remote.removeServer', id });
  assert.ok(!JSON.stringify(await chrome.storage.local.get(null)).includes(SECRET));
});

// hello: the instance id (random, valid, persistent) and the browser's name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as hello from '../sw/hello.js';

const fake = installFakeChrome();

test('instanceId is valid, stored in storage.local and stable', async () => {
  const a = await hello.instanceId();
  assert.match(a, /^[A-Za-z0-9_-]{8,64}$/);
  assert.equal((await chrome.storage.local.get('instanceId')).instanceId, a);
  assert.equal(await hello.instanceId(), a);
});

test('an invalid stored instanceId is replaced', async () => {
  await chrome.storage.local.set({ instanceId: 'bad id!' });
  const id = await hello.instanceId();
  assert.match(id, /^[A-Za-z0-9_-]{8,64}$/);
  assert.notEqual(id, 'bad id!');
});

const nav = (brands, fullVersionList, extra = {}) => ({
  userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36',
  userAgentData: {
    brands,
    getHighEntropyValues: async () => (fullVersionList ? { fullVersionList } : {}),
  },
  ...extra,
});

test('browserInfo names the browser from userAgentData', async () => {
  const cases = [
    [
      'Chrome',
      nav(
        [
          { brand: 'Not/A)Brand', version: '8' },
          { brand: 'Chromium', version: '126' },
          { brand: 'Google Chrome', version: '126' },
        ],
        [
          { brand: 'Chromium', version: '126.0.6478.126' },
          { brand: 'Google Chrome', version: '126.0.6478.126' },
        ],
      ),
      'Chrome',
      '126.0.6478.126',
    ],
    [
      'Edge',
      nav(
        [
          { brand: 'Chromium', version: '125' },
          { brand: 'Microsoft Edge', version: '125' },
        ],
        null,
      ),
      'Edge',
      '125',
    ],
    [
      'Chromium',
      nav([{ brand: 'Chromium', version: '120' }], [{ brand: 'Chromium', version: '120.0.6099.224' }]),
      'Chromium',
      '120.0.6099.224',
    ],
    [
      'headless',
      nav(
        [
          { brand: 'HeadlessChrome', version: '131' },
          { brand: 'Chromium', version: '131' },
        ],
        null,
      ),
      'Chromium',
      '131',
    ],
    [
      'Brave',
      nav(
        [
          { brand: 'Chromium', version: '126' },
          { brand: 'Brave', version: '126' },
        ],
        null,
      ),
      'Brave',
      '126',
    ],
  ];
  for (const [name, n, wantName, wantVersion] of cases) {
    const b = await hello.browserInfo(n);
    assert.equal(b.name, wantName, name);
    assert.equal(b.version, wantVersion, name);
    assert.equal(b.userAgent, n.userAgent, name);
  }
});

test('parseUserAgent is the fallback without userAgentData', async () => {
  assert.deepEqual(hello.parseUserAgent('Mozilla/5.0 … Chrome/126.0.0.0 Safari/537.36 Edg/126.0.2592.68'), {
    name: 'Edge',
    version: '126.0.2592.68',
  });
  assert.deepEqual(hello.parseUserAgent('Mozilla/5.0 … HeadlessChrome/131.0.6778.85 Safari/537.36'), {
    name: 'Chromium',
    version: '131.0.6778.85',
  });
  assert.deepEqual(hello.parseUserAgent('Mozilla/5.0 … Chrome/126.0.0.0 Safari/537.36 Vivaldi/6.8.3381.46'), {
    name: 'Vivaldi',
    version: '6.8.3381.46',
  });
  assert.deepEqual(hello.parseUserAgent(''), { name: 'Chromium', version: 'unknown' });
  const b = await hello.browserInfo({ userAgent: 'x Chrome/120.1 y' });
  assert.deepEqual(b, { name: 'Chrome', version: '120.1', userAgent: 'x Chrome/120.1 y' });
});

test('hello params carry the extension and the profile label when one is set', async () => {
  let p = await hello.helloParams();
  assert.deepEqual(p.extension, { id: fake.runtime.id, version: '0.1.0' });
  assert.equal(p.instanceId, await hello.instanceId());
  assert.ok(p.browser.name);
  assert.ok(!('profile' in p));
  await chrome.storage.local.set({ settings: { profileLabel: '  Work  ' } });
  p = await hello.helloParams();
  assert.equal(p.profile, 'Work');
});

test('the hello result reconciles the tab groups and keeps a session that calls right behind it', async () => {
  const rpc = await import('../sw/rpc.js');
  const sessions = await import('../sw/sessions.js');
  const flush = async () => {
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  };
  const dead = await sessions.createTab({ id: 'local-dead', client: 'Inspector' }, 'https://dead.example/');
  const kept = await sessions.createTab({ id: 'local-kept', client: 'Claude Code' }, 'https://kept.example/');
  const keptGroup = fake.tabsById.get(kept.id).groupId;

  // The bridge: answers hello, then (a task later, as the next frame of the
  // port) calls for a session it created after building that answer.
  const replies = [];
  rpc.register('test/tab', (params, ctx) => ctx.resolveTab(undefined, { create: true })); // as navigate with a url
  rpc.setTransport({
    linkUp: () => true,
    send(msg) {
      if (msg.method === 'hello') {
        setImmediate(() =>
          rpc.receive({
            jsonrpc: '2.0',
            id: msg.id,
            result: {
              browserId: msg.params.instanceId,
              bridgeVersion: '9.9',
              bridgeInstance: '0123456789abcdef0123456789abcdef',
              sessions: [{ id: 'local-kept', client: 'Claude Code' }],
            },
          }),
        );
        setImmediate(() => rpc.receive({ jsonrpc: '2.0', id: 'local-new:1', method: 'test/tab', params: {} }));
      } else replies.push(msg);
      return true;
    },
  });
  const result = await hello.sayHello();
  assert.deepEqual(result.sessions, [{ id: 'local-kept', client: 'Claude Code' }]);
  await flush();

  const bridge = (await chrome.storage.session.get('bridge')).bridge;
  assert.equal(bridge.state, 'ready');
  assert.equal(bridge.bridgeInstance, '0123456789abcdef0123456789abcdef');
  assert.ok(!('sessions' in bridge), 'the stored bridge state keeps a list that is stale at once');

  const recs = (await chrome.storage.session.get('sessions')).sessions;
  assert.deepEqual(Object.keys(recs).sort(), ['local-kept', 'local-new']);
  assert.equal(fake.tabsById.get(dead.id).groupId, -1, "the dead session's tab is still grouped");
  assert.equal(fake.tabsById.get(kept.id).groupId, keptGroup);
  const [reply] = replies.filter((m) => m.id === 'local-new:1');
  assert.ok(reply?.result, `the call behind the hello failed: ${JSON.stringify(reply)}`);
  assert.equal(
    fake.tabsById.get(reply.result.id).groupId,
    recs['local-new'].groupId,
    "the new session's tab is not in its group",
  );
  assert.equal(recs['local-new'].bridgeInstance, '0123456789abcdef0123456789abcdef');
});

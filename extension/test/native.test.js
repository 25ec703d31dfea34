// The native port: reconnection with backoff, lastError for the popup,
// host.state handling (hello on "connected", pending requests failed on
// anything else), chunked messages reaching the dispatcher, and the standing
// wake alarm (created once, reconnecting a closed port). The wiring
// mirrors background.js, which cannot be imported here (it pulls in every
// tool module).
import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as native from '../sw/native.js';
import * as rpc from '../sw/rpc.js';
import * as hello from '../sw/hello.js';

const fake = installFakeChrome();
const flush = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};
const stored = async (area, key) => (await chrome.storage[area].get(key))[key];

rpc.setTransport({ send: native.send, linkUp: native.linkUp });
rpc.register('ping', () => ({}));
native.init({
  onMessage: (msg) => rpc.receive(msg),
  onConnected: () => hello.sayHello(),
  onLinkDown: (reason) => rpc.failPending(reason),
});

test('backoff doubles from 250 ms to 30 s', () => {
  const got = Array.from({ length: 10 }, (_, i) => native.backoffDelay(i));
  assert.deepEqual(got, [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  assert.equal(native.backoffDelay(1000), 30000);
});

test('the port reconnects with backoff, keeps lastError, and resets after the host speaks', async () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    native.connect();
    native.connect(); // idempotent
    assert.equal(fake.ports.length, 1);
    assert.equal(fake.lastPort().name, 'com.browserbridge.host');

    fake.lastPort().hostCloses('Specified native messaging host not found.');
    await flush();
    let st = await stored('session', 'native');
    assert.equal(st.port, 'disconnected');
    assert.equal(st.lastError, 'Specified native messaging host not found.');
    assert.equal(st.retryInMs, 250);
    // No alarm per disconnection: the standing wake alarm (background.js) covers a stopped worker.
    assert.equal(fake.alarmCreates, 0);

    mock.timers.tick(249);
    assert.equal(fake.ports.length, 1);
    mock.timers.tick(1);
    assert.equal(fake.ports.length, 2);

    fake.lastPort().hostCloses('Native host has exited.');
    await flush();
    assert.equal((await stored('session', 'native')).retryInMs, 500);
    mock.timers.tick(500);
    assert.equal(fake.ports.length, 3);

    // The host speaks: the port works, so the next failure starts at 250 ms again.
    fake.lastPort().hostSends({ jsonrpc: '2.0', method: 'host.state', params: { state: 'connecting', socket: '/s' } });
    await flush();
    st = await stored('session', 'native');
    assert.equal(st.port, 'open');
    assert.equal(st.lastError, 'Native host has exited.', 'the last error stays visible');
    assert.equal((await stored('session', 'hostState')).state, 'connecting');

    fake.lastPort().hostCloses('Native host has exited.');
    await flush();
    assert.equal((await stored('session', 'native')).retryInMs, 250);
    mock.timers.tick(250);
    assert.equal(fake.ports.length, 4);
  } finally {
    mock.timers.reset();
  }
});

test('"connected" makes the extension say hello; other states fail pending requests', async () => {
  const port = fake.lastPort();
  port.hostSends({
    jsonrpc: '2.0',
    method: 'host.state',
    params: { state: 'connected', socket: '/s', bridgeVersion: '1.2.3' },
  });
  await flush();
  assert.equal(native.linkUp(), true);
  const h = port.sent.find((m) => m.method === 'hello');
  assert.ok(h, 'no hello after connected');
  assert.match(h.id, /^ext:\d+$/);
  assert.match(h.params.instanceId, /^[A-Za-z0-9_-]{8,64}$/);
  assert.deepEqual(h.params.extension, { id: chrome.runtime.id, version: '0.1.0' });
  port.hostSends({ jsonrpc: '2.0', id: h.id, result: { browserId: h.params.instanceId, bridgeVersion: '1.2.3' } });
  await flush();
  assert.equal((await stored('session', 'bridge')).state, 'ready');

  const pending = rpc.request('session.close', { session: 'local-x' });
  port.hostSends({
    jsonrpc: '2.0',
    method: 'host.state',
    params: { state: 'disconnected', socket: '/s', error: 'the bridge went away' },
  });
  await assert.rejects(pending, /lost the bridge \(disconnected: the bridge went away\)/);
  assert.equal(native.linkUp(), false);
  await assert.rejects(rpc.request('ping'), /not connected/);
  const hs = await stored('session', 'hostState');
  assert.equal(hs.state, 'disconnected');
  assert.equal(hs.error, 'the bridge went away');

  // Back again: hello again.
  const before = port.sent.filter((m) => m.method === 'hello').length;
  port.hostSends({ jsonrpc: '2.0', method: 'host.state', params: { state: 'connected', socket: '/s' } });
  await flush();
  assert.equal(port.sent.filter((m) => m.method === 'hello').length, before + 1);
});

test('the port closing fails pending requests too', async () => {
  const p = rpc.request('session.close', { session: 'local-y' });
  fake.lastPort().hostCloses('Native host has exited.');
  await assert.rejects(p, /native host disconnected: Native host has exited/);
  native.connect(); // what the timer would do
});

test('a chunked request reaches the dispatcher and is answered once', async () => {
  const port = fake.lastPort();
  port.hostSends({ jsonrpc: '2.0', method: 'host.state', params: { state: 'connected', socket: '/s' } });
  await flush();
  const bytes = Buffer.from(
    JSON.stringify({ jsonrpc: '2.0', id: 'bridge:5', method: 'ping', params: { pad: 'é'.repeat(100) } }),
  );
  const size = 33;
  const total = Math.ceil(bytes.length / size);
  for (let seq = 0; seq < total; seq++) {
    port.hostSends({
      jsonrpc: '2.0',
      method: 'native.chunk',
      params: { id: 'h1', total, seq, data: bytes.subarray(seq * size, (seq + 1) * size).toString('base64') },
    });
  }
  await flush();
  assert.deepEqual(
    port.sent.filter((m) => m.id === 'bridge:5'),
    [{ jsonrpc: '2.0', id: 'bridge:5', result: {} }],
  );
  rpc.failPending('the test is over'); // the unanswered hello's timer would keep node waiting
});

test('the wake alarm is created once with a 30 s period and never rescheduled by a later start', async () => {
  fake.alarmsByName.clear();
  await chrome.alarms.create(native.LEGACY_RECONNECT_ALARM, { periodInMinutes: 0.5 }); // left by an earlier version
  const creates = fake.alarmCreates;
  assert.equal(await native.ensureWakeAlarm(), true);
  const first = await chrome.alarms.get(native.WAKE_ALARM);
  assert.equal(first.periodInMinutes, 0.5);
  assert.equal(native.WAKE_PERIOD_MINUTES, 0.5);
  assert.ok(
    !fake.alarmsByName.has(native.LEGACY_RECONNECT_ALARM),
    'the per-disconnection alarm of the earlier version is still there',
  );

  // Every later worker start finds it and leaves its schedule alone.
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(await native.ensureWakeAlarm(), false);
  assert.equal(await native.ensureWakeAlarm(), false);
  assert.equal(fake.alarmCreates, creates + 1, 'a later start created the wake alarm again');
  assert.equal((await chrome.alarms.get(native.WAKE_ALARM)).scheduledTime, first.scheduledTime);

  // One with another period (set by hand, or a future version) is replaced.
  await chrome.alarms.create(native.WAKE_ALARM, { periodInMinutes: 5 });
  assert.equal(await native.ensureWakeAlarm(), true);
  assert.equal((await chrome.alarms.get(native.WAKE_ALARM)).periodInMinutes, 0.5);
});

test('the wake alarm connects a closed port and leaves an open one alone', async () => {
  mock.timers.enable({ apis: ['setTimeout'] }); // the backoff timer must not be what reconnects
  try {
    if (!native.portOpen()) native.connect();
    fake.lastPort().hostCloses('Native host has exited.');
    await flush();
    assert.equal(native.portOpen(), false);
    const ports = fake.ports.length;

    assert.equal(native.onAlarm({ name: 'remote-refresh:notion' }), false, 'another alarm was taken as the wake alarm');
    assert.equal(fake.ports.length, ports);
    assert.equal(native.onAlarm({ name: native.WAKE_ALARM, scheduledTime: Date.now() }), true);
    assert.equal(fake.ports.length, ports + 1, 'the wake alarm did not reconnect');
    assert.equal(native.portOpen(), true);

    native.onAlarm({ name: native.WAKE_ALARM, scheduledTime: Date.now() });
    assert.equal(fake.ports.length, ports + 1, 'the wake alarm opened a second port');
  } finally {
    mock.timers.reset();
  }
});

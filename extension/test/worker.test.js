// The service worker as Chrome starts it (background.js, imported whole):
// the standing wake alarm exists after a start, a later start leaves its
// schedule alone, and the top-level listeners bring a closed port back
// (issue 12: a stopped worker never came back).
import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';

const fake = installFakeChrome();
const flush = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};
const native = await import('../sw/native.js');
await import('../background.js');
await flush();

test('a worker start connects and creates the 30 s wake alarm', async () => {
  assert.equal(fake.ports.length, 1);
  assert.equal(native.portOpen(), true);
  const alarm = await chrome.alarms.get(native.WAKE_ALARM);
  assert.ok(alarm, 'no wake alarm after the worker started');
  assert.equal(alarm.periodInMinutes, 0.5);
  assert.equal(fake.alarmCreates, 1);
});

test('a later start finds the alarm and does not reschedule it', async () => {
  const before = await chrome.alarms.get(native.WAKE_ALARM);
  await new Promise((r) => setTimeout(r, 5)); // a re-created alarm would be scheduled later
  // Evaluate background.js again, as the next worker start does (its
  // modules are shared here, so its tools register twice: silence that).
  const warn = mock.method(console, 'warn', () => {});
  try {
    await import('../background.js?second-start');
    await flush();
  } finally {
    warn.mock.restore();
  }
  assert.equal(fake.alarmCreates, 1, 'a later start created the wake alarm again');
  assert.deepEqual(await chrome.alarms.get(native.WAKE_ALARM), before);
});

test('the alarm listener reconnects a port that closed', async () => {
  mock.timers.enable({ apis: ['setTimeout'] }); // the backoff timer must not be what reconnects
  try {
    fake.lastPort().hostCloses('Native host has exited.');
    await flush();
    assert.equal(native.portOpen(), false);
    const ports = fake.ports.length;
    fake.alarms.onAlarm.dispatch({ name: native.WAKE_ALARM, scheduledTime: Date.now(), periodInMinutes: 0.5 });
    await flush();
    assert.equal(fake.ports.length, ports + 1, 'the wake alarm did not reconnect');
    assert.equal(native.portOpen(), true);
  } finally {
    mock.timers.reset();
  }
});

test('switching tabs reconnects a port that closed', async () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    fake.lastPort().hostCloses('Native host has exited.');
    await flush();
    const ports = fake.ports.length;
    fake.tabs.onActivated.dispatch({ tabId: 1, windowId: 10 });
    await flush();
    assert.equal(fake.ports.length, ports + 1, 'activating a tab did not reconnect');
  } finally {
    mock.timers.reset();
  }
});

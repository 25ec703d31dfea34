// The popup's client list (issue 12: it showed every session that ever
// ended): popup.js itself, on a minimal DOM, lists the live sessions only,
// newest first, and follows storage as sessions end.
import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';

const fake = installFakeChrome();
const flush = async () => { for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r)); };

// Just enough of the DOM for popup.js: elements with properties, children,
// listeners and a tBodies[0] for the calls table.
function element(tag) {
  const e = {
    tagName: tag.toUpperCase(), children: [], style: {}, hidden: false, textContent: '', listeners: {},
    classList: { add() {} },
    append(...c) { e.children.push(...c); },
    replaceChildren(...c) { e.children = c; },
    addEventListener(type, fn) { e.listeners[type] = fn; },
  };
  if (tag === 'table') e.tBodies = [element('tbody')];
  return e;
}
const byId = new Map();
globalThis.document = {
  createElement: element,
  getElementById: (id) => byId.get(id) || (byId.set(id, element(id === 'calls' ? 'table' : 'div')), byId.get(id)),
};

const names = () => byId.get('clients').children.map((li) => li.children[0].children[0].textContent);

test('the popup lists the live sessions only, newest first, and drops a session when it ends', async () => {
  await chrome.storage.session.set({
    bridge: { state: 'ready', bridgeInstance: 'b1', at: 1 },
    sessions: {
      'local-1': { id: 'local-1', client: 'Oldest', createdAt: 1000, lastActive: 9000, bridgeInstance: 'b1', groupId: null },
      'local-3': { id: 'local-3', client: 'Newest', createdAt: 3000, lastActive: 3000, bridgeInstance: 'b1', groupId: null },
      'conn-r': { id: 'conn-r', client: 'relay conn-r', createdAt: 2000, lastActive: 2000, groupId: null },
      'local-9': { id: 'local-9', client: 'Of a dead bridge', createdAt: 4000, lastActive: 4000, bridgeInstance: 'b0', groupId: null },
    },
  });
  const sent = [];
  fake.runtime.sendMessage = async (msg) => { sent.push(msg); };
  mock.timers.enable({ apis: ['setInterval'] }); // the popup's 5 s refresh would keep the test running
  try {
    await import('../popup.js');
    await flush();
    assert.deepEqual(names(), ['Newest', 'relay conn-r', 'Oldest']);
    assert.equal(byId.get('no-clients').hidden, true);
    assert.deepEqual(sent, [{ type: 'reconnect' }], 'opening the popup did not wake the worker');

    // A session ends: the service worker deletes its record, the popup follows.
    const { sessions } = await chrome.storage.session.get('sessions');
    delete sessions['local-3'];
    delete sessions['conn-r'];
    delete sessions['local-1'];
    await chrome.storage.session.set({ sessions });
    await flush();
    assert.deepEqual(names(), []);
    assert.equal(byId.get('no-clients').hidden, false);
  } finally {
    mock.timers.reset();
  }
});

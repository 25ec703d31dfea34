// The page agent's warm-up (content/page/warm.js): it starts once the page
// has loaded, runs one step per task of background priority (so that a
// call's script, a task of normal priority, comes first), and starts no
// step after a call has run. Node has no DOM: the document, DOMParser and
// the Scheduler API are stand-ins that record what the warm-up asks of them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadPageAgent } from './page-scripts.js';

/** A page as far as warm.js sees it, and a scheduler whose tasks the test runs one at a time. */
function fakePage(readyState) {
  const tasks = [];
  const listeners = {};
  const el = () => ({ tag: 'el' });
  const sample = { body: { querySelectorAll: () => [el(), el(), el()] }, querySelector: (s) => ({ part: s }) };
  const saved = {};
  for (const k of ['document', 'DOMParser', 'scheduler', 'addEventListener']) saved[k] = globalThis[k];
  globalThis.document = { readyState, querySelectorAll: () => [] };
  globalThis.DOMParser = class {
    parseFromString() {
      return sample;
    }
  };
  globalThis.scheduler = {
    postTask(fn, opts) {
      tasks.push({ fn, priority: opts?.priority });
      return Promise.resolve();
    },
  };
  globalThis.addEventListener = (type, fn) => (listeners[type] = fn);
  const restore = () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete globalThis[k];
      else globalThis[k] = v;
    }
  };
  return { tasks, listeners, restore };
}

/** The page agent with its ops stubbed: which steps ran. */
function agentWithStubs() {
  const P = loadPageAgent();
  delete P.called;
  delete P.warmMs;
  const ran = [];
  P.ops.snapshot = (args) => ran.push(`snapshot ${args.filter}`);
  P.hidden = { ...P.hidden, warmRules: () => ran.push('rules'), fresh: () => {} };
  return { P, ran };
}

test('the warm-up starts at load, one background task per step, and ends with its time', () => {
  const page = fakePage('loading');
  try {
    const { P, ran } = agentWithStubs();
    P.warmAfterLoad();
    assert.equal(page.tasks.length, 0, 'nothing before the load event');
    page.listeners.load();
    let steps = 0;
    while (page.tasks.length) {
      const t = page.tasks.shift();
      assert.equal(t.priority, 'background', 'each step yields to the calls');
      t.fn();
      steps++;
    }
    assert.equal(steps, 6);
    assert.deepEqual(ran.slice(0, 4), ['snapshot all', 'snapshot all', 'snapshot all', 'snapshot interactive']);
    assert.equal(ran.filter((r) => r === 'rules').length, 3, "each sample element's rules once");
    assert.equal(typeof P.warmMs, 'number');
  } finally {
    page.restore();
  }
});

test('a call that runs during the warm-up ends it: no further step starts', () => {
  const page = fakePage('complete');
  try {
    const { P, ran } = agentWithStubs();
    P.warmAfterLoad();
    assert.equal(page.tasks.length, 1, 'a loaded page: the first step is queued at once');
    page.tasks.shift().fn();
    assert.equal(ran.length, 1);
    P.run('refOf', { elements: [] }); // a tool's call
    while (page.tasks.length) page.tasks.shift().fn();
    assert.equal(ran.length, 1, 'no step after the call');
    assert.equal(P.warmMs, undefined, 'the warm-up did not finish');
    P.warmAfterLoad();
    assert.equal(page.tasks.length, 0, 'once per document');
  } finally {
    page.restore();
  }
});

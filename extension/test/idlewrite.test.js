import { test } from 'node:test';
import assert from 'node:assert/strict';
import { idleWriter } from '../sw/idlewrite.js';

test('an idle writer writes once the pokes pause, and during a long burst every maxMs', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  let runs = 0;
  const w = idleWriter(() => runs++, { quietMs: 100, maxMs: 1000 });
  w.poke();
  t.mock.timers.tick(60);
  w.poke(); // the quiet wait starts again
  t.mock.timers.tick(60);
  assert.equal(runs, 0);
  t.mock.timers.tick(40);
  assert.equal(runs, 1, 'written 100 ms after the last poke');
  assert.equal(w.pending(), false);
  // A poke every 50 ms never leaves 100 quiet ms: written at 1000 ms all the same.
  for (let i = 0; i < 20; i++) {
    w.poke();
    t.mock.timers.tick(50);
  }
  assert.equal(runs, 2, 'a burst is written at most maxMs after its first poke');
});

test("an idle writer's flush writes at once, and only what is pending", (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  let runs = 0;
  const w = idleWriter(() => ++runs, { quietMs: 100, maxMs: 1000 });
  assert.equal(w.flush(), undefined, 'nothing to write');
  w.poke();
  assert.equal(w.flush(), 1);
  t.mock.timers.tick(2000);
  assert.equal(runs, 1, 'the flushed write does not run again');
  w.poke();
  w.cancel();
  assert.equal(w.pending(), false);
  t.mock.timers.tick(2000);
  assert.equal(runs, 1, 'a cancelled write does not run');
});

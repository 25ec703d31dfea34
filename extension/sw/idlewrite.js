// Bookkeeping writes that wait for a pause in the calls. A write to
// chrome.storage is not only its own round trip: Chrome hands every
// onChanged listener (the worker itself, an open popup or options page) the
// old and the new value, so a write per tool call put that work in front of
// the next call's message (about 5 ms of a 7 ms echo on a busy machine).
// Written once the calls pause, the same bookkeeping costs a call nothing;
// during a long burst it is still written at least every maxMs.

/**
 * @param {() => unknown} run writes what gathered (its result is returned by flush)
 * @param {{quietMs: number, maxMs: number}} opts run after quietMs without a poke, and at
 *   the latest maxMs after the first poke not yet written
 * @returns {{poke: () => void, flush: () => unknown, cancel: () => void, pending: () => boolean}}
 *   poke: something gathered; flush: write now if a write waits; cancel: forget the waiting
 *   write (its owner writes itself)
 */
export function idleWriter(run, { quietMs, maxMs }) {
  let timer = null;
  let first = 0; // when the oldest unwritten poke came
  const fire = () => {
    clearTimeout(timer);
    timer = null;
    return run();
  };
  return {
    poke() {
      const now = Date.now();
      if (timer === null) first = now;
      else clearTimeout(timer);
      timer = setTimeout(fire, Math.max(0, Math.min(quietMs, first + maxMs - now)));
    },
    flush: () => (timer === null ? undefined : fire()),
    cancel() {
      clearTimeout(timer);
      timer = null;
    },
    pending: () => timer !== null,
  };
}

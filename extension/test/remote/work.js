// Waiting for a RemoteManager's background work (state records, alarms, a
// remote.changed waiting for its delay), which the tests do before they
// look at what it left: the manager tells its onWork of each piece.

/**
 * A tracker to pass as the manager's onWork, and idle(), which resolves
 * once no work is pending (work that starts meanwhile included).
 * @returns {{onWork: (work: Promise<void>) => void, idle: () => Promise<void>}}
 */
export function workTracker() {
  const pending = new Set();
  return {
    onWork(work) {
      pending.add(work);
      work.finally(() => pending.delete(work));
    },
    async idle() {
      for (let i = 0; i < 100 && pending.size; i++) await Promise.all([...pending]);
    },
  };
}

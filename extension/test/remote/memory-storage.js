// Storage backed by a Map: the RemoteServer platform's storage for the
// unit tests and the conformance wrapper (test/conformance/client.mjs). It
// lives with the tests: the extension stores in chrome.storage.local.

/**
 * Storage backed by a Map.
 * @param {Map<string, any>} [map]
 */
export function memoryStorage(map = new Map()) {
  const copy = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
  return {
    map,
    async get(key) {
      return copy(map.get(key));
    },
    async set(key, value) {
      map.set(key, copy(value));
    },
    async remove(key) {
      map.delete(key);
    },
  };
}

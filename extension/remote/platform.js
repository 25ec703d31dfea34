// The platform interface: everything the remote-MCP core needs from where it
// runs. The core (extension/remote/*.js) never touches chrome.* or node:*;
// the service worker builds a platform from chrome.identity, chrome.storage
// and Web Crypto; the conformance wrapper (extension/test/conformance/
// client.mjs) and the unit tests build one from Node.
//
// One platform may be shared by several RemoteServers: it must hold no state
// that ties them together (storage keys are per server id, see client.js).
//
//   fetch(url, init)            the WHATWG fetch. The core always passes
//                               redirect: 'error' and an AbortSignal.
//   now()                       ms since the epoch (tests move time).
//   storage.get(key)            → Promise<value | undefined>
//   storage.set(key, value)     → Promise<void>; value is JSON-serializable
//   storage.remove(key)         → Promise<void>
//                               (chrome.storage.local wrapped so that get
//                               returns the value itself, not {key: value})
//   launchWebAuthFlow({url, interactive})
//                               → Promise<string>: the URL the authorization
//                               server redirected to (which starts with
//                               redirectUri); rejects when the person closes
//                               the window. chrome.identity.launchWebAuthFlow.
//   redirectUri                 'https://<extension-id>.chromiumapp.org/oauth'
//                               (chrome.identity.getRedirectURL('oauth')).
//   randomBytes(n)              → Uint8Array of n cryptographically random bytes.
//   sha256(bytes)               → Promise<Uint8Array> (crypto.subtle.digest).
//   log(level, msg, fields)     level: debug|info|warn|error. The core never
//                               passes a token, code, verifier or secret.
//   developerMode               true: http and https to loopback addresses are
//                               allowed (local test servers); nothing else changes.
//   resolve?(host)              → Promise<string[]> of IP addresses. Node:
//                               dns.lookup(host, {all: true}). Chrome has no
//                               DNS API for extensions: leave it out, and
//                               ssrf.checkResolved says the check was skipped.
//   clientMetadataUrl?          an https URL of Browser Bridge's OAuth Client
//                               ID Metadata Document, used as the client_id
//                               where the authorization server supports them.
//   clientInfo?                 {name, version} sent to servers; defaults to
//                               {name: 'Browser Bridge', version: '0.1.0'}.
//   sleep?(ms)                  → Promise<void> between retries; defaults to
//                               setTimeout (tests pass one that returns at once).

/** Members a platform must have, with their types. */
const REQUIRED = {
  fetch: 'function',
  now: 'function',
  storage: 'object',
  launchWebAuthFlow: 'function',
  redirectUri: 'string',
  randomBytes: 'function',
  sha256: 'function',
  log: 'function',
};

/**
 * Checks a platform object, throwing a TypeError that names what is missing.
 * @param {object} platform
 * @returns {object} the same platform
 */
export function checkPlatform(platform) {
  if (!platform || typeof platform !== 'object') throw new TypeError('platform: an object is required');
  const missing = Object.entries(REQUIRED)
    .filter(([k, type]) => typeof platform[k] !== type || platform[k] === null)
    .map(([k, type]) => `${k} (${type})`);
  for (const k of ['get', 'set', 'remove']) {
    if (typeof platform.storage?.[k] !== 'function') missing.push(`storage.${k} (function)`);
  }
  if (missing.length) throw new TypeError(`platform: missing or wrong ${missing.join(', ')}`);
  return platform;
}

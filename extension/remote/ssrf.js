// SSRF protection for every URL the remote-MCP core fetches or opens: the
// server's URL, metadata URLs, the endpoints that metadata names, and the
// legacy SSE transport's message endpoint (spec 002, "SSRF Protection";
// mcp-protocol.md on CVE-2025-6514).
//
// checkUrl is synchronous and looks at the URL alone: https only (http only
// for a loopback host in developer mode), no credentials in the URL, no
// metadata host names, no single-label or internal-only names, and no IP
// literal in a private, loopback, link-local, multicast or reserved range
// (IPv4-mapped, IPv4-compatible, NAT64 and 6to4 IPv6 addresses are judged by
// the IPv4 address inside). checkResolved adds what DNS says, where the
// platform can ask (Node: dns.lookup); Chrome gives extensions no DNS API, so
// there a name that resolves to a private address is not caught — it says so.

import { RemoteError } from './errors.js';

/** Host names of cloud metadata services, refused whatever they resolve to. */
export const METADATA_HOSTS = Object.freeze([
  'metadata',
  'metadata.google.internal',
  'metadata.goog',
  'instance-data',
  'instance-data.ec2.internal',
  'metadata.azure.internal',
  'metadata.tencentyun.com',
  'metadata.oraclecloud.com',
]);

/** Name suffixes that only ever mean a private network. */
const INTERNAL_SUFFIXES = ['.internal', '.local', '.localdomain', '.home.arpa', '.intranet', '.corp', '.lan'];

const PURPOSES = {
  server: 'the MCP server URL',
  metadata: 'the metadata URL',
  authorization: 'the authorization endpoint',
  token: 'the token endpoint',
  registration: 'the registration endpoint',
  revocation: 'the revocation endpoint',
  endpoint: "the SSE transport's message endpoint",
  'authorization-server': 'the authorization server',
};

/**
 * Checks a URL before it is fetched or opened. Returns the parsed URL, or
 * throws RemoteError('ssrf', sentence).
 * @param {string|URL} url
 * @param {{developerMode?: boolean, purpose?: string}} [opts] purpose names
 *   the URL in the sentence: server, metadata, authorization, token,
 *   registration, revocation, endpoint, authorization-server
 * @returns {URL}
 */
export function checkUrl(url, { developerMode = false, purpose = 'metadata' } = {}) {
  const what = PURPOSES[purpose] || purpose;
  let u;
  try {
    u = url instanceof URL ? new URL(url.href) : new URL(String(url));
  } catch {
    throw refuse(what, String(url).slice(0, 100), 'it is not a URL');
  }
  const shown = u.protocol === 'http:' || u.protocol === 'https:' ? `${u.origin}${u.pathname}` : `${u.protocol}…`;
  if (u.protocol !== 'https:' && u.protocol !== 'http:') {
    throw refuse(what, shown, `only https URLs are allowed, not ${u.protocol.replace(/:$/, '')}:`);
  }
  if (u.username || u.password) throw refuse(what, shown, 'it carries a user name or password');
  const host = hostOf(u);
  const kind = classifyHost(host);
  const loopback = kind === 'loopback';
  if (u.protocol === 'http:' && !(developerMode && loopback)) {
    throw refuse(
      what,
      shown,
      loopback ? 'plain http is only allowed for loopback addresses in developer mode; use https' : 'it is not https',
    );
  }
  if (kind && !(developerMode && loopback)) {
    throw refuse(
      what,
      shown,
      loopback
        ? 'it points at this computer (loopback), which is only allowed in developer mode'
        : `it points at ${kind}`,
    );
  }
  return u;
}

/**
 * Checks the addresses a URL's host name resolves to, when the platform can
 * resolve names (platform.resolve). Throws RemoteError('ssrf') when one of
 * them is private, loopback (outside developer mode) or otherwise internal.
 * @param {string|URL} url a URL that passed checkUrl
 * @param {{resolve?: (host: string) => Promise<string[]>, developerMode?: boolean}} platform
 * @returns {Promise<{checked: boolean, addresses: string[], note?: string}>}
 */
export async function checkResolved(url, platform) {
  const u = url instanceof URL ? url : new URL(String(url));
  const host = hostOf(u);
  if (parseIPv4(host) || parseIPv6(host)) return { checked: true, addresses: [host] };
  if (typeof platform?.resolve !== 'function') {
    return {
      checked: false,
      addresses: [],
      note: `The addresses behind ${host} were not checked: this platform cannot resolve host names (Chrome gives extensions no DNS lookup).`,
    };
  }
  let addresses;
  try {
    addresses = await platform.resolve(host);
  } catch (err) {
    throw new RemoteError('network', `Could not look up ${host}: ${err?.message || err}.`);
  }
  for (const addr of addresses) {
    const kind = classifyAddress(addr);
    if (kind && !(kind === 'loopback' && platform.developerMode)) {
      throw new RemoteError('ssrf', `Refused ${host}: it resolves to ${addr}, which is ${kind}.`);
    }
  }
  return { checked: true, addresses };
}

/**
 * What a host (name or IP literal, without brackets) points at when it must
 * not be fetched: a phrase like "a private network address", or '' when it is
 * a public name or address. Loopback is 'loopback'.
 * @param {string} host lower case, as URL.hostname gives it
 */
export function classifyHost(host) {
  const h = host.replace(/\.$/, '').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost')) return 'loopback';
  if (parseIPv4(h) || parseIPv6(h)) return classifyAddress(h);
  if (METADATA_HOSTS.includes(h)) return 'a cloud metadata service';
  if (!h.includes('.')) return 'a local network name (no dot in the host name)';
  if (INTERNAL_SUFFIXES.some((s) => h.endsWith(s))) return 'a private network name';
  return '';
}

/**
 * What an IP address is when it must not be fetched ('loopback', or a phrase
 * such as "a private network address"), or '' for a public address.
 * @param {string} addr IPv4 dotted quad or IPv6 (brackets allowed)
 */
export function classifyAddress(addr) {
  const a = String(addr).replace(/^\[|\]$/g, '');
  const v4 = parseIPv4(a);
  if (v4) return classifyIPv4(v4);
  const v6 = parseIPv6(a);
  if (!v6) return 'not an IP address';
  return classifyIPv6(v6);
}

// IPv4 ranges that are never a remote MCP server: [first octets, prefix length, phrase].
const V4_RANGES = [
  [[0, 0, 0, 0], 8, 'the unspecified "this network" range (0.0.0.0/8)'],
  [[10, 0, 0, 0], 8, 'a private network address (10.0.0.0/8)'],
  [[100, 64, 0, 0], 10, 'a carrier-grade NAT address (100.64.0.0/10)'],
  [[127, 0, 0, 0], 8, 'loopback'],
  [[169, 254, 169, 254], 32, 'the cloud metadata address 169.254.169.254'],
  [[169, 254, 0, 0], 16, 'a link-local address (169.254.0.0/16)'],
  [[172, 16, 0, 0], 12, 'a private network address (172.16.0.0/12)'],
  [[192, 0, 0, 0], 24, 'an IETF protocol address (192.0.0.0/24)'],
  [[192, 168, 0, 0], 16, 'a private network address (192.168.0.0/16)'],
  [[198, 18, 0, 0], 15, 'a benchmarking address (198.18.0.0/15)'],
  [[224, 0, 0, 0], 4, 'a multicast address (224.0.0.0/4)'],
  [[240, 0, 0, 0], 4, 'a reserved address (240.0.0.0/4)'],
];

function classifyIPv4(b) {
  const n = ((b[0] << 24) >>> 0) + (b[1] << 16) + (b[2] << 8) + b[3];
  for (const [base, len, phrase] of V4_RANGES) {
    const bn = ((base[0] << 24) >>> 0) + (base[1] << 16) + (base[2] << 8) + base[3];
    const mask = len === 0 ? 0 : (~0 << (32 - len)) >>> 0;
    if ((n & mask) >>> 0 === (bn & mask) >>> 0) return phrase;
  }
  return '';
}

function classifyIPv6(b) {
  const zeroUpTo = (n) => b.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(16)) return 'the unspecified address (::)';
  if (zeroUpTo(15) && b[15] === 1) return 'loopback';
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible): the IPv4 inside decides.
  if (zeroUpTo(10) && b[10] === 0xff && b[11] === 0xff) return classifyIPv4(b.slice(12)) || '';
  if (zeroUpTo(12)) return classifyIPv4(b.slice(12)) || 'a deprecated IPv4-compatible address';
  // 64:ff9b::/96 (NAT64) and 2002::/16 (6to4) embed an IPv4 address.
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && b.slice(4, 12).every((x) => x === 0)) {
    return classifyIPv4(b.slice(12));
  }
  if (b[0] === 0x20 && b[1] === 0x02) return classifyIPv4(b.slice(2, 6));
  if (b[0] === 0xfd && b[1] === 0x00 && b[2] === 0x0e && b[3] === 0xc2) return 'the cloud metadata range fd00:ec2::/32';
  if ((b[0] & 0xfe) === 0xfc) return 'a unique local address (fc00::/7)';
  if (b[0] === 0xfe && (b[1] & 0xc0) === 0x80) return 'a link-local address (fe80::/10)';
  if (b[0] === 0xfe && (b[1] & 0xc0) === 0xc0) return 'a site-local address (fec0::/10)';
  if (b[0] === 0xff) return 'a multicast address (ff00::/8)';
  return '';
}

/**
 * Parses a strict dotted-quad IPv4 address.
 * @param {string} s
 * @returns {number[]|null} four octets
 */
export function parseIPv4(s) {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (!m) return null;
  const b = m.slice(1).map(Number);
  return b.every((x) => x <= 255) ? b : null;
}

/**
 * Parses an IPv6 address (with or without brackets, with an optional
 * trailing dotted quad) into 16 bytes.
 * @param {string} s
 * @returns {number[]|null}
 */
export function parseIPv6(s) {
  let str = String(s)
    .replace(/^\[|\]$/g, '')
    .toLowerCase();
  if (!str.includes(':') || str.includes('%')) return null;
  let tail = null; // the two words of a trailing dotted quad
  const lastColon = str.lastIndexOf(':');
  const last = str.slice(lastColon + 1);
  if (last.includes('.')) {
    const v4 = parseIPv4(last);
    if (!v4) return null;
    tail = [(v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]];
    str = str.slice(0, lastColon + 1);
    if (!str.endsWith('::')) str = str.slice(0, -1);
  }
  const want = tail ? 6 : 8;
  const halves = str.split('::');
  if (halves.length > 2) return null;
  const split = (p) => (p === '' ? [] : p.split(':'));
  const head = split(halves[0]);
  const rest = halves.length === 2 ? split(halves[1]) : [];
  if (![...head, ...rest].every((g) => /^[0-9a-f]{1,4}$/.test(g))) return null;
  const hex = (g) => parseInt(g, 16);
  let words;
  if (halves.length === 2) {
    const zeros = want - head.length - rest.length;
    if (zeros < 1) return null;
    words = [...head.map(hex), ...new Array(zeros).fill(0), ...rest.map(hex)];
  } else {
    if (head.length !== want) return null;
    words = head.map(hex);
  }
  if (tail) words.push(...tail);
  const bytes = [];
  for (const w of words) bytes.push(w >> 8, w & 0xff);
  return bytes;
}

/** The host of a URL without IPv6 brackets or a trailing dot, lower case. */
export function hostOf(u) {
  return u.hostname
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
    .toLowerCase();
}

function refuse(what, shown, reason) {
  return new RemoteError('ssrf', `Refused ${what} ${shown}: ${reason}.`);
}

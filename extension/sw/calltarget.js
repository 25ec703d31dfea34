// What a tool call acted on, in a few words for the popup's list of recent
// calls: the page of a navigate, the action of computer, the query of find,
// else the tab. Never what was typed or run: the popup is no place for a
// password or a script.

/** Longest target kept. */
export const TARGET_MAX = 60;

/**
 * @param {string} tool
 * @param {Record<string, any>|undefined} args the call's arguments
 * @returns {string} a short description, or '' when there is nothing to say
 */
export function callTarget(tool, args) {
  const a = args && typeof args === 'object' ? args : {};
  const tab = Number.isInteger(a.tabId) ? `tab ${a.tabId}` : '';
  let s = '';
  if (typeof a.url === 'string' && a.url) s = shortURL(a.url);
  else if (tool === 'computer' && typeof a.action === 'string') s = action(a);
  else if (typeof a.query === 'string' && a.query) s = `“${a.query}”`;
  else if (typeof a.ref === 'string' && a.ref) s = a.ref;
  else if (typeof a.server === 'string' && a.server) s = a.server;
  s = s || tab;
  return s.length > TARGET_MAX ? `${s.slice(0, TARGET_MAX - 1)}…` : s;
}

function action(a) {
  const name = a.action.replace(/_/g, ' ');
  if (a.action === 'type' && typeof a.text === 'string') return `type (${a.text.length} chars)`;
  if (a.action === 'key' && typeof a.text === 'string') return `key ${a.text.slice(0, 20)}`;
  if (typeof a.ref === 'string' && a.ref) return `${name} ${a.ref}`;
  if (Array.isArray(a.coordinate) && a.coordinate.length === 2) {
    return `${name} (${a.coordinate.map((n) => Math.round(n)).join(', ')})`;
  }
  return name;
}

/** A URL without its scheme, query and fragment: host and path. */
export function shortURL(url) {
  try {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return url.split(/[?#]/)[0];
    return `${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return url.split(/[?#]/)[0]; // "back", "forward", "reload"
  }
}

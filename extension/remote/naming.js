// Names of remote servers' tools as MCP clients see them (spec 002, "Tool
// Naming"): mcp_{server}_{tool}, each part lower case with every run of
// other characters than a-z and 0-9 turned into one '_', and no '_' at
// either end. The result always matches ^[a-zA-Z0-9_-]{1,64}$: a name that
// would be longer keeps its start and ends in '_' plus 8 hex digits of a
// hash of the original server id and tool name, so it stays deterministic.
// Two tools whose names come out the same are told apart by assignToolNames.

/** What every generated name matches. */
export const TOOL_NAME_RE = /^[a-zA-Z0-9_-]{1,64}$/;

const MAX = 64;
const HASHED = MAX - 9; // room for '_' and 8 hex digits

/**
 * One part of a name: lower case, runs of anything but [a-z0-9] → '_', no
 * '_' at the ends.
 * @param {string} s
 */
export function sanitize(s) {
  return String(s)
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
}

/**
 * The name a remote tool gets: 'mcp_{server}_{tool}', normalized.
 * @param {string|{id: string}} server a server id or a server config
 * @param {string|{name: string}} tool a tool name or an MCP tool object
 * @returns {string}
 */
export function toolName(server, tool) {
  const sid = typeof server === 'object' && server ? server.id : server;
  const tname = typeof tool === 'object' && tool ? tool.name : tool;
  const s = sanitize(sid) || 'server';
  const t = sanitize(tname);
  const name = t ? `mcp_${s}_${t}` : `mcp_${s}_${hash8(sid, tname)}`;
  return name.length <= MAX ? name : withHash(name, sid, tname);
}

/**
 * Names for many servers' tools at once, with collisions resolved the same
 * way whatever the input order: among tools whose names collide, the one
 * whose (server id, tool name) sorts first keeps the plain name, the others
 * end in '_' plus a hash of their original names.
 * @param {{server: string, tool: string}[]} entries server ids and tool names
 * @returns {Map<string, {server: string, tool: string}>} generated name → original
 */
export function assignToolNames(entries) {
  const sorted = [...entries].sort((a, b) => cmp(a.server, b.server) || cmp(a.tool, b.tool));
  const out = new Map();
  for (const e of sorted) {
    let name = toolName(e.server, e.tool);
    const taken = out.get(name);
    if (taken && taken.server === e.server && taken.tool === e.tool) continue; // the same tool twice
    if (taken) name = withHash(name, e.server, e.tool);
    // A hashed name can only collide again if the hashes collide too: add a counter.
    for (let i = 2; out.has(name); i++) name = withHash(toolName(e.server, e.tool), e.server, `${e.tool}\u0000${i}`);
    out.set(name, { server: e.server, tool: e.tool });
  }
  return out;
}

/**
 * The tools of one server a person has not disabled (spec 000, "Tool
 * Filtering": disabled names are the server's own tool names).
 * @param {{name: string}[]} tools
 * @param {string[]} [disabled]
 */
export function filterTools(tools, disabled = []) {
  const off = new Set(disabled);
  return tools.filter((t) => !off.has(t.name));
}

function withHash(name, server, tool) {
  const base = name.slice(0, Math.min(name.length, HASHED)).replace(/_+$/, '');
  return `${base}_${hash8(server, tool)}`;
}

function cmp(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** 8 hex digits of FNV-1a (32 bit) over the UTF-16 code units of server NUL tool. */
function hash8(server, tool) {
  let h = 0x811c9dc5;
  const s = `${server}\u0000${tool}`;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

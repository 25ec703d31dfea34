// Words of the options page's remote MCP servers that are worth a test of
// their own (options.js draws the list).

/**
 * What turning a remote server on does, for one that is off: the options
 * page says it beside the "off", so that nobody has to try it to find out.
 * @param {{title: string, url: string, name?: string}} s a server of remote.status
 * @returns {string}
 */
export function offHint(s) {
  const name = s.name || 'its name';
  return (
    `Off: nothing is sent to ${s.url}. Turning it on connects this browser to it; if it needs a sign-in, ` +
    `a "Sign in" button appears here and ${s.title}'s own page asks you. Its tools then reach your MCP clients ` +
    `through Browser Bridge, at /servers/${name}/mcp and as mcp_${name}_<tool> in /servers/all/mcp; ` +
    'you can turn each tool off here, and the token stays in this browser.'
  );
}

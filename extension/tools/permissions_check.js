// permissions_check: what this extension may do on the tab's site, and the
// site's web permission states (camera, microphone, geolocation, …).

import { ToolError } from '../sw/tools.js';
import { runAgent } from '../content/agent.js';
import * as props from './props.js';

export const WEB_PERMISSIONS = [
  'camera',
  'microphone',
  'geolocation',
  'notifications',
  'clipboard-read',
  'clipboard-write',
  'persistent-storage',
  'midi',
];
const API_PERMISSIONS = ['debugger', 'scripting', 'tabs', 'tabGroups', 'nativeMessaging', 'storage'];

async function contains(p) {
  try {
    return await chrome.permissions.contains(p);
  } catch {
    return false;
  }
}

export default {
  name: 'permissions_check',
  description: "Whether the tab's site is scriptable, and the states of its web permissions.",
  inputSchema: {
    type: 'object',
    properties: {
      permissions: {
        type: 'array',
        items: { type: 'string', maxLength: 64 },
        maxItems: 30,
      },
      tabId: props.tabId,
    },
    additionalProperties: false,
  },
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const tab = await ctx.resolveTab(args.tabId);
    const url = tab.url || tab.pendingUrl || '';
    let origin = '';
    try {
      origin = new URL(url).origin;
    } catch {
      /* about:blank etc. */
    }
    if (!origin || origin === 'null') origin = '';
    const hostAccess = origin && /^https?:|^file:/.test(origin) ? await contains({ origins: [`${origin}/*`] }) : false;
    const api = {};
    for (const p of API_PERMISSIONS) api[p] = await contains({ permissions: [p] });
    let page = null,
      scriptable = true,
      why = '';
    try {
      page = await runAgent(tab.id, 'permissions', { names: args.permissions || WEB_PERMISSIONS });
    } catch (e) {
      scriptable = false;
      why = e.message;
    }
    if (!tab) throw new ToolError('no tab');
    const res = {
      tabId: tab.id,
      url,
      origin: page ? page.origin : origin,
      hostAccess,
      scriptable,
      secureContext: page ? page.secureContext : undefined,
      api,
      web: page ? page.states : {},
    };
    if (why) res.reason = why;
    const lines = [
      `Tab ${tab.id}: ${url}`,
      `Host access for ${res.origin || '(no origin)'}: ${hostAccess ? 'granted' : 'not granted'}; page scriptable: ${scriptable ? 'yes' : `no (${why})`}.`,
      `Extension API permissions: ${Object.entries(api)
        .map(([k, v]) => `${k} ${v ? 'yes' : 'no'}`)
        .join(', ')}.`,
      page
        ? `Site permissions (navigator.permissions): ${Object.entries(page.states)
            .map(([k, v]) => `${k}: ${v}`)
            .join(', ')}${page.secureContext ? '' : ' (not a secure context: powerful features are unavailable)'}.`
        : 'Site permissions: unknown (page not scriptable).',
    ];
    return { content: [{ type: 'text', text: lines.join('\n') }] };
  },
};

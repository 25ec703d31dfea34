// dev_utils: developer utilities for testing the chain itself. The original
// product's dev_utils was internal; here it echoes (a no-op round trip through
// bridge, host and extension) and reports the extension's internal state. The
// tests' build of the extension adds actions (dev_utils_extra.js).

import { ToolError } from '../sw/tools.js';
import { captureStats } from '../sw/cdp.js';
import { listScreenshots } from '../sw/screenshot.js';
import extra from './dev_utils_extra.js';

const extraProperties = Object.assign({}, ...Object.values(extra).map((a) => a.properties || {}));

export default {
  name: 'dev_utils',
  description:
    'Tests Browser Bridge: echo returns message; ' +
    Object.entries(extra)
      .map(([name, a]) => `${name}: ${a.description}; `)
      .join('') +
    'state reports internal state.',
  inputSchema: {
    type: 'object',
    properties: {
      action: {
        type: 'string',
        enum: ['echo', ...Object.keys(extra), 'state'],
      },
      message: {},
      ...extraProperties,
    },
    required: ['action'],
    additionalProperties: false,
  },
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  async run(args, ctx) {
    switch (args.action) {
      case 'echo':
        return { content: [{ type: 'text', text: JSON.stringify(args.message ?? null) }] };
      case 'state': {
        const st = {
          extension: { id: chrome.runtime.id, version: chrome.runtime.getManifest().version },
          session: ctx.session,
          captures: captureStats(),
          screenshots: listScreenshots(),
          // Every tab's window, tab group and load status: what a model needs
          // of them is in tabs_context's lines; a test checks these themselves.
          tabs: (await chrome.tabs.query({})).map((t) => ({
            tabId: t.id,
            windowId: t.windowId,
            groupId: t.groupId ?? -1,
            status: t.status || 'unknown',
          })),
        };
        return { content: [{ type: 'text', text: JSON.stringify(st, null, 2) }] };
      }
      default: {
        const action = Object.hasOwn(extra, args.action) ? extra[args.action] : null;
        if (!action) throw new ToolError(`unknown action ${args.action}`);
        try {
          return await action.run(args, ctx);
        } catch (e) {
          throw new ToolError(`${args.action} failed: ${e.message}`);
        }
      }
    }
  },
};

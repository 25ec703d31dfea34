// read_console_messages and read_network_requests: what sw/cdp.js captured
// for a tab since a tool first used it (bounded to the last 1000 of each).

import { ToolError } from '../sw/tools.js';
import * as cdp from '../sw/cdp.js';

import { tabId as tabIdProp } from './props.js';

function since(ts) {
  return new Date(ts).toISOString();
}

function clip(s, n = 500) {
  s = String(s ?? '');
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

export const consoleTool = {
  name: 'read_console_messages',
  description: "The tab's newest limit console messages and errors matching pattern.",
  inputSchema: {
    type: 'object',
    properties: {
      pattern: {
        type: 'string',
        maxLength: 1000,
        description: 'Regex on text or URL',
      },
      level: {
        type: 'string',
        enum: ['all', 'debug', 'log', 'info', 'warning', 'error', 'warning+', 'info+'],
        default: 'all',
      },
      only_errors: { type: 'boolean' },
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: 1000,
        default: 100,
      },
      clear: { type: 'boolean', description: 'Empty the buffer after' },
      tabId: tabIdProp,
    },
    additionalProperties: false,
  },
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const tab = await ctx.resolveTab(args.tabId);
    try {
      await cdp.trackTab(tab.id);
    } catch (e) {
      throw new ToolError(`cannot watch tab ${tab.id}: ${e.message}`);
    }
    const level = args.only_errors ? 'error' : args.level;
    const r = await cdp.readConsole(tab.id, {
      pattern: args.pattern,
      level,
      limit: args.limit || 100,
      clear: !!args.clear,
    });
    const lines = r.entries.map((e) => {
      const where = e.url ? ` (${clip(e.url, 120)}${e.line ? `:${e.line}` : ''})` : '';
      return `[${new Date(e.ts).toISOString().slice(11, 23)}] ${e.level.toUpperCase()}${e.source !== 'console' ? ` ${e.source}` : ''}: ${clip(e.text, 2000)}${where}`;
    });
    const head = `${r.entries.length} of ${r.total} console messages of tab ${tab.id} captured since ${since(r.since)}${r.dropped ? ` (${r.dropped} older ones dropped)` : ''}${args.clear ? '; buffer cleared' : ''}.`;
    return {
      content: [
        { type: 'text', text: lines.length ? `${head}\n${lines.join('\n')}` : `${head}\nNo matching messages.` },
      ],
    };
  },
};

export const networkTool = {
  name: 'read_network_requests',
  description: 'HTTP requests of the tab: the newest limit matching.',
  inputSchema: {
    type: 'object',
    properties: {
      url_pattern: {
        type: 'string',
        maxLength: 1000,
      },
      method: { type: 'string', maxLength: 16 },
      status: {
        type: ['integer', 'string'],
        description: '404, 4xx, 400-599, failed or pending',
      },
      type: {
        type: 'string',
        enum: [
          'Document',
          'Stylesheet',
          'Image',
          'Media',
          'Font',
          'Script',
          'XHR',
          'Fetch',
          'WebSocket',
          'Manifest',
          'Ping',
          'Preflight',
          'Other',
        ],
      },
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: 1000,
        default: 100,
      },
      clear: { type: 'boolean', description: 'Empty the buffer after' },
      tabId: tabIdProp,
    },
    additionalProperties: false,
  },
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const tab = await ctx.resolveTab(args.tabId);
    try {
      await cdp.trackTab(tab.id);
    } catch (e) {
      throw new ToolError(`cannot watch tab ${tab.id}: ${e.message}`);
    }
    const r = await cdp.readNetwork(tab.id, {
      urlPattern: args.url_pattern,
      method: args.method,
      status: args.status,
      type: args.type,
      limit: args.limit || 100,
      clear: !!args.clear,
    });
    const lines = r.entries.map((e) => {
      const st = e.failed
        ? `FAILED ${e.errorText || ''}`.trim()
        : e.status === undefined
          ? 'pending'
          : `${e.status}${e.statusText ? ` ${e.statusText}` : ''}`;
      const extra = [
        e.type,
        e.mimeType,
        e.encodedBytes !== undefined ? `${e.encodedBytes} B` : '',
        e.durationMs !== undefined ? `${e.durationMs} ms` : '',
        e.fromCache ? 'cache' : '',
        e.redirectedTo ? `→ ${clip(e.redirectedTo, 200)}` : '',
      ]
        .filter(Boolean)
        .join(', ');
      return `${e.method} ${clip(e.url, 300)} — ${st} (${extra})`;
    });
    const head = `${r.entries.length} of ${r.total} requests of tab ${tab.id} captured since ${since(r.since)}${r.dropped ? ` (${r.dropped} older ones dropped)` : ''}${args.clear ? '; buffer cleared' : ''}.`;
    return {
      content: [
        { type: 'text', text: lines.length ? `${head}\n${lines.join('\n')}` : `${head}\nNo matching requests.` },
      ],
    };
  },
};

export default [consoleTool, networkTool];

// read_console_messages and read_network_requests: what sw/cdp.js captured
// for a tab since a tool first used it (bounded to the last 1000 of each).

import { ToolError } from '../sw/tools.js';
import * as cdp from '../sw/cdp.js';

const tabIdProp = { type: 'integer', minimum: 0, description: "The tab. Omit it to use this session's current tab." };

function since(ts) {
  return new Date(ts).toISOString();
}

function clip(s, n = 500) {
  s = String(s ?? '');
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

export const consoleTool = {
  name: 'read_console_messages',
  title: 'Read console messages',
  description:
    'Returns console messages of a tab (console.log/info/warn/error/debug, uncaught exceptions, and browser log entries such as ' +
    'failed resource loads or CSP violations), oldest first. Capture starts the first time any tool uses the tab, so call this after ' +
    'reproducing what you want to see (e.g. reload with navigate). Filter by regex pattern and level; clear empties the buffer after reading.',
  inputSchema: {
    type: 'object',
    properties: {
      pattern: {
        type: 'string',
        maxLength: 1000,
        description:
          'Only messages whose text or source URL matches this regular expression (case-insensitive; "/re/flags" form also accepted).',
      },
      level: {
        type: 'string',
        enum: ['all', 'debug', 'log', 'info', 'warning', 'error', 'warning+', 'info+'],
        description: 'Only this level; "warning+" means warnings and errors. Default all.',
      },
      only_errors: { type: 'boolean', description: 'Shorthand for level "error".' },
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: 1000,
        description: 'At most this many of the newest matching messages (default 100).',
      },
      clear: { type: 'boolean', description: "Empty the tab's console buffer after reading (default false)." },
      tabId: tabIdProp,
    },
    additionalProperties: false,
  },
  annotations: {
    title: 'Read console messages',
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
      structuredContent: { tabId: tab.id, total: r.total, dropped: r.dropped, messages: r.entries },
    };
  },
};

export const networkTool = {
  name: 'read_network_requests',
  title: 'Read network requests',
  description:
    'Returns the HTTP requests a tab made (page loads, scripts, images, fetch/XHR…) with method, URL, status, type, MIME type, ' +
    'size and duration, oldest first. Capture starts the first time any tool uses the tab. Filter by URL regex, method, status ' +
    '(404, "4xx", "400-599", ">=400", "failed", "pending") and resource type; clear empties the buffer after reading.',
  inputSchema: {
    type: 'object',
    properties: {
      url_pattern: {
        type: 'string',
        maxLength: 1000,
        description: 'Only requests whose URL matches this regular expression (case-insensitive).',
      },
      method: { type: 'string', maxLength: 16, description: 'Only this HTTP method, e.g. "POST".' },
      status: {
        type: ['integer', 'string'],
        description:
          'Only these statuses: 404, "4xx", "400-599", ">=400", "failed" (network errors and >= 400) or "pending".',
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
        description: 'Only this resource type.',
      },
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: 1000,
        description: 'At most this many of the newest matching requests (default 100).',
      },
      clear: { type: 'boolean', description: "Empty the tab's request buffer after reading (default false)." },
      tabId: tabIdProp,
    },
    additionalProperties: false,
  },
  annotations: {
    title: 'Read network requests',
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
      structuredContent: { tabId: tab.id, total: r.total, dropped: r.dropped, requests: r.entries },
    };
  },
};

export default [consoleTool, networkTool];

// find: elements by a CSS selector, by their text or by a short description
// ("search box", "Submit button", 'link "Pricing"') -> refs with role and name.

import { ToolError } from '../sw/tools.js';
import { usePage } from '../sw/pageload.js';
import { runAgent } from '../content/agent.js';
import * as props from './props.js';

export const inputSchema = {
  type: 'object',
  properties: {
    query: {
      type: 'string',
      minLength: 1,
      maxLength: 500,
      description: "CSS selector, text, or role + words ('search box')",
    },
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 10 },
    tabId: props.tabId,
  },
  required: ['query'],
  additionalProperties: false,
};

async function run(args, ctx) {
  const tab = await usePage(ctx, args.tabId);
  let res;
  try {
    res = await runAgent(tab.id, 'find', { query: args.query, limit: args.limit || 10 });
  } catch (e) {
    throw new ToolError(`cannot search tab ${tab.id}: ${e.message}`);
  }
  if (!res.matches.length) {
    return {
      content: [
        {
          type: 'text',
          text: `No visible element matches ${JSON.stringify(args.query)} in tab ${tab.id}. Try other words, a CSS selector, or read_page with filter "interactive".`,
        },
      ],
    };
  }
  const lines = res.matches.map((m) => {
    let s = `- ${m.role}${m.name ? ` "${m.name}"` : ''}`;
    if (m.value !== undefined && m.value !== '') s += ` value="${m.value}"`;
    if (m.props) s += ` ${m.props.map((p) => `[${p}]`).join(' ')}`;
    s += ` <${m.tag}> [${m.ref}] at (${m.rect.x}, ${m.rect.y}) ${m.rect.width}x${m.rect.height}${m.inViewport ? '' : ' (off screen)'}`;
    return s;
  });
  const how =
    res.mode === 'selector' ? 'by CSS selector' : res.mode === 'ref' ? 'by ref' : 'by text and role (heuristic)';
  const more = res.total > res.matches.length ? ` (showing ${res.matches.length} of ${res.total})` : '';
  return {
    content: [
      {
        type: 'text',
        text: `${res.matches.length} match${res.matches.length === 1 ? '' : 'es'} ${how}${more}:\n${lines.join('\n')}`,
      },
    ],
  };
}

export default {
  name: 'find',
  description: "Up to limit visible elements matching query, with refs, best first; use the page's words.",
  inputSchema,
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  run,
};

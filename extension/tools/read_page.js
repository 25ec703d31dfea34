// read_page: an accessibility-tree-like snapshot of the page with stable
// element refs ("ref_12") that computer, form_input and upload_image accept.

import { ToolError } from '../sw/tools.js';
import { usePage } from '../sw/pageload.js';
import { runAgent } from '../content/agent.js';

export const inputSchema = {
  type: 'object',
  properties: {
    filter: {
      type: 'string', enum: ['all', 'interactive'],
      description: '"interactive": only elements you can act on (links, buttons, fields, checkboxes, …) as a flat list; "all" (default): the page structure with headings, text and landmarks.',
    },
    ref: { type: 'string', pattern: '^ref_[0-9]+$', description: 'Read only the subtree of this element (a ref from an earlier read_page or find).' },
    depth: { type: 'integer', minimum: 1, maximum: 200, description: 'How deep to descend into the DOM (default 40).' },
    max_chars: { type: 'integer', minimum: 500, maximum: 500000, description: 'Cut the snapshot at this many characters (default 40000); read a subtree by ref for more.' },
    tabId: { type: 'integer', minimum: 0, description: "The tab to read. Omit it to use this session's current tab." },
  },
  additionalProperties: false,
};

async function run(args, ctx) {
  const tab = await usePage(ctx, args.tabId);
  let snap;
  try {
    snap = await runAgent(tab.id, 'snapshot', { filter: args.filter || 'all', ref: args.ref, depth: args.depth, maxChars: args.max_chars });
  } catch (e) {
    throw new ToolError(`cannot read tab ${tab.id}: ${e.message}`);
  }
  const v = snap.viewport;
  const head = `Page: ${snap.title || '(no title)'} — ${snap.url}\nTab ${tab.id}; viewport ${v.width}x${v.height}, scrolled to (${v.scrollX}, ${v.scrollY}) of ${v.pageWidth}x${v.pageHeight}. ${snap.nodes} elements${args.ref ? ` under ${args.ref}` : ''}${snap.filter === 'interactive' ? ' (interactive only)' : ''}.`;
  const tail = snap.truncated ? '\n… truncated: pass ref to read a subtree, filter "interactive", or a larger max_chars.' : '';
  return {
    content: [{ type: 'text', text: `${head}\n\n${snap.text || '(nothing visible)'}${tail}` }],
    structuredContent: { url: snap.url, title: snap.title, tabId: tab.id, nodes: snap.nodes, truncated: snap.truncated, viewport: v },
  };
}

export default {
  name: 'read_page',
  title: 'Read the page structure',
  description: 'Returns an accessibility-tree-like outline of the page: one line per element with its role, accessible name, value and state '
    + '(e.g. `- textbox "Email" value="a@b.c" [required] [ref_7]`). Each element gets a ref that stays the same for that element until the '
    + 'page reloads; pass it to computer (click/type/scroll_to), form_input or upload_image. Hidden elements are left out. '
    + 'Use filter "interactive" for a short list of what can be clicked or filled; use get_page_text for the readable text of an article.',
  inputSchema,
  annotations: { title: 'Read the page structure', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  run,
};

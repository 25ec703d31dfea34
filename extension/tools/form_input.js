// form_input: sets the value of a form field by ref (inputs, textareas,
// selects, checkboxes, radios, contenteditable) and fires input/change.

import { ToolError } from '../sw/tools.js';
import { usePage } from '../sw/pageload.js';
import { runAgent } from '../content/agent.js';

export const inputSchema = {
  type: 'object',
  properties: {
    ref: { type: 'string', pattern: '^ref_[0-9]+$', description: 'The field, a ref from read_page or find.' },
    value: {
      type: ['string', 'number', 'boolean', 'array'],
      items: { type: 'string' },
      description: 'The new value. Text fields: the text (replaces what is there). Checkbox/radio/switch: true or false. '
        + 'Select: an option\'s value or visible text; for a multiple select, an array of them. Date/time/color/range inputs: their string form, e.g. "2025-01-31", "13:45", "#ff0000", "40".',
    },
    tabId: { type: 'integer', minimum: 0, description: "The tab. Omit it to use this session's current tab." },
  },
  required: ['ref', 'value'],
  additionalProperties: false,
};

async function run(args, ctx) {
  const tab = await usePage(ctx, args.tabId);
  let r;
  try {
    r = await runAgent(tab.id, 'formInput', { ref: args.ref, value: args.value });
  } catch (e) {
    throw new ToolError(e.message);
  }
  let text;
  if (r.checked !== undefined) text = `${r.role} "${r.name}" [${r.ref}] is now ${r.checked ? 'checked' : 'unchecked'}.`;
  else text = `${r.role} "${r.name}" [${r.ref}] now holds ${JSON.stringify(r.value)}${r.before !== undefined && r.before !== '' ? ` (was ${JSON.stringify(r.before)})` : ''}.`;
  if (r.note) text += ` Note: ${r.note}.`;
  return { content: [{ type: 'text', text }], structuredContent: r };
}

export default {
  name: 'form_input',
  title: 'Fill a form field',
  description: 'Sets a form field to a value directly, by ref from read_page or find: text inputs and textareas (the text replaces the '
    + 'current value), selects (by option value or text; arrays for multi-selects), checkboxes, radios and switches (true/false), '
    + 'date/time/colour/range inputs, and contenteditable editors. Fires input and change events like a user would, so frameworks '
    + 'such as React see the change. Faster and more reliable than typing; use computer type when the page reacts to each keystroke '
    + '(autocomplete). For file inputs use upload_image.',
  inputSchema,
  annotations: { title: 'Fill a form field', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  run,
};

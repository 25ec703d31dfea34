// form_input: sets form fields (inputs, textareas, selects, checkboxes,
// radios, switches, contenteditable) and fires input/change. One field by
// ref or selector, or several in one call with fields: each gets its own
// result, and one that fails does not stop the others.

import { ToolError } from '../sw/tools.js';
import { usePage } from '../sw/pageload.js';
import { REPORT_ONLY, runOps, settleAfter } from '../sw/settle.js';
import * as gate from '../sw/gate.js';
import { secretsAllowed, secretsRefusal } from '../sw/policy.js';
import * as props from './props.js';

/** The most fields one call takes. */
export const MAX_FIELDS = 100;

// fields' items take the same arguments; their descriptions are said once, at the top.
const bare = ({ description: _said, ...schema }) => schema;
const refProp = props.ref();
const selectorProp = {
  type: 'string',
  minLength: 1,
  maxLength: 500,
};
const valueProp = {
  type: ['string', 'number', 'boolean', 'array'],
  items: { type: 'string' },
  description: 'Text; true/false; option value/text (array if multiple)',
};

export const inputSchema = {
  type: 'object',
  properties: {
    ref: refProp,
    selector: selectorProp,
    value: valueProp,
    fields: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_FIELDS,
      description: 'Several {ref or selector, value}',
      items: {
        type: 'object',
        properties: { ref: bare(refProp), selector: bare(selectorProp), value: bare(valueProp) },
        required: ['value'],
        additionalProperties: false,
      },
    },
    tabId: props.tabId,
  },
  // A field named by ref or selector needs its value; fields stands alone.
  // (Which of the three forms is given is checked in run: clients refuse
  // anyOf/oneOf at the top of a tool's schema.)
  dependentRequired: { ref: ['value'], selector: ['value'] },
  additionalProperties: false,
};

/**
 * The fields a call names, as [{ref|selector, value}], from either form:
 * ref or selector with value, or fields. Throws a ToolError that says what
 * is wrong with the arguments.
 * @param {object} args form_input's arguments
 * @returns {{fields: Array<{ref?: string, selector?: string, value: *}>, single: boolean}}
 */
export function fieldsOf(args) {
  const one = args.ref !== undefined || args.selector !== undefined || args.value !== undefined;
  if (args.fields !== undefined && one) {
    throw new ToolError('Pass either fields, or ref (or selector) with value for one field; not both.');
  }
  const list =
    args.fields !== undefined ? args.fields : [{ ref: args.ref, selector: args.selector, value: args.value }];
  if (!list.length) throw new ToolError('fields is empty: give at least one {ref or selector, value}.');
  const fields = list.map((f, i) => {
    const where = args.fields !== undefined ? `fields[${i}]` : 'the field';
    if ((f.ref === undefined) === (f.selector === undefined)) {
      throw new ToolError(`${where}: name it by ref or by selector (one of them).`);
    }
    if (f.value === undefined) throw new ToolError(`${where}: value is required.`);
    return f.ref !== undefined ? { ref: f.ref, value: f.value } : { selector: f.selector, value: f.value };
  });
  return { fields, single: args.fields === undefined };
}

/** One line about a field's outcome, e.g. `textbox "Email" [ref_7]: "a@b.c" (was "x").` */
export function describeField(r) {
  if (!r.ok) return `${r.field}: not set: ${r.error}`;
  let text = `${r.role} "${r.name}" [${r.ref}]: `;
  if (r.checked !== undefined) text += r.checked ? 'checked' : 'unchecked';
  else {
    text += `${JSON.stringify(r.value)}${r.before !== undefined && r.before !== '' ? ` (was ${JSON.stringify(r.before)})` : ''}`;
  }
  if (r.note) text += `. Note: ${r.note}`;
  return `${text}.`;
}

/**
 * The tool's result for the page's per-field results: an error only when
 * every field failed; the text names each field that failed either way.
 * @param {Array<object>} results the page's results, one per field in order
 * @returns {{isError?: boolean, content: Array<object>}}
 */
export function fillResult(results) {
  const failed = results.filter((r) => !r.ok);
  const filled = results.length - failed.length;
  const head =
    failed.length === 0
      ? `Set ${filled} field${filled === 1 ? '' : 's'}:`
      : filled === 0
        ? `None of the ${results.length} fields was set:`
        : `Set ${filled} of ${results.length} fields; ${failed.length} failed (${failed.map((r) => r.field).join(', ')}):`;
  const lines = results.map((r) => `- ${describeField(r)}`);
  return {
    ...(filled === 0 ? { isError: true } : {}),
    content: [{ type: 'text', text: `${head}\n${lines.join('\n')}` }],
  };
}

async function run(args, ctx) {
  const { fields, single } = fieldsOf(args);
  const tab = await usePage(ctx, args.tabId);
  let results;
  let after;
  try {
    // Password fields take a value only on sites the person opted in (the page agent refuses otherwise).
    const policy = await gate.policy();
    const allowSecrets = secretsAllowed(policy, tab.url || '');
    const secretsWhy = allowSecrets ? '' : secretsRefusal(policy, tab.url || '');
    // One call into the page: watch it, fill, say what changed (settle.js, without waiting).
    after = await settleAfter(
      tab.id,
      () =>
        runOps(tab.id, [
          ['watch', {}],
          ['fill', { fields, allowSecrets, secretsWhy }],
          ['settle', { ...REPORT_ONLY, last: true }],
        ]),
      { ...REPORT_ONLY, watched: true, answer: (values) => values[2] },
    );
    results = after.value[1];
  } catch (e) {
    throw new ToolError(e.message);
  }
  const then = after.note ? ` ${after.note}` : '';
  if (single) {
    // One field: its own words, as a tool error when it failed.
    const [r] = results;
    if (!r.ok) throw new ToolError(r.error);
    return { content: [{ type: 'text', text: describeField(r) + then }] };
  }
  const res = fillResult(results);
  res.content[0].text += then;
  return res;
}

export default {
  name: 'form_input',
  description: 'Sets a field (ref or selector) to value, or several (fields), firing input/change.',
  inputSchema,
  annotations: {
    readOnlyHint: false,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  run,
};

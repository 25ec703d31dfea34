// javascript_tool: runs JavaScript in the page's main world (CDP
// Runtime.evaluate, so page CSP does not block it) and returns the value as JSON.

import { ToolError } from '../sw/tools.js';
import * as cdp from '../sw/cdp.js';
import { usePage } from '../sw/pageload.js';
import { runAgent } from '../content/agent.js';
import * as gate from '../sw/gate.js';
import { scopeOf } from '../sw/policy.js';
import * as props from './props.js';

export const MAX_RESULT_CHARS = 100000;

/** Wraps code that uses top-level `return` into an async function expression. */
export function wrapAsFunction(code) {
  return `(async () => {\n${code}\n})()`;
}

/** Whether a Runtime.evaluate failure was a syntax error that wrapping as a function can fix. */
export function needsWrap(exceptionDetails) {
  const d = exceptionDetails || {};
  const text = `${d.text || ''} ${(d.exception && d.exception.description) || ''}`;
  return /Illegal return statement|await is only valid/i.test(text);
}

/** Renders a Runtime.evaluate result as text. */
export function renderResult(result) {
  if (!result) return 'undefined';
  if (result.type === 'undefined') return 'undefined';
  if ('unserializableValue' in result) return result.unserializableValue;
  if ('value' in result) {
    if (typeof result.value === 'string') return JSON.stringify(result.value);
    const s = JSON.stringify(result.value, null, 2);
    return s === undefined ? String(result.value) : s;
  }
  return result.description || `[${result.type}${result.subtype ? ` ${result.subtype}` : ''}]`;
}

export const inputSchema = {
  type: 'object',
  properties: {
    code: {
      type: 'string',
      minLength: 1,
      maxLength: 200000,
    },
    timeout_ms: {
      type: 'integer',
      minimum: 100,
      maximum: 120000,
      default: 30000,
    },
    tabId: props.tabId,
  },
  required: ['code'],
  additionalProperties: false,
};

async function evaluate(tabId, expression, timeout, replMode) {
  const params = {
    expression,
    returnByValue: true,
    awaitPromise: true,
    userGesture: true,
    timeout,
    allowUnsafeEvalBlockedByCSP: true,
  };
  if (replMode) params.replMode = true;
  return cdp.send(tabId, 'Runtime.evaluate', params, { timeoutMs: timeout + 2000 });
}

async function run(args, ctx) {
  const tab = await usePage(ctx, args.tabId);
  const timeout = args.timeout_ms || 30000;
  let r;
  try {
    r = await evaluate(tab.id, args.code, timeout, true);
    if (r.exceptionDetails && needsWrap(r.exceptionDetails)) {
      r = await evaluate(tab.id, wrapAsFunction(args.code), timeout, false);
    }
    // Values that cannot be serialised by value (DOM nodes, cycles): ask again for a description.
    if (!r.exceptionDetails && r.result && r.result.type === 'object' && !('value' in r.result) && r.result.objectId) {
      r.result = { type: 'object', description: r.result.description };
    }
  } catch (e) {
    if (
      /Object reference chain is too long|could not be cloned|Object couldn't be returned by value/i.test(e.message)
    ) {
      const d = await cdp.send(
        tab.id,
        'Runtime.evaluate',
        { expression: args.code, returnByValue: false, awaitPromise: true, replMode: true, timeout },
        { timeoutMs: timeout + 2000 },
      );
      r = { result: { type: d.result.type, description: d.result.description } };
    } else throw new ToolError(`could not run the code in tab ${tab.id}: ${e.message}`);
  }
  if (r.exceptionDetails) {
    const d = r.exceptionDetails;
    const msg = (d.exception && d.exception.description) || d.text || 'exception';
    throw new ToolError(`the code threw: ${msg}${d.lineNumber !== undefined ? ` (line ${d.lineNumber + 1})` : ''}`);
  }
  let text = renderResult(r.result);
  // Under any scope short of full, the values of the page's password fields
  // are taken out of the result (the page agent knows them; they stay in the page).
  if (scopeOf(await gate.policy(), ctx.session) !== 'full') {
    try {
      text = (await runAgent(tab.id, 'redact', { text })).text;
    } catch (e) {
      throw new ToolError(
        `the script ran, but its result could not be checked for passwords (${e.message}), so it is not shown`,
      );
    }
  }
  let truncated = false;
  if (text.length > MAX_RESULT_CHARS) {
    text = `${text.slice(0, MAX_RESULT_CHARS)}…`;
    truncated = true;
  }
  // No structured content: the value is the answer, and Claude Code hands a
  // model a result's structured content in place of its text.
  return {
    content: [{ type: 'text', text: truncated ? `${text}\n[result cut at ${MAX_RESULT_CHARS} characters]` : text }],
  };
}

export default {
  name: 'javascript_tool',
  description: 'Runs code in the page (top-level await/return work); returns the last value as JSON within timeout_ms.',
  inputSchema,
  annotations: {
    readOnlyHint: false,
    destructiveHint: true,
    idempotentHint: false,
    openWorldHint: true,
  },
  run,
};

// shortcuts_list / shortcuts_execute: user-saved sequences of tool calls,
// kept in chrome.storage.local under "shortcuts" and run through the same
// tool registry as any call.
//
// Storage format (the options page edits it):
//   chrome.storage.local "shortcuts": [{id, name, description?, steps: [{tool, arguments}], createdAt?}]

import { ToolError, call } from '../sw/tools.js';

export const STORAGE_KEY = 'shortcuts';
const MAX_STEPS = 100;

export async function loadShortcuts() {
  const got = await chrome.storage.local.get(STORAGE_KEY);
  const list = got && Array.isArray(got[STORAGE_KEY]) ? got[STORAGE_KEY] : [];
  return list.filter((s) => s && typeof s.name === 'string' && Array.isArray(s.steps));
}

/** Finds a shortcut by id, then exact name, then case-insensitive name. */
export function pickShortcut(list, key) {
  return (
    list.find((s) => s.id === key) ||
    list.find((s) => s.name === key) ||
    list.find((s) => s.name.toLowerCase() === String(key).toLowerCase()) ||
    null
  );
}

/** Replaces "{{name}}" in string arguments with variables[name]. */
export function substitute(value, vars) {
  if (typeof value === 'string') {
    return value.replace(/\{\{\s*([A-Za-z0-9_]+)\s*\}\}/g, (m, k) => (Object.hasOwn(vars, k) ? String(vars[k]) : m));
  }
  if (Array.isArray(value)) return value.map((v) => substitute(v, vars));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, vars)]));
  }
  return value;
}

export const shortcutsList = {
  name: 'shortcuts_list',
  description: "The user's saved shortcuts, for shortcuts_execute.",
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  async run() {
    const list = await loadShortcuts();
    if (!list.length) {
      return {
        content: [
          { type: 'text', text: 'No shortcuts are saved. The user can add them in the Browser Bridge options page.' },
        ],
      };
    }
    const lines = list.map(
      (s) =>
        `- ${s.name}${s.id ? ` (id ${s.id})` : ''}: ${s.description || ''} [${s.steps.map((st) => st.tool).join(' → ')}]`,
    );
    return {
      content: [{ type: 'text', text: `${list.length} shortcut${list.length === 1 ? '' : 's'}:\n${lines.join('\n')}` }],
    };
  },
};

export const shortcutsExecute = {
  name: 'shortcuts_execute',
  description: 'Runs a saved shortcut, filling {{name}} from variables; stops at a failure unless continue_on_error.',
  inputSchema: {
    type: 'object',
    properties: {
      shortcut: { type: 'string', minLength: 1, maxLength: 200 },
      variables: {
        type: 'object',
        additionalProperties: { type: ['string', 'number', 'boolean'] },
      },
      continue_on_error: {
        type: 'boolean',
      },
    },
    required: ['shortcut'],
    additionalProperties: false,
  },
  annotations: {
    readOnlyHint: false,
    destructiveHint: true,
    idempotentHint: false,
    openWorldHint: true,
  },
  async run(args, ctx) {
    const list = await loadShortcuts();
    const sc = pickShortcut(list, args.shortcut);
    if (!sc) {
      throw new ToolError(
        `no shortcut ${JSON.stringify(args.shortcut)}; shortcuts_list shows the saved ones${list.length ? `: ${list.map((s) => s.name).join(', ')}` : ''}`,
      );
    }
    if (sc.steps.length > MAX_STEPS) throw new ToolError(`shortcut ${sc.name} has more than ${MAX_STEPS} steps`);
    const vars = args.variables || {};
    const content = [];
    const results = [];
    let failed = 0;
    for (let i = 0; i < sc.steps.length; i++) {
      if (ctx.signal && ctx.signal.aborted) throw new ToolError('cancelled');
      const step = sc.steps[i];
      const name = step.tool;
      if (name === 'shortcuts_execute') {
        throw new ToolError(`step ${i + 1} of ${sc.name} runs another shortcut, which is not allowed`);
      }
      const stepArgs = substitute(step.arguments || step.args || {}, vars);
      ctx.progress && ctx.progress(i, sc.steps.length, `step ${i + 1}: ${name}`);
      let r;
      try {
        r = await call(
          { name, arguments: stepArgs, _meta: { 'browserbridge/session': ctx.session } },
          { id: `${ctx.requestId}/step${i + 1}`, signal: ctx.signal, session: ctx.session },
        );
      } catch (e) {
        r = { isError: true, content: [{ type: 'text', text: e.message }] };
      }
      results.push({ step: i + 1, tool: name, ok: !r.isError });
      content.push({ type: 'text', text: `Step ${i + 1} ${name}${r.isError ? ' FAILED' : ''}:` });
      for (const c of r.content || []) content.push(c);
      if (r.isError) {
        failed++;
        if (!args.continue_on_error) break;
      }
    }
    const summary = `Shortcut "${sc.name}": ${results.filter((r) => r.ok).length} of ${sc.steps.length} steps succeeded${failed && !args.continue_on_error ? '; stopped at the first failure' : ''}.`;
    content.unshift({ type: 'text', text: summary });
    const out = { content };
    if (failed && !args.continue_on_error) out.isError = true;
    return out;
  },
};

export default [shortcutsList, shortcutsExecute];

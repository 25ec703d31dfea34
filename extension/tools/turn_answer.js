// turn_answer_start / turn_answer_complete: the session's activity state
// ("working in the browser" vs "answering" vs idle), shown in the popup.

const schema = (extra) => ({
  type: 'object',
  properties: {
    summary: { type: 'string', maxLength: 1000, description: extra },
  },
  additionalProperties: false,
});

export const turnAnswerStart = {
  name: 'turn_answer_start',
  description: 'Call before your final answer (tells the user).',
  inputSchema: schema('Shown to the user'),
  annotations: {
    readOnlyHint: false,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const state = { state: 'answering', since: Date.now(), summary: args.summary || '' };
    await ctx.sessions.setActivity(ctx.session.id, state);
    return { content: [{ type: 'text', text: 'Activity set to "answering".' }] };
  },
};

export const turnAnswerComplete = {
  name: 'turn_answer_complete',
  description: 'Call when your answer is done (tells the user).',
  inputSchema: schema('Shown to the user'),
  annotations: {
    readOnlyHint: false,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const state = { state: 'idle', since: Date.now(), summary: args.summary || '' };
    await ctx.sessions.setActivity(ctx.session.id, state);
    return { content: [{ type: 'text', text: 'Activity set to "idle".' }] };
  },
};

export default [turnAnswerStart, turnAnswerComplete];

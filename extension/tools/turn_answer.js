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
  title: 'Mark that you are answering',
  description:
    'Tells the user (in the Browser Bridge popup) that you have finished acting in the browser for now and are writing your answer. ' +
    "Call it once before your final answer of a turn; call turn_answer_complete when the answer is done. The session's tabs stay open.",
  inputSchema: schema('Optional: a short note shown with the state, e.g. what you found.'),
  annotations: {
    title: 'Mark that you are answering',
    readOnlyHint: false,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const state = { state: 'answering', since: Date.now(), summary: args.summary || '' };
    await ctx.sessions.setActivity(ctx.session.id, state);
    return { content: [{ type: 'text', text: 'Activity set to "answering".' }], structuredContent: state };
  },
};

export const turnAnswerComplete = {
  name: 'turn_answer_complete',
  title: 'Mark that your answer is done',
  description:
    'Tells the user (in the Browser Bridge popup) that your turn is over and the session is idle until the next request. ' +
    'Call it after turn_answer_start once your answer is complete.',
  inputSchema: schema('Optional: a one-line summary of the outcome, shown with the state.'),
  annotations: {
    title: 'Mark that your answer is done',
    readOnlyHint: false,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const state = { state: 'idle', since: Date.now(), summary: args.summary || '' };
    await ctx.sessions.setActivity(ctx.session.id, state);
    return { content: [{ type: 'text', text: 'Activity set to "idle".' }], structuredContent: state };
  },
};

export default [turnAnswerStart, turnAnswerComplete];

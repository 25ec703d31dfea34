// update_plan: the client's plan for the current task, shown in the popup.

import { ToolError } from '../sw/tools.js';

export const STATUSES = ['pending', 'in_progress', 'completed', 'skipped', 'failed'];

export default {
  name: 'update_plan',
  description: 'Shows the user your whole plan (one step in_progress) and domains to visit.',
  inputSchema: {
    type: 'object',
    properties: {
      plan: {
        type: 'array',
        maxItems: 50,
        items: {
          type: 'object',
          properties: {
            step: {
              type: 'string',
              minLength: 1,
              maxLength: 300,
            },
            status: {
              type: 'string',
              enum: STATUSES,
            },
          },
          required: ['step', 'status'],
          additionalProperties: false,
        },
      },
      explanation: {
        type: 'string',
        maxLength: 1000,
      },
      domains: {
        type: 'array',
        items: { type: 'string', maxLength: 253 },
        maxItems: 50,
      },
    },
    required: ['plan'],
    additionalProperties: false,
  },
  annotations: {
    readOnlyHint: false,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const inProgress = args.plan.filter((s) => s.status === 'in_progress').length;
    if (inProgress > 1) throw new ToolError(`${inProgress} steps are in_progress; mark at most one`);
    const plan = {
      steps: args.plan,
      explanation: args.explanation || '',
      domains: args.domains || [],
      updatedAt: Date.now(),
    };
    await ctx.sessions.setPlan(ctx.session.id, plan);
    const done = args.plan.filter((s) => s.status === 'completed').length;
    return {
      content: [
        {
          type: 'text',
          text: `Plan updated: ${done}/${args.plan.length} steps completed. The user sees it in the Browser Bridge popup.`,
        },
      ],
    };
  },
};

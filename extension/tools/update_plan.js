// update_plan: the client's plan for the current task, shown in the popup.

import { ToolError } from '../sw/tools.js';

export const STATUSES = ['pending', 'in_progress', 'completed', 'skipped', 'failed'];

export default {
  name: 'update_plan',
  title: 'Show your plan to the user',
  description:
    'Records your plan for the current task as a list of steps with a status, and shows it to the user in the Browser Bridge popup ' +
    "next to this session's tab group, so they can follow what you are doing in their browser. Send the whole list each time; " +
    'keep at most one step in_progress. The plan also lists the sites you intend to visit, if you give domains.',
  inputSchema: {
    type: 'object',
    properties: {
      plan: {
        type: 'array',
        minItems: 0,
        maxItems: 50,
        description: 'The steps, in order.',
        items: {
          type: 'object',
          properties: {
            step: {
              type: 'string',
              minLength: 1,
              maxLength: 300,
              description: 'What the step does, in a short sentence.',
            },
            status: {
              type: 'string',
              enum: STATUSES,
              description: 'pending, in_progress, completed, skipped or failed.',
            },
          },
          required: ['step', 'status'],
          additionalProperties: false,
        },
      },
      explanation: {
        type: 'string',
        maxLength: 1000,
        description: 'Optional: why the plan changed, or your overall approach.',
      },
      domains: {
        type: 'array',
        items: { type: 'string', maxLength: 253 },
        maxItems: 50,
        description: 'Optional: the sites (host names) the plan will visit.',
      },
    },
    required: ['plan'],
    additionalProperties: false,
  },
  annotations: {
    title: 'Show your plan to the user',
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
      structuredContent: { steps: args.plan.length, completed: done },
    };
  },
};

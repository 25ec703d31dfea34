// Argument schemas several tools share, worded once. Every tools/list goes
// into a model's context on each turn, so descriptions say only what the
// name, type and bounds do not (defaults are `default`, not sentences).

/**
 * tabId: every tool acting on a tab takes one, and leaving it out means the
 * session's current tab, as a model assumes of an optional tabId; so it goes
 * without a description (18 tools × 40 bytes on every turn).
 */
export const tabId = { type: 'integer', minimum: 0 };

/** An element ref handed out by read_page and find; described where the tool's description does not. */
export const ref = (description) => ({
  type: 'string',
  pattern: '^ref_[0-9]+$',
  ...(description && { description }),
});

// A remote MCP server's connection states, the transitions between them, and
// the retry presets (spec 000, "State Management" and "Retry Strategy").
//
//   disconnected ─► connecting ─────────────────────────────► connected
//        │              │  401, no usable token                 │   │  │
//        │              ├──► needs-auth (not interactive)       │   │  └─► error
//        │              └──► registering ─► authorizing ─►      │   └────► token-refresh ─► connected
//        │                       (discovery, client             │                    └────► invalid-token
//        │                        registration)   authenticated ┘
//        └── every state may go back to disconnected (disconnect, sign-out)
//
// The spec's cloudflare-error state is the error state with category
// 'cloudflare' (errors.js): what the person can do about it is the same.

/** Every state a RemoteServer can be in. */
export const STATES = Object.freeze([
  'disconnected',
  'needs-auth',
  'registering',
  'authorizing',
  'authenticated',
  'connecting',
  'connected',
  'error',
  'token-refresh',
  'invalid-token',
]);

/**
 * The transitions a RemoteServer makes, from → allowed next states. Staying
 * in a state (to update the message) is always allowed, and so is going to
 * 'disconnected'.
 */
export const TRANSITIONS = Object.freeze({
  disconnected: ['connecting'],
  connecting: ['connected', 'needs-auth', 'registering', 'token-refresh', 'error', 'invalid-token'],
  'needs-auth': ['connecting', 'registering'],
  registering: ['authorizing', 'needs-auth', 'error', 'connecting'],
  authorizing: ['authenticated', 'needs-auth', 'error', 'registering'],
  authenticated: ['connecting', 'connected', 'registering'],
  // registering from connected: scope step-up while a tool call waits.
  connected: ['connecting', 'token-refresh', 'error', 'invalid-token', 'needs-auth', 'registering'],
  error: ['connecting', 'needs-auth', 'token-refresh', 'registering'],
  'token-refresh': ['connected', 'connecting', 'invalid-token', 'needs-auth', 'error'],
  'invalid-token': ['connecting', 'registering', 'needs-auth', 'token-refresh'],
});

/**
 * Whether a RemoteServer may go from one state to another.
 * @param {string} from
 * @param {string} to
 */
export function canTransition(from, to) {
  if (!STATES.includes(from) || !STATES.includes(to)) return false;
  return from === to || to === 'disconnected' || TRANSITIONS[from].includes(to);
}

/**
 * Retry presets (spec 000): delay before retry n (0-based) is
 * min(initialDelay * backoffMultiplier^n, maxDelay) milliseconds.
 * Quick: token refresh and other short calls; Standard: (re)connecting.
 */
export const RETRY_PRESETS = Object.freeze({
  Quick: Object.freeze({ maxRetries: 2, initialDelay: 500, maxDelay: 2000, backoffMultiplier: 2 }),
  Standard: Object.freeze({ maxRetries: 3, initialDelay: 1000, maxDelay: 10000, backoffMultiplier: 2 }),
});

/**
 * The delay before retry `attempt` (0 for the first retry).
 * @param {{initialDelay: number, maxDelay: number, backoffMultiplier: number}} preset
 * @param {number} attempt
 */
export function retryDelay(preset, attempt) {
  return Math.min(preset.initialDelay * preset.backoffMultiplier ** attempt, preset.maxDelay);
}

/**
 * Runs fn, and again after each preset delay while shouldRetry(err) says so,
 * at most preset.maxRetries more times. A Retry-After (err.retryAfter, ms)
 * longer than the preset's delay is honoured up to the preset's maxDelay.
 * @template T
 * @param {(attempt: number) => Promise<T>} fn
 * @param {object} preset one of RETRY_PRESETS
 * @param {{shouldRetry: (err: any) => boolean, sleep: (ms: number) => Promise<void>,
 *   onRetry?: (err: any, attempt: number, delay: number) => void}} opts
 * @returns {Promise<T>}
 */
export async function withRetry(fn, preset, { shouldRetry, sleep, onRetry }) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      if (attempt >= preset.maxRetries || !shouldRetry(err)) throw err;
      let delay = retryDelay(preset, attempt);
      if (typeof err?.retryAfter === 'number') delay = Math.min(Math.max(delay, err.retryAfter), preset.maxDelay);
      onRetry?.(err, attempt, delay);
      await sleep(delay);
    }
  }
}

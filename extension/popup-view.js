// What the popup shows, as plain data: the overall status (with the cause
// and the fix of a failure), the client cards and the recent tool calls,
// computed from what the service worker keeps in chrome.storage.session
// (sw/store.js, SESSION) and the time now. No DOM and no chrome.* here, so
// node --test checks every state (extension/test/popup.test.js); popup.js
// draws the result.
//
// Only what is true now is shown: a native-messaging error while the port
// is open again, or a host.state "disconnected" after "connected", is gone;
// tool calls are history and are titled so.

import { liveSessions } from './sw/sessions.js';
import { clientKey, scopeManaged, scopeOf, SCOPE_WORDS } from './sw/policy.js';
import { mergePolicy, pauseState, SETTING_WORDS } from './sw/managed.js';

/** Chrome's tab group colour names; ui.css maps each to a colour per theme. */
export const GROUP_COLOURS = Object.freeze([
  'grey',
  'blue',
  'red',
  'yellow',
  'green',
  'pink',
  'purple',
  'cyan',
  'orange',
]);

/** With more clients than this, each card is one line until opened. */
export const COMPACT_AFTER = 3;

/** How many recent tool calls are listed. */
export const CALLS_SHOWN = 20;

/** The header's three tones and their words. */
export const TONES = Object.freeze({ ok: 'Connected', wait: 'Waiting for bridge', error: 'Error', off: 'Stopped' });

/**
 * "just now", "12 s ago", "5 min ago", "3 h ago", or the date.
 * @param {number|undefined} t milliseconds since the epoch
 * @param {number} now
 * @returns {string}
 */
export function ago(t, now) {
  if (!t) return '';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 5) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(t).toLocaleDateString();
}

/**
 * The step that fixes one of Chrome's native-messaging errors.
 * @param {string} error chrome.runtime.lastError's message
 * @returns {string}
 */
export function nativeFix(error) {
  if (/not found/i.test(error)) {
    return 'The native host is not registered for this browser or profile: run ./scripts/install.sh, or `browserbridge install --browser <name>`, then `browserbridge doctor`.';
  }
  if (/forbidden/i.test(error)) {
    return "The host's manifest does not allow this extension's id: run `browserbridge install` again (it writes this extension's id).";
  }
  if (/exited|failed to start/i.test(error)) {
    return 'The host started but stopped: run `browserbridge doctor`; the bridge log says why.';
  }
  return 'Run `browserbridge doctor`: it checks every hop and says how to fix what fails.';
}

function retryText(at, inMs, now, what = 'Trying again') {
  if (!inMs || !at) return `${what} shortly.`;
  const left = Math.ceil((at + inMs - now) / 1000);
  return left > 0 ? `${what} in ${left} s.` : `${what} now…`;
}

/**
 * @typedef {object} Fact
 * @property {string} label
 * @property {string} value
 * @property {boolean} [code] shown as code (paths, addresses)
 *
 * @typedef {object} StatusView
 * @property {'ok'|'wait'|'error'} tone the header's colour
 * @property {string} label the header's word for the tone (TONES)
 * @property {string} title one line: what is happening
 * @property {string} detail a second line, or ''
 * @property {{cause: string, fix: string, facts: Fact[], retry: string}|null} problem
 * @property {Fact[]} facts connection details (shown when connected)
 * @property {boolean} reconnect whether to offer "Reconnect now"
 * @property {string} mcpUrl where MCP clients reach the bridge, or ''
 */

/**
 * The overall status, from the native port, the host's last host.state and
 * the bridge's answer to hello.
 * @param {{native?: object, hostState?: object, bridge?: object}} s chrome.storage.session
 * @param {number} now
 * @returns {StatusView}
 */
export function statusView({ native, hostState, bridge } = {}, now = Date.now()) {
  const view = (tone, title, extra = {}) => ({
    tone,
    label: TONES[tone],
    title,
    detail: '',
    problem: null,
    facts: [],
    reconnect: false,
    mcpUrl: '',
    ...extra,
  });
  if (!native || native.port === 'connecting') return view('wait', 'Starting the native host…');
  if (native.port === 'disconnected') {
    const cause = native.lastError || 'The native host closed the connection.';
    return view('error', 'The native host is not running', {
      problem: {
        cause,
        fix: nativeFix(cause),
        facts: [],
        retry: retryText(native.at, native.retryInMs, now, `Trying again (attempt ${native.attempt || 1})`),
      },
      reconnect: true,
    });
  }
  // The port is open: what the host says about the bridge.
  const hs = hostState || {};
  switch (hs.state) {
    case 'connecting':
      return view('wait', 'Looking for the bridge…');
    case 'starting_bridge':
      return view('wait', 'Starting the bridge…', { detail: 'The native host started `browserbridge serve`.' });
    case 'bridge_failed': {
      const f = hs.failure || {};
      const facts = [];
      if (f.configFile) facts.push({ label: 'Config', value: f.configFile, code: true });
      if (f.listen) facts.push({ label: 'Address', value: f.listen, code: true });
      if (f.logFile) facts.push({ label: 'Log', value: f.logFile, code: true });
      // The config's path is listed below the fix: the fix need not repeat it.
      let fix = f.fix || 'Run `browserbridge doctor`; the bridge log says why.';
      if (f.configFile) fix = fix.split(f.configFile).join('the config file');
      return view('error', 'The bridge could not start', {
        problem: {
          cause: f.error || hs.error || 'The bridge exited before it answered.',
          fix,
          facts,
          retry: retryText(hs.at, hs.retryInMs, now, 'The native host starts it again'),
        },
      });
    }
    case 'stopped':
      return view('off', 'The bridge is stopped', {
        detail:
          'Stopped with `browserbridge stop`. Run `browserbridge start` to start it again; the browser does not start it meanwhile.',
      });
    case 'disconnected':
      return view('error', 'The bridge is unreachable', {
        problem: {
          cause: hs.error || 'The native host lost the bridge.',
          fix: 'The native host keeps trying and starts the bridge when none answers. `browserbridge status` and `browserbridge doctor` say more.',
          facts: hs.socket ? [{ label: 'Socket', value: hs.socket, code: true }] : [],
          retry: '',
        },
      });
    case 'connected':
      break;
    default:
      return view('wait', 'Waiting for the native host…');
  }
  // Connected to the bridge: what hello said.
  if (bridge?.state === 'error') {
    return view('error', 'The bridge did not register this browser', {
      problem: {
        cause: bridge.error || 'hello failed.',
        fix: 'Run `browserbridge doctor`; the bridge log says why.',
        facts: [],
        retry: '',
      },
    });
  }
  if (bridge?.state !== 'ready') return view('wait', 'Registering with the bridge…');
  // The MCP URL has its own line above the details, with its Copy button.
  const facts = [];
  if (bridge.bridgeVersion) facts.push({ label: 'Bridge', value: `version ${bridge.bridgeVersion}` });
  if (bridge.browserId) facts.push({ label: 'Browser id', value: bridge.browserId, code: true });
  if (hs.socket) facts.push({ label: 'Socket', value: hs.socket, code: true });
  return view('ok', 'Connected to the bridge', {
    detail: '',
    facts,
    mcpUrl: bridge.mcpUrl || '',
  });
}

const RELAY_STATES = {
  connecting: 'connecting…',
  authenticating: 'signing in…',
  connected: 'connected',
  auth_failed: 'refused by the proxy',
  name_taken: 'name taken by another bridge',
  disconnected: 'not connected (trying again)',
};

/**
 * The cloud relay as the bridge reports it for this browser (relay.status):
 * which proxy, as which user, the state, and the servers offered there.
 * @param {object|null|undefined} relay relay.status's result; null while unknown
 * @returns {{shown: boolean, tone: 'ok'|'wait'|'error', summary: string, facts: Fact[]}}
 */
export function relayView(relay) {
  if (!relay?.configured) return { shown: false, tone: 'wait', summary: '', facts: [] };
  const b = relay.browser;
  const state = b?.state || 'connecting';
  const tone = state === 'connected' ? 'ok' : ['auth_failed', 'name_taken'].includes(state) ? 'error' : 'wait';
  let host = relay.url || b?.url || '';
  try {
    host = new URL(host).host || host;
  } catch {
    /* shown as it is */
  }
  const summary =
    state === 'connected'
      ? `Remote access through ${host}${b.userId ? ` as ${b.userId}` : ''}`
      : `Remote access through ${host}: ${RELAY_STATES[state] || state}`;
  const facts = [{ label: 'Proxy', value: relay.url || b?.url || '', code: true }];
  if (b?.userId) facts.push({ label: 'User', value: b.userId });
  if (b?.extensionId) facts.push({ label: 'This browser', value: `${b.name || ''} (${b.extensionId})`.trim() });
  if (b) facts.push({ label: 'Remote clients', value: String(b.peers || 0) });
  if (b?.error && state !== 'connected') facts.push({ label: 'Last error', value: b.error });
  const servers = (relay.servers || []).map((s) => `${s.server} (${RELAY_STATES[s.state] || s.state})`);
  facts.push({ label: 'Servers offered', value: servers.length ? servers.join(', ') : 'none' });
  return { shown: true, tone, summary, facts };
}

/**
 * The steps of an update_plan, with their status.
 * @param {*} plan a session record's plan
 * @returns {{steps: {step: string, status: string}[], explanation: string}|null}
 */
export function planView(plan) {
  if (!plan) return null;
  if (typeof plan === 'string') return { steps: [{ step: plan, status: 'pending' }], explanation: '' };
  const steps = Array.isArray(plan.steps) ? plan.steps.filter((s) => s && typeof s.step === 'string') : [];
  if (!steps.length && !plan.explanation) return null;
  return {
    steps: steps.map((s) => ({ step: s.step, status: String(s.status || 'pending') })),
    explanation: String(plan.explanation || ''),
  };
}

const ACTIVITY = { answering: 'Answering', idle: 'Idle', working: 'Working' };

/**
 * @typedef {object} ClientCard
 * @property {string} id the session id
 * @property {string} name the client's name
 * @property {string} colour a GROUP_COLOURS name
 * @property {number|null} groupId its tab group, for counting its tabs
 * @property {string} lastActive "… ago"
 * @property {string} activity e.g. "Answering: summary", or ''
 * @property {ReturnType<typeof planView>} plan
 * @property {number} calls how many of the recent calls are its
 * @property {boolean} remote a client through the cloud relay (its name says so too)
 * @property {boolean} canDisconnect a local MCP session (the bridge can end it)
 */

/** Whether a session record or a recent call is a remote client's (through the cloud relay). */
const isRemote = (x) => !!x?.remote || String(x?.session || x?.id || '').startsWith('conn-');

/**
 * The client cards: the live sessions, newest first.
 * @param {Record<string, object>|undefined} records SESSION.sessions
 * @param {object|undefined} bridge SESSION.bridge
 * @param {object[]|undefined} calls SESSION.recentCalls
 * @param {number} now
 * @param {boolean} [linked] whether the bridge is connected (the status is ok)
 * @returns {{cards: ClientCard[], compact: boolean}}
 */
export function clientsView(records, bridge, calls, now = Date.now(), linked = true) {
  const cards = liveSessions(records, bridge).map((s) => {
    const act = s.activity?.state
      ? `${ACTIVITY[s.activity.state] || s.activity.state}${s.activity.summary ? `: ${s.activity.summary}` : ''}`
      : '';
    return {
      id: s.id,
      name: `${s.client || s.id}${isRemote(s) ? ' (remote)' : ''}`,
      remote: isRemote(s),
      colour: GROUP_COLOURS.includes(s.color) ? s.color : 'grey',
      groupId: Number.isInteger(s.groupId) && s.groupId >= 0 ? s.groupId : null,
      lastActive: ago(s.lastActive, now),
      activity: act,
      plan: planView(s.plan),
      calls: (calls || []).filter((c) => c.session === s.id).length,
      // Only a running bridge can end a session: no button while it is away.
      canDisconnect: linked && s.id.startsWith('local-'),
    };
  });
  return { cards, compact: cards.length > COMPACT_AFTER };
}

/**
 * @typedef {object} CallRow
 * @property {string} tool
 * @property {string} target what it acted on (sw/calltarget.js), or ''
 * @property {boolean} ok
 * @property {string} outcome "ok" or "failed", with the time taken
 * @property {string} error the failure's text, or ''
 * @property {string} when "… ago"
 * @property {string} client
 * @property {string} colour the client's group colour while it is live, else grey
 */

/**
 * The recent tool calls, newest first: history, whether or not their
 * clients are still connected.
 * @param {object[]|undefined} calls SESSION.recentCalls
 * @param {Record<string, object>|undefined} records SESSION.sessions
 * @param {number} now
 * @returns {{rows: CallRow[], total: number}}
 */
export function callsView(calls, records, now = Date.now()) {
  const list = Array.isArray(calls) ? calls : [];
  const rows = list.slice(0, CALLS_SHOWN).map((c) => {
    const rec = records?.[c.session];
    const ms = Number.isFinite(c.ms) ? (c.ms < 1000 ? `${c.ms} ms` : `${(c.ms / 1000).toFixed(1)} s`) : '';
    return {
      tool: String(c.tool || '?'),
      target: String(c.target || ''),
      ok: Boolean(c.ok),
      outcome: `${c.ok ? 'ok' : 'failed'}${ms ? ` · ${ms}` : ''}`,
      error: c.ok ? '' : String(c.error || ''),
      when: ago(c.at, now),
      client: `${c.client || c.session || ''}${isRemote(c) ? ' (remote)' : ''}`,
      colour: GROUP_COLOURS.includes(rec?.color) ? rec.color : 'grey',
    };
  });
  return { rows, total: list.length };
}

const CLASS_WORDS = { read: 'read', act: 'act on', script: 'run a script on' };

/**
 * @typedef {object} ApprovalCard
 * @property {string} id
 * @property {string} client the client's name, "(remote)" added for remote ones
 * @property {string} what e.g. "act on https://shop.example"
 * @property {string} detail the tool and what it acts on
 * @property {string} siteButton the label of "allow this site for this client"
 * @property {boolean} irreversible
 * @property {string} left "1:45 left"
 * @property {string} colour the client's group colour
 */

/**
 * The calls waiting for the person, oldest first.
 * @param {object[]|undefined} list SESSION.approvals
 * @param {Record<string, object>|undefined} records SESSION.sessions
 * @param {number} now
 * @returns {ApprovalCard[]}
 */
export function approvalsView(list, records, now = Date.now()) {
  return (Array.isArray(list) ? list : [])
    .filter((a) => a && typeof a.id === 'string')
    .map((a) => {
      const secs = Math.max(0, Math.ceil(((a.deadline || now) - now) / 1000));
      const plan = a.cls === 'plan';
      const rec = records?.[a.session];
      return {
        id: a.id,
        client: `${a.client || a.session}${a.remote ? ' (remote)' : ''}`,
        what: plan ? `approve a plan on ${a.site}` : `${CLASS_WORDS[a.cls] || a.cls} ${a.site}`,
        detail: [a.tool, a.target].filter(Boolean).join(' · '),
        siteButton: plan ? 'Approve the plan' : `Allow this site for ${a.client || 'this client'}`,
        irreversible: a.why === 'irreversible',
        left: `${Math.floor(secs / 60)}:${String(secs % 60).padStart(2, '0')} left`,
        colour: GROUP_COLOURS.includes(rec?.color) ? rec.color : 'grey',
      };
    });
}

/** What the popup says beside a setting the organization manages. */
export const MANAGED_MARK = 'Set by your organization';

/**
 * The person's switches: pause, ask on unlisted sites, confirm irreversible
 * clicks; each one the organization manages is locked (sw/managed.js), and
 * managedNote names every managed setting.
 * @param {*} policy chrome.storage.local "policy"
 * @param {*} paused chrome.storage.local "paused"
 * @param {*} [managed] chrome.storage.managed's contents
 */
export function controlView(policy, paused, managed) {
  const p = mergePolicy(policy, managed);
  const pause = pauseState(paused, managed);
  const byOrg = pause.by === 'organization';
  const words = p.managed.map((k) => SETTING_WORDS[k]);
  return {
    paused: pause.paused,
    pauseLabel: byOrg ? 'Paused by your organization' : pause.paused ? 'Resume agents' : 'Pause all agents',
    pausedNote: byOrg
      ? 'Your organization paused agents: every call gets an error saying so. Only your IT department can resume them.'
      : pause.paused
        ? 'Agents are paused: every call gets an error saying so until you resume. Tabs stay as they are.'
        : '',
    pauseLocked: byOrg,
    askUnlisted: p.unlisted === 'ask',
    askUnlistedLocked: p.managed.includes('unlisted'),
    confirmIrreversible: p.confirmIrreversible,
    confirmIrreversibleLocked: p.managed.includes('confirmIrreversible'),
    rules: p.sites.length,
    managedNote: words.length ? `${MANAGED_MARK}: ${words.join(', ')}.` : '',
  };
}

/**
 * A client's scope, for its card's selector; locked when the organization
 * sets it.
 * @param {*} policy chrome.storage.local "policy"
 * @param {{id: string, client?: string, remote?: boolean}} rec a session record
 * @param {*} [managed] chrome.storage.managed's contents
 */
export function scopeView(policy, rec, managed) {
  const session = { client: rec.client || rec.id, remote: !!rec.remote || rec.id.startsWith('conn-') };
  const p = mergePolicy(policy, managed);
  return {
    key: clientKey(session),
    scope: scopeOf(p, session),
    remote: session.remote,
    locked: scopeManaged(p, session),
    options: Object.entries(SCOPE_WORDS).map(([value, label]) => ({ value, label })),
  };
}

/**
 * The whole popup.
 * @param {Record<string, any>} s chrome.storage.session's SESSION keys
 * @param {number} now
 * @param {{policy?: any, paused?: any, managed?: any}} [local] chrome.storage.local's policy and paused, and
 *   chrome.storage.managed's contents
 */
export function popupView(s, now = Date.now(), local = {}) {
  const status = statusView(s, now);
  const clients = clientsView(s.sessions, s.bridge, s.recentCalls, now, status.tone === 'ok');
  for (const card of clients.cards) {
    card.scope = scopeView(local.policy, s.sessions?.[card.id] || { id: card.id, client: card.name }, local.managed);
  }
  const approvals = approvalsView(s.approvals, s.sessions, now);
  const control = controlView(local.policy, local.paused, local.managed);
  const calls = callsView(s.recentCalls, s.sessions, now);
  let empty = '';
  if (!clients.cards.length) {
    empty =
      status.tone === 'ok'
        ? calls.rows.length
          ? 'No MCP client is connected now.'
          : 'No MCP client has used this browser yet.'
        : 'No MCP client is connected.';
  }
  return { status, clients, calls, empty, approvals, control };
}

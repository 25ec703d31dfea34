// The person's control over what agents do (README.md, "Safety"): which
// class of action a call is, on which site, and whether the person's policy
// allows it, asks them first, or blocks it. Pure functions only (no chrome.*),
// so node --test checks every rule; sw/gate.js applies them in tools.call and
// to the relay's methods, sw/approvals.js waits for the person.
//
// Classes: read (looking at a page), act (navigating to it, clicking, typing,
// filling forms, uploading), script (running code in it). A tool with no page
// (tabs_context, update_plan) has no class and is always allowed, but for pause.
//
// The policy (chrome.storage.local "policy", DEFAULT_POLICY): a rule per site
// ({pattern, read, act, script}, each allow|ask|block), what unlisted sites
// get, whether clicks that look irreversible ask even where allowed, and a
// scope per client: read (read only), act (read and act), full (also scripts,
// uploads and dev tools). Remote clients (through the cloud relay) start at
// remoteScope, local ones at localScope.

export const CLASSES = Object.freeze(['read', 'act', 'script']);
export const VERDICTS = Object.freeze(['allow', 'ask', 'block']);
export const SCOPES = Object.freeze(['read', 'act', 'full']);

/** Words for a person: what each scope lets a client do. */
export const SCOPE_WORDS = Object.freeze({
  read: 'read-only',
  act: 'read and act',
  full: 'full (scripts, uploads, dev tools)',
});

/** Today's behaviour for local clients; remote ones cannot run scripts until the person says so. */
export const DEFAULT_POLICY = Object.freeze({
  unlisted: 'allow', // what a site without a rule gets: allow | ask
  sites: [], // [{pattern, read, act, script, secrets}]; secrets: agents may type into the site's password fields
  confirmIrreversible: false, // clicks that look like buy/pay/delete/send/… ask even where allowed
  localScope: 'full',
  remoteScope: 'act',
  scopes: {}, // {[clientKey]: scope}, clientKey from clientKey()
  timeoutMs: 120_000, // how long a call waits for the person
  auditMaxEntries: 1000, // the audit trail keeps at most this many calls (sw/audit.js)
  auditMaxDays: 7, // and none older than this
});

/** Tools that need the full scope whatever their class: uploads and dev tools. */
const FULL_ONLY = new Set(['upload_image', 'dev_utils']);

/** Tools that touch no page: allowed whatever the sites' rules (not while paused). */
const NO_PAGE = new Set([
  'tabs_context',
  'tabs_context_mcp',
  'update_plan',
  'turn_answer_start',
  'turn_answer_complete',
  'shortcuts_list',
  'shortcuts_execute', // each step crosses tools.call, and the gate, on its own
  'resize_window',
  'list_browsers',
  'select_browser',
  'dev_utils',
]);

const READ_TOOLS = new Set([
  'read_page',
  'get_page_text',
  'find',
  'read_console_messages',
  'read_network_requests',
  'gif_creator',
  'permissions_check',
]);

const COMPUTER_READ = new Set(['screenshot', 'zoom']);
const CLICKS = new Set(['left_click', 'double_click', 'triple_click']);

/**
 * @typedef {object} Classified
 * @property {'read'|'act'|'script'|null} cls null: the call touches no page
 * @property {string|null} url the destination when it is known from the arguments (navigate, a new tab)
 * @property {boolean} tab whether the class applies to the tab the call acts on (its site is looked up)
 * @property {boolean} full whether the call needs the full scope
 * @property {boolean} click whether it is a click that may look irreversible
 */

const none = (full = false) => ({ cls: null, url: null, tab: false, full, click: false });
const onTab = (cls, extra = {}) => ({ cls, url: null, tab: true, full: cls === 'script', click: false, ...extra });
const toUrl = (cls, url) => ({ cls, url, tab: false, full: false, click: false });

/**
 * The class of a tools/call and where it acts.
 * @param {string} tool
 * @param {Record<string, any>} args
 * @returns {Classified}
 */
export function classify(tool, args = {}) {
  const a = args && typeof args === 'object' ? args : {};
  if (NO_PAGE.has(tool)) return none(FULL_ONLY.has(tool));
  if (READ_TOOLS.has(tool)) return onTab('read');
  switch (tool) {
    case 'navigate': {
      const u = typeof a.url === 'string' ? a.url.trim() : '';
      if (!u || ['back', 'forward', 'reload'].includes(u.toLowerCase())) return onTab('act');
      return toUrl('act', destination(u));
    }
    case 'tabs_create':
    case 'tabs_create_mcp': {
      const u = typeof a.url === 'string' ? a.url.trim() : '';
      return u ? toUrl('act', destination(u)) : none();
    }
    case 'computer':
      if (a.action === 'wait') return none();
      if (COMPUTER_READ.has(a.action)) return onTab('read');
      return onTab('act', { click: CLICKS.has(a.action) });
    case 'form_input':
      return onTab('act');
    case 'upload_image':
      return onTab('act', { full: true });
    case 'javascript_tool':
      return onTab('script');
    default:
      // A tool this module does not know (a newer one) is taken at its most
      // powerful: code in the page.
      return onTab('script');
  }
}

/**
 * The class of a method a relay client calls directly (spec 001,
 * sw/relay-methods.js): the same rules as the tools they mirror.
 * @param {string} method
 * @param {Record<string, any>} params
 * @returns {Classified}
 */
export function classifyRelay(method, params = {}) {
  const p = params && typeof params === 'object' ? params : {};
  switch (method) {
    case 'getTabs':
    case 'selectTab':
    case 'activateTab':
      return none();
    case 'createTab':
      return typeof p.url === 'string' && p.url ? toUrl('act', destination(p.url)) : none();
    case 'browser_navigate':
      return toUrl('act', typeof p.url === 'string' ? p.url : '');
    case 'closeTab':
    case 'goBack':
    case 'goForward':
    case 'click':
    case 'type':
    case 'hover':
      return onTab('act', { click: method === 'click' });
    case 'screenshot':
      return onTab('read');
    case 'forwardCDPCommand':
    default:
      return onTab('script');
  }
}

/** What navigate makes of a URL without a scheme (tools/core.js, normaliseUrl). */
export function destination(raw) {
  const s = String(raw).trim();
  if (/^[a-z][a-z0-9+.-]*:/i.test(s) && !/^[^:/]+:\d+(\/|$)/.test(s)) return s;
  if (/^(localhost|\d{1,3}(\.\d{1,3}){3}|\[[0-9a-f:]+\])(:\d+)?(\/|$)/i.test(s)) return `http://${s}`;
  return `https://${s}`;
}

/**
 * The site of a URL as the policy sees it: {origin, host} for http(s),
 * the scheme for others (file:, data:), null for about:blank and what does
 * not parse.
 * @param {string} url
 * @returns {{origin: string, host: string, scheme: string}|null}
 */
export function siteOf(url) {
  if (typeof url !== 'string' || !url || /^about:(blank|srcdoc)/i.test(url)) return null;
  let u;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if (u.protocol === 'http:' || u.protocol === 'https:') {
    return { origin: u.origin, host: u.hostname.toLowerCase(), port: u.port, scheme: u.protocol };
  }
  return { origin: u.protocol, host: '', port: '', scheme: u.protocol, internal: internalScheme(u), url: u };
}

const INTERNAL_SCHEMES = new Set([
  'chrome:',
  'chrome-extension:',
  'chrome-untrusted:',
  'chrome-search:',
  'devtools:',
  'edge:',
  'brave:',
  'opera:',
  'vivaldi:',
  'view-source:',
]);
const internalScheme = (u) => INTERNAL_SCHEMES.has(u.protocol);

/**
 * Whether a URL is a browser-internal page, the web store or an extension's
 * page: never acted on, whatever the policy says.
 * @param {string} url
 * @returns {boolean}
 */
export function isInternal(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  if (INTERNAL_SCHEMES.has(u.protocol)) return true;
  const host = u.hostname.toLowerCase();
  return (
    host === 'chromewebstore.google.com' ||
    host === 'microsoftedge.microsoft.com' ||
    (host === 'chrome.google.com' && u.pathname.startsWith('/webstore'))
  );
}

/**
 * Checks and normalises a site pattern as a person types it: an origin
 * ("https://mail.example.com", "http://localhost:8080"), a host
 * ("mail.example.com": any scheme and port) or a host and its subdomains
 * ("*.bank.example"). Returns '' for what is none of those.
 * @param {string} raw
 * @returns {string}
 */
export function normalisePattern(raw) {
  const s = String(raw ?? '')
    .trim()
    .toLowerCase()
    .replace(/\/+$/, '');
  if (!s) return '';
  if (s.includes('://')) {
    try {
      const u = new URL(s);
      if ((u.protocol === 'http:' || u.protocol === 'https:') && u.pathname === '/' && !u.search) return u.origin;
    } catch {
      /* not an origin */
    }
    return '';
  }
  const host = s.startsWith('*.') ? s.slice(2) : s;
  if (!/^(\[[0-9a-f:]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)(:\d{1,5})?$/.test(host)) {
    return '';
  }
  return s;
}

/**
 * How specifically a pattern matches a site: 0 for not at all; an exact
 * origin beats a host, which beats a wildcard, a longer wildcard a shorter one.
 * @param {string} pattern normalised (normalisePattern)
 * @param {{origin: string, host: string, port: string}|null} site
 * @returns {number}
 */
export function matchScore(pattern, site) {
  if (!site || !pattern) return 0;
  if (pattern.includes('://')) return pattern === site.origin ? 3000 : 0;
  if (!site.host) return 0;
  if (pattern.startsWith('*.')) {
    const base = pattern.slice(2);
    return site.host === base || site.host.endsWith(`.${base}`) ? 1000 + base.length : 0;
  }
  const [host, port] = pattern.split(/:(?=\d+$)/);
  if (host !== site.host) return 0;
  if (port !== undefined) return port === (site.port || defaultPort(site)) ? 2500 : 0;
  return 2000;
}

const defaultPort = (site) => (site.origin.startsWith('https:') ? '443' : '80');

/**
 * The rule of the site: the most specific of the organization's rules
 * (marked managed, sw/managed.js) that matches, else the most specific of
 * the person's.
 * @param {Array<{pattern: string, managed?: boolean}>} sites
 * @param {{origin: string, host: string}|null} site
 * @returns {object|null}
 */
export function ruleFor(sites, site) {
  return bestRule(sites, site, true) || bestRule(sites, site, false);
}

function bestRule(sites, site, managed) {
  let best = null;
  let score = 0;
  for (const r of sites || []) {
    if (!!r.managed !== managed) continue;
    const s = matchScore(r.pattern, site);
    if (s > score) {
      best = r;
      score = s;
    }
  }
  return best;
}

/**
 * The key a client's scope and its grants are kept under: its name, marked
 * remote or local (a remote client cannot take a local one's scope by
 * giving its name).
 * @param {{client?: string, id?: string, remote?: boolean}} session
 * @returns {string}
 */
export function clientKey(session) {
  return `${session?.remote ? 'remote' : 'local'}:${session?.client || session?.id || 'unknown'}`;
}

/**
 * The scope of a client: the person's choice for it, else the default for
 * remote or local clients.
 * @param {typeof DEFAULT_POLICY} policy
 * @param {{client?: string, remote?: boolean}} session
 * @returns {'read'|'act'|'full'}
 */
export function scopeOf(policy, session) {
  const own = policy.scopes?.[clientKey(session)];
  if (SCOPES.includes(own)) return own;
  return session?.remote ? policy.remoteScope : policy.localScope;
}

/**
 * Whether a client's scope is the organization's (sw/managed.js): set for
 * the client, or for its side (local or remote) with no per-client scope.
 * @param {{scopes: object, managed?: string[], managedScopes?: string[]}} policy mergePolicy()'s
 * @param {{client?: string, remote?: boolean}} session
 */
export function scopeManaged(policy, session) {
  const key = clientKey(session);
  if (policy.managedScopes?.includes(key)) return true;
  if (SCOPES.includes(policy.scopes?.[key])) return false;
  return !!policy.managed?.includes(session?.remote ? 'remoteScope' : 'localScope');
}

/** The scope a call needs. */
export function scopeNeeded(c) {
  if (c.full || c.cls === 'script') return 'full';
  if (c.cls === 'act') return 'act';
  return 'read';
}

/**
 * The stored policy over the defaults, with what does not parse dropped.
 * @param {*} stored chrome.storage.local "policy"
 * @returns {typeof DEFAULT_POLICY}
 */
export function normalisePolicy(stored) {
  const s = stored && typeof stored === 'object' ? stored : {};
  const pick = (v, list, dflt) => (list.includes(v) ? v : dflt);
  const sites = [];
  for (const r of Array.isArray(s.sites) ? s.sites : []) {
    const pattern = normalisePattern(r?.pattern);
    if (!pattern || sites.some((o) => o.pattern === pattern)) continue;
    sites.push({
      pattern,
      read: pick(r.read, VERDICTS, 'allow'),
      act: pick(r.act, VERDICTS, 'allow'),
      script: pick(r.script, VERDICTS, 'allow'),
      secrets: r.secrets === true,
    });
  }
  const scopes = {};
  for (const [k, v] of Object.entries(s.scopes && typeof s.scopes === 'object' ? s.scopes : {})) {
    if (SCOPES.includes(v)) scopes[k] = v;
  }
  const timeoutMs = Number.isFinite(s.timeoutMs) && s.timeoutMs >= 1000 ? Math.min(s.timeoutMs, 3_600_000) : 120_000;
  return {
    unlisted: pick(s.unlisted, ['allow', 'ask'], DEFAULT_POLICY.unlisted),
    sites,
    confirmIrreversible: s.confirmIrreversible === true,
    localScope: pick(s.localScope, SCOPES, DEFAULT_POLICY.localScope),
    remoteScope: pick(s.remoteScope, SCOPES, DEFAULT_POLICY.remoteScope),
    scopes,
    timeoutMs,
    auditMaxEntries: Number.isInteger(s.auditMaxEntries) ? Math.min(Math.max(s.auditMaxEntries, 10), 100_000) : 1000,
    auditMaxDays: Number.isFinite(s.auditMaxDays) && s.auditMaxDays > 0 ? Math.min(s.auditMaxDays, 365) : 7,
  };
}

/**
 * Whether agents may type into password fields on the page at url: the
 * site's rule has the person's secrets opt-in (acting there is checked
 * apart, by decide()).
 * @param {typeof DEFAULT_POLICY} policy normalised
 * @param {string} url
 * @returns {boolean}
 */
export function secretsAllowed(policy, url) {
  const rule = ruleFor(policy.sites, siteOf(url));
  return !!rule && rule.secrets === true;
}

/**
 * Why typing into a password field on the page at url is refused, the end
 * of the tool error's sentence: who decided (the person, or their
 * organization's managed rule for the site) and what can be done.
 * @param {typeof DEFAULT_POLICY} policy normalised, or sw/managed.js mergePolicy()'s
 * @param {string} url
 * @returns {string}
 */
export function secretsRefusal(policy, url) {
  if (ruleFor(policy.sites, siteOf(url))?.managed) {
    return "the person's organization does not let agents type secrets on this site (a managed policy); ask the person to type it themselves";
  }
  return 'the person has not let agents type secrets on this site; ask them to tick "secrets" for it in Browser Bridge\'s options, or to type it themselves';
}

/**
 * Whether a grant list covers a site and class. A grant is {site, classes}:
 * site a pattern (an origin from an approval, a host from a plan).
 * @param {Array<{site: string, classes: string[]}>|undefined} grants
 * @param {{origin: string, host: string}|null} site
 * @param {string} cls
 */
export function granted(grants, site, cls) {
  return (grants || []).some((g) => g.classes?.includes(cls) && matchScore(g.site, site) > 0);
}

/**
 * @typedef {object} Decision
 * @property {'allow'|'ask'|'block'} verdict
 * @property {string} why one of: none, paused, scope, internal, rule, unlisted, granted, irreversible
 * @property {object|null} rule the site rule that decided, if any
 */

/**
 * Decides a call. Order: pause, no page, scope, internal pages, the site's
 * rule (block wins over grants; allow still asks for an irreversible click
 * when the person wants that), the default for unlisted sites; an ask is an
 * allow when the person or a plan granted the site.
 * @param {object} input
 * @param {typeof DEFAULT_POLICY} input.policy normalised
 * @param {boolean} input.paused
 * @param {{id: string, client?: string, remote?: boolean}} input.session
 * @param {Classified} input.call classify()'s answer
 * @param {string|null} input.url the URL the call acts on (the destination, or the tab's), null when unknown
 * @param {Array<{site: string, classes: string[]}>} [input.grants] the client's and the session's grants
 * @param {boolean} [input.irreversible] the click looks irreversible (sw/gate.js probes the page)
 * @returns {Decision}
 */
export function decide({ policy, paused, session, call, url, grants, irreversible = false }) {
  if (paused) return { verdict: 'block', why: 'paused', rule: null };
  const scope = scopeOf(policy, session);
  if (SCOPES.indexOf(scopeNeeded(call)) > SCOPES.indexOf(scope)) return { verdict: 'block', why: 'scope', rule: null };
  if (!call.cls) return { verdict: 'allow', why: 'none', rule: null };
  if (url && isInternal(url)) return { verdict: 'block', why: 'internal', rule: null };
  const site = siteOf(url);
  if (!site) return { verdict: 'allow', why: 'none', rule: null }; // about:blank, or no tab yet
  const { verdict, why, rule } = siteVerdict(policy, site, call.cls);
  if (verdict === 'block') return { verdict, why, rule };
  if (verdict === 'ask' && !granted(grants, site, call.cls)) return { verdict, why, rule };
  if (irreversible && policy.confirmIrreversible) return { verdict: 'ask', why: 'irreversible', rule };
  return { verdict: 'allow', why: verdict === 'ask' ? 'granted' : why, rule };
}

/**
 * What the site's rule, or the default for unlisted sites, says of a class
 * there, before grants, scopes and the pause.
 * @param {typeof DEFAULT_POLICY} policy normalised
 * @param {{origin: string, host: string}} site siteOf()'s
 * @param {'read'|'act'|'script'} cls
 * @returns {{verdict: 'allow'|'ask'|'block', why: 'rule'|'unlisted', rule: object|null}}
 */
export function siteVerdict(policy, site, cls) {
  const rule = ruleFor(policy.sites, site);
  return rule ? { verdict: rule[cls], why: 'rule', rule } : { verdict: policy.unlisted, why: 'unlisted', rule: null };
}

/**
 * The classes of the tools that call the page agent (content/agent.js):
 * read_page, find and get_page_text read; clicks by ref (the agent locates
 * the element) and form_input act. Scripts (javascript_tool) never use it.
 */
export const AGENT_CLASSES = Object.freeze(['read', 'act']);

/**
 * Whether the page agent may be preloaded into a document at url
 * (sw/preload.js): not on a browser-internal page, nor on a site whose rule
 * blocks every class that uses the agent, where every tool that would call
 * it is refused and our code is what the person barred from the site. An
 * ask, or one class still allowed, keeps the preload: the person may
 * approve, and the first call there then finds the agent in.
 * @param {typeof DEFAULT_POLICY} policy normalised, or sw/managed.js mergePolicy()'s
 * @param {string} url the committed document's
 * @returns {boolean}
 */
export function agentPreloadAllowed(policy, url) {
  if (isInternal(url)) return false;
  const site = siteOf(url);
  if (!site) return true;
  return !AGENT_CLASSES.every((cls) => siteVerdict(policy, site, cls).verdict === 'block');
}

/**
 * Whether a decision can be known without the tab's URL: nothing about the
 * site matters when no rule, no ask and no confirmation could apply. This
 * is the fast path of every call under the default policy.
 * @param {typeof DEFAULT_POLICY} policy
 * @param {Classified} call
 */
export function siteMatters(policy, call) {
  if (!call.cls) return false;
  if (call.url !== null) return true; // known already, and internal pages are refused
  return policy.sites.length > 0 || policy.unlisted !== 'allow' || (call.click && policy.confirmIrreversible);
}

const CLASS_WORDS = { read: 'read', act: 'act', script: 'script' };

/** The site of a URL in a few words: its origin, or the URL's scheme. */
export function siteName(url) {
  const s = siteOf(url);
  return s ? s.origin : url || 'this page';
}

/**
 * The tool error of a call that did not run, a sentence for the model to
 * pass on: the site, the class and the policy that refused it.
 * @param {object} p
 * @param {string} p.tool the tool or relay method
 * @param {Decision|{why: 'denied'|'timeout'|'paused'|'gone'}} p.decision
 * @param {Classified} p.call
 * @param {string|null} p.url
 * @param {{client?: string, remote?: boolean}} p.session
 * @param {typeof DEFAULT_POLICY} p.policy
 * @returns {string}
 */
export function refusal({ tool, decision, call, url, session, policy }) {
  const cls = call?.cls ? CLASS_WORDS[call.cls] : '';
  const site = siteName(url);
  const what = cls ? `${tool} (${cls}) on ${site}` : tool;
  const tell = 'Tell the person why; they can change it in the Browser Bridge popup.';
  // What the organization set (sw/managed.js) only the organization changes.
  const tellOrg =
    "Tell the person why; their organization's policy sets this, and only their IT department can change it.";
  switch (decision.why) {
    case 'paused':
      return `The person paused all agents in Browser Bridge, so ${tool} was not run. Wait until they resume (the popup's Resume button or the keyboard shortcut), then try again.`;
    case 'pausedByOrganization':
      return `The person's organization paused all agents in Browser Bridge (a managed policy), so ${tool} was not run. ${tellOrg}`;
    case 'scope': {
      const scope = scopeOf(policy, session);
      const who = `${session?.client || 'this client'}${session?.remote ? ' (remote)' : ''}`;
      const managed = scopeManaged(policy, session);
      return `${tool} needs the ${SCOPE_WORDS[scopeNeeded(call)]} scope, and ${who} has the ${SCOPE_WORDS[scope]} scope in Browser Bridge${managed ? ", set by the person's organization" : ''}, so it was not run. ${managed ? tellOrg : tell}`;
    }
    case 'internal':
      return `Browser Bridge never lets agents act on browser-internal pages, the web store or extension pages, so ${tool} on ${url} was not run.`;
    case 'rule':
      if (decision.rule.managed) {
        return `The organization's site policy blocks ${what}: its rule for "${decision.rule.pattern}" says ${cls} = block. ${tellOrg}`;
      }
      return `The person's site policy blocks ${what}: the rule for "${decision.rule.pattern}" says ${cls} = block. ${tell}`;
    case 'unlisted':
      if (policy?.managed?.includes('unlisted')) return `The organization's site policy blocks ${what}. ${tellOrg}`;
      return `The person's site policy blocks ${what}. ${tell}`;
    case 'denied':
      return `The person denied ${what} in Browser Bridge, so it was not run. Ask them before trying it again.`;
    case 'timeout':
      return `Nobody approved ${what} within ${Math.round((policy?.timeoutMs ?? 120_000) / 1000)} s, so it was not run. Ask the person to approve it in the Browser Bridge popup, then try again.`;
    case 'pausedWhileWaiting':
      return `The person paused all agents in Browser Bridge while ${what} waited for approval, so it was not run. Wait until they resume, then try again.`;
    default:
      return `Browser Bridge did not run ${what}: ${decision.why}.`;
  }
}

/**
 * Whether the text around a click target looks like an irreversible action:
 * a purchase, payment, order, deletion, sending, creating an account.
 * @param {string} text the element's label, its form's action and submit labels
 * @returns {boolean}
 */
export function looksIrreversible(text) {
  return IRREVERSIBLE.test(String(text || ''));
}

const IRREVERSIBLE =
  /\b(buy|pay|purchase|order|place order|checkout|check out|delete|remove account|send|transfer|create (an )?account|sign up|subscribe|confirm payment)\b/i;

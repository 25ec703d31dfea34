// The person's policy as pure functions (sw/policy.js): classes and targets,
// site patterns, scopes, the decision order, and the sentences of a refusal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  AGENT_CLASSES,
  agentPreloadAllowed,
  classify,
  classifyRelay,
  decide,
  isInternal,
  looksIrreversible,
  matchScore,
  normalisePattern,
  normalisePolicy,
  refusal,
  ruleFor,
  scopeOf,
  siteMatters,
  siteOf,
} from '../sw/policy.js';

const local = { id: 'local-a', client: 'Claude Code', remote: false };
const remote = { id: 'conn-b', client: 'relay', remote: true };
const policy = (p = {}) => normalisePolicy(p);
const verdict = (p, call, url, extra = {}) =>
  decide({ policy: policy(p), paused: false, session: local, call, url, ...extra });

test('each tool has its class, and a navigate is act on its destination', () => {
  const cases = [
    ['read_page', {}, 'read'],
    ['get_page_text', {}, 'read'],
    ['find', { query: 'x' }, 'read'],
    ['read_console_messages', {}, 'read'],
    ['read_network_requests', {}, 'read'],
    ['computer', { action: 'screenshot' }, 'read'],
    ['computer', { action: 'zoom' }, 'read'],
    ['computer', { action: 'left_click' }, 'act'],
    ['computer', { action: 'type', text: 'x' }, 'act'],
    ['computer', { action: 'key', text: 'Enter' }, 'act'],
    ['computer', { action: 'left_click_drag' }, 'act'],
    ['computer', { action: 'wait' }, null],
    ['form_input', {}, 'act'],
    ['upload_image', {}, 'act'],
    ['javascript_tool', { code: '1' }, 'script'],
    ['a_tool_from_the_future', {}, 'script'],
    ['tabs_context', {}, null],
    ['tabs_context_mcp', {}, null],
    ['update_plan', {}, null],
    ['tabs_create_mcp', {}, null],
  ];
  for (const [tool, args, cls] of cases) assert.equal(classify(tool, args).cls, cls, `${tool} ${JSON.stringify(args)}`);
  assert.deepEqual(classify('navigate', { url: 'bank.example/login' }), {
    cls: 'act',
    url: 'https://bank.example/login',
    tab: false,
    full: false,
    click: false,
  });
  assert.equal(classify('navigate', { url: 'localhost:8080' }).url, 'http://localhost:8080');
  assert.equal(classify('navigate', { action: 'back' }).tab, true);
  assert.equal(classify('navigate', { url: 'reload' }).tab, true);
  assert.equal(classify('tabs_create', { url: 'https://a.example/' }).url, 'https://a.example/');
  assert.equal(classify('upload_image', {}).full, true);
  assert.equal(classify('dev_utils', { action: 'echo' }).full, true);
  assert.equal(classify('computer', { action: 'left_click' }).click, true);
  assert.equal(classify('computer', { action: 'right_click' }).click, false);
});

test("the relay's direct methods get the classes of the tools they mirror", () => {
  assert.equal(classifyRelay('getTabs').cls, null);
  assert.equal(classifyRelay('browser_navigate', { url: 'https://a.example/x' }).url, 'https://a.example/x');
  assert.equal(classifyRelay('createTab', {}).cls, null);
  assert.equal(classifyRelay('createTab', { url: 'https://a.example/' }).cls, 'act');
  assert.equal(classifyRelay('click').cls, 'act');
  assert.equal(classifyRelay('click').click, true);
  assert.equal(classifyRelay('type').cls, 'act');
  assert.equal(classifyRelay('screenshot').cls, 'read');
  assert.equal(classifyRelay('forwardCDPCommand').cls, 'script');
  assert.equal(classifyRelay('somethingNew').cls, 'script');
});

test('site patterns: an origin, a host, a host and its subdomains', () => {
  assert.equal(normalisePattern(' HTTPS://Mail.Example.com/ '), 'https://mail.example.com');
  assert.equal(normalisePattern('*.Bank.example'), '*.bank.example');
  assert.equal(normalisePattern('localhost:8080'), 'localhost:8080');
  assert.equal(normalisePattern('https://a.example/path'), '');
  assert.equal(normalisePattern('not a site'), '');
  assert.equal(normalisePattern('*.'), '');
  const site = siteOf('https://www.bank.example/account');
  assert.ok(matchScore('*.bank.example', site) > 0);
  assert.ok(matchScore('*.bank.example', siteOf('https://bank.example/')) > 0);
  assert.equal(matchScore('*.bank.example', siteOf('https://notbank.example/')), 0);
  assert.equal(matchScore('bank.example', site), 0);
  assert.ok(matchScore('www.bank.example', site) > 0);
  assert.equal(matchScore('https://www.bank.example', siteOf('http://www.bank.example/')), 0);
  assert.ok(matchScore('127.0.0.1:8080', siteOf('http://127.0.0.1:8080/x')) > 0);
  assert.equal(matchScore('127.0.0.1:8080', siteOf('http://127.0.0.1:9090/x')), 0);
  // The most specific rule wins: an origin over a host over a wildcard.
  const sites = [
    { pattern: '*.bank.example', act: 'block' },
    { pattern: 'www.bank.example', act: 'ask' },
    { pattern: 'https://www.bank.example', act: 'allow' },
  ];
  assert.equal(ruleFor(sites, site).act, 'allow');
  assert.equal(ruleFor(sites, siteOf('http://www.bank.example/')).act, 'ask');
  assert.equal(ruleFor(sites, siteOf('https://pay.bank.example/')).act, 'block');
  assert.equal(siteOf('about:blank'), null);
});

test('browser-internal pages, the web store and extension pages are internal', () => {
  for (const u of [
    'chrome://settings',
    'chrome-extension://abc/popup.html',
    'https://chromewebstore.google.com/detail/x',
    'https://chrome.google.com/webstore/category/extensions',
    'view-source:https://a.example/',
  ]) {
    assert.ok(isInternal(u), u);
  }
  for (const u of ['https://google.com/', 'https://chrome.google.com/other', 'about:blank']) {
    assert.ok(!isInternal(u), u);
  }
});

test("today's behaviour is the default: local clients may do anything on any site", () => {
  for (const [tool, args] of [
    ['javascript_tool', {}],
    ['computer', { action: 'left_click' }],
    ['read_page', {}],
    ['upload_image', {}],
  ]) {
    assert.equal(verdict({}, classify(tool, args), 'https://bank.example/').verdict, 'allow', tool);
  }
  assert.equal(siteMatters(policy({}), classify('javascript_tool', {})), false, 'no tab lookup under the default');
  assert.equal(siteMatters(policy({ unlisted: 'ask' }), classify('javascript_tool', {})), true);
  assert.equal(siteMatters(policy({}), classify('navigate', { url: 'a.example' })), true);
  assert.equal(siteMatters(policy({}), classify('tabs_context', {})), false);
});

test('internal pages are blocked whatever the policy says', () => {
  const d = verdict(
    { sites: [{ pattern: 'settings', act: 'allow' }] },
    classify('navigate', { url: 'chrome://settings' }),
    'chrome://settings',
  );
  assert.deepEqual([d.verdict, d.why], ['block', 'internal']);
});

test('rules: allow, ask and block for each class; unlisted sites get the default', () => {
  const p = {
    unlisted: 'allow',
    sites: [{ pattern: '*.bank.example', read: 'allow', act: 'ask', script: 'block' }],
  };
  const url = 'https://www.bank.example/';
  assert.equal(verdict(p, classify('read_page'), url).verdict, 'allow');
  assert.equal(verdict(p, classify('form_input'), url).verdict, 'ask');
  assert.equal(verdict(p, classify('navigate', { url }), url).verdict, 'ask');
  const js = verdict(p, classify('javascript_tool'), url);
  assert.deepEqual([js.verdict, js.why, js.rule.pattern], ['block', 'rule', '*.bank.example']);
  assert.equal(verdict(p, classify('javascript_tool'), 'https://other.example/').verdict, 'allow');
  for (const cls of ['read_page', 'form_input', 'javascript_tool']) {
    const d = verdict({ unlisted: 'ask' }, classify(cls), 'https://other.example/');
    assert.deepEqual([d.verdict, d.why], ['ask', 'unlisted'], cls);
  }
  // No site (about:blank, or no tab yet) is nothing to protect.
  assert.equal(verdict({ unlisted: 'ask' }, classify('read_page'), null).verdict, 'allow');
});

test('grants turn an ask into an allow, never a block', () => {
  const p = { unlisted: 'ask', sites: [{ pattern: 'blocked.example', act: 'block' }] };
  const grants = [
    { site: 'https://a.example', classes: ['read', 'act'] },
    { site: 'blocked.example', classes: ['read', 'act'] },
  ];
  const g = (tool, url) => verdict(p, classify(tool), url, { grants });
  assert.deepEqual(
    [g('form_input', 'https://a.example/x').verdict, g('form_input', 'https://a.example/x').why],
    ['allow', 'granted'],
  );
  assert.equal(g('javascript_tool', 'https://a.example/x').verdict, 'ask', 'a grant covers only its classes');
  assert.equal(g('form_input', 'http://a.example/x').verdict, 'ask', 'an origin grant is that origin only');
  assert.equal(g('form_input', 'https://blocked.example/').verdict, 'block');
});

test('irreversible clicks ask even on allowed sites, when the person wants that', () => {
  const click = classify('computer', { action: 'left_click' });
  const url = 'https://shop.example/';
  assert.equal(verdict({}, click, url, { irreversible: true }).verdict, 'allow');
  const d = verdict({ confirmIrreversible: true }, click, url, { irreversible: true });
  assert.deepEqual([d.verdict, d.why], ['ask', 'irreversible']);
  assert.equal(verdict({ confirmIrreversible: true }, click, url).verdict, 'allow');
  assert.ok(siteMatters(policy({ confirmIrreversible: true }), click));
  for (const s of ['Buy now', 'Place order', 'Pay £12', 'Delete repository', 'Send', 'Create account', '/checkout']) {
    assert.ok(looksIrreversible(s), s);
  }
  for (const s of ['Search', 'Next', 'Sender details', 'Show more', 'Payment methods']) {
    assert.ok(!looksIrreversible(s), s);
  }
});

test('scopes: remote clients start at act, local at full; the person sets each client', () => {
  const p = policy({});
  assert.equal(scopeOf(p, local), 'full');
  assert.equal(scopeOf(p, remote), 'act');
  const js = classify('javascript_tool');
  const r = decide({ policy: p, paused: false, session: remote, call: js, url: 'https://a.example/' });
  assert.deepEqual([r.verdict, r.why], ['block', 'scope']);
  assert.equal(
    decide({ policy: p, paused: false, session: remote, call: classify('upload_image'), url: null }).why,
    'scope',
  );
  assert.equal(
    decide({ policy: p, paused: false, session: remote, call: classify('dev_utils'), url: null }).why,
    'scope',
  );
  assert.equal(
    decide({ policy: p, paused: false, session: remote, call: classify('form_input'), url: null }).verdict,
    'allow',
  );
  const set = policy({ scopes: { 'remote:relay': 'full', 'local:Claude Code': 'read' } });
  assert.equal(decide({ policy: set, paused: false, session: remote, call: js, url: null }).verdict, 'allow');
  const ro = decide({ policy: set, paused: false, session: local, call: classify('form_input'), url: null });
  assert.deepEqual([ro.verdict, ro.why], ['block', 'scope']);
  assert.equal(
    decide({ policy: set, paused: false, session: local, call: classify('read_page'), url: null }).verdict,
    'allow',
  );
  // A remote client does not get a local client's scope by giving its name.
  assert.equal(scopeOf(set, { client: 'Claude Code', remote: true }), 'act');
});

test('pause blocks everything, tools with no page too', () => {
  for (const tool of ['tabs_context', 'read_page', 'update_plan']) {
    const d = decide({ policy: policy({}), paused: true, session: local, call: classify(tool), url: null });
    assert.deepEqual([d.verdict, d.why], ['block', 'paused'], tool);
  }
});

test('the policy as stored is checked: bad patterns and values are dropped', () => {
  const p = normalisePolicy({
    unlisted: 'sometimes',
    sites: [
      { pattern: 'Good.example', read: 'allow', act: 'nope', script: 'block' },
      { pattern: 'good.example', read: 'block' },
      { pattern: 'bad pattern' },
    ],
    scopes: { 'local:a': 'full', 'local:b': 'admin' },
    timeoutMs: 5,
    confirmIrreversible: 'yes',
  });
  assert.equal(p.unlisted, 'allow');
  assert.deepEqual(p.sites, [
    { pattern: 'good.example', read: 'allow', act: 'allow', script: 'block', secrets: false },
  ]);
  assert.deepEqual(p.scopes, { 'local:a': 'full' });
  assert.equal(p.timeoutMs, 120000);
  assert.equal(p.confirmIrreversible, false);
});

test('a refusal names the site, the class and the policy', () => {
  const p = policy({ sites: [{ pattern: '*.bank.example', act: 'block' }] });
  const call = classify('computer', { action: 'left_click' });
  const url = 'https://www.bank.example/pay';
  const d = decide({ policy: p, paused: false, session: local, call, url });
  const text = refusal({ tool: 'computer', decision: d, call, url, session: local, policy: p });
  assert.match(text, /blocks computer \(act\) on https:\/\/www\.bank\.example/);
  assert.match(text, /"\*\.bank\.example" says act = block/);
  const scope = refusal({
    tool: 'javascript_tool',
    decision: { why: 'scope' },
    call: classify('javascript_tool'),
    url: null,
    session: remote,
    policy: p,
  });
  assert.match(scope, /relay \(remote\) has the read and act scope/);
  assert.match(
    refusal({ tool: 'find', decision: { why: 'paused' }, call: classify('find'), url, session: local, policy: p }),
    /paused all agents/,
  );
  assert.match(
    refusal({ tool: 'find', decision: { why: 'timeout' }, call: classify('find'), url, session: local, policy: p }),
    /within 120 s/,
  );
  assert.match(
    refusal({ tool: 'find', decision: { why: 'denied' }, call: classify('find'), url, session: local, policy: p }),
    /denied find \(read\)/,
  );
});

test('the agent is preloaded unless every class of the tools that use it is blocked on the site', () => {
  // read_page, find, get_page_text (read); clicks by ref, form_input (act).
  for (const tool of ['read_page', 'find', 'get_page_text', 'form_input']) {
    assert.ok(AGENT_CLASSES.includes(classify(tool, {}).cls), tool);
  }
  assert.ok(AGENT_CLASSES.includes(classify('computer', { action: 'left_click', ref: 'ref_1' }).cls));
  const rule = (read, act, script) => ({ sites: [{ pattern: 'site.example', read, act, script }] });
  const cases = [
    { name: 'no rule', p: {}, url: 'https://site.example/', want: true },
    { name: 'all blocked', p: rule('block', 'block', 'block'), url: 'https://site.example/a', want: false },
    {
      name: 'read and act blocked, scripts allowed',
      p: rule('block', 'block', 'allow'),
      url: 'https://site.example/',
      want: false,
    },
    { name: 'read blocked, act allowed', p: rule('block', 'allow', 'block'), url: 'https://site.example/', want: true },
    { name: 'act blocked, read asks', p: rule('ask', 'block', 'block'), url: 'https://site.example/', want: true },
    { name: 'all ask', p: rule('ask', 'ask', 'ask'), url: 'https://site.example/', want: true },
    { name: 'another site', p: rule('block', 'block', 'block'), url: 'https://other.example/', want: true },
    { name: 'unlisted sites ask', p: { unlisted: 'ask' }, url: 'https://site.example/', want: true },
    { name: 'the web store', p: {}, url: 'https://chromewebstore.google.com/detail/x', want: false },
    { name: 'a file', p: rule('block', 'block', 'block'), url: 'file:///tmp/a.html', want: true },
  ];
  for (const c of cases) assert.equal(agentPreloadAllowed(policy(c.p), c.url), c.want, c.name);
});

// The organization's policy over the person's (sw/managed.js): managed
// settings win, managed site rules are consulted first, invalid managed
// values manage nothing, the organization's pause cannot be resumed, and
// the schema Chrome checks the policy against names every setting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { installFakeChrome } from './fake-chrome.js';
import { SETTINGS, SETTING_WORDS, mergePolicy, normaliseManaged, pauseState, read } from '../sw/managed.js';
import {
  DEFAULT_POLICY,
  decide,
  classify,
  refusal,
  scopeManaged,
  scopeOf,
  secretsAllowed,
  secretsRefusal,
} from '../sw/policy.js';
import { controlView, scopeView } from '../popup-view.js';

const LOCAL = { id: 'local-s1', client: 'Claude Code' };
const REMOTE = { id: 'conn-1', client: 'relay', remote: true };

test("no managed policy: the person's policy as it is, nothing marked managed", () => {
  for (const managed of [undefined, {}, null, 'nonsense']) {
    const p = mergePolicy({ unlisted: 'ask', sites: [{ pattern: 'a.example', read: 'block' }] }, managed);
    assert.deepEqual(p.managed, []);
    assert.deepEqual(p.managedScopes, []);
    assert.equal(p.unlisted, 'ask');
    assert.equal(p.sites.length, 1);
    assert.equal(p.sites[0].managed, undefined);
  }
  assert.deepEqual(mergePolicy(undefined, undefined), { ...DEFAULT_POLICY, managed: [], managedScopes: [] });
});

test("managed settings win over the person's, each one", () => {
  const own = {
    unlisted: 'allow',
    confirmIrreversible: false,
    localScope: 'full',
    remoteScope: 'full',
    timeoutMs: 60_000,
    auditMaxEntries: 5000,
    auditMaxDays: 30,
  };
  const org = {
    unlisted: 'ask',
    confirmIrreversible: true,
    localScope: 'act',
    remoteScope: 'read',
    timeoutMs: 30_000,
    auditMaxEntries: 200,
    auditMaxDays: 90,
  };
  const p = mergePolicy(own, org);
  for (const [k, v] of Object.entries(org)) assert.equal(p[k], v, k);
  assert.deepEqual([...p.managed].sort(), Object.keys(org).sort());
});

test("managed values are clamped as the person's are; values that are none manage nothing", () => {
  const p = mergePolicy(
    { unlisted: 'ask', localScope: 'read' },
    {
      unlisted: 'block',
      localScope: 'everything',
      confirmIrreversible: 'yes',
      timeoutMs: 99_999_999,
      auditMaxDays: 9999,
      sites: 'x',
    },
  );
  assert.equal(p.unlisted, 'ask', "an invalid unlisted leaves the person's");
  assert.equal(p.localScope, 'read');
  assert.equal(p.confirmIrreversible, false);
  assert.equal(p.timeoutMs, 3_600_000);
  assert.equal(p.auditMaxDays, 365);
  assert.deepEqual([...p.managed].sort(), ['auditMaxDays', 'timeoutMs']);
  assert.deepEqual(
    normaliseManaged({ bogus: 1, paused: false }).keys,
    [],
    'unknown keys and paused: false manage nothing',
  );
});

test("managed site rules are consulted before the person's, even less specific ones", () => {
  const p = mergePolicy(
    {
      sites: [
        { pattern: 'https://mail.corp.example', read: 'allow', act: 'allow', script: 'allow', secrets: true },
        { pattern: 'news.example', read: 'allow', act: 'allow', script: 'allow' },
      ],
    },
    {
      sites: [
        { pattern: '*.corp.example', read: 'allow', act: 'ask', script: 'block', secrets: false },
        { pattern: 'bad pattern!' },
      ],
    },
  );
  assert.deepEqual(
    p.sites.map((r) => [r.pattern, !!r.managed]),
    [
      ['*.corp.example', true],
      ['https://mail.corp.example', false],
      ['news.example', false],
    ],
  );
  const on = (tool, url) => decide({ policy: p, paused: false, session: LOCAL, call: classify(tool, {}), url });
  const script = on('javascript_tool', 'https://mail.corp.example/inbox');
  assert.equal(script.verdict, 'block');
  assert.equal(script.rule.managed, true);
  assert.equal(on('form_input', 'https://mail.corp.example/').verdict, 'ask');
  // The person's secrets opt-in does not reach past the organization's rule.
  assert.equal(secretsAllowed(p, 'https://mail.corp.example/login'), false);
  // Where no managed rule matches, the person's rules decide.
  assert.equal(on('javascript_tool', 'https://news.example/').verdict, 'allow');
  assert.equal(
    refusal({
      tool: 'javascript_tool',
      decision: script,
      call: classify('javascript_tool'),
      url: 'https://mail.corp.example/',
      session: LOCAL,
      policy: p,
    }),
    `The organization's site policy blocks javascript_tool (script) on https://mail.corp.example: its rule for "*.corp.example" says script = block. Tell the person why; their organization's policy sets this, and only their IT department can change it.`,
  );
  assert.match(
    secretsRefusal(p, 'https://mail.corp.example/login'),
    /^the person's organization does not let agents type secrets/,
  );
  assert.match(
    secretsRefusal(p, 'https://news.example/'),
    /^the person has not let agents type secrets .* tick "secrets"/,
  );
  // A managed rule may allow secrets: the person cannot take that back with a rule of their own.
  const allowed = mergePolicy(
    { sites: [{ pattern: 'bank.example', secrets: false }] },
    { sites: [{ pattern: 'bank.example', secrets: true }] },
  );
  assert.equal(secretsAllowed(allowed, 'https://bank.example/'), true);
});

test("managed scopes: a side's default drops the person's scopes on that side; per-client ones win", () => {
  const own = { scopes: { 'local:Cursor': 'read', 'remote:relay': 'full' } };
  const p = mergePolicy(own, { remoteScope: 'read', scopes: { 'local:Claude Code': 'act' } });
  assert.equal(scopeOf(p, REMOTE), 'read', "the person's full for the relay does not outrank the managed remote scope");
  assert.equal(scopeManaged(p, REMOTE), true);
  assert.equal(scopeOf(p, LOCAL), 'act');
  assert.equal(scopeManaged(p, LOCAL), true);
  assert.equal(scopeOf(p, { client: 'Cursor' }), 'read', "the person's own choice on an unmanaged side stays");
  assert.equal(scopeManaged(p, { client: 'Cursor' }), false);
  assert.equal(scopeManaged(p, { client: 'Zed' }), false, "local clients default to the person's localScope");
  const d = decide({
    policy: p,
    paused: false,
    session: REMOTE,
    call: classify('form_input'),
    url: 'https://a.example/',
  });
  assert.match(
    refusal({
      tool: 'form_input',
      decision: d,
      call: classify('form_input'),
      url: 'https://a.example/',
      session: REMOTE,
      policy: p,
    }),
    /relay \(remote\) has the read-only scope in Browser Bridge, set by the person's organization, so it was not run\. .*only their IT department/,
  );
});

test("pause: the organization's wins and is told apart; false leaves it to the person", () => {
  assert.deepEqual(pauseState(null, { paused: true }), { paused: true, by: 'organization' });
  assert.deepEqual(pauseState({ at: 1 }, { paused: true }), { paused: true, by: 'organization' });
  assert.deepEqual(pauseState({ at: 1 }, { paused: false }), { paused: true, by: 'person' });
  assert.deepEqual(pauseState(null, {}), { paused: false, by: null });
  assert.match(
    refusal({
      tool: 'read_page',
      decision: { why: 'pausedByOrganization' },
      call: classify('read_page'),
      url: '',
      session: LOCAL,
    }),
    /The person's organization paused all agents in Browser Bridge \(a managed policy\), so read_page was not run/,
  );
});

test('read() merges chrome.storage.managed over chrome.storage.local', async () => {
  const fake = installFakeChrome();
  await fake.storage.local.set({ policy: { unlisted: 'allow', timeoutMs: 5000 }, paused: { at: 1 } });
  await fake.storage.managed.set({ unlisted: 'ask' });
  const got = await read();
  assert.deepEqual(
    [got.policy.unlisted, got.policy.timeoutMs, got.paused, got.pausedBy],
    ['ask', 5000, true, 'person'],
  );
  assert.deepEqual(got.policy.managed, ['unlisted']);
  // A browser without managed storage, or one whose read fails: the person's policy.
  fake.storage.managed.get = async () => {
    throw new Error('Managed storage is not available');
  };
  assert.equal((await read()).policy.unlisted, 'allow');
  delete fake.storage.managed;
  assert.equal((await read()).policy.unlisted, 'allow');
});

test('the popup locks and marks what the organization sets, and names it', () => {
  const v = controlView({ unlisted: 'allow' }, null, { unlisted: 'ask', paused: true, auditMaxDays: 30 });
  assert.deepEqual(
    [v.askUnlisted, v.askUnlistedLocked, v.confirmIrreversibleLocked, v.paused, v.pauseLocked],
    [true, true, false, true, true],
  );
  assert.equal(v.pauseLabel, 'Paused by your organization');
  assert.match(v.pausedNote, /Only your IT department can resume them/);
  assert.equal(v.managedNote, 'Set by your organization: sites without a rule, how long the audit keeps them, pause.');
  assert.equal(controlView({}, null, {}).managedNote, '');
  const s = scopeView(
    { scopes: { 'local:Cursor': 'full' } },
    { id: 'local-a', client: 'Cursor' },
    { localScope: 'read' },
  );
  assert.deepEqual([s.scope, s.locked], ['read', true]);
  assert.equal(scopeView({}, { id: 'local-a', client: 'Cursor' }, {}).locked, false);
});

test('the schema Chrome checks the policy against names every managed setting, and only those', () => {
  const schema = JSON.parse(readFileSync(new URL('../managed_schema.json', import.meta.url), 'utf8'));
  const manifest = JSON.parse(readFileSync(new URL('../manifest.json', import.meta.url), 'utf8'));
  assert.equal(manifest.storage?.managed_schema, 'managed_schema.json');
  assert.equal(schema.type, 'object');
  assert.equal(schema.additionalProperties, undefined, 'Chrome refuses additionalProperties at the top level');
  assert.deepEqual(Object.keys(schema.properties).sort(), [...SETTINGS].sort());
  assert.deepEqual(Object.keys(SETTING_WORDS).sort(), [...SETTINGS].sort());
  // Every setting of the person's policy can be managed; pause too.
  assert.deepEqual(Object.keys(DEFAULT_POLICY).sort(), SETTINGS.filter((k) => k !== 'paused').sort());
  // Each schema has exactly one type (Chrome's rule), down to the site rules' fields.
  const walk = (s, at) => {
    assert.equal(typeof s.type, 'string', `${at} has a type`);
    for (const [k, sub] of Object.entries(s.properties || {})) walk(sub, `${at}.${k}`);
    if (s.items) walk(s.items, `${at}[]`);
    if (s.additionalProperties) walk(s.additionalProperties, `${at}{}`);
  };
  walk(schema, 'schema');
  assert.deepEqual(Object.keys(schema.properties.sites.items.properties).sort(), [
    'act',
    'pattern',
    'read',
    'script',
    'secrets',
  ]);
});

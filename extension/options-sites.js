// The options page's "Sites agents may use": the site rules of the person's
// policy (sw/policy.js), in chrome.storage.local "policy". Each rule has a
// verdict per class (allow, ask, block); the service worker reads the policy
// as it changes (sw/gate.js). The organization's rules (chrome.storage.managed,
// sw/managed.js) come first, shown but not editable. The list is drawn again
// on every change.

import { LOCAL } from './sw/store.js';
import { CLASSES, VERDICTS, normalisePattern, normalisePolicy } from './sw/policy.js';
import { mergePolicy, readManaged } from './sw/managed.js';

const $ = (id) => document.getElementById(id);
const CLASS_LABELS = { read: 'Read', act: 'Act', script: 'Scripts' };

async function stored() {
  return (await chrome.storage.local.get(LOCAL.policy))[LOCAL.policy] || {};
}

// Writes one after another: two changes in quick succession must not each
// read the policy before the other wrote it.
let writing = Promise.resolve();
function writeSites(fn) {
  writing = writing
    .then(async () => {
      const p = await stored();
      await chrome.storage.local.set({ [LOCAL.policy]: { ...p, sites: fn(normalisePolicy(p).sites) } });
    })
    .catch((err) => {
      $('site-error').textContent = `The rule was not saved: ${err.message}`;
    });
  return writing;
}

function el(tag, { dataset, ...props } = {}, ...children) {
  const e = Object.assign(document.createElement(tag), props);
  if (dataset) Object.assign(e.dataset, dataset);
  for (const c of children) if (c) e.append(c);
  return e;
}

// An organization's rule: its verdicts as text, marked, nothing to change.
function managedRule(rule) {
  return el(
    'li',
    { className: 'site-rule managed', dataset: { pattern: rule.pattern, managed: 'true' } },
    el('code', { textContent: rule.pattern }),
    ...CLASSES.map((cls) => el('span', { className: 'site-class', textContent: `${CLASS_LABELS[cls]}: ${rule[cls]}` })),
    el('span', { className: 'site-class', textContent: rule.secrets ? 'secrets allowed' : 'no secrets' }),
    el('span', { className: 'managed-mark', textContent: 'Set by your organization' }),
  );
}

async function draw() {
  const [own, managed] = await Promise.all([stored(), readManaged()]);
  const sites = mergePolicy(own, managed).sites;
  const list = $('site-rules');
  $('site-managed-hint').hidden = !sites.some((r) => r.managed);
  if (!sites.length) {
    list.replaceChildren(el('li', { className: 'hint', textContent: 'No site has a rule yet.' }));
    return;
  }
  list.replaceChildren(
    ...sites.map((rule) => {
      if (rule.managed) return managedRule(rule);
      const selects = CLASSES.map((cls) => {
        const id = `rule-${rule.pattern}-${cls}`;
        const select = el(
          'select',
          { id },
          ...VERDICTS.map((v) => el('option', { value: v, textContent: v, selected: rule[cls] === v })),
        );
        select.addEventListener('change', () => {
          const verdict = select.value;
          writeSites((all) => all.map((r) => (r.pattern === rule.pattern ? { ...r, [cls]: verdict } : r)));
        });
        return el(
          'span',
          { className: 'site-class' },
          el('label', { htmlFor: id, textContent: CLASS_LABELS[cls] }),
          select,
        );
      });
      // The secrets opt-in: agents may type into this site's password fields.
      const secretsId = `rule-${rule.pattern}-secrets`;
      const secrets = el('input', { type: 'checkbox', id: secretsId, checked: rule.secrets });
      secrets.addEventListener('change', () => {
        const on = secrets.checked;
        writeSites((all) => all.map((r) => (r.pattern === rule.pattern ? { ...r, secrets: on } : r)));
      });
      const secretsBox = el(
        'span',
        { className: 'site-class', title: 'Let agents type into password fields on this site' },
        secrets,
        el('label', { htmlFor: secretsId, textContent: 'secrets' }),
      );
      const remove = el('button', {
        type: 'button',
        className: 'small danger',
        textContent: 'Remove',
        ariaLabel: `Remove the rule for ${rule.pattern}`,
      });
      remove.addEventListener('click', () => writeSites((all) => all.filter((r) => r.pattern !== rule.pattern)));
      return el(
        'li',
        { className: 'site-rule', dataset: { pattern: rule.pattern } },
        el('code', { textContent: rule.pattern }),
        ...selects,
        secretsBox,
        remove,
      );
    }),
  );
}

$('site-add').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const raw = $('site-pattern').value;
  const pattern = normalisePattern(raw);
  if (!pattern) {
    $('site-error').textContent =
      `"${raw.trim()}" is not a site: give an origin (https://mail.example.com), a host (mail.example.com) or *.example.com.`;
    return;
  }
  $('site-error').textContent = '';
  // A new rule asks for everything: the person loosens it from there.
  await writeSites((all) => [
    ...all.filter((r) => r.pattern !== pattern),
    { pattern, read: 'ask', act: 'ask', script: 'ask', secrets: false },
  ]);
  $('site-pattern').value = '';
});

chrome.storage.onChanged.addListener((changes, area) => {
  if ((area === 'local' && LOCAL.policy in changes) || area === 'managed') draw();
});
draw();

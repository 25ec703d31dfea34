// The options page's "What agents did": the audit trail (sw/audit.js,
// chrome.storage.local "audit"), newest first, filtered by client, tool,
// decision and words, and exported as JSON Lines (the entries the filter
// shows). Drawn again when the trail changes.

import { LOCAL } from './sw/store.js';
import { matches, toJsonLines } from './sw/audit.js';
import { mergePolicy, readManaged } from './sw/managed.js';

const $ = (id) => document.getElementById(id);
/** Rows drawn at most; the count and the export have them all. */
const ROWS = 300;

let entries = [];

function filter() {
  return {
    client: $('audit-client').value,
    tool: $('audit-tool').value,
    decision: $('audit-decision').value,
    text: $('audit-text').value.trim(),
  };
}

const shown = () => entries.filter((e) => matches(e, filter()));

function options(select, values) {
  const keep = select.value;
  select.replaceChildren(
    Object.assign(document.createElement('option'), { value: '', textContent: 'All' }),
    ...values.map((v) => Object.assign(document.createElement('option'), { value: v, textContent: v })),
  );
  select.value = values.includes(keep) ? keep : '';
}

function cell(text, className) {
  const td = document.createElement('td');
  td.textContent = text;
  td.title = text; // a long refusal is cut on screen
  if (className) td.className = className;
  return td;
}

function drawRows() {
  const list = shown();
  $('audit-count').textContent = entries.length
    ? `${list.length} of ${entries.length} calls${list.length > ROWS ? `; the newest ${ROWS} are shown, the export has all` : ''}.`
    : 'No calls yet.';
  $('audit-table')
    .querySelector('tbody')
    .replaceChildren(
      ...list
        .slice(-ROWS)
        .reverse()
        .map((e) => {
          const tr = document.createElement('tr');
          tr.dataset.decision = e.decision || '';
          const when = new Date(e.at);
          tr.append(
            cell(
              when.toLocaleString([], {
                month: 'short',
                day: 'numeric',
                hour: '2-digit',
                minute: '2-digit',
                second: '2-digit',
              }),
            ),
            cell(`${e.client}${e.remote ? ' (remote)' : ''}`),
            cell(e.tool),
            cell(e.site || '—'),
            cell(e.decision || '—', `decision ${e.decision || ''}`),
            cell(e.outcome === 'ok' ? 'ok' : `${e.outcome}${e.error ? `: ${e.error}` : ''}`, `outcome ${e.outcome}`),
            cell(String(e.ms ?? '')),
          );
          tr.title = `${when.toLocaleString()}; arguments: ${JSON.stringify(e.args || {})}`;
          return tr;
        }),
    );
}

async function load() {
  const [got, managed] = await Promise.all([chrome.storage.local.get([LOCAL.audit, LOCAL.policy]), readManaged()]);
  entries = got[LOCAL.audit] || [];
  const p = mergePolicy(got[LOCAL.policy], managed);
  const byOrg = p.managed.includes('auditMaxEntries') || p.managed.includes('auditMaxDays');
  $('audit-bounds').textContent =
    `The newest ${p.auditMaxEntries.toLocaleString()} calls are kept, none older than ${p.auditMaxDays} days` +
    `${byOrg ? ' (set by your organization)' : ''}.`;
  options($('audit-client'), [...new Set(entries.map((e) => e.client))].sort());
  options($('audit-tool'), [...new Set(entries.map((e) => e.tool))].sort());
  drawRows();
}

// options.html#audit shows the trail alone (a link from elsewhere, a screenshot).
const onlyAudit = () => document.body.classList.toggle('only-audit', location.hash === '#audit');
window.addEventListener('hashchange', onlyAudit);
onlyAudit();

for (const id of ['audit-client', 'audit-tool', 'audit-decision']) $(id).addEventListener('change', drawRows);
$('audit-text').addEventListener('input', drawRows);
$('audit-export').addEventListener('click', () => {
  const a = $('audit-download');
  if (a.href) URL.revokeObjectURL(a.href);
  a.href = URL.createObjectURL(new Blob([toJsonLines(shown())], { type: 'application/jsonl' }));
  a.click();
});
chrome.storage.onChanged.addListener((changes, area) => {
  if ((area === 'local' && (LOCAL.audit in changes || LOCAL.policy in changes)) || area === 'managed') load();
});
load();

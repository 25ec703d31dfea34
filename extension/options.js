// The options page: settings in chrome.storage.local (sw/store.js,
// DEFAULT_SETTINGS). After saving, it asks the service worker to say hello
// again so a new profile label reaches the bridge.

import { LOCAL, getSettings } from './sw/store.js';

const form = document.getElementById('form');

async function load() {
  const s = await getSettings();
  form.elements.onSessionEnd.value = s.onSessionEnd;
  form.elements.profileLabel.value = s.profileLabel;
}

form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const current = await getSettings();
  const next = {
    ...current,
    onSessionEnd: form.elements.onSessionEnd.value === 'close' ? 'close' : 'ungroup',
    profileLabel: form.elements.profileLabel.value.trim().slice(0, 64),
  };
  await chrome.storage.local.set({ [LOCAL.settings]: next });
  chrome.runtime.sendMessage({ type: 'settingsChanged' }).catch(() => {});
  const saved = document.getElementById('saved');
  saved.hidden = false;
  setTimeout(() => { saved.hidden = true; }, 2000);
});

load();

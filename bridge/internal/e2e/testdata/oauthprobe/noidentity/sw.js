// config.js (written by the test) sets self.PROBE = {control: "http://127.0.0.1:PORT"}.
importScripts('config.js');
fetch(`${self.PROBE.control}/result`, {
  method: 'POST',
  body: JSON.stringify({ name: 'no-identity-permission', ok: typeof chrome.identity !== 'undefined', detail: `typeof chrome.identity = ${typeof chrome.identity}` })
});

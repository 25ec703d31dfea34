// Waiting for the page to settle after an action, and saying what changed.
// A click often starts work the page finishes later (a modal inserted after a
// timeout and faded in, a list re-rendered after a fetch); a tool that
// returns at once leaves the model to read a page that is still changing and
// to read it again. The worker (sw/settle.js) calls watch before the action
// and settleCheck after it until the DOM has been quiet for quietMs and the
// animations that started since watch have finished (or its bound passed);
// the last answer names what changed: dialogs opened or closed, alerts and
// status messages, a same-document navigation, else that the page changed.
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;
  const { clean } = P.util;
  const { refOf } = P.refs;
  const { roleOf, nameOf } = P.a11y;

  const DIALOGS = 'dialog[open], [role=dialog], [role=alertdialog], [aria-modal=true]';
  const MESSAGES = '[role=alert], [role=status], [aria-live]:not([aria-live=off]), output';

  // Whether el is drawn: CSS hides it neither by display, visibility nor opacity.
  const shown = (el) =>
    el.checkVisibility
      ? el.checkVisibility({ opacityProperty: true, visibilityProperty: true })
      : el.getClientRects().length > 0;

  const visibleDialogs = () => new Set([...document.querySelectorAll(DIALOGS)].filter(shown));

  const messageTexts = () => {
    const m = new Map();
    for (const el of document.querySelectorAll(MESSAGES)) if (shown(el)) m.set(el, clean(el.innerText, 120));
    return m;
  };

  // Animations of the document that are running now and will end by themselves.
  const finiteRunning = () =>
    document.getAnimations().filter((a) => {
      if (a.playState !== 'running') return false;
      const t = a.effect && a.effect.getComputedTiming ? a.effect.getComputedTiming() : null;
      return !t || Number.isFinite(t.endTime);
    });

  /** The state of the current watch, kept on the namespace (the worker calls watch, then settled). */
  let watching = null;

  /** Starts watching the DOM for the action the worker is about to send. */
  P.ops.watch = () => {
    if (watching) watching.observer.disconnect();
    const w = {
      url: location.href,
      dialogs: visibleDialogs(),
      messages: messageTexts(),
      animations: new Set(document.getAnimations()),
      since: performance.now(),
      lastChange: 0,
      changes: 0,
      observer: null,
    };
    w.observer = new MutationObserver((records) => {
      w.changes += records.length;
      w.lastChange = performance.now();
    });
    w.observer.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
    watching = w;
    return { url: w.url };
  };

  /**
   * args: {quietMs, last}: whether the page has settled since watch: the DOM
   * unchanged for quietMs and no animation that started since watch still
   * running (in a hidden tab, whose animations do not advance, only the DOM
   * counts). Answers {done: false, wait} (ms worth waiting before asking
   * again) or, once settled or when last is set, {done: true, settled,
   * changed, url, notes: [sentence]} and stops watching. The worker asks
   * from its own timers, which a hidden tab does not slow down as it does
   * the page's.
   */
  P.ops.settleCheck = (args) => {
    const w = watching;
    if (!w) throw new Error('settleCheck called without watch');
    const quietMs = args.quietMs ?? 100;
    // Records the observer has not delivered yet are changes made just now.
    const pending = w.observer.takeRecords();
    if (pending.length) {
      w.changes += pending.length;
      w.lastChange = performance.now();
    }
    const quietFor = performance.now() - Math.max(w.since, w.lastChange);
    const busy = document.visibilityState === 'hidden' ? 0 : finiteRunning().filter((a) => !w.animations.has(a)).length;
    const settled = quietFor >= quietMs && busy === 0;
    if (!settled && !args.last) return { done: false, wait: busy ? 50 : Math.max(16, quietMs - quietFor) };
    w.observer.disconnect();
    if (watching === w) watching = null;
    return { done: true, ...summary(w, settled) };
  };

  const describeEl = (el) => {
    const role = roleOf(el);
    const name = nameOf(el, role);
    return `${name ? `"${name}" ` : ''}[${refOf(el)}]`;
  };

  function summary(w, settled) {
    const notes = [];
    if (location.href !== w.url) notes.push(`navigated to ${location.href}`);
    const now = visibleDialogs();
    for (const d of now) if (!w.dialogs.has(d)) notes.push(`a dialog opened: ${describeEl(d)}`);
    for (const d of w.dialogs) {
      if (!now.has(d)) notes.push(`a dialog closed${d.isConnected ? `: ${describeEl(d)}` : ''}`);
    }
    for (const [el, text] of messageTexts()) {
      if (text && w.messages.get(el) !== text) notes.push(`${roleOf(el) === 'alert' ? 'alert' : 'message'}: "${text}"`);
    }
    const changed = w.changes > 0 || notes.length > 0;
    if (changed && notes.length === 0) notes.push('the page changed');
    return { changed, settled, url: location.href, notes };
  }
})();

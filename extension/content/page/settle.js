// Waiting for the page to settle after an action, and saying what changed.
// A click often starts work the page finishes later (a modal inserted after a
// timeout and faded in, a list re-rendered after a fetch); a tool that
// returns at once leaves the model to read a page that is still changing and
// to read it again. The worker (sw/settle.js) calls watch before the action
// and settle after it; settle answers once the page has settled (or its
// bound passed) and names what changed: dialogs opened or closed, alerts and
// status messages, a same-document navigation, else that the page changed.
//
// Settled means: no animation that started since watch still running, and
//   - when the DOM changed or an animation ran: no change for quietMs since
//     the last change or the end of the last animation;
//   - when nothing changed at all: idleMs since the action (the worker picks
//     idleMs: short when no page script ran for the action, longer when a
//     handler ran and may have deferred its work to a timer).
// In a visible tab settle waits here, with the page's timers and the
// animations' own promises, and answers once: one call into the page after
// the action. A hidden tab's timers fire once a second, so there it answers
// at once with how long to wait, and the worker paces the checks.
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

  /** The state of the current watch (the worker calls watch, then settle). */
  let watching = null;

  /**
   * How long a watch goes on after settle answered (ms): the worker may ask
   * again after a request the action started answers (sw/settle.js), and
   * the answer then compares with the page as it was before the action.
   */
  const LINGER_MS = 5000;

  function stop(w) {
    clearTimeout(w.expiry);
    w.observer.disconnect();
    if (w.onNavigate) globalThis.navigation.removeEventListener('navigate', w.onNavigate);
    if (w.onNavigated) globalThis.navigation.removeEventListener('navigatesuccess', w.onNavigated);
    if (watching === w) watching = null;
  }

  /** Starts watching the DOM for the action the worker is about to send. */
  P.ops.watch = () => {
    if (watching) stop(watching);
    const w = {
      url: location.href,
      dialogs: visibleDialogs(),
      messages: messageTexts(),
      animations: new Set(document.getAnimations()),
      seen: new Set(), // the animations started since watch (their end counts as a change)
      actedAt: 0, // when settle was first called: the action had just returned
      lastChange: 0,
      changes: 0,
      leavingBy: null, // the navigate event of a navigation to another document the action started
      observer: null,
      onNavigate: null,
      onNavigated: null,
      expiry: 0,
    };
    w.observer = new MutationObserver((records) => {
      w.changes += records.length;
      w.lastChange = performance.now();
    });
    w.observer.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
    // The Navigation API's navigate event fires while the click or key is
    // dispatched, before the browser reports the navigation to the worker:
    // settle must not call a page quiet that is about to be left.
    if (globalThis.navigation) {
      w.onNavigate = (e) => {
        if (!e.destination.sameDocument) w.leavingBy = e;
      };
      // An intercepted navigation (a router's) stays in this document.
      w.onNavigated = () => {
        w.leavingBy = null;
      };
      globalThis.navigation.addEventListener('navigate', w.onNavigate);
      globalThis.navigation.addEventListener('navigatesuccess', w.onNavigated);
    }
    watching = w;
    return { url: w.url };
  };

  /** The URL the action is leaving this document for, unless a handler cancelled that navigation. */
  const leaving = (w) => (w.leavingBy && !w.leavingBy.defaultPrevented ? w.leavingBy.destination.url : '');

  /**
   * Where the watch stands: {settled, wait, busy} — wait is how long (ms)
   * to wait before things can be settled, busy the animations to wait for.
   */
  function look(w, { quietMs, idleMs, hidden }) {
    // Records the observer has not delivered yet are changes made just now.
    const pending = w.observer.takeRecords();
    const now = performance.now();
    if (pending.length) {
      w.changes += pending.length;
      w.lastChange = now;
    }
    // A hidden tab's animations do not advance: only the DOM counts there.
    const busy = hidden ? [] : finiteRunning().filter((a) => !w.animations.has(a));
    for (const a of busy) {
      if (w.seen.has(a)) continue;
      w.seen.add(a);
      // Its end is a change: what it revealed needs quietMs to follow up (a status set on transitionend).
      a.finished.then(
        () => (w.lastChange = Math.max(w.lastChange, performance.now())),
        () => {},
      );
    }
    const changed = w.changes > 0 || w.seen.size > 0;
    const since = changed ? Math.max(w.actedAt, w.lastChange) : w.actedAt;
    const wait = (changed ? quietMs : idleMs) - (now - since);
    return { settled: wait <= 0 && busy.length === 0 && !leaving(w), wait, busy };
  }

  /**
   * args: {quietMs, idleMs, maxMs, restart, last}. Answers, once the page
   * settled or after maxMs, {done: true, settled, changed, leaving, url,
   * notes: [sentence]}, and stops watching (LINGER_MS later, unless last is
   * set, so that the worker can ask again); in a hidden tab, or when last is
   * set, at once: {done: false, wait} (ms worth waiting before asking again)
   * or the same final answer. restart: the worker waited for something
   * outside the page (a request the action started): count idleMs from now.
   * leaving: the action started a navigation to another document (the
   * worker waits for it); the answer is given at once then.
   */
  P.ops.settle = (args) => {
    const w = watching;
    if (!w) throw new Error('settle called without watch');
    const quietMs = args.quietMs ?? 40;
    const opts = { quietMs, idleMs: args.idleMs ?? quietMs, hidden: document.visibilityState === 'hidden' };
    const start = performance.now();
    if (!w.actedAt || args.restart) w.actedAt = start;
    clearTimeout(w.expiry);
    const finish = (settled) => {
      if (args.last) stop(w);
      else w.expiry = setTimeout(() => stop(w), LINGER_MS);
      return { done: true, ...summary(w, settled) };
    };
    const first = look(w, opts);
    if (first.settled || args.last || leaving(w)) return finish(first.settled);
    if (opts.hidden) return { done: false, wait: Math.max(16, Math.ceil(first.wait)) };
    const deadline = start + Math.max(0, args.maxMs ?? 1500);
    return new Promise((resolve) => {
      const check = () => {
        // Another watch began (a second action on the tab): this one's answer no longer matters.
        if (watching !== w) {
          return resolve({ done: true, settled: false, changed: false, url: location.href, notes: [] });
        }
        const st = look(w, opts);
        const left = deadline - performance.now();
        if (st.settled || leaving(w) || left <= 0) return resolve(finish(st.settled));
        // Look again after the quiet window or when an animation ends, whichever comes first.
        let woken = false;
        const wake = () => {
          if (woken) return;
          woken = true;
          clearTimeout(timer);
          check();
        };
        const timer = setTimeout(wake, Math.min(left, Math.max(1, st.busy.length ? left : st.wait)));
        if (st.busy.length) Promise.race(st.busy.map((a) => a.finished)).then(wake, wake);
      };
      check();
    });
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
    return { changed, settled, leaving: leaving(w), url: location.href, notes };
  }
})();

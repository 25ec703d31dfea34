// The warm-up: the first read of a new document ran the page agent's code
// cold (each function compiled on its first call, each property access
// learning its object shapes, the DOM's interfaces and the regular
// expressions made anew for this document's isolated world), up to 3× a read
// right after it. A preloaded agent (sw/preload.js) runs read_page's walk
// once over a small sample built here, WARM_DELAY_MS after the page's load
// event, while the model reads navigate's answer (seconds). Not at once:
// the warm-up costs about what it saves the first read, so a call that
// comes right after the load (a scripted client's, or a model's that needs
// no turn) would wait for it and gain nothing; it runs cold instead, and
// the warm-up, finding that a call ran, never starts. The sample is a document of its own (DOMParser: never shown,
// no scripts, nothing fetched); nothing of the page is read, and the refs
// it gives are forgotten (refs.scratch).
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;

  /**
   * How long after the load event the warm-up starts: longer than navigate's
   * answer takes to reach a client and a call to come back on a busy
   * machine, far shorter than a model's turn.
   */
  const WARM_DELAY_MS = 250;

  // What pages are made of: landmarks, headings, links, lists, a form with
  // labelled fields of each kind, a table, text with inline markup.
  const SAMPLE = `<header><nav aria-label="Site"><ul><li><a href="/a">A</a></li><li><a href="/b">B</a></li></ul></nav></header>
<main><h1>Title</h1><p>Text with <b>bold</b> and <a href="#x">a link</a>.</p><section aria-label="S"><h2>Part</h2>
<form><label>Name <input name="n" placeholder="p"></label><label><input type="checkbox" checked> Box</label>
<label for="s">Pick</label><select id="s"><option>One</option><option selected>Two</option></select>
<fieldset><legend>L</legend><input type="radio" name="r" aria-label="R"></fieldset><textarea aria-label="T">t</textarea>
<button type="submit">Go</button><div role="button" tabindex="0">Do</div></form>
<table><tr><th>H</th><th>I</th></tr><tr><td>1</td><td>2</td></tr></table><ol><li>One</li><li>Two <i>2</i></li></ol>
<details open><summary>More</summary><p>Shown</p></details><img alt="Pic" src=""><span aria-hidden="true">x</span></section></main>
<footer><p>End</p></footer>`;

  let started = false;

  /**
   * Runs read_page's walk over the sample, once per document, in three
   * tasks (a call that comes meanwhile waits for one part, not all), and
   * stops when a call has run (its code is warm then).
   */
  function warm() {
    if (started || P.called) return;
    started = true;
    const start = performance.now();
    const doc = new DOMParser().parseFromString(SAMPLE, 'text/html');
    const steps = [
      () => P.ops.snapshot({ root: doc.body, filter: 'all', includeHidden: true }),
      () => P.ops.snapshot({ root: doc.body, filter: 'interactive', includeHidden: true }),
      () => {
        for (const el of doc.body.querySelectorAll('*')) P.hidden.warmRules(el);
      },
    ];
    const next = () => {
      if (P.called) return;
      P.refs.scratch(steps.shift());
      P.hidden.fresh();
      if (steps.length) setTimeout(next, 0);
      else P.warmMs = performance.now() - start; // from the first step to the last, for the benchmarks
    };
    next();
  }

  /** Runs warm WARM_DELAY_MS after the page's load event (from preload: markAgent in content/agent.js). */
  P.warmAfterLoad = () => {
    if (typeof document === 'undefined') return;
    const later = () => setTimeout(warm, WARM_DELAY_MS);
    if (document.readyState === 'complete') later();
    else addEventListener('load', later, { once: true });
  };
})();

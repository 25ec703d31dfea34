// The warm-up: the first read of a new document ran the page agent's code
// cold (each function compiled on its first call, each property access
// learning its object shapes, the DOM's interfaces and the regular
// expressions made anew for this document's isolated world), up to 3× a read
// right after it. A preloaded agent (sw/preload.js) runs read_page's walk
// over a small sample built here once the page has loaded, while navigate's
// answer travels to the client and the next call comes back (tens of ms)
// or the model reads it (seconds).
//
// It must never hold a call up: it runs in small steps, each a task of
// background priority (scheduler.postTask), so that a call's script, which
// comes as a task of normal priority, runs before the next step; once a call
// has run (its code is warm then) no further step starts. A call waits for
// one step at most (a few ms), where a warm-up in one piece cost it as much
// as it saved.
//
// The sample is a document of its own (DOMParser: never shown, no scripts,
// nothing fetched); nothing of the page is read, and the refs it gives are
// forgotten (refs.scratch).
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;

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
   * Runs fn as a task that yields to the page's and the extension's other
   * tasks: background priority where the Scheduler API is (Chrome 94+).
   */
  const later = (fn) => {
    const s = globalThis.scheduler;
    if (s && typeof s.postTask === 'function') s.postTask(fn, { priority: 'background' }).catch(() => {});
    else setTimeout(fn, 0);
  };

  /**
   * The steps, smallest first: each part of the sample alone (the walk, the
   * names of links and headings, then the form's fields and labels, then
   * tables, lists and what is hidden), the interactive filter, then the
   * hidden-text rules of each element in two halves.
   */
  function steps(doc) {
    const snap = (root, filter) => () => P.ops.snapshot({ root, filter, includeHidden: true });
    const rules = (els) => () => {
      for (const el of els) P.hidden.warmRules(el);
    };
    const all = [...doc.body.querySelectorAll('*')];
    const half = Math.ceil(all.length / 2);
    return [
      snap(doc.querySelector('header'), 'all'),
      snap(doc.querySelector('form'), 'all'),
      snap(doc.body, 'all'),
      snap(doc.body, 'interactive'),
      rules(all.slice(0, half)),
      rules(all.slice(half)),
    ];
  }

  /** Runs the steps, once per document, each in a task of its own, until a call has run. */
  function warm() {
    if (started || P.called) return;
    started = true;
    let todo = null;
    let ms = 0;
    const next = () => {
      if (P.called) return;
      const t0 = performance.now();
      todo ??= steps(new DOMParser().parseFromString(SAMPLE, 'text/html'));
      P.refs.scratch(todo.shift());
      P.hidden.fresh();
      ms += performance.now() - t0;
      if (todo.length) later(next);
      else P.warmMs = ms; // the steps' own time, for the benchmarks
    };
    later(next);
  }

  /** Starts the warm-up once the page has loaded (from preload: markAgent in content/agent.js). */
  P.warmAfterLoad = () => {
    if (typeof document === 'undefined') return;
    if (document.readyState === 'complete') warm();
    else addEventListener('load', warm, { once: true });
  };
})();

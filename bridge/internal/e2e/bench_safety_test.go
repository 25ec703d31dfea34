//go:build linux

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// BenchmarkPageSafety gives the per-call cost of issue 30's two filters in
// the page agent, on a page shaped like a real one (a news front page:
// navigation, a sign-in box, 80 article cards, a footer; hidden menus,
// screen-reader text, aria-hidden icons; about 1,900 elements) and on
// testdata/long.html (400 paragraphs): read_page's snapshot op and
// get_page_text's text op, each run as the extension runs them (P.run, which
// scrubs the result) with both filters, without the hidden-text filter
// (every element taken as shown), without the password scrub, and without
// either, interleaved round by round in the same tab of the real headless
// Chromium. A password field holding a value is on both pages, so the scrub
// does its whole work (find the values, then search the result for them).
//
// The page agent's files are evaluated in the page's main world (the
// extension injects them into an isolated world of the same page: the same
// DOM and the same work); DevTools evaluates and the page times itself with
// performance.now, so no bridge, host or MCP client is in these figures.
//
//	go test -run '^$' -bench PageSafety -benchtime 30x ./bridge/internal/e2e/
//
// With BROWSERBRIDGE_BENCH_BASE set to a git revision, that revision's page
// agent is loaded beside this one (under another name, into the same page)
// and run with both filters in the same rounds, as "base": a change to the
// agent is measured against its parent under the same load, which on a
// shared machine moves the figures of separate runs by 2× and more.
//
// Each sub-benchmark runs min(b.N, 30) rounds and reports the medians in
// ms; its log line also has each variant's fastest round, the figure least
// disturbed by other work on a busy machine.
func BenchmarkPageSafety(b *testing.B) {
	w := startWorld(b, worldOptions{})
	dt := w.restartChromiumWithDevTools()
	news := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = rw.Write([]byte(newsPage()))
	}))
	defer news.Close()
	agent := pageAgentSource(b)
	base := ""
	if rev := os.Getenv("BROWSERBRIDGE_BENCH_BASE"); rev != "" {
		base = strings.ReplaceAll(pageAgentSourceAt(b, rev), "__browserBridgePage", "__bbBasePage")
	}
	pages := []struct{ name, url string }{
		{"news_front_page", news.URL + "/news.html"},
		{"long_html", w.pages.url("long.html")},
	}
	for _, pg := range pages {
		b.Run(pg.name, func(b *testing.B) {
			p := openTab(b, dt, pg.url)
			testutil.WaitWithin(b, callWait, "", func() (bool, string) {
				return p.js(b, `document.readyState`) == "complete", "waiting for " + pg.url
			})
			var ok bool
			p.evalInto(b, agent+"\n;!!globalThis.__browserBridgePage.hidden", &ok)
			if !ok {
				b.Fatal("the page agent did not load")
			}
			if base != "" {
				p.evalInto(b, base+"\n;!!globalThis.__bbBasePage.hidden", &ok)
				if !ok {
					b.Fatal("the base revision's page agent did not load")
				}
			}
			var got struct {
				Elements int                `json:"elements"`
				Median   map[string]float64 `json:"median"`
				Least    map[string]float64 `json:"least"` // the fastest round: the cost with the least interference from a busy machine
				Chars    map[string]int     `json:"chars"`
			}
			p.evalInto(b, measureSafetyJS, &ok)
			for range min(b.N, 30) {
				p.evalInto(b, `__bbSafetyBench.round()`, &ok)
			}
			p.evalInto(b, `__bbSafetyBench.result()`, &got)
			keys := make([]string, 0, len(got.Median))
			for k := range got.Median {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var line []string
			for _, k := range keys {
				b.ReportMetric(got.Median[k], strings.ReplaceAll(k, " ", "_")+"-ms")
				line = append(line, fmt.Sprintf("%s %.1f ms (fastest %.1f)", k, got.Median[k], got.Least[k]))
			}
			b.Logf("%s: %d elements; result chars %v; medians: %s", pg.name, got.Elements, got.Chars, strings.Join(line, ", "))
		})
	}
}

// measureSafetyJS runs in the page with the page agent loaded: it defines
// __bbSafetyBench, whose round() runs each op under each variant once
// (one DevTools call per round keeps each call short), and result() the
// medians. It swaps the filters out by replacing the functions of P.hidden
// that snapshot.js, text.js and P.run's scrub call through.
const measureSafetyJS = `(() => {
	const P = globalThis.__browserBridgePage, H = P.hidden, B = globalThis.__bbBasePage;
	if (!document.querySelector('input[type=password]')) document.body.insertAdjacentHTML('afterbegin', '<input type="password" id="bench-pw">');
	for (const f of document.querySelectorAll('input[type=password]')) f.value = 'S3cret-Bench-77';
	const real = { reason: H.reason, chain: H.chain, hiddenUnder: H.hiddenUnder, secretValues: H.secretValues };
	const use = (hidden, scrub) => {
		H.reason = hidden ? real.reason : () => '';
		H.chain = hidden ? real.chain : () => '';
		H.hiddenUnder = hidden ? real.hiddenUnder : () => [];
		H.secretValues = scrub ? real.secretValues : () => [];
	};
	const variants = [['both filters', true, true], ['no hidden filter', false, true], ['no scrub', true, false], ['neither', false, false]];
	const ops = [['read_page', 'snapshot', { filter: 'all' }], ['get_page_text', 'text', {}]];
	const times = {}, chars = {};
	const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
	globalThis.__bbSafetyBench = {
		round() {
			try {
				for (const [tool, op, args] of ops) {
					for (const [name, hidden, scrub] of variants) {
						use(hidden, scrub);
						const t0 = performance.now();
						const res = P.run(op, args);
						const dt = performance.now() - t0;
						if (!res.ok) throw new Error(tool + ': ' + res.error);
						(times[tool + ' ' + name] ||= []).push(dt);
						if (name === 'both filters') chars[tool] = JSON.stringify(res.value).length;
					}
					if (B) {
						const t0 = performance.now();
						const res = B.run(op, args);
						const dt = performance.now() - t0;
						if (!res.ok) throw new Error(tool + ' (base): ' + res.error);
						(times[tool + ' base'] ||= []).push(dt);
						chars[tool + ' base'] = JSON.stringify(res.value).length;
					}
				}
			} finally {
				use(true, true);
			}
			return true;
		},
		result() {
			const median = {}, least = {};
			for (const [k, v] of Object.entries(times)) {
				median[k] = med(v);
				least[k] = Math.min(...v);
			}
			return { elements: document.getElementsByTagName('*').length, median, least, chars };
		},
	};
	return true;
})()`

// pageAgentSource is the page agent's files in the order the extension
// injects them (PAGE_SCRIPTS in extension/content/agent.js), joined.
func pageAgentSource(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(extDir, "content")
	return joinPageAgent(tb, func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) })
}

// pageAgentSourceAt is pageAgentSource at a git revision of the repository.
func pageAgentSourceAt(tb testing.TB, rev string) string {
	tb.Helper()
	return joinPageAgent(tb, func(name string) ([]byte, error) {
		// The test runs in bridge/internal/e2e; the repository's root is three up.
		out, err := exec.Command("git", "-C", filepath.Join("..", "..", ".."), "show", rev+":extension/content/"+name).Output()
		if err != nil {
			return nil, fmt.Errorf("git show %s:extension/content/%s: %w", rev, name, err)
		}
		return out, nil
	})
}

// joinPageAgent reads agent.js's PAGE_SCRIPTS list and joins the files it names, each read by read.
func joinPageAgent(tb testing.TB, read func(name string) ([]byte, error)) string {
	tb.Helper()
	b, err := read("agent.js")
	if err != nil {
		tb.Fatal(err)
	}
	list := regexp.MustCompile(`(?s)PAGE_SCRIPTS = \[(.*?)\]`).FindSubmatch(b)
	if list == nil {
		tb.Fatal("extension/content/agent.js has no PAGE_SCRIPTS list")
	}
	var src strings.Builder
	for _, m := range regexp.MustCompile(`'(page/[a-z0-9]+\.js)'`).FindAllSubmatch(list[1], -1) {
		f, err := read(string(m[1]))
		if err != nil {
			tb.Fatal(err)
		}
		src.Write(f)
		src.WriteString("\n")
	}
	if src.Len() == 0 {
		tb.Fatal("PAGE_SCRIPTS in extension/content/agent.js names no file")
	}
	return src.String()
}

// newsPage is a news site's front page as pages are built: nested
// navigation with a hidden drop-down menu, a sign-in box, article cards
// with aria-hidden thumbnails and screen-reader-only text, a sidebar, a
// cookie banner and a footer of links.
func newsPage() string {
	var s strings.Builder
	s.WriteString(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>The Daily Example</title><style>
body{font:16px/1.5 sans-serif;margin:0;color:#222;background:#fff} header,footer{background:#f4f4f4;padding:8px}
nav ul{list-style:none;display:flex;flex-wrap:wrap;gap:8px;margin:0;padding:0} .menu{display:none}
.sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0,0,0,0)} .thumb{width:120px;height:80px;background:#ccc}
main{display:grid;grid-template-columns:1fr 300px;gap:16px;padding:16px} .cards{display:grid;grid-template-columns:repeat(2,1fr);gap:12px}
article{border:1px solid #ddd;padding:8px} .meta{font-size:12px;color:#666} .skip{position:absolute;left:-9999px}
.cookie{position:fixed;bottom:0;left:0;right:0;background:#333;color:#fff;padding:8px} footer .cols{display:grid;grid-template-columns:repeat(4,1fr)}
</style></head><body><a class="skip" href="#main">Skip to content</a><header><nav aria-label="Sections"><ul>`)
	for i := range 40 {
		fmt.Fprintf(&s, `<li><a href="/section/%d">Section %d</a>`, i, i)
		if i%8 == 0 {
			s.WriteString(`<ul class="menu">`)
			for j := range 6 {
				fmt.Fprintf(&s, `<li><a href="/section/%d/%d">Subsection %d</a></li>`, i, j, j)
			}
			s.WriteString(`</ul>`)
		}
		s.WriteString(`</li>`)
	}
	s.WriteString(`</ul></nav><form class="signin" action="/login" method="post"><label>Email <input type="email" name="email" autocomplete="username"></label>
<label>Password <input type="password" name="password" autocomplete="current-password"></label><button>Sign in</button></form>
<form role="search"><input type="search" name="q" aria-label="Search"><button>Search</button></form></header><main id="main"><div class="cards">`)
	for i := range 80 {
		fmt.Fprintf(&s, `<article><a href="/story/%d"><div class="thumb" aria-hidden="true"><svg width="16" height="16"><circle cx="8" cy="8" r="6"/></svg></div></a>
<h2><a href="/story/%d">Headline number %d about something that happened today</a></h2>
<p>A summary of story %d in two sentences, long enough to wrap: what happened, where, and why a reader would care about it at all. More follows on the story's own page.</p>
<div class="meta"><span>By Reporter %d</span> · <time datetime="2026-11-29">29 November</time> <button type="button">Save</button><span class="sr-only">Saved to your reading list</span>
<a href="/story/%d#comments">%d comments</a></div></article>`, i, i, i, i, i%12, i, i*3)
	}
	s.WriteString(`</div><aside><h2>Most read</h2><ol>`)
	for i := range 30 {
		fmt.Fprintf(&s, `<li><a href="/popular/%d">Popular story %d</a> <span class="meta">%d reads</span></li>`, i, i, 1000-i*7)
	}
	s.WriteString(`</ol></aside></main><div class="cookie" role="dialog" aria-label="Cookies">We use cookies. <button>Accept</button> <button>Settings</button></div><footer><div class="cols">`)
	for c := range 4 {
		fmt.Fprintf(&s, `<ul><li><strong>Column %d</strong></li>`, c)
		for i := range 15 {
			fmt.Fprintf(&s, `<li><a href="/footer/%d/%d">Footer link %d</a></li>`, c, i, i)
		}
		s.WriteString(`</ul>`)
	}
	s.WriteString(`</div></footer></body></html>`)
	return s.String()
}

//go:build linux

package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// BenchmarkFirstRead times read_page and get_page_text on the page set's
// pages as an agent meets them: navigate, then the first read of the new
// document, then the same read again, through the real bridge and
// extension in headless Chromium (issue 32: the first read cost 2–3× the
// second). Each round navigates to each page afresh.
//
//	go test -run '^$' -bench FirstRead -benchtime 12x ./bridge/internal/e2e/
//
// With BROWSERBRIDGE_BENCH_PROFILE=1 DevTools' sampling profiler records
// the page's renderer (the extension's isolated world runs in it) during
// each read, and the log gives the functions that took the most time, on
// the first read and on the second, summed over the rounds: what the first
// read pays that the second does not. With BROWSERBRIDGE_BENCH_TRACE=DIR
// each round's two reads are also traced (the whole browser: the page's
// renderer, the extension's worker, the browser process) into
// DIR/<read>-<page>-<round>.json, with each read's start and end on the
// trace's clock under "reads". Either slows what it records: those rounds'
// times are not the figures to compare. BROWSERBRIDGE_E2E_EXTENSION runs
// another build of the extension (an older one, in turn with this one);
// BROWSERBRIDGE_BENCH_RAW=1 prints every round's times, to pool runs.
func BenchmarkFirstRead(b *testing.B) {
	w := startWorld(b, worldOptions{})
	dt := w.restartChromiumWithDevTools()
	c := w.client("bench-first-read")
	tab := c.newTab(b, w.pages.url("index.html"))
	profile := os.Getenv("BROWSERBRIDGE_BENCH_PROFILE") != ""
	traceDir := os.Getenv("BROWSERBRIDGE_BENCH_TRACE")
	raw := os.Getenv("BROWSERBRIDGE_BENCH_RAW") != ""
	// An agent's model reads navigate's answer before it asks for the page:
	// BROWSERBRIDGE_BENCH_THINK (a duration) waits that long between them.
	var think time.Duration
	if v := os.Getenv("BROWSERBRIDGE_BENCH_THINK"); v != "" {
		var err error
		if think, err = time.ParseDuration(v); err != nil {
			b.Fatalf("BROWSERBRIDGE_BENCH_THINK=%q: %v", v, err)
		}
	}
	reads := []struct {
		name string
		tool string
	}{{"read_page", "read_page"}, {"get_page_text", "get_page_text"}}
	pages := []string{"article", "search", "settings", "modal", "belowfold"}
	for _, rd := range reads {
		b.Run(rd.name, func(b *testing.B) {
			type times struct{ first, again []time.Duration }
			got := map[string]*times{}
			prof := map[string]*[2]profileSums{}
			rounds := b.N
			for r := range rounds {
				for _, pg := range pages {
					url := fmt.Sprintf("%s?round=%d", w.pages.url("pageset/"+pg+".html"), r)
					var tr *cdpConn
					var nav [2]int64 // navigate's call and answer on the trace's clock (µs)
					if traceDir != "" {
						// From before navigate: what runs between its answer and the first read's op.
						tr = startTrace(b, dt)
					}
					nav[0] = monotonicMicros()
					c.call(b, "navigate", map[string]any{"url": url, "tabId": tab})
					nav[1] = monotonicMicros()
					time.Sleep(think) // the model's turn, not a wait for anything
					var pc *cdpConn
					if profile {
						pc = attachPage(b, dt, url)
					}
					var sums [2]profileSums
					var d [2]time.Duration
					var marks [2][2]int64 // each read's start and end on the trace's clock (µs)
					for i := range 2 {
						if pc != nil {
							startProfile(b, pc)
						}
						marks[i][0] = monotonicMicros()
						start := time.Now()
						c.call(b, rd.tool, map[string]any{"tabId": tab})
						d[i] = time.Since(start)
						marks[i][1] = monotonicMicros()
						if pc != nil {
							sums[i] = stopProfile(b, pc)
						}
					}
					if tr != nil {
						stopTrace(b, tr, filepath.Join(traceDir, fmt.Sprintf("%s-%s-%d.json", rd.name, pg, r)), map[string]any{"reads": marks, "navigate": nav})
					}
					if pc != nil {
						pc.close()
						if prof[pg] == nil {
							prof[pg] = &[2]profileSums{{}, {}}
						}
						for i := range 2 {
							for k, v := range sums[i] {
								prof[pg][i][k] += v
							}
						}
					}
					t := got[pg]
					if t == nil {
						t = &times{}
						got[pg] = t
					}
					t.first = append(t.first, d[0])
					t.again = append(t.again, d[1])
				}
			}
			for _, pg := range pages {
				t := got[pg]
				if raw {
					// Every round's times, for pooling runs (BROWSERBRIDGE_BENCH_RAW).
					fmt.Printf("raw %s %s first %s again %s\n", rd.name, pg, msList(t.first), msList(t.again))
				}
				b.Logf("%s %s ms (fastest / median of %d): first %.1f / %.1f, again %.1f / %.1f", rd.name, pg, rounds,
					ms(slices.Min(t.first)), ms(firstReadMedian(t.first)), ms(slices.Min(t.again)), ms(firstReadMedian(t.again)))
				b.ReportMetric(ms(firstReadMedian(t.first)), pg+"-first-ms")
				b.ReportMetric(ms(firstReadMedian(t.again)), pg+"-again-ms")
				if p := prof[pg]; p != nil {
					// To stdout: the testing package cuts a benchmark's log to a few lines.
					fmt.Printf("%s %s, profile of the first read (self ms summed over %d rounds):\n%s", rd.name, pg, rounds, p[0].top(25))
					fmt.Printf("%s %s, profile of the second read:\n%s", rd.name, pg, p[1].top(15))
				}
			}
		})
	}
}

// msList is d in ms, comma-separated.
func msList(d []time.Duration) string {
	s := make([]string, len(d))
	for i, v := range d {
		s[i] = fmt.Sprintf("%.1f", ms(v))
	}
	return strings.Join(s, ",")
}

func firstReadMedian(d []time.Duration) time.Duration {
	p50, _ := quantiles(d)
	return p50
}

// attachPage connects to the DevTools target of the tab showing url.
func attachPage(tb testing.TB, dt devtoolsAddr, url string) *cdpConn {
	tb.Helper()
	browser, err := dialCDP("ws://" + dt.host + dt.browserPath)
	if err != nil {
		tb.Fatalf("DevTools: %v", err)
	}
	defer browser.close()
	var targets struct {
		TargetInfos []struct {
			TargetID string `json:"targetId"`
			Type     string `json:"type"`
			URL      string `json:"url"`
		} `json:"targetInfos"`
	}
	if err := browser.call("Target.getTargets", map[string]any{}, &targets); err != nil {
		tb.Fatalf("DevTools: %v", err)
	}
	for _, t := range targets.TargetInfos {
		if t.Type == "page" && t.URL == url {
			conn, err := dialCDP("ws://" + dt.host + "/devtools/page/" + t.TargetID)
			if err != nil {
				tb.Fatalf("DevTools: connecting to %s: %v", url, err)
			}
			return conn
		}
	}
	tb.Fatalf("DevTools lists no page at %s", url)
	return nil
}

func startProfile(tb testing.TB, pc *cdpConn) {
	tb.Helper()
	for _, m := range []struct {
		method string
		params map[string]any
	}{
		{"Profiler.enable", map[string]any{}},
		{"Profiler.setSamplingInterval", map[string]any{"interval": 50}},
		{"Profiler.start", map[string]any{}},
	} {
		if err := pc.call(m.method, m.params, &struct{}{}); err != nil {
			tb.Fatalf("DevTools: %v", err)
		}
	}
}

// profileSums is self time in ms per function ("name file:line").
type profileSums map[string]float64

func (p profileSums) top(n int) string {
	keys := make([]string, 0, len(p))
	total := 0.0
	for k, v := range p {
		keys = append(keys, k)
		total += v
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(p[b], p[a]) })
	var sb strings.Builder
	fmt.Fprintf(&sb, "  total %.1f\n", total)
	for i, k := range keys {
		if i == n {
			break
		}
		fmt.Fprintf(&sb, "  %8.1f  %s\n", p[k], k)
	}
	return sb.String()
}

func stopProfile(tb testing.TB, pc *cdpConn) profileSums {
	tb.Helper()
	var res struct {
		Profile struct {
			Nodes []struct {
				ID        int `json:"id"`
				CallFrame struct {
					FunctionName string `json:"functionName"`
					URL          string `json:"url"`
					LineNumber   int    `json:"lineNumber"`
				} `json:"callFrame"`
			} `json:"nodes"`
			Samples    []int `json:"samples"`
			TimeDeltas []int `json:"timeDeltas"`
		} `json:"profile"`
	}
	if err := pc.call("Profiler.stop", map[string]any{}, &res); err != nil {
		tb.Fatalf("DevTools: %v", err)
	}
	names := map[int]string{}
	for _, n := range res.Profile.Nodes {
		f := n.CallFrame
		name := f.FunctionName
		if name == "" {
			name = "(anonymous)"
		}
		if f.URL != "" {
			name += fmt.Sprintf(" %s:%d", path.Base(f.URL), f.LineNumber+1)
		}
		names[n.ID] = name
	}
	sums := profileSums{}
	// timeDeltas[i] is the time before sample i: sample i-1 ran for it.
	for i := 1; i < len(res.Profile.Samples); i++ {
		sums[names[res.Profile.Samples[i-1]]] += float64(res.Profile.TimeDeltas[i]) / 1000
	}
	return sums
}

// BenchmarkFirstOp runs the page agent's snapshot (read_page) and text
// (get_page_text) ops in the page set's pages as they load, without the
// bridge or the extension around them: DevTools puts the agent's files into
// each new document before the page's own scripts (as sw/preload.js does),
// the page loads, and the page times the op's first run in that document
// and a second run right after it. Each document runs one variant, so that
// no variant finds the page warmed by another: "new" (this tree's agent),
// "warm" (the same, warmed up after the load event as a preloaded agent is:
// page/warm.js; the warm-up's time is reported as its "style"), "style
// first", which first asks Blink for every element's style and box (what
// the hidden-text filter reads), timed apart, then runs the new agent,
// "nodes first", which first only walks the page's elements (the isolated
// world's wrappers of them, nothing read), and "base"
// (BROWSERBRIDGE_BENCH_BASE's agent, when set).
//
//	go test -run '^$' -bench FirstOp -benchtime 12x ./bridge/internal/e2e/
func BenchmarkFirstOp(b *testing.B) {
	w := startWorld(b, worldOptions{})
	dt := w.restartChromiumWithDevTools()
	agent := pageAgentSource(b)
	// Each variant's agent under a name of its own, all in every document.
	ns := func(src, name string) string { return strings.ReplaceAll(src, "__browserBridgePage", name) }
	variants := []string{"new", "warm", "style first", "nodes first"}
	// "warm": a copy of the agent that warms up after the load event, as a preloaded one does (page/warm.js).
	sources := ns(agent, "__bbNewPage") + "\n" + ns(agent, "__bbWarmPage") + "\n;if (new URLSearchParams(location.search).get('v') === 'warm') globalThis.__bbWarmPage.warmAfterLoad();"
	if rev := os.Getenv("BROWSERBRIDGE_BENCH_BASE"); rev != "" {
		sources += "\n" + ns(pageAgentSourceAt(b, rev), "__bbBasePage")
		variants = append(variants, "base")
	}
	p := openTab(b, dt, "about:blank")
	var script struct {
		Identifier string `json:"identifier"`
	}
	// The page agent's DevTools evaluates scripts on new documents only once it is enabled.
	if err := p.conn.call("Page.enable", map[string]any{}, &struct{}{}); err != nil {
		b.Fatalf("DevTools: %v", err)
	}
	if err := p.conn.call("Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": sources}, &script); err != nil {
		b.Fatalf("DevTools: %v", err)
	}
	pages := []string{"article", "search", "settings", "modal", "belowfold"}
	for _, op := range []struct{ name, op, args string }{
		{"read_page", "snapshot", `{filter: 'all'}`},
		{"get_page_text", "text", `{}`},
	} {
		b.Run(op.name, func(b *testing.B) {
			type key struct{ page, variant, which string }
			got := map[key][]float64{}
			for r := range b.N {
				for _, pg := range pages {
					for vi := range variants {
						v := variants[(vi+r)%len(variants)]
						url := fmt.Sprintf("%s?round=%d&v=%s", w.pages.url("pageset/"+pg+".html"), r, strings.ReplaceAll(v, " ", "-"))
						if err := p.conn.call("Page.navigate", map[string]any{"url": url}, &struct{}{}); err != nil {
							b.Fatalf("DevTools: %v", err)
						}
						testutil.WaitWithin(b, callWait, "", func() (bool, string) {
							return p.js(b, `location.href + ' ' + document.readyState`) == url+" complete", "waiting for " + url
						})
						var res map[string]float64
						p.evalInto(b, fmt.Sprintf(firstOpJS, jsString(v), jsString(op.op), op.args), &res)
						for k, ms := range res {
							got[key{pg, v, k}] = append(got[key{pg, v, k}], ms)
						}
					}
				}
			}
			for _, pg := range pages {
				var line []string
				for _, v := range variants {
					for _, which := range []string{"style", "first", "again"} {
						d := got[key{pg, v, which}]
						if len(d) == 0 {
							continue
						}
						slices.Sort(d)
						line = append(line, fmt.Sprintf("%s %s %.1f/%.1f", v, which, d[0], d[len(d)/2]))
						if which != "style" {
							b.ReportMetric(d[len(d)/2], pg+"-"+strings.ReplaceAll(v, " ", "_")+"-"+which+"-ms")
						}
					}
				}
				fmt.Printf("%s %s (ms, fastest/median of %d): %s\n", op.name, pg, b.N, strings.Join(line, ", "))
			}
		})
	}
}

// firstOpJS runs in a page that just loaded, with the agents in it: variant
// (%s), op (%s) and its args (%s). It answers the times in ms.
const firstOpJS = `(async (variant, op, args) => {
	const P = variant === 'base' ? globalThis.__bbBasePage : variant === 'warm' ? globalThis.__bbWarmPage : globalThis.__bbNewPage;
	const out = {};
	if (variant === 'warm') {
		// The warm-up runs just after the load event: the first op here is the first after it.
		for (let i = 0; i < 400 && typeof P.warmMs !== 'number'; i++) await new Promise((r) => setTimeout(r, 5));
		if (typeof P.warmMs !== 'number') throw new Error('the agent did not warm up after the load event');
		out.style = P.warmMs;
	}
	if (variant === 'style first') {
		const t0 = performance.now();
		for (const el of document.body.querySelectorAll('*')) {
			el.checkVisibility({ checkVisibilityCSS: true, checkOpacity: true });
			getComputedStyle(el).color;
			el.getBoundingClientRect();
		}
		document.body.innerText;
		out.style = performance.now() - t0;
	}
	if (variant === 'nodes first') {
		// Only the isolated world's objects for the page's elements, nothing read from them.
		const t0 = performance.now();
		let n = 0;
		for (const el of document.body.querySelectorAll('*')) n += el.nodeType;
		out.style = performance.now() - t0;
	}
	for (const which of ['first', 'again']) {
		const t0 = performance.now();
		const res = P.run(op, args);
		out[which] = performance.now() - t0;
		if (!res.ok) throw new Error(op + ': ' + res.error);
	}
	return out;
})(%s, %s, %s)`

// startTrace starts DevTools' tracing of the whole browser: the renderer's
// main thread shows what runs before, in and after each read.
func startTrace(tb testing.TB, dt devtoolsAddr) *cdpConn {
	tb.Helper()
	c, err := dialCDP("ws://" + dt.host + dt.browserPath)
	if err != nil {
		tb.Fatalf("DevTools: %v", err)
	}
	cats := "devtools.timeline,v8,v8.execute,blink,loading,extensions,toplevel,ipc,mojom,navigation,disabled-by-default-devtools.timeline,disabled-by-default-v8.compile"
	if os.Getenv("BROWSERBRIDGE_BENCH_TRACE_CPU") != "" {
		// V8's sampling profiler in every traced thread (the worker's JS too); it slows them more.
		cats += ",disabled-by-default-v8.cpu_profiler"
	}
	if err := c.call("Tracing.start", map[string]any{"categories": cats, "transferMode": "ReportEvents"}, &struct{}{}); err != nil {
		tb.Fatalf("DevTools: %v", err)
	}
	return c
}

// stopTrace ends the trace and writes its events to file (Chrome's trace
// format, for chrome://tracing or Perfetto).
func stopTrace(tb testing.TB, c *cdpConn, file string, marks map[string]any) {
	tb.Helper()
	defer c.close()
	c.next++
	if err := c.ws.WriteJSON(map[string]any{"id": c.next, "method": "Tracing.end", "params": map[string]any{}}); err != nil {
		tb.Fatalf("DevTools: %v", err)
	}
	var events []json.RawMessage
	_ = c.ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Value []json.RawMessage `json:"value"`
			} `json:"params"`
		}
		if err := c.ws.ReadJSON(&msg); err != nil {
			tb.Fatalf("DevTools: reading the trace: %v", err)
		}
		if msg.Method == "Tracing.dataCollected" {
			events = append(events, msg.Params.Value...)
		}
		if msg.Method == "Tracing.tracingComplete" {
			break
		}
	}
	out := map[string]any{"traceEvents": events}
	for k, v := range marks {
		out[k] = v
	}
	b, _ := json.Marshal(out)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// monotonicMicros is CLOCK_MONOTONIC in µs, the clock of Chrome's trace
// events on Linux.
func monotonicMicros() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano() / 1000
}

//go:build linux

package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/extension"
)

// benchCall is a representative call of one tool.
type benchCall struct {
	name string // sub-benchmark name
	tool string
	args map[string]any
	max  int // calls per measurement at most (a benchmark run measures min(b.N, max))
	// prep, if set, runs before each measurement and adds to args.
	prep func(testing.TB) map[string]any
}

// BenchmarkTools gives the figures of issue 4: the latency (median, p95) of
// a representative call of every tool through the whole chain (MCP client →
// bridge → host → extension → page and back), and the round trip of a no-op
// tool (dev_utils echo) against a raw native-messaging echo measured inside
// the extension in the same browser (dev_utils native_echo_benchmark with
// testdata/echohost registered as com.browserbridge.echo).
//
// Each sub-benchmark makes at most max calls whatever b.N is (so that
// `-benchtime 3000x` stays short) and reports p50-ms and p95-ms of its last
// run; ns/op is the mean of the calls it made.
func BenchmarkTools(b *testing.B) {
	w := startWorld(b, worldOptions{echoHost: true})
	// The shortcut is saved by the person's side (the options page, through
	// DevTools): the policy keeps agents off extension pages.
	dt := w.restartChromiumWithDevTools()
	c := w.client("e2e-bench")
	form := w.pages.url("form.html")
	// The tab most calls act on is opened last, so that it is the active
	// tab of its window (headless Chromium does not paint background tabs).
	navTab := c.newTab(b, w.pages.url("index.html"))
	consoleTab := c.newTab(b, w.pages.url("console.html"))
	openTab(b, dt, extension.Origin()+"options.html").js(b, `chrome.storage.local.set({shortcuts: [{id: "bench", name: "bench", steps: [{tool: "dev_utils", arguments: {action: "echo"}}]}]}).then(() => "saved")`)
	tab := c.newTab(b, form)
	nameRef, fileRef := c.refFor(b, tab, "#name"), c.refFor(b, tab, "#file")
	cx, cy := c.center(b, tab, "#counter")
	c.call(b, "gif_creator", map[string]any{"action": "start_recording", "tabId": tab})
	c.call(b, "gif_creator", map[string]any{"action": "stop_recording"})
	payload := strings.Repeat("x", 64)

	calls := []benchCall{
		{"dev_utils_echo_noop", "dev_utils", map[string]any{"action": "echo", "message": payload}, 300, nil},
		{"navigate", "navigate", map[string]any{"url": form, "tabId": navTab}, 20, nil},
		{"computer_screenshot", "computer", map[string]any{"action": "screenshot", "tabId": tab}, 30, nil},
		{"computer_left_click", "computer", map[string]any{"action": "left_click", "coordinate": []int{cx, cy}, "tabId": tab}, 30, nil},
		{"computer_type", "computer", map[string]any{"action": "type", "text": "abc", "ref": nameRef, "tabId": tab}, 30, nil},
		{"computer_key", "computer", map[string]any{"action": "key", "text": "ctrl+a", "tabId": tab}, 30, nil},
		{"computer_scroll", "computer", map[string]any{"action": "scroll", "coordinate": []int{400, 300}, "scroll_direction": "down", "scroll_amount": 1, "tabId": tab}, 30, nil},
		{"read_page", "read_page", map[string]any{"filter": "interactive", "tabId": tab}, 30, nil},
		{"find", "find", map[string]any{"query": "Send button", "tabId": tab}, 30, nil},
		{"form_input", "form_input", map[string]any{"ref": nameRef, "value": "bench", "tabId": tab}, 30, nil},
		{"get_page_text", "get_page_text", map[string]any{"tabId": tab}, 30, nil},
		{"javascript_tool", "javascript_tool", map[string]any{"code": "document.title", "tabId": tab}, 30, nil},
		{"tabs_context", "tabs_context", nil, 30, nil},
		{"tabs_context_mcp", "tabs_context_mcp", nil, 30, nil},
		{"resize_window", "resize_window", map[string]any{"width": 1280, "height": 900, "tabId": tab}, 20, nil},
		{"read_console_messages", "read_console_messages", map[string]any{"tabId": consoleTab}, 30, nil},
		{"read_network_requests", "read_network_requests", map[string]any{"tabId": consoleTab}, 30, nil},
		// The extension keeps the last 30 screenshots: take a fresh one.
		{"upload_image", "upload_image", map[string]any{"ref": fileRef, "tabId": tab}, 20, func(tb testing.TB) map[string]any {
			return map[string]any{"screenshot_id": imageIDOf(c.call(tb, "computer", map[string]any{"action": "screenshot", "tabId": tab}))}
		}},
		{"gif_creator_status", "gif_creator", map[string]any{"action": "status"}, 30, nil},
		{"update_plan", "update_plan", map[string]any{"plan": []map[string]any{{"step": "measure", "status": "in_progress"}}}, 30, nil},
		{"shortcuts_list", "shortcuts_list", nil, 30, nil},
		{"shortcuts_execute", "shortcuts_execute", map[string]any{"shortcut": "bench"}, 30, nil},
		{"turn_answer_start", "turn_answer_start", nil, 30, nil},
		{"turn_answer_complete", "turn_answer_complete", nil, 30, nil},
		{"permissions_check", "permissions_check", map[string]any{"tabId": tab}, 30, nil},
		// Last: a new tab becomes the active one.
		{"tabs_create", "tabs_create", map[string]any{"url": "about:blank"}, 5, nil},
		{"tabs_create_mcp", "tabs_create_mcp", map[string]any{"url": "about:blank"}, 5, nil},
	}
	results := map[string][]time.Duration{}
	for _, bc := range calls {
		b.Run(bc.name, func(b *testing.B) {
			args := bc.args
			if bc.prep != nil {
				args = map[string]any{}
				for k, v := range bc.args {
					args[k] = v
				}
				for k, v := range bc.prep(b) {
					args[k] = v
				}
				b.ResetTimer()
			}
			n := min(b.N, bc.max)
			lat := make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				start := time.Now()
				c.call(b, bc.tool, args)
				lat = append(lat, time.Since(start))
			}
			reportLatency(b, lat)
			results[bc.name] = lat
		})
	}

	// The raw native-messaging echo, timed inside the extension: 200 round
	// trips of 64 bytes per call.
	var raw *echoBench
	b.Run("native_echo_raw", func(b *testing.B) {
		res := c.call(b, "dev_utils", map[string]any{"action": "native_echo_benchmark", "host": echoHostName, "count": 200, "size": 64})
		e, ok := echoBenchOf(res)
		if !ok {
			b.Fatalf("native_echo_benchmark: %s", describe(res))
		}
		raw = &e
		b.ReportMetric(e.median, "p50-ms")
		b.ReportMetric(e.p95, "p95-ms")
		b.ReportMetric(0, "ns/op")
	})

	var sb strings.Builder
	fmt.Fprintf(&sb, "per-tool latency through the whole chain (last run of each):\n%-24s %6s %9s %9s\n", "call", "n", "p50 ms", "p95 ms")
	for _, bc := range calls {
		lat := results[bc.name]
		if len(lat) == 0 {
			continue
		}
		p50, p95 := quantiles(lat)
		fmt.Fprintf(&sb, "%-24s %6d %9.2f %9.2f\n", bc.name, len(lat), ms(p50), ms(p95))
	}
	if noop := results["dev_utils_echo_noop"]; len(noop) > 0 && raw != nil {
		p50, p95 := quantiles(noop)
		fmt.Fprintf(&sb, "no-op round trip: whole chain (dev_utils echo) p50 %.3f ms, p95 %.3f ms; raw native echo in the same browser p50 %v ms, p95 %v ms (%v round trips of %v B)\n",
			ms(p50), ms(p95), raw.median, raw.p95, raw.count, raw.size)
	}
	// On stdout, so that the figures show without -v (b.Log would hide them).
	fmt.Print(sb.String())
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	p50, p95 := quantiles(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p95), "p95-ms")
	b.ReportMetric(float64(sum.Nanoseconds())/float64(len(lat)), "ns/op")
}

// quantiles returns the median and the 95th percentile (nearest rank).
func quantiles(lat []time.Duration) (p50, p95 time.Duration) {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	if n%2 == 1 {
		p50 = s[n/2]
	} else {
		p50 = (s[n/2-1] + s[n/2]) / 2
	}
	rank := (95*n + 99) / 100 // ceil(0.95 n)
	p95 = s[max(0, rank-1)]
	return p50, p95
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

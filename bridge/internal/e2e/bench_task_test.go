//go:build linux

package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// taskStep is one step of the benchmark's task: the tool calls it makes.
type taskStep struct {
	name string
	run  func(tb testing.TB, t *taskRun) []*mcp.CallToolResult
}

// taskRun is what one pass over the task knows: the session, the tab and
// the refs read_page gave.
type taskRun struct {
	c    *client
	tab  int
	refs map[string]string // accessible name -> ref, from the snapshot
	// fields: fill the four fields with one form_input call (fields)
	// rather than one call per field.
	fields bool
	order  string // the order page's URL
	other  string // the page navigated to before going back
}

// snapshotRef matches an outline line's role, name and ref.
var snapshotRef = regexp.MustCompile(`- (textbox|spinbutton|combobox|button) "([^"]+)"[^\n]*\[(ref_\d+)\]`)

// BenchmarkTask times the 10-step task of issue 19 through the whole chain
// (MCP client → bridge → host → extension → page) on a local form: navigate,
// read_page, fill 4 fields, type into a fifth (computer type), read the form
// back (javascript_tool), click submit, read the result (get_page_text),
// screenshot, navigate elsewhere, go back. Each pass checks that the form
// and its result hold what was entered.
//
// Two ways to fill the 4 fields: one_field_per_call (4 form_input calls,
// all the tool took before issue 19) and fields (one call). Reported per
// pass: calls/op, bytes/op (the JSON of every result, as the client
// receives it) and, per step, <step>-ms/op and <step>-B/op; ns/op is the
// whole task. Run: go test -run '^$' -bench BenchmarkTask -benchtime 5x
// ./bridge/internal/e2e/
func BenchmarkTask(b *testing.B) {
	w := startWorld(b, worldOptions{})
	c := w.client("e2e-bench-task")
	order, other := w.pages.url("order.html"), w.pages.url("index.html")
	tab := c.newTab(b, other)
	for _, tc := range []struct {
		name   string
		fields bool
	}{
		{"one_field_per_call", false},
		{"fields", true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			steps := taskSteps()
			ms := make([]float64, len(steps))
			bytes := make([]replyBytes, len(steps))
			calls := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := &taskRun{c: c, tab: tab, fields: tc.fields, order: order, other: other}
				for k, s := range steps {
					start := time.Now()
					results := s.run(b, t)
					ms[k] += float64(time.Since(start).Microseconds()) / 1000
					calls += len(results)
					if i == b.N-1 {
						dumpTaskStep("browserbridge-"+tc.name, k, s.name, results)
					}
					for _, r := range results {
						rb, err := measureReply(r)
						if err != nil {
							b.Fatalf("%s: encoding its result: %v", s.name, err)
						}
						bytes[k] = bytes[k].add(rb)
					}
				}
			}
			b.StopTimer()
			n := float64(b.N)
			total := 0
			for k, s := range steps {
				b.ReportMetric(ms[k]/n, s.name+"-ms/op")
				b.ReportMetric(float64(bytes[k].json)/n, s.name+"-B/op")
				total += bytes[k].json
			}
			b.ReportMetric(float64(calls)/n, "calls/op")
			b.ReportMetric(float64(total)/n, "bytes/op")
			if tc.fields {
				names := make([]string, len(steps))
				for k, s := range steps {
					names[k] = s.name
					bytes[k] = bytes[k].div(b.N)
				}
				fmt.Print(stepBytesTable(names, []string{"browserbridge"}, [][]replyBytes{bytes}))
			}
		})
	}
}

func taskSteps() []taskStep {
	return []taskStep{
		{"navigate", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			return []*mcp.CallToolResult{t.c.call(tb, "navigate", map[string]any{"url": t.order, "tabId": t.tab})}
		}},
		{"read_page", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "read_page", map[string]any{"tabId": t.tab})
			t.refs = map[string]string{}
			matches := snapshotRef.FindAllStringSubmatch(testutil.Text(res), -1)
			for _, name := range []string{"Name", "Email", "Quantity", "Country", "Note", "Place order"} {
				// A label's name holds what it wraps ("Country Choose… France …").
				for _, m := range matches {
					if m[2] == name || strings.HasPrefix(m[2], name+" ") {
						t.refs[name] = m[3]
						break
					}
				}
				if t.refs[name] == "" {
					tb.Fatalf("read_page of the order page gives no ref for %q:\n%s", name, clip(testutil.Text(res), 3000))
				}
			}
			return []*mcp.CallToolResult{res}
		}},
		{"fill_4_fields", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			fields := []map[string]any{
				{"ref": t.refs["Name"], "value": "Ada Lovelace"},
				{"ref": t.refs["Email"], "value": "ada@example.org"},
				{"ref": t.refs["Quantity"], "value": 3},
				{"ref": t.refs["Country"], "value": "Italy"},
			}
			if t.fields {
				return []*mcp.CallToolResult{t.c.call(tb, "form_input", map[string]any{"fields": fields, "tabId": t.tab})}
			}
			var out []*mcp.CallToolResult
			for _, f := range fields {
				f["tabId"] = t.tab
				out = append(out, t.c.call(tb, "form_input", f))
			}
			return out
		}},
		{"type", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			return []*mcp.CallToolResult{t.c.call(tb, "computer", map[string]any{"action": "type", "text": "ring twice", "ref": t.refs["Note"], "tabId": t.tab})}
		}},
		{"read_back_js", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "javascript_tool", map[string]any{"tabId": t.tab,
				"code": `["name", "email", "quantity", "country", "note"].map((id) => document.getElementById(id).value).join("|")`})
			if got, want := jsValue(testutil.Text(res)), "Ada Lovelace|ada@example.org|3|it|ring twice"; got != want {
				tb.Fatalf("the form holds %q, want %q", got, want)
			}
			return []*mcp.CallToolResult{res}
		}},
		{"click_submit", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			return []*mcp.CallToolResult{t.c.call(tb, "computer", map[string]any{"action": "left_click", "ref": t.refs["Place order"], "tabId": t.tab})}
		}},
		{"get_page_text", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "get_page_text", map[string]any{"tabId": t.tab})
			if want := "Order placed for Ada Lovelace <ada@example.org>: 3 to it; note: ring twice"; !strings.Contains(testutil.Text(res), want) {
				tb.Fatalf("get_page_text after submitting lacks %q:\n%s", want, clip(testutil.Text(res), 2000))
			}
			return []*mcp.CallToolResult{res}
		}},
		{"screenshot", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "computer", map[string]any{"action": "screenshot", "tabId": t.tab})
			if _, _, ok := imageOf(res); !ok {
				tb.Fatalf("screenshot gave no image: %s", describe(res))
			}
			return []*mcp.CallToolResult{res}
		}},
		{"navigate_other", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			return []*mcp.CallToolResult{t.c.call(tb, "navigate", map[string]any{"url": t.other, "tabId": t.tab})}
		}},
		{"back", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "navigate", map[string]any{"action": "back", "tabId": t.tab})
			if nav, ok := navigated(res); !ok || nav.url != t.order {
				tb.Fatalf("navigate back went to %s, want %s", describe(res), t.order)
			}
			return []*mcp.CallToolResult{res}
		}},
	}
}

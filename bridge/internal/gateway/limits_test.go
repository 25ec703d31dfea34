package gateway

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
)

// seriesOf returns the label sets of metric name in reg's exposition.
func seriesOf(t *testing.T, reg *metrics.Registry, name string) []string {
	t.Helper()
	var b bytes.Buffer
	if _, err := reg.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(b.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, name+"{"); ok {
			labels, _, _ := strings.Cut(rest, "}")
			out = append(out, labels)
		}
	}
	return out
}

var methodLabelRE = regexp.MustCompile(`method="([^"]*)"`)

// Method names are the client's (and the child's) choice: invented ones
// all count as "other", so a flood of them adds no series.
func TestMetricLabelsAreBounded(t *testing.T) {
	reg := metrics.NewRegistry()
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"child": testChild(t, "mcp")}, Options{Metrics: reg})
	init := tg.raw("POST", "/servers/child/mcp", initBody, nil)
	sid := init.header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("no session: %+v", init)
	}
	s := map[string]string{"Mcp-Session-Id": sid}
	const invented = 200
	for i := range invented {
		method := fmt.Sprintf("invented/%d-%s", i, strings.Repeat("x", 4<<10))
		if r := tg.raw("POST", "/servers/child/mcp", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i+2, method), s); r.code != codeMethodNotFound {
			t.Fatalf("invented method %d: %+v", i, r)
		}
	}
	// The child asks its caller requests of invented methods too.
	for i := range 20 {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":"ask-%d","method":"tools/call","params":{"name":"ask","arguments":{"method":"made/up-%d"}}}`, i, i)
		if r := tg.raw("POST", "/servers/child/mcp", body, s); r.status != 200 {
			t.Fatalf("ask %d: %+v", i, r)
		}
	}
	if r := tg.raw("POST", "/servers/child/mcp", `{"jsonrpc":"2.0","id":"last","method":"tools/list"}`, s); r.status != 200 || r.code != 0 {
		t.Fatalf("tools/list: %+v", r)
	}

	for _, tc := range []struct {
		metric string
		max    int
	}{
		// tools/list ok, tools/call ok, other error.
		{"browserbridge_gateway_requests_total", 3},
		{"browserbridge_gateway_server_requests_total", 1},
	} {
		t.Run(tc.metric, func(t *testing.T) {
			series := seriesOf(t, reg, tc.metric)
			if len(series) == 0 || len(series) > tc.max {
				t.Fatalf("%d series, want 1 to %d: %q", len(series), tc.max, series)
			}
			other := false
			for _, labels := range series {
				m := methodLabelRE.FindStringSubmatch(labels)
				if m == nil || (!knownMethods[m[1]] && m[1] != otherMethod) {
					t.Fatalf("a method label outside the fixed set: %q", labels)
				}
				other = other || m[1] == otherMethod
			}
			if !other {
				t.Fatalf("the invented methods were not counted as %q: %q", otherMethod, series)
			}
		})
	}
}

func TestMethodLabel(t *testing.T) {
	for _, tc := range []struct{ method, want string }{
		{"tools/call", "tools/call"},
		{"sampling/createMessage", "sampling/createMessage"},
		{"tools/call2", otherMethod},
		{"", otherMethod},
		{strings.Repeat("m", 1<<20), otherMethod},
	} {
		t.Run(tc.want+"/"+tc.method[:min(len(tc.method), 16)], func(t *testing.T) {
			if got := methodLabel(tc.method); got != tc.want {
				t.Fatalf("methodLabel(%.20q) = %q, want %q", tc.method, got, tc.want)
			}
		})
	}
}

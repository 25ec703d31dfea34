package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
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
		if r := tg.raw("POST", "/servers/child/mcp", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i+2, method), s); r.code != rpccode.MethodNotFound {
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

// childPID asks the test child behind session sid for its pid.
func (tg *testGateway) childPID(route, sid string) int {
	tg.t.Helper()
	r := tg.raw("POST", route, `{"jsonrpc":"2.0","id":"pid","method":"tools/call","params":{"name":"pid","arguments":{}}}`, map[string]string{"Mcp-Session-Id": sid})
	var res struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.body, &res); err != nil || len(res.Result.Content) != 1 {
		tg.t.Fatalf("tools/call pid: %d %s", r.status, r.body)
	}
	pid, err := strconv.Atoi(res.Result.Content[0].Text)
	if err != nil {
		tg.t.Fatal(err)
	}
	return pid
}

// per_session servers run at most max_children processes; beyond, an
// initialize is refused with 503 and Retry-After; a session that ends by
// DELETE or by idling out takes its process with it, and frees its place.
func TestPerSessionChildrenAreCapped(t *testing.T) {
	const route = "/servers/priv/mcp"
	cfg := testChild(t, "mcp")
	cfg.PerSession, cfg.MaxChildren = true, 2
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"priv": cfg}, Options{})
	var sids []string
	var pids []int
	for range 2 {
		r := tg.raw("POST", route, initBody, nil)
		sid := r.header.Get("Mcp-Session-Id")
		if r.status != 200 || sid == "" {
			t.Fatalf("initialize under the cap: %d %s", r.status, r.body)
		}
		sids = append(sids, sid)
		pids = append(pids, tg.childPID(route, sid))
	}
	for i := range 3 {
		r := tg.raw("POST", route, initBody, nil)
		if r.status != 503 || r.header.Get("Retry-After") == "" || r.code != rpccode.Unavailable || !strings.Contains(r.msg, "max_children") || r.header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("initialize %d over the cap: %d Retry-After %q %s", i, r.status, r.header.Get("Retry-After"), r.body)
		}
		checkErrorObject(t, r.body)
	}
	if st, _ := tg.gw.Supervisor().State("priv"); st.Private != 2 {
		t.Fatalf("%d per-session processes, want 2", st.Private)
	}

	if r := tg.raw("DELETE", route, "", map[string]string{"Mcp-Session-Id": sids[0]}); r.status != 204 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	testutil.WaitFor(t, "stopped the DELETEd session's process", func() bool { return processGone(pids[0]) })
	var third string
	testutil.WaitFor(t, "admitted a session in the freed place", func() bool {
		r := tg.raw("POST", route, initBody, nil)
		third = r.header.Get("Mcp-Session-Id")
		return r.status == 200 && third != ""
	})
	if pid := tg.childPID(route, third); pid == pids[1] || processGone(pid) {
		t.Fatalf("the new session's process %d", pid)
	}
	if processGone(pids[1]) {
		t.Fatal("a live session lost its process")
	}
}

func TestPerSessionChildOfAReapedSessionIsStopped(t *testing.T) {
	const route = "/servers/priv/mcp"
	cfg := testChild(t, "mcp")
	cfg.PerSession = true
	// Long enough that the session outlives the gap between its initialize
	// and its first call on a loaded machine.
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"priv": cfg}, Options{SessionTimeout: 3 * time.Second})
	sid := tg.raw("POST", route, initBody, nil).header.Get("Mcp-Session-Id")
	pid := tg.childPID(route, sid)
	testutil.WaitFor(t, "reaped the idle session", func() bool { return tg.gw.Sessions() == 0 })
	testutil.WaitFor(t, "stopped the reaped session's process", func() bool { return processGone(pid) })
	testutil.WaitFor(t, "counted the process gone", func() bool {
		st, _ := tg.gw.Supervisor().State("priv")
		return st.Private == 0
	})
}

// aggregateTools lists the aggregate session's tool names.
func (tg *testGateway) aggregateTools(sid string) ([]string, rawReply) {
	tg.t.Helper()
	r := tg.raw("POST", "/servers/all/mcp", `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`, map[string]string{"Mcp-Session-Id": sid})
	var res struct {
		Result struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"result"`
	}
	_ = json.Unmarshal(r.body, &res)
	var names []string
	for _, tl := range res.Result.Tools {
		names = append(names, tl.Name)
	}
	return names, r
}

// warm starts the shared child of each server (an initialize on its route
// waits for it), so that the aggregate's budget is not spent starting it.
func (tg *testGateway) warm(servers ...string) {
	tg.t.Helper()
	for _, name := range servers {
		if r := tg.raw("POST", "/servers/"+name+"/mcp", initBody, nil); r.status != 200 || r.code != 0 {
			tg.t.Fatalf("starting %s: %d %s", name, r.status, r.body)
		}
	}
}

// A server that never answers (or answers initialize and nothing more)
// is left out of the aggregate's list after the budget, named in the log
// and in Health; one that answers late rejoins.
func TestAggregateLeavesOutServersThatDoNotAnswer(t *testing.T) {
	logs := new(testbrowser.SyncBuffer)
	tg := newTestGateway(t, map[string]stdio.ServerConfig{
		"good": testChild(t, "mcp"),
		"hung": testChild(t, "hang"),
		"mute": testChild(t, "mute"),
		"slow": testChild(t, "slowlist"),
	}, Options{AggregateTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	// The servers that do answer initialize are started first: on a loaded
	// machine a child may take longer than the 1 s budget to start.
	tg.warm("good", "mute", "slow")
	sid := tg.raw("POST", "/servers/all/mcp", initBody, nil).header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no aggregate session")
	}
	start := time.Now()
	names, r := tg.aggregateTools(sid)
	// Far above the 1 s budget, far below the 30 s the list took when one
	// hung server held it for the whole initialize timeout.
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("tools/list took %s", took)
	}
	// The slow server's list started when the session opened (prefetch):
	// on a loaded machine it may have answered by now.
	slowFirst := strings.Join(names, " ") == "good_pid slow_pid"
	if r.status != 200 || (strings.Join(names, " ") != "good_pid" && !slowFirst) {
		t.Fatalf("tools/list: %d %q %s", r.status, names, r.body)
	}
	health := map[string]ServerHealth{}
	for _, h := range tg.gw.PublicHealth() {
		health[h.Name] = h
	}
	for _, tc := range []struct {
		server string
		out    bool
		why    string
	}{{"good", false, ""}, {"hung", true, "no answer to initialize within 1s"}, {"mute", true, "no answer to tools/list within 1s"}, {"slow", !slowFirst, "no answer to tools/list within 1s"}} {
		t.Run(tc.server, func(t *testing.T) {
			lo := health[tc.server].LeftOut
			if (lo != nil) != tc.out || (lo != nil && lo.Reason != tc.why) {
				t.Fatalf("Health's aggregate_left_out: %+v", lo)
			}
			if logged := regexp.MustCompile(`aggregate tool list is missing servers" servers="\[[^\]]*\b` + tc.server + `\b`).MatchString(logs.String()); logged != tc.out {
				t.Fatalf("logged as missing: %v; log:\n%s", logged, logs.String())
			}
		})
	}
	// The slow server's answer comes in the background: it rejoins.
	testutil.WaitFor(t, "listed the late server", func() bool {
		names, _ := tg.aggregateTools(sid)
		return strings.Join(names, " ") == "good_pid slow_pid"
	})
	for _, h := range tg.gw.PublicHealth() {
		if h.Name == "slow" && h.LeftOut != nil {
			t.Fatalf("slow is listed yet still reported left out: %+v", h.LeftOut)
		}
	}
}

// A request that runs longer than the session timeout (an aggregate list
// waiting for a hung server) keeps its session: it is not reaped under it.
func TestAggregateSessionOutlivesItsSlowList(t *testing.T) {
	tg := newTestGateway(t, map[string]stdio.ServerConfig{
		"good": testChild(t, "mcp"),
		"hung": testChild(t, "hang"),
	}, Options{AggregateTimeout: 5 * time.Second, SessionTimeout: 2 * time.Second})
	tg.warm("good")
	sid := tg.raw("POST", "/servers/all/mcp", initBody, nil).header.Get("Mcp-Session-Id")
	names, r := tg.aggregateTools(sid)
	if r.status != 200 || strings.Join(names, " ") != "good_pid" {
		t.Fatalf("tools/list: %d %q %s", r.status, names, r.body)
	}
	call := tg.raw("POST", "/servers/all/mcp", `{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"good_pid","arguments":{}}}`, map[string]string{"Mcp-Session-Id": sid})
	if call.status != 200 || call.code != 0 {
		t.Fatalf("the session did not survive its list: %d %s", call.status, call.body)
	}
}

// initAs opens a session on route as client name; the reply is returned
// whatever it is.
func (tg *testGateway) initAs(route, name string) rawReply {
	tg.t.Helper()
	return tg.raw("POST", route, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+name+`","version":"1"}}}`, nil)
}

// openStream opens the GET stream of session sid and keeps it open until
// the test ends; it returns once the stream is being served.
func (tg *testGateway) openStream(route, sid string) {
	tg.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tg.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", tg.srv.URL+route, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		tg.t.Fatalf("GET stream: %v %v", err, resp)
	}
	tg.t.Cleanup(func() { resp.Body.Close() })
}

// Gateway sessions, on server routes and the aggregate, count in the
// session table shared with the bridge's own endpoints: a flood of
// initializes from one client keeps at most its cap (its own idlest
// sessions make room), a client whose sessions are all in use is refused
// with 429, a full table with 503, each with Retry-After and a JSON-RPC
// error.
func TestSessionCapsOnGatewayRoutes(t *testing.T) {
	table := sessionlimit.New(sessionlimit.Options{Max: 12, PerClient: 3})
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"child": testChild(t, "mcp")}, Options{Sessions: table})
	keeper := tg.initAs("/servers/child/mcp", "keeper").header.Get("Mcp-Session-Id")
	for _, route := range []string{"/servers/child/mcp", "/servers/all/mcp"} {
		t.Run("flood "+route, func(t *testing.T) {
			var first string
			for i := range 60 {
				r := tg.initAs(route, "flood")
				if r.status != 200 {
					t.Fatalf("initialize %d of a one-shot client: %d %s", i, r.status, r.body)
				}
				if i == 0 {
					first = r.header.Get("Mcp-Session-Id")
				}
			}
			if n := tg.gw.Sessions(); n > 1+3 {
				t.Fatalf("%d gateway sessions after the flood, want at most the keeper and 3", n)
			}
			if r := tg.raw("POST", route, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, map[string]string{"Mcp-Session-Id": first}); r.status != 404 {
				t.Fatalf("the flood's first session, evicted, answered %d %s", r.status, r.body)
			}
		})
	}
	if r := tg.raw("POST", "/servers/child/mcp", `{"jsonrpc":"2.0","id":2,"method":"ping"}`, map[string]string{"Mcp-Session-Id": keeper}); r.status != 200 {
		t.Fatalf("another client's session did not survive the floods: %d %s", r.status, r.body)
	}
	if st := table.Stats(); st.Sessions != tg.gw.Sessions() || st.Evicted < 2*(60-3) {
		t.Fatalf("table %+v, gateway sessions %d", st, tg.gw.Sessions())
	}

	// Sessions whose streams are open are in use: none can make room.
	for range 3 {
		sid := tg.initAs("/servers/all/mcp", "busy").header.Get("Mcp-Session-Id")
		tg.openStream("/servers/all/mcp", sid)
	}
	busy := tg.initAs("/servers/child/mcp", "busy")
	if busy.status != 429 || busy.code != rpccode.Unavailable || busy.header.Get("Retry-After") == "" || !strings.Contains(busy.msg, "limit is 3 per client") {
		t.Fatalf("a client with 3 sessions in use: %d Retry-After %q %s", busy.status, busy.header.Get("Retry-After"), busy.body)
	}
	checkErrorObject(t, busy.body)
	// Legacy SSE streams count too, as the bridge's own /sse counts them.
	for range 3 {
		sseSession(t, tg, "/servers/child/sse")
	}
	if r := tg.raw("GET", "/servers/child/sse", "", map[string]string{"Accept": "text/event-stream"}); r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("a fourth legacy stream: %d %s", r.status, r.body)
	} else {
		checkErrorObject(t, r.body)
	}

	for i := 0; table.Stats().Sessions < 12; i++ {
		sid := tg.initAs("/servers/child/mcp", fmt.Sprint("filler-", i)).header.Get("Mcp-Session-Id")
		tg.openStream("/servers/child/mcp", sid)
	}
	full := tg.initAs("/servers/all/mcp", "late")
	if full.status != 503 || full.code != rpccode.Unavailable || full.header.Get("Retry-After") == "" || !strings.Contains(full.msg, "limit of 12") {
		t.Fatalf("a full table: %d Retry-After %q %s", full.status, full.header.Get("Retry-After"), full.body)
	}
	checkErrorObject(t, full.body)
}

package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// httpBridge starts a bridge with cfg changes applied and returns its base URL.
func httpBridge(t *testing.T, change func(*config.Config)) (string, *Bridge) {
	e := newEnv(t)
	cfg := e.config()
	if change != nil {
		change(cfg)
	}
	b, err := Start(cfg, testutil.Logger(t, "bridge"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + b.Addr(), b
}

type rawResp struct {
	status  int
	header  http.Header
	body    string
	message map[string]any // the JSON-RPC message, from JSON or the first SSE data line
}

// post sends one JSON-RPC body to url the way a Streamable HTTP client does.
func post(t *testing.T, url, body string, hdr map[string]string) rawResp {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := rawResp{status: resp.StatusCode, header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				r.body = d
				break
			}
		}
	} else {
		b, _ := io.ReadAll(resp.Body)
		r.body = string(b)
	}
	_ = json.Unmarshal([]byte(r.body), &r.message)
	return r
}

// text is the error message if there is one, else the raw body.
func (r rawResp) text() string {
	if e, ok := r.message["error"].(map[string]any); ok {
		m, _ := e["message"].(string)
		return m
	}
	return r.body
}

func (r rawResp) code() float64 {
	e, _ := r.message["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// session initializes and returns the session's headers.
func session(t *testing.T, url string, extra map[string]string) map[string]string {
	t.Helper()
	r := post(t, url, initBody, extra)
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	h := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
	for k, v := range extra {
		h[k] = v
	}
	post(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	return h
}

func TestBadInput(t *testing.T) {
	base, _ := httpBridge(t, nil)
	url := base + "/mcp"
	sess := session(t, url, nil)
	for _, tc := range []struct {
		name     string
		body     string
		hdr      map[string]string
		status   int
		code     float64
		contains string
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":2,"method":`, sess, 400, -32700, "not valid JSON"},
		{"not JSON-RPC", `{"hello":"world"}`, sess, 400, -32600, `"jsonrpc" must be "2.0"`},
		{"no method", `{"jsonrpc":"2.0","id":3}`, sess, 400, -32600, "needs a method"},
		{"batch", `[{"jsonrpc":"2.0","id":4,"method":"ping"}]`, sess, 400, -32600, "batches are not supported"},
		{"unknown method", `{"jsonrpc":"2.0","id":5,"method":"tools/destroy"}`, sess, 200, -32601, `"tools/destroy"`},
		{"bad params", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"no_such_tool"}}`, sess, 200, -32602, "no_such_tool"},
		{"missing session", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, nil, 400, -32600, "Mcp-Session-Id header is required"},
		{"unknown session", `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`, map[string]string{"Mcp-Session-Id": "nope", "MCP-Protocol-Version": "2025-06-18"}, 404, -32001, "session not found"},
		{"wrong Accept", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, merge(sess, map[string]string{"Accept": "text/html"}), 406, -32600, "Accept must list"},
		{"wrong Content-Type", `{"jsonrpc":"2.0","id":10,"method":"tools/list"}`, merge(sess, map[string]string{"Content-Type": "text/plain"}), 415, -32600, "Content-Type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, url, tc.body, tc.hdr)
			if r.status != tc.status || r.code() != tc.code || !strings.Contains(r.text(), tc.contains) {
				t.Fatalf("got %d %s; want %d, code %v, mentioning %q", r.status, r.body, tc.status, tc.code, tc.contains)
			}
			// The session keeps working after each.
			if ok := post(t, url, `{"jsonrpc":"2.0","id":99,"method":"tools/list"}`, sess); ok.status != 200 || ok.message["result"] == nil {
				t.Fatalf("session broken after %s: %d %s", tc.name, ok.status, ok.body)
			}
		})
	}
	// The legacy transport refuses the same way.
	r := post(t, base+"/message?sessionId=nope", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil)
	if r.status != 404 || !strings.Contains(r.body, "unknown or ended SSE session") {
		t.Fatalf("unknown SSE session: %d %s", r.status, r.body)
	}
}

func merge(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

func TestOriginAndHostChecks(t *testing.T) {
	base, b := httpBridge(t, func(c *config.Config) { c.AllowedOrigins = []string{"https://app.example.com"} })
	port := b.Addr()[strings.LastIndex(b.Addr(), ":"):]
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		host   string
		status int
	}{
		{"no origin (a CLI client)", nil, "", 200},
		{"allowed origin", map[string]string{"Origin": "https://app.example.com"}, "", 200},
		{"foreign origin", map[string]string{"Origin": "https://evil.example"}, "", 403},
		{"null origin", map[string]string{"Origin": "null"}, "", 403},
		{"rebinding host", nil, "evil.example" + port, 403},
		{"localhost host", nil, "localhost" + port, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(initBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.hdr["Origin"] == "https://app.example.com" && resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
				t.Fatal("no CORS header for an allowed origin")
			}
		})
	}
}

func TestTokenEnforced(t *testing.T) {
	base, _ := httpBridge(t, func(c *config.Config) { c.Token = "s3cret-token" })
	if r := post(t, base+"/mcp", initBody, nil); r.status != 401 {
		t.Fatalf("no token: %d", r.status)
	}
	if r := post(t, base+"/mcp", initBody, map[string]string{"Authorization": "Bearer wrong"}); r.status != 401 {
		t.Fatalf("wrong token: %d", r.status)
	}
	if r := post(t, base+"/mcp?token=s3cret-token", initBody, nil); r.status != 401 {
		t.Fatalf("token in the query string was accepted: %d", r.status)
	}
	session(t, base+"/mcp", map[string]string{"Authorization": "Bearer s3cret-token"})
	if resp, err := http.Get(base + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health needs no token: %v %v", resp, err)
	}

	// Beyond loopback the token is mandatory.
	e := newEnv(t)
	cfg := e.config()
	cfg.Listen = "0.0.0.0:0"
	if _, err := Start(cfg, testutil.Logger(t, "bridge")); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("listening on all interfaces without a token: %v", err)
	}
}

func TestRateAndBodyLimits(t *testing.T) {
	rate := 5.0
	// This client is on loopback; with no wait, a request over the limit is refused at once.
	base, _ := httpBridge(t, func(c *config.Config) { c.LoopbackRateLimit = &rate; c.RateWait = "0s"; c.MaxBodyBytes = 2048 })
	sess := session(t, base+"/mcp", nil)
	limited := 0
	for i := 0; i < 20; i++ {
		r := post(t, base+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, sess)
		if r.status == 429 {
			limited++
			if r.header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		}
	}
	if limited == 0 {
		t.Fatal("20 requests at once passed a 5/s limit")
	}
	// The refill over time is what this step needs, not a condition to
	// wait on: the limiter has no clock a test could move.
	time.Sleep(1100 * time.Millisecond) // let the bucket refill
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 4096) + `"}}}`
	if r := post(t, base+"/mcp", big, sess); r.status != 413 {
		t.Fatalf("4 KiB body against a 2 KiB limit: %d %s", r.status, r.body)
	}
}

func TestIdleSessionsReaped(t *testing.T) {
	base, b := httpBridge(t, func(c *config.Config) { c.SessionTimeout = "300ms" })
	sess := session(t, base+"/mcp", nil)
	testutil.WaitFor(t, "the idle session to be reaped", func() bool {
		post(t, base+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil)
		for range b.mcp.MCP().Sessions() {
			return false
		}
		return true
	})
	if r := post(t, base+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, sess); r.status != 404 {
		t.Fatalf("a reaped session answered %d", r.status)
	}
}

func TestHealthToolsMetrics(t *testing.T) {
	base, _ := httpBridge(t, nil)
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/health"); code != 200 || !strings.Contains(body, `"status":"no_browser"`) || !strings.Contains(body, `"sessions":{"gateway":0,"sse":0,"streamable":0}`) {
		t.Fatalf("/health = %d %s", code, body)
	}
	if code, _ := get("/health?strict=1"); code != 503 {
		t.Fatalf("/health?strict=1 with no browser = %d", code)
	}
	if code, body := get("/tools"); code != 200 || !strings.Contains(body, `"list_browsers"`) {
		t.Fatalf("/tools = %d %s", code, body)
	}
	session(t, base+"/mcp", nil)
	// A request is counted once its handler has returned, which can be just
	// after the client has its answer: poll briefly.
	for _, want := range []string{
		`browserbridge_http_requests_total{route="/mcp",method="POST",code="200"}`,
		"browserbridge_http_request_duration_seconds_bucket",
		"browserbridge_mcp_sessions 1",
		"browserbridge_browsers 0",
	} {
		testutil.WaitFor(t, "/metrics to show "+want, func() bool {
			code, body := get("/metrics")
			return code == 200 && strings.Contains(body, want)
		})
	}
	if code, body := get("/nowhere"); code != 404 || !strings.Contains(body, "/mcp") {
		t.Fatalf("unknown route = %d %s", code, body)
	}
}

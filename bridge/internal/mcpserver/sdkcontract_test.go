package mcpserver

// The fast path (fastpath.go) writes what the SDK would write and keeps
// sessions as the SDK would keep them, without the SDK seeing its
// requests. These tests hold the SDK itself (its Streamable HTTP server,
// no bridge in front) to each behaviour the fast path copies, so that an
// SDK upgrade that changes one of them fails here, by name, rather than
// making the fast path's answers differ from the SDK's for clients:
//
//   - the protocol versions it speaks (mcphttp.Versions, every endpoint's
//     table) and the one it answers an initialize with (mcphttp.Negotiate);
//   - which Accept headers it takes (mcphttp.Accepts, the bridge's rule);
//   - its event ids, "<stream>_<index>" from 0, the priming event first
//     from 2025-11-25, stored empty so that indices line up, and the
//     bytes and headers of its event streams (mcphttp.AppendEvent,
//     mcphttp.SetStreamHeaders);
//   - its stream ids, upper-case base32, which can never be a fast-path
//     stream's ("f…") or a standalone stream's priming id ("g…");
//   - its resumption of a stream it did not open, from the event store;
//   - its idle timer: paused while a POST is in progress, started again
//     when the last ends, not held by a GET stream (mcphttp.Lease keeps it for the live sessions).

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// sdkHandler is the SDK's stateful Streamable HTTP handler with the
// bridge's event store, serving an echo tool and a tool that blocks until
// release is closed.
func sdkHandler(events mcp.EventStore, timeout time.Duration, release <-chan struct{}) (*mcp.Server, http.Handler) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "block", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-release
		return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
	})
	return srv, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		EventStore:                 events,
		SessionTimeout:             timeout,
		DisableLocalhostProtection: true,
	})
}

// sdkRequest is one request to an SDK handler, served in this goroutine.
func sdkRequest(h http.Handler, method, sid, version, body string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", mcphttp.ContentTypeJSON)
	r.Header.Set("Accept", mcphttp.ContentTypeJSON+", "+mcphttp.ContentTypeSSE)
	if sid != "" {
		r.Header.Set(mcphttp.HeaderSessionID, sid)
		r.Header.Set(mcphttp.HeaderProtocolVersion, version)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// sdkSession initializes a session of the given era on an SDK handler.
func sdkSession(t *testing.T, h http.Handler, version string) string {
	t.Helper()
	w := sdkRequest(h, http.MethodPost, "", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	sid := w.Header().Get(mcphttp.HeaderSessionID)
	if w.Code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", w.Code, w.Body)
	}
	if w := sdkRequest(h, http.MethodPost, sid, version, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); w.Code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", w.Code, w.Body)
	}
	return sid
}

// TestSDKAcceptRule: the SDK's server refuses exactly the POSTs and GETs
// whose Accept mcphttp.Accepts refuses (the bridge answers them itself,
// before the fast path or the SDK sees them), over every pair of a set of
// media ranges, in one header line and in two.
func TestSDKVersions(t *testing.T) {
	sdk := slices.Sorted(slices.Values(mcp.SupportedProtocolVersions()))
	if !slices.Equal(sdk, mcphttp.Versions) {
		t.Fatalf("the SDK speaks %q, mcphttp.Versions lists %q: update the table (and what the endpoints answer)", sdk, mcphttp.Versions)
	}
	// The SDK's initialize answers its newest version with sessions to a
	// version it does not speak, as mcphttp.Negotiate does.
	for _, requested := range []string{"1999-01-01", mcphttp.VersionStateless, "2025-06-18", ""} {
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
			return mcp.NewServer(&mcp.Implementation{Name: "contract", Version: "1"}, nil)
		}, &mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
		srv := httptest.NewServer(h)
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, requested)
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		want := fmt.Sprintf(`"protocolVersion":%q`, mcphttp.Negotiate(requested, mcphttp.Versions))
		if !strings.Contains(string(got), want) {
			t.Errorf("initialize asking for %q: the SDK answered %s; mcphttp.Negotiate says %s", requested, got, want)
		}
	}
}

func TestSDKAcceptRule(t *testing.T) {
	_, h := sdkHandler(nil, 0, nil)
	ranges := []string{"", "application/json", "text/event-stream", "application/*", "text/*", "*/*", "text/html",
		"Application/JSON", "TEXT/Event-Stream", "text/event-stream;q=0", "application/json; charset=utf-8", "*/*;q=0.1",
		"application/json-seq", " text/event-stream "}
	var cases [][]string
	for _, a := range ranges {
		for _, b := range ranges {
			cases = append(cases, []string{a + "," + b}, []string{a, b})
		}
		cases = append(cases, []string{a}, nil)
	}
	for _, values := range cases {
		jsonOK, streamOK := mcphttp.Accepts(values)
		for _, tc := range []struct {
			method string
			want   bool
		}{{http.MethodPost, jsonOK && streamOK}, {http.MethodGet, streamOK}} {
			r := httptest.NewRequest(tc.method, "/mcp", strings.NewReader("not JSON: refused after the Accept check"))
			r.Header.Set("Content-Type", mcphttp.ContentTypeJSON)
			r.Header["Accept"] = values
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			sdkTakes := !strings.Contains(w.Body.String(), "Accept must contain")
			if sdkTakes != tc.want {
				t.Errorf("%s with Accept %q: the SDK takes it: %v, mcphttp.Accepts: %v (%d %s)", tc.method, values, sdkTakes, tc.want, w.Code, w.Body)
			}
		}
	}
}

// sdkStreamID is the shape of the SDK's stream ids (crypto/rand.Text).
var sdkStreamID = regexp.MustCompile(`^[A-Z2-7]{26}$`)

// TestSDKEventStreams: a tools/call answered by the SDK, in each era the
// fast path serves, is the stream the fast path writes, byte for byte,
// with the same headers, and the SDK stored its events as the fast path
// stores them.
func TestSDKEventStreams(t *testing.T) {
	for _, tc := range []struct {
		version string
		prime   bool
	}{{"2025-03-26", false}, {"2025-06-18", false}, {"2025-11-25", true}} {
		t.Run(tc.version, func(t *testing.T) {
			events := newEventStore(1 << 20)
			_, h := sdkHandler(events, 0, nil)
			sid := sdkSession(t, h, tc.version)
			w := sdkRequest(h, http.MethodPost, sid, tc.version, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}`, nil)
			first, err := mcphttp.NewSSEReader(strings.NewReader(w.Body.String()), 1<<20).Next()
			stream, _, ok := mcphttp.ParseEventID(first.ID)
			if err != nil || !ok || !sdkStreamID.MatchString(stream) {
				t.Fatalf("the SDK's first event %+v (%v): no event id <stream>_<index> with a stream id of the SDK's shape\n%s", first, err, w.Body)
			}
			data := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}`)
			var want []byte
			idx := 0
			if tc.prime {
				want = mcphttp.AppendEvent(want, mcphttp.Event{Name: "prime", ID: mcphttp.EventID(stream, 0)})
				idx = 1
			}
			want = mcphttp.AppendEvent(want, mcphttp.Event{Name: "message", ID: mcphttp.EventID(stream, idx), Data: data})
			if w.Code != http.StatusOK || w.Body.String() != string(want) {
				t.Fatalf("the SDK wrote %d\n%q\nthe fast path writes\n%q", w.Code, w.Body, want)
			}
			hdr := http.Header{}
			mcphttp.SetStreamHeaders(hdr)
			for k := range hdr {
				if w.Header().Get(k) != hdr.Get(k) {
					t.Errorf("%s: the SDK's %q, the fast path's %q", k, w.Header().Get(k), hdr.Get(k))
				}
			}
			var stored []string
			for e, err := range events.After(context.Background(), sid, stream, -1) {
				if err != nil {
					t.Fatal(err)
				}
				stored = append(stored, string(e))
			}
			wantStored := []string{string(data)}
			if tc.prime {
				wantStored = []string{"", string(data)}
			}
			if fmt.Sprint(stored) != fmt.Sprint(wantStored) {
				t.Fatalf("the SDK stored %q, the fast path stores %q", stored, wantStored)
			}
		})
	}
}

// TestSDKResumesStreamsItDidNotOpen: a GET with the Last-Event-ID of a
// stream the SDK never opened (a fast-path call's) replays that stream's
// events from the event store, with the ids the fast path gave them.
func TestSDKResumesStreamsItDidNotOpen(t *testing.T) {
	events := newEventStore(1 << 20)
	_, h := sdkHandler(events, 0, nil)
	const version = "2025-11-25"
	sid := sdkSession(t, h, version)
	stream := fastStreamID(1, []byte("31"))
	if strings.Contains(stream, "_") || sdkStreamID.MatchString(stream) || !strings.HasPrefix(stream, "f") {
		t.Fatalf("fast-path stream id %q could be read as another", stream)
	}
	ctx := context.Background()
	data := []byte(`{"jsonrpc":"2.0","id":31,"result":{}}`)
	_ = events.Open(ctx, sid, stream)
	_ = events.Append(ctx, sid, stream, nil) // the priming event
	_ = events.Append(ctx, sid, stream, data)
	w := sdkRequest(h, http.MethodGet, sid, version, "", map[string]string{mcphttp.HeaderLastEventID: mcphttp.EventID(stream, 0)})
	want := mcphttp.AppendEvent(nil, mcphttp.Event{Name: "message", ID: mcphttp.EventID(stream, 1), Data: data})
	if w.Code != http.StatusOK || w.Body.String() != string(want) || w.Header().Get("Content-Type") != mcphttp.ContentTypeSSE {
		t.Fatalf("resumed: %d %q %q\nwant %q", w.Code, w.Header().Get("Content-Type"), w.Body, want)
	}
}

// TestSDKIdleTimer: the SDK ends a session idle for its SessionTimeout;
// a POST in progress holds the timer and the timeout starts again when the
// last POST ends; an open GET stream does not hold it. Time is synctest's:
// the sleeps below take no time, and nothing else runs meanwhile.
func TestSDKIdleTimer(t *testing.T) {
	const timeout = time.Minute
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, h http.Handler, sid string, release chan struct{}, alive func() bool)
	}{
		{"an idle session ends after the timeout", func(t *testing.T, _ http.Handler, _ string, _ chan struct{}, alive func() bool) {
			endsInATimeout(t, timeout, alive, "its start")
		}},
		{"a POST in progress holds it, and the timeout restarts when it ends", func(t *testing.T, h http.Handler, sid string, release chan struct{}, alive func() bool) {
			var wg sync.WaitGroup
			wg.Go(func() {
				sdkRequest(h, http.MethodPost, sid, "2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block"}}`, nil)
			})
			synctest.Wait()
			time.Sleep(3 * timeout)
			if !alive() {
				t.Fatal("ended while a POST was in progress")
			}
			close(release)
			wg.Wait()
			endsInATimeout(t, timeout, alive, "the POST's end")
		}},
		{"an open GET stream does not hold it", func(t *testing.T, h http.Handler, sid string, _ chan struct{}, alive func() bool) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				sdkRequest(h, http.MethodGet, sid, "2025-06-18", "", nil)
			}()
			synctest.Wait()
			time.Sleep(timeout + time.Second)
			if alive() {
				t.Fatal("an open GET stream kept the session")
			}
			<-done // the stream ended with its session
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				srv, h := sdkHandler(nil, timeout, release)
				sid := sdkSession(t, h, "2025-06-18")
				alive := func() bool {
					synctest.Wait()
					for range srv.Sessions() {
						return true
					}
					return false
				}
				tc.run(t, h, sid, release, alive)
				select {
				case <-release:
				default:
					close(release)
				}
			})
		})
	}
}

// endsInATimeout checks, in a synctest bubble, that the session is still
// open a second before timeout from now (since) and has ended a second
// after.
func endsInATimeout(t *testing.T, timeout time.Duration, alive func() bool, since string) {
	t.Helper()
	time.Sleep(timeout - time.Second)
	if !alive() {
		t.Fatalf("ended within the timeout of %s", since)
	}
	time.Sleep(2 * time.Second)
	if alive() {
		t.Fatalf("still open a timeout after %s", since)
	}
}

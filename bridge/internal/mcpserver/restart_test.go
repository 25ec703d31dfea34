package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// restartable is a bridge that can die (as with SIGKILL: nothing is
// closed, records stay) and come back on the same address with the same
// state directory, the way the host restarts a real one.
type restartable struct {
	t       *testing.T
	addr    string
	records string
	hopts   HTTPOptions
	cur     *bridge
	ext     *fakeExtension
	gets    *atomic.Int64 // GET streams open on the current bridge
}

func newRestartable(t *testing.T, hopts HTTPOptions) *restartable {
	hopts.SessionDir = filepath.Join(t.TempDir(), "sessions")
	r := &restartable{t: t, hopts: hopts}
	r.start()
	return r
}

// start brings a bridge up at r.addr (a free port the first time).
func (r *restartable) start() {
	r.t.Helper()
	dir, err := os.MkdirTemp("", "mcps")
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { os.RemoveAll(dir) })
	b, mux, stop, err := startBridge(filepath.Join(dir, "bridge.sock"), Options{Logger: testLogger()}, r.hopts)
	if err != nil {
		r.t.Fatal(err)
	}
	b.t = r.t
	addr := r.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	// The old bridge's port may not be free again at once.
	var ln net.Listener
	testutil.WaitFor(r.t, "listening again on "+addr, func() bool {
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	r.addr = ln.Addr().String()
	gets := new(atomic.Int64) // this bridge's own: the old one's streams end after it is gone
	r.gets = gets
	counted := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && req.URL.Path == "/mcp" {
			gets.Add(1)
			defer gets.Add(-1)
		}
		mux.ServeHTTP(w, req)
	})
	b.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: counted}}
	b.srv.Start()
	r.t.Cleanup(func() {
		b.srv.CloseClientConnections()
		b.srv.Close()
		stop()
	})
	r.cur = b
	r.ext = b.attach("instance-restart")
}

// kill drops the bridge as a crash would: connections cut, nothing ended.
func (r *restartable) kill() {
	r.cur.srv.CloseClientConnections()
	r.cur.srv.Listener.Close()
	r.ext.CloseStdin() // the link to the old bridge
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// sessionOfCall is the browserbridge/session _meta id of the extension's
// n-th last tools/call.
func (fe *fakeExtension) sessionOfLastCall(t *testing.T) string {
	t.Helper()
	fe.mu.Lock()
	defer fe.mu.Unlock()
	if len(fe.calls) == 0 {
		t.Fatal("the extension got no call")
	}
	var p struct {
		Meta struct {
			Session struct {
				ID string `json:"id"`
			} `json:"browserbridge/session"`
		} `json:"_meta"`
	}
	json.Unmarshal(fe.calls[len(fe.calls)-1], &p)
	return p.Meta.Session.ID
}

// TestSessionSurvivesRestart: a session of every stateful era, made with
// the official Go SDK client, carries on after the bridge dies and comes
// back: same Mcp-Session-Id, same link id (so the same tab group), same
// pinned browser; and a new session gets a link id of its own.
func TestSessionSurvivesRestart(t *testing.T) {
	for _, version := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			r := newRestartable(t, HTTPOptions{})
			c := mcp.NewClient(&mcp.Implementation{Name: "alice", Version: "1"}, nil)
			cs, err := c.Connect(testutil.Context(t, 30*time.Second), &mcp.StreamableClientTransport{Endpoint: "http://" + r.addr + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if _, err := cs.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "select_browser", Arguments: map[string]any{"browser": "instance-restart"}}); err != nil {
				t.Fatal(err)
			}
			call := func() string {
				t.Helper()
				res, err := cs.CallTool(testutil.Context(t, 60*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
				if err != nil || res.IsError || testutil.Text(res) != "hi" {
					t.Fatalf("call: %v %+v", err, res)
				}
				return r.ext.sessionOfLastCall(t)
			}
			before := call()
			if len(before) < len("local-")+20 {
				t.Fatalf("link id %q is not a random one", before)
			}

			r.kill()
			r.start()
			if got := r.cur.mcps.LiveSessions(); len(got) != 1 || got[0].ID != before || got[0].Client != "alice" {
				t.Fatalf("before the client is back, hello would list %+v; want the recorded %s", got, before)
			}
			if after := call(); after != before {
				t.Fatalf("after the restart the calls come from %s, before from %s", after, before)
			}
			if _, ok := r.cur.st.live.Get(cs.ID()); cs.ID() == "" || !ok {
				t.Fatalf("session %q is not live on the new bridge", cs.ID())
			}
			ls, _ := r.cur.st.live.Get(cs.ID())
			st := ls.link
			if st.chosen() != "instance-restart" {
				t.Fatalf("pinned browser %q after the restart", st.chosen())
			}
			other := r.cur.rawSession(t, version)
			other.post(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, nil)
			if id := r.ext.sessionOfLastCall(t); id == before {
				t.Fatalf("a new session got the old session's link id %s", id)
			}
		})
	}
}

// TestLostCallNamesTheRestart: a 2025-11-25 call whose bridge died before
// it answered ends, when the client resumes its stream, with a tool error
// that names the restart, under the call's own request id.
func TestLostCallNamesTheRestart(t *testing.T) {
	for _, id := range []string{`7`, `"call-seven"`} {
		t.Run(id, func(t *testing.T) {
			r := newRestartable(t, HTTPOptions{})
			c := r.cur.rawSession(t, "2025-11-25")
			resp := c.send(http.MethodPost, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"wait","arguments":{"ms":3000}}}`, nil)
			br := bufio.NewReader(resp.Body)
			prime, err := br.ReadString('\n')
			for err == nil && !strings.HasPrefix(prime, "id: ") {
				prime, err = br.ReadString('\n')
			}
			resp.Body.Close()
			if err != nil {
				t.Fatalf("reading the priming event: %v", err)
			}
			last := strings.TrimSpace(strings.TrimPrefix(prime, "id: "))
			r.kill()
			r.start()
			c.url = "http://" + r.addr + "/mcp"
			got := c.send(http.MethodGet, "", map[string]string{"Last-Event-ID": last, "Content-Type": ""})
			defer got.Body.Close()
			var body bytes.Buffer
			body.ReadFrom(got.Body)
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Result struct {
					IsError bool `json:"isError"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"result"`
			}
			data := body.String()
			if i := strings.Index(data, "data: "); i >= 0 {
				data = strings.TrimSpace(data[i+len("data: "):])
			}
			if err := json.Unmarshal([]byte(data), &msg); err != nil || got.StatusCode != 200 {
				t.Fatalf("resuming %s: %d %s", last, got.StatusCode, body.String())
			}
			if string(msg.ID) != id || !msg.Result.IsError || len(msg.Result.Content) != 1 || !strings.Contains(msg.Result.Content[0].Text, "restarted") {
				t.Fatalf("resuming %s answered %s", last, body.String())
			}
		})
	}
}

// TestRestartDuringCalls: the bridge dies while 10 sessions have 5 calls
// each in flight. Every call completes or ends with an error (the restart
// sentence or the transport's), none hangs, none is answered for another
// session, and every session works afterwards.
func TestRestartDuringCalls(t *testing.T) {
	const sessions, calls = 10, 5
	r := newRestartable(t, HTTPOptions{})
	css := make([]*mcp.ClientSession, sessions)
	for i := range css {
		c := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("client-%d", i), Version: "1"}, nil)
		cs, err := c.Connect(testutil.Context(t, 30*time.Second), &mcp.StreamableClientTransport{Endpoint: "http://" + r.addr + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		css[i] = cs
	}
	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	started := make(chan struct{}, sessions*calls)
	before := callCount(r.ext)
	for i, cs := range css {
		for j := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				want := fmt.Sprintf("session %d call %d", i, j)
				started <- struct{}{}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"ms": 1500}})
				if err == nil && !res.IsError {
					res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": want}})
				}
				outcome := "completed"
				switch {
				case ctx.Err() != nil:
					outcome = "hung"
				case err != nil:
					outcome = "transport error"
				case res.IsError && strings.Contains(testutil.Text(res), "restarted"):
					outcome = "restart sentence"
				case res.IsError:
					outcome = "tool error: " + testutil.Text(res)
				case testutil.Text(res) != want:
					outcome = "crossed: " + testutil.Text(res)
				}
				mu.Lock()
				outcomes[outcome]++
				mu.Unlock()
			}()
		}
	}
	for range sessions * calls {
		<-started
	}
	waitCalls(t, r.ext, before+sessions*calls) // the calls reached the extension
	r.kill()
	r.start()
	wg.Wait()
	t.Logf("outcomes of %d calls across the restart: %v", sessions*calls, outcomes)
	for o, n := range outcomes {
		if o != "completed" && o != "restart sentence" && o != "transport error" {
			t.Errorf("%d calls: %s", n, o)
		}
	}
	for i, cs := range css {
		want := fmt.Sprintf("after %d", i)
		res, err := cs.CallTool(testutil.Context(t, 60*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": want}})
		if err != nil || res.IsError || testutil.Text(res) != want {
			t.Errorf("session %d after the restart: %v %+v", i, err, res)
		}
	}
}

// TestRecordsRefused: every kind of bad record is ignored with a logged
// reason, the good one beside it is kept, and the store still works.
func TestRecordsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	good := func(sid string) *sessionRecord {
		return &sessionRecord{Version: recordVersion, IDHash: hashSessionID(sid), LinkID: newLinkID(), Client: "c",
			Initialize: &mcp.InitializeParams{ProtocolVersion: "2025-06-18", ClientInfo: &mcp.Implementation{Name: "c"}}, Negotiated: "2025-06-18", Created: time.Now()}
	}
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	marshal := func(r *sessionRecord) []byte { b, _ := json.Marshal(r); return b }

	keep := good("keep")
	write(keep.IDHash+".json", marshal(keep))
	cases := []struct {
		name, reason string
		setup        func()
	}{
		{"corrupt", "not a valid record", func() { r := good("corrupt"); write(r.IDHash+".json", []byte("{not json")) }},
		{"truncated", "not a valid record", func() { r := good("trunc"); b := marshal(r); write(r.IDHash+".json", b[:len(b)/2]) }},
		{"future version", "newer bridge", func() { r := good("future"); r.Version = recordVersion + 1; write(r.IDHash+".json", marshal(r)) }},
		{"bad link id", "linkId", func() { r := good("badlink"); r.LinkID = "../../x"; write(r.IDHash+".json", marshal(r)) }},
		{"renamed", "does not match", func() { r := good("renamed"); write(hashSessionID("other")+".json", marshal(r)) }},
		{"too large", "more than a record", func() { r := good("large"); write(r.IDHash+".json", bytes.Repeat([]byte(" "), maxRecordBytes+1)) }},
		{"symlink", "not a regular file", func() {
			r := good("link")
			target := filepath.Join(t.TempDir(), "elsewhere.json")
			os.WriteFile(target, marshal(r), 0o600)
			if err := os.Symlink(target, filepath.Join(dir, r.IDHash+".json")); err != nil {
				t.Fatal(err)
			}
		}},
		{"another user's", "owned by uid", func() {
			if os.Getuid() != 0 {
				t.Log("not root: cannot make a file of another user; the ownership check is not exercised")
				return
			}
			r := good("foreign")
			write(r.IDHash+".json", marshal(r))
			if err := os.Chown(filepath.Join(dir, r.IDHash+".json"), 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		tc.setup()
	}
	// Writes a crash cut short: atomicfile's temporary name, and the one
	// bridges used before it.
	crashed := []string{"." + keep.IDHash + ".json.123.tmp", ".tmp-456"}
	for _, name := range crashed {
		write(name, []byte("{"))
	}
	var logs bytes.Buffer
	rs := newRecordStore(dir, 100, time.Hour, slog.New(slog.NewTextHandler(&logs, nil)))
	rs.load()
	for _, name := range crashed {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("load left the interrupted write %s (%v)", name, err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "another user's" && os.Getuid() != 0 {
				return
			}
			if !strings.Contains(logs.String(), tc.reason) {
				t.Fatalf("no log line saying %q:\n%s", tc.reason, logs.String())
			}
		})
	}
	if got := rs.pendingRecords(); len(got) != 1 || got[0].IDHash != keep.IDHash {
		t.Fatalf("kept %d records, want only the good one", len(got))
	}
	if rs.take("keep") == nil {
		t.Fatal("the good record was not resumable")
	}
}

// TestRecordFile: a record is 0600, holds no session id, and goes with the
// session; a record unused for longer than the session timeout is dropped.
func TestRecordFile(t *testing.T) {
	r := newRestartable(t, HTTPOptions{})
	c := r.cur.rawSession(t, "2025-06-18")
	path := filepath.Join(r.hopts.SessionDir, hashSessionID(c.sid)+".json")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no record for the session: %v", err)
	}
	data, _ := os.ReadFile(path)
	t.Logf("record file: %d bytes", len(data))
	if fi.Mode().Perm() != 0o600 || bytes.Contains(data, []byte(c.sid)) {
		t.Fatalf("record %v holds the session id or is not 0600: %s", fi.Mode(), data)
	}
	// A session in use keeps its record fresh: a restarted bridge drops
	// records unused for longer than the session timeout.
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(path, old, old)
	ls, _ := r.cur.st.live.Get(c.sid)
	ls.touchedAt.Store(0) // the last push was long ago
	c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, nil)
	if fi, err := os.Stat(path); err != nil || time.Since(fi.ModTime()) > time.Hour {
		t.Fatalf("a call did not push the record's mtime forward: %v %v", fi.ModTime(), err)
	}
	if r := c.send(http.MethodDelete, "", nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", r.StatusCode)
	}
	testutil.WaitFor(t, "the record removed after its session's DELETE", func() bool {
		_, err := os.Stat(path)
		return os.IsNotExist(err)
	})

	stale := &sessionRecord{Version: recordVersion, IDHash: hashSessionID("stale"), LinkID: newLinkID(),
		Initialize: &mcp.InitializeParams{ProtocolVersion: "2025-06-18"}, Created: time.Now()}
	b, _ := json.Marshal(stale)
	p := filepath.Join(r.hopts.SessionDir, stale.IDHash+".json")
	os.WriteFile(p, b, 0o600)
	old = time.Now().Add(-2 * time.Hour)
	os.Chtimes(p, old, old)
	rs := newRecordStore(r.hopts.SessionDir, 10, time.Hour, slog.New(slog.DiscardHandler))
	rs.load()
	if len(rs.pendingRecords()) != 0 {
		t.Fatal("a record unused for longer than the session timeout was kept")
	}
}

// TestStoppingBridgeKeepsSessions: between the end of its sessions and the
// end of its listener, a stopping bridge answers a session's request with
// 503 and Retry-After, not the 404 that would make the client give the
// session up; the session's record stays for the next process.
func TestStoppingBridgeKeepsSessions(t *testing.T) {
	r := newRestartable(t, HTTPOptions{})
	c := r.cur.rawSession(t, "2025-06-18")
	r.cur.st.Close()
	got := c.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil)
	if got.status != http.StatusServiceUnavailable || got.header.Get("Retry-After") == "" {
		t.Fatalf("a stopping bridge answered %d %s", got.status, got.body)
	}
	rpcError(t, got.body)
	if _, err := os.Stat(filepath.Join(r.hopts.SessionDir, hashSessionID(c.sid)+".json")); err != nil {
		t.Fatalf("the record went with the stop: %v", err)
	}
	r.kill()
	r.start()
	c.url = "http://" + r.addr + "/mcp"
	if got := c.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`, nil); got.status != http.StatusOK {
		t.Fatalf("after the restart: %d %s", got.status, got.body)
	}
}

// TestSessionSurvivesManyRestarts: the official Go SDK client gives its
// session up when its standalone GET stream broke more than MaxRetries
// times without a new event id; every GET stream opens with a priming event of
// its own id, so a session outlives any number of restarts.
func TestSessionSurvivesManyRestarts(t *testing.T) {
	r := newRestartable(t, HTTPOptions{})
	c := mcp.NewClient(&mcp.Implementation{Name: "long-lived", Version: "1"}, nil)
	// MaxRetries bounds both the breaks without a new event id and the
	// attempts to reach a bridge that is not back yet; 8 (instead of the
	// default 5) leaves a loaded machine time to bring the bridge back, and
	// the test restarts it more often than that.
	const maxRetries = 8
	cs, err := c.Connect(testutil.Context(t, 30*time.Second), &mcp.StreamableClientTransport{Endpoint: "http://" + r.addr + "/mcp", MaxRetries: maxRetries}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// waitGET waits until the bridge has the client's standalone stream.
	waitGET := func() {
		t.Helper()
		testutil.WaitFor(t, "the client's GET stream open again", func() bool { return r.gets.Load() > 0 })
	}
	for i := range maxRetries + 3 {
		res, err := cs.CallTool(testutil.Context(t, 60*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": fmt.Sprint(i)}})
		if err != nil || res.IsError || testutil.Text(res) != fmt.Sprint(i) {
			t.Fatalf("call after %d restarts: %v %+v", i, err, res)
		}
		waitGET()
		r.kill()
		r.start()
	}
}

// TestDeleteRightAfterInitializeLeavesNoRecord: a client that ends its
// session as soon as initialize answers (a probe, a one-shot script)
// leaves no record behind. The record is written after the answer went
// out, so the DELETE races its write; a record written after the end
// removed it stays for good (a restarted bridge offers a session the
// client gave up; e2e's TestRestartDuringCalls once counted one record
// too many so). The window is narrow: an idle machine rarely opens it,
// a loaded one did.
func TestDeleteRightAfterInitializeLeavesNoRecord(t *testing.T) {
	r := newRestartable(t, HTTPOptions{})
	for i := range 100 {
		c := &rawClient{t: t, url: "http://" + r.addr + "/mcp", version: "2025-11-25"}
		got := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`, nil)
		if c.sid = got.header.Get("Mcp-Session-Id"); got.status != http.StatusOK || c.sid == "" {
			t.Fatalf("initialize %d: %d %s", i, got.status, got.body)
		}
		if resp := c.send(http.MethodDelete, "", nil); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE %d: %d", i, resp.StatusCode)
		}
	}
	testutil.WaitFor(t, "every session ended", func() bool { return r.cur.st.live.Len() == 0 })
	testutil.WaitFor(t, "no record left", func() bool {
		recs, _ := filepath.Glob(filepath.Join(r.hopts.SessionDir, "*.json"))
		return len(recs) == 0
	})
}

package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

func TestEveryEraReachesTheServer(t *testing.T) {
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": everything(t)}, Options{})
	for _, route := range []string{"/servers/everything", "/everything"} {
		for _, e := range eras {
			if route == "/everything" && !e.sse {
				continue // the alias is the legacy path form only
			}
			t.Run(strings.TrimPrefix(route, "/")+"/"+e.name, func(t *testing.T) {
				ctx := testutil.Context(t, 30*time.Second)
				cs := tg.connect(route, e, nil)
				// Every era learns who the server is: from initialize, or
				// in 2026-07-28 from server/discover's _meta (issue 33).
				if ir := cs.InitializeResult(); ir == nil || ir.ServerInfo == nil || ir.ServerInfo.Name == "" {
					t.Fatalf("no serverInfo: %+v", ir)
				}
				tools, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, tl := range tools.Tools {
					found = found || tl.Name == "echo"
				}
				if !found {
					t.Fatalf("no echo among %d tools", len(tools.Tools))
				}
				got, err := echo(ctx, cs, "hello "+e.name)
				if err != nil || !strings.Contains(got, "hello "+e.name) {
					t.Fatalf("echo: %q %v", got, err)
				}
			})
		}
	}
	if st, _ := tg.gw.Supervisor().State("everything"); st.Restarts != 0 || st.Private != 0 {
		t.Fatalf("one shared child expected: %+v", st)
	}
}

// TestDiscoverCarriesServerInfo: a stateless client (the Go SDK's
// default, server/discover) gets the same serverInfo a session's
// initialize gives, on a server's route and on the aggregate's (issue 33,
// item 5: it had none, and the Go SDK client's ServerInfo was nil).
func TestDiscoverCarriesServerInfo(t *testing.T) {
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": everything(t)}, Options{})
	for _, route := range []string{"/servers/everything", "/servers/all"} {
		t.Run(route, func(t *testing.T) {
			session := tg.connect(route, sessionEra, nil).InitializeResult().ServerInfo
			stateless := tg.connect(route, eras[len(eras)-1], nil).InitializeResult().ServerInfo
			if session == nil || stateless == nil || !reflect.DeepEqual(stateless, session) {
				t.Fatalf("serverInfo from server/discover %+v, from initialize %+v; want the same", stateless, session)
			}
		})
	}
}

// Twenty SDK clients number their requests alike (1, 2, 3, …); through one
// shared child every reply must still reach its own caller.
func TestManySessionsShareOneChildWithoutCrossedReplies(t *testing.T) {
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": everything(t)}, Options{})
	ctx := testutil.Context(t, 60*time.Second)
	const sessions, workers, calls = 20, 4, 50
	var crossed, failed atomic.Int64
	var wg sync.WaitGroup
	pid := 0
	for i := range sessions {
		cs := tg.connect("/servers/everything", sessionEra, nil)
		if i == 0 {
			pid = tg.waitState("everything", "running", func(st stdio.State) bool { return st.PID != 0 }).PID
		}
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c := range calls {
					msg := fmt.Sprintf("s%d-w%d-c%d", i, w, c)
					got, err := echo(ctx, cs, msg)
					switch {
					case err != nil:
						failed.Add(1)
						t.Errorf("%s: %v", msg, err)
					case got != "Echo: "+msg:
						crossed.Add(1)
						t.Errorf("sent %s, got %q", msg, got)
					}
				}
			}()
		}
	}
	wg.Wait()
	if crossed.Load() != 0 || failed.Load() != 0 {
		t.Fatalf("%d crossed, %d failed of %d", crossed.Load(), failed.Load(), sessions*workers*calls)
	}
	st, _ := tg.gw.Supervisor().State("everything")
	if st.PID != pid || st.Restarts != 0 || st.Private != 0 {
		t.Fatalf("the child changed or multiplied: pid %d → %+v", pid, st)
	}
}

// Sampling and elicitation requests go to the session whose call asked,
// while other sessions that could answer them keep calling.
func TestServerRequestsReachTheCaller(t *testing.T) {
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": everything(t)}, Options{})
	ctx := testutil.Context(t, 60*time.Second)
	type client struct {
		cs                *mcp.ClientSession
		sampled, elicited atomic.Int64
	}
	clients := make([]*client, 3)
	for i := range clients {
		c := &client{}
		clients[i] = c
		c.cs = tg.connect("/servers/everything", sessionEra, &mcp.ClientOptions{
			CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				c.sampled.Add(1)
				return &mcp.CreateMessageResult{Model: fmt.Sprintf("model-of-client-%d", i), Role: "assistant", Content: &mcp.TextContent{Text: "ok"}}, nil
			},
			ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				c.elicited.Add(1)
				return &mcp.ElicitResult{Action: "decline"}, nil
			},
		})
	}
	// Clients 1 and 2 keep the child busy with quick calls meanwhile.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range clients[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := echo(ctx, c.cs, fmt.Sprint("busy-", n)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for round := range 5 {
		res, err := clients[0].cs.CallTool(ctx, &mcp.CallToolParams{Name: "trigger-sampling-request", Arguments: map[string]any{"prompt": fmt.Sprint("round ", round)}})
		if err != nil || res.IsError || !strings.Contains(testutil.Text(res), "model-of-client-0") {
			t.Fatalf("sampling round %d: %v %s", round, err, testutil.Text(res))
		}
		res, err = clients[0].cs.CallTool(ctx, &mcp.CallToolParams{Name: "trigger-elicitation-request", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("elicitation round %d: %v %+v", round, err, res)
		}
	}
	close(stop)
	wg.Wait()
	if clients[0].sampled.Load() != 5 || clients[0].elicited.Load() != 5 {
		t.Fatalf("the caller answered %d samplings and %d elicitations, want 5 and 5", clients[0].sampled.Load(), clients[0].elicited.Load())
	}
	for i, c := range clients[1:] {
		if c.sampled.Load() != 0 || c.elicited.Load() != 0 {
			t.Fatalf("client %d was asked %d samplings and %d elicitations it never caused", i+1, c.sampled.Load(), c.elicited.Load())
		}
	}
}

// Two clients use the same progress token; each sees only its own.
func TestProgressReachesOnlyItsCaller(t *testing.T) {
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": everything(t)}, Options{})
	ctx := testutil.Context(t, 60*time.Second)
	type client struct {
		cs    *mcp.ClientSession
		mu    sync.Mutex
		notes []float64
	}
	clients := make([]*client, 3)
	for i := range clients {
		c := &client{}
		clients[i] = c
		c.cs = tg.connect("/servers/everything", sessionEra, &mcp.ClientOptions{
			ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
				c.mu.Lock()
				c.notes = append(c.notes, req.Params.Progress)
				c.mu.Unlock()
			},
		})
	}
	var wg sync.WaitGroup
	steps := []int{3, 5, 0}
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if steps[i] == 0 {
				for n := range 50 {
					if _, err := echo(ctx, c.cs, fmt.Sprint(n)); err != nil {
						t.Error(err)
					}
				}
				return
			}
			p := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": steps[i]}}
			p.SetProgressToken("same-token")
			if res, err := c.cs.CallTool(ctx, p); err != nil || res.IsError {
				t.Errorf("client %d: %v %+v", i, err, res)
			}
		}()
	}
	wg.Wait()
	// The SDK client runs notification handlers on their own: the last may
	// still be on its way when CallTool returns.
	count := func(c *client) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.notes)
	}
	// The gateway wrote every notification, to whichever client, before
	// the answers wg.Wait saw: one sent to the wrong client is already in
	// that client's hands, and shows below as a count too high there and
	// too low at its caller (where WaitFor then fails). No sleep is needed
	// for the exact counts; only the handlers' goroutines are waited for.
	for i, c := range clients {
		testutil.WaitFor(t, fmt.Sprintf("client %d's %d progress notifications", i, steps[i]), func() bool { return count(c) >= steps[i] })
	}
	for i, c := range clients {
		if n := count(c); n != steps[i] {
			t.Errorf("client %d got %d progress notifications, want %d", i, n, steps[i])
		}
	}
}

// A child killed mid-call: the call fails at once with a clear error, the
// child comes back after its backoff, and the same session goes on.
func TestChildKilledMidCall(t *testing.T) {
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": everything(t)}, Options{Stdio: stdio.Options{MinBackoff: 300 * time.Millisecond}})
	ctx := testutil.Context(t, 60*time.Second)
	cs := tg.connect("/servers/everything", sessionEra, nil)
	st := tg.waitState("everything", "running", func(st stdio.State) bool { return st.Status == stdio.StatusRunning })
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 30, "steps": 3}})
		errc <- err
	}()
	testutil.WaitFor(t, "the call in flight", func() bool { return tg.gw.server("everything").shared.inFlight() > 0 })
	killed := time.Now()
	child, err := os.FindProcess(st.PID)
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Kill(); err != nil { // SIGKILL on unix
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "exited before answering") || !strings.Contains(err.Error(), "SIGKILL") {
			t.Fatalf("the call ended with %v", err)
		}
		t.Logf("call failed %s after the kill: %v", time.Since(killed).Round(time.Millisecond), err)
	case <-time.After(10 * time.Second):
		t.Fatal("the call hung after its child died")
	}
	down := tg.waitState("everything", "in backoff", func(st stdio.State) bool { return st.Status == stdio.StatusBackoff || st.Restarts > 0 })
	if down.LastExit == nil || down.LastExit.Signal != "SIGKILL" {
		t.Fatalf("health does not tell the exit: %+v", down)
	}
	up := tg.waitState("everything", "restarted", func(st stdio.State) bool { return st.Status == stdio.StatusRunning && st.PID != down.LastExit.PID })
	if up.Restarts != 1 {
		t.Fatalf("restarts %d", up.Restarts)
	}
	var got string
	// The restart is due; the child may still be handshaking.
	testutil.WaitFor(t, "an echo through the restarted child", func() bool {
		got, err = echo(ctx, cs, "after")
		return err == nil
	})
	if got != "Echo: after" {
		t.Fatalf("the session did not survive the restart: %q", got)
	}
}

// A 20 MiB tool result (server-filesystem reading a 20 MiB file) passes
// whole: no fixed scanner buffer anywhere on the way.
func TestTwentyMiBResult(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 20<<20/16)
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"files": filesystemServer(t, dir)}, Options{})
	// A deadlock guard only: under -race on two busy cores the 20 MiB
	// take most of a minute.
	ctx := testutil.Context(t, 3*time.Minute)
	cs := tg.connect("/servers/files", sessionEra, nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(dir, "big.txt")}})
	if err != nil || res.IsError {
		t.Fatalf("read: %v %s", err, testutil.Text(res)[:min(200, len(testutil.Text(res)))])
	}
	if got := testutil.Text(res); got != big {
		t.Fatalf("got %d bytes, want %d", len(got), len(big))
	}
}

// Editing one of three servers restarts it alone: sessions on the others
// keep working on the same processes.
func TestReloadRestartsOnlyWhatChanged(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dirB, "b.txt"), []byte("in b"), 0o600)
	servers := map[string]stdio.ServerConfig{"everything": everything(t), "memory": memoryServer(t), "files": filesystemServer(t, dirA)}
	tg := newTestGateway(t, servers, Options{})
	ctx := testutil.Context(t, 60*time.Second)
	ev := tg.connect("/servers/everything", sessionEra, nil)
	mem := tg.connect("/servers/memory", sessionEra, nil)
	files := tg.connect("/servers/files", sessionEra, nil)
	if _, err := files.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := echo(ctx, ev, "before"); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, st := range tg.gw.Supervisor().States() {
		pids[st.Name] = st.PID
	}
	next := map[string]stdio.ServerConfig{}
	for k, v := range servers {
		next[k] = v
	}
	next["files"] = filesystemServer(t, dirB)
	res, err := tg.gw.Reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Restarted, ",") != "files" || len(res.Unchanged) != 2 {
		t.Fatalf("reload: %+v", res)
	}
	if got, err := echo(ctx, ev, "after"); err != nil || got != "Echo: after" {
		t.Fatalf("everything's session: %q %v", got, err)
	}
	if _, err := mem.CallTool(ctx, &mcp.CallToolParams{Name: "read_graph", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("memory's session: %v", err)
	}
	for _, st := range tg.gw.Supervisor().States() {
		if st.Name != "files" && st.PID != pids[st.Name] {
			t.Fatalf("%s was restarted: pid %d → %d", st.Name, pids[st.Name], st.PID)
		}
	}
	// The edited server serves its new directory.
	var text string
	testutil.WaitFor(t, "files serving its new directory", func() bool {
		r, err := files.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(dirB, "b.txt")}})
		if err == nil && !r.IsError {
			text = testutil.Text(r)
		}
		return text != ""
	})
	if text != "in b" {
		t.Fatalf("files after reload: %q", text)
	}
}

func TestAggregateEndpoint(t *testing.T) {
	// Node servers may take longer than the default budget to start on a
	// loaded machine; this test is about names and calls, not budgets.
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": everything(t), "memory": memoryServer(t)}, Options{AggregateTimeout: initTimeout})
	ctx := testutil.Context(t, 60*time.Second)
	for _, e := range []era{sessionEra, eras[len(eras)-1]} {
		t.Run(e.name, func(t *testing.T) {
			cs := tg.connect("/servers/all", e, nil)
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, tl := range tools.Tools {
				names[tl.Name] = true
				if !toolNamePattern.MatchString(tl.Name) {
					t.Errorf("tool name %q breaks ^[a-zA-Z0-9_-]{1,64}$", tl.Name)
				}
			}
			for _, want := range []string{"everything_echo", "everything_get-sum", "memory_create_entities", "memory_read_graph"} {
				if !names[want] {
					t.Fatalf("no %s among %v", want, names)
				}
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything_echo", Arguments: map[string]any{"message": "via all"}})
			if err != nil || testutil.Text(res) != "Echo: via all" {
				t.Fatalf("everything_echo: %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "memory_read_graph", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("memory_read_graph: %v %+v", err, res)
			}
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope_nothing", Arguments: map[string]any{}})
			if err == nil || !strings.Contains(err.Error(), "no tool") {
				t.Fatalf("unknown tool: %v", err)
			}
		})
	}
}

// A server's tools.deny hides a tool from lists and refuses calls to it.
func TestToolFilter(t *testing.T) {
	cfg := everything(t)
	cfg.Tools = &stdio.ToolFilter{Deny: []string{"echo"}}
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": cfg}, Options{})
	ctx := testutil.Context(t, 30*time.Second)
	cs := tg.connect("/servers/everything", sessionEra, nil)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name == "echo" {
			t.Fatal("a denied tool is listed")
		}
	}
	_, err = echo(ctx, cs, "x")
	if err == nil || !strings.Contains(err.Error(), "does not allow it") {
		t.Fatalf("denied call: %v", err)
	}
}

//go:build unix

package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/npmtools"
)

// childEnvVar makes the test binary act as a stdio child: it echoes each
// stdin line to stdout, writes "stderr:" lines to stderr, and never answers
// a line containing "hang".
const childEnvVar = "STDIO_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnvVar) == "1" {
		fmt.Fprintln(os.Stderr, "echo child up, token="+os.Getenv("SECRET_TOKEN"))
		r := bufio.NewReaderSize(os.Stdin, 1<<20)
		w := bufio.NewWriter(os.Stdout)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 && !bytes.Contains(line, []byte("hang")) {
				w.Write(line)
				w.Flush()
			}
			if err != nil {
				os.Exit(0)
			}
		}
	}
	os.Exit(m.Run())
}

// echoChild is a config running the test binary as an echo child.
func echoChild(t *testing.T, name string) ServerConfig {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return ServerConfig{Name: name, Command: exe, Env: map[string]string{childEnvVar: "1", "SECRET_TOKEN": "tok-9f8e7d6c5b"}}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newSupervisor(t *testing.T, servers map[string]ServerConfig, opts Options) (*Supervisor, *syncBuffer) {
	t.Helper()
	logs := new(syncBuffer)
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s, err := NewSupervisor(servers, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return s, logs
}

// waitState polls until cond holds for server name.
func waitState(t *testing.T, s *Supervisor, name string, what string, cond func(State) bool) State {
	t.Helper()
	var st State
	defer func() {
		if t.Failed() {
			t.Logf("%s: last state %+v", name, st)
		}
	}()
	testutil.WaitFor(t, what, func() bool { st, _ = s.State(name); return cond(st) })
	return st
}

// roundTrip sends msg and returns the next incoming message.
func roundTrip(t *testing.T, c *Conn, msg []byte) []byte {
	t.Helper()
	if err := c.Send(msg); err != nil {
		t.Fatal(err)
	}
	select {
	case got, ok := <-c.Incoming():
		if !ok {
			t.Fatalf("connection ended: %v", c.Err())
		}
		return got
	case <-time.After(60 * time.Second):
		t.Fatal("no reply")
	}
	return nil
}

func TestLargeMessages(t *testing.T) {
	s, _ := newSupervisor(t, map[string]ServerConfig{"echo": echoChild(t, "echo")}, Options{})
	c, err := s.Conn(context.Background(), "echo")
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, 1, readBufferSize - 1, readBufferSize, readBufferSize + 1, 1 << 20, 20 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"message":"` + strings.Repeat("x", size) + `"}}`)
			got := roundTrip(t, c, msg)
			if !bytes.Equal(got, msg) {
				t.Fatalf("got %d bytes back, sent %d", len(got), len(msg))
			}
		})
	}
	t.Run("multi-line JSON is compacted", func(t *testing.T) {
		got := roundTrip(t, c, []byte("{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 2\n}"))
		if string(got) != `{"jsonrpc":"2.0","id":2}` {
			t.Fatalf("got %s", got)
		}
	})
}

func TestMessageTooLarge(t *testing.T) {
	s, _ := newSupervisor(t, map[string]ServerConfig{"echo": echoChild(t, "echo")}, Options{MaxMessageSize: 1 << 20, MinBackoff: time.Hour})
	c, err := s.Conn(context.Background(), "echo")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send([]byte(`"` + strings.Repeat("y", 2<<20) + `"`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("Done did not fire")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "larger than the maximum message size") {
		t.Fatalf("Err() = %v", err)
	}
}

func TestCrashMidCallRestarts(t *testing.T) {
	const min = 300 * time.Millisecond
	s, logs := newSupervisor(t, map[string]ServerConfig{"echo": echoChild(t, "echo")}, Options{MinBackoff: min, StableAfter: time.Hour})
	if st, _ := s.State("echo"); st.Status != StatusStopped {
		t.Fatalf("a lazy server before first use: %+v", st)
	}
	c, err := s.Conn(context.Background(), "echo")
	if err != nil {
		t.Fatal(err)
	}
	st := waitState(t, s, "echo", "running", func(st State) bool { return st.Status == StatusRunning })
	if st.PID != c.PID() || st.Restarts != 0 || st.LastExit != nil {
		t.Fatalf("running: %+v", st)
	}
	// A call in flight that the child never answers.
	if err := c.Send([]byte(`{"jsonrpc":"2.0","id":7,"method":"hang"}`)); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(c.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done did not fire after kill -9")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "killed by signal SIGKILL") {
		t.Fatalf("Err() = %v", err)
	}
	if err := c.Send([]byte(`{}`)); err == nil {
		t.Fatal("Send after the child died succeeded")
	}
	st = waitState(t, s, "echo", "backoff", func(st State) bool { return st.Status == StatusBackoff })
	if st.PID != 0 || st.LastExit == nil || st.LastExit.Signal != "SIGKILL" || st.LastExit.PID != c.PID() || st.NextStart.IsZero() {
		t.Fatalf("backoff: %+v (last exit %+v)", st, st.LastExit)
	}
	if _, err := s.Conn(context.Background(), "echo"); err == nil || !strings.Contains(err.Error(), "SIGKILL") {
		t.Fatalf("Conn during backoff: %v", err)
	}
	st = waitState(t, s, "echo", "running again", func(st State) bool { return st.Status == StatusRunning })
	if st.Restarts != 1 || st.PID == 0 || st.PID == c.PID() || st.LastExit == nil || st.LastExit.Signal != "SIGKILL" {
		t.Fatalf("restarted: %+v", st)
	}
	if d := st.Since.Sub(st.LastExit.Time); d < min-10*time.Millisecond {
		t.Fatalf("restarted %s after the crash, backoff is %s", d, min)
	}
	c2, err := s.Conn(context.Background(), "echo")
	if err != nil {
		t.Fatal(err)
	}
	if got := roundTrip(t, c2, []byte(`{"id":8}`)); string(got) != `{"id":8}` {
		t.Fatalf("after restart: %s", got)
	}
	// The second crash waits twice as long.
	_ = syscall.Kill(c2.PID(), syscall.SIGKILL)
	<-c2.Done()
	st = waitState(t, s, "echo", "second restart", func(st State) bool { return st.Status == StatusRunning && st.Restarts == 2 })
	if d := st.Since.Sub(st.LastExit.Time); d < 2*min-10*time.Millisecond {
		t.Fatalf("second restart after %s, want >= %s", d, 2*min)
	}
	if !strings.Contains(logs.String(), "killed by signal SIGKILL") {
		t.Errorf("the crash is not in the log:\n%s", logs)
	}
}

func TestStderrLoggedWithoutSecrets(t *testing.T) {
	cfg := echoChild(t, "chatty")
	cfg.Start = StartBoot
	s, logs := newSupervisor(t, map[string]ServerConfig{"chatty": cfg}, Options{})
	st := waitState(t, s, "chatty", "stderr line", func(st State) bool { return len(st.LastStderr) > 0 })
	if st.LastStderr[0] != "echo child up, token=[redacted]" {
		t.Fatalf("LastStderr = %q", st.LastStderr)
	}
	out := logs.String()
	if !strings.Contains(out, "server=chatty") || !strings.Contains(out, "echo child up") {
		t.Fatalf("stderr line not logged with the server's name:\n%s", out)
	}
	if strings.Contains(out, "tok-9f8e7d6c5b") {
		t.Fatalf("env value in the log:\n%s", out)
	}
	if !strings.Contains(out, "SECRET_TOKEN") {
		t.Errorf("the start log should name env keys:\n%s", out)
	}
}

func TestPrivateChildren(t *testing.T) {
	s, _ := newSupervisor(t, map[string]ServerConfig{"echo": echoChild(t, "echo")}, Options{})
	a, err := s.StartPrivate(context.Background(), "echo")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.StartPrivate(context.Background(), "echo")
	if err != nil {
		t.Fatal(err)
	}
	if a.PID() == b.PID() {
		t.Fatal("two sessions share a child")
	}
	waitState(t, s, "echo", "two private", func(st State) bool { return st.Private == 2 && st.Status == StatusStopped })
	a.Close()
	if e, ok := a.Err().(*ExitError); !ok || !e.Stopped {
		t.Fatalf("Err() after Close = %v", a.Err())
	}
	waitState(t, s, "echo", "one private", func(st State) bool { return st.Private == 1 })
	if got := roundTrip(t, b, []byte(`{"id":1}`)); string(got) != `{"id":1}` {
		t.Fatal(string(got))
	}
}

// A server runs at most its limit of private children, counted until
// each has exited; the entry's max_children overrides Options.MaxPrivate.
func TestPrivateChildrenAreCapped(t *testing.T) {
	capped := echoChild(t, "capped")
	capped.MaxChildren = 1
	s, _ := newSupervisor(t, map[string]ServerConfig{"echo": echoChild(t, "echo"), "capped": capped}, Options{MaxPrivate: 2})
	for _, tc := range []struct {
		name  string
		limit int
	}{{"echo", 2}, {"capped", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			var conns []*Conn
			for range tc.limit {
				c, err := s.StartPrivate(context.Background(), tc.name)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			_, err := s.StartPrivate(context.Background(), tc.name)
			if !errors.Is(err, ErrTooManyChildren) || !strings.Contains(err.Error(), "max_children") {
				t.Fatalf("StartPrivate over the limit: %v", err)
			}
			conns[0].Close()
			waitState(t, s, tc.name, "a place freed", func(st State) bool { return st.Private == tc.limit-1 })
			c, err := s.StartPrivate(context.Background(), tc.name)
			if err != nil {
				t.Fatalf("StartPrivate after one ended: %v", err)
			}
			if got := roundTrip(t, c, []byte(`{"id":2}`)); string(got) != `{"id":2}` {
				t.Fatal(string(got))
			}
		})
	}
}

// nodeTools finds the npm test servers and the Node.js that runs them.
func nodeTools(t *testing.T) (node, mods string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the npm test tools are installed for linux")
	}
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	return tools.Node, tools.Modules
}

func TestServerEverything(t *testing.T) {
	node, mods := nodeTools(t)
	cfg := ServerConfig{Name: "everything", Command: node,
		Args: []string{filepath.Join(mods, "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"}}
	s, _ := newSupervisor(t, map[string]ServerConfig{"everything": cfg}, Options{})
	// A deadlock guard only: starting node and three calls took over 30 s
	// under -race on two cores busy with other work.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := s.Conn(ctx, "everything")
	if err != nil {
		t.Fatal(err)
	}
	// Replies by id; notifications and logs are skipped.
	call := func(id int, method string, params any) map[string]any {
		t.Helper()
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if err := c.Send(msg); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case raw, ok := <-c.Incoming():
				if !ok {
					t.Fatalf("child ended: %v", c.Err())
				}
				var m map[string]any
				if err := json.Unmarshal(raw, &m); err != nil {
					t.Fatalf("not JSON from the child (%d bytes): %v", len(raw), err)
				}
				if m["id"] == float64(id) {
					if m["error"] != nil {
						t.Fatalf("%s: %v", method, m["error"])
					}
					return m["result"].(map[string]any)
				}
			case <-ctx.Done():
				t.Fatalf("%s: no answer", method)
			}
		}
	}
	init := call(1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "test", "version": "1"}})
	if init["serverInfo"] == nil {
		t.Fatalf("initialize: %v", init)
	}
	if err := c.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		t.Fatal(err)
	}
	tools := call(2, "tools/list", map[string]any{})["tools"].([]any)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	if !strings.Contains(strings.Join(names, ","), "echo") {
		t.Fatalf("tools/list: %v", names)
	}
	// The TypeScript SDK under server-everything refuses input lines over
	// 10 MiB (STDIO_DEFAULT_MAX_BUFFER_SIZE), so 9 MiB each way here;
	// TestLargeMessages passes 20 MiB through the Go echo child.
	big := strings.Repeat("z", 9<<20)
	res := call(3, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": big}})
	text := res["content"].([]any)[0].(map[string]any)["text"].(string)
	if len(text) < len(big) || !strings.Contains(text, big) {
		t.Fatalf("echo of 9 MiB came back as %d bytes", len(text))
	}
}

// groupMembers lists the pids whose process group is pgid, from /proc.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 2 && fields[0] != "Z" && fields[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestShutdownStopsTheGroup(t *testing.T) {
	node, mods := nodeTools(t)
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Fatalf("npx not found (%v): install npm; scripts/install-test-tools.sh needs it too", err)
	}
	dir := filepath.Dir(mods)
	env := append(os.Environ(), "PATH="+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"))
	servers := map[string]ServerConfig{
		"memory": {Name: "memory", Command: npx, Args: []string{"--no-install", "mcp-server-memory"}, Cwd: dir, Start: StartBoot,
			Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.json")}},
		"filesystem": {Name: "filesystem", Command: npx, Args: []string{"--no-install", "mcp-server-filesystem", t.TempDir()}, Cwd: dir, Start: StartBoot},
	}
	logs := new(syncBuffer)
	s, err := NewSupervisor(servers, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Environ: env, StopGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	groups := map[string]int{}
	for name := range servers {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := s.Conn(ctx, name)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		if got := roundTrip(t, c, msg); !bytes.Contains(got, []byte(`"serverInfo"`)) {
			t.Fatalf("%s initialize: %s", name, got)
		}
		groups[name] = c.PID()
		// npx -> sh -> node: the server itself is a grandchild.
		if members := groupMembers(t, c.PID()); len(members) < 2 {
			t.Fatalf("%s: group %d has %v; expected npx and the node it spawned", name, c.PID(), members)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for name, pgid := range groups {
		if left := groupMembers(t, pgid); len(left) > 0 {
			t.Errorf("%s: processes %v of group %d survived Shutdown", name, left, pgid)
		}
		if st, _ := s.State(name); st.Status != StatusStopped || st.PID != 0 || st.LastExit == nil {
			t.Errorf("%s after Shutdown: %+v", name, st)
		}
	}
	if _, err := s.Conn(context.Background(), "memory"); err != ErrShutdown {
		t.Errorf("Conn after Shutdown: %v", err)
	}
}

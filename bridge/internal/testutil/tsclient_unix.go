//go:build unix

package testutil

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/npmtools"
)

// tsClientScript is the TypeScript SDK client StartTSClient runs; its
// header documents the lines it prints and the commands it reads.
//
//go:embed testdata/tsclient.mjs
var tsClientScript []byte

// TSClientOptions says how StartTSClient's client connects.
type TSClientOptions struct {
	// Name is the client's name, in initialize and in its OAuth
	// registration; "" is "e2e-ts".
	Name string
	// OAuth is "" to connect without signing in; "loopback" to sign in
	// with a redirect URI on 127.0.0.1 that the script serves itself
	// (RFC 8252), where the person's browser comes back; any other value
	// is an app's own redirect URI (cursor://…), which a browser hands to
	// the operating system: the test gives the redirect to the client
	// with Redirect.
	OAuth string
	// Wait bounds each step: Node starting, a sign-in, one call. Zero is
	// two minutes, a ceiling for a loaded machine.
	Wait time.Duration
}

// TSClient is the official TypeScript SDK's client
// (testdata/tsclient.mjs) running under the tools' Node.js, driven line by
// line: a test reads its events, sends it calls, and can do things to the
// server between two of them. It is stopped, with whatever it started,
// when the test ends.
type TSClient struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *testbrowser.SyncBuffer
	lines   chan string
	exited  chan struct{}
	pending []*TSMessage // answers read while waiting for another line
	lastID  int
	wait    time.Duration
}

// TSMessage is one line the script prints: an event (authorize,
// redirected, connected, progress, closed, failed) or the answer to a
// command, by its ID. Which fields an event fills is in the script's
// header.
type TSMessage struct {
	Event           string    `json:"event"`
	ID              int       `json:"id"`
	Step            string    `json:"step"`
	Error           string    `json:"error"`
	URL             string    `json:"url"`
	Registered      []string  `json:"registered"`
	State           bool      `json:"state"`
	Iss             string    `json:"iss"`
	SessionID       string    `json:"sessionId"`
	ProtocolVersion string    `json:"protocolVersion"`
	Tools           []string  `json:"tools"`
	Result          *TSResult `json:"result"`
	Errors          []string  `json:"errors"`
	Auth            *TSAuth   `json:"auth"`
	ClientID        string    `json:"clientId"`
	Access          []string  `json:"access"`
	Refresh         []string  `json:"refresh"`
}

// TSResult is a CallToolResult as the TypeScript SDK returned it.
type TSResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// TSAuth is a window's tokens when it answered and how many times it
// saved tokens so far (a sign-in, each refresh).
type TSAuth struct {
	Saves   int    `json:"saves"`
	Access  string `json:"access"`
	Refresh string `json:"refresh"`
}

// Text joins the text parts of the message's tool result, one line per
// part ("" without a result).
func (m *TSMessage) Text() string {
	if m.Result == nil {
		return ""
	}
	var parts []string
	for _, c := range m.Result.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// StartTSClient runs the TypeScript SDK client against the Streamable
// HTTP endpoint. With opts.OAuth it first prints "authorize"; read the
// events with Next.
func StartTSClient(t testing.TB, endpoint string, opts TSClientOptions) *TSClient {
	t.Helper()
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "tsclient.mjs")
	if err := os.WriteFile(script, tsClientScript, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{script, "--modules", tools.Modules, "--url", endpoint}
	if opts.Name != "" {
		args = append(args, "--name", opts.Name)
	}
	if opts.OAuth != "" {
		args = append(args, "--oauth", opts.OAuth)
	}
	c := &TSClient{stderr: &testbrowser.SyncBuffer{}, lines: make(chan string, 16), exited: make(chan struct{}), wait: opts.Wait}
	if c.wait == 0 {
		c.wait = 2 * time.Minute
	}
	c.cmd = exec.Command(tools.Node, args...)
	c.cmd.Stderr = c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting the TypeScript client: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited
		}
		if t.Failed() {
			t.Logf("--- TypeScript client stderr ---\n%s", c.stderr.String())
		}
	})
	return c
}

// Next returns the client's next event and fails the test unless it is
// event. Answers to commands read meanwhile are kept for Answer.
func (c *TSClient) Next(t testing.TB, event string) *TSMessage {
	t.Helper()
	return c.read(t, "the "+event+" event", func(m *TSMessage) bool {
		if m.ID != 0 {
			return false
		}
		if m.Event != event {
			t.Fatalf("the TypeScript client said %+v; want %q", *m, event)
		}
		return true
	})
}

// Redirect hands the client where the authorization server sent the
// person's browser back to (OAuth with an app's own redirect URI).
func (c *TSClient) Redirect(t testing.TB, back *url.URL) {
	t.Helper()
	c.send(t, map[string]any{"op": "redirect", "url": back.String()})
}

// TSCall is a tool call of the TypeScript client.
type TSCall struct {
	// Window is the app window whose connection calls; "" is "a", the
	// first.
	Window string
	Tool   string
	Args   any
	// Progress asks for progress notifications: the client says
	// "progress" at the first (wait for it with Progress), and each
	// pushes the call's timeout back.
	Progress bool
}

// Start sends a call and returns its id for Answer; calls run
// concurrently.
func (c *TSClient) Start(t testing.TB, call TSCall) int {
	t.Helper()
	if call.Args == nil {
		call.Args = map[string]any{}
	}
	return c.command(t, map[string]any{"op": "call", "window": window(call.Window), "name": call.Tool, "arguments": call.Args,
		"progress": call.Progress, "timeoutMs": c.wait.Milliseconds()})
}

// Call makes a call and waits for its answer; it fails the test on an
// error, the protocol's or the tool's.
func (c *TSClient) Call(t testing.TB, call TSCall) *TSMessage {
	t.Helper()
	a := c.Answer(t, c.Start(t, call))
	switch {
	case a.Error != "":
		t.Fatalf("TypeScript SDK: tool %s: %s (SDK errors: %q)", call.Tool, a.Error, a.Errors)
	case a.Result == nil || a.Result.IsError:
		t.Fatalf("TypeScript SDK: tool %s answered isError: %s", call.Tool, a.Text())
	}
	return a
}

// Progress waits for the first progress notification of call id.
func (c *TSClient) Progress(t testing.TB, id int) {
	t.Helper()
	c.read(t, "progress of call "+strconv.Itoa(id), func(m *TSMessage) bool { return m.ID == id && m.Event == "progress" })
}

// Answer waits for the answer to command id; an error in it is the
// caller's to judge.
func (c *TSClient) Answer(t testing.TB, id int) *TSMessage {
	t.Helper()
	return c.read(t, "the answer to command "+strconv.Itoa(id), func(m *TSMessage) bool { return m.ID == id && m.Event == "" })
}

// Open opens a second window of the app (its own connection) holding a
// copy of window a's tokens, and returns its answer (session, tokens).
func (c *TSClient) Open(t testing.TB, name string) *TSMessage {
	t.Helper()
	a := c.Answer(t, c.command(t, map[string]any{"op": "open", "window": name}))
	if a.Error != "" {
		t.Fatalf("opening TypeScript client window %s: %s", name, a.Error)
	}
	return a
}

// Spoil makes the window's access token bad, as an expired one would be,
// and returns the window's tokens from before.
func (c *TSClient) Spoil(t testing.TB, name string) *TSAuth {
	t.Helper()
	a := c.Answer(t, c.command(t, map[string]any{"op": "spoil", "window": window(name)}))
	if a.Error != "" || a.Auth == nil {
		t.Fatalf("spoiling the TypeScript client's token: %q (is it signed in?)", a.Error)
	}
	return a.Auth
}

// Close ends every window's session (DELETE), waits for the script to
// exit 0 and returns its last line: the client id and every token saved.
func (c *TSClient) Close(t testing.TB) *TSMessage {
	t.Helper()
	c.send(t, map[string]any{"op": "close"})
	closed := c.read(t, "closed", func(m *TSMessage) bool { return m.Event == "closed" })
	select {
	case <-c.exited:
		if !c.cmd.ProcessState.Success() {
			t.Errorf("the TypeScript client exited with %v: %s", c.cmd.ProcessState, c.stderr.String())
		}
	case <-time.After(c.wait):
		t.Errorf("the TypeScript client did not exit within %v of closing", c.wait)
	}
	return closed
}

func (c *TSClient) command(t testing.TB, cmd map[string]any) int {
	t.Helper()
	c.lastID++
	cmd["id"] = c.lastID
	c.send(t, cmd)
	return c.lastID
}

func (c *TSClient) send(t testing.TB, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		t.Fatalf("writing to the TypeScript client: %v", err)
	}
}

// read returns the first line, kept or new, that match takes; other
// answers are kept, and a "failed" line fails the test.
func (c *TSClient) read(t testing.TB, what string, match func(*TSMessage) bool) *TSMessage {
	t.Helper()
	for i, m := range c.pending {
		if match(m) {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return m
		}
	}
	timeout := time.After(c.wait)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("the TypeScript client exited before %s: %s", what, c.stderr.String())
			}
			m := &TSMessage{}
			if err := json.Unmarshal([]byte(line), m); err != nil {
				t.Fatalf("the TypeScript client printed %q: %v", line, err)
			}
			if m.Event == "failed" {
				t.Fatalf("the TypeScript client failed at %s: %s", m.Step, m.Error)
			}
			if match(m) {
				return m
			}
			c.pending = append(c.pending, m)
		case <-timeout:
			t.Fatalf("no %s from the TypeScript client within %v: %s", what, c.wait, c.stderr.String())
		}
	}
}

func window(name string) string {
	if name == "" {
		return "a"
	}
	return name
}

package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/nativemsg"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

func TestHostHello(t *testing.T) {
	e := newEnv(t)
	b, _ := e.startBridge()
	br := e.startBrowser(nil)
	ctx := testutil.Context(t, 10*time.Second)
	st, err := br.WaitState(ctx, protocol.StateConnected)
	if err != nil {
		t.Fatal(err)
	}
	if st.Socket != e.socket || st.BridgeVersion == "" {
		t.Fatalf("connected state = %+v", st)
	}
	res, err := br.Hello(ctx, "instance-hello-1")
	if err != nil {
		t.Fatal(err)
	}
	if res.BrowserID != "instance-hello-1" || !strings.HasSuffix(res.MCPURL, "/mcp") {
		t.Fatalf("hello result = %+v", res)
	}
	info := waitRegistered(t, b, "instance-hello-1").Info()
	if info.Name != "TestBrowser" || info.HostPID != br.Cmd.Process.Pid {
		t.Fatalf("registered browser = %+v, host pid %d", info, br.Cmd.Process.Pid)
	}

	// /health and bridge.status both see it.
	resp, err := http.Get("http://" + b.Addr() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if h.Status != "ok" || h.Hosts != 1 || len(h.Browsers) != 1 || h.Browsers[0].ID != "instance-hello-1" {
		t.Fatalf("/health = %+v", h)
	}
}

func TestHelloRejectsBadParams(t *testing.T) {
	e := newEnv(t)
	e.startBridge()
	br := e.startBrowser(nil)
	ctx := testutil.Context(t, 10*time.Second)
	if _, err := br.WaitState(ctx, protocol.StateConnected); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		params any
		want   string
	}{
		{"no params", nil, "hello needs params"},
		{"short instance id", map[string]any{"instanceId": "x", "browser": map[string]any{"name": "B"}}, "instanceId"},
		{"no browser name", map[string]any{"instanceId": "instance-xyz"}, "browser.name"},
		{"wrong type", map[string]any{"instanceId": 5}, "hello params"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := br.Call(ctx, protocol.Hello, tc.params)
			if err != nil {
				t.Fatal(err)
			}
			if m.Error == nil || !strings.Contains(string(*m.Error), tc.want) || !strings.Contains(string(*m.Error), "-32602") {
				t.Fatalf("hello(%v) = result %s error %v; want -32602 mentioning %q", tc.params, m.Result, m.Error, tc.want)
			}
		})
	}
	// Unknown methods before and after hello.
	m, _ := br.Call(ctx, "no.such.method", nil)
	if m.Error == nil || !strings.Contains(string(*m.Error), "-32601") {
		t.Fatalf("unknown method answered %s", m.Result)
	}
}

func TestRequestsBothWays(t *testing.T) {
	e := newEnv(t)
	b, _ := e.startBridge()
	br := e.startBrowser(func(method string, p json.RawMessage) (any, map[string]any) {
		switch method {
		case "test.echo":
			return p, nil
		case "test.fail":
			return nil, map[string]any{"code": -32000, "message": "the page is gone"}
		}
		return nil, map[string]any{"code": -32601, "message": "no " + method}
	})
	ctx := testutil.Context(t, 10*time.Second)
	if _, err := br.WaitState(ctx, protocol.StateConnected); err != nil {
		t.Fatal(err)
	}
	if _, err := br.Hello(ctx, "instance-both-1"); err != nil {
		t.Fatal(err)
	}
	tab := waitRegistered(t, b, "instance-both-1")

	// bridge -> extension
	res, err := tab.Call(ctx, "", "test.echo", map[string]int{"n": 42})
	if err != nil || string(res) != `{"n":42}` {
		t.Fatalf("echo = %s, %v", res, err)
	}
	_, err = tab.Call(ctx, "local-s1:1", "test.fail", nil)
	var rpcErr *jsonrpc2.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32000 || rpcErr.Message != "the page is gone" {
		t.Fatalf("error reply = %v", err)
	}
	// extension -> bridge
	m, err := br.Call(ctx, protocol.Ping, nil)
	if err != nil || m.Error != nil || string(m.Result) != "{}" {
		t.Fatalf("ping from the extension = %+v, %v", m, err)
	}
	m, err = br.Call(ctx, protocol.BridgeStatus, nil)
	var st protocol.StatusResult
	if err != nil || json.Unmarshal(m.Result, &st) != nil || len(st.Browsers) != 1 || st.Socket != e.socket {
		t.Fatalf("bridge.status from the extension = %s, %v", m.Result, err)
	}
}

func TestDuplicateIDRefused(t *testing.T) {
	e := newEnv(t)
	b, _ := e.startBridge()
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	br := e.startBrowser(func(method string, p json.RawMessage) (any, map[string]any) {
		// Only the call under test says it arrived: the bridge's own
		// requests after hello (tools/list) must not.
		if method == "slow" {
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
		<-release
		return p, nil
	})
	ctx := testutil.Context(t, 10*time.Second)
	br.WaitState(ctx, protocol.StateConnected)
	br.Hello(ctx, "instance-dup-1")
	tab := waitRegistered(t, b, "instance-dup-1")
	first := make(chan error, 1)
	go func() { _, err := tab.Call(ctx, "local-a:1", "slow", 1); first <- err }()
	select { // the first call is in flight once the extension has it
	case <-arrived:
	case err := <-first:
		t.Fatalf("first call ended before reaching the extension: %v", err)
	}
	if _, err := tab.Call(ctx, "local-a:1", "slow", 2); !errors.Is(err, hostlink.ErrDuplicateID) {
		t.Fatalf("second call with an id in flight: %v, want ErrDuplicateID", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := tab.Call(ctx, "local-a:1", "slow", 3); err != nil {
		t.Fatalf("id reuse after the reply: %v", err)
	}
}

func TestFiveMiBBothWays(t *testing.T) {
	e := newEnv(t)
	b, _ := e.startBridge()
	big := strings.Repeat("0123456789abcdef", 5<<20/16) // 5 MiB
	br := e.startBrowser(func(method string, p json.RawMessage) (any, map[string]any) {
		var s string
		if err := json.Unmarshal(p, &s); err != nil || s != big {
			return nil, map[string]any{"code": -32602, "message": fmt.Sprintf("extension got %d bytes, not the 5 MiB sent", len(p))}
		}
		return big + "!", nil // 5 MiB back, in one frame: Chrome allows 64 MiB towards the host
	})
	ctx := testutil.Context(t, 30*time.Second)
	br.WaitState(ctx, protocol.StateConnected)
	br.Hello(ctx, "instance-big-1")
	tab := waitRegistered(t, b, "instance-big-1")
	res, err := tab.Call(ctx, "", "test.big", big)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := json.Unmarshal(res, &got); err != nil || got != big+"!" {
		t.Fatalf("5 MiB reply came back as %d bytes (%v)", len(res), err)
	}
	if max := br.MaxFrame.Load(); max > nativemsg.MaxToBrowser {
		t.Fatalf("host wrote a %d-byte frame to the browser; Chrome closes the port above %d", max, nativemsg.MaxToBrowser)
	}
	if br.Frames.Load() < 11 {
		t.Fatalf("5 MiB reached the browser in %d frames; it must be chunked", br.Frames.Load())
	}
}

func TestBridgeRestartMidSession(t *testing.T) {
	e := newEnv(t)
	b, stop := e.startBridge()
	answer := make(chan struct{})
	slowArrived := make(chan struct{}, 1)
	br := e.startBrowser(func(method string, p json.RawMessage) (any, map[string]any) {
		if method == "test.slow" {
			select {
			case slowArrived <- struct{}{}:
			default:
			}
			<-answer
		}
		return p, nil
	})
	ctx := testutil.Context(t, 20*time.Second)
	br.WaitState(ctx, protocol.StateConnected)
	br.Hello(ctx, "instance-restart-1")
	tab := waitRegistered(t, b, "instance-restart-1")

	// A call in flight when the bridge goes away ends with an error.
	inflight := make(chan error, 1)
	go func() { _, err := tab.Call(ctx, "local-s:1", "test.slow", 1); inflight <- err }()
	select { // the call is in flight once the extension has it
	case <-slowArrived:
	case err := <-inflight:
		t.Fatalf("call ended before reaching the extension: %v", err)
	}
	stop()
	select {
	case err := <-inflight:
		if !errors.Is(err, hostlink.ErrBrowserGone) {
			t.Fatalf("in-flight call ended with %v, want ErrBrowserGone", err)
		}
	case <-ctx.Done():
		t.Fatal("in-flight call hung after the bridge stopped")
	}
	st, err := br.WaitState(ctx, protocol.StateDisconnected)
	if err != nil {
		t.Fatal(err)
	}
	if st.Error == "" {
		t.Fatal("disconnected state carries no reason for the user")
	}

	// The extension's late reply reaches the next bridge, which ignores it.
	close(answer)
	b2, _ := e.startBridge()
	if _, err := br.WaitState(ctx, protocol.StateConnected); err != nil {
		t.Fatal(err)
	}
	if _, err := br.Hello(ctx, "instance-restart-1"); err != nil {
		t.Fatal(err)
	}
	tab2 := waitRegistered(t, b2, "instance-restart-1")
	res, err := tab2.Call(ctx, "local-s:1", "test.echo", "after")
	if err != nil || string(res) != `"after"` {
		t.Fatalf("call after the restart = %s, %v", res, err)
	}
}

func TestExtensionRequestDuringOutageFailsCleanly(t *testing.T) {
	e := newEnv(t)
	_, stop := e.startBridge()
	br := e.startBrowser(nil)
	ctx := testutil.Context(t, 20*time.Second)
	br.WaitState(ctx, protocol.StateConnected)
	stop()
	br.WaitState(ctx, protocol.StateDisconnected)
	// With no bridge, the host drops the frame; the extension is not left
	// waiting: either the host's next host.state (it retries and reports)
	// fails the call, or the extension's own deadline does.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := br.Call(short, protocol.Ping, nil); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, testbrowser.ErrLinkLost) {
		t.Fatalf("ping with no bridge: %v", err)
	}
	e.startBridge()
	br.WaitState(ctx, protocol.StateConnected)
	if m, err := br.Call(ctx, protocol.Ping, nil); err != nil || m.Error != nil {
		t.Fatalf("ping after the bridge came back: %+v %v", m, err)
	}
}

func TestStdinEOFEndsHost(t *testing.T) {
	e := newEnv(t)
	b, _ := e.startBridge()
	br := e.startBrowser(nil)
	ctx := testutil.Context(t, 10*time.Second)
	br.WaitState(ctx, protocol.StateConnected)
	br.Hello(ctx, "instance-eof-1")
	waitRegistered(t, b, "instance-eof-1")
	if err := br.Stop(5 * time.Second); err != nil {
		t.Fatalf("host after stdin EOF: %v", err)
	}
	// The bridge sees the link close and forgets the browser.
	testutil.WaitFor(t, "the bridge to forget the browser after its host exited", func() bool { return len(b.Links().Browsers()) == 0 })
}

func TestHostWithoutBridgeEndsOnEOF(t *testing.T) {
	e := newEnv(t)
	br := e.startBrowser(nil)
	ctx := testutil.Context(t, 10*time.Second)
	// No bridge binary here: the host tells the extension it could not
	// start one, and why (host.state bridge_failed, kind binary).
	st, err := br.WaitState(ctx, protocol.StateBridgeFailed)
	if err != nil {
		t.Fatal(err)
	}
	if st.Failure == nil || st.Failure.Kind != protocol.FailureBinary || !strings.Contains(st.Error, "could not start") {
		t.Fatalf("host.state %+v does not say the bridge binary could not be started", st)
	}
	if err := br.Stop(5 * time.Second); err != nil {
		t.Fatalf("host retrying the bridge did not end on stdin EOF: %v", err)
	}
}

func TestHostSurvivesSIGPIPE(t *testing.T) {
	e := newEnv(t)
	b, _ := e.startBridge()
	br := e.startBrowser(nil)
	ctx := testutil.Context(t, 10*time.Second)
	br.WaitState(ctx, protocol.StateConnected)
	br.Hello(ctx, "instance-pipe-1")
	tab := waitRegistered(t, b, "instance-pipe-1")
	// Chrome went away without closing stdin: the read end of stdout is
	// closed, and the next write must not kill the host with SIGPIPE.
	br.CloseStdout()
	_, _ = tab.Call(testutil.Context(t, 2*time.Second), "", "test.echo", "into a closed pipe")
	select {
	case <-br.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("host kept running after its stdout was closed")
	}
	var ee *exec.ExitError
	if errors.As(br.ExitErr(), &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("host was killed by %v", ws.Signal())
		}
	}
}

var _ = testbrowser.ErrLinkLost

// TestSeveralHosts: two browser profiles, each through its own host
// process, are registered side by side; each call is answered by the
// browser it was sent to; the hosts' logs land in the bridge's log.
func TestSeveralHosts(t *testing.T) {
	e := newEnv(t)
	var logs testbrowser.SyncBuffer
	b, err := Start(e.config(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	ids := []string{"instance-profile-a", "instance-profile-b"}
	for _, id := range ids {
		br := e.startBrowser(func(method string, p json.RawMessage) (any, map[string]any) {
			return map[string]any{"answeredBy": id}, nil
		})
		if _, err := br.WaitState(testutil.Context(t, 10*time.Second), protocol.StateConnected); err != nil {
			t.Fatal(err)
		}
		if _, err := br.Hello(testutil.Context(t, 10*time.Second), id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		waitRegistered(t, b, id)
	}
	if st := b.Links().Status(); st.Hosts != 2 || len(st.Browsers) != 2 {
		t.Fatalf("status lists %d hosts, %d browsers; want 2 and 2", st.Hosts, len(st.Browsers))
	}
	for i := 0; i < 50; i++ {
		id := ids[i%2]
		tab, _ := b.Links().Browser(id)
		res, err := tab.Call(testutil.Context(t, 5*time.Second), "", "who", nil)
		if err != nil || string(res) != `{"answeredBy":"`+id+`"}` {
			t.Fatalf("call to %s answered %s, %v", id, res, err)
		}
	}
	hostRecord := regexp.MustCompile(`msg="attached to the bridge" host_pid=\d+ source=host`)
	testutil.WaitFor(t, "the hosts' log records in the bridge's log", func() bool { return len(hostRecord.FindAllString(logs.String(), -1)) >= 2 })
}

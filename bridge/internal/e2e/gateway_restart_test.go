//go:build linux

package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/npmtools"
)

// TestGatewaySessionSurvivesRestart (issue 33): the TypeScript SDK's client
// signs in to the public gateway (its OAuth state in a file), calls echo,
// starts a long call; the gateway process is restarted (SIGTERM, or
// SIGKILL as a crash, then the same command); after SIGTERM the long call
// ends with an error naming the restart; in both cases
// echo in the same session answers: the session was re-opened from its
// record, its per-session server-everything started again with the
// client's own initialize. The record file holds no session id.
func TestGatewaySessionSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		// inflight is what the call in flight at the restart must end
		// with: after a clean stop, an error naming the restart; after a
		// crash, whatever the broken connection gives (not checked).
		inflight []string
	}{
		{"clean stop", syscall.SIGTERM, []string{"restarting", "may or may not have happened"}},
		{"crash", syscall.SIGKILL, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := startPublicGateway(t, gatewayOptions{perSession: true})
			browser := startSignInBrowser(t)
			tools, err := npmtools.Here()
			if err != nil {
				t.Fatal(err)
			}
			c := startTSRestartClient(t, tools, gw.serverURL(gatewayServer))

			authorize := c.next(t, "authorize", callWait)
			if _, err := browser.signIn(authorize.URL, gw.password); err != nil {
				t.Fatal(err)
			}
			before := c.next(t, "called", callWait)
			if before.Text != "Echo: before the restart" || before.SessionID == "" {
				t.Fatalf("before the restart: echo %q, session %q", before.Text, before.SessionID)
			}
			c.next(t, "inflight", callWait)

			gw.restart(tc.sig)
			file := filepath.Join(gw.dir, "oauth.db.sessions.json")
			records, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("the session records beside the OAuth state: %v", err)
			}
			if strings.Contains(string(records), before.SessionID) || !strings.Contains(string(records), "e2e-ts-restart") {
				t.Fatalf("the session records file should hold the session's record without its id: %s", clip(string(records), 400))
			}
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("the session records file's mode: %v %v; want 0600", fi.Mode(), err)
			}
			c.send(t, map[string]bool{"restarted": true, "awaitInflight": tc.inflight != nil})

			after := c.next(t, "after", callWait)
			if after.Text != "Echo: after the restart" || after.SessionID != before.SessionID {
				t.Fatalf("after the restart: echo %q in session %q; want the echo in the same session %q", after.Text, after.SessionID, before.SessionID)
			}
			for _, want := range tc.inflight {
				if !strings.Contains(after.InflightError, want) {
					t.Fatalf("the call in flight at the restart ended with %q; want an error naming the restart (%q)", after.InflightError, want)
				}
			}
			c.next(t, "done", callWait)
			c.wait(t)
			if out := gw.out.String(); !strings.Contains(out, "session re-opened after a restart") {
				t.Fatalf("the gateway's log does not show the session re-opened:\n%s", tail(out, 40))
			}
		})
	}
}

// tsRestartClient is a running testdata/tsrestart/client.mjs.
type tsRestartClient struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *testbrowser.SyncBuffer
	lines  chan string
	exited chan struct{}
}

type tsRestartEvent struct {
	Event         string `json:"event"`
	Step          string `json:"step"`
	Error         string `json:"error"`
	URL           string `json:"url"`
	Text          string `json:"text"`
	SessionID     string `json:"sessionId"`
	InflightError string `json:"inflightError"`
}

func startTSRestartClient(t *testing.T, tools npmtools.Tools, endpoint string) *tsRestartClient {
	t.Helper()
	c := &tsRestartClient{stderr: &testbrowser.SyncBuffer{}, lines: make(chan string, 16), exited: make(chan struct{})}
	c.cmd = exec.Command(tools.Node, filepath.Join("testdata", "tsrestart", "client.mjs"), "--modules", tools.Modules, "--url", endpoint)
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
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(stopWait):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited
		}
		if t.Failed() {
			t.Logf("--- TypeScript client stderr ---\n%s", tail(c.stderr.String(), 60))
		}
	})
	return c
}

func (c *tsRestartClient) next(t *testing.T, event string, d time.Duration) tsRestartEvent {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			t.Fatalf("the TypeScript client exited before %q: %s", event, tail(c.stderr.String(), 30))
		}
		var e tsRestartEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("the TypeScript client printed %q: %v", clip(line, 300), err)
		}
		if e.Event == "failed" {
			t.Fatalf("the TypeScript client failed at %s: %s", e.Step, e.Error)
		}
		if e.Event != event {
			t.Fatalf("the TypeScript client said %q; want %q", clip(line, 300), event)
		}
		return e
	case <-time.After(d):
		t.Fatalf("no %q from the TypeScript client within %v: %s", event, d, tail(c.stderr.String(), 30))
	}
	return tsRestartEvent{}
}

func (c *tsRestartClient) send(t *testing.T, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		t.Fatalf("writing to the TypeScript client: %v", err)
	}
}

func (c *tsRestartClient) wait(t *testing.T) {
	t.Helper()
	select {
	case <-c.exited:
		if !c.cmd.ProcessState.Success() {
			t.Errorf("the TypeScript client exited with %v: %s", c.cmd.ProcessState, tail(c.stderr.String(), 30))
		}
	case <-time.After(callWait):
		t.Errorf("the TypeScript client did not exit within %v of done", callWait)
	}
}

package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// TestHTTPSessionEndTellsBrowser: a session of the browser endpoint that
// ends (DELETE) tells the browser its calls went to (session_ended, with
// the session's key and client name), so that its tab group goes; a
// browser away at the end is told when it is back; a session that never
// called the browser tells it nothing.
func TestHTTPSessionEndTellsBrowser(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, nil)
	b := startBrowser(t, tp, "alice", "Chrome")
	endpoint := tp.public() + "/mcp"
	tok := accessToken(t, passwordPerson(), endpoint)
	end := func(sid string) { t.Helper(); deleteSession(t, endpoint, tok, sid) }
	told := func(b *fakeBrowser, sid string) {
		t.Helper()
		var p relaywire.SessionEndedParams
		if err := json.Unmarshal(b.note(relaywire.MethodSessionEnded).Params, &p); err != nil || p.Key != sessionKey(sid) || p.Client != "raw" {
			t.Fatalf("session_ended params %+v (%v); want key %s, client raw", p, err, sessionKey(sid))
		}
	}

	idle := rawSession(t, endpoint, tok) // never calls the browser
	used := rawSession(t, endpoint, tok)
	if body := postCall(t, endpoint, tok, used, 2, "echo"); !strings.Contains(body, "Chrome: hi") {
		t.Fatalf("echo answered %s", body)
	}
	end(idle)
	end(used)
	told(b, used) // the first session_ended: idle, ended before, sent none

	// Ended while its browser is away: told when the browser is back.
	away := rawSession(t, endpoint, tok)
	if body := postCall(t, endpoint, tok, away, 3, "echo"); !strings.Contains(body, "Chrome: hi") {
		t.Fatalf("echo answered %s", body)
	}
	b.leave()
	testutil.WaitFor(t, "the proxy to see the browser leave", func() bool {
		return len(tp.srv.extensionsOf("alice", relaywire.ExtensionKindBrowser)) == 0
	})
	end(away)
	back := startBrowser(t, tp, "alice", "Chrome")
	if back.id != b.id {
		t.Fatalf("the browser came back as %s, was %s", back.id, b.id)
	}
	told(back, away)
}

// TestClusterSessionEndTellsBrowserOnAnotherNode: a session that lives on
// one node of a cluster and whose calls went to a browser on another node
// tells that browser when it ends (passed node to node on NATS), as a
// session on the browser's own node does.
func TestClusterSessionEndTellsBrowserOnAnotherNode(t *testing.T) {
	lb, nodes := clusterHTTPNodes(t, 2)
	b := startBrowser(t, nodes[1], "alice", "Chrome")
	testutil.WaitFor(t, "node a to see alice's browser on node b", func() bool {
		return len(nodes[0].srv.extensionsOf("alice", relaywire.ExtensionKindBrowser)) == 1
	})
	tok := accessToken(t, passwordPerson(), lb.URL+"/mcp")
	// Through the load balancer, as a client reaches a cluster: sessions
	// until one lives on node a (a session's id begins with its node's
	// name), while the browser is on b.
	endpoint := lb.URL + "/mcp"
	sid := echoSessionOnNodeA(t, endpoint, tok)
	deleteSession(t, endpoint, tok, sid)
	var p relaywire.SessionEndedParams
	if err := json.Unmarshal(b.note(relaywire.MethodSessionEnded).Params, &p); err != nil || p.Key != sessionKey(sid) || p.Client != "raw" {
		t.Fatalf("session_ended params %+v (%v); want key %s, client raw", p, err, sessionKey(sid))
	}
}

// echoSessionOnNodeA opens sessions through the load balancer at endpoint
// until one lives on node a (a session's id begins with its node's name),
// and has it call echo, which the browser "Chrome" answers wherever it is.
func echoSessionOnNodeA(t *testing.T, endpoint, tok string) string {
	t.Helper()
	sid := ""
	for i := 0; i < 9 && !strings.HasPrefix(sid, "nodea"); i++ {
		sid = rawSession(t, endpoint, tok)
	}
	if !strings.HasPrefix(sid, "nodea") {
		t.Fatalf("no session landed on node a in 9 tries (last %s)", sid)
	}
	if body := postCall(t, endpoint, tok, sid, 2, "echo"); !strings.Contains(body, "Chrome: hi") {
		t.Fatalf("echo answered %s", body)
	}
	return sid
}

// deleteSession ends the session sid at endpoint (DELETE) as its client does.
func deleteSession(t *testing.T, endpoint, tok, sid string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, endpoint, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(mcphttp.HeaderSessionID, sid)
	req.Header.Set(mcphttp.HeaderProtocolVersion, "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
}

package hostlink

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// The extension learns from hello which MCP sessions the bridge still has
// (issue 12), and which bridge process answers.
func TestHelloListsLiveSessions(t *testing.T) {
	two := []protocol.SessionRef{{ID: "local-7f3a", Client: "claude-code"}, {ID: "local-91bc", Client: "Cursor"}}
	for _, tc := range []struct {
		name string
		hook func() []protocol.SessionRef
		want []protocol.SessionRef
	}{
		{"no hook", nil, []protocol.SessionRef{}},
		{"hook with none", func() []protocol.SessionRef { return nil }, []protocol.SessionRef{}},
		{"two sessions", func() []protocol.SessionRef { return two }, two},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, socket := serveServer(t, Options{AllowedOrigins: []string{goodOrigin}, LiveSessions: tc.hook})
			p := dialPeer(t, socket)
			p.mustCall(protocol.HostAttach, attachParams(goodOrigin))
			raw := p.mustCall(protocol.Hello, helloParams("instance-sessions"))

			// "sessions" is on the wire even when empty: the extension
			// must not mistake an old bridge's silence for "none".
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(raw, &fields); err != nil {
				t.Fatal(err)
			}
			if _, ok := fields["sessions"]; !ok || string(fields["sessions"]) == "null" {
				t.Fatalf("hello result %s has no sessions array", raw)
			}
			var res protocol.HelloResult
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Sessions, tc.want) {
				t.Errorf("sessions = %+v, want %+v", res.Sessions, tc.want)
			}
			if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(res.BridgeInstance) || res.BridgeInstance != s.Instance() {
				t.Errorf("bridgeInstance = %q, want the server's 128-bit hex id %q", res.BridgeInstance, s.Instance())
			}
		})
	}
}

// The same bridge answers every hello with the same instance id; another
// bridge with another.
func TestBridgeInstanceTellsBridgesApart(t *testing.T) {
	instanceOf := func(s *Server, socket, browser string) string {
		p := dialPeer(t, socket)
		p.mustCall(protocol.HostAttach, attachParams(goodOrigin))
		var res protocol.HelloResult
		if err := json.Unmarshal(p.mustCall(protocol.Hello, helloParams(browser)), &res); err != nil {
			t.Fatal(err)
		}
		return res.BridgeInstance
	}
	s1, sock1 := serveServer(t, Options{})
	s2, sock2 := serveServer(t, Options{})
	a, b := instanceOf(s1, sock1, "instance-one"), instanceOf(s1, sock1, "instance-two")
	if a != b {
		t.Errorf("one bridge answered bridgeInstance %q then %q", a, b)
	}
	if c := instanceOf(s2, sock2, "instance-one"); c == a {
		t.Errorf("two bridges share bridgeInstance %q", c)
	}
}

// Identity, which every tool result's _meta takes, names the browser as
// Info does.
func TestIdentityMatchesInfo(t *testing.T) {
	s, socket := serveServer(t, Options{AllowedOrigins: []string{goodOrigin}})
	p := dialPeer(t, socket)
	p.mustCall(protocol.HostAttach, attachParams(goodOrigin))
	p.mustCall(protocol.Hello, helloParams("instance-identity"))
	b, ok := s.Browser("instance-identity")
	if !ok {
		t.Fatal("the browser that said hello is not listed")
	}
	id, name, version := b.Identity()
	info := b.Info()
	if id != info.ID || name != info.Name || version != info.Version || name != "TestBrowser" || version != "1.0" {
		t.Errorf("Identity() = %q, %q, %q; Info() has %q, %q, %q", id, name, version, info.ID, info.Name, info.Version)
	}
}

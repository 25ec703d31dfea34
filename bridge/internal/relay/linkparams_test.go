package relay

import (
	"encoding/json"
	"testing"
)

// TestLinkParamsMarksRemote: every relayed tools/call reaches the browser
// as the relay connection's session, marked remote, whatever session the
// remote client named; other methods keep their params.
func TestLinkParamsMarksRemote(t *testing.T) {
	type meta struct {
		Session struct {
			Client string `json:"client"`
			ID     string `json:"id"`
			Remote bool   `json:"remote"`
		} `json:"browserbridge/session"`
		Progress string `json:"progressToken"`
	}
	for _, tc := range []struct {
		name, params string
		token        bool
	}{
		{"no _meta", `{"name":"read_page","arguments":{}}`, false},
		{"a local session named by the remote client", `{"name":"read_page","_meta":{"browserbridge/session":{"id":"local-abc","client":"Claude Code"}}}`, false},
		{"progress asked for", `{"name":"read_page","_meta":{"progressToken":7}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, token := linkParams("tools/call", json.RawMessage(tc.params), "conn-1", "conn-1:4")
			var p struct {
				Meta meta `json:"_meta"`
			}
			if err := json.Unmarshal(out, &p); err != nil {
				t.Fatalf("params %s: %v", out, err)
			}
			s := p.Meta.Session
			if s.ID != "conn-1" || s.Client != "relay" || !s.Remote {
				t.Errorf("session _meta = %+v, want the relay connection's, remote", s)
			}
			if tc.token != (token != nil) || (tc.token && p.Meta.Progress != "conn-1:4") {
				t.Errorf("progress token %s, browser's %q", token, p.Meta.Progress)
			}
		})
	}
	in := json.RawMessage(`{"tabId":3}`)
	if out, _ := linkParams("click", in, "conn-1", "conn-1:5"); string(out) != string(in) {
		t.Errorf("click's params became %s", out)
	}
}

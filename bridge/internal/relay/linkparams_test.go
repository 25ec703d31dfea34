package relay

import (
	"encoding/json"
	"testing"
)

// TestLinkParamsMarksRemote: every relayed tools/call reaches the browser
// as a remote session named after its client (_meta browserbridge/client,
// taken out), on the client's key when it has one, else on the relay
// connection, whatever session the remote client named; other methods keep
// their params. Issue 31, items 1 and 2.
func TestLinkParamsMarksRemote(t *testing.T) {
	type meta struct {
		Session struct {
			Client string `json:"client"`
			ID     string `json:"id"`
			Remote bool   `json:"remote"`
		} `json:"browserbridge/session"`
		Progress string          `json:"progressToken"`
		Client   json.RawMessage `json:"browserbridge/client"`
	}
	for _, tc := range []struct {
		name, params   string
		envelope       string // the proxy's client member
		token          bool
		wantID, client string
	}{
		{"no _meta", `{"name":"read_page","arguments":{}}`, "", false, "conn-1", "remote client"},
		{"a local session named by the remote client", `{"name":"read_page","_meta":{"browserbridge/session":{"id":"local-abc","client":"Claude Code"}}}`, "", false, "conn-1", "remote client"},
		{"progress asked for", `{"name":"read_page","_meta":{"progressToken":7}}`, "", true, "conn-1", "remote client"},
		{"a named client", `{"name":"read_page","_meta":{"browserbridge/client":{"name":"claude.ai"}}}`, "", false, "conn-1", "claude.ai"},
		{"a named client with a key", `{"name":"read_page","_meta":{"progressToken":"t","browserbridge/client":{"name":"Claude\u0007 Code","key":"0a1b"}}}`, "", true, "conn-k0a1b", "Claude Code"},
		{"a key that is not one", `{"name":"read_page","_meta":{"browserbridge/client":{"name":"x","key":"../local-abc"}}}`, "", false, "conn-1", "x"},
		{"the proxy's client over the client's _meta", `{"name":"read_page","_meta":{"browserbridge/client":{"name":"spoof","key":"b"}}}`, `{"name":"claude.ai","key":"c0ffee"}`, false, "conn-kc0ffee", "claude.ai"},
		{"a malformed client", `{"name":"read_page","_meta":{"browserbridge/client":"claude"}}`, "", false, "conn-1", "remote client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var envelope json.RawMessage
			if tc.envelope != "" {
				envelope = json.RawMessage(tc.envelope)
			}
			out, token, rs := linkParams("tools/call", json.RawMessage(tc.params), envelope, "conn-1", "conn-1:4")
			var p struct {
				Meta meta `json:"_meta"`
			}
			if err := json.Unmarshal(out, &p); err != nil {
				t.Fatalf("params %s: %v", out, err)
			}
			s := p.Meta.Session
			if s.ID != tc.wantID || s.Client != tc.client || !s.Remote || rs.ID != s.ID || rs.Client != s.Client {
				t.Errorf("session _meta = %+v (returned %+v), want %s named %q, remote", s, rs, tc.wantID, tc.client)
			}
			if p.Meta.Client != nil {
				t.Errorf("the browser got the client's _meta %s", p.Meta.Client)
			}
			if tc.token != (token != nil) || (tc.token && p.Meta.Progress != "conn-1:4") {
				t.Errorf("progress token %s, browser's %q", token, p.Meta.Progress)
			}
		})
	}
	in := json.RawMessage(`{"tabId":3}`)
	if out, _, _ := linkParams("click", in, nil, "conn-1", "conn-1:5"); string(out) != string(in) {
		t.Errorf("click's params became %s", out)
	}
}

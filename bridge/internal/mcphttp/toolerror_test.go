package mcphttp

import (
	"encoding/json"
	"testing"
)

func TestArgumentErrorAsResult(t *testing.T) {
	bad := json.RawMessage(`{"argumentErrors":["url is required"]}`)
	for _, c := range []struct {
		name    string
		version string
		code    int
		data    json.RawMessage
		want    bool
	}{
		{"bad arguments at 2025-11-25", "2025-11-25", -32602, bad, true},
		{"bad arguments in the stateless era", VersionStateless, -32602, bad, true},
		{"bad arguments at 2025-06-18 stay -32602", "2025-06-18", -32602, bad, false},
		{"bad arguments with no version known", "", -32602, bad, false},
		{"unknown tool (no data)", "2025-11-25", -32602, nil, false},
		{"unknown tool with other data", "2025-11-25", -32602, json.RawMessage(`{"tool":"x"}`), false},
		{"empty problem list", "2025-11-25", -32602, json.RawMessage(`{"argumentErrors":[]}`), false},
		{"another code", "2025-11-25", -32000, bad, false},
		{"data not an object", "2025-11-25", -32602, json.RawMessage(`"argumentErrors"`), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ArgumentErrorAsResult(c.version, c.code, c.data); got != c.want {
				t.Errorf("ArgumentErrorAsResult(%q, %d, %s) = %v, want %v", c.version, c.code, c.data, got, c.want)
			}
		})
	}
}

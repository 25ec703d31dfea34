package mcphttp

import (
	"encoding/json"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// VersionToolArgumentErrors is the first protocol version in which a call
// with arguments that do not match the tool's inputSchema is a tool
// execution error (a result with isError the model reads and corrects its
// call from, SEP-1303); the versions before answer it with -32602. An
// unknown tool stays -32602 in every version.
const VersionToolArgumentErrors = "2025-11-25"

// ArgumentErrorAsResult reports whether a browser's refusal of a
// tools/call (its JSON-RPC code and data) is one of bad arguments that a
// client speaking version gets as a tool error rather than -32602: the
// extension marks those with data.argumentErrors (extension/sw/tools.js).
// Every endpoint that forwards tools/call to a browser (the bridge's,
// `browserbridge connect`, the cloud proxy's) applies this one rule.
func ArgumentErrorAsResult(version string, code int, data json.RawMessage) bool {
	if version < VersionToolArgumentErrors || code != rpccode.InvalidParams || len(data) == 0 {
		return false
	}
	var d struct {
		Problems []string `json:"argumentErrors"`
	}
	return json.Unmarshal(data, &d) == nil && len(d.Problems) > 0
}

// ArgumentErrorText is the tool error's text for a browser's bad-arguments
// message: what was wrong, then what to do about it.
func ArgumentErrorText(message string) string {
	return message + ". Correct the arguments to match the tool's inputSchema and call it again."
}

// Package e2e is the end-to-end suite of Browser Bridge: the real
// `browserbridge` binary installs the native host into a throwaway Chromium
// profile and serves MCP; Debian's headless Chromium runs the unpacked
// extension from extension/, which Chrome connects to the real
// `browserbridge-host`; and the tests call every tool through the bridge's
// MCP endpoint with the official Go SDK client, asserting what really
// happened in the page (form values, navigation, decoded screenshots and
// GIFs, captured console and network entries).
//
// It needs /usr/bin/chromium (`apt-get install chromium`; .ci/run installs
// it). `go test -bench . ./bridge/internal/e2e/` measures per-tool latency
// and compares a no-op tool's round trip through the whole chain with a
// raw native-messaging echo in the same browser (testdata/echohost).
//
// The package holds tests only; this file exists so that it has a name
// and a description.
package e2e

package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/browserbridge/browserbridge"

type pkg struct {
	ImportPath string
	Deps       []string
}

func listDeps(t *testing.T, patterns ...string) []pkg {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-json"}, patterns...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportDirection holds the line drawn in the README: the host and the
// installer may use the bridge's leaf packages, never the other way round
// (only the browserbridge command, which wires everything, imports the
// installer); the host stays a small program that pulls in no jsonrpc2,
// HTTP server or service code; and the leaf packages stay leaves.
func TestImportDirection(t *testing.T) {
	for _, p := range listDeps(t, module+"/...") {
		for _, d := range p.Deps {
			switch {
			case strings.HasPrefix(p.ImportPath, module+"/bridge/") && !strings.HasPrefix(p.ImportPath, module+"/bridge/cmd/") &&
				(strings.HasPrefix(d, module+"/host") || strings.HasPrefix(d, module+"/installer")):
				t.Errorf("%s imports %s: bridge packages must not depend on the host or the installer", p.ImportPath, d)
			case p.ImportPath == module+"/host" &&
				(strings.HasPrefix(d, "github.com/sourcegraph/jsonrpc2") || d == "net/http" || strings.HasPrefix(d, "github.com/kardianos/")):
				t.Errorf("the host imports %s: it is a frame pump and must stay small", d)
			case p.ImportPath == module+"/bridge/relaywire" && strings.Contains(d, ".") && d != module+"/bridge/internal/mcphttp/rpccode":
				t.Errorf("relaywire imports %s: the relay's wire package is a standard-library-only leaf (with rpccode's codes), for any client to use", d)
			case p.ImportPath == module+"/bridge/internal/mcphttp" && strings.Contains(strings.SplitN(d, "/", 2)[0], ".") &&
				d != module+"/bridge/internal/mcphttp/rpccode" && d != module+"/bridge/internal/sessionlimit" && d != module+"/bridge/atomicfile":
				t.Errorf("mcphttp imports %s: the session engine every MCP endpoint shares uses only the standard library, the session table and atomicfile (never the SDK, which the fast path is checked against)", d)
			case p.ImportPath == module+"/bridge/atomicfile" && strings.Contains(strings.SplitN(d, "/", 2)[0], ".") && !strings.HasPrefix(d, "golang.org/x/sys/"):
				t.Errorf("atomicfile imports %s: it is a leaf (standard library and x/sys) that the installer and the host may use", d)
			case p.ImportPath == module+"/bridge/internal/mcphttp/rpccode":
				t.Errorf("rpccode imports %s: it holds constants only, so that relaywire stays a standard-library leaf", d)
			case (p.ImportPath == module+"/bridge/nativemsg" || p.ImportPath == module+"/bridge/protocol" || p.ImportPath == module+"/bridge/ipc") &&
				strings.HasPrefix(d, module+"/") && !strings.HasPrefix(d, module+"/bridge/nativemsg") && !strings.HasPrefix(d, module+"/bridge/protocol"):
				t.Errorf("leaf package %s imports %s", p.ImportPath, d)
			}
		}
	}
}

// testSupport are the packages that exist for tests: shared helpers, a
// stand-in browser, a re-executed test binary. They may use each other.
var testSupport = []string{
	module + "/bridge/internal/authserver/kvtest",
	module + "/bridge/internal/natsembed/natstest",
	module + "/bridge/internal/testbrowser",
	module + "/bridge/internal/testproc",
	module + "/bridge/internal/testutil",
}

// testSupportImports lists, for each package that is not test support,
// the test-support packages it depends on. go list's Deps leave out test
// files' imports, so a test importing them is never counted.
func testSupportImports(pkgs []pkg) []string {
	isSupport := func(path string) bool {
		for _, s := range testSupport {
			if path == s {
				return true
			}
		}
		return false
	}
	var bad []string
	for _, p := range pkgs {
		if isSupport(p.ImportPath) {
			continue
		}
		for _, d := range p.Deps {
			if isSupport(d) {
				bad = append(bad, p.ImportPath+" imports "+d)
			}
		}
	}
	return bad
}

// TestTestSupportOnlyInTests keeps the test helpers out of every shipped
// program: only tests (and the helpers themselves) import them.
func TestTestSupportOnlyInTests(t *testing.T) {
	for _, b := range testSupportImports(listDeps(t, module+"/...")) {
		t.Errorf("%s: test-support packages are for tests only", b)
	}
}

// The rule above finds a package that imports a helper, directly or not,
// and lets the helpers use each other.
func TestTestSupportImportsRule(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: module + "/bridge/internal/testutil", Deps: []string{module + "/bridge/internal/testbrowser"}},
		{ImportPath: module + "/bridge/internal/daemon", Deps: []string{"os", module + "/bridge/internal/testutil"}},
		{ImportPath: module + "/bridge/cmd/browserbridge", Deps: []string{module + "/bridge/internal/daemon"}},
	}
	got := testSupportImports(pkgs)
	want := []string{module + "/bridge/internal/daemon imports " + module + "/bridge/internal/testutil"}
	if len(got) != len(want) || got[0] != want[0] {
		t.Fatalf("testSupportImports = %q, want %q", got, want)
	}
}

// natsFree are the programs that never speak NATS: the user's bridge (its
// stdio gateway too) and the host. Only the cloud proxy's cluster does, so
// nats.go and what it brings (nkeys, klauspost/compress: a megabyte of the
// bridge's binary and some of its idle memory) stay out of them; that is
// why authserver's JetStream store is a package of its own, jetstreamkv.
var natsFree = []string{module + "/bridge/cmd/browserbridge", module + "/host"}

// natsImports lists, for each package, the NATS packages it depends on.
func natsImports(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "github.com/nats-io/") {
				bad = append(bad, p.ImportPath+" depends on "+d)
			}
		}
	}
	return bad
}

// TestNoNATSInBridgeOrHost keeps NATS in the proxy: the bridge and the host
// depend on no github.com/nats-io package, directly or not.
func TestNoNATSInBridgeOrHost(t *testing.T) {
	for _, b := range natsImports(listDeps(t, natsFree...)) {
		t.Errorf("%s: only the cloud proxy may link NATS (a JetStream store belongs in its own package, as authserver/jetstreamkv)", b)
	}
}

// The rule above finds NATS however deep it comes in, and nothing else.
func TestNATSImportsRule(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: module + "/bridge/cmd/browserbridge", Deps: []string{"os", module + "/bridge/internal/authserver", "github.com/nats-io/nkeys"}},
		{ImportPath: module + "/host", Deps: []string{"os", "github.com/nats-iox/other"}},
	}
	got := natsImports(pkgs)
	want := []string{module + "/bridge/cmd/browserbridge depends on github.com/nats-io/nkeys"}
	if len(got) != len(want) || got[0] != want[0] {
		t.Fatalf("natsImports = %q, want %q", got, want)
	}
}

// gatewayBinary is the stdio gateway's own binary (issue 19: it idles in
// at most 12 MB). Most of a Go program's idle memory is its binary's
// resident pages, so it links nothing of the bridge's browser side.
const gatewayBinary = module + "/bridge/cmd/browserbridge-gateway"

// notInGateway are what the gateway alone never uses: the MCP SDK's server
// and client (the gateway speaks MCP through its own JSON-RPC), the
// browser's MCP server, the host link, the cloud relay, and NATS. Each is
// a package and the packages under it.
var notInGateway = []string{
	"github.com/modelcontextprotocol/go-sdk/mcp",
	module + "/bridge/internal/mcpserver",
	module + "/bridge/internal/hostlink",
	module + "/bridge/internal/relay",
	"github.com/nats-io",
}

// gatewayImports lists, for each package, what of notInGateway it depends on.
func gatewayImports(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		for _, d := range p.Deps {
			for _, no := range notInGateway {
				if d == no || strings.HasPrefix(d, no+"/") {
					bad = append(bad, p.ImportPath+" depends on "+d)
				}
			}
		}
	}
	return bad
}

// TestGatewayBinaryIsSmall keeps browserbridge-gateway to the gateway: it
// depends, directly or not, on none of notInGateway.
func TestGatewayBinaryIsSmall(t *testing.T) {
	for _, b := range gatewayImports(listDeps(t, gatewayBinary)) {
		t.Errorf("%s: the gateway's binary links none of the bridge's browser side (issue 19); keep what the gateway shares with the bridge in gatewayserver", b)
	}
}

// The rule above finds each forbidden package however deep it comes in,
// and not the packages whose names merely begin alike.
func TestGatewayImportsRule(t *testing.T) {
	pkgs := []pkg{{ImportPath: gatewayBinary, Deps: []string{
		"os",
		"github.com/modelcontextprotocol/go-sdk/oauthex",
		"github.com/modelcontextprotocol/go-sdk/mcp",
		module + "/bridge/internal/relayx",
		module + "/bridge/internal/relay/wire",
		"github.com/nats-io/nkeys",
	}}}
	got := gatewayImports(pkgs)
	want := []string{
		gatewayBinary + " depends on github.com/modelcontextprotocol/go-sdk/mcp",
		gatewayBinary + " depends on " + module + "/bridge/internal/relay/wire",
		gatewayBinary + " depends on github.com/nats-io/nkeys",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("gatewayImports = %q, want %q", got, want)
	}
}

// serviceManagerLibrary is what installs the bridge as a service and, on
// Windows, answers the Service Control Manager. Its init probes the init
// system, which costs the gateway about 0.6 MB of idle memory (issue 19);
// elsewhere service/runner stops on SIGTERM by itself, so the gateway
// links it only on Windows.
const serviceManagerLibrary = "github.com/kardianos/service"

// serviceManagerImports lists, for each package, the service-manager
// packages it depends on.
func serviceManagerImports(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		for _, d := range p.Deps {
			if d == serviceManagerLibrary || strings.HasPrefix(d, serviceManagerLibrary+"/") {
				bad = append(bad, p.ImportPath+" depends on "+d)
			}
		}
	}
	return bad
}

// TestGatewayBinaryHasNoServiceManager keeps kardianos/service out of
// browserbridge-gateway outside Windows. go list lists the packages for the
// host's GOOS, so the rule holds where the tests run on Linux or macOS.
func TestGatewayBinaryHasNoServiceManager(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("on Windows the gateway answers the Service Control Manager through kardianos/service")
	}
	for _, b := range serviceManagerImports(listDeps(t, gatewayBinary)) {
		t.Errorf("%s: outside Windows the gateway runs through service/runner, never package service (issue 19: its init costs 0.6 MB of idle memory)", b)
	}
}

// The rule above finds kardianos/service however deep it comes in, and not
// modules whose names merely begin alike.
func TestServiceManagerImportsRule(t *testing.T) {
	pkgs := []pkg{{ImportPath: gatewayBinary, Deps: []string{
		"os",
		"github.com/kardianos/osext",
		"github.com/kardianos/servicex",
		module + "/bridge/internal/service",
		"github.com/kardianos/service",
	}}}
	got := serviceManagerImports(pkgs)
	want := []string{gatewayBinary + " depends on github.com/kardianos/service"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("serviceManagerImports = %q, want %q", got, want)
	}
}

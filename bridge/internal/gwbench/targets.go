package gwbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/npmtools"
)

// transport is how the client talks to a target.
type transport int

const (
	viaStdio      transport = iota // newline-delimited JSON-RPC on the server's stdin/stdout
	viaStreamable                  // Streamable HTTP
	viaSSE                         // HTTP+SSE (MCP 2024-11-05)
)

// A target is one way of serving server-everything to the client.
type target struct {
	name      string
	transport transport
	sdk       bool // driven by the Go SDK's client rather than gwbench's own
	// sdkVersion pins the SDK client's protocol version; "" lets it choose
	// (the stateless 2026-07-28 where the gateway offers it, else sessions).
	sdkVersion string
	about      string // one line for the report
	launch     func(ctx context.Context, e *env) (*instance, error)
}

// targets lists every target in the order of the report.
var targets = []target{
	{name: "direct", transport: viaStdio, about: "no gateway: one stdio connection to the server", launch: launchDirect},
	{name: "direct-sdk", transport: viaStdio, sdk: true, about: "no gateway: the Go SDK client on one stdio connection to the server", launch: launchDirect},
	{name: "browserbridge", transport: viaStreamable, about: "browserbridge gateway, Streamable HTTP", launch: launchBrowserbridge},
	{name: "browserbridge-sdk", transport: viaStreamable, sdk: true, about: "browserbridge gateway, Streamable HTTP, Go SDK client (it picks 2026-07-28: stateless, a request per call and no session)", launch: launchBrowserbridge},
	{name: "browserbridge-sdk-session", transport: viaStreamable, sdk: true, sdkVersion: "2025-11-25",
		about: "browserbridge gateway, Streamable HTTP, Go SDK client held to 2025-11-25 sessions (what it speaks with direct stdio and TBXark's)", launch: launchBrowserbridge},
	{name: "tbxark", transport: viaStreamable, about: "TBXark/mcp-proxy (Go), streamable-http", launch: launchTBXark},
	{name: "tbxark-sdk", transport: viaStreamable, sdk: true, about: "TBXark/mcp-proxy (Go), streamable-http, Go SDK client", launch: launchTBXark},
	{name: "supergateway-sse", transport: viaSSE, about: "supergateway, stdio to SSE", launch: launchSupergateway(false)},
	{name: "supergateway-sh", transport: viaStreamable, about: "supergateway, stdio to stateful Streamable HTTP", launch: launchSupergateway(true)},
	{name: "mcp-proxy", transport: viaStreamable, about: "mcp-proxy, Streamable HTTP endpoint /mcp", launch: launchMCPProxy("/mcp")},
	{name: "mcp-proxy-sse", transport: viaSSE, about: "mcp-proxy, SSE endpoint /sse", launch: launchMCPProxy("/sse")},
}

// TargetNames returns the names of every target, in the report's order.
func TargetNames() []string {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.name
	}
	return names
}

// targetNamed returns the target called name.
func targetNamed(name string) target {
	for _, t := range targets {
		if t.name == name {
			return t
		}
	}
	return target{name: name}
}

// An instance is a running target.
type instance struct {
	url  string   // the sessions' URL (HTTP targets)
	proc *process // nil for a gateway we did not start
	pid  int      // the process measured; 0 none
	argv []string // how it was started; nil for an external gateway
	in   io.WriteCloser
	out  io.ReadCloser // the server's stdin and stdout (direct)
}

// stop stops what we started; safe to call twice.
func (i *instance) stop() {
	if i.proc != nil {
		i.proc.stop()
	}
	if i.out != nil {
		i.out.Close()
	}
}

// errSkip marks a target that cannot run here; the report says why.
var errSkip = errors.New("skipped")

// env is what the targets are built from.
type env struct {
	root       string // the repository
	npm        string // tools/npm/node_modules
	node       string // the Node.js binary every target and server runs on
	nodeVer    string
	entry      string // server-everything's entry point
	bb         string // the browserbridge binary
	gatewayURL string // an already running gateway, instead of starting one
	gatewayPID int
	tmp        string
	pkgs       map[string]npmPackage // the npm packages found, by name
	tbxark     string                // TBXark's mcp-proxy, once built (or given)
	tbxarkErr  error                 // why it could not be built
}

// An npmPackage is an installed npm package with a command.
type npmPackage struct {
	version string
	entry   string // the file its package.json names as the command
	err     error  // why it is not usable
}

// bin returns the entry point of an npm package's command, or an errSkip.
func (e *env) bin(pkg string) (string, error) {
	p, ok := e.pkgs[pkg]
	if !ok || p.err != nil {
		return "", fmt.Errorf("%w: npm package %s is not installed (%v)", errSkip, pkg, p.err)
	}
	return p.entry, nil
}

// serverArgv is the command that runs server-everything over stdio.
func (e *env) serverArgv() []string { return []string{e.node, e.entry, "stdio"} }

func launchDirect(ctx context.Context, e *env) (*instance, error) {
	argv := e.serverArgv()
	cmd := exec.Command(argv[0], argv[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// An os.Pipe rather than StdoutPipe: Wait, run as soon as the process
	// exits, must not close what the session still reads.
	out, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	p, err := startProcess(cmd)
	w.Close()
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("starting the server: %w", err)
	}
	return &instance{proc: p, pid: p.pid(), argv: argv, in: in, out: out}, nil
}

func launchBrowserbridge(ctx context.Context, e *env) (*instance, error) {
	if e.gatewayURL != "" {
		return &instance{url: e.gatewayURL, pid: e.gatewayPID}, nil
	}
	command := e.gatewayCommand()
	if _, err := os.Stat(command[0]); err != nil {
		return nil, fmt.Errorf("%w: %s not found (make build)", errSkip, e.rel(command[0]))
	}
	servers := map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": e.node, "args": []string{e.entry, "stdio"}},
	}}
	b, _ := json.MarshalIndent(servers, "", "  ")
	file := filepath.Join(e.tmp, "servers.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// No per-client rate limit (its default, 1,000 requests/s, is what one
	// closed-loop session exceeds) and no log file: the same footing as the
	// other gateways, which have neither.
	cfgFile := filepath.Join(e.tmp, "bridge.json")
	if err := os.WriteFile(cfgFile, []byte(`{"rate_limit": 0, "loopback_rate_limit": 0, "log": {"file": "-", "level": "warn"}}`), 0o600); err != nil {
		return nil, err
	}
	argv := append(command, "--config", cfgFile, "--servers", file, "--listen", addr)
	p, err := startProcess(exec.Command(argv[0], argv[1:]...))
	if err != nil {
		return nil, err
	}
	if err := waitListening(ctx, addr, p); err != nil {
		p.stop()
		if out := p.tail.String(); strings.Contains(out, "unknown command") || strings.Contains(out, "flag provided but not defined") {
			return nil, fmt.Errorf("%w: `%s` has no --servers FILE --listen ADDR yet (%s)", errSkip, e.shortArgv(command), p.tail.firstLine())
		}
		return nil, err
	}
	inst := &instance{proc: p, pid: p.pid(), argv: argv}
	inst.url = "http://" + addr + "/servers/everything/mcp"
	return inst, nil
}

// gatewayCommand is how the gateway alone is started: the
// browserbridge-gateway binary beside the browserbridge binary when it is
// there (what a server deployment runs, issue 19), else `browserbridge
// gateway` (a build from before that binary). The row's command line names
// the one run.
func (e *env) gatewayCommand() []string {
	gw := filepath.Join(filepath.Dir(e.bb), "browserbridge-gateway")
	if _, err := os.Stat(gw); err == nil {
		return []string{gw}
	}
	return []string{e.bb, "gateway"}
}

func launchSupergateway(stateful bool) func(context.Context, *env) (*instance, error) {
	return func(ctx context.Context, e *env) (*instance, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		entry, err := e.bin("supergateway")
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		// --logLevel none: at "info" it logs every message, which would
		// cost it CPU the others do not spend.
		argv := []string{e.node, entry,
			"--stdio", shellJoin(e.serverArgv()), "--port", strconv.Itoa(port), "--logLevel", "none"}
		path := "/sse"
		if stateful {
			argv = append(argv, "--outputTransport", "streamableHttp", "--stateful")
			path = "/mcp"
		}
		inst, err := startHTTP(ctx, argv, addr)
		if err != nil {
			return nil, err
		}
		inst.url = "http://" + addr + path
		return inst, nil
	}
}

func launchMCPProxy(path string) func(context.Context, *env) (*instance, error) {
	return func(ctx context.Context, e *env) (*instance, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		entry, err := e.bin("mcp-proxy")
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		argv := append([]string{e.node, entry,
			"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--"}, e.serverArgv()...)
		inst, err := startHTTP(ctx, argv, addr)
		if err != nil {
			return nil, err
		}
		inst.url = "http://" + addr + path
		return inst, nil
	}
}

// startHTTP starts a gateway and waits until it listens on addr.
func startHTTP(ctx context.Context, argv []string, addr string) (*instance, error) {
	p, err := startProcess(exec.Command(argv[0], argv[1:]...))
	if err != nil {
		return nil, err
	}
	if err := waitListening(ctx, addr, p); err != nil {
		p.stop()
		return nil, err
	}
	return &instance{proc: p, pid: p.pid(), argv: argv}, nil
}

// rel shortens a path inside the repository for the report.
func (e *env) rel(path string) string {
	if r, err := filepath.Rel(e.root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// findNode asks npmtools (scripts/install-test-tools.sh --check) for the
// Node.js that runs the pinned tools: the same rule as every test.
func findNode(root string) (path, version string, err error) {
	tools, err := npmtools.Find(root)
	if err != nil {
		return "", "", fmt.Errorf("%w, or pass --node", err)
	}
	path = tools.Node
	if abs, err := filepath.EvalSymlinks(path); err == nil {
		path = abs
	}
	if version, err = execOutput(path, "--version"); err != nil {
		return "", "", fmt.Errorf("%s --version: %w", path, err)
	}
	return path, version, nil
}

// packageInfo reads an installed npm package's version and the file its
// package.json names as the binary bin (the only one when bin is a string).
func packageInfo(dir, bin string) (version, entry string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return "", "", fmt.Errorf("%w (run scripts/install-test-tools.sh)", err)
	}
	var pkg struct {
		Version string          `json:"version"`
		Bin     json.RawMessage `json:"bin"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", "", fmt.Errorf("%s/package.json: %w", dir, err)
	}
	var one string
	var many map[string]string
	switch {
	case json.Unmarshal(pkg.Bin, &one) == nil:
		entry = one
	case json.Unmarshal(pkg.Bin, &many) == nil:
		entry = many[bin]
	}
	if entry == "" {
		return "", "", fmt.Errorf("%s/package.json has no bin %q", dir, bin)
	}
	return pkg.Version, filepath.Join(dir, entry), nil
}

// shellJoin quotes argv for sh -c (supergateway runs --stdio with a shell).
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@+,") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

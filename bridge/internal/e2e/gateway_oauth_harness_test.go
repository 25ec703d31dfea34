//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/npmtools"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// The gateway's stdio server in these tests: server-everything, whose echo
// tool answers "Echo: <message>".
const gatewayServer = "everything"

// Time limits of the public-gateway tests.
const (
	gatewayUpWait   = 30 * time.Second // from start to the gateway's AS metadata answering
	gatewayStopWait = 15 * time.Second // from SIGTERM to the gateway and its children gone
	pageWait        = 20 * time.Second // for one page of the sign-in to show
)

// publicGateway is a running `browserbridge gateway --public-url`: the
// stdio gateway behind its own OAuth authorization server, password
// sign-in, its state (and its children's command lines) in one directory.
type publicGateway struct {
	t        *testing.T
	dir      string
	public   string // the public URL, http on loopback
	password string
	cmd      *exec.Cmd
	args     []string // the command line, for restart
	env      []string
	out      *testbrowser.SyncBuffer
	exited   chan struct{}
}

type gatewayOptions struct {
	// allowedOrigins goes to the config's allowed_origins.
	allowedOrigins []string
	// perSession gives each session its own server-everything, started
	// with its client's initialize.
	perSession bool
}

// startPublicGateway starts the built browserbridge as a public gateway of
// server-everything on a free loopback port and waits until its
// authorization server's metadata answers. Its teardown stops it and fails
// the test if it or any of its children outlive it.
func startPublicGateway(t *testing.T, opts gatewayOptions) *publicGateway {
	t.Helper()
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	everything, err := tools.Module("@modelcontextprotocol", "server-everything", "dist", "index.js")
	if err != nil {
		t.Fatal(err)
	}
	g := &publicGateway{t: t, dir: t.TempDir(), out: &testbrowser.SyncBuffer{}, exited: make(chan struct{})}
	// The stdio server runs Node.js through a link in the gateway's
	// directory, so that its command line names that directory and the
	// leftover check finds it even if the gateway moved it to a process
	// group of its own.
	node := filepath.Join(g.dir, "node")
	if err := os.Symlink(tools.Node, node); err != nil {
		t.Fatal(err)
	}
	servers := map[string]any{"mcpServers": map[string]any{
		gatewayServer: map[string]any{"command": node, "args": []string{everything, "stdio"}, "per_session": opts.perSession},
	}}
	config := map[string]any{"log": map[string]string{"file": "-", "level": "debug"}}
	if len(opts.allowedOrigins) > 0 {
		config["allowed_origins"] = opts.allowedOrigins
	}
	serversFile, configFile := filepath.Join(g.dir, "servers.json"), filepath.Join(g.dir, "config.json")
	writeJSON(t, serversFile, servers)
	writeJSON(t, configFile, config)

	g.password = randomHex(t, 12) // 24 characters; the gateway wants at least 12
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	g.public = "http://" + listen
	home := filepath.Join(g.dir, "home")
	env := []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_RUNTIME_DIR=",
		"BROWSERBRIDGE_HOME=" + filepath.Join(g.dir, "bb"),
		"BROWSERBRIDGE_OAUTH_STATE_FILE=" + filepath.Join(g.dir, "oauth.db"),
		"BROWSERBRIDGE_OAUTH_PASSWORD=" + g.password,
	}
	for _, kv := range os.Environ() {
		// Nothing of the caller's own bridge (a token, a home) leaks in.
		if !strings.HasPrefix(kv, "BROWSERBRIDGE_") {
			env = append(env, kv)
		}
	}
	g.args = []string{"gateway", "--config", configFile, "--servers", serversFile, "--listen", listen, "--public-url", g.public}
	g.env = env
	g.launch()
	t.Cleanup(g.stop)
	return g
}

// launch starts the gateway process and waits until its authorization
// server's metadata answers.
func (g *publicGateway) launch() {
	t := g.t
	t.Helper()
	g.exited = make(chan struct{})
	g.cmd = exec.Command(bins.Bridge, g.args...)
	g.cmd.Env = g.env
	g.cmd.Dir = g.dir
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("starting browserbridge gateway: %v", err)
	}
	exited := g.exited
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(g.cmd)

	var meta asMeta
	testutil.WaitFor(t, "the gateway's authorization server metadata", func() bool {
		var err error
		if meta, err = g.asMetadata(); err == nil {
			return true
		}
		select {
		case <-g.exited:
			t.Fatalf("browserbridge gateway --public-url exited (%v) before serving:\n%s", g.cmd.ProcessState, tail(g.out.String(), 40))
		default:
		}
		return false
	})
	if meta.Issuer != g.public {
		t.Fatalf("the gateway's authorization server names issuer %q; want the public URL %s", meta.Issuer, g.public)
	}
}

// asMeta is the part of RFC 8414 metadata the tests look at.
type asMeta struct {
	Issuer                        string   `json:"issuer"`
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	RegistrationEndpoint          string   `json:"registration_endpoint"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported"`
}

func (g *publicGateway) asMetadata() (asMeta, error) {
	var m asMeta
	resp, err := http.Get(g.public + "/.well-known/oauth-authorization-server")
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("GET /.well-known/oauth-authorization-server: %s", resp.Status)
	}
	return m, json.NewDecoder(resp.Body).Decode(&m)
}

// serverURL is the MCP endpoint of one of the gateway's servers.
func (g *publicGateway) serverURL(name string) string { return g.public + "/servers/" + name + "/mcp" }

// restart stops the gateway process with sig (SIGTERM, as a service
// manager does; SIGKILL, a crash) and starts it again on the same port,
// state file and config, as a person restarting the service would.
func (g *publicGateway) restart(sig syscall.Signal) {
	g.t.Helper()
	g.stopWith(sig)
	if g.t.Failed() {
		g.t.FailNow()
	}
	g.launch()
}

// stop ends the gateway (SIGTERM to its group, then SIGKILL) and fails the
// test if the gateway or any process of its directory or group is left.
func (g *publicGateway) stop() { g.stopWith(syscall.SIGTERM) }

// stopWith is stop with sig as the first signal.
func (g *publicGateway) stopWith(sig syscall.Signal) {
	if g.t.Failed() {
		g.t.Logf("--- browserbridge gateway output ---\n%s", tail(g.out.String(), 120))
	}
	pgid := g.cmd.Process.Pid
	children := descendants(pgid)
	_ = syscall.Kill(-pgid, sig)
	select {
	case <-g.exited:
	case <-time.After(gatewayStopWait):
		g.t.Errorf("browserbridge gateway did not exit within %v of %v", gatewayStopWait, sig)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-g.exited
	}
	left := func() []int {
		var pids []int
		for _, p := range append(append(pgrep("-f", g.dir+"/"), pgrep("-g", strconv.Itoa(pgid))...), children...) {
			if alive(p) && p != os.Getpid() {
				pids = append(pids, p)
			}
		}
		return pids
	}
	var pids []int
	for deadline := time.Now().Add(gatewayStopWait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if pids = left(); len(pids) == 0 {
			return
		}
	}
	out, _ := exec.Command("ps", "-o", "pid,pgid,args", "-p", joinPIDs(pids)).CombinedOutput()
	g.t.Errorf("processes of the gateway outlived it (killed now):\n%s", out)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// descendants are the processes below pid, found through /proc.
func descendants(pid int) []int {
	var all []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		kids := pgrep("-P", strconv.Itoa(queue[0]))
		all = append(all, kids...)
		queue = append(queue, kids...)
	}
	return all
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name's closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

// register registers a public client with a loopback redirect URI and
// returns its client id.
func (g *publicGateway) register(t *testing.T) string {
	t.Helper()
	resp, err := http.Post(g.public+"/oauth/register", "application/json",
		strings.NewReader(`{"client_name":"another app","redirect_uris":["http://127.0.0.1:9/cb"],"token_endpoint_auth_method":"none"}`))
	if err != nil {
		t.Fatalf("POST /oauth/register: %v", err)
	}
	defer resp.Body.Close()
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reg); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("registering another client: %d %v", resp.StatusCode, err)
	}
	return reg.ClientID
}

// postToken posts a form to the token endpoint and returns the status and
// the decoded body.
func (g *publicGateway) postToken(t *testing.T, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(g.public+"/oauth/token", form)
	if err != nil {
		t.Fatalf("POST /oauth/token: %v", err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// noSecretsLogged fails the test when any of secrets (what -> value)
// appears in the gateway's output.
func (g *publicGateway) noSecretsLogged(t *testing.T, secrets map[string]string) {
	t.Helper()
	out := g.out.String()
	for what, s := range secrets {
		if s != "" && strings.Contains(out, s) {
			t.Errorf("the %s appears in the gateway's log", what)
		}
	}
}

func writeJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ---------------------------------------------------------------------------
// A person's browser: headless Chromium without extensions, on a fresh
// profile, driven through DevTools.

type signInBrowser struct {
	profile  string
	cmd      *exec.Cmd
	out      *testbrowser.SyncBuffer
	devtools devtoolsAddr
}

// startSignInBrowser starts Chromium with the harness's flags less the
// extension, and stops it (checking nothing of it is left) when the test
// ends.
func startSignInBrowser(t *testing.T) *signInBrowser {
	t.Helper()
	b := &signInBrowser{profile: t.TempDir(), out: &testbrowser.SyncBuffer{}}
	var args []string
	for _, a := range chromiumFlags(b.profile, nil, "--remote-debugging-port=0", "--disable-extensions") {
		if !strings.HasPrefix(a, "--load-extension=") && !strings.HasPrefix(a, "--disable-extensions-except=") {
			args = append(args, a)
		}
	}
	b.cmd = exec.Command(chromiumBin, args...)
	home := t.TempDir()
	b.cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "CHROME_CONFIG_HOME="+filepath.Join(home, ".config"))
	b.cmd.Dir = home
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pgid := b.cmd.Process.Pid
		stopGroup(b.cmd)
		var left []int
		for deadline := time.Now().Add(stopWait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if left = append(pgrep("-f", b.profile), pgrep("-g", strconv.Itoa(pgid))...); len(left) == 0 {
				return
			}
		}
		out, _ := exec.Command("ps", "-o", "pid,pgid,args", "-p", joinPIDs(left)).CombinedOutput()
		t.Errorf("processes of the sign-in browser outlived it (killed now):\n%s", out)
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	portFile := filepath.Join(b.profile, "DevToolsActivePort")
	testutil.WaitWithin(t, devtoolsWait, "", func() (bool, string) {
		data, err := os.ReadFile(portFile)
		lines := strings.Fields(string(data))
		if err != nil || len(lines) < 2 {
			return false, fmt.Sprintf("Chromium wrote no DevToolsActivePort (%v)", err)
		}
		b.devtools = devtoolsAddr{host: "127.0.0.1:" + lines[0], browserPath: lines[1]}
		return true, ""
	})
	return b
}

// signIn opens authURL in a new tab and plays the person: password, then
// Approve. It returns the consent page's text once Approve is clicked;
// where the browser goes then is the client's redirect URI. It returns
// errors rather than failing the test, since SDKs call it from their own
// goroutines.
func (b *signInBrowser) signIn(authURL, password string) (string, error) {
	return b.signInWith(authURL, "password", password)
}

// signInWith is signIn with the secret typed into the sign-in form's field
// named field: "password", or "code" for a pairing code on the proxy.
func (b *signInBrowser) signInWith(authURL, field, secret string) (string, error) {
	browser, err := dialCDP("ws://" + b.devtools.host + b.devtools.browserPath)
	if err != nil {
		return "", err
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	err = browser.call("Target.createTarget", map[string]any{"url": authURL}, &target)
	browser.close()
	if err != nil {
		return "", fmt.Errorf("opening the authorization URL: %w", err)
	}
	page, err := dialCDP("ws://" + b.devtools.host + "/devtools/page/" + target.TargetID)
	if err != nil {
		return "", err
	}
	defer page.close()
	return signInPageWith(page, field, secret)
}

// signInPage plays the person on the gateway's sign-in page in page: it
// fills the password and submits, waits for the consent page and clicks
// Approve; it returns the consent page's text. Each step waits for a new
// document, so a page that shows the sign-in form again (a refused
// password) is told apart from the one the password was typed into.
func signInPage(page *cdpConn, password string) (string, error) {
	return signInPageWith(page, "password", password)
}

// signInPageWith is signInPage with the secret typed into the field named
// field ("password" or "code").
func signInPageWith(page *cdpConn, field, secret string) (string, error) {
	// What the page is: "signin", "consent", "old" (the document a form
	// was submitted from, still shown), "loading" or "other: <url> <text>"
	// (about:blank before the first load, or an error page).
	probe := fmt.Sprintf(`(() => {
		if (window.__bbSubmitted) return 'old';
		if (document.readyState !== 'complete') return 'loading';
		if (document.querySelector('button[name=decision][value=approve]')) return 'consent';
		if (document.querySelector('form input[name=' + %s + ']')) return 'signin';
		return 'other: ' + location.href + ' ' + (document.body ? document.body.innerText.slice(0, 300) : '');
	})()`, jsString(field))
	wait := func(want string) error {
		var last string
		for deadline := time.Now().Add(pageWait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			var state string
			if err := cdpEvalInto(page, probe, &state); err != nil {
				last = err.Error() // a navigation in progress: ask again
				continue
			}
			switch last = state; {
			case state == want:
				return nil
			case state == "signin" || state == "consent":
				return fmt.Errorf("waiting for the %s page, the browser shows the %s page: %q", want, state, clip(visibleTextOf(page), 300))
			}
		}
		return fmt.Errorf("no %s page within %v (last: %s)", want, pageWait, clip(last, 400))
	}
	if err := wait("signin"); err != nil {
		return "", err
	}
	var ok bool
	if err := cdpEvalInto(page, fmt.Sprintf(`(() => {
		const input = document.querySelector('form input[name=' + %s + ']');
		input.value = %s;
		window.__bbSubmitted = true;
		input.form.requestSubmit();
		return true;
	})()`, jsString(field), jsString(secret)), &ok); err != nil {
		return "", fmt.Errorf("submitting the %s: %w", field, err)
	}
	if err := wait("consent"); err != nil {
		return "", fmt.Errorf("after the %s: %w", field, err)
	}
	consent := visibleTextOf(page)
	if err := cdpEvalInto(page, `(() => {
		window.__bbSubmitted = true;
		document.querySelector('button[name=decision][value=approve]').click();
		return true;
	})()`, &ok); err != nil {
		return consent, fmt.Errorf("clicking Approve: %w", err)
	}
	return consent, nil
}

// visibleTextOf is the visible text of the page ("" when it has none).
func visibleTextOf(page *cdpConn) string {
	var s string
	_ = cdpEvalInto(page, `document.body ? document.body.innerText : ''`, &s)
	return s
}

// cdpEvalInto evaluates expr in the page and decodes its value; unlike
// extPage.evalInto it returns errors, since a page in mid-navigation has
// no context to evaluate in for a moment.
func cdpEvalInto(c *cdpConn, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := c.call("Runtime.evaluate", map[string]any{
		"expression": expr, "awaitPromise": true, "returnByValue": true, "userGesture": true,
	}, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("the page threw %s %s", e.Text, e.Exception.Description)
	}
	if len(r.Result.Value) == 0 {
		return errors.New("the page returned no value")
	}
	return json.Unmarshal(r.Result.Value, out)
}

// caughtCode is the Go SDK's code fetcher for a person in Chromium:
// signIn plays the person at the authorization URL, the browser comes back
// to catcher, and caught (if not nil) sees the redirect's query.
func caughtCode(catcher *testutil.RedirectCatcher, signIn func(authURL string) error, caught func(url.Values)) auth.AuthorizationCodeFetcher {
	return testutil.CodeFetcher(func(ctx context.Context, authURL string) (url.Values, error) {
		if err := signIn(authURL); err != nil {
			return nil, err
		}
		q, err := catcher.Wait(ctx)
		if err == nil && caught != nil {
			caught(q)
		}
		return q, err
	})
}

// sdkOAuthHandler is the Go SDK's own OAuth client as a person's app sets
// it up: dynamic registration as a public client with a loopback redirect
// URI, refresh tokens asked for, and tokens through refreshingSource so a
// test can force a refresh.
func sdkOAuthHandler(t *testing.T, redirectURI, clientName string, fetch auth.AuthorizationCodeFetcher, tokens *refreshingSource) *auth.AuthorizationCodeHandler {
	t.Helper()
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs:            []string{redirectURI},
			ClientName:              clientName,
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			ResponseTypes:           []string{"code"},
			TokenEndpointAuthMethod: "none",
		}},
		AuthorizationCodeFetcher: fetch,
		RequestRefreshToken:      true,
		NewTokenSource:           tokens.start,
	})
	if err != nil {
		t.Fatal(err)
	}
	return handler
}

// addRemoteServer plays the person on the extension's options page: it
// turns developer mode on (http on loopback), waits for the service worker
// to save it, and submits the "Add a server" form with url and title. It
// returns the page, still open.
func addRemoteServer(t *testing.T, devtools devtoolsAddr, url, title string) *extPage {
	t.Helper()
	page := openExtensionPage(t, devtools, "options.html")
	page.waitJS(t, "the options page lists the built-in remote servers", 10*time.Second,
		`document.readyState === 'complete' && document.querySelectorAll('#remote-list li.remote').length > 0`)
	page.js(t, `document.getElementById('remote-dev').checked || document.getElementById('remote-dev').click(), true`)
	page.waitJS(t, "developer mode saved by the service worker", 5*time.Second,
		`chrome.storage.local.get('remoteServers').then((r) => !!r.remoteServers?.developerMode && !document.getElementById('remote-dev').disabled)`)
	page.js(t, fmt.Sprintf(`(() => {
		const f = document.getElementById('remote-add');
		f.elements.url.value = %s;
		f.elements.title.value = %s;
		f.querySelector('button[type=submit]').click();
		return true;
	})()`, jsString(url), jsString(title)))
	return page
}

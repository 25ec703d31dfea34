//go:build oauthprobe && linux

// An experiment record, not a regression test (the build tag keeps it out of
// `make test`): what chrome.identity.launchWebAuthFlow does in headless
// Chromium launched like the e2e harness, and whether a real OAuth-protected
// MCP server (testdata/oauth-server, built on @modelcontextprotocol/sdk) can
// be signed in to from an extension, including access-token expiry and
// refresh.
//
//	go test -tags oauthprobe -run TestOAuthProbe -v ./bridge/internal/e2e/
//
// A throwaway extension (testdata/oauthprobe/ext, with a generated key)
// fetches a plan of scenarios from a control server run here, runs each in
// its service worker and posts the outcome back. A second one without the
// "identity" permission reports whether chrome.identity exists. The plan
// runs twice: with exactly the harness's flags, and with
// --remote-debugging-port (to click consent pages and close auth windows
// through CDP, as a user would) plus --ignore-certificate-errors (for the
// https scenarios).
package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/npmtools"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
)

// probeItem is one scenario of the plan (see testdata/oauthprobe/ext/sw.js).
type probeItem struct {
	Name        string         `json:"name"`
	Kind        string         `json:"kind,omitempty"` // "" (one launchWebAuthFlow) or "mcp" (the whole MCP flow)
	URL         string         `json:"url,omitempty"`  // the extension fills in {redirect} and {state}
	Interactive bool           `json:"interactive"`
	Options     map[string]any `json:"options,omitempty"` // more WebAuthFlowDetails
	MCP         string         `json:"mcp,omitempty"`
	ForceExpire bool           `json:"forceExpire,omitempty"`

	// Judged here: an error containing wantErr, or (wantErr == "") success
	// with wantIn in the returned URL.
	wantErr string
	wantIn  string
}

type probeResult struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	URL    string `json:"url"`
	Error  string `json:"error"`
	Detail string `json:"detail"`
	MS     int    `json:"ms"`
}

// probeControl serves the plan, collects results and plays a trivial
// authorization server on http and on https (self-signed).
type probeControl struct {
	url, localhostURL, tlsURL string

	mu      sync.Mutex
	plan    []probeItem
	results map[string]probeResult
	hello   map[string]any
	done    chan struct{}
	hits    map[string]int
}

func newProbeControl(t *testing.T) *probeControl {
	c := &probeControl{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /plan", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		json.NewEncoder(w).Encode(c.plan)
	})
	mux.HandleFunc("POST /hello", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		json.NewDecoder(r.Body).Decode(&c.hello)
	})
	mux.HandleFunc("POST /result", func(w http.ResponseWriter, r *http.Request) {
		var res probeResult
		json.NewDecoder(r.Body).Decode(&res)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.results[res.Name] = res
	})
	mux.HandleFunc("POST /done", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		select {
		case <-c.done:
		default:
			close(c.done)
		}
	})

	// The trivial authorization server: redirect_uri and state come from
	// the query, the code is fixed.
	back := func(r *http.Request, params url.Values) string {
		u, _ := url.Parse(r.URL.Query().Get("redirect_uri"))
		params.Set("state", r.URL.Query().Get("state"))
		u.RawQuery = params.Encode()
		return u.String()
	}
	auth := func(path string, h http.HandlerFunc) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			c.mu.Lock()
			c.hits[scheme+" "+r.Host+r.URL.Path]++
			c.mu.Unlock()
			h(w, r)
		})
	}
	// /auto approves at once: 302 to the redirect URI.
	auth("GET /auto", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, back(r, url.Values{"code": {"probe-code"}}), http.StatusFound)
	})
	// /deny refuses at once.
	auth("GET /deny", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, back(r, url.Values{"error": {"access_denied"}}), http.StatusFound)
	})
	// /hop goes through another origin (localhost instead of 127.0.0.1)
	// first, as a login page on another host would.
	auth("GET /hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, c.localhostURL+"/auto?"+r.URL.RawQuery, http.StatusFound)
	})
	// /page never redirects: it waits for a user.
	auth("GET /page", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Sign in</title><p>Waiting for a user.`)
	})
	// /js redirects from script after a delay, like a page that checks a
	// session cookie first.
	auth("GET /js", func(w http.ResponseWriter, r *http.Request) {
		target, _ := json.Marshal(back(r, url.Values{"code": {"probe-code"}}))
		fmt.Fprintf(w, `<!doctype html><title>Signing in</title><script>setTimeout(() => location.href = %s, 300)</script>`, target)
	})
	// /consent shows an Approve button (clicked through CDP).
	auth("GET /consent", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>Consent</title><form method="post" action="/approve?%s"><button id="approve">Approve</button></form>`, r.URL.RawQuery)
	})
	auth("POST /approve", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, back(r, url.Values{"code": {"probe-code"}}), http.StatusFound)
	})

	c.results = map[string]probeResult{}
	c.hits = map[string]int{}
	c.done = make(chan struct{})
	srv := httptest.NewServer(mux)
	tlsSrv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(tlsSrv.Close)
	c.url = srv.URL
	c.localhostURL = strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	c.tlsURL = tlsSrv.URL
	return c
}

// oauthServer starts testdata/oauth-server with args and returns its MCP URL.
func oauthServer(t *testing.T, node, mods string, args ...string) string {
	t.Helper()
	cmd := exec.Command(node, append([]string{"testdata/oauth-server/server.mjs", "--modules", mods}, args...)...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { probeStop(cmd) })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("oauth server %v: %v", args, err)
	}
	var addr struct{ MCP string }
	if err := json.Unmarshal([]byte(line), &addr); err != nil || addr.MCP == "" {
		t.Fatalf("oauth server %v printed %q: %v", args, line, err)
	}
	return addr.MCP
}

func probeStop(cmd *exec.Cmd) {
	if cmd.Process == nil || cmd.ProcessState != nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopWait):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// extensionKey makes a manifest "key" and the extension id it yields.
func extensionKey(t *testing.T) (key, id string) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	h := []byte(hex.EncodeToString(sum[:16]))
	for i, b := range h {
		if b >= 'a' {
			h[i] = 'a' + 10 + (b - 'a')
		} else {
			h[i] = 'a' + (b - '0')
		}
	}
	return base64.StdEncoding.EncodeToString(der), string(h)
}

// unpack copies testdata/oauthprobe/NAME into dir, adds the key to the
// manifest and writes config.js.
func unpack(t *testing.T, name, dir, key, control string) string {
	t.Helper()
	src := filepath.Join("testdata", "oauthprobe", name)
	dst := filepath.Join(dir, name)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if key != "" {
		var m map[string]any
		b, _ := os.ReadFile(filepath.Join(dst, "manifest.json"))
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		m["key"] = key
		b, _ = json.MarshalIndent(m, "", "  ")
		os.WriteFile(filepath.Join(dst, "manifest.json"), b, 0o644)
	}
	cfg := fmt.Sprintf("self.PROBE = {control: %q};\n", control)
	if err := os.WriteFile(filepath.Join(dst, "config.js"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// cdpWatcher polls the DevTools target list: it clicks #approve on consent
// pages (like a user) and closes pages whose URL has "close=1" (a user
// giving up), and records every page it saw.
func cdpWatcher(ctx context.Context, t *testing.T, profile string, seen *sync.Map) {
	var port string
	for ctx.Err() == nil {
		b, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort"))
		if err == nil {
			port = strings.SplitN(string(b), "\n", 2)[0]
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	handled := map[string]bool{}
	for ctx.Err() == nil {
		time.Sleep(150 * time.Millisecond)
		resp, err := http.Get("http://127.0.0.1:" + port + "/json/list")
		if err != nil {
			continue
		}
		var targets []struct{ ID, Type, URL, Title, WebSocketDebuggerURL string }
		json.NewDecoder(resp.Body).Decode(&targets)
		resp.Body.Close()
		for _, tg := range targets {
			seen.Store(tg.Type+" "+tg.URL, true)
			if handled[tg.ID] || tg.Type != "page" {
				continue
			}
			switch {
			case strings.Contains(tg.URL, "close=1"):
				handled[tg.ID] = true
				r, err := http.Get("http://127.0.0.1:" + port + "/json/close/" + tg.ID)
				if err == nil {
					r.Body.Close()
				}
				t.Logf("cdp: closed %s", tg.URL)
			case strings.Contains(tg.URL, "/consent") || (strings.Contains(tg.URL, "/authorize") && strings.Contains(tg.Title, "Consent")):
				if err := cdpEval(tg.WebSocketDebuggerURL, "document.getElementById('approve') ? (document.getElementById('approve').click(), 'clicked') : 'not yet'"); err == nil {
					handled[tg.ID] = true
					t.Logf("cdp: clicked Approve on %s", tg.URL)
				}
			}
		}
	}
}

func cdpEval(ws, expr string) error {
	conn, _, err := websocket.DefaultDialer.Dial(ws, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := conn.WriteJSON(map[string]any{"id": 1, "method": "Runtime.evaluate", "params": map[string]any{"expression": expr, "returnByValue": true}}); err != nil {
		return err
	}
	for {
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Result struct{ Value any } `json:"result"`
			} `json:"result"`
		}
		if err := conn.ReadJSON(&msg); err != nil {
			return err
		}
		if msg.ID == 1 {
			if msg.Result.Result.Value != "clicked" {
				return fmt.Errorf("%v", msg.Result.Result.Value)
			}
			return nil
		}
	}
}

func TestOAuthProbe(t *testing.T) {
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	node, mods := tools.Node, tools.Modules

	autoMCP := oauthServer(t, node, mods, "--access-ttl", "2")
	consentMCP := oauthServer(t, node, mods, "--consent", "--access-ttl", "2")
	c := newProbeControl(t)
	key, id := extensionKey(t)

	q := "?response_type=code&redirect_uri={redirect}&state={state}"
	noAbort := map[string]any{"abortOnLoadForNonInteractive": false, "timeoutMsForNonInteractive": 5000}
	basic := []probeItem{
		{Name: "http-127-auto-interactive", URL: c.url + "/auto" + q, Interactive: true, wantIn: "code=probe-code"},
		{Name: "http-127-auto-noninteractive", URL: c.url + "/auto" + q, wantIn: "code=probe-code"},
		{Name: "http-localhost-auto-noninteractive", URL: c.localhostURL + "/auto" + q, wantIn: "code=probe-code"},
		{Name: "http-hop-noninteractive", URL: c.url + "/hop" + q, wantIn: "code=probe-code"},
		{Name: "http-deny-noninteractive", URL: c.url + "/deny" + q, wantIn: "error=access_denied"},
		{Name: "http-page-noninteractive", URL: c.url + "/page" + q, wantErr: "User interaction required"},
		{Name: "http-js-noninteractive-default", URL: c.url + "/js" + q, wantErr: "User interaction required"},
		{Name: "http-js-noninteractive-noabort", URL: c.url + "/js" + q, Options: noAbort, wantIn: "code=probe-code"},
		{Name: "http-page-noninteractive-noabort-timeout", URL: c.url + "/page" + q, Options: map[string]any{"abortOnLoadForNonInteractive": false, "timeoutMsForNonInteractive": 1500}, wantErr: "User interaction required"},
		{Name: "http-js-interactive", URL: c.url + "/js" + q, Interactive: true, wantIn: "code=probe-code"},
		{Name: "https-selfsigned-noninteractive", URL: c.tlsURL + "/auto" + q, wantErr: "could not be loaded"},
		{Name: "mcp-sdk-auto-noninteractive", Kind: "mcp", MCP: autoMCP, ForceExpire: true},
		{Name: "mcp-sdk-auto-interactive", Kind: "mcp", MCP: autoMCP, Interactive: true},
	}
	withCDP := []probeItem{
		{Name: "http-127-auto-noninteractive", URL: c.url + "/auto" + q, wantIn: "code=probe-code"},
		{Name: "https-selfsigned-noninteractive", URL: c.tlsURL + "/auto" + q, wantIn: "code=probe-code"},
		{Name: "https-selfsigned-interactive", URL: c.tlsURL + "/auto" + q, Interactive: true, wantIn: "code=probe-code"},
		{Name: "http-consent-interactive-cdp-click", URL: c.url + "/consent" + q, Interactive: true, wantIn: "code=probe-code"},
		{Name: "http-page-interactive-cdp-close", URL: c.url + "/page" + q + "&close=1", Interactive: true, wantErr: "did not approve"},
		{Name: "mcp-sdk-consent-interactive-cdp-click", Kind: "mcp", MCP: consentMCP, Interactive: true},
	}

	runs := []struct {
		name  string
		extra []string
		plan  []probeItem
	}{
		{"harness-flags", nil, basic},
		{"cdp-ignore-cert-errors", []string{"--remote-debugging-port=0", "--ignore-certificate-errors"}, withCDP},
	}
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			c.mu.Lock()
			c.plan, c.results, c.hello, c.done, c.hits = run.plan, map[string]probeResult{}, nil, make(chan struct{}), map[string]int{}
			c.mu.Unlock()

			dir := t.TempDir()
			profile := filepath.Join(dir, "profile")
			home := filepath.Join(dir, "home")
			os.MkdirAll(profile, 0o700)
			os.MkdirAll(home, 0o700)
			ext := unpack(t, "ext", dir, key, c.url)
			noid := unpack(t, "noidentity", dir, "", c.url)

			cmd := exec.Command(chromiumBin, chromiumFlags(profile, []string{ext, noid}, run.extra...)...)
			cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
				"XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "CHROME_CONFIG_HOME="+filepath.Join(home, ".config"),
				"TMPDIR="+dir) // its singleton directory goes with the test's (see startWorld)
			var logs testbrowser.SyncBuffer
			cmd.Stdout, cmd.Stderr = &logs, &logs
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer probeStop(cmd)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var seen sync.Map
			if strings.Contains(strings.Join(run.extra, " "), "remote-debugging-port") {
				go cdpWatcher(ctx, t, profile, &seen)
			}

			select {
			case <-c.done:
			case <-time.After(120 * time.Second):
				t.Errorf("the probe extension did not finish within 120s; chromium output:\n%s", logs.String())
			}
			cancel()

			c.mu.Lock()
			defer c.mu.Unlock()
			t.Logf("extension: %v (expected id %s)", c.hello, id)
			if got, _ := c.hello["id"].(string); got != id {
				t.Errorf("extension id %q, want %q from the generated key", got, id)
			}
			for _, it := range run.plan {
				r, ok := c.results[it.Name]
				if !ok {
					t.Errorf("%-45s no result", it.Name)
					continue
				}
				t.Logf("%-45s ok=%-5v %5dms url=%s err=%q %s", it.Name, r.OK, r.MS, r.URL, r.Error, r.Detail)
				switch {
				case it.wantErr != "" && (r.OK || !strings.Contains(r.Error, it.wantErr)):
					t.Errorf("%s: want an error with %q, got ok=%v err=%q", it.Name, it.wantErr, r.OK, r.Error)
				case it.wantErr == "" && (!r.OK || !strings.Contains(r.URL, it.wantIn)):
					t.Errorf("%s: want success with %q, got ok=%v url=%q err=%q", it.Name, it.wantIn, r.OK, r.URL, r.Error)
				}
			}
			if r, ok := c.results["no-identity-permission"]; !ok || r.OK {
				t.Errorf("without the identity permission: %+v (want chrome.identity undefined)", r)
			} else {
				t.Logf("without the identity permission: %s", r.Detail)
			}
			t.Logf("auth server hits: %v", c.hits)
			seen.Range(func(k, _ any) bool {
				t.Logf("cdp target seen: %v", k)
				return true
			})
		})
	}
}

//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/npmtools"
)

var resourceMetadataRE = regexp.MustCompile(`resource_metadata="([^"]+)"`)

// TestProxyHTTPPairingBrowser: a person runs `browserbridge pair` on the
// machine whose bridge relays to the proxy, and types the code into the
// proxy's sign-in page for claude.ai (its flow scripted as raw HTTP); the
// token then reaches their real browser through the proxy's /mcp. A code
// works once, a wrong one is refused, and guessing is held back.
func TestProxyHTTPPairingBrowser(t *testing.T) {
	p := startPublicProxy(t)
	w := startRelayedWorld(t, p, p.relay, "alice")
	endpoint := p.url("/mcp")

	// 401 and discovery, as claude.ai starts.
	a := rawMCP(t, endpoint, "", initializeJSON)
	if a.status != http.StatusUnauthorized {
		t.Fatalf("initialize without a token: %d %s, want 401", a.status, a.body)
	}
	m := resourceMetadataRE.FindStringSubmatch(a.header.Get("WWW-Authenticate"))
	if m == nil {
		t.Fatalf("the 401 names no resource metadata: WWW-Authenticate %q", a.header.Get("WWW-Authenticate"))
	}
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	getJSONInto(t, m[1], &prm)
	if prm.Resource != endpoint || !slices.Equal(prm.AuthorizationServers, []string{p.public}) {
		t.Fatalf("resource metadata at %s: %+v, want resource %s and authorization server %s", m[1], prm, endpoint, p.public)
	}
	var as asMeta
	getJSONInto(t, p.url("/.well-known/oauth-authorization-server"), &as)
	if as.Issuer != p.public || as.RegistrationEndpoint != p.url("/oauth/register") || !slices.Contains(as.CodeChallengeMethodsSupported, "S256") {
		t.Fatalf("authorization server metadata: %+v", as)
	}

	// Pairing, registration, PKCE, the code field, consent, tokens.
	code := pair(t, w)
	f := startSignIn(t, p, registerClaude(t, p), endpoint)
	if a := f.typeCode(t, strings.ToLower(code)); a.status != http.StatusOK { // typed as a person might
		t.Fatalf("signing in with the pairing code: %d %s", a.status, clip(htmlText(a.body), 500))
	}
	first := f.exchange(t, f.approve(t))
	if first.Refresh == "" {
		t.Fatal("the token endpoint gave claude.ai no refresh token")
	}
	second := f.refresh(t, first.Refresh)
	if second.Access == first.Access || second.Refresh == "" || second.Refresh == first.Refresh {
		t.Fatalf("the refresh did not rotate the tokens (same access: %v, same refresh: %v)",
			second.Access == first.Access, second.Refresh == first.Refresh)
	}

	// The browser's tools, a page navigated and read back.
	cs := connectBearer(t, w, endpoint, second.Access, "claude-ai", nil)
	c := &client{w: w, cs: cs, name: "claude-ai", remote: true}
	at := &mcpAt{cs: cs, url: endpoint}
	names := strings.Fields(toolNames(t, at))
	for _, want := range append([]string{"list_browsers", "select_browser"}, spec004Tools...) {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list at %s lacks %s: %v", endpoint, want, names)
		}
	}
	tab := c.newTab(t, w.pages.url("index.html"))
	prose := w.pages.url("prose.html")
	c.navigate(t, tab, prose)
	text := testutil.Text(c.call(t, "get_page_text", map[string]any{"tabId": tab}))
	if !strings.Contains(text, "The last paragraph of the prose page.") {
		t.Errorf("get_page_text through the proxy does not have the page's text:\n%s", clip(text, 500))
	}
	tree := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab}))
	if !strings.Contains(tree, "Long paragraphs") {
		t.Errorf("read_page through the proxy lacks the page's heading:\n%s", clip(tree, 500))
	}

	// The same code again, and a wrong one: refused with a sentence.
	g := startSignIn(t, p, registerClaude(t, p), endpoint)
	if a := g.typeCode(t, code); a.status != http.StatusUnauthorized || !strings.Contains(alertOf(a.body), "already used") {
		t.Errorf("the code used a second time: %d %q, want 401 saying it was already used", a.status, alertOf(a.body))
	}
	if a := g.typeCode(t, "ZZZZ-ZZZZ-ZZZZ-ZZZZ"); a.status != http.StatusUnauthorized || !strings.Contains(alertOf(a.body), "not known") {
		t.Errorf("a wrong code: %d %q, want 401 saying it is not known", a.status, alertOf(a.body))
	}

	// The rotated refresh token, from another client, is refused and ends
	// the sign-in. (From its own client within seconds of the rotation it
	// would get the same new pair: the reuse grace, which the authserver
	// and gatewayserver tests hold on their own clocks.)
	if status, body := g.tokenRequest(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.Refresh}, "resource": {endpoint}}); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("the rotated refresh token from another client: %d %v, want 400 invalid_grant", status, body)
	}
	if status, body := f.tokenRequest(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {second.Refresh}, "resource": {endpoint}}); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("the newest refresh token after a reuse: %d %v, want 400 invalid_grant", status, body)
	}

	// Guessing from one address: the pairing codes' own limit first (a
	// right code is refused too while it holds), then the sign-in's 429.
	var pairingLimited, tooMany int
	var fresh string
	for i := 1; i <= 40 && tooMany == 0; i++ {
		if (i-1)%4 == 0 { // a sign-in allows 5 attempts; open a new one before
			g = startSignIn(t, p, registerClaude(t, p), endpoint)
		}
		guess := "ZZZZ-ZZZZ-ZZZZ-" + strings.ToUpper(randomHex(t, 2))
		if pairingLimited > 0 && fresh == "" {
			fresh = pair(t, w)
			guess = fresh
		}
		a := g.typeCode(t, guess)
		msg := alertOf(a.body)
		switch {
		case strings.Contains(msg, "Too many pairing codes tried from your network"):
			// The pairing codes' own limit: a 429 to wait out, not a
			// wrong code.
			if pairingLimited == 0 {
				pairingLimited = i
			}
			if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
				t.Errorf("the pairing limit answered %d with Retry-After %q, want 429 with one", a.status, a.header.Get("Retry-After"))
			}
		case a.status == http.StatusTooManyRequests:
			tooMany = i
			if a.header.Get("Retry-After") == "" || !strings.Contains(msg, "Wait a minute") {
				t.Errorf("the 429 after %d guesses: Retry-After %q, sentence %q", i, a.header.Get("Retry-After"), msg)
			}
		case guess == fresh:
			t.Fatalf("a right code during the pairing limit: %d %q, want refused by the limit", a.status, msg)
		case pairingLimited > 0:
			t.Fatalf("guess %d after the pairing limit held: %d %q, want still limited", i, a.status, msg)
		case a.status != http.StatusUnauthorized || !strings.Contains(msg, "not known"):
			t.Fatalf("guess %d: %d %q, want 401 not known", i, a.status, msg)
		}
	}
	if pairingLimited == 0 || tooMany == 0 || tooMany < pairingLimited {
		t.Fatalf("guessing: the pairing limit held from guess %d, the sign-in's own 429 from guess %d; want both, the pairing limit first", pairingLimited, tooMany)
	}
	t.Logf("guessing (after 3 attempts): the pairing limit from guess %d, 429 from guess %d", pairingLimited, tooMany)

	noSecretsIn(t, p.out.String(), map[string]string{"pairing code": code, "access token": second.Access,
		"refresh token": second.Refresh, "fresh pairing code": fresh})
}

func getJSONInto(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// noSecretsIn fails the test when any of secrets appears in log.
func noSecretsIn(t *testing.T, log string, secrets map[string]string) {
	t.Helper()
	for what, s := range secrets {
		if s != "" && strings.Contains(log, s) {
			t.Errorf("the %s appears in the proxy's log", what)
		}
	}
}

// extensionIDs are the proxy's ids of the world's relay connections: its
// browser's and its servers'.
func extensionIDs(t *testing.T, w *world) (browser string, servers map[string]string) {
	t.Helper()
	st, err := w.status()
	if err != nil {
		t.Fatal(err)
	}
	servers = map[string]string{}
	for _, r := range st.Relay {
		browser = r.ExtensionID
	}
	for _, r := range st.RelayServers {
		servers[r.Server] = r.ExtensionID
	}
	if browser == "" {
		t.Fatalf("the world's relay has no extension id: %s", relayJSON(st.Relay))
	}
	return browser, servers
}

// TestProxyHTTPUsersApart: two people, each with their own bridge and
// browser relaying to one proxy, each paired. Bob's tokens reach only his
// own browser; Alice's browser, server and sessions answer him as if they
// did not exist; a pairing code signs in as the person whose bridge asked
// for it, whatever the form says.
func TestProxyHTTPUsersApart(t *testing.T) {
	p := startPublicProxy(t)
	alice := startRelayedWorld(t, p, p.relay, "alice")
	addEverything(t, alice)
	bob := startRelayedWorld(t, p, p.relay, "bob")
	stopTogether(t, alice, bob)
	aliceBrowser, aliceServers := extensionIDs(t, alice)
	bobBrowser, _ := extensionIDs(t, bob)
	mcpURL, everythingURL := p.url("/mcp"), p.url("/servers/"+gatewayServer+"/mcp")

	// Each sees their own browser at /mcp.
	_, aliceTok := signInWithCode(t, p, mcpURL, pair(t, alice))
	_, bobTok := signInWithCode(t, p, mcpURL, pair(t, bob))
	aliceCS := connectBearer(t, alice, mcpURL, aliceTok.Access, "alice-client", nil)
	bobCS := connectBearer(t, bob, mcpURL, bobTok.Access, "bob-client", nil)
	listed := func(c *client) string { return testutil.Text(c.call(t, "list_browsers", nil)) }
	if got := listed(&client{w: bob, cs: bobCS, name: "bob"}); !strings.Contains(got, bobBrowser) || strings.Contains(got, aliceBrowser) {
		t.Errorf("bob's list_browsers shows %q; want his browser %s only", got, bobBrowser)
	}
	if got := listed(&client{w: alice, cs: aliceCS, name: "alice"}); !strings.Contains(got, aliceBrowser) || strings.Contains(got, bobBrowser) {
		t.Errorf("alice's list_browsers shows %q; want her browser %s only", got, aliceBrowser)
	}
	// Bob cannot pick Alice's browser from his session.
	res, err := bobCS.CallTool(testutil.Context(t, callWait), &mcp.CallToolParams{Name: "select_browser", Arguments: map[string]any{"browser": aliceBrowser}})
	if err == nil && !res.IsError {
		t.Errorf("bob selected alice's browser: %s", testutil.Text(res))
	}

	// Alice's session id, sent with Bob's token: no such session.
	req := func(endpoint, token, session string) httpAnswer {
		r, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("MCP-Protocol-Version", "2025-11-25")
		r.Header.Set("Authorization", "Bearer "+token)
		if session != "" {
			r.Header.Set("Mcp-Session-Id", session)
		}
		return doHTTP(t, http.DefaultClient, r)
	}
	if a := req(mcpURL, bobTok.Access, aliceCS.ID()); a.status != http.StatusNotFound || !strings.Contains(a.body, "session not found") {
		t.Errorf("alice's session id with bob's token: %d %s, want 404 session not found", a.status, a.body)
	}

	// Alice's browser and server by name, with tokens Bob got for them:
	// 404, in the same words as for names nobody has.
	leaks := func(what string, a httpAnswer) {
		t.Helper()
		for _, secret := range []string{"alice", aliceServers[gatewayServer]} {
			if secret != "" && strings.Contains(a.body, secret) {
				t.Errorf("%s: the answer names %q: %s", what, secret, a.body)
			}
		}
	}
	for _, c := range []struct{ name, theirs, nobodys string }{
		{"alice's browser", "/browsers/" + aliceBrowser + "/mcp", "/browsers/ext-00000000-0000-0000-0000-000000000000/mcp"},
		{"alice's server", "/servers/" + gatewayServer + "/mcp", "/servers/nobodys/mcp"},
	} {
		_, theirsTok := signInWithCode(t, p, p.url(c.theirs), pair(t, bob))
		_, nobodysTok := signInWithCode(t, p, p.url(c.nobodys), pair(t, bob))
		theirs := rawMCP(t, p.url(c.theirs), theirsTok.Access, initializeJSON)
		nobodys := rawMCP(t, p.url(c.nobodys), nobodysTok.Access, initializeJSON)
		if theirs.status != http.StatusNotFound || nobodys.status != http.StatusNotFound {
			t.Errorf("%s with bob's token: %d %s; a name nobody has: %d %s; want 404 both", c.name, theirs.status, theirs.body, nobodys.status, nobodys.body)
		}
		strip := func(s, path string) string {
			return strings.ReplaceAll(strings.ReplaceAll(s, aliceBrowser, "ID"), strings.Split(path, "/")[2], "ID")
		}
		if strip(theirs.body, c.theirs) != strip(nobodys.body, c.nobodys) {
			t.Errorf("%s answers bob %q, a name nobody has %q: they must say the same", c.name, theirs.body, nobodys.body)
		}
		leaks(c.name, theirs)
		t.Logf("%s with bob's token: %d %s", c.name, theirs.status, strings.TrimSpace(theirs.body))
		// Bob's token for /mcp is refused at Alice's server's URL, where it was not issued.
		if a := rawMCP(t, p.url(c.theirs), bobTok.Access, initializeJSON); a.status != http.StatusUnauthorized || !strings.Contains(a.header.Get("WWW-Authenticate"), "invalid_token") {
			t.Errorf("bob's /mcp token at %s: %d %q, want 401 invalid_token", c.theirs, a.status, a.header.Get("WWW-Authenticate"))
		}
	}
	// Alice's own token for her server works, so the 404s above were about Bob.
	_, aliceSrvTok := signInWithCode(t, p, everythingURL, pair(t, alice))
	if a := rawMCP(t, everythingURL, aliceSrvTok.Access, initializeJSON); a.status != http.StatusOK {
		t.Fatalf("alice's initialize at her server: %d %s", a.status, a.body)
	}

	// A code of Alice's typed in a sign-in Bob opened signs in as Alice:
	// the code is bound to its creator, and nothing in the form picks a
	// user (extra fields naming bob change nothing).
	aliceCode := pair(t, alice)
	f := startSignIn(t, p, registerClaude(t, p), mcpURL)
	if a := f.submit(t, "/oauth/signin", url.Values{"code": {aliceCode}, "user": {"bob"}, "subject": {"pair:bob"}, "user_id": {"bob"}}); a.status != http.StatusOK {
		t.Fatalf("signing in with alice's code: %d %s", a.status, htmlText(a.body))
	}
	asAlice := f.exchange(t, f.approve(t))
	cs := connectBearer(t, bob, mcpURL, asAlice.Access, "bob-with-alices-code", nil)
	if got := listed(&client{w: bob, cs: cs, name: "x"}); !strings.Contains(got, aliceBrowser) || strings.Contains(got, bobBrowser) {
		t.Errorf("a token from alice's code lists %q; want alice's browser %s (the code's creator)", got, aliceBrowser)
	}
}

// TestProxyHTTPLocalServer: server-everything, a stdio server of the
// bridge's gateway, called through the proxy with a paired token: echo,
// progress of a long operation, and a sampling request answered by the
// remote client.
func TestProxyHTTPLocalServer(t *testing.T) {
	p := startPublicProxy(t)
	w := startRelayedWorld(t, p, p.relay, "alice")
	addEverything(t, w)
	endpoint := p.url("/servers/" + gatewayServer + "/mcp")
	_, tok := signInWithCode(t, p, endpoint, pair(t, w))

	var (
		mu       sync.Mutex
		progress []*mcp.ProgressNotificationParams
		prompts  []string
	)
	cs := connectBearer(t, w, endpoint, tok.Access, "claude-ai", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params)
			mu.Unlock()
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			mu.Lock()
			for _, m := range r.Params.Messages {
				if tc, ok := m.Content.(*mcp.TextContent); ok {
					prompts = append(prompts, tc.Text)
				}
			}
			mu.Unlock()
			return &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: "sampled through the proxy"}, Model: "e2e-model", Role: "assistant"}, nil
		},
	})
	at := &mcpAt{cs: cs, url: endpoint}
	names := strings.Fields(toolNames(t, at))
	for _, want := range []string{"echo", "trigger-long-running-operation", "trigger-sampling-request"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list at %s lacks %s: %v", endpoint, want, names)
		}
	}
	if got := testutil.Text(callOK(t, at, "echo", map[string]any{"message": "héllo proxy"})); got != "Echo: héllo proxy" {
		t.Errorf("echo through the proxy answered %q", got)
	}

	params := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 1.5, "steps": 3}}
	params.SetProgressToken("e2e-progress")
	res, err := cs.CallTool(testutil.Context(t, callWait), params)
	if err != nil || res.IsError {
		t.Fatalf("trigger-long-running-operation: %v %s", err, describeResult(res))
	}
	testutil.WaitWithin(t, callWait, "", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) >= 3, fmt.Sprintf("%d progress notifications", len(progress))
	})
	mu.Lock()
	for i, pr := range progress {
		if pr.ProgressToken != "e2e-progress" || pr.Progress != float64(i+1) || pr.Total != 3 {
			t.Errorf("progress %d: token %v, %v of %v; want e2e-progress, %d of 3", i, pr.ProgressToken, pr.Progress, pr.Total, i+1)
		}
	}
	mu.Unlock()

	out := testutil.Text(callOK(t, at, "trigger-sampling-request", map[string]any{"prompt": "a remote prompt", "maxTokens": 20}))
	if !strings.Contains(out, "sampled through the proxy") {
		t.Errorf("the sampling tool's result lacks the client's answer: %s", clip(out, 400))
	}
	mu.Lock()
	if len(prompts) != 1 || !strings.Contains(prompts[0], "a remote prompt") {
		t.Errorf("the client was asked to sample %q; want one request with the prompt", prompts)
	}
	mu.Unlock()

	// The aggregate: every server of the bridge in one connector, its
	// tools named {server}_{tool}, a resource (and a sign-in) of its own.
	allURL := p.url("/servers/all/mcp")
	_, allTok := signInWithCode(t, p, allURL, pair(t, w))
	all := &mcpAt{cs: connectBearer(t, w, allURL, allTok.Access, "claude-ai", nil), url: allURL}
	if names := strings.Fields(toolNames(t, all)); !slices.Contains(names, gatewayServer+"_echo") {
		t.Fatalf("tools/list at %s lacks %s_echo: %v", allURL, gatewayServer, names)
	}
	if got := testutil.Text(callOK(t, all, gatewayServer+"_echo", map[string]any{"message": "all of them"})); got != "Echo: all of them" {
		t.Errorf("echo through the proxy's aggregate answered %q", got)
	}
}

func describeResult(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	return testutil.Text(res)
}

// TestProxyHTTPRelayDrop: the network between Alice's bridge and the
// proxy breaks while a slow call of hers runs at her server through the
// proxy: the call ends with a JSON-RPC error saying so; Bob's call beside it
// is untouched and gets nothing of hers; once the bridge is back, her
// calls work again.
func TestProxyHTTPRelayDrop(t *testing.T) {
	p := startPublicProxy(t)
	cut := startCutter(t, strings.TrimPrefix(p.relay, "ws://"))
	alice := startRelayedWorld(t, p, "ws://"+cut.addr(), "alice")
	addEverything(t, alice)
	bob := startRelayedWorld(t, p, p.relay, "bob")
	stopTogether(t, alice, bob)
	addEverything(t, bob)
	endpoint := p.url("/servers/" + gatewayServer + "/mcp")
	_, aliceTok := signInWithCode(t, p, endpoint, pair(t, alice))
	_, bobTok := signInWithCode(t, p, endpoint, pair(t, bob))

	type seen struct {
		mu     sync.Mutex
		tokens []any
	}
	handler := func(s *seen) *mcp.ClientOptions {
		return &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			s.mu.Lock()
			s.tokens = append(s.tokens, r.Params.ProgressToken)
			s.mu.Unlock()
		}}
	}
	var aliceSeen, bobSeen seen
	aliceCS := connectBearer(t, alice, endpoint, aliceTok.Access, "alice", handler(&aliceSeen))
	bobCS := connectBearer(t, bob, endpoint, bobTok.Access, "bob", handler(&bobSeen))

	slow := func(cs *mcp.ClientSession, token string, seconds int) chan error {
		done := make(chan error, 1)
		go func() {
			params := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": seconds, "steps": seconds * 2}}
			params.SetProgressToken(token)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := cs.CallTool(ctx, params)
			if err == nil && res.IsError {
				err = fmt.Errorf("isError: %s", testutil.Text(res))
			}
			done <- err
		}()
		return done
	}
	count := func(s *seen) int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.tokens) }
	aliceDone := slow(aliceCS, "alice-slow", 120)
	bobDone := slow(bobCS, "bob-slow", 4)
	// Both calls are running at the servers once their progress arrives.
	testutil.WaitWithin(t, callWait, "", func() (bool, string) {
		return count(&aliceSeen) > 0 && count(&bobSeen) > 0, fmt.Sprintf("progress: alice %d, bob %d", count(&aliceSeen), count(&bobSeen))
	})
	cut.cut()
	select {
	case err := <-aliceDone:
		var rpcErr *jsonrpc.Error
		switch {
		case err == nil:
			t.Fatal("alice's slow call succeeded though her bridge's relay dropped")
		case !errors.As(err, &rpcErr) || rpcErr.Code != -32005 || !strings.Contains(rpcErr.Message, "disconnected"):
			t.Errorf("alice's call ended with %v; want JSON-RPC -32005 saying the extension disconnected", err)
		}
		t.Logf("alice's call ended: %v", err)
	case <-time.After(callWait):
		t.Fatalf("alice's call did not end within %v of the relay's drop", callWait)
	}
	if err := <-bobDone; err != nil {
		t.Errorf("bob's call beside the drop: %v", err)
	}
	bobSeen.mu.Lock()
	for _, tok := range bobSeen.tokens {
		if tok != "bob-slow" {
			t.Errorf("bob's client got progress for %v", tok)
		}
	}
	bobSeen.mu.Unlock()
	if got := testutil.Text(callOK(t, &mcpAt{cs: bobCS, url: endpoint}, "echo", map[string]any{"message": "bob after"})); got != "Echo: bob after" {
		t.Errorf("bob's echo after alice's drop: %q", got)
	}

	// The bridge comes back through the forwarder; Alice's calls work again.
	testutil.WaitWithin(t, relayWait, "", func() (bool, string) {
		st, err := alice.status()
		if err != nil {
			return false, err.Error()
		}
		for _, r := range st.RelayServers {
			if r.Server == gatewayServer && r.State == relay.StateConnected && r.Attempt == 0 {
				return true, ""
			}
		}
		return false, relayJSON(st.RelayServers)
	})
	var again *mcp.ClientSession
	testutil.WaitWithin(t, relayWait, "", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), callWait)
		defer cancel()
		res, err := aliceCS.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "back"}})
		if err == nil && !res.IsError && testutil.Text(res) == "Echo: back" {
			again = aliceCS
			return true, ""
		}
		return false, fmt.Sprintf("echo in the old session: %v %s", err, describeResult(res))
	})
	if again == nil {
		t.Fatal("no echo after the relay came back")
	}
	aliceSeen.mu.Lock()
	for _, tok := range aliceSeen.tokens {
		if tok != "alice-slow" {
			t.Errorf("alice's client got progress for %v", tok)
		}
	}
	aliceSeen.mu.Unlock()
}

// TestProxyHTTPConformance runs the official MCP conformance server suite
// (--suite all) against the proxy's route for server-everything and, in
// the same test, against the bridge's own gateway route for it: every
// check that passes locally must pass through the proxy.
func TestProxyHTTPConformance(t *testing.T) {
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	suite, err := tools.Module("@modelcontextprotocol", "conformance", "dist", "index.js")
	if err != nil {
		t.Fatal(err)
	}
	p := startPublicProxy(t)
	w := startRelayedWorld(t, p, p.relay, "alice")
	addEverything(t, w)
	endpoint := p.url("/servers/" + gatewayServer + "/mcp")
	_, tok := signInWithCode(t, p, endpoint, pair(t, w))

	// The suite's client cannot sign in (it has no OAuth, nor a header
	// option): this reverse proxy adds the bearer token a signed-in client
	// would send. It also stands in for the proxy's own host: the suite's
	// Host and Origin name the front, and become the proxy's (other Origins
	// pass as they are, so that the DNS-rebinding check still means
	// something).
	target, _ := url.Parse(p.public)
	var frontOrigin string
	front := httptest.NewUnstartedServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Set("Authorization", "Bearer "+tok.Access)
			if o := r.In.Header.Get("Origin"); o == frontOrigin {
				r.Out.Header.Set("Origin", p.public)
			}
		},
		FlushInterval: -1, // SSE as it comes
	})
	frontOrigin = "http://" + front.Listener.Addr().String() // before it serves: no race
	front.Start()
	t.Cleanup(front.Close)

	local := strings.TrimSuffix(w.mcpURL, "/mcp") + "/servers/" + gatewayServer + "/mcp"
	run := func(name, u string) map[string]string {
		results := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, tools.Node, suite, "server", "--suite", "all", "--url", u, "--output-dir", results)
		home := t.TempDir()
		cmd.Dir, cmd.Env, cmd.WaitDelay = home, append(os.Environ(), "HOME="+home, "NO_COLOR=1"), 5*time.Second
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("the conformance suite against %s (%s) timed out:\n%s", name, u, tail(string(out), 60))
		}
		checks := conformanceChecks(t, results)
		if len(checks) == 0 {
			t.Fatalf("the conformance suite against %s (%s) wrote no results (%v):\n%s", name, u, err, tail(string(out), 60))
		}
		return checks
	}
	direct := run("the bridge's gateway route", local)
	proxied := run("the proxy", front.URL+"/servers/"+gatewayServer+"/mcp")

	// Checks that differ by design, with why.
	byDesign := map[string]string{
		// The check is for unauthenticated localhost servers (its own scope
		// says so). The proxy's MCP routes take any Origin, with CORS: their
		// only credential is a bearer token, which a rebinding page does not
		// have; the front here adds it to every request, the check's too.
		"dns-rebinding-protection/localhost-host-rebinding-rejected": "any Origin with a bearer token",
	}
	var worse []string
	passed := 0
	for id, st := range direct {
		if st != "SUCCESS" {
			continue
		}
		passed++
		if why, ok := byDesign[id]; ok {
			t.Logf("%s: %s through the proxy, by design (%s)", id, orNone(proxied[id]), why)
			continue
		}
		if proxied[id] != "SUCCESS" {
			worse = append(worse, fmt.Sprintf("%s: %s through the proxy", id, orNone(proxied[id])))
		}
	}
	slices.Sort(worse)
	if len(worse) > 0 {
		t.Errorf("checks that pass on the bridge's gateway route but not through the proxy:\n%s", strings.Join(worse, "\n"))
	}
	if passed < 10 {
		t.Errorf("only %d checks passed on the bridge's gateway route: the suite did not really run", passed)
	}
	t.Logf("conformance: %d of %d checks passed on the gateway route, %d of them failed through the proxy", passed, len(direct), len(worse))
}

func orNone(s string) string {
	if s == "" {
		return "missing"
	}
	return s
}

// conformanceChecks reads the suite's <results>/server-<scenario>-<time>/
// checks.json into "scenario/check-id" -> the worst status of that check.
func conformanceChecks(t *testing.T, results string) map[string]string {
	t.Helper()
	dirName := regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$`)
	rank := map[string]int{"SUCCESS": 1, "INFO": 0, "WARNING": 2, "FAILURE": 3}
	files, _ := filepath.Glob(filepath.Join(results, "*", "checks.json"))
	out := map[string]string{}
	for _, f := range files {
		m := dirName.FindStringSubmatch(filepath.Base(filepath.Dir(f)))
		if m == nil {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(data, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range checks {
			if c.Status == "INFO" {
				continue
			}
			key := m[1] + "/" + c.ID
			if old, ok := out[key]; !ok || rank[c.Status] > rank[old] {
				out[key] = c.Status
			}
		}
	}
	return out
}

// TestProxyHTTPTypeScriptAndGoSDKOAuth: the official SDK clients with
// their own OAuth support, each signed in by a person who types a pairing
// code into the proxy's sign-in page in Chromium: the TypeScript SDK at
// the proxy's route for server-everything (echo, then a refresh after its
// token is spoiled), the Go SDK's AuthorizationCodeHandler at /mcp (the
// browser's tools, then a refresh after its token expires).
func TestProxyHTTPTypeScriptAndGoSDKOAuth(t *testing.T) {
	p := startPublicProxy(t)
	w := startRelayedWorld(t, p, p.relay, "alice")
	addEverything(t, w)
	browser := startSignInBrowser(t)

	t.Run("TypeScript", func(t *testing.T) {
		endpoint := p.url("/servers/" + gatewayServer + "/mcp")
		done := tsSignInAndRefresh(t, endpoint, p.public, func(authURL string) {
			u, err := url.Parse(authURL)
			if err != nil {
				t.Fatal(err)
			}
			if q := u.Query(); q.Get("resource") != endpoint || q.Get("code_challenge_method") != "S256" {
				t.Errorf("the TypeScript SDK's authorization URL asks resource %q, PKCE %q; want %s, S256", q.Get("resource"), q.Get("code_challenge_method"), endpoint)
			}
			if err := signInWithPairing(browser, authURL, pair(t, w)); err != nil {
				t.Fatal(err)
			}
		})
		secrets := map[string]string{}
		for i, tok := range append(done.Access, done.Refresh...) {
			secrets[fmt.Sprintf("token #%d", i+1)] = tok
		}
		noSecretsIn(t, p.out.String(), secrets)
	})

	t.Run("Go", func(t *testing.T) {
		endpoint := p.url("/mcp")
		catcher := testutil.StartRedirectCatcher(t)
		var (
			mu       sync.Mutex
			authURLs []string
		)
		fetch := caughtCode(catcher, func(authURL string) error {
			mu.Lock()
			authURLs = append(authURLs, authURL)
			mu.Unlock()
			out, code := w.cli("pair")
			if code != 0 {
				return fmt.Errorf("browserbridge pair: exit %d: %s", code, out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			m := pairLine.FindStringSubmatch(strings.TrimSpace(lines[len(lines)-1]))
			if m == nil {
				return fmt.Errorf("browserbridge pair printed no code: %s", out)
			}
			return signInWithPairing(browser, authURL, m[1])
		}, nil)
		tokens := &refreshingSource{}
		handler := sdkOAuthHandler(t, catcher.URL, "Browser Bridge e2e (Go SDK, proxy)", fetch, tokens)
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e-go-oauth-proxy", Version: "1.0"}, nil)
		cs, err := client.Connect(testutil.Context(t, 2*time.Minute), &mcp.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: handler}, nil)
		if err != nil {
			t.Fatalf("the Go SDK client did not connect to %s: %v", endpoint, err)
		}
		defer cs.Close()
		at := &mcpAt{cs: cs, url: endpoint}
		if names := " " + toolNames(t, at) + " "; !strings.Contains(names, " list_browsers ") || !strings.Contains(names, " navigate ") {
			t.Fatalf("tools/list at %s for the Go SDK lacks list_browsers or navigate: [%s]", endpoint, names)
		}
		browserID, _ := extensionIDs(t, w)
		if got := testutil.Text(callOK(t, at, "list_browsers", nil)); !strings.Contains(got, browserID) {
			t.Errorf("list_browsers for the Go SDK: %q, want the browser %s", got, browserID)
		}
		tokens.expire(t)
		if got := testutil.Text(callOK(t, at, "list_browsers", nil)); !strings.Contains(got, browserID) {
			t.Errorf("list_browsers after the refresh: %q", got)
		}
		seen := tokens.all()
		switch {
		case len(seen) != 2:
			t.Fatalf("the Go SDK client used %d tokens; want the first and one refreshed", len(seen))
		case seen[1].AccessToken == seen[0].AccessToken || seen[0].RefreshToken == "" || seen[1].RefreshToken == seen[0].RefreshToken:
			t.Errorf("the refresh did not rotate the tokens")
		}
		mu.Lock()
		if len(authURLs) != 1 {
			t.Errorf("the Go SDK sent the person to sign in %d times; want once", len(authURLs))
		}
		mu.Unlock()
	})
}

// TestProxyHTTPRemoteClientAcrossRestart (issue 31, items 1 and 2): a
// remote client through the proxy's HTTP endpoint is named in the browser
// by its own clientInfo (not "relay"), marked remote, and keeps its tab
// when the bridge restarts (`browserbridge restart`), as local sessions do.
func TestProxyHTTPRemoteClientAcrossRestart(t *testing.T) {
	p := startPublicProxy(t)
	rw := startRestartableRelayedWorld(t, p, "alice")
	endpoint := p.url("/mcp")
	_, tok := signInWithCode(t, p, endpoint, pair(t, rw.world))
	const name = "e2e-claude-ai"
	c := &client{w: rw.world, cs: connectBearer(t, rw.world, endpoint, tok.Access, name, nil), name: name, remote: true}
	page := rw.pages.url("index.html")
	c.call(t, "navigate", map[string]any{"url": page})
	before := c.tabs(t, "tabs_context_mcp")
	if len(before) != 1 || before[0].GroupID < 0 {
		t.Fatalf("tabs_context_mcp of the remote client: %+v, want its one grouped tab", before)
	}
	if got := rw.sessionOfTab(t, before[0].TabID); !before[0].InThisSession || got != name {
		t.Errorf("the remote client's tab belongs to session %q (in this session: %v), want its clientInfo name %q", got, before[0].InThisSession, name)
	}

	rw.restartBridge(t)
	waitRelayConnected(t, rw.world, "alice")
	var after []tabInfo
	testutil.WaitWithin(t, relayWait, "", func() (bool, string) {
		tabs, err := tryTabs(c, "tabs_context_mcp")
		after = tabs
		return err == nil, fmt.Sprintf("tabs_context_mcp: %v", err)
	})
	if len(after) != 1 || after[0].TabID != before[0].TabID || after[0].GroupID != before[0].GroupID || !after[0].InThisSession {
		t.Fatalf("after the restart the remote client's tabs are %+v; before: %+v", after, before)
	}
	if got := rw.sessionOfTab(t, after[0].TabID); got != name {
		t.Errorf("after the restart the remote client's tab belongs to session %q, want %q", got, name)
	}
	if got := readPageText(c.call(t, "get_page_text", nil)); got.url != page {
		t.Errorf("after the restart get_page_text read %q, not the client's page %s", got.url, page)
	}
}

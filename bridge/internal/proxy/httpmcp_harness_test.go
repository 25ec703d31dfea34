package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// testPassword signs in as "password:owner", which the HTTP test proxies
// map to the user "alice".
const testPassword = "correct horse battery staple"

// newHTTPTestProxy is newTestProxy with the Streamable HTTP side on: the
// public URL is the test server's own http://127.0.0.1:PORT, where the
// authorization server signs people in with testPassword (as alice) or a
// pairing code.
func newHTTPTestProxy(tb testing.TB, opts Options, tweak func(*HTTPOptions)) *testProxy {
	tb.Helper()
	return newHTTPTestProxyOn(tb, httptest.NewUnstartedServer(nil), opts, tweak)
}

// newHTTPTestProxyOn is newHTTPTestProxy serving on hs (unstarted): a
// proxy started again on the address of one that stopped.
func newHTTPTestProxyOn(tb testing.TB, hs *httptest.Server, opts Options, tweak func(*HTTPOptions)) *testProxy {
	tb.Helper()
	keys, err := token.NewHS256([]byte(testSecret))
	if err != nil {
		tb.Fatal(err)
	}
	if opts.Keys == nil {
		opts.Keys = keys
	}
	ho := &HTTPOptions{
		PublicURL: "http://" + hs.Listener.Addr().String(),
		Identity:  authserver.IdentityConfig{Password: testPassword},
		Users:     map[string]string{"password:owner": "alice"},
	}
	if tweak != nil {
		tweak(ho)
	}
	opts.HTTP = ho
	srv, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tp := &testProxy{srv: srv, hs: hs, keys: opts.Keys}
	hs.Config.Handler = srv.Handler()
	hs.Config.ErrorLog = log.New(panicWatch{&tp.panicked}, "", 0)
	hs.Start()
	tp.url = "ws" + strings.TrimPrefix(hs.URL, "http")
	tb.Cleanup(func() {
		if tp.panicked.Load() {
			tb.Errorf("a handler panicked")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		hs.Close()
	})
	return tp
}

func (tp *testProxy) public() string {
	if tp.pub != "" {
		return tp.pub
	}
	return tp.hs.URL
}

// browserPerson is someone at one web browser on the proxy's sign-in and
// consent pages, typing secret into field ("password", or "code" for a
// pairing code); the browser's cookie jar keeps their sign-in across the
// approvals they make with it, as a person's browser does.
func browserPerson(field, secret string) testutil.Person {
	jar, _ := cookiejar.New(nil)
	return testutil.Person{Field: field, Secret: secret, Client: &http.Client{Jar: jar, Timeout: time.Minute}}
}

// passwordPerson signs in with testPassword, as alice.
func passwordPerson() testutil.Person { return browserPerson("password", testPassword) }

// pairedPerson signs in with a fresh pairing code of ext, as its user.
func pairedPerson(tb testing.TB, ext *tclient) testutil.Person {
	tb.Helper()
	return browserPerson("code", pairingCode(tb, ext))
}

var hiddenField = regexp.MustCompile(`name="(request|csrf)" value="([^"]*)"`)

// formFields is the hidden fields of a page's forms, for the tests that
// take the sign-in a step at a time (fromaddr_test.go).
func formFields(page string) url.Values {
	f := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page, -1) {
		f.Set(m[1], m[2])
	}
	return f
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// redirectURI is the test app's loopback redirect URI: the person's
// browser stops at it, so nothing listens there.
const redirectURI = "http://127.0.0.1:9/callback"

// The eras the Go SDK client is driven in: its default, the stateless
// 2026-07-28 (server/discover, subscriptions/listen), and a session of the
// latest version before it.
const (
	eraStateless = ""
	eraSession   = "2025-11-25"
)

// sdkClient connects the official Go SDK client to endpoint in the era
// (a protocol version, "" for the SDK's default), signing in with its own
// OAuth support (discovery from the 401, dynamic registration, PKCE)
// while p does the person's part.
func sdkClient(tb testing.TB, endpoint, era string, p testutil.Person, opts *mcp.ClientOptions) *mcp.ClientSession {
	tb.Helper()
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{redirectURI}, ClientName: "proxy test (Go SDK)", TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		}},
		AuthorizationCodeFetcher: testutil.CodeFetcher(func(_ context.Context, authURL string) (url.Values, error) {
			back, err := p.Redirect(authURL)
			if err != nil {
				return nil, err
			}
			return back.Query(), nil
		}),
	})
	if err != nil {
		tb.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "proxy-test", Version: "1"}, opts)
	ctx := testutil.Context(tb, time.Minute)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: handler}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		tb.Fatalf("connecting the Go SDK client to %s: %v", endpoint, err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

// accessToken gets a token for resource the way a client does by hand
// (register, authorize with PKCE, code for token) at the authorization
// server of the resource's origin, while p does the person's part.
func accessToken(tb testing.TB, p testutil.Person, resource string) string {
	tb.Helper()
	u, err := url.Parse(resource)
	if err != nil {
		tb.Fatal(err)
	}
	base := u.Scheme + "://" + u.Host
	reg, _ := json.Marshal(map[string]any{"redirect_uris": []string{redirectURI}, "client_name": "proxy test (by hand)",
		"token_endpoint_auth_method": "none"})
	resp, err := http.Post(base+"/oauth/register", "application/json", strings.NewReader(string(reg)))
	if err != nil {
		tb.Fatal(err)
	}
	var client struct {
		ClientID string `json:"client_id"`
	}
	if err := json.Unmarshal([]byte(readAll(resp)), &client); err != nil || client.ClientID == "" {
		tb.Fatalf("registering: %d %v", resp.StatusCode, err)
	}
	verifier := "a-verifier-long-enough-for-rfc-7636-" + strings.Repeat("x", 20)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {client.ClientID}, "redirect_uri": {redirectURI},
		"state": {"s1"}, "scope": {"mcp"}, "resource": {resource},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	back, err := p.Redirect(base + "/oauth/authorize?" + q.Encode())
	if err != nil {
		tb.Fatalf("signing in for %s: %v", resource, err)
	}
	got := back.Query()
	resp, err = http.PostForm(base+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {got.Get("code")},
		"code_verifier": {verifier}, "redirect_uri": {redirectURI}, "client_id": {client.ClientID}, "resource": {resource}})
	if err != nil {
		tb.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	body := readAll(resp)
	if json.Unmarshal([]byte(body), &tok) != nil || tok.AccessToken == "" {
		tb.Fatalf("token: %d %s", resp.StatusCode, body)
	}
	return tok.AccessToken
}

// pairingCode asks the proxy for a pairing code over ext's relay link, as
// `browserbridge pair` does.
func pairingCode(tb testing.TB, ext *tclient) string {
	tb.Helper()
	r := ext.call("pair-1", relaywire.MethodPairingCode, map[string]any{})
	var res relaywire.PairingCodeResult
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.Code == "" {
		tb.Fatalf("pairing_code: %s %s", r.Result, r.Error)
	}
	return res.Code
}

// fakeBrowser stands for a browser reached through a bridge's relay: the
// extension side of the proxy sees exactly what a relay client sends (it
// lists tools, answers tools/call, reports progress against the mapped id
// with the caller's own token, honours notifications/cancelled), without
// a real browser behind it. Its tools: echo (answers "<name>: <message>"),
// slow (two progress reports, then waits for release or cancellation),
// hang (never answers), and list_browsers (which the proxy must hide).
type fakeBrowser struct {
	*tclient
	name, id string
	calls    chan *relaywire.Message // every tools/call received
	cancels  chan string             // requestIds of notifications/cancelled received
	release  chan struct{}           // lets slow calls answer

	mu    sync.Mutex
	held  map[string]chan struct{} // slow calls waiting, by mapped id
	tools json.RawMessage
}

const fakeTools = `{"tools":[` +
	`{"name":"echo","description":"say it back","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}}},` +
	`{"name":"slow","description":"takes a while","inputSchema":{"type":"object"}},` +
	`{"name":"hang","description":"never answers","inputSchema":{"type":"object"}},` +
	`{"name":"list_browsers","description":"a browser tool that clashes","inputSchema":{"type":"object"}}]}`

func startBrowser(tb testing.TB, tp *testProxy, user, name string) *fakeBrowser {
	tb.Helper()
	e := tp.extension(tb, user, name)
	n := e.note(relaywire.MethodAuthenticated)
	var p relaywire.AuthenticatedParams
	json.Unmarshal(n.Params, &p)
	b := &fakeBrowser{tclient: e.tclient, name: name, id: p.ExtensionID, calls: make(chan *relaywire.Message, 100),
		cancels: make(chan string, 100), release: make(chan struct{}), held: map[string]chan struct{}{}, tools: json.RawMessage(fakeTools)}
	go b.serve()
	return b
}

func (b *fakeBrowser) serve() {
	for data := range b.raw {
		m, kind, perr := relaywire.Parse(data)
		if perr != nil {
			continue
		}
		switch {
		case kind == relaywire.KindNotification && m.Method == relaywire.MethodCancelled:
			var p relaywire.CancelledParams
			json.Unmarshal(m.Params, &p)
			id, _ := relaywire.IDString(p.RequestID)
			b.cancels <- id
			b.mu.Lock()
			if ch := b.held[id]; ch != nil {
				close(ch)
				delete(b.held, id)
			}
			b.mu.Unlock()
		case kind == relaywire.KindRequest:
			go b.answer(m)
		}
	}
}

func (b *fakeBrowser) answer(m *relaywire.Message) {
	id, _ := relaywire.IDString(m.ID)
	switch m.Method {
	case "tools/list":
		b.mu.Lock()
		tools := b.tools
		b.mu.Unlock()
		b.sendRaw(relaywire.AppendResult(nil, m.ID, tools))
		return
	case "tools/call":
	default:
		b.sendRaw(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeMethodNotFound, "method %q not found", m.Method)))
		return
	}
	b.calls <- m
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Message string `json:"message"`
		} `json:"arguments"`
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	json.Unmarshal(m.Params, &p)
	text := func(s string) json.RawMessage {
		return relaywire.MarshalParams(map[string]any{"content": []map[string]string{{"type": "text", "text": s}}})
	}
	switch p.Name {
	case "echo":
		b.sendRaw(relaywire.AppendResult(nil, m.ID, text(b.name+": "+p.Arguments.Message)))
	case "slow":
		ch := make(chan struct{})
		b.mu.Lock()
		b.held[id] = ch
		b.mu.Unlock()
		if p.Meta.ProgressToken != nil {
			for i := 1; i <= 2; i++ {
				params := relaywire.MarshalParams(map[string]any{"progressToken": p.Meta.ProgressToken, "progress": i, "total": 3, "message": fmt.Sprintf("step %d", i)})
				b.sendRaw(relaywire.AppendRequestNotification(nil, id, relaywire.MethodProgress, params))
			}
		}
		select {
		case <-b.release:
			b.sendRaw(relaywire.AppendResult(nil, m.ID, text("slow done")))
		case <-ch:
			b.sendRaw(relaywire.AppendError(nil, m.ID, relaywire.Errorf(-32800, "cancelled")))
		}
	case "hang":
	case "strict": // the extension's refusal of arguments that do not match the schema (sw/tools.js)
		b.sendRaw(relaywire.AppendError(nil, m.ID, &relaywire.Error{Code: relaywire.CodeInvalidParams,
			Message: "Invalid arguments for strict: url is required", Data: json.RawMessage(`{"argumentErrors":["url is required"]}`)}))
	default:
		b.sendRaw(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeInvalidParams, "unknown tool %q", p.Name)))
	}
}

// call waits for the next tools/call the browser receives.
func (b *fakeBrowser) call(tb testing.TB) *relaywire.Message {
	tb.Helper()
	select {
	case m := <-b.calls:
		return m
	case <-time.After(10 * time.Second):
		tb.Fatalf("browser %s received no tools/call", b.name)
		return nil
	}
}

// leave closes the browser's relay connection, as a bridge that stops.
func (b *fakeBrowser) leave() { b.ws.Close() }

// fakeServer stands for one stdio MCP server of a bridge's gateway,
// registered through the relay as a server extension (docs/relay.md): it
// answers initialize and tools/list itself, and its one tool, "ask",
// asks the client for a completion (sampling/createMessage, routed by the
// call's mapped id) and answers with what the client said.
type fakeServer struct {
	*tclient
	closed chan string             // connection ids of connection_closed received
	inits  atomic.Int32            // initialize requests received
	taken  chan *relaywire.Message // server_name_taken received

	mu      sync.Mutex
	waiting map[string]*relaywire.Message // its requests to clients, by id → the call that made them
	next    int
}

func startServer(tb testing.TB, tp *testProxy, user, server string) *fakeServer {
	tb.Helper()
	return startServerAs(tb, tp, user, server, relaywire.AuthenticateResult{Name: "bridge on test"})
}

// startServerAs is startServer with the name (and replace) of res.
func startServerAs(tb testing.TB, tp *testProxy, user, server string, res relaywire.AuthenticateResult) *fakeServer {
	tb.Helper()
	c := dial(tb, tp.url+relaywire.PathExtension, true)
	auth := <-c.raw
	var m relaywire.Message
	json.Unmarshal(auth, &m)
	res.AccessToken, res.Kind, res.Server = tp.token(tb, user, token.KindExtension), relaywire.ExtensionKindServer, server
	c.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": res})
	c.note(relaywire.MethodAuthenticated)
	s := &fakeServer{tclient: c, closed: make(chan string, 100), taken: make(chan *relaywire.Message, 1), waiting: map[string]*relaywire.Message{}}
	go s.serve()
	return s
}

func (s *fakeServer) serve() {
	for data := range s.raw {
		m, kind, perr := relaywire.Parse(data)
		if perr != nil {
			continue
		}
		switch kind {
		case relaywire.KindNotification:
			switch m.Method {
			case relaywire.MethodConnectionClosed:
				var p relaywire.ConnectionClosedParams
				json.Unmarshal(m.Params, &p)
				s.closed <- p.ConnectionID
			case relaywire.MethodServerNameTaken:
				s.taken <- m
			}
		case relaywire.KindReply:
			id, _ := relaywire.IDString(m.ID)
			s.mu.Lock()
			call := s.waiting[id]
			delete(s.waiting, id)
			s.mu.Unlock()
			if call == nil {
				continue
			}
			var res struct {
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			json.Unmarshal(m.Result, &res)
			out := relaywire.MarshalParams(map[string]any{"content": []map[string]string{{"type": "text", "text": "the client said: " + res.Content.Text}}})
			s.sendRaw(relaywire.AppendResult(nil, call.ID, out))
		case relaywire.KindRequest:
			s.answer(m)
		}
	}
}

func (s *fakeServer) answer(m *relaywire.Message) {
	switch m.Method {
	case "initialize":
		s.inits.Add(1)
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		json.Unmarshal(m.Params, &p)
		s.sendRaw(relaywire.AppendResult(nil, m.ID, relaywire.MarshalParams(map[string]any{
			"protocolVersion": p.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]string{"name": "fake-server", "version": "1"}})))
	case "tools/list":
		s.sendRaw(relaywire.AppendResult(nil, m.ID, json.RawMessage(`{"tools":[{"name":"ask","inputSchema":{"type":"object"}}]}`)))
	case "tools/call":
		mapped, _ := relaywire.IDString(m.ID)
		s.mu.Lock()
		s.next++
		id := fmt.Sprintf("ext:%d", s.next)
		s.waiting[id] = m
		s.mu.Unlock()
		params := json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"say hi"}}],"maxTokens":10}`)
		s.sendRaw(relaywire.AppendRoutedRequest(nil, id, mapped, "", "sampling/createMessage", params))
	default:
		s.sendRaw(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeMethodNotFound, "method %q not found", m.Method)))
	}
}

// rawPost posts a JSON-RPC message to url with the token and headers
// (name, value pairs) and returns the status, the headers and the body.
func rawPost(tb testing.TB, url, tok, body string, header ...string) (int, http.Header, string) {
	tb.Helper()
	return rawPostAs(tb, url, "", tok, body, header...)
}

// rawPostAs is rawPost with the request's Host set to host ("": url's).
func rawPostAs(tb testing.TB, url, host, tok, body string, header ...string) (int, http.Header, string) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("POST %s: %v", url, err)
	}
	return resp.StatusCode, resp.Header, readAll(resp)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// callTool calls a tool through cs and returns its text, failing on an
// error.
func callTool(tb testing.TB, cs *mcp.ClientSession, name string, args map[string]any) string {
	tb.Helper()
	res, err := cs.CallTool(testutil.Context(tb, 30*time.Second), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		tb.Fatalf("calling %s: %v", name, err)
	}
	if res.IsError {
		tb.Fatalf("%s answered a tool error: %s", name, testutil.Text(res))
	}
	return testutil.Text(res)
}

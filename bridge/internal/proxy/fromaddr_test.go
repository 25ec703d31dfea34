package proxy

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
)

// Helpers for tests that stand in for many clients, or an attacker with
// many addresses: every connection is a real socket, dialled from an
// address of 127.0.0.0/8 of the test's choosing (Linux routes all of it
// to lo).
// loopback returns 127.0.0.n, for 1 ≤ n ≤ 254.
func loopback(n int) string { return netip.AddrFrom4([4]byte{127, 0, 0, byte(n)}).String() }

// dialerFrom returns a dialer whose connections come from the address.
func dialerFrom(local string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: ceiling}
}

// httpClientFrom returns an HTTP client whose connections come from the
// address, with a cookie jar as a person's browser has; it follows no
// redirects.
func httpClientFrom(local string) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{
		Jar:           jar,
		Timeout:       2 * ceiling,
		Transport:     &http.Transport{DialContext: dialerFrom(local).DialContext, MaxIdleConnsPerHost: 4},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// wsDialFrom opens a WebSocket from the address, with the headers.
func wsDialFrom(local, url string, h http.Header) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{HandshakeTimeout: ceiling, NetDialContext: dialerFrom(local).DialContext}
	return d.Dial(url, h)
}

// runHTTPProxy serves a proxy with Run (so with the per-address count and
// trusted proxies) and the Streamable HTTP side on, at the public URL
// http://127.0.0.1:PORT; people sign in with testPassword (as alice) or a
// pairing code.
func runHTTPProxy(t *testing.T, opts Options, tweak func(*HTTPOptions)) *testProxy {
	t.Helper()
	keys, err := token.NewHS256([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	opts.Keys = keys
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pub := "http://" + ln.Addr().String()
	ho := &HTTPOptions{PublicURL: pub, Identity: authserver.IdentityConfig{Password: testPassword},
		Users: map[string]string{"password:owner": "alice"}}
	if tweak != nil {
		tweak(ho)
	}
	opts.HTTP = ho
	srv, err := New(opts)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	serveUntilCleanup(t, srv, ln)
	return &testProxy{srv: srv, keys: keys, url: "ws://" + ln.Addr().String(), pub: pub}
}

// signInPage opens the sign-in page of a fresh authorization request as
// a person at the address would, and returns its form's hidden fields,
// with the cookies in client's jar. The request's own attempt limit (5)
// is why each attempt in the floods below opens its own. It and
// postSignIn take the sign-in a step at a time, where testutil.Person
// does it whole: for the tests that send wrong codes (from chosen
// addresses, with chosen headers) and read each refusal.
func signInPage(tp *testProxy, client *http.Client, header http.Header, query string) (map[string][]string, error) {
	req, _ := http.NewRequest(http.MethodGet, tp.public()+"/oauth/authorize?"+query, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	page := readAll(resp)
	if resp.StatusCode != http.StatusOK {
		return nil, &pageError{resp.StatusCode, page}
	}
	return formFields(page), nil
}

type pageError struct {
	status int
	page   string
}

func (e *pageError) Error() string { return http.StatusText(e.status) + ": " + e.page }

// authorizeQuery registers a client with the proxy's authorization server
// and returns the query of an authorization request of it, with PKCE.
func authorizeQuery(t *testing.T, tp *testProxy) string {
	t.Helper()
	reg, _ := json.Marshal(map[string]any{"redirect_uris": []string{redirectURI}, "client_name": "flood test",
		"token_endpoint_auth_method": "none"})
	resp, err := http.Post(tp.public()+"/oauth/register", "application/json", strings.NewReader(string(reg)))
	if err != nil {
		t.Fatal(err)
	}
	var client struct {
		ClientID string `json:"client_id"`
	}
	if err := json.Unmarshal([]byte(readAll(resp)), &client); err != nil || client.ClientID == "" {
		t.Fatalf("registering: %d %v", resp.StatusCode, err)
	}
	sum := sha256.Sum256([]byte("a-verifier-long-enough-for-rfc-7636-" + strings.Repeat("x", 20)))
	return url.Values{"response_type": {"code"}, "client_id": {client.ClientID}, "redirect_uri": {redirectURI},
		"state": {"s1"}, "scope": {"mcp"}, "resource": {tp.public() + "/mcp"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}.Encode()
}

// postSignIn posts the sign-in form with the fields and returns the status
// and page.
func postSignIn(tp *testProxy, client *http.Client, header http.Header, fields map[string][]string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodPost, tp.public()+"/oauth/signin", strings.NewReader(url.Values(fields).Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "null")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, readAll(resp), nil
}

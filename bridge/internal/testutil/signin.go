package testutil

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// signInWait bounds each page of a sign-in and the wait for a redirect: a
// ceiling for a loaded machine.
const signInWait = time.Minute

// Person plays a person at an authorization server's sign-in and consent
// pages (authserver's) over HTTP, as a browser does: cookies, the
// navigation and form headers Chrome sends, the hidden fields of each
// form. Tests that want the pages rendered use Chromium instead (e2e's
// signInBrowser); both hand what comes back to the same code fetchers.
type Person struct {
	// Field is the sign-in form's field the person types Secret into:
	// "password", or "code" for a pairing code. "" is "password".
	Field  string
	Secret string
	// Client sends the requests (its Transport, say, trusts a test CA;
	// its Jar may hold a sign-in already); nil is a client of
	// http.DefaultTransport with a new jar. Its redirect policy is the
	// person's own.
	Client *http.Client
}

// Approval is what came of a person's Approve.
type Approval struct {
	// Consent is the consent page's text, as a person reads it.
	Consent string
	// Redirect is where the server sent the browser back to: the client's
	// redirect URI with the code, state and iss. A browser hands an app's
	// own scheme to the operating system; a loopback one, Visit follows.
	Redirect *url.URL
}

// Approve opens authURL (a top-level navigation from another site), signs
// in with the secret if the server asks, presses Approve on the consent
// page and returns where the server sent the browser back to, not
// following it. It returns errors rather than failing a test, since SDKs
// call it from their own goroutines.
func (p Person) Approve(authURL string) (*Approval, error) {
	start, err := url.Parse(authURL)
	if err != nil {
		return nil, fmt.Errorf("the authorization URL %q: %w", authURL, err)
	}
	b := p.browser(start.Host)
	req, _ := http.NewRequest(http.MethodGet, authURL, nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	pg, err := b.do(req)
	if err != nil {
		return nil, fmt.Errorf("opening the authorization page: %w", err)
	}
	field := p.Field
	if field == "" {
		field = "password"
	}
	if f := pg.form(field); f != nil {
		f.values.Set(field, p.Secret)
		if pg, err = b.submit(f); err != nil {
			return nil, fmt.Errorf("signing in: %w", err)
		}
	}
	f := pg.form("decision")
	if f == nil {
		return nil, fmt.Errorf("no consent page after signing in: %d %s", pg.status, clip(pageText(pg.body), 400))
	}
	consent := pageText(pg.body)
	f.values.Set("decision", "approve")
	done, err := b.submit(f)
	if err != nil {
		return nil, fmt.Errorf("approving: %w", err)
	}
	back, err := url.Parse(done.header.Get("Location"))
	if err != nil || done.location == "" {
		return nil, fmt.Errorf("approving: %d with no redirect: %s", done.status, clip(pageText(done.body), 400))
	}
	return &Approval{Consent: consent, Redirect: back}, nil
}

// Redirect is Approve for callers that want only where the browser was
// sent back to: MCPRemote's approve, a code fetcher.
func (p Person) Redirect(authURL string) (*url.URL, error) {
	a, err := p.Approve(authURL)
	if err != nil {
		return nil, err
	}
	return a.Redirect, nil
}

// Visit follows a redirect to a client's loopback redirect URI, as the
// person's browser would, and wants its page.
func Visit(back *url.URL) error {
	if back == nil {
		return errors.New("no redirect")
	}
	resp, err := (&http.Client{Timeout: signInWait}).Get(back.String())
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the redirect URI %s answered %d", back, resp.StatusCode)
	}
	return nil
}

// CodeFetcher is the Go SDK's AuthorizationCodeFetcher for a test that
// plays the person: signIn goes through the pages at the authorization
// URL and returns the query of the redirect that came back.
func CodeFetcher(signIn func(ctx context.Context, authURL string) (url.Values, error)) auth.AuthorizationCodeFetcher {
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		q, err := signIn(ctx, args.URL)
		if err != nil {
			return nil, err
		}
		if e := q.Get("error"); e != "" {
			return nil, fmt.Errorf("the authorization server redirected with error=%s: %s", e, q.Get("error_description"))
		}
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
}

// RedirectCatcher is a native client's loopback redirect URI (RFC 8252):
// it serves URL and hands each redirect's query to Wait.
type RedirectCatcher struct {
	URL string
	got chan url.Values
}

// StartRedirectCatcher serves http://127.0.0.1:PORT/callback until the
// test ends.
func StartRedirectCatcher(t testing.TB) *RedirectCatcher {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &RedirectCatcher{URL: "http://" + ln.Addr().String() + "/callback", got: make(chan url.Values, 4)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("Signed in; you may close this window."))
		select {
		case c.got <- r.URL.Query():
		default:
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return c
}

// Wait returns the next redirect's query, or an error when none comes.
func (c *RedirectCatcher) Wait(ctx context.Context) (url.Values, error) {
	select {
	case q := <-c.got:
		return q, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(signInWait):
		return nil, fmt.Errorf("no redirect to %s within %v", c.URL, signInWait)
	}
}

// personBrowser is the person's browser during one Approve.
type personBrowser struct{ c *http.Client }

func (p Person) browser(host string) *personBrowser {
	c := &http.Client{Timeout: signInWait}
	if p.Client != nil {
		*c = *p.Client
	}
	if c.Jar == nil {
		c.Jar, _ = cookiejar.New(nil)
	}
	// The server's own pages are followed; the way back to the client is
	// where the person's part ends.
	c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if req.URL.Host == host {
			return nil
		}
		return http.ErrUseLastResponse
	}
	return &personBrowser{c: c}
}

// shownPage is an answer the browser shows.
type shownPage struct {
	url      *url.URL
	status   int
	header   http.Header
	body     string
	location string
}

func (b *personBrowser) do(req *http.Request) (*shownPage, error) {
	resp, err := b.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &shownPage{url: resp.Request.URL, status: resp.StatusCode, header: resp.Header, body: string(body),
		location: resp.Header.Get("Location")}, nil
}

// submit posts form f with the Origin Chrome sends: "null" under
// Referrer-Policy no-referrer, else the page's origin.
func (b *personBrowser) submit(f *pageForm) (*shownPage, error) {
	req, err := http.NewRequest(http.MethodPost, f.action, strings.NewReader(f.values.Encode()))
	if err != nil {
		return nil, err
	}
	origin := f.page.url.Scheme + "://" + f.page.url.Host
	if strings.EqualFold(strings.TrimSpace(f.page.header.Get("Referrer-Policy")), "no-referrer") {
		origin = "null"
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	return b.do(req)
}

// pageForm is a POST form of a page: where it posts and its hidden fields.
type pageForm struct {
	page   *shownPage
	action string
	values url.Values
}

var (
	formRE   = regexp.MustCompile(`(?is)<form\b([^>]*)>(.*?)</form>`)
	actionRE = regexp.MustCompile(`(?i)\baction="([^"]*)"`)
	hiddenRE = regexp.MustCompile(`(?i)<input type="hidden" name="([^"]*)" value="([^"]*)"`)
	tagRE    = regexp.MustCompile(`<[^>]+>`)
)

// form returns the page's form with a field or button named field, nil
// if it has none.
func (p *shownPage) form(field string) *pageForm {
	for _, m := range formRE.FindAllStringSubmatch(p.body, -1) {
		if !strings.Contains(m[2], `name="`+field+`"`) {
			continue
		}
		f := &pageForm{page: p, action: p.url.String(), values: url.Values{}}
		if a := actionRE.FindStringSubmatch(m[1]); a != nil {
			if u, err := p.url.Parse(html.UnescapeString(a[1])); err == nil {
				f.action = u.String()
			}
		}
		for _, h := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
			f.values.Set(html.UnescapeString(h[1]), html.UnescapeString(h[2]))
		}
		return f
	}
	return nil
}

// pageText is the visible text of a page, roughly.
func pageText(body string) string {
	return strings.Join(strings.Fields(html.UnescapeString(tagRE.ReplaceAllString(body, " "))), " ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

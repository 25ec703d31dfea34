package authserver

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// The pages a person sees: sign-in, consent and refusals. Server-rendered
// with html/template (so the names apps give themselves are escaped), no
// JavaScript, one stylesheet inlined under a CSP hash: the mux belongs to
// server.go and serves no static files, and a hash keeps style-src tight.

//go:embed pages/*.html pages/style.css
var pagesFS embed.FS

var (
	pageCSS, pageCSSHash = loadCSS()
	signInPage           = parsePage("signin.html")
	consentPage          = parsePage("consent.html")
	errorPage            = parsePage("error.html")
)

func loadCSS() (template.CSS, string) {
	raw, err := pagesFS.ReadFile("pages/style.css")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	sum := sha256.Sum256(raw)
	// The CSS is the whole text of the <style> element, so this hash is
	// the one the browser computes.
	return template.CSS(raw), "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

func parsePage(name string) *template.Template {
	return template.Must(template.New(name).ParseFS(pagesFS, "pages/base.html", "pages/"+name))
}

// pageData is what every page template reads. Strings are plain text:
// html/template escapes them for their context.
type pageData struct {
	Title string
	CSS   template.CSS

	// The request, on the sign-in and consent pages.
	ClientName   string // untrusted: what the app says it is called
	RedirectHost string
	ResourceName string
	ResourceURI  string
	SignedInAs   string
	RequestID    string
	CSRF         string

	SignInAction  string
	ConsentAction string

	// Sign-in page: which ways to sign in it offers.
	Password bool
	Code     bool
	OIDCName string
	// Message is a sentence about the last attempt (wrong password, too
	// many tries); Wait styles it as a pause rather than a mistake.
	Message string
	Wait    bool

	// Consent page: whether "Use another account" is offered.
	CanSwitch bool

	// Error page.
	Heading string
	Hint    string
}

// pageHeaders sets what every page response carries. formTargets are the
// URLs a form on the page may end up at besides this server: Chrome and
// Firefox apply form-action to the redirects after a submission too, so the
// consent page must allow the client's redirect URI and the sign-in page
// the OIDC provider's authorization endpoint.
func pageHeaders(w http.ResponseWriter, formTargets ...string) {
	formAction := []string{"'self'"}
	for _, t := range formTargets {
		if src := cspSource(t); src != "" {
			formAction = append(formAction, src)
		}
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src "+pageCSSHash+
		"; form-action "+strings.Join(formAction, " ")+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
}

// cspSourceRE is what a source expression built from a URL may look like:
// nothing that could end the directive or start another (a redirect URI is
// the client's text).
var cspSourceRE = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:(//[A-Za-z0-9.\-]+(:[0-9]+)?|//\[[0-9A-Fa-f:.]+\](:[0-9]+)?)?$`)

// cspSource is the CSP source expression that matches u: its origin for
// http(s), its scheme for an app's own scheme (cursor:, vscode:); "" if u
// cannot be expressed safely.
func cspSource(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" {
		return ""
	}
	scheme := strings.ToLower(p.Scheme)
	src := scheme + ":"
	if scheme == "http" || scheme == "https" {
		if p.Host == "" {
			return ""
		}
		src = scheme + "://" + p.Host
	}
	if !cspSourceRE.MatchString(src) {
		return ""
	}
	return src
}

// render writes a page; the template runs into a buffer first so a
// template error never leaves half a page.
func (s *Server) render(w http.ResponseWriter, status int, t *template.Template, d *pageData, formTargets ...string) {
	d.CSS = pageCSS
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "base", d); err != nil {
		s.log.Error("authserver: rendering a page", "page", t.Name(), "err", err)
		pageHeaders(w)
		http.Error(w, "This page could not be shown.", http.StatusInternalServerError)
		return
	}
	pageHeaders(w, formTargets...)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPageFor shows a refusal: a heading, the sentence saying what went
// wrong, and optionally what to do.
func (s *Server) errorPageFor(w http.ResponseWriter, status int, heading, message, hint string) {
	s.render(w, status, errorPage, &pageData{Title: heading, Heading: heading, Message: message, Hint: hint})
}

// requestPage fills in what the sign-in and consent pages say about a
// request.
func (s *Server) requestPage(f *authFlow, title string) *pageData {
	d := &pageData{
		Title:         title,
		ClientName:    f.client.Name,
		RedirectHost:  redirectHost(f.req.RedirectURI),
		ResourceName:  f.resource.Name,
		ResourceURI:   f.resource.URI,
		RequestID:     f.req.ID,
		CSRF:          f.req.CSRF,
		SignInAction:  s.id.basePath + "/oauth/signin",
		ConsentAction: s.id.basePath + "/oauth/consent",
	}
	if d.ResourceName == "" {
		d.ResourceName = "an MCP server"
	}
	if sub := f.req.Subject; sub != nil {
		d.SignedInAs = sub.Display
		if d.SignedInAs == "" {
			d.SignedInAs = sub.ID
		}
	}
	return d
}

// redirectHost is the part of a redirect URI a person can judge: where
// the browser goes after the decision.
func redirectHost(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	if u.Host == "" {
		return u.Scheme + ":" // an app's own scheme without a host (com.example.app:/cb)
	}
	return u.Scheme + "://" + u.Host
}

// showSignIn shows the sign-in page of a request; message says what went
// wrong with the last attempt, if anything.
func (s *Server) showSignIn(w http.ResponseWriter, r *http.Request, f *authFlow, status int, message string, wait bool) {
	d := s.requestPage(f, "Sign in")
	d.Message, d.Wait = message, wait
	d.Password = s.id.password != nil
	d.Code = s.id.pairing != nil
	var targets []string
	if up := s.id.oidc; up != nil {
		d.OIDCName = up.name
		// The provider button's post answers with a redirect to the
		// provider, which form-action must allow.
		if ep, err := up.authEndpoint(r.Context()); err == nil {
			targets = append(targets, ep)
		}
	}
	s.render(w, status, signInPage, d, targets...)
}

// showConsent shows the consent page of a signed-in request, and notes
// that the person has now seen this app's: its errors may go back to it
// from now on (consentSeen).
func (s *Server) showConsent(w http.ResponseWriter, r *http.Request, f *authFlow) {
	s.markConsentSeen(r.Context(), f.client.ID)
	d := s.requestPage(f, "Allow this app?")
	d.CanSwitch = f.req.Subject != nil && f.req.Subject.Method != "pairing"
	s.render(w, http.StatusOK, consentPage, d, f.req.RedirectURI)
}

package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// Enrolment (relaywire/enrol.go, docs/relay.md "Enrolment"): the operator's
// `browserbridge-proxy invite` asks the running proxy for a one-time code
// bound to a user; the person's `browserbridge relay join` exchanges it for
// the bridge's own credential, an extension token with an id, which `relay
// leave` revokes. The codes are a second kind of one-time code beside
// pairing codes (pairing.go), kept the same way: HMACs in this process, or
// sealed in a JetStream bucket (prefix_enrol) on a cluster, so any node
// redeems a code any node issued, once; guessing is bounded as for pairing
// codes. Revocations are kept until the credential would have expired
// (revoked.go).

// EnrolOptions configure enrolment. The zero value means the defaults
// given, revocations kept in memory (or, on a cluster, in JetStream).
type EnrolOptions struct {
	// CodeTTL is how long an enrolment code works. Default
	// DefaultEnrolCodeTTL.
	CodeTTL time.Duration
	// CredentialTTL is the lifetime of the credential a code is exchanged
	// for. Default DefaultCredentialTTL.
	CredentialTTL time.Duration
	// RevokedFile keeps the revoked credentials across restarts (one
	// proxy; a cluster keeps them in JetStream). "": in memory, lost when
	// the proxy restarts.
	RevokedFile string
}

// Defaults of EnrolOptions.
const (
	DefaultEnrolCodeTTL  = 15 * time.Minute
	DefaultCredentialTTL = 365 * 24 * time.Hour
)

// Why an enrolment code was refused: the pairing sentences, told for
// enrolment.
var (
	errEnrolUnknown = errors.New("that enrolment code is not known here: check it, or ask the proxy's operator for a new one (browserbridge-proxy invite)")
	errEnrolExpired = errors.New("that enrolment code has expired: ask the proxy's operator for a new one (browserbridge-proxy invite)")
	errEnrolUsed    = errors.New("that enrolment code was already used, and each works once: ask the proxy's operator for a new one (browserbridge-proxy invite)")
	errEnrolFormat  = errors.New("that is not an enrolment code: it has 16 letters and digits, like ABCD-EFGH-JKMN-PQRS")
	errEnrolOff     = errors.New("this proxy cannot issue enrolment codes")
)

// enrolIDBytes is the length of a credential's id (jti): 128 random bits.
const enrolIDBytes = 16

// maxEnrolBody bounds the enrolment endpoints' request bodies.
const maxEnrolBody = 4 << 10

// configureEnrol turns enrolment on; New calls it.
func (s *Server) configureEnrol(opts EnrolOptions) error {
	if opts.CodeTTL <= 0 {
		opts.CodeTTL = DefaultEnrolCodeTTL
	}
	if opts.CredentialTTL <= 0 {
		opts.CredentialTTL = DefaultCredentialTTL
	}
	s.enrolOpts = opts
	s.configureCodes(s.enrol, PairingOptions{TTL: opts.CodeTTL})
	if c := s.opts.Cluster; c != nil && c.Conn != nil {
		s.revoked = newRevokedShared(c)
		return nil
	}
	r, err := openRevokedFile(opts.RevokedFile, s.opts.Now)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	s.revoked = r
	return nil
}

// serveEnrolInvite answers the operator's POST /enrol/invite with a new
// code for the user named.
func (s *Server) serveEnrolInvite(w http.ResponseWriter, r *http.Request) {
	if !s.enrolRequestOK(w, r) {
		return
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		enrolError(w, http.StatusUnauthorized, "an invitation needs the operator's token (browserbridge-proxy invite makes it from --secret-file)")
		return
	}
	if _, err := s.keys.Load().Verify(bearer, token.KindOperator, s.opts.Now()); err != nil {
		s.m.authFail.With("operator").Inc()
		enrolError(w, http.StatusForbidden, "the operator's token was refused: "+err.Error()+" (is --secret-file the proxy's?)")
		return
	}
	var req relaywire.EnrolInviteRequest
	if !decodeEnrolBody(w, r, &req) {
		return
	}
	if req.User == "" || req.User != strings.TrimSpace(req.User) || len(req.User) > 256 || strings.ContainsAny(req.User, "\r\n\t") {
		enrolError(w, http.StatusBadRequest, fmt.Sprintf("the user %q is empty, too long or has white space around it", req.User))
		return
	}
	res, rerr := s.issueCode(s.enrol, req.User)
	if rerr != nil {
		status := http.StatusServiceUnavailable
		if rerr.Code == relaywire.CodeRateLimited {
			status = http.StatusTooManyRequests
		}
		enrolError(w, status, rerr.Message)
		return
	}
	out := relaywire.EnrolInviteResult{Code: res.Code, User: res.UserID, ExpiresAt: res.ExpiresAt, TTLSeconds: res.TTLSeconds}
	if s.http != nil {
		out.PublicURL = s.http.pub.Base
	}
	writeEnrolJSON(w, out)
}

// serveEnrol exchanges an enrolment code for the bridge's credential.
func (s *Server) serveEnrol(w http.ResponseWriter, r *http.Request) {
	if !s.enrolRequestOK(w, r) {
		return
	}
	var req relaywire.EnrolRequest
	if !decodeEnrolBody(w, r, &req) {
		return
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	user, err := s.redeemCode(s.enrol, req.Code, host)
	if err != nil {
		status, msg := enrolRefusal(err)
		enrolError(w, status, msg)
		return
	}
	var id [enrolIDBytes]byte
	rand.Read(id[:])
	now := s.opts.Now()
	exp := now.Add(s.enrolOpts.CredentialTTL)
	tok, err := s.keys.Load().Mint(token.Claims{Subject: user, Kind: token.KindExtension, IssuedAt: now.Unix(), Expires: exp.Unix(), ID: hex.EncodeToString(id[:])})
	if err != nil {
		// The code is used up: a verify-only key cannot sign. The
		// operator set the proxy up so; say so.
		s.log.Error("enrolment: minting the credential", "user", user, "err", err)
		enrolError(w, http.StatusServiceUnavailable, "this proxy cannot sign credentials ("+err.Error()+"): its operator must give it a signing key")
		return
	}
	s.log.Info("enrolment: a bridge enrolled", "user", user, "credential", hex.EncodeToString(id[:4]), "expires", exp.UTC().Format(time.RFC3339))
	writeEnrolJSON(w, relaywire.EnrolResult{User: user, Token: tok, ExpiresAt: exp.UTC().Format(time.RFC3339)})
}

// serveEnrolLeave revokes the credential the request carries.
func (s *Server) serveEnrolLeave(w http.ResponseWriter, r *http.Request) {
	if !s.enrolRequestOK(w, r) {
		return
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		enrolError(w, http.StatusUnauthorized, "leaving needs the bridge's credential (its relay.token) as a Bearer token")
		return
	}
	claims, err := s.keys.Load().Verify(bearer, token.KindExtension, s.opts.Now())
	if err != nil {
		enrolError(w, http.StatusForbidden, "the credential was refused: "+err.Error())
		return
	}
	if claims.ID == "" {
		enrolError(w, http.StatusBadRequest, "this credential was minted by hand (browserbridge-proxy token), not by enrolment, and has no id to revoke it by: it stops working when it expires or when the operator rotates --secret-file")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pairingStoreTimeout)
	defer cancel()
	if err := s.revoked.revoke(ctx, claims.ID, time.Unix(claims.Expires, 0)); err != nil {
		s.log.Error("enrolment: revoking a credential", "user", claims.Subject, "err", err)
		enrolError(w, http.StatusServiceUnavailable, "the proxy could not record the revocation right now: try again in a minute")
		return
	}
	s.log.Info("enrolment: a bridge left; its credential is revoked", "user", claims.Subject, "credential", claims.ID[:min(8, len(claims.ID))])
	writeEnrolJSON(w, relaywire.EnrolLeaveResult{Revoked: true, User: claims.Subject})
}

// checkRevoked refuses a credential that `relay leave` revoked. Tokens
// without an id (minted by hand) are never revoked here.
func (s *Server) checkRevoked(c *token.Claims) error {
	if c.ID == "" || s.revoked == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), pairingStoreTimeout)
	defer cancel()
	gone, err := s.revoked.isRevoked(ctx, c.ID)
	switch {
	case err != nil:
		s.log.Error("enrolment: checking a credential's revocation", "user", c.Subject, "err", err)
		return errors.New("the proxy cannot check this credential right now (its shared store does not answer); it will be tried again")
	case gone:
		return errors.New("this credential was revoked (browserbridge relay leave); enrol again with a new code: browserbridge relay join")
	}
	return nil
}

// enrolRequestOK allows POST only, over TLS or from loopback (or through a
// trusted reverse proxy, which terminates TLS): each request carries a
// secret that plain HTTP would show to the network.
func (s *Server) enrolRequestOK(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		enrolError(w, http.StatusMethodNotAllowed, "use POST with a JSON body (browserbridge relay join and browserbridge-proxy invite do)")
		return false
	}
	if r.TLS == nil && r.Context().Value(forwardedHoldKey{}) == nil && !loopbackPeer(r.RemoteAddr) {
		enrolError(w, http.StatusForbidden, "enrolment carries secrets, so it needs HTTPS: reach this proxy at its https:// address (plain http works only on loopback)")
		return false
	}
	return true
}

func loopbackPeer(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// enrolRefusal maps a code's refusal to its status and sentence.
func enrolRefusal(err error) (int, string) {
	switch {
	case errors.Is(err, ErrPairingUnknown):
		return http.StatusForbidden, errEnrolUnknown.Error()
	case errors.Is(err, ErrPairingExpired):
		return http.StatusForbidden, errEnrolExpired.Error()
	case errors.Is(err, ErrPairingUsed):
		return http.StatusForbidden, errEnrolUsed.Error()
	case errors.Is(err, relaywire.ErrPairingCodeFormat):
		return http.StatusBadRequest, errEnrolFormat.Error()
	case errors.Is(err, ErrPairingLimited):
		return http.StatusTooManyRequests, strings.Replace(err.Error(), "pairing codes", "codes", 1)
	}
	return http.StatusServiceUnavailable, strings.Replace(err.Error(), "pairing codes", "enrolment codes", 1)
}

func decodeEnrolBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxEnrolBody+1))
	if err != nil {
		enrolError(w, http.StatusBadRequest, "reading the request: "+err.Error())
		return false
	}
	if len(body) > maxEnrolBody {
		enrolError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request is over %d bytes", maxEnrolBody))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		enrolError(w, http.StatusBadRequest, "the request is not the JSON object expected: "+err.Error())
		return false
	}
	return true
}

func writeEnrolJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

func enrolError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(relaywire.EnrolError{Error: msg})
}

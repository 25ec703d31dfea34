package proxy

import (
	"errors"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
)

// TestPairingSubject: how a redemption becomes the sign-in page's answer.
// A rate limit must read as one (429 there), never as a wrong code.
func TestPairingSubject(t *testing.T) {
	for _, tc := range []struct {
		name        string
		user        string
		err         error
		wantID      string
		wantLimited bool
		wantErr     bool
		unavailable bool
	}{
		{"a good code", "alice", nil, "pair:alice", false, false, false},
		{"the per-address limit", "", errPairingPerIP, "", true, true, false},
		{"the proxy-wide limit", "", errPairingGlobal, "", true, true, false},
		{"a used code", "", ErrPairingUsed, "", false, true, false},
		{"bound to nobody", "", nil, "", false, true, false},
		{"the shared store away", "", ErrPairingUnavailable, "", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := pairingSubject(func(code, ip string) (string, error) { return tc.user, tc.err })
			subj, err := check("ABCD-EFGH-JKMN-PQRS", "203.0.113.9")
			if (err != nil) != tc.wantErr || subj.ID != tc.wantID {
				t.Fatalf("got %+v, %v", subj, err)
			}
			if got := errors.Is(err, authserver.ErrSignInLimited); got != tc.wantLimited {
				t.Fatalf("errors.Is(%v, ErrSignInLimited) = %v", err, got)
			}
			if got := errors.Is(err, authserver.ErrSignInUnavailable); got != tc.unavailable {
				t.Fatalf("errors.Is(%v, ErrSignInUnavailable) = %v", err, got)
			}
			if tc.err != nil && err.Error() != tc.err.Error() {
				t.Fatalf("the sentence changed: %q, want %q", err, tc.err)
			}
		})
	}
}

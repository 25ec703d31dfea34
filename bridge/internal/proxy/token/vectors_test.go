package token

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"
)

// The published examples of the two algorithms the proxy accepts, byte for
// byte as their RFCs print them: key, JOSE header, payload and signature.
var rfcVectors = []struct {
	name string
	// keys builds our Keys from the RFC's key (a JWK's members, base64url).
	keys func(t *testing.T) *Keys
	// header and payload are the RFC's octets; the encoded forms are the
	// RFC's too, and must agree with them.
	header, payload   string
	headerB64, payB64 string
	signature         string // base64url, as printed
	verifyErr         error  // what Verify says of a payload that is no claims of ours
}{
	{
		// RFC 7515 Appendix A.1: JWS using HMAC SHA-256. The JWK is
		// {"kty":"oct","k":"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"}.
		name: "RFC 7515 A.1 HS256",
		keys: func(t *testing.T) *Keys {
			k, err := NewHS256(mustB64(t, "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"))
			if err != nil {
				t.Fatal(err)
			}
			return k
		},
		header:    "{\"typ\":\"JWT\",\r\n \"alg\":\"HS256\"}",
		payload:   "{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}",
		headerB64: "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9",
		payB64:    "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ",
		signature: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
		verifyErr: ErrClaims, // a JWT without sub
	},
	{
		// RFC 8037 Appendix A.4 (signing) and A.5 (validation): Ed25519.
		// The JWK is {"kty":"OKP","crv":"Ed25519",
		// "d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A",
		// "x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}.
		name: "RFC 8037 A.4 EdDSA",
		keys: func(t *testing.T) *Keys {
			priv := ed25519.NewKeyFromSeed(mustB64(t, "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"))
			x := mustB64(t, "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
			if !bytes.Equal(priv.Public().(ed25519.PublicKey), x) {
				t.Fatal("the RFC's d does not give its x")
			}
			k, err := NewEdDSA(priv, nil)
			if err != nil {
				t.Fatal(err)
			}
			return k
		},
		header:    `{"alg":"EdDSA"}`,
		payload:   "Example of Ed25519 signing",
		headerB64: "eyJhbGciOiJFZERTQSJ9",
		payB64:    "RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc",
		signature: "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg",
		verifyErr: ErrMalformed, // the payload is not JSON at all
	},
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := b64.DecodeString(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return b
}

// TestRFCVectors checks our verifier, and our signer, against the RFCs'
// own examples: the signature verifies and yields the payload's octets,
// the same token with any signature byte changed does not, and our
// signature of the RFC's signing input is the RFC's.
func TestRFCVectors(t *testing.T) {
	for _, v := range rfcVectors {
		t.Run(v.name, func(t *testing.T) {
			k := v.keys(t)
			if got := b64.EncodeToString([]byte(v.header)); got != v.headerB64 {
				t.Fatalf("header encodes as %s, the RFC prints %s", got, v.headerB64)
			}
			if got := b64.EncodeToString([]byte(v.payload)); got != v.payB64 {
				t.Fatalf("payload encodes as %s, the RFC prints %s", got, v.payB64)
			}
			signing := v.headerB64 + "." + v.payB64
			tok := signing + "." + v.signature

			payload, err := k.verifySignature(tok)
			if err != nil {
				t.Fatalf("verifying the RFC's token: %v", err)
			}
			if string(payload) != v.payload {
				t.Fatalf("verified payload %q, want %q", payload, v.payload)
			}
			// Verify gets past the signature and refuses the claims,
			// which are the RFC's, not a proxy token's.
			if _, err := k.Verify(tok, KindMCP, time.Unix(1_300_000_000, 0)); !errors.Is(err, v.verifyErr) {
				t.Fatalf("Verify = %v, want %v", err, v.verifyErr)
			}

			sig := mustB64(t, v.signature)
			for i := range sig {
				bad := bytes.Clone(sig)
				bad[i] ^= 0x01
				if _, err := k.verifySignature(signing + "." + b64.EncodeToString(bad)); !errors.Is(err, ErrSignature) {
					t.Fatalf("signature byte %d changed: %v, want ErrSignature", i, err)
				}
			}
			other := strings.Replace(v.payB64, v.payB64[:4], "eyJ4", 1) // another payload, same signature
			if _, err := k.verifySignature(v.headerB64 + "." + other + "." + v.signature); !errors.Is(err, ErrSignature) {
				t.Fatalf("payload changed: %v, want ErrSignature", err)
			}

			// Both algorithms are deterministic (Ed25519: RFC 8032), so
			// our signer must give the RFC's signature.
			if got := b64.EncodeToString(k.sign([]byte(signing))); got != v.signature {
				t.Fatalf("our signature of the RFC's input is %s, the RFC's is %s", got, v.signature)
			}
		})
	}
}

package extension

import "testing"

func TestIDMatchesKey(t *testing.T) {
	// The id below is what Chrome shows for this key (computed independently
	// with openssl: sha256 of the DER key, first 32 hex digits mapped 0-f -> a-p).
	const want = "amcokjncpgajgpgekekceeedjfediofp"
	if got := ID(); got != want {
		t.Fatalf("ID() = %q, want %q", got, want)
	}
	if got := Origin(); got != "chrome-extension://"+want+"/" {
		t.Fatalf("Origin() = %q", got)
	}
}

func TestIDFromKeyErrors(t *testing.T) {
	for _, tc := range []struct{ name, key string }{
		{"not base64", "!!!"},
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := IDFromKey(tc.key); err == nil {
				t.Fatalf("IDFromKey(%q) succeeded", tc.key)
			}
		})
	}
}

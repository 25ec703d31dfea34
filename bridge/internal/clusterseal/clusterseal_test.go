package clusterseal

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func secret(c byte) []byte { return bytes.Repeat([]byte{c}, 32) }

func ring(t testing.TB, secrets ...[]byte) *Keyring {
	t.Helper()
	k, err := New(secrets)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets [][]byte
		want    string
	}{
		{"none", nil, "no cluster secret"},
		{"short", [][]byte{[]byte("short")}, "at least 32"},
		{"twice the same", [][]byte{secret('a'), secret('a')}, "same as an earlier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.secrets); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestMessageRoundTripAndRefusals(t *testing.T) {
	a, b := ring(t, secret('s')), ring(t, secret('s'))
	var rejected []string
	var mu sync.Mutex
	b.OnReject(func(what, reason string) { mu.Lock(); rejected = append(rejected, what+"/"+reason); mu.Unlock() })
	plain := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	sealed := a.SealMessage("bb.n.x.u.k.x.conn", nil, plain)
	if len(sealed) != len(plain)+MessageOverhead {
		t.Fatalf("sealed %d bytes, want %d", len(sealed), len(plain)+MessageOverhead)
	}
	if bytes.Contains(sealed, []byte("tools/call")) {
		t.Fatal("the plaintext shows through")
	}
	got, err := b.OpenMessage("msg", "bb.n.x.u.k.x.conn", sealed)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open: %q %v", got, err)
	}
	cases := []struct {
		name    string
		subject string
		data    []byte
		want    error
	}{
		{"replayed", "bb.n.x.u.k.x.conn", sealed, ErrReplayed},
		{"moved to another subject", "bb.n.x.u.k.x.other", a.SealMessage("bb.n.x.u.k.x.conn", nil, plain), ErrForged},
		{"truncated", "s", a.SealMessage("s", nil, plain)[:20], ErrMalformed},
		{"cut tag", "s", func() []byte { m := a.SealMessage("s", nil, plain); return m[:len(m)-1] }(), ErrForged},
		{"unsealed", "s", plain, ErrMalformed},
		{"other secret", "s", ring(t, secret('o')).SealMessage("s", nil, plain), ErrUnknownKey},
	}
	// A flipped bit anywhere past the version and key id.
	for _, at := range []int{1 + keyIDLen, headerLen, headerLen + 10, len(sealed) - 1} {
		m := a.SealMessage("s", nil, plain)
		m[at] ^= 0x40
		cases = append(cases, struct {
			name    string
			subject string
			data    []byte
			want    error
		}{"flipped byte " + string(rune('0'+at%10)), "s", m, ErrForged})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.OpenMessage("msg", tc.subject, tc.data); !errors.Is(err, tc.want) {
				t.Fatalf("OpenMessage: %v, want %v", err, tc.want)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rejected) != len(cases) || rejected[0] != "msg/replayed" {
		t.Fatalf("rejections told: %v (want %d, the first msg/replayed)", rejected, len(cases))
	}
}

func TestMessageStale(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a, b := ring(t, secret('s')), ring(t, secret('s'))
	a.Now = func() time.Time { return now }
	b.Now = func() time.Time { return now.Add(DefaultWindow + time.Second) }
	if _, err := b.OpenMessage("msg", "s", a.SealMessage("s", nil, []byte("x"))); !errors.Is(err, ErrStale) {
		t.Fatalf("old message: %v", err)
	}
	b.Now = func() time.Time { return now.Add(-DefaultWindow - time.Second) }
	if _, err := b.OpenMessage("msg", "s", a.SealMessage("s", nil, []byte("x"))); !errors.Is(err, ErrStale) {
		t.Fatalf("message from the future: %v", err)
	}
	b.Now = func() time.Time { return now.Add(DefaultWindow - time.Second) }
	if _, err := b.OpenMessage("msg", "s", a.SealMessage("s", nil, []byte("x"))); err != nil {
		t.Fatalf("message within the window: %v", err)
	}
}

func TestReplayWindowOutOfOrder(t *testing.T) {
	a, b := ring(t, secret('s')), ring(t, secret('s'))
	var msgs [][]byte
	for range 2000 {
		msgs = append(msgs, a.SealMessage("s", nil, []byte("m")))
	}
	open := func(i int) error { _, err := b.OpenMessage("msg", "s", msgs[i]); return err }
	// Out of order within the window: all accepted once.
	for _, i := range []int{5, 3, 4, 0, 1, 2, 1000, 900, 6} {
		if err := open(i); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	for _, i := range []int{5, 0, 1000, 900} {
		if err := open(i); !errors.Is(err, ErrReplayed) {
			t.Fatalf("message %d again: %v", i, err)
		}
	}
	if err := open(1999); err != nil {
		t.Fatal(err)
	}
	// 7 was never seen, but is now more than replayBits below the top.
	if err := open(7); !errors.Is(err, ErrReplayed) {
		t.Fatalf("message far below the window: %v", err)
	}
	if err := open(1999 - replayBits + 1); err != nil {
		t.Fatalf("message at the window's edge: %v", err)
	}
}

func TestValues(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := ring(t, secret('s'))
	k.Now = func() time.Time { return now }
	v := k.SealValue("bb_presence/node.uk.ext", []byte(`{"user":"alice"}`))
	if bytes.Contains(v, []byte("alice")) {
		t.Fatal("the plaintext shows through")
	}
	if got, err := k.OpenValue("presence", "bb_presence/node.uk.ext", v, now.Add(2*time.Second)); err != nil || string(got) != `{"user":"alice"}` {
		t.Fatalf("open: %q %v", got, err)
	}
	// Values may be read many times.
	if _, err := k.OpenValue("presence", "bb_presence/node.uk.ext", v, now); err != nil {
		t.Fatal(err)
	}
	if _, err := k.OpenValue("presence", "bb_presence/node.uk.other", v, now); !errors.Is(err, ErrForged) {
		t.Fatalf("moved value: %v", err)
	}
	if _, err := k.OpenValue("presence", "bb_presence/node.uk.ext", v, now.Add(time.Hour)); !errors.Is(err, ErrReplayed) {
		t.Fatalf("value written back an hour later: %v", err)
	}
	// A message key does not open a value, nor the other way.
	if _, err := k.OpenMessage("msg", "bb_presence/node.uk.ext", v); err == nil {
		t.Fatal("a value opened as a message")
	}
}

func TestRotation(t *testing.T) {
	old, next := secret('o'), secret('n')
	before := ring(t, old)
	during := ring(t, next, old) // seals with next, opens both
	after := ring(t, next)
	if _, err := during.OpenMessage("m", "s", before.SealMessage("s", nil, []byte("x"))); err != nil {
		t.Fatalf("a node rolled to the new secret opens the old: %v", err)
	}
	if _, err := after.OpenMessage("m", "s", during.SealMessage("s", nil, []byte("x"))); err != nil {
		t.Fatalf("a node that dropped the old secret opens what the rolled ones seal: %v", err)
	}
	if _, err := after.OpenMessage("m", "s", before.SealMessage("s", nil, []byte("x"))); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("the old secret, once dropped: %v", err)
	}
	if !during.IsUserKey(before.UserKey("alice"), "alice") || !during.IsUserKey(during.UserKey("alice"), "alice") {
		t.Fatal("user keys of either secret are not recognised during a rotation")
	}
	if after.IsUserKey(before.UserKey("alice"), "alice") || during.UserKey("alice") == before.UserKey("alice") {
		t.Fatal("user keys do not follow the secret")
	}
	u, p := before.NATSUser()
	if !during.CheckNATSUser(u, p) || after.CheckNATSUser(u, p) || during.CheckNATSUser(u, p+"x") {
		t.Fatal("NATS users do not follow the secrets")
	}
	proof := before.ForwardProof("a", "POST", "/mcp", []byte("body"))
	if err := during.CheckForwardProof(proof, "a", "POST", "/mcp", []byte("body")); err != nil {
		t.Fatal(err)
	}
	if err := before.Reload([][]byte{next}); err != nil || before.UserKey("alice") != after.UserKey("alice") {
		t.Fatalf("Reload: %v", err)
	}
}

func TestForwardProof(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := ring(t, secret('s'))
	k.Now = func() time.Time { return now }
	proof := k.ForwardProof("node-a", "POST", "/mcp?x=1", []byte(`{"a":1}`))
	for _, tc := range []struct {
		name                 string
		proof, node, m, path string
		body                 string
		at                   time.Time
		want                 error
	}{
		{"valid", proof, "node-a", "POST", "/mcp?x=1", `{"a":1}`, now, nil},
		{"other body", proof, "node-a", "POST", "/mcp?x=1", `{"a":2}`, now, ErrForged},
		{"other node", proof, "node-b", "POST", "/mcp?x=1", `{"a":1}`, now, ErrForged},
		{"other method", proof, "node-a", "DELETE", "/mcp?x=1", `{"a":1}`, now, ErrForged},
		{"other path", proof, "node-a", "POST", "/mcp", `{"a":1}`, now, ErrForged},
		{"late", proof, "node-a", "POST", "/mcp?x=1", `{"a":1}`, now.Add(2 * DefaultWindow), ErrStale},
		{"garbage", "v1.x.y", "node-a", "POST", "/mcp?x=1", `{"a":1}`, now, ErrMalformed},
		{"other secret", ring(t, secret('o')).ForwardProof("node-a", "POST", "/mcp?x=1", []byte(`{"a":1}`)), "node-a", "POST", "/mcp?x=1", `{"a":1}`, now, ErrUnknownKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k.Now = func() time.Time { return tc.at }
			if err := k.CheckForwardProof(tc.proof, tc.node, tc.m, tc.path, []byte(tc.body)); !errors.Is(err, tc.want) {
				t.Fatalf("CheckForwardProof: %v, want %v", err, tc.want)
			}
		})
	}
}

func BenchmarkSealOpenMessage(b *testing.B) {
	a, r := ring(b, secret('s')), ring(b, secret('s'))
	msg := bytes.Repeat([]byte("x"), 300)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.OpenMessage("m", "bb.n.node.u.0123456789ab.x.conn", a.SealMessage("bb.n.node.u.0123456789ab.x.conn", nil, msg)); err != nil {
			b.Fatal(err)
		}
	}
}

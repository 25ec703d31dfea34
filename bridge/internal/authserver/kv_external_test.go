package authserver_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/authserver/jetstreamkv"
	"github.com/browserbridge/browserbridge/bridge/internal/authserver/kvtest"
)

// These are outside package authserver because what they use imports it:
// kvtest, the KV contract every store keeps, and jetstreamkv, the cluster's
// store, which the sign-in across nodes (kv_jetstream_test.go) runs on.

func init() { authserver.NewJetStreamKVForTests = jetstreamkv.New }

// TestKVContract runs the KV's contract against this package's stores;
// jetstreamkv runs it against JetStream.
func TestKVContract(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		kvtest.Contract(t, func(t *testing.T, now func() time.Time) authserver.KV { return authserver.NewMemoryKV(now) })
	})
	t.Run("bolt", func(t *testing.T) {
		kvtest.Contract(t, func(t *testing.T, now func() time.Time) authserver.KV {
			kv, err := authserver.OpenBoltKV(filepath.Join(t.TempDir(), "auth.db"), now)
			if err != nil {
				t.Fatal(err)
			}
			return kv
		})
	})
}

package authserver_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/authserver/jetstreamkv"
	"github.com/browserbridge/browserbridge/bridge/internal/authserver/kvtest"
	"github.com/browserbridge/browserbridge/bridge/internal/clusterseal"
	"github.com/nats-io/nats.go/jetstream"
)

// These are outside package authserver because what they use imports it:
// kvtest, the KV contract every store keeps, and jetstreamkv, the cluster's
// store, which the sign-in across nodes (kv_jetstream_test.go) runs on.

// Each store gets its own keyring of one test secret, as the nodes of a
// deployment each derive theirs from the secret they share.
func init() {
	authserver.NewJetStreamKVForTests = func(js jetstream.JetStream, prefix string, replicas int, now func() time.Time) (authserver.KV, error) {
		ring, err := clusterseal.New([][]byte{[]byte("a test deployment's secret, 32 bytes or more")})
		if err != nil {
			return nil, err
		}
		return jetstreamkv.New(js, ring, prefix, replicas, now)
	}
}

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

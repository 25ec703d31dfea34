//go:build unix

package gatewayserver

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// The public gateway's session records file (issue 33) sits beside its
// OAuth state file: a corrupt one is ignored with a logged sentence, an
// unreadable one stops the start with an error naming it.
// TestGatewaySessionSurvivesRestart (e2e) restarts a real gateway under a
// TypeScript SDK client.
func TestPublicSessionRecordsFile(t *testing.T) {
	t.Run("corrupt file ignored, logged", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "oauth.db")
		if err := os.WriteFile(state+SessionsFileSuffix, []byte("not json at all"), 0o600); err != nil {
			t.Fatal(err)
		}
		lg := startLoopbackGateway(t, func(cfg *config.Config) { cfg.OAuth.StateFile = &state })
		if logs := lg.logs.String(); !strings.Contains(logs, "the session records file is not readable as one") {
			t.Fatalf("the gateway started without saying it ignored the corrupt records file:\n%s", logs)
		}
	})
	t.Run("unreadable file refused at start", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "oauth.db")
		// A directory where the file should be: reading it fails whoever runs the test (root reads any file).
		if err := os.Mkdir(state+SessionsFileSuffix, 0o700); err != nil {
			t.Fatal(err)
		}
		e := newEnv(t)
		file := filepath.Join(e.dir, "servers.json")
		testutil.ServersFile(t, file, "everything")
		cfg := e.config()
		watch := false
		cfg.Gateway = config.Gateway{ServersFile: file, PublicURL: "http://127.0.0.1:1", Watch: &watch}
		cfg.OAuth.Password = nativePassword
		cfg.OAuth.StateFile = &state
		g, err := Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil {
			g.pub.Close()
			g.ln.Close()
			t.Fatal("the gateway started with an unreadable session records file")
		}
		if !strings.Contains(err.Error(), "reading the session records "+state+SessionsFileSuffix) {
			t.Fatalf("start error %q does not name the file", err)
		}
	})
}

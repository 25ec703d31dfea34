package gatewayserver

import (
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
)

// env is one test's world: a directory for its files and a gateway
// config listening on a free loopback port.
type env struct {
	dir string
}

func newEnv(t testing.TB) *env {
	return &env{dir: t.TempDir()}
}

func (e *env) config() *config.Config {
	return &config.Config{Listen: "127.0.0.1:0", Log: config.Log{File: "-"}}
}

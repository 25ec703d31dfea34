package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
)

// childEnv, when set, makes the test binary act as a bridge process run by
// Run, so tests can signal it the way a service manager would.
const childEnv = "BROWSERBRIDGE_SERVICE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

// childMain runs a bridge that prints "ready", waits to be stopped, and
// prints "clean" if Run returned nil.
func childMain() int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	err := Run(context.Background(), func(ctx context.Context) error {
		fmt.Println("ready")
		<-ctx.Done()
		return ctx.Err()
	}, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Run:", err)
		return 1
	}
	fmt.Println("clean")
	return 0
}

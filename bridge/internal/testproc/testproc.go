// Package testproc runs the current test binary again as a helper
// process, for benchmarks whose parts must not share a process with the
// measuring one (a bridge apart from its clients, a load generator apart
// from the proxy). The helper is chosen by an environment variable that
// the package's TestMain checks before running any test.
package testproc

import (
	"io"
	"os"
	"os/exec"
	"testing"
)

// Start runs this test binary again with env=1 set and no tests selected,
// its stderr shared with ours and its stdin and stdout piped to the caller.
func Start(tb testing.TB, env string) (cmd *exec.Cmd, stdin io.WriteCloser, stdout io.ReadCloser) {
	tb.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err = cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	return cmd, stdin, stdout
}

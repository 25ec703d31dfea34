//go:build !windows

package runner

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunStopsOnSignal(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"SIGTERM", syscall.SIGTERM},
		{"SIGINT", syscall.SIGINT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=1")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()

			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			select {
			case l := <-lines:
				if l != "ready" {
					t.Fatalf("child printed %q, want ready", l)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("child never became ready")
			}

			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			var rest []string
			timeout := time.After(10 * time.Second)
		read:
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						break read
					}
					rest = append(rest, l)
				case <-timeout:
					t.Fatalf("child still running 10s after %v", tc.sig)
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("child exited with %v after %v; stderr:\n%s", err, tc.sig, stderr.String())
			}
			if strings.Join(rest, "\n") != "clean" {
				t.Errorf("child printed %q after %v, want clean", rest, tc.sig)
			}
		})
	}
}

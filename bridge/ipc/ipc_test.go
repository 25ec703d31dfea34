//go:build !windows

package ipc

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// shortDir keeps socket paths under the 108-byte sun_path limit.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "ipc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestListenPermissions(t *testing.T) {
	path := filepath.Join(shortDir(t), "sub", "bridge.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		name string
		path string
		want os.FileMode
	}{
		{"directory", filepath.Dir(path), 0o700},
		{"socket", path, 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fi, err := os.Stat(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tc.want {
				t.Fatalf("%s mode = %o, want %o", tc.path, got, tc.want)
			}
		})
	}
}

func TestListenRefusesSecondBridge(t *testing.T) {
	path := filepath.Join(shortDir(t), "bridge.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Listen(path)
	if !errors.Is(err, ErrAlreadyServing) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Listen: %v, want ErrAlreadyServing naming pid %d", err, os.Getpid())
	}
	// The first one is untouched.
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatalf("first bridge unreachable after a refused second one: %v", err)
	}
	c.Close()
	ln.Close()
	ln.Close() // twice is fine
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind after Close: %v", err)
	}
	ln2, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	ln2.Close()
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "bridge.sock")
	// A crashed bridge leaves its socket file behind, with nobody listening.
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket not left for the test: %v", err)
	}
	ln, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer ln.Close()
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestListenRefusesUnsafeDirectory(t *testing.T) {
	base := shortDir(t)
	t.Run("symlink", func(t *testing.T) {
		real := filepath.Join(base, "real")
		os.Mkdir(real, 0o700)
		link := filepath.Join(base, "link")
		os.Symlink(real, link)
		if _, err := Listen(filepath.Join(link, "bridge.sock")); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("Listen in a symlinked directory: %v", err)
		}
	})
	t.Run("open to others is narrowed", func(t *testing.T) {
		dir := filepath.Join(base, "wide")
		os.Mkdir(dir, 0o777)
		os.Chmod(dir, 0o777)
		ln, err := Listen(filepath.Join(dir, "bridge.sock"))
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
			t.Fatalf("directory mode %o, want 0700", fi.Mode().Perm())
		}
	})
	t.Run("another user's", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root to give a directory to another user")
		}
		dir := filepath.Join(base, "theirs")
		os.Mkdir(dir, 0o700)
		os.Chown(dir, 65534, 65534)
		if _, err := Listen(filepath.Join(dir, "bridge.sock")); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Fatalf("Listen in another user's directory: %v", err)
		}
	})
}

func TestPeerUID(t *testing.T) {
	path := filepath.Join(shortDir(t), "bridge.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The dialler holds its end open until the test has asked.
	asked := make(chan struct{})
	defer close(asked)
	go func() {
		c, err := Dial(context.Background(), path)
		if err == nil {
			<-asked
			c.Close()
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uid, err := PeerUID(c)
	if err != nil || uid != os.Getuid() {
		t.Fatalf("PeerUID = %d, %v; want %d", uid, err, os.Getuid())
	}
}

// TestMain lets the test binary act as a stranger's client: re-executed
// with IPC_TEST_DIAL set, it tries to connect and prints the errno.
func TestMain(m *testing.M) {
	if path := os.Getenv("IPC_TEST_DIAL"); path != "" {
		_, err := net.Dial("unix", path)
		var errno syscall.Errno
		switch {
		case err == nil:
			os.Stdout.WriteString("connected")
		case errors.As(err, &errno):
			os.Stdout.WriteString(strconv.Itoa(int(errno)))
		default:
			os.Stdout.WriteString(err.Error())
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestStrangerCannotConnect runs a process as another user against the
// socket: the 0700 directory and 0600 socket stop it before the bridge's
// uid check is even needed.
func TestStrangerCannotConnect(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	base := shortDir(t)
	os.Chmod(base, 0o755)
	path := filepath.Join(base, "private", "bridge.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A copy of this binary the stranger may execute.
	self, _ := os.Executable()
	exe := filepath.Join(base, "stranger")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "IPC_TEST_DIAL="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running as uid 65534: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(int(syscall.EACCES)) {
		t.Fatalf("a stranger's connect gave %q, want EACCES (%d)", got, syscall.EACCES)
	}
}

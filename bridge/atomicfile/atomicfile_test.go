package atomicfile_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
)

func TestWriteFile(t *testing.T) {
	unixOnly := func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("Windows keeps no unix permission bits and needs a privilege for symbolic links")
		}
	}
	tests := []struct {
		name string
		// setup prepares dir and returns the path to write; nil: dir/f.json, absent.
		setup    func(t *testing.T, dir string) string
		perm     fs.FileMode
		opts     []atomicfile.Option
		wantErr  string      // a part of the error; "" for success
		wantMode fs.FileMode // checked on unix when non-zero
		// check looks at the result beyond the file's content and mode.
		check func(t *testing.T, dir, path string)
	}{
		{name: "new file gets perm", perm: 0o600, wantMode: 0o600},
		{name: "perm is exact whatever the umask", perm: 0o666, wantMode: 0o666,
			setup: func(t *testing.T, dir string) string { unixOnly(t); return filepath.Join(dir, "f.json") }},
		{name: "replaces an existing file and sets perm", perm: 0o600, wantMode: 0o600,
			setup: func(t *testing.T, dir string) string { return existing(t, dir, 0o644) }},
		{name: "KeepMode keeps the replaced file's mode", perm: 0o600, opts: []atomicfile.Option{atomicfile.KeepMode}, wantMode: 0o640,
			setup: func(t *testing.T, dir string) string { unixOnly(t); return existing(t, dir, 0o640) }},
		{name: "KeepMode on a new file uses perm", perm: 0o600, opts: []atomicfile.Option{atomicfile.KeepMode}, wantMode: 0o600},
		{name: "FollowLinks replaces the link's target", perm: 0o600, opts: []atomicfile.Option{atomicfile.FollowLinks}, wantMode: 0o600,
			setup: func(t *testing.T, dir string) string { unixOnly(t); return link(t, dir) },
			check: func(t *testing.T, dir, path string) {
				if fi, err := os.Lstat(path); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
					t.Fatalf("the link is gone: %v, %v", fi, err)
				}
			}},
		{name: "without FollowLinks the link is replaced", perm: 0o600, wantMode: 0o600,
			setup: func(t *testing.T, dir string) string { unixOnly(t); return link(t, dir) },
			check: func(t *testing.T, dir, path string) {
				if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
					t.Fatalf("the link is still there: %v, %v", fi, err)
				}
				if got, _ := os.ReadFile(filepath.Join(dir, "target.json")); string(got) != "old" {
					t.Fatalf("the link's target changed: %q", got)
				}
			}},
		{name: "a directory in the way is left as it was", perm: 0o600, wantErr: "replacing",
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "f.json")
				if err := os.MkdirAll(filepath.Join(p, "inside"), 0o700); err != nil {
					t.Fatal(err)
				}
				return p
			},
			check: func(t *testing.T, dir, path string) {
				if fi, err := os.Stat(filepath.Join(path, "inside")); err != nil || !fi.IsDir() {
					t.Fatalf("the directory changed: %v, %v", fi, err)
				}
			}},
		{name: "a read-only directory keeps the old file", perm: 0o600, wantErr: "creating a temporary file",
			setup: func(t *testing.T, dir string) string {
				unixOnly(t)
				if os.Geteuid() == 0 {
					t.Skip("root writes into a read-only directory")
				}
				p := existing(t, dir, 0o600)
				if err := os.Chmod(dir, 0o500); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Chmod(dir, 0o700) })
				return p
			},
			check: func(t *testing.T, dir, path string) {
				if got, err := os.ReadFile(path); err != nil || string(got) != "old" {
					t.Fatalf("the old file is now %q, %v", got, err)
				}
			}},
		{name: "a missing directory is an error", perm: 0o600, wantErr: "no-such-dir",
			setup: func(t *testing.T, dir string) string { return filepath.Join(dir, "no-such-dir", "f.json") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.json")
			if tc.setup != nil {
				path = tc.setup(t, dir)
			}
			err := atomicfile.WriteFile(path, []byte("new"), tc.perm, tc.opts...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("WriteFile = %v, want an error with %q", err, tc.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("WriteFile: %v", err)
				}
				if got, err := os.ReadFile(path); err != nil || string(got) != "new" {
					t.Fatalf("read back %q, %v", got, err)
				}
				if fi, err := os.Stat(path); runtime.GOOS != "windows" && tc.wantMode != 0 && (err != nil || fi.Mode().Perm() != tc.wantMode) {
					t.Fatalf("mode %v (%v), want %v", fi.Mode().Perm(), err, tc.wantMode)
				}
			}
			if tc.check != nil {
				tc.check(t, dir, path)
			}
			noTemps(t, dir)
		})
	}
}

// existing writes "old" to dir/f.json with mode.
func existing(t *testing.T, dir string, mode fs.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, "f.json")
	if err := os.WriteFile(p, []byte("old"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// link makes dir/f.json a symbolic link to dir/target.json, which holds "old".
func link(t *testing.T, dir string) string {
	t.Helper()
	target := filepath.Join(dir, "target.json")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "f.json")
	if err := os.Symlink("target.json", p); err != nil {
		t.Fatal(err)
	}
	return p
}

// noTemps fails if a temporary file is left anywhere under dir: any name
// with a leading dot, which every temporary name has, so that a change of
// the name cannot hide one.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".") {
			t.Errorf("a temporary file is left: %s", p)
		}
		return nil
	})
}

// Two writers of one path each leave a whole file, never a mix.
func TestWriteFileConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	a, b := strings.Repeat("a", 1<<16), strings.Repeat("b", 1<<16)
	errs := make(chan error, 2)
	for _, s := range []string{a, b} {
		go func() { errs <- atomicfile.WriteFile(path, []byte(s), 0o600) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.ReadFile(path); string(got) != a && string(got) != b {
		t.Fatalf("the file is a mix of both writes (%d bytes)", len(got))
	}
	noTemps(t, filepath.Dir(path))
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{".f.json.123.tmp": true, "f.json": false, ".f.json": false, "f.json.tmp": false} {
		if got := atomicfile.IsTemp(name); got != want {
			t.Errorf("IsTemp(%q) = %v, want %v", name, got, want)
		}
	}
}

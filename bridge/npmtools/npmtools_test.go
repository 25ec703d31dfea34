package npmtools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRepoRoot(t *testing.T) {
	wd, _ := os.Getwd()
	want, _ := filepath.Abs("../..")
	for _, tc := range []struct {
		name, dir, want string
	}{
		{"from a package", wd, want},
		{"from the root itself", want, want},
		{"nowhere above", t.TempDir(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RepoRoot(tc.dir)
			if got != tc.want || (tc.want == "") != (err != nil) {
				t.Fatalf("RepoRoot(%s) = %q, %v; want %q", tc.dir, got, err, tc.want)
			}
		})
	}
}

// A checkout without the install script (or without tools/npm) is refused
// with the hint, not with an empty Node.js path.
func TestFindTellsWhatToRun(t *testing.T) {
	_, err := Find(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), Hint) {
		t.Fatalf("Find in an empty directory: %v; want an error with %q", err, Hint)
	}
	tools := Tools{Modules: t.TempDir()}
	if _, err := tools.Module("no-such-package", "index.js"); err == nil || !strings.Contains(err.Error(), "no-such-package") {
		t.Fatalf("Module of a missing package: %v", err)
	}
}

package installer

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/paths"
)

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// snapshot lists every file and directory under roots, with its mode.
func snapshot(t *testing.T, roots ...string) map[string]fs.FileMode {
	t.Helper()
	m := map[string]fs.FileMode{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			m[p] = fi.Mode()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func readRecord(t *testing.T) *Record {
	t.Helper()
	p, err := paths.InstallRecord()
	if err != nil {
		t.Fatal(err)
	}
	r, err := loadRecord(p)
	if err != nil {
		t.Fatal(err)
	}
	if r == nil {
		t.Fatal("no install record")
	}
	return r
}

func recordPaths(r *Record) []string {
	var ps []string
	for _, m := range r.Manifests {
		ps = append(ps, m.Path)
	}
	return ps
}

package clientconfig

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
)

// created is the record of the config files and folders Add created (a
// client's config that did not exist, and its missing folders), kept in
// Env.Record so that Remove takes them away with its last entry: a client
// that was never installed is not left looking installed (a ~/.cursor of
// ours), and nothing of ours stays behind.
type created struct {
	Files []string `json:"files,omitempty"`
	Dirs  []string `json:"dirs,omitempty"`
}

func loadCreated(path string) created {
	var c created
	if path == "" {
		return c
	}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &c) // an unreadable record records nothing
	}
	return c
}

func saveCreated(path string, c created) error {
	if path == "" {
		return nil
	}
	if len(c.Files) == 0 && len(c.Dirs) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}

// missingDirs are dir and those of its parents that do not exist, deepest
// first: what MkdirAll(dir) creates.
func missingDirs(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			return out
		}
		out = append(out, d)
		if filepath.Dir(d) == d {
			return out
		}
	}
}

// recordCreated adds a file and folders Add created to e's record.
func (e Env) recordCreated(file string, dirs []string) error {
	c := loadCreated(e.Record)
	if !slices.Contains(c.Files, file) {
		c.Files = append(c.Files, file)
	}
	for _, d := range dirs {
		if !slices.Contains(c.Dirs, d) {
			c.Dirs = append(c.Dirs, d)
		}
	}
	return saveCreated(e.Record, c)
}

// createdByAdd reports whether Add created file.
func (e Env) createdByAdd(file string) bool {
	return slices.Contains(loadCreated(e.Record).Files, file)
}

// dropCreated removes file (Add created it and its last entry is gone),
// its backup, and the recorded folders that are now empty, deepest first;
// it returns what it removed.
func (e Env) dropCreated(file string) ([]string, error) {
	c := loadCreated(e.Record)
	var gone []string
	for _, p := range []string{file, file + ".bak"} {
		if err := os.Remove(p); err == nil {
			gone = append(gone, p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return gone, err
		}
	}
	c.Files = slices.DeleteFunc(c.Files, func(f string) bool { return f == file })
	dirs := slices.Clone(c.Dirs)
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		if err := os.Remove(d); err == nil { // only an empty folder goes
			gone = append(gone, d)
			c.Dirs = slices.DeleteFunc(c.Dirs, func(x string) bool { return x == d })
		} else if errors.Is(err, os.ErrNotExist) {
			c.Dirs = slices.DeleteFunc(c.Dirs, func(x string) bool { return x == d })
		}
	}
	return gone, saveCreated(e.Record, c)
}

package testbrowser

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// OverlayDir is where, in the extension's folder, the files the tests'
// build of the extension adds or replaces live (test-only code the
// installed extension does not ship, such as dev_utils'
// native_echo_benchmark).
const OverlayDir = "test/overlay"

// BuildExtension writes the tests' build of the extension at src into dst:
// the extension as installed (BuildInstalledExtension), then the files of
// OverlayDir over it. The manifest, and so the key and the extension's id,
// stay the extension's own.
func BuildExtension(src, dst string) error {
	if err := BuildInstalledExtension(src, dst); err != nil {
		return err
	}
	if err := copyTree(filepath.Join(src, filepath.FromSlash(OverlayDir)), dst, func(string, fs.DirEntry) bool { return true }); err != nil {
		return fmt.Errorf("overlaying the tests' extension files: %w", err)
	}
	return nil
}

// BuildInstalledExtension writes what the browser runs of the extension at
// src into dst: everything but tests, benchmarks, Go files and docs, as the
// installer leaves them out. What a benchmark of the product itself
// measures (its tools/list, say) runs this, without the tests' overlay.
func BuildInstalledExtension(src, dst string) error {
	if err := copyTree(src, dst, func(rel string, d fs.DirEntry) bool {
		if d.IsDir() {
			return rel != "test" && rel != "bench" && rel != "node_modules" && !strings.HasPrefix(d.Name(), ".")
		}
		ext := filepath.Ext(rel)
		return ext != ".go" && ext != ".md" && !strings.HasSuffix(rel, ".test.js")
	}); err != nil {
		return fmt.Errorf("building the extension: %w", err)
	}
	return nil
}

// copyTree copies the files and folders under src that keep (given their
// slash-separated path relative to src) accepts into dst.
func copyTree(src, dst string, keep func(rel string, d fs.DirEntry) bool) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return os.MkdirAll(dst, 0o755)
		}
		if !keep(filepath.ToSlash(rel), d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

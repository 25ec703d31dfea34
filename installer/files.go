package installer

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
)

// Files says what InstallFiles puts in place: the programs under Prefix/bin,
// the extension's runtime files under Prefix/extension, and a link to the CLI
// in BinDir. Every file, link and directory it creates goes into the install
// record, so that Uninstall removes exactly those.
type Files struct {
	// Prefix is the folder the program lives in, e.g.
	// ~/.local/share/browserbridge. Required and absolute.
	Prefix string
	// Executables are the programs to copy into Prefix/bin, by path. A
	// program that already is the file in Prefix/bin (the installed CLI
	// installing itself again) is left as it is and still recorded.
	Executables []string
	// ExtensionSrc is the extension's source folder. Only its runtime files
	// (see RuntimeFile) are copied, into a fresh Prefix/extension that
	// replaces the old one whole. Empty copies no extension.
	ExtensionSrc string
	// BinDir, if set, gets a symbolic link named Link to Prefix/bin/Link. An
	// existing symbolic link there is replaced; anything else is left alone
	// and reported.
	BinDir string
	// Link is the name of the program BinDir links to. Empty means no link.
	Link string
}

// FilesResult says what InstallFiles did.
type FilesResult struct {
	// Bin is Prefix/bin.
	Bin string
	// Extension is the installed extension folder, "" if none was copied.
	Extension string
	// ExtensionReplaced is true when an extension was already installed at
	// Extension: a browser that loaded it keeps running the old files until
	// the extension is reloaded.
	ExtensionReplaced bool
	// Link is the link made in BinDir, "" if none.
	Link string
}

// InstallFiles copies the programs and the extension into place and records
// what it created. Executables are copied to a temporary name and renamed
// over the old ones, so a running process keeps its file and nothing
// half-written is ever run.
func InstallFiles(f Files) (*FilesResult, error) {
	if !filepath.IsAbs(f.Prefix) {
		return nil, fmt.Errorf("installing files: the prefix %q is not an absolute path", f.Prefix)
	}
	prefix := filepath.Clean(f.Prefix)
	res := &FilesResult{Bin: filepath.Join(prefix, "bin")}
	run := &Record{Version: recordVersion}
	err := installFiles(f, prefix, res, run)
	if rerr := saveRun(run); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return res, fmt.Errorf("installing files: %w", err)
	}
	return res, nil
}

func installFiles(f Files, prefix string, res *FilesResult, run *Record) error {
	if err := makeDirs(run, res.Bin); err != nil {
		return err
	}
	for _, src := range f.Executables {
		dst := filepath.Join(res.Bin, filepath.Base(src))
		if err := copyExecutable(src, dst); err != nil {
			return err
		}
		run.addFile(dst)
	}
	if f.ExtensionSrc != "" {
		res.Extension = filepath.Join(prefix, "extension")
		replaced, err := installExtension(f.ExtensionSrc, res.Extension, run)
		res.ExtensionReplaced = replaced
		if err != nil {
			return err
		}
	}
	if f.BinDir != "" && f.Link != "" {
		if !filepath.IsAbs(f.BinDir) {
			return fmt.Errorf("the link folder %q is not an absolute path", f.BinDir)
		}
		if err := makeDirs(run, f.BinDir); err != nil {
			return err
		}
		link, target := filepath.Join(f.BinDir, f.Link), filepath.Join(res.Bin, f.Link)
		if err := replaceLink(link, target); err != nil {
			return err
		}
		run.addLink(LinkEntry{Path: link, Target: target})
		res.Link = link
	}
	return nil
}

// MakeDirs creates each directory and its missing parents, and records the
// ones it created, so that Uninstall removes them once they are empty. The
// CLI uses it for the folders the bridge writes into later (state, logs, the
// service manager's unit folder), which would otherwise outlive an uninstall.
func MakeDirs(dirs ...string) error {
	run := &Record{Version: recordVersion}
	err := makeDirs(run, dirs...)
	return errors.Join(err, saveRun(run))
}

func makeDirs(run *Record, dirs ...string) error {
	for _, d := range dirs {
		created, err := mkdirAll(d)
		for _, c := range created {
			run.addDir(c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// saveRun merges run into the record file.
func saveRun(run *Record) error {
	if run.empty() {
		return nil
	}
	path, err := recordPath()
	if err != nil {
		return err
	}
	rec, err := loadRecord(path)
	if err != nil {
		return fmt.Errorf("%w (remove the file to start afresh)", err)
	}
	if rec == nil {
		rec = &Record{}
	}
	rec.merge(run)
	return saveRecord(path, rec)
}

// copyExecutable copies src to dst atomically, so that a host Chrome starts
// meanwhile runs the old program or the new, never a part.
func copyExecutable(src, dst string) error {
	if a, err := os.Stat(src); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	} else if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
		return nil
	}
	// A program is some megabytes: read whole, it goes through the one
	// atomic write.
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := atomicfile.WriteFile(dst, data, 0o755); err != nil {
		return fmt.Errorf("installing %s: %w", dst, err)
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	if err := out.Chmod(mode); err != nil { // regardless of umask
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return nil
}

// RuntimeFile reports whether the extension file at rel (slash-separated,
// relative to the extension folder) is one the browser runs or shows:
// manifest.json, pages, scripts, styles and images. Tests and their helpers
// (anything under test/, *.test.js, *.mjs), Go files, docs and data files
// are not.
func RuntimeFile(rel string) bool {
	rel = filepath.ToSlash(rel)
	if !runtimeDir(rel) {
		return false
	}
	if rel == "manifest.json" {
		return true
	}
	if strings.HasSuffix(rel, ".test.js") {
		return false
	}
	switch strings.ToLower(filepath.Ext(rel)) {
	case ".html", ".js", ".css", ".png", ".svg", ".ico", ".webp":
		return true
	}
	return false
}

// runtimeDir reports whether no folder on the path rel holds only tests,
// packages or hidden files.
func runtimeDir(rel string) bool {
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if part == "test" || part == "node_modules" || strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}

// installExtension copies src's runtime files into a fresh dst.new, then
// swaps it in for dst, so a browser never sees half an extension. It reports
// whether an extension was installed at dst before.
func installExtension(src, dst string, run *Record) (replaced bool, err error) {
	if _, err := os.Stat(filepath.Join(src, "manifest.json")); err != nil {
		return false, fmt.Errorf("the extension source %s has no manifest.json: %w", src, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "manifest.json")); err == nil {
		replaced = true
	}
	fresh, old := dst+".new", dst+".old"
	if err := os.RemoveAll(fresh); err != nil {
		return replaced, err
	}
	if err := os.RemoveAll(old); err != nil {
		return replaced, err
	}
	var files []string
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel != "." && !runtimeDir(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !RuntimeFile(rel) {
			return nil
		}
		to := filepath.Join(fresh, rel)
		if err := os.MkdirAll(filepath.Dir(to), dirMode); err != nil {
			return err
		}
		if err := copyFile(p, to, fileMode); err != nil {
			return err
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		os.RemoveAll(fresh)
		return replaced, fmt.Errorf("copying the extension: %w", err)
	}
	if _, err := os.Lstat(dst); err == nil {
		if err := os.Rename(dst, old); err != nil {
			os.RemoveAll(fresh)
			return replaced, fmt.Errorf("replacing the extension at %s: %w", dst, err)
		}
	}
	if err := os.Rename(fresh, dst); err != nil {
		return replaced, fmt.Errorf("installing the extension at %s: %w", dst, err)
	}
	if err := os.RemoveAll(old); err != nil {
		return replaced, fmt.Errorf("removing the old extension at %s: %w", old, err)
	}
	// Every folder of the fresh copy is install's; Uninstall removes the
	// innermost first.
	run.addDir(dst)
	for _, rel := range files {
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			run.addDir(filepath.Join(dst, d))
		}
		run.addFile(filepath.Join(dst, rel))
	}
	return replaced, nil
}

// replaceLink makes link a symbolic link to target, replacing a symbolic
// link that was there (through a temporary name and a rename) but nothing
// else.
func replaceLink(link, target string) error {
	if fi, err := os.Lstat(link); err == nil && fi.Mode()&fs.ModeSymlink == 0 {
		return fmt.Errorf("%s exists and is not a link; remove it, or pass another folder for the link", link)
	}
	tmp := link + ".new"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("linking %s: %w", link, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("linking %s: %w", link, err)
	}
	return nil
}

// removeLink removes the link at l.Path if it still points at l.Target. It
// reports false, without error, if the link is gone or points elsewhere.
func removeLink(l LinkEntry) (bool, error) {
	target, err := os.Readlink(l.Path)
	if err != nil || target != l.Target {
		return false, nil
	}
	if err := os.Remove(l.Path); err != nil {
		return false, err
	}
	return true, nil
}

// removeFile removes a file Install copied; a missing one is not an error.
func removeFile(p string) (bool, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if fi.IsDir() {
		return false, nil // something else now: not ours
	}
	if err := os.Remove(p); err != nil {
		return false, err
	}
	return true, nil
}

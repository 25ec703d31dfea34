//go:build !windows

package installer

import (
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// extensionSrc is the repository's extension folder.
func extensionSrc(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "extension"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(src, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	return src
}

// listFiles lists the files under root, slash-separated and relative.
func listFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	// import x from '...'; export {x} from '...'; import '...'; import('...')
	jsImport = regexp.MustCompile(`(?:\b(?:import|export)\b[^'"();]*?\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]`)
	// a string naming a file of the extension: 'apps-frame.html',
	// `apps.html?${query}`, chrome.runtime.getURL('icons/a.png')
	jsURL    = regexp.MustCompile("[`'\"]((?:\\.{1,2}/)*[A-Za-z0-9_][A-Za-z0-9_./-]*\\.(?:html|js|css|png|svg))(?:[?#][^`'\"]*)?[`'\"]")
	htmlRef  = regexp.MustCompile(`\b(?:src|href)\s*=\s*["']([^"']+)["']`)
	external = regexp.MustCompile(`^(?:[a-z][a-z0-9+.-]*:|//|#)`)
)

// references are the extension files a file loads, relative to the
// extension folder: what manifest.json names, what a page's src and href
// name, what a module imports.
func references(t *testing.T, root, rel string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	var refs []string
	add := func(ref string) {
		if ref == "" || external.MatchString(ref) {
			return
		}
		ref = strings.SplitN(strings.SplitN(ref, "?", 2)[0], "#", 2)[0]
		if strings.HasPrefix(ref, "/") {
			refs = append(refs, path.Clean(ref[1:]))
			return
		}
		refs = append(refs, path.Join(path.Dir(rel), ref))
	}
	switch path.Ext(rel) {
	case ".json":
		var m struct {
			Background struct {
				ServiceWorker string `json:"service_worker"`
			} `json:"background"`
			Action struct {
				Popup string          `json:"default_popup"`
				Icon  json.RawMessage `json:"default_icon"`
			} `json:"action"`
			Options   string                       `json:"options_page"`
			OptionsUI struct{ Page string }        `json:"options_ui"`
			Icons     map[string]string            `json:"icons"`
			Sandbox   struct{ Pages []string }     `json:"sandbox"`
			ContentJS []struct{ JS, CSS []string } `json:"content_scripts"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, r := range []string{m.Background.ServiceWorker, m.Action.Popup, m.Options, m.OptionsUI.Page} {
			add(r)
		}
		for _, r := range m.Icons {
			add(r)
		}
		var icon string
		var icons map[string]string
		if json.Unmarshal(m.Action.Icon, &icon) == nil {
			add(icon)
		} else if json.Unmarshal(m.Action.Icon, &icons) == nil {
			for _, r := range icons {
				add(r)
			}
		}
		for _, p := range m.Sandbox.Pages {
			add(p)
		}
		for _, c := range m.ContentJS {
			for _, r := range append(c.JS, c.CSS...) {
				add(r)
			}
		}
	case ".html":
		for _, m := range htmlRef.FindAllStringSubmatch(string(data), -1) {
			add(m[1])
		}
	case ".js":
		for _, re := range []*regexp.Regexp{jsImport, jsURL} {
			for _, m := range re.FindAllStringSubmatch(string(data), -1) {
				add(m[1])
			}
		}
	}
	return refs
}

// unused are runtime modules no page or module loads, and why they ship
// anyway: none (the tool names of spec 002 are made by the gateway, in Go).
var unused = map[string]string{}

// TestInstalledExtensionIsWhatItRuns copies the real extension and checks
// that the copy holds no test files, that everything manifest.json, the
// pages and the modules load is there, and that nothing is there that none
// of them loads.
func TestInstalledExtensionIsWhatItRuns(t *testing.T) {
	newSandbox(t)
	prefix := filepath.Join(t.TempDir(), "prefix")
	res, err := InstallFiles(Files{Prefix: prefix, ExtensionSrc: extensionSrc(t)})
	if err != nil {
		t.Fatal(err)
	}
	installed := listFiles(t, res.Extension)
	for _, f := range installed {
		base := path.Base(f)
		if strings.HasPrefix(f, "test/") || strings.Contains(f, "/test/") || strings.HasSuffix(f, ".test.js") ||
			strings.HasSuffix(f, ".go") || strings.HasSuffix(f, ".mjs") || strings.HasSuffix(f, ".yml") ||
			base == "testing.js" || strings.Contains(f, "conformance") || strings.Contains(f, "node_modules") {
			t.Errorf("test or build file installed: %s", f)
		}
	}

	reached := map[string]bool{}
	queue := []string{"manifest.json"}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		if reached[f] {
			continue
		}
		reached[f] = true
		if !slices.Contains(installed, f) {
			t.Errorf("%s is loaded by the extension but was not installed", f)
			continue
		}
		queue = append(queue, references(t, res.Extension, f)...)
	}
	for _, f := range installed {
		if why, ok := unused[f]; ok && !reached[f] {
			t.Logf("%s: installed though nothing loads it yet: %s", f, why)
			continue
		}
		if !reached[f] {
			t.Errorf("%s was installed but nothing in the extension loads it", f)
		}
	}
	if len(reached) < 10 {
		t.Fatalf("only %d files reached from manifest.json: %v", len(reached), reached)
	}
}

func TestRuntimeFile(t *testing.T) {
	for _, tc := range []struct {
		rel  string
		want bool
	}{
		{"manifest.json", true},
		{"popup.html", true},
		{"sw/rpc.js", true},
		{"popup.css", true},
		{"icons/128.png", true},
		{"extension.go", false},
		{"extension_test.go", false},
		{"test/hello.test.js", false},
		{"test/remote/testing.js", false},
		{"test/conformance/client.mjs", false},
		{"tools/x.test.js", false},
		{"node_modules/a/index.js", false},
		{".eslintrc.js", false},
		{"README.md", false},
		{"data.json", false},
	} {
		t.Run(tc.rel, func(t *testing.T) {
			if got := RuntimeFile(tc.rel); got != tc.want {
				t.Fatalf("RuntimeFile(%q) = %v, want %v", tc.rel, got, tc.want)
			}
		})
	}
}

// TestInstallFilesThenUninstallLeavesHomeAsItWas installs programs, the
// extension and a link into a fresh home twice, and checks that Uninstall
// leaves every path, mode, link and content as it was before, but for what
// another program put there meanwhile.
func TestInstallFilesThenUninstallLeavesHomeAsItWas(t *testing.T) {
	s := newSandbox(t)
	src := t.TempDir()
	bb, host := filepath.Join(src, "browserbridge"), filepath.Join(src, "browserbridge-host")
	writeFile(t, bb, "#!/bin/sh\necho bridge\n", 0o755)
	writeFile(t, host, "#!/bin/sh\necho host\n", 0o755)
	writeFile(t, filepath.Join(s.home, ".config", "chromium", "Default", "Preferences"), "{}", 0o600)
	before := fullSnapshot(t, s.home)

	files := Files{
		Prefix:       filepath.Join(s.home, ".local", "share", "browserbridge"),
		Executables:  []string{bb, host},
		ExtensionSrc: extensionSrc(t),
		BinDir:       filepath.Join(s.home, ".local", "bin"),
		Link:         "browserbridge",
	}
	res, err := InstallFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExtensionReplaced {
		t.Error("first install says it replaced an extension")
	}
	if target, err := os.Readlink(res.Link); err != nil || target != filepath.Join(res.Bin, "browserbridge") {
		t.Fatalf("link %s -> %q (%v)", res.Link, target, err)
	}
	if fi, err := os.Stat(filepath.Join(res.Bin, "browserbridge-host")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("host not installed executable: %v %v", fi, err)
	}
	// A stale file from an older extension goes when the folder is replaced.
	writeFile(t, filepath.Join(res.Extension, "old.js"), "", 0o644)
	res, err = InstallFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	if !res.ExtensionReplaced {
		t.Error("second install does not say it replaced the extension")
	}
	if _, err := os.Stat(filepath.Join(res.Extension, "old.js")); !os.IsNotExist(err) {
		t.Errorf("old.js survived replacing the extension: %v", err)
	}
	if err := MakeDirs(filepath.Join(s.home, ".local", "state", "browserbridge")); err != nil {
		t.Fatal(err)
	}

	removed, err := Uninstall()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, res.Link) || !slices.Contains(removed, filepath.Join(res.Extension, "manifest.json")) {
		t.Errorf("removed = %v", removed)
	}
	if after := fullSnapshot(t, s.home); !maps(before, after) {
		t.Fatalf("home differs after uninstall:\n%s", diffSnapshots(before, after))
	}
}

// TestUninstallLeavesOthersThings checks that Uninstall keeps a link that
// now points elsewhere, a file the user put in an installed folder, and that
// folder.
func TestUninstallLeavesOthersThings(t *testing.T) {
	s := newSandbox(t)
	bb := filepath.Join(t.TempDir(), "browserbridge")
	writeFile(t, bb, "#!/bin/sh\n", 0o755)
	prefix, bindir := filepath.Join(s.home, "prefix"), filepath.Join(s.home, "bin")
	if _, err := InstallFiles(Files{Prefix: prefix, Executables: []string{bb}, BinDir: bindir, Link: "browserbridge"}); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(bindir, "browserbridge")
	os.Remove(link)
	if err := os.Symlink("/usr/bin/true", link); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(prefix, "notes.txt")
	writeFile(t, mine, "mine", 0o600)
	if _, err := Uninstall(); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(link); err != nil || target != "/usr/bin/true" {
		t.Errorf("someone else's link %s: %q, %v", link, target, err)
	}
	if b, err := os.ReadFile(mine); err != nil || string(b) != "mine" {
		t.Errorf("the user's file %s: %q, %v", mine, b, err)
	}
	if _, err := os.Stat(filepath.Join(prefix, "bin", "browserbridge")); !os.IsNotExist(err) {
		t.Errorf("installed program left: %v", err)
	}
}

// TestInstallFilesRefusesToReplaceAFile checks that the link step leaves a
// real file in the link's place alone.
func TestInstallFilesRefusesToReplaceAFile(t *testing.T) {
	s := newSandbox(t)
	bb := filepath.Join(t.TempDir(), "browserbridge")
	writeFile(t, bb, "#!/bin/sh\n", 0o755)
	bindir := filepath.Join(s.home, "bin")
	theirs := filepath.Join(bindir, "browserbridge")
	writeFile(t, theirs, "theirs", 0o755)
	_, err := InstallFiles(Files{Prefix: filepath.Join(s.home, "p"), Executables: []string{bb}, BinDir: bindir, Link: "browserbridge"})
	if err == nil || !strings.Contains(err.Error(), "is not a link") {
		t.Fatalf("InstallFiles over a file: %v", err)
	}
	if b, _ := os.ReadFile(theirs); string(b) != "theirs" {
		t.Fatalf("file replaced: %q", b)
	}
}

// entry is one path in a fullSnapshot.
type entry struct {
	mode    fs.FileMode
	target  string // a link's
	content string // a file's
}

// fullSnapshot records every path under root with its mode, link target and
// content.
func fullSnapshot(t *testing.T, root string) map[string]entry {
	t.Helper()
	m := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{mode: fi.Mode()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.target, _ = os.Readlink(p)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.content = string(b)
		}
		m[p] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func maps(a, b map[string]entry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func diffSnapshots(a, b map[string]entry) string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "gone:    "+k)
		} else if w != v {
			out = append(out, "changed: "+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "new:     "+k)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

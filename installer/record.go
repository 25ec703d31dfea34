package installer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
	"github.com/browserbridge/browserbridge/bridge/paths"
)

// recordVersion is the version of the record format this package writes.
const recordVersion = 1

// Record lists what Install wrote, so that Uninstall removes exactly that and
// nothing else. The record file at paths.InstallRecord() holds the union of
// every Install since the last Uninstall, one entry per file, directory or key.
type Record struct {
	// Version is the record format; this package writes 1.
	Version int `json:"version"`
	// Manifests are the host manifest files Install wrote.
	Manifests []ManifestEntry `json:"manifests,omitempty"`
	// Dirs are the directories Install created, outermost first. Uninstall
	// removes each one that is empty.
	Dirs []string `json:"dirs,omitempty"`
	// RegistryKeys are the Windows registry keys Install set or created.
	RegistryKeys []RegistryEntry `json:"registry_keys,omitempty"`
	// Files are the files InstallFiles copied into place: the programs and
	// the extension's files. Uninstall removes each one.
	Files []string `json:"files,omitempty"`
	// Links are the symbolic links InstallFiles made. Uninstall removes a
	// link only while it still points at its Target.
	Links []LinkEntry `json:"links,omitempty"`
}

// LinkEntry is one symbolic link in a Record.
type LinkEntry struct {
	// Path is the link's absolute path.
	Path string `json:"path"`
	// Target is what the link points at, as written.
	Target string `json:"target"`
}

// ManifestEntry is one manifest file in a Record.
type ManifestEntry struct {
	// Path is the manifest file's absolute path.
	Path string `json:"path"`
	// Browsers are the keys of the browsers that read this file; browsers
	// sharing a system directory share one entry. Empty for a --user-data-dir
	// install that named no browser.
	Browsers []string `json:"browsers,omitempty"`
	// HostPath is the host executable the manifest names.
	HostPath string `json:"host_path"`
	// System is true for a system-wide manifest.
	System bool `json:"system,omitempty"`
	// UserDataDir is set when the manifest went into a --user-data-dir.
	UserDataDir string `json:"user_data_dir,omitempty"`
}

// RegistryEntry is one Windows registry key in a Record.
type RegistryEntry struct {
	// Root is "HKCU" or "HKLM".
	Root string `json:"root"`
	// Path is the key's path below Root.
	Path string `json:"path"`
	// Manifest is the manifest path Install wrote as the key's default
	// value. It is empty for a parent key that Install had to create, which
	// Uninstall removes only if it is empty.
	Manifest string `json:"manifest,omitempty"`
}

// String returns the key as Windows writes it, e.g.
// HKCU\Software\Chromium\NativeMessagingHosts\com.browserbridge.host.
func (k RegistryEntry) String() string { return k.Root + `\` + k.Path }

// addManifest adds or updates the entry for m.Path.
func (r *Record) addManifest(m ManifestEntry) {
	for i := range r.Manifests {
		old := &r.Manifests[i]
		if old.Path != m.Path {
			continue
		}
		for _, b := range m.Browsers {
			if !slices.Contains(old.Browsers, b) {
				old.Browsers = append(old.Browsers, b)
			}
		}
		old.HostPath = m.HostPath
		old.System = old.System || m.System
		if m.UserDataDir != "" {
			old.UserDataDir = m.UserDataDir
		}
		return
	}
	m.Browsers = slices.Clone(m.Browsers)
	r.Manifests = append(r.Manifests, m)
}

// addDir records a directory Install created.
func (r *Record) addDir(dir string) {
	if !slices.Contains(r.Dirs, dir) {
		r.Dirs = append(r.Dirs, dir)
	}
}

// addFile records a file InstallFiles copied.
func (r *Record) addFile(p string) {
	if !slices.Contains(r.Files, p) {
		r.Files = append(r.Files, p)
	}
}

// addLink adds or updates the entry for l.Path.
func (r *Record) addLink(l LinkEntry) {
	for i, old := range r.Links {
		if old.Path == l.Path {
			r.Links[i].Target = l.Target
			return
		}
	}
	r.Links = append(r.Links, l)
}

// addKey adds or updates the entry for k's root and path.
func (r *Record) addKey(k RegistryEntry) {
	for i, old := range r.RegistryKeys {
		if old.Root == k.Root && old.Path == k.Path {
			if k.Manifest != "" {
				r.RegistryKeys[i].Manifest = k.Manifest
			}
			return
		}
	}
	r.RegistryKeys = append(r.RegistryKeys, k)
}

// merge adds everything in o to r.
func (r *Record) merge(o *Record) {
	for _, m := range o.Manifests {
		r.addManifest(m)
	}
	for _, d := range o.Dirs {
		r.addDir(d)
	}
	for _, k := range o.RegistryKeys {
		r.addKey(k)
	}
	for _, f := range o.Files {
		r.addFile(f)
	}
	for _, l := range o.Links {
		r.addLink(l)
	}
}

// empty reports whether r lists nothing.
func (r *Record) empty() bool {
	return len(r.Manifests) == 0 && len(r.Dirs) == 0 && len(r.RegistryKeys) == 0 &&
		len(r.Files) == 0 && len(r.Links) == 0
}

// recordPath is the record file's path, with context on error.
func recordPath() (string, error) {
	p, err := paths.InstallRecord()
	if err != nil {
		return "", fmt.Errorf("finding the install record: %w", err)
	}
	return p, nil
}

// loadRecord reads the record at path. A missing file yields (nil, nil).
func loadRecord(path string) (*Record, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading install record: %w", err)
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("reading install record %s: %w", path, err)
	}
	if r.Version > recordVersion {
		return nil, fmt.Errorf("reading install record %s: version %d was written by a newer browserbridge (this one understands %d)", path, r.Version, recordVersion)
	}
	return &r, nil
}

// saveRecord writes r to path atomically, creating the directory if needed;
// directories it creates are added to r before it is written.
func saveRecord(path string, r *Record) error {
	created, err := mkdirAll(filepath.Dir(path))
	for _, d := range created {
		r.addDir(d)
	}
	if err != nil {
		return fmt.Errorf("writing install record: %w", err)
	}
	r.Version = recordVersion
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("writing install record: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing install record: %w", err)
	}
	return nil
}

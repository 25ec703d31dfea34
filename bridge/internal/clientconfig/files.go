package clientconfig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
)

// fileClient is a client configured by a JSON file of its own.
type fileClient struct {
	env  Env
	name string
	// path is the config file and dir the directory whose presence says
	// the client is installed; err when the OS's location is unknown.
	path, dir string
	err       error
	key       string // the object holding the servers
	jsonc     bool   // the client reads comments and trailing commas
	entry     func(Bridge) any
}

func fileClientFor(e Env, name string) fileClient {
	c := fileClient{env: e, name: name, key: "mcpServers"}
	switch name {
	case ClaudeDesktop:
		dir, err := e.appConfigDir("Claude")
		c.dir, c.err = dir, err
		c.path = filepath.Join(dir, "claude_desktop_config.json")
		c.entry = func(b Bridge) any { return stdioEntry{Command: b.Command, Args: b.Args, Env: b.Env} }
	case Cursor:
		c.dir, c.jsonc = filepath.Join(e.Home, ".cursor"), true
		if e.Home == "" {
			c.err = errors.New("no home directory")
		}
		c.path = filepath.Join(c.dir, "mcp.json")
		c.entry = func(b Bridge) any { return b.urlEntry("", b.URL) }
	case VSCode:
		dir, err := e.appConfigDir("Code")
		c.dir, c.err, c.key, c.jsonc = filepath.Join(dir, "User"), err, "servers", true
		c.path = filepath.Join(c.dir, "mcp.json")
		c.entry = func(b Bridge) any { return b.urlEntry("http", b.URL) }
	}
	return c
}

// appConfigDir is where an Electron app named app keeps its user data:
// %APPDATA%\app, ~/Library/Application Support/app, or
// $XDG_CONFIG_HOME/app (~/.config/app).
func (e Env) appConfigDir(app string) (string, error) {
	switch e.goos() {
	case "windows":
		if e.AppData == "" {
			return "", errors.New("%APPDATA% is not set")
		}
		return filepath.Join(e.AppData, app), nil
	case "darwin":
		if e.Home == "" {
			return "", errors.New("no home directory")
		}
		return filepath.Join(e.Home, "Library", "Application Support", app), nil
	}
	if filepath.IsAbs(e.XDGConfigHome) {
		return filepath.Join(e.XDGConfigHome, app), nil
	}
	if e.Home == "" {
		return "", errors.New("no home directory")
	}
	return filepath.Join(e.Home, ".config", app), nil
}

// maxFile bounds a config file read.
const maxFile = 4 << 20

// readFile reads a config file; a missing one is (nil, false, nil).
func readFile(path string) ([]byte, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err == nil && len(data) > maxFile {
		err = fmt.Errorf("%s: over %d MiB, not a client config", path, maxFile>>20)
	}
	return data, true, err
}

func (c fileClient) installed() bool {
	st, err := os.Stat(c.dir)
	return err == nil && st.IsDir()
}

func (c fileClient) result(a Action, detail string) []Result {
	return []Result{{Client: c.name, Entry: EntryName, Action: a, Where: c.path, Detail: detail}}
}

func (c fileClient) load() (*document, []byte, bool, error) {
	data, exists, err := readFile(c.path)
	if err != nil {
		return nil, nil, false, err
	}
	doc, err := parseDocument(c.path, data, c.jsonc)
	return doc, data, exists, err
}

func (c fileClient) add(_ context.Context, b Bridge, opts Options) ([]Result, error) {
	if c.err != nil {
		return nil, fmt.Errorf("%s: %w", c.name, c.err)
	}
	if opts.OnlyFound && !c.installed() {
		return c.result(NotFound, "not installed here (no "+c.dir+"); `browserbridge clients add "+c.name+"` writes its config anyway"), nil
	}
	doc, old, exists, err := c.load()
	if err != nil {
		return nil, err
	}
	want := c.entry(b)
	cur, err := doc.Get(c.key, EntryName)
	if err != nil {
		return nil, err
	}
	action := Added
	switch {
	case cur == nil:
	case same(cur, want):
		return c.result(Unchanged, ""), nil
	case isOurs(cur, b) || opts.Force:
		action = Updated
	default:
		return c.result(NotOurs, fmt.Sprintf("%q in %q is not Browser Bridge's (%s); rerun with --force to replace it", EntryName, c.key, describe(cur))), nil
	}
	out, err := doc.Set(c.key, EntryName, want)
	if err != nil {
		return nil, err
	}
	var madeDirs []string
	if !exists {
		madeDirs = missingDirs(c.dir)
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			return nil, err
		}
	}
	backup, err := writeFile(c.path, old, exists, out)
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", c.path, err)
	}
	if !exists {
		if err := c.env.recordCreated(c.path, madeDirs); err != nil {
			return nil, fmt.Errorf("recording that %s is the bridge's: %w", c.path, err)
		}
	}
	return c.result(action, backup), nil
}

func (c fileClient) remove(_ context.Context, b Bridge, opts Options) ([]Result, error) {
	if c.err != nil {
		return nil, fmt.Errorf("%s: %w", c.name, c.err)
	}
	doc, old, exists, err := c.load()
	if err != nil || !exists {
		return c.result(Absent, ""), err
	}
	cur, err := doc.Get(c.key, EntryName)
	switch {
	case err != nil:
		return nil, err
	case cur == nil:
		return c.result(Absent, ""), nil
	case !isOurs(cur, b) && !opts.Force:
		return c.result(NotOurs, fmt.Sprintf("%q in %q is not Browser Bridge's (%s); rerun with --force to remove it", EntryName, c.key, describe(cur))), nil
	}
	out, err := doc.Remove(c.key, EntryName)
	if err != nil {
		return nil, err
	}
	// A file Add created goes with its last entry, with the folders Add
	// made for it.
	if c.env.createdByAdd(c.path) {
		if left, err := parseDocument(c.path, out, c.jsonc); err == nil && left.onlyEmpty(c.key) {
			gone, err := c.env.dropCreated(c.path)
			if err != nil {
				return nil, fmt.Errorf("removing %s, which add created: %w", c.path, err)
			}
			r := c.result(Removed, "")
			r[0].Deleted = gone
			return r, nil
		}
	}
	// The user's file back as it was before add: the backup of it has
	// served, and goes.
	if bak, ok, _ := readFile(c.path + ".bak"); ok && string(bak) == string(out) {
		if err := rewriteFile(c.path, out); err != nil {
			return nil, fmt.Errorf("writing %s: %w", c.path, err)
		}
		if err := os.Remove(c.path + ".bak"); err != nil {
			return nil, err
		}
		r := c.result(Removed, "")
		r[0].Deleted = []string{c.path + ".bak"}
		return r, nil
	}
	backup, err := writeFile(c.path, old, true, out)
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", c.path, err)
	}
	return c.result(Removed, backup), nil
}

func (c fileClient) status(b Bridge) Status {
	st := Status{Client: c.name, Where: c.path}
	if c.err != nil {
		st.Note, st.Err = c.err.Error(), c.err
		return st
	}
	st.Found = c.installed()
	doc, _, exists, err := c.load()
	if err != nil || !exists {
		st.Err = err
		return st
	}
	cur, err := doc.Get(c.key, EntryName)
	if err != nil {
		st.Err = err
	} else if cur != nil {
		st.Entries = []EntryStatus{{Name: EntryName, Target: describe(cur), Ours: isOurs(cur, b), Current: same(cur, c.entry(b))}}
	}
	return st
}

// writeFile replaces path with data: the previous content old (when
// exists) is first kept in path.bak, then the file (the file a symbolic
// link points to) is replaced atomically in its own mode, so that a client
// reads the old file or the new one, never a part. A new file gets mode
// 0600: it may hold the token. It returns the backup's path, or "".
func writeFile(path string, old []byte, exists bool, data []byte) (string, error) {
	backup := ""
	if exists {
		st, err := os.Stat(path)
		if err != nil {
			return "", err
		}
		backup = path + ".bak"
		if err := atomicfile.WriteFile(backup, old, st.Mode().Perm()); err != nil {
			return "", fmt.Errorf("keeping the previous version: %w", err)
		}
	}
	return backup, atomicfile.WriteFile(path, data, 0o600, atomicfile.KeepMode, atomicfile.FollowLinks)
}

// rewriteFile replaces the existing file at path (through a symbolic
// link) with data, in its mode, keeping no backup.
func rewriteFile(path string, data []byte) error {
	return atomicfile.WriteFile(path, data, 0o600, atomicfile.KeepMode, atomicfile.FollowLinks)
}

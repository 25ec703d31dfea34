// Package stdio runs local stdio MCP servers for the bridge's gateway: it
// reads their configuration (the mcpServers object of
// claude_desktop_config.json), supervises one child process per server
// (restart with capped exponential backoff, truthful state, stderr into the
// log, the whole process group stopped on shutdown), and frames the
// newline-delimited JSON-RPC messages on each child's stdin and stdout.
//
// The package knows nothing of MCP sessions: the layer above (HTTP routes,
// request-id remapping) reads and writes raw JSON-RPC messages through a Conn
// and watches Conn.Done to release its pending calls when a child dies.
package stdio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// StartMode says when a server's shared child is started.
type StartMode string

// Start modes. The zero value "" means StartLazy.
const (
	// StartLazy starts the child on first use (Supervisor.Conn).
	StartLazy StartMode = "lazy"
	// StartBoot starts the child when the Supervisor starts.
	StartBoot StartMode = "boot"
)

// ToolFilter restricts the tools of a server that clients see and may call.
// The gateway applies it; this package only validates it.
type ToolFilter struct {
	// Allow, when not empty, lists the only tools exposed.
	Allow []string `json:"allow,omitempty"`
	// Deny lists tools never exposed, even if Allow names them.
	Deny []string `json:"deny,omitempty"`
}

// ServerConfig is one entry of mcpServers.
//
// Env values are secrets: ServerConfig implements slog.LogValuer and
// fmt.Stringer so that logging or printing it shows env keys only, and no
// error of this package quotes an env value. Use Redacted for other views.
type ServerConfig struct {
	// Name is the key of the entry in mcpServers (not a JSON field).
	Name string `json:"-"`
	// Command is the program to run, looked up in the bridge's PATH.
	Command string `json:"command"`
	// Args are the program's arguments.
	Args []string `json:"args,omitempty"`
	// Env holds variables added to the bridge's environment for the child.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the child's working directory (absolute); "" means the
	// bridge's own.
	Cwd string `json:"cwd,omitempty"`
	// PerSession asks the gateway to give every session its own child
	// (Supervisor.StartPrivate) instead of sharing one.
	PerSession bool `json:"per_session,omitempty"`
	// MaxChildren bounds the per-session children of the server running
	// at once; 0 means the Supervisor's Options.MaxPrivate (by default
	// DefaultMaxPrivate, 8).
	MaxChildren int `json:"max_children,omitempty"`
	// Start is when the shared child starts; "" means StartLazy.
	Start StartMode `json:"start,omitempty"`
	// Tools, if set, filters the server's tools.
	Tools *ToolFilter `json:"tools,omitempty"`
}

// redactedValue replaces env values in Redacted views.
const redactedValue = "[redacted]"

// Redacted returns a copy whose env values are replaced by "[redacted]",
// safe to log or print.
func (c ServerConfig) Redacted() ServerConfig {
	r := c
	r.Args = append([]string(nil), c.Args...)
	if c.Env != nil {
		r.Env = make(map[string]string, len(c.Env))
		for k := range c.Env {
			r.Env[k] = redactedValue
		}
	}
	if c.Tools != nil {
		t := *c.Tools
		r.Tools = &t
	}
	return r
}

// envKeys returns the env keys, sorted.
func (c ServerConfig) envKeys() []string {
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// LogValue logs the entry with env keys but never env values.
func (c ServerConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", c.Name),
		slog.String("command", c.Command),
		slog.Any("args", c.Args),
		slog.Any("env_keys", c.envKeys()),
		slog.String("cwd", c.Cwd),
		slog.Bool("per_session", c.PerSession),
		slog.Int("max_children", c.MaxChildren),
		slog.String("start", string(c.startMode())),
	)
}

// String shows the entry with env values redacted.
func (c ServerConfig) String() string {
	return fmt.Sprintf("%s: %s %q env=%v cwd=%q", c.Name, c.Command, c.Args, c.envKeys(), c.Cwd)
}

func (c ServerConfig) startMode() StartMode {
	if c.Start == "" {
		return StartLazy
	}
	return c.Start
}

// namePattern is a DNS label: server names become host names
// ({name}.{prefix}.{domain}) and path segments.
var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// maxMaxChildren is the largest max_children an entry may set: each child
// is a process, and thousands of them would take the machine down.
const maxMaxChildren = 1024

// maxConfigSize bounds the file ParseServers and ParseClaudeDesktop accept.
const maxConfigSize = 4 << 20

// ParseServers decodes a claude_desktop_config.json-style document,
// {"mcpServers": {"name": {...}}}, strictly: unknown keys, values of the
// wrong type, duplicate server names, trailing data and invalid entries are
// refused with an error naming the server and key, such as
//
//	mcpServers.memory.comand: unknown key
//
// Each returned ServerConfig has Name set. Errors never quote env values.
func ParseServers(data []byte) (map[string]ServerConfig, error) {
	if err := checkSize(data, "servers config", `write {"mcpServers": {}}`); err != nil {
		return nil, err
	}
	var top struct {
		MCPServers json.RawMessage `json:"mcpServers"`
	}
	if err := decodeStrict(data, &top, ""); err != nil {
		return nil, err
	}
	if absent(top.MCPServers) {
		return nil, errors.New(`mcpServers: missing; the file must be {"mcpServers": {"name": {"command": ...}}}`)
	}
	return DecodeServers(top.MCPServers, "mcpServers")
}

// DecodeServers decodes an mcpServers object itself, {"name": {...}, ...},
// as strictly as ParseServers, for documents that embed it (the bridge's
// own config). Every error's key path starts with prefix, the object's path
// in the enclosing document ("mcpServers" gives mcpServers.memory.comand).
// An absent or null object is an error: callers that treat a missing key as
// "no servers" check for it first. Each returned ServerConfig has Name set.
// Errors never quote env values.
func DecodeServers(raw json.RawMessage, prefix string) (map[string]ServerConfig, error) {
	servers := make(map[string]ServerConfig)
	err := eachServer(raw, prefix, func(name string, entry json.RawMessage) error {
		if _, dup := servers[name]; dup {
			return fmt.Errorf("%s: the server is defined twice", keyPath(prefix, name))
		}
		c, err := decodeEntry(name, entry, prefix)
		if err != nil {
			return err
		}
		servers[name] = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return servers, nil
}

// EntryError is an entry of Claude Desktop's mcpServers that
// ParseClaudeDesktop refused (Import skips it).
type EntryError struct {
	// Name is the server's key in mcpServers.
	Name string
	// Err says why, naming the server and key; it never quotes env values.
	Err error
}

func (e *EntryError) Error() string { return e.Err.Error() }
func (e *EntryError) Unwrap() error { return e.Err }

// ParseClaudeDesktop decodes Claude Desktop's own claude_desktop_config.json.
// Unlike ParseServers it ignores the top-level keys other than mcpServers
// (globalShortcut, preferences and whatever later versions add), and a file
// without mcpServers holds no servers (an empty map, no error). The entries
// under mcpServers are decoded as strictly as ParseServers decodes them.
//
// Claude Desktop may accept keys in an entry that the gateway does not know.
// Such an entry is refused, not trimmed, because dropping a key could change
// what the server does: the error names the server and the key, such as
//
//	mcpServers.github.disabled: unknown key
//
// Every refused entry is reported, as an *EntryError joined with
// errors.Join (unwrap with Unwrap() []error); Import instead skips such
// entries and imports the others. Errors never quote env values.
func ParseClaudeDesktop(data []byte) (map[string]ServerConfig, error) {
	servers, bad, err := parseClaudeDesktop(data, "claude desktop config")
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		errs := make([]error, len(bad))
		for i, e := range bad {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return servers, nil
}

// parseClaudeDesktop is ParseClaudeDesktop with the refused entries
// returned apart, sorted by name; err is for the document as a whole, and
// starts with doc, the document's name.
func parseClaudeDesktop(data []byte, doc string) (map[string]ServerConfig, []*EntryError, error) {
	if err := checkSize(data, doc, `a Claude Desktop config is a JSON object such as {"mcpServers": {}}`); err != nil {
		return nil, nil, err
	}
	var top struct {
		MCPServers json.RawMessage `json:"mcpServers"`
	}
	if err := decodeJSON(data, &top, "", doc, false); err != nil {
		return nil, nil, err
	}
	servers := make(map[string]ServerConfig)
	if absent(top.MCPServers) {
		return servers, nil, nil
	}
	const prefix = "mcpServers"
	seen := make(map[string]bool)
	var bad []*EntryError
	err := eachServer(top.MCPServers, prefix, func(name string, entry json.RawMessage) error {
		if seen[name] {
			// Which of the two Claude Desktop uses is its parser's choice:
			// import neither rather than guess.
			return fmt.Errorf("%s: the server is defined twice", keyPath(prefix, name))
		}
		seen[name] = true
		c, err := decodeEntry(name, entry, prefix)
		if err != nil {
			var uk *unknownKeyError
			if errors.As(err, &uk) {
				err = fmt.Errorf("%s: unknown key (Claude Desktop may accept it, the gateway does not know it)", uk.key)
			}
			bad = append(bad, &EntryError{Name: name, Err: err})
			return nil
		}
		servers[name] = c
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", doc, err)
	}
	sort.Slice(bad, func(i, j int) bool { return bad[i].Name < bad[j].Name })
	return servers, bad, nil
}

// checkSize refuses an oversized or empty document; hint says what an
// empty one should contain.
func checkSize(data []byte, what, hint string) error {
	if len(data) > maxConfigSize {
		return fmt.Errorf("%s: larger than %d MiB", what, maxConfigSize>>20)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("%s: the file is empty; %s", what, hint)
	}
	return nil
}

// absent reports whether a decoded member was missing or null.
func absent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// keyPath joins a key to the path of its parent ("" for the top level).
func keyPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// eachServer walks the mcpServers object raw in document order, calling fn
// with each name and its raw entry; an error of fn stops the walk.
func eachServer(raw json.RawMessage, prefix string, fn func(name string, entry json.RawMessage) error) error {
	where := prefix
	if where == "" {
		where = "mcpServers"
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return fmt.Errorf("%s: missing; it must be an object of servers", where)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("%s: must be an object of servers, not %s", where, jsonKind(raw))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%s: not valid JSON: %s", where, syntaxProblem(err))
		}
		name := tok.(string) // object keys are strings
		var entry json.RawMessage
		if err := dec.Decode(&entry); err != nil {
			return fmt.Errorf("%s: not valid JSON: %s", keyPath(prefix, quoteName(name)), syntaxProblem(err))
		}
		if err := fn(name, entry); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return fmt.Errorf("%s: not valid JSON: %s", where, syntaxProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: unexpected data after the object", where)
	}
	return nil
}

// decodeEntry decodes and validates the entry called name of the
// mcpServers object at prefix.
func decodeEntry(name string, raw json.RawMessage, prefix string) (ServerConfig, error) {
	if !namePattern.MatchString(name) {
		return ServerConfig{}, fmt.Errorf("%s: bad server name: use 1-63 lowercase letters, digits and hyphens, starting and ending with a letter or digit (a DNS label, since the name becomes a host name and a path segment)", keyPath(prefix, quoteName(name)))
	}
	p := keyPath(prefix, name)
	if jsonKind(raw) != "an object" {
		return ServerConfig{}, fmt.Errorf("%s: must be an object, not %s", p, jsonKind(raw))
	}
	c, err := decodeServer(raw, p)
	if err != nil {
		return ServerConfig{}, err
	}
	c.Name = name
	if err := c.validate(p); err != nil {
		return ServerConfig{}, err
	}
	return c, nil
}

// decodeServer decodes one entry strictly; nested objects are decoded one
// level at a time so that errors carry their full key path.
func decodeServer(raw json.RawMessage, prefix string) (ServerConfig, error) {
	var w struct {
		ServerConfig
		Env   map[string]json.RawMessage `json:"env,omitempty"`
		Tools json.RawMessage            `json:"tools,omitempty"`
	}
	if err := decodeStrict(raw, &w, prefix); err != nil {
		return ServerConfig{}, err
	}
	c := w.ServerConfig
	if w.Env != nil {
		c.Env = make(map[string]string, len(w.Env))
		for k, v := range w.Env {
			var s string
			if jsonKind(v) != "a string" || json.Unmarshal(v, &s) != nil {
				return ServerConfig{}, fmt.Errorf("%s.env.%s: must be a string, not %s", prefix, k, jsonKind(v))
			}
			c.Env[k] = s
		}
	}
	if len(w.Tools) > 0 && string(w.Tools) != "null" {
		if jsonKind(w.Tools) != "an object" {
			return ServerConfig{}, fmt.Errorf("%s.tools: must be an object, not %s", prefix, jsonKind(w.Tools))
		}
		c.Tools = new(ToolFilter)
		if err := decodeStrict(w.Tools, c.Tools, prefix+".tools"); err != nil {
			return ServerConfig{}, err
		}
	}
	return c, nil
}

// quoteName quotes a bad name only when it would not read plainly.
func quoteName(name string) string {
	if name == "" || strings.ContainsAny(name, " .\t\n\"") {
		return fmt.Sprintf("%q", name)
	}
	return name
}

// Validate checks an entry; errors start with mcpServers.{name}.{key}.
func (c ServerConfig) Validate() error {
	return c.validate("mcpServers." + c.Name)
}

// validate is Validate with errors under the entry's path p.
func (c ServerConfig) validate(p string) error {
	if !namePattern.MatchString(c.Name) {
		return fmt.Errorf("%s: bad server name (a DNS label: lowercase letters, digits, hyphens)", p)
	}
	if strings.TrimSpace(c.Command) == "" {
		return fmt.Errorf("%s.command: missing; name the program to run (e.g. \"npx\")", p)
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%s.env: key %q is not a variable name", p, k)
		}
	}
	for _, a := range c.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%s.args: an argument contains a NUL byte", p)
		}
	}
	if c.Cwd != "" && !filepath.IsAbs(c.Cwd) {
		return fmt.Errorf("%s.cwd: %q must be an absolute path", p, c.Cwd)
	}
	if c.MaxChildren < 0 || c.MaxChildren > maxMaxChildren {
		return fmt.Errorf("%s.max_children: %d is outside 0-%d (0 means the gateway's default)", p, c.MaxChildren, maxMaxChildren)
	}
	switch c.Start {
	case "", StartLazy, StartBoot:
	default:
		return fmt.Errorf("%s.start: %q must be \"lazy\" or \"boot\"", p, c.Start)
	}
	if c.Tools != nil {
		for key, list := range map[string][]string{"allow": c.Tools.Allow, "deny": c.Tools.Deny} {
			for i, name := range list {
				if strings.TrimSpace(name) == "" {
					return fmt.Errorf("%s.tools.%s[%d]: empty tool name", p, key, i)
				}
			}
		}
	}
	return nil
}

// decodeStrict decodes data into v refusing unknown keys and trailing
// data; errors name the key under prefix. Values are never quoted.
func decodeStrict(data []byte, v any, prefix string) error {
	return decodeJSON(data, v, prefix, "servers config", true)
}

// unknownKeyError is a key the decoded struct does not have.
type unknownKeyError struct{ key string }

func (e *unknownKeyError) Error() string { return e.key + ": unknown key (check its spelling)" }

// decodeJSON decodes data into v, refusing trailing data and, when strict,
// unknown keys; errors name the key under prefix, or the document doc.
// Values are never quoted.
func decodeJSON(data []byte, v any, prefix, doc string, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(v)
	if err == nil {
		if dec.More() {
			return fmt.Errorf("%s: unexpected data after the JSON object", doc)
		}
		return nil
	}
	key := func(k string) string { return keyPath(prefix, k) }
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		line := 1 + bytes.Count(data[:min(int(syntax.Offset), len(data))], []byte("\n"))
		where := doc
		if prefix != "" {
			where = prefix
		}
		return fmt.Errorf("%s: not valid JSON (line %d): %v", where, line, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Errorf("%s: must be a JSON object, not %s", doc, valueName(typ.Value))
		}
		field := strings.TrimPrefix(typ.Field, "ServerConfig.") // the embedded struct of decodeServer
		return fmt.Errorf("%s: must be %s, not %s", key(field), typeName(typ.Type.Kind().String()), valueName(typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &unknownKeyError{key(name)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: not valid JSON (truncated)", doc)
	}
	return fmt.Errorf("%s: %w", doc, err)
}

func typeName(kind string) string {
	switch kind {
	case "slice":
		return "a list"
	case "struct", "map", "ptr":
		return "an object"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int":
		return "a whole number"
	}
	return "a " + kind
}

// valueName names a JSON kind as UnmarshalTypeError.Value spells it.
func valueName(v string) string {
	switch v {
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "bool":
		return "true or false"
	case "string", "number":
		return "a " + v
	}
	return v
}

// jsonKind names the kind of a JSON value from its first byte.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}

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

// maxConfigSize bounds the file ParseServers accepts.
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
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("servers config: larger than %d MiB", maxConfigSize>>20)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New(`servers config: the file is empty; write {"mcpServers": {}}`)
	}
	var top struct {
		MCPServers json.RawMessage `json:"mcpServers"`
	}
	if err := decodeStrict(data, &top, ""); err != nil {
		return nil, err
	}
	if len(top.MCPServers) == 0 || string(top.MCPServers) == "null" {
		return nil, errors.New(`mcpServers: missing; the file must be {"mcpServers": {"name": {"command": ...}}}`)
	}
	dec := json.NewDecoder(bytes.NewReader(top.MCPServers))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("mcpServers: must be an object of servers, not %s", jsonKind(top.MCPServers))
	}
	servers := make(map[string]ServerConfig)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("mcpServers: %w", err)
		}
		name := tok.(string) // object keys are strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("mcpServers.%s: %w", name, err)
		}
		if _, dup := servers[name]; dup {
			return nil, fmt.Errorf("mcpServers.%s: the server is defined twice", name)
		}
		if !namePattern.MatchString(name) {
			return nil, fmt.Errorf("mcpServers.%s: bad server name: use 1-63 lowercase letters, digits and hyphens, starting and ending with a letter or digit (a DNS label, since the name becomes a host name and a path segment)", quoteName(name))
		}
		prefix := "mcpServers." + name
		if jsonKind(raw) != "an object" {
			return nil, fmt.Errorf("%s: must be an object, not %s", prefix, jsonKind(raw))
		}
		c, err := decodeServer(raw, prefix)
		if err != nil {
			return nil, err
		}
		c.Name = name
		if err := c.Validate(); err != nil {
			return nil, err
		}
		servers[name] = c
	}
	return servers, nil
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
	p := "mcpServers." + c.Name
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
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if dec.More() {
			return errors.New("servers config: unexpected data after the JSON object")
		}
		return nil
	}
	key := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		line := 1 + bytes.Count(data[:min(int(syntax.Offset), len(data))], []byte("\n"))
		where := "servers config"
		if prefix != "" {
			where = prefix
		}
		return fmt.Errorf("%s: not valid JSON (line %d): %v", where, line, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Errorf("servers config: must be a JSON object, not %s", valueName(typ.Value))
		}
		field := strings.TrimPrefix(typ.Field, "ServerConfig.") // the embedded struct of decodeServer
		return fmt.Errorf("%s: must be %s, not %s", key(field), typeName(typ.Type.Kind().String()), valueName(typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return fmt.Errorf("%s: unknown key (check its spelling)", key(name))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("servers config: not valid JSON (truncated)")
	}
	return fmt.Errorf("servers config: %w", err)
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

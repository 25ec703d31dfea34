package stdio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
)

// ImportOptions configures Import. The zero value adds new servers, leaves
// identical ones alone and refuses to overwrite one that differs.
type ImportOptions struct {
	// Replace overwrites a server of the same name whose config differs,
	// instead of refusing the import.
	Replace bool
	// SourceName and DestName name src and dst in errors about either
	// document as a whole (their file paths, say). "" means "claude
	// desktop config" and "destination".
	SourceName, DestName string
}

// ImportAction is what Import does with one server of the source.
type ImportAction string

// Import actions, as reported in ImportResult.
const (
	// ImportAdded: the server was not in the destination; it is added.
	ImportAdded ImportAction = "added"
	// ImportReplaced: the destination had a different config under the
	// same name; ImportOptions.Replace let the source's overwrite it.
	ImportReplaced ImportAction = "replaced"
	// ImportUnchanged: the destination has the same config already.
	ImportUnchanged ImportAction = "unchanged"
	// ImportSkipped: the entry cannot be imported; Reason says why.
	ImportSkipped ImportAction = "skipped"
	// ImportConflict: the destination has a different config under the
	// same name and Replace is not set; Import refuses the whole import.
	ImportConflict ImportAction = "conflict"
)

// ImportResult is Import's verdict on one server of the source.
type ImportResult struct {
	// Name is the server's key in mcpServers.
	Name string
	// Action is what Import does with it.
	Action ImportAction
	// Reason says why a server is skipped or conflicts; "" otherwise. It
	// never quotes env values.
	Reason string
}

// ImportReport is the outcome of Import.
type ImportReport struct {
	// Results has one entry per server of the source, sorted by name.
	Results []ImportResult
	// Doc is the new destination document, indented with two spaces; nil
	// when nothing would change or the import is refused.
	Doc []byte
}

// ConflictError refuses an import that would overwrite servers configured
// differently in the destination (see ImportOptions.Replace).
type ConflictError struct {
	// Names are the conflicting servers, sorted.
	Names []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("already configured differently: %s", strings.Join(e.Names, ", "))
}

// Import copies the mcpServers entries of src, Claude Desktop's
// claude_desktop_config.json (read as ParseClaudeDesktop reads it), into
// dst, a JSON object with an mcpServers key: the bridge's config or a
// servers file. An empty dst is taken as {}.
//
// Every other key of dst, and every server of dst that src does not name,
// is kept with its value unchanged and in its place; new servers are
// appended in name order. The whole document is re-indented.
//
// Entries of src that cannot be imported are skipped, not fatal: those
// ParseClaudeDesktop refuses (an unknown key, a bad name...) and entries
// that run Browser Bridge itself (browserbridge stdio), which the gateway
// would otherwise serve to itself. A server whose name dst has with a
// different config is a conflict unless opts.Replace: then Import returns
// a *ConflictError together with the report, whose Doc is nil, so that the
// caller can show every server's verdict. Servers are compared after
// normalisation (absent and empty args or env are the same, start ""
// is "lazy").
//
// Errors for dst or src as a whole (not JSON, not an object, an invalid
// mcpServers in dst) name the key at fault; no error or Reason quotes an
// env value.
func Import(dst, src []byte, opts ImportOptions) (ImportReport, error) {
	var report ImportReport
	srcName, dstName := opts.SourceName, opts.DestName
	if srcName == "" {
		srcName = "claude desktop config"
	}
	if dstName == "" {
		dstName = "destination"
	}
	incoming, bad, err := parseClaudeDesktop(src, srcName)
	if err != nil {
		return report, err
	}
	members, err := objectMembers(dst)
	if err != nil {
		return report, fmt.Errorf("%s: %w", dstName, err)
	}
	serversAt := -1
	for i, m := range members {
		if m.key == "mcpServers" {
			serversAt = i
		}
	}
	var entries []docMember
	existing := map[string]ServerConfig{}
	if serversAt >= 0 && !absent(members[serversAt].raw) {
		raw := members[serversAt].raw
		if existing, err = DecodeServers(raw, "mcpServers"); err != nil {
			return report, fmt.Errorf("%s: %w (fix it before importing)", dstName, err)
		}
		if entries, err = objectMembers(raw); err != nil {
			return report, fmt.Errorf("%s: mcpServers: %w", dstName, err)
		}
	}

	for _, e := range bad {
		report.Results = append(report.Results, ImportResult{Name: e.Name, Action: ImportSkipped, Reason: e.Err.Error()})
	}
	var conflicts []string
	changed := false
	for _, name := range sortedNames(incoming) {
		c := incoming[name]
		r := ImportResult{Name: name}
		old, exists := existing[name]
		switch {
		case runsBridge(c):
			r.Action, r.Reason = ImportSkipped, "it runs Browser Bridge itself (browserbridge stdio), which the gateway would serve to itself"
		case !exists:
			r.Action = ImportAdded
		case sameServer(old, c):
			r.Action = ImportUnchanged
		case opts.Replace:
			r.Action = ImportReplaced
		default:
			r.Action, r.Reason = ImportConflict, "configured differently in the destination"
			conflicts = append(conflicts, name)
		}
		report.Results = append(report.Results, r)
		if r.Action != ImportAdded && r.Action != ImportReplaced {
			continue
		}
		changed = true
		raw, err := marshalEntry(c)
		if err != nil {
			return ImportReport{}, fmt.Errorf("mcpServers.%s: %w", name, err)
		}
		if r.Action == ImportAdded {
			entries = append(entries, docMember{name, raw})
			continue
		}
		for i := range entries {
			if entries[i].key == name {
				entries[i].raw = raw
			}
		}
	}
	sort.SliceStable(report.Results, func(i, j int) bool { return report.Results[i].Name < report.Results[j].Name })
	if len(conflicts) > 0 {
		return report, &ConflictError{Names: conflicts}
	}
	if !changed {
		return report, nil
	}
	servers := docMember{"mcpServers", encodeObject(entries)}
	if serversAt >= 0 {
		members[serversAt] = servers
	} else {
		members = append(members, servers)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, encodeObject(members), "", "  "); err != nil {
		return ImportReport{}, fmt.Errorf("encoding the merged document: %w", err)
	}
	out.WriteByte('\n')
	report.Doc = out.Bytes()
	return report, nil
}

// docMember is one key of a JSON object with its raw value.
type docMember struct {
	key string
	raw json.RawMessage
}

// objectMembers splits a JSON object into its members in document order;
// empty data is the empty object. Duplicate keys are refused, since the
// value a reader would use is the reader's choice.
func objectMembers(data []byte) ([]docMember, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %s", syntaxProblem(err))
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("must be a JSON object, not %s", jsonKind(data))
	}
	var members []docMember
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not valid JSON: %s", syntaxProblem(err))
		}
		key := tok.(string) // object keys are strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%s: not valid JSON: %s", quoteName(key), syntaxProblem(err))
		}
		if seen[key] {
			return nil, fmt.Errorf("%s: the key appears twice", quoteName(key))
		}
		seen[key] = true
		members = append(members, docMember{key, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not valid JSON: %s", syntaxProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON object")
	}
	return members, nil
}

// syntaxProblem describes a decoding error, "truncated" for an early end.
func syntaxProblem(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "truncated"
	}
	return err.Error()
}

// encodeObject writes members as a compact JSON object.
func encodeObject(members []docMember) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key) // a string always marshals
		b.Write(k)
		b.WriteByte(':')
		if err := json.Compact(&b, m.raw); err != nil {
			b.Write(m.raw) // raw came from a decoder: valid JSON
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// marshalEntry encodes an entry as the destination stores it, without
// escaping <, > and & (they are common in arguments).
func marshalEntry(c ServerConfig) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(normalizeServer(c)); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(b.Bytes()), nil
}

// normalizeServer drops what does not change a server's meaning: empty args, env
// and tool lists, the default start mode and the name.
func normalizeServer(c ServerConfig) ServerConfig {
	c.Name = ""
	if len(c.Args) == 0 {
		c.Args = nil
	}
	if len(c.Env) == 0 {
		c.Env = nil
	}
	if c.Start == StartLazy {
		c.Start = ""
	}
	if c.Tools != nil {
		t := *c.Tools
		if len(t.Allow) == 0 {
			t.Allow = nil
		}
		if len(t.Deny) == 0 {
			t.Deny = nil
		}
		c.Tools = &t
		if t.Allow == nil && t.Deny == nil {
			c.Tools = nil
		}
	}
	return c
}

// sameServer reports whether two entries configure the same server.
func sameServer(a, b ServerConfig) bool {
	return reflect.DeepEqual(normalizeServer(a), normalizeServer(b))
}

// runsBridge reports whether c runs `browserbridge stdio`, the bridge's
// own tools relayed over stdio.
func runsBridge(c ServerConfig) bool {
	base := c.Command[strings.LastIndexAny(c.Command, `/\`)+1:]
	base = strings.TrimSuffix(strings.ToLower(base), ".exe")
	return base == "browserbridge" && len(c.Args) > 0 && c.Args[0] == "stdio"
}

func sortedNames(m map[string]ServerConfig) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

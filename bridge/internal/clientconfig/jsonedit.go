package clientconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// document is a client's config file, edited in place: Set and Remove change
// the bytes of one entry of one object and leave every other byte as the
// user wrote it (order, indentation, comments where allowed).
//
// Offsets come from plain, a copy of src of the same length in which the
// comments and trailing commas that JSONC allows are blanked out (newlines
// kept), so that plain is strict JSON and its offsets are src's.
type document struct {
	name  string // the file, for errors
	src   []byte
	plain []byte
	// commas is plain with its trailing commas, for Remove to see.
	commas []byte
}

// parseDocument reads src as a JSON object (JSONC, with // and /* */
// comments and trailing commas, when jsonc is set). Empty src is {}.
// Errors name the file and the line.
func parseDocument(name string, src []byte, jsonc bool) (*document, error) {
	if len(bytes.TrimSpace(src)) == 0 {
		src = []byte("{\n}\n")
	}
	d := &document{name: name, src: src, plain: src, commas: src}
	if jsonc {
		d.commas = blankComments(src)
		d.plain = blankTrailingCommas(d.commas)
	}
	dec := json.NewDecoder(bytes.NewReader(d.plain))
	var v any
	if err := dec.Decode(&v); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, fmt.Errorf("%s: not valid JSON on line %d: %v (fix it, or move it away, and run this again)", name, d.line(int(syn.Offset)), syn)
		}
		return nil, fmt.Errorf("%s: not valid JSON: %v (fix it, or move it away, and run this again)", name, err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%s: not valid JSON on line %d: data after the top-level object", name, d.line(int(dec.InputOffset())))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%s: the file holds %s, not a JSON object", name, kindOf(v))
	}
	// Duplicate keys (at the top and one level down, where the servers
	// are): which value a client uses is its own choice, so an edit could
	// not know which one to change.
	top, err := d.object(d.start(), "")
	if err != nil {
		return nil, err
	}
	for _, m := range top.members {
		if d.plain[m.valStart] == '{' {
			if _, err := d.object(m.valStart, m.key); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

// line returns the 1-based line of offset off.
func (d *document) line(off int) int {
	return 1 + bytes.Count(d.src[:min(max(off, 0), len(d.src))], []byte("\n"))
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	}
	return "an object"
}

// member is one key of an object, with the offsets of its key and value.
type member struct {
	key                        string
	keyStart, valStart, valEnd int
}

// object is an object's braces and members.
type object struct {
	open, close int // offsets of { and }
	members     []member
}

func (o object) find(key string) int {
	for i, m := range o.members {
		if m.key == key {
			return i
		}
	}
	return -1
}

// start is the offset of the top-level object's brace.
func (d *document) start() int { return skipSpace(d.plain, 0) }

// object scans the object whose { is at off; path names it in errors.
func (d *document) object(off int, path string) (object, error) {
	o := object{open: off}
	i := skipSpace(d.plain, off+1)
	for d.plain[i] != '}' {
		if d.plain[i] == ',' {
			i = skipSpace(d.plain, i+1)
			continue
		}
		keyEnd := scanValue(d.plain, i)
		var key string
		if err := json.Unmarshal(d.plain[i:keyEnd], &key); err != nil {
			return o, fmt.Errorf("%s: reading a key on line %d: %v", d.name, d.line(i), err)
		}
		colon := skipSpace(d.plain, keyEnd)
		valStart := skipSpace(d.plain, colon+1)
		valEnd := scanValue(d.plain, valStart)
		if o.find(key) >= 0 {
			return o, fmt.Errorf("%s: key %q appears twice in %s (line %d); remove one and run this again", d.name, key, objName(path), d.line(i))
		}
		o.members = append(o.members, member{key: key, keyStart: i, valStart: valStart, valEnd: valEnd})
		i = skipSpace(d.plain, valEnd)
	}
	o.close = i
	return o, nil
}

func objName(path string) string {
	if path == "" {
		return "the top-level object"
	}
	return fmt.Sprintf("%q", path)
}

// container returns the object under the top-level key, and whether the key
// is there at all. A key whose value is null counts as absent; any other
// value that is not an object is an error.
func (d *document) container(key string) (top object, c object, found bool, err error) {
	if top, err = d.object(d.start(), ""); err != nil {
		return
	}
	i := top.find(key)
	if i < 0 {
		return top, c, false, nil
	}
	m := top.members[i]
	switch d.plain[m.valStart] {
	case '{':
		c, err = d.object(m.valStart, key)
		return top, c, true, err
	case 'n':
		return top, c, false, nil
	}
	return top, c, false, fmt.Errorf("%s: key %q on line %d is not an object; fix it and run this again", d.name, key, d.line(m.keyStart))
}

// Get returns the raw value of entry name under the top-level key, or nil.
func (d *document) Get(key, name string) (json.RawMessage, error) {
	_, c, found, err := d.container(key)
	if err != nil || !found {
		return nil, err
	}
	i := c.find(name)
	if i < 0 {
		return nil, nil
	}
	m := c.members[i]
	return json.RawMessage(d.plain[m.valStart:m.valEnd]), nil
}

// Names returns the entries under the top-level key, in file order.
func (d *document) Names(key string) ([]string, error) {
	_, c, _, err := d.container(key)
	var names []string
	for _, m := range c.members {
		names = append(names, m.key)
	}
	return names, err
}

// Set returns the document with entry name under the top-level key set to
// value: replaced in place if there, else appended after the last entry
// (the key is added to the top-level object if missing). New text follows
// the file's indentation; a file on one line stays on one line.
func (d *document) Set(key, name string, value any) ([]byte, error) {
	top, c, found, err := d.container(key)
	if err != nil {
		return nil, err
	}
	unit := d.indentUnit(top)
	if found {
		if i := c.find(name); i >= 0 {
			m := c.members[i]
			v, err := encode(value, d.lineIndent(m.keyStart), unit)
			if err != nil {
				return nil, err
			}
			return splice(d.src, m.valStart, m.valEnd, v), nil
		}
		return d.insert(c, name, value, unit)
	}
	// {name: value}, encoded as the value of a member indented by ind.
	wrapped := func(ind string) ([]byte, error) {
		v, err := encode(value, ind+unit, unit)
		if err != nil {
			return nil, err
		}
		if unit == "" {
			return []byte("{" + quote(name) + ": " + string(v) + "}"), nil
		}
		return []byte("{\n" + ind + unit + quote(name) + ": " + string(v) + "\n" + ind + "}"), nil
	}
	if i := top.find(key); i >= 0 { // "key": null
		m := top.members[i]
		v, err := wrapped(d.lineIndent(m.keyStart))
		if err != nil {
			return nil, err
		}
		return splice(d.src, m.valStart, m.valEnd, v), nil
	}
	return d.insert(top, key, rawValue(wrapped), unit)
}

// rawValue is a value insert encodes by calling it with the indentation.
type rawValue func(indent string) ([]byte, error)

// insert adds "key": value as the last member of o.
func (d *document) insert(o object, key string, value any, unit string) ([]byte, error) {
	enc := func(ind string) ([]byte, error) {
		if f, ok := value.(rawValue); ok {
			return f(ind)
		}
		return encode(value, ind, unit)
	}
	if len(o.members) == 0 {
		if unit == "" {
			v, err := enc("")
			if err != nil {
				return nil, err
			}
			return splice(d.src, o.open+1, o.close, []byte(quote(key)+": "+string(v))), nil
		}
		outer := d.lineIndent(o.open)
		v, err := enc(outer + unit)
		if err != nil {
			return nil, err
		}
		// Whatever was between the braces (a comment) stays, before the
		// new member.
		inner := strings.TrimRight(string(d.src[o.open+1:o.close]), " \t\r\n")
		return splice(d.src, o.open+1, o.close, []byte(inner+"\n"+outer+unit+quote(key)+": "+string(v)+"\n"+outer)), nil
	}
	last, first := o.members[len(o.members)-1], o.members[0]
	if !d.ownLine(first.keyStart) { // {"a": 1}: on one line, whatever the file
		v, err := encode(value, "", "")
		if f, ok := value.(rawValue); ok {
			v, err = f("")
		}
		if err != nil {
			return nil, err
		}
		return splice(d.src, last.valEnd, last.valEnd, []byte(", "+quote(key)+": "+string(v))), nil
	}
	ind := d.lineIndent(first.keyStart)
	v, err := enc(ind)
	sep := ",\n" + ind
	if err != nil {
		return nil, err
	}
	return splice(d.src, last.valEnd, last.valEnd, []byte(sep+quote(key)+": "+string(v))), nil
}

// Remove returns the document without entry name under the top-level key,
// or nil when it has no such entry. The entry's lines go with it; the
// other entries keep their bytes, and the commas stay valid JSON.
func (d *document) Remove(key, name string) ([]byte, error) {
	_, c, found, err := d.container(key)
	if err != nil || !found {
		return nil, err
	}
	k := c.find(name)
	if k < 0 {
		return nil, nil
	}
	m := c.members[k]
	s, e := m.keyStart, m.valEnd
	// A trailing comma after the entry goes with it: the one before it
	// then trails instead.
	after := skipBlank(d.commas, e)
	comma := d.commas[after] == ','
	if comma {
		after = skipBlank(d.plain, after+1)
	}
	prevComma := -1 // the comma before the entry, when it must go too
	if !comma && k > 0 {
		prevComma = skipSpace(d.plain, c.members[k-1].valEnd)
	}
	switch {
	case d.ownLine(m.keyStart) && (d.plain[after] == '\n' || d.plain[after] == '\r'):
		// The entry's lines go whole, with a comment after it.
		s, e = lineStart(d.plain, m.keyStart), after+1
		if d.plain[after] == '\r' && e < len(d.plain) && d.plain[e] == '\n' {
			e++
		}
	case comma: // "bb": {}, "c": 1
		e = after
	case prevComma >= 0: // "a": 1, "bb": {}}
		s, prevComma = c.members[k-1].valEnd, -1
	}
	out := splice(d.src, s, e, nil)
	if prevComma >= 0 {
		out = splice(out, prevComma, prevComma+1, nil)
	}
	if len(c.members) == 1 {
		// Nothing but blank space left between the braces: write {}.
		if j := skipSpace(out, c.open+1); out[j] == '}' {
			out = splice(out, c.open+1, j, nil)
		}
	}
	return out, nil
}

// multiline reports whether the file spreads over more than one line.
func (d *document) multiline() bool {
	return bytes.Contains(bytes.TrimSpace(d.src), []byte("\n"))
}

// ownLine reports whether only blank space precedes off on its line.
func (d *document) ownLine(off int) bool {
	s := lineStart(d.plain, off)
	return len(bytes.TrimLeft(d.plain[s:off], " \t")) == 0 && s > 0
}

// lineIndent is the leading blank space of off's line.
func (d *document) lineIndent(off int) string {
	s := lineStart(d.src, off)
	e := s
	for e < len(d.src) && (d.src[e] == ' ' || d.src[e] == '\t') {
		e++
	}
	return string(d.src[s:e])
}

// indentUnit guesses the file's indentation step from the top-level
// object's first member: two spaces when it cannot tell, "" (no line
// breaks) for a file on one line.
func (d *document) indentUnit(top object) string {
	if !d.multiline() {
		return ""
	}
	if len(top.members) > 0 && d.ownLine(top.members[0].keyStart) {
		outer, inner := d.lineIndent(top.open), d.lineIndent(top.members[0].keyStart)
		if u, ok := strings.CutPrefix(inner, outer); ok && u != "" {
			return u
		}
	}
	return "  "
}

// encode writes v as JSON for a place indented by prefix: the first line
// has no prefix, the others have it (json.MarshalIndent's convention).
// unit "" writes it on one line. <, > and & are not escaped.
func encode(v any, prefix, unit string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if unit != "" {
		enc.SetIndent(prefix, unit)
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func quote(s string) string {
	b, _ := encode(s, "", "") // a string always encodes
	return string(b)
}

// splice returns b with b[s:e] replaced by r, in a new slice.
func splice(b []byte, s, e int, r []byte) []byte {
	out := make([]byte, 0, len(b)-(e-s)+len(r))
	out = append(out, b[:s]...)
	out = append(out, r...)
	return append(out, b[e:]...)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipBlank skips spaces and tabs, not line breaks.
func skipBlank(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return i
}

func lineStart(b []byte, off int) int {
	return bytes.LastIndexByte(b[:off], '\n') + 1
}

// scanValue returns the end of the JSON value at i of valid JSON b.
func scanValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; b[i] != '"'; i++ {
			if b[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = scanValue(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !strings.ContainsRune(",]} \t\r\n", rune(b[i])) {
		i++
	}
	return i
}

// blankComments returns a copy of src with its comments replaced by
// spaces (line breaks kept), so that offsets stay the same.
func blankComments(src []byte) []byte {
	b := bytes.Clone(src)
	blank := func(s, e int) {
		for j := s; j < e; j++ {
			if b[j] != '\n' && b[j] != '\r' {
				b[j] = ' '
			}
		}
	}
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"':
			for i++; i < len(b) && b[i] != '"' && b[i] != '\n'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '/':
			e := i
			for e < len(b) && b[e] != '\n' {
				e++
			}
			blank(i, e)
			i = e
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '*':
			e := bytes.Index(b[i+2:], []byte("*/"))
			if e < 0 {
				return b // unterminated: the JSON error will point at it
			}
			e += i + 4
			blank(i, e)
			i = e - 1
		}
	}
	return b
}

// blankTrailingCommas returns a copy of b, which has no comments, with its
// trailing commas replaced by spaces: JSON with the same offsets.
func blankTrailingCommas(src []byte) []byte {
	b := bytes.Clone(src)
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"' && b[i] != '\n'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case ',':
			if j := skipSpace(b, i+1); j < len(b) && (b[j] == '}' || b[j] == ']') {
				b[i] = ' '
			}
		}
	}
	return b
}

// SetMember returns the JSON document src (named name in errors) with
// member set to value in the object under the top-level key, every other
// byte as it was: the edit `browserbridge relay join` makes to the
// bridge's config. A missing key is added.
func SetMember(name string, src []byte, key, member string, value any) ([]byte, error) {
	d, err := parseDocument(name, src, false)
	if err != nil {
		return nil, err
	}
	return d.Set(key, member, value)
}

// RemoveMember returns src without member in the object under the
// top-level key, or src itself when there is no such member.
func RemoveMember(name string, src []byte, key, member string) ([]byte, error) {
	d, err := parseDocument(name, src, false)
	if err != nil {
		return nil, err
	}
	out, err := d.Remove(key, member)
	if err != nil || out == nil {
		return src, err
	}
	return out, nil
}

// onlyEmpty reports whether the document holds nothing but key, an empty
// object (or nothing at all): what is left of a file Add created once its
// entry is gone.
func (d *document) onlyEmpty(key string) bool {
	top, c, found, err := d.container(key)
	if err != nil {
		return false
	}
	switch len(top.members) {
	case 0:
		return true
	case 1:
		return found && len(c.members) == 0
	}
	return false
}

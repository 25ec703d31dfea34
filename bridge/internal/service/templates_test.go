package service

import (
	"encoding/xml"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"text/template"
)

// renderLike renders a kardianos v1.3 template with text/template. The
// kardianos syntax used by this package's templates ({{Key}}, {{Key | fn}},
// {{range Key}}…{{.}}…{{end}}) is also valid text/template when every key is
// a function returning its value, so the templates can be checked on every
// OS. On Linux, TestSystemdUnitRenderedByKardianos renders the unit with
// kardianos itself.
func renderLike(t *testing.T, text string, data map[string]any, funcs map[string]func(string) string) string {
	t.Helper()
	fm := template.FuncMap{}
	for k, v := range data {
		fm[k] = func() any { return v }
	}
	for k, f := range funcs {
		fm[k] = f
	}
	tmpl, err := template.New("t").Funcs(fm).Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, nil); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// systemdFuncs behave like kardianos's cmd and cmdEscape (see its
// service_linux.go).
var systemdFuncs = map[string]func(string) string{
	"cmd":       func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` },
	"cmdEscape": func(s string) string { return strings.ReplaceAll(s, " ", `\x20`) },
}

// launchdFuncs behave like kardianos's html, an XML escaper.
var launchdFuncs = map[string]func(string) string{
	"html": func(s string) string {
		var b strings.Builder
		xml.EscapeText(&b, []byte(s))
		return b.String()
	},
}

// checkSystemdUnit checks a rendered unit and returns ExecStart's words.
func checkSystemdUnit(t *testing.T, unit string) []string {
	t.Helper()
	for _, want := range []string{
		"\n[Install]\nWantedBy=default.target\n",
		"\nRestart=on-failure\n",
		"\nRestartSec=2\n",
		"\nDescription=" + Description + "\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q:\n%s", strings.TrimSpace(want), unit)
		}
	}
	for _, bad := range []string{"multi-user.target", "EnvironmentFile", "ConditionFileIsExecutable", "{{", "}}"} {
		if strings.Contains(unit, bad) {
			t.Errorf("unit contains %q:\n%s", bad, unit)
		}
	}
	var execStart []string
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			if execStart != nil {
				t.Fatal("two ExecStart lines")
			}
			words, err := splitSystemdCommand(v)
			if err != nil {
				t.Fatalf("ExecStart=%s: %v", v, err)
			}
			execStart = words
		}
	}
	if execStart == nil {
		t.Fatalf("no ExecStart line:\n%s", unit)
	}
	return execStart
}

// splitSystemdCommand splits a command line the way systemd splits ExecStart
// for the subset the unit uses: words separated by spaces, double-quoted
// words, and the backslash escapes \x20, \", \\.
func splitSystemdCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			switch s[i] {
			case '"', '\\':
				cur.WriteByte(s[i])
			case 'x':
				if i+2 >= len(s) || s[i+1:i+3] != "20" {
					return nil, errors.New("unsupported \\x escape")
				}
				cur.WriteByte(' ')
				i += 2
			default:
				return nil, errors.New("unsupported escape \\" + string(s[i]))
			}
			inWord = true
		case c == '"':
			quoted = !quoted
			inWord = true
		case c == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, errors.New("unterminated quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

func TestSystemdUnit(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		args []string
	}{
		{"plain", "/home/ann/.local/bin/browserbridge", []string{"serve"}},
		{"space in path", "/home/ann/My Tools/browserbridge", []string{"serve"}},
		{"awkward args", "/opt/bb/browserbridge", []string{"serve", "--name", `a "b" c`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config(tc.path, tc.args)
			unit := renderLike(t, cfg.Option["SystemdScript"].(string), map[string]any{
				"Description": cfg.Description,
				"Path":        cfg.Executable,
				"Arguments":   cfg.Arguments,
				"Restart":     cfg.Option["Restart"],
			}, systemdFuncs)
			got := checkSystemdUnit(t, unit)
			want := append([]string{tc.path}, tc.args...)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ExecStart runs %q, want %q\n%s", got, want, unit)
			}
		})
	}
}

// plistValue is one element of a plist, with its children.
type plistValue struct {
	XMLName xml.Name
	Content string       `xml:",chardata"`
	Items   []plistValue `xml:",any"`
}

// decodePlist checks that text is a well-formed plist and returns its
// top-level dict as key -> value element.
func decodePlist(t *testing.T, text string) map[string]plistValue {
	t.Helper()
	var doc struct {
		XMLName xml.Name `xml:"plist"`
		Dict    struct {
			Items []plistValue `xml:",any"`
		} `xml:"dict"`
	}
	dec := xml.NewDecoder(strings.NewReader(text))
	dec.Strict = true
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("plist is not valid XML: %v\n%s", err, text)
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after </plist>: %v", err)
		}
		if cd, ok := tok.(xml.CharData); !ok || strings.TrimSpace(string(cd)) != "" {
			t.Fatalf("content after </plist>: %v", tok)
		}
	}
	out := map[string]plistValue{}
	items := doc.Dict.Items
	if len(items)%2 != 0 {
		t.Fatalf("dict has an odd number of elements")
	}
	for i := 0; i < len(items); i += 2 {
		if items[i].XMLName.Local != "key" {
			t.Fatalf("dict element %d is <%s>, want <key>", i, items[i].XMLName.Local)
		}
		out[items[i].Content] = items[i+1]
	}
	return out
}

func TestLaunchdPlist(t *testing.T) {
	path := "/Users/ann/Apps & Tools/<bb>/browserbridge"
	cfg := Config(path, []string{"serve"})
	text := renderLike(t, cfg.Option["LaunchdConfig"].(string), map[string]any{
		"Name":      cfg.Name,
		"Path":      cfg.Executable,
		"Arguments": cfg.Arguments,
		"RunAtLoad": "true", // kardianos renders the RunAtLoad option this way
	}, launchdFuncs)
	d := decodePlist(t, text)

	if got := d["Label"]; got.XMLName.Local != "string" || got.Content != Name {
		t.Errorf("Label = <%s>%s, want <string>%s", got.XMLName.Local, got.Content, Name)
	}
	if got := d["RunAtLoad"].XMLName.Local; got != "true" {
		t.Errorf("RunAtLoad = <%s/>, want <true/>", got)
	}
	ka := d["KeepAlive"]
	if ka.XMLName.Local != "dict" || len(ka.Items) != 2 ||
		ka.Items[0].Content != "SuccessfulExit" || ka.Items[1].XMLName.Local != "false" {
		t.Errorf("KeepAlive = %+v, want <dict><key>SuccessfulExit</key><false/></dict>", ka)
	}
	var args []string
	for _, it := range d["ProgramArguments"].Items {
		args = append(args, it.Content)
	}
	if want := []string{path, "serve"}; !reflect.DeepEqual(args, want) {
		t.Errorf("ProgramArguments = %q, want %q", args, want)
	}
	for _, k := range []string{"StandardOutPath", "StandardErrorPath"} {
		if got := d[k].Content; got != "/dev/null" {
			t.Errorf("%s = %q, want /dev/null", k, got)
		}
	}
}

package clientconfig

import (
	"encoding/json"
	"strings"
	"testing"
)

var entry = urlEntry{Type: "http", URL: "http://127.0.0.1:3456/mcp"}

func TestSetKeepsTheRestOfTheFile(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
		jsonc           bool
	}{
		{
			name: "appended after the other servers, in the file's indentation",
			src:  "{\n    \"other\": 1,\n    \"servers\": {\n        \"memory\": {\"command\": \"npx\"}\n    }\n}\n",
			want: "{\n    \"other\": 1,\n    \"servers\": {\n        \"memory\": {\"command\": \"npx\"},\n        \"browserbridge\": {\n            \"type\": \"http\",\n            \"url\": \"http://127.0.0.1:3456/mcp\"\n        }\n    }\n}\n",
		},
		{
			name: "tabs",
			src:  "{\n\t\"servers\": {\n\t\t\"a\": {}\n\t}\n}",
			want: "{\n\t\"servers\": {\n\t\t\"a\": {},\n\t\t\"browserbridge\": {\n\t\t\t\"type\": \"http\",\n\t\t\t\"url\": \"http://127.0.0.1:3456/mcp\"\n\t\t}\n\t}\n}",
		},
		{
			name: "the servers key added last",
			src:  "{\n  \"theme\": \"dark\"\n}\n",
			want: "{\n  \"theme\": \"dark\",\n  \"servers\": {\n    \"browserbridge\": {\n      \"type\": \"http\",\n      \"url\": \"http://127.0.0.1:3456/mcp\"\n    }\n  }\n}\n",
		},
		{
			name: "empty file",
			src:  "",
			want: "{\n  \"servers\": {\n    \"browserbridge\": {\n      \"type\": \"http\",\n      \"url\": \"http://127.0.0.1:3456/mcp\"\n    }\n  }\n}\n",
		},
		{
			name: "empty servers object",
			src:  "{\n  \"servers\": {},\n  \"inputs\": []\n}\n",
			want: "{\n  \"servers\": {\n    \"browserbridge\": {\n      \"type\": \"http\",\n      \"url\": \"http://127.0.0.1:3456/mcp\"\n    }\n  },\n  \"inputs\": []\n}\n",
		},
		{
			name: "servers null",
			src:  "{\n  \"servers\": null\n}",
			want: "{\n  \"servers\": {\n    \"browserbridge\": {\n      \"type\": \"http\",\n      \"url\": \"http://127.0.0.1:3456/mcp\"\n    }\n  }\n}",
		},
		{
			name: "a file on one line stays on one line",
			src:  `{"servers": {"a": {"url": "x"}}, "z": [1, 2]}`,
			want: `{"servers": {"a": {"url": "x"}, "browserbridge": {"type":"http","url":"http://127.0.0.1:3456/mcp"}}, "z": [1, 2]}`,
		},
		{
			name: "servers on one line in a file of many",
			src:  "{\n  \"servers\": {\"a\": {}}\n}\n",
			want: "{\n  \"servers\": {\"a\": {}, \"browserbridge\": {\"type\":\"http\",\"url\":\"http://127.0.0.1:3456/mcp\"}}\n}\n",
		},
		{
			name: "replaced in place",
			src:  "{\n  \"servers\": {\n    \"browserbridge\": {\"url\": \"http://127.0.0.1:9/mcp\"},\n    \"b\": {}\n  }\n}\n",
			want: "{\n  \"servers\": {\n    \"browserbridge\": {\n      \"type\": \"http\",\n      \"url\": \"http://127.0.0.1:3456/mcp\"\n    },\n    \"b\": {}\n  }\n}\n",
		},
		{
			name:  "JSONC: comments and a trailing comma stay",
			jsonc: true,
			src:   "// my servers\n{\n  \"servers\": {\n    /* memory */ \"memory\": {\"command\": \"npx\"}, // keep\n  },\n}\n",
			want:  "// my servers\n{\n  \"servers\": {\n    /* memory */ \"memory\": {\"command\": \"npx\"},\n    \"browserbridge\": {\n      \"type\": \"http\",\n      \"url\": \"http://127.0.0.1:3456/mcp\"\n    }, // keep\n  },\n}\n",
		},
		{
			name: "strings holding braces, commas and escapes",
			src:  "{\n  \"servers\": {\n    \"a\": {\"args\": [\"}\", \",\\\"]\"]}\n  }\n}",
			want: "{\n  \"servers\": {\n    \"a\": {\"args\": [\"}\", \",\\\"]\"]},\n    \"browserbridge\": {\n      \"type\": \"http\",\n      \"url\": \"http://127.0.0.1:3456/mcp\"\n    }\n  }\n}",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := parseDocument("mcp.json", []byte(tc.src), tc.jsonc)
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.Set("servers", EntryName, entry)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tc.want)
			}
			again, err := parseDocument("mcp.json", got, tc.jsonc)
			if err != nil {
				t.Fatalf("the result does not parse: %v", err)
			}
			raw, err := again.Get("servers", EntryName)
			if err != nil || !same(raw, entry) {
				t.Fatalf("entry read back = %s, %v", raw, err)
			}
		})
	}
}

func TestRemoveTakesOnlyTheEntry(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
		jsonc           bool
	}{
		{
			name: "last of several",
			src:  "{\n  \"mcpServers\": {\n    \"a\": {},\n    \"browserbridge\": {\n      \"url\": \"u\"\n    }\n  }\n}\n",
			want: "{\n  \"mcpServers\": {\n    \"a\": {}\n  }\n}\n",
		},
		{
			name: "first of several",
			src:  "{\n  \"mcpServers\": {\n    \"browserbridge\": {\"url\": \"u\"},\n    \"a\": {}\n  }\n}\n",
			want: "{\n  \"mcpServers\": {\n    \"a\": {}\n  }\n}\n",
		},
		{
			name: "in the middle",
			src:  "{\"mcpServers\": {\n  \"a\": 1,\n  \"browserbridge\": {\"url\": \"u\"},\n  \"c\": 3\n}}",
			want: "{\"mcpServers\": {\n  \"a\": 1,\n  \"c\": 3\n}}",
		},
		{
			name: "the only one",
			src:  "{\n  \"mcpServers\": {\n    \"browserbridge\": {\"url\": \"u\"}\n  },\n  \"x\": true\n}\n",
			want: "{\n  \"mcpServers\": {},\n  \"x\": true\n}\n",
		},
		{
			name: "one line, last",
			src:  `{"mcpServers": {"a": {}, "browserbridge": {"url": "u"}}}`,
			want: `{"mcpServers": {"a": {}}}`,
		},
		{
			name: "one line, first",
			src:  `{"mcpServers": {"browserbridge": {"url": "u"}, "a": {}}}`,
			want: `{"mcpServers": {"a": {}}}`,
		},
		{
			name:  "JSONC: its trailing comment goes, the others stay",
			jsonc: true,
			src:   "{\n  \"mcpServers\": {\n    \"a\": {}, // a\n    \"browserbridge\": {\"url\": \"u\"} // ours\n  }\n}\n",
			want:  "{\n  \"mcpServers\": {\n    \"a\": {} // a\n  }\n}\n",
		},
		{
			name: "absent",
			src:  `{"mcpServers": {"a": {}}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := parseDocument("f.json", []byte(tc.src), tc.jsonc)
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.Remove("mcpServers", EntryName)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tc.want)
			}
			if got != nil && !tc.jsonc && !json.Valid(got) {
				t.Fatalf("the result is not JSON:\n%s", got)
			}
		})
	}
}

func TestParseRefusesWhatItCannotEdit(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
		jsonc           bool
	}{
		{"syntax error", "{\n  \"mcpServers\": {\n    \"a\": {},,\n  }\n}", "f.json: not valid JSON on line 3", false},
		{"comments in a strict file", "{\n// no\n}", "f.json: not valid JSON on line 2", false},
		{"unterminated comment", "{\n/* no\n}", "f.json: not valid JSON", true},
		{"a list", "[]", "f.json: the file holds a list, not a JSON object", false},
		{"trailing data", "{}\n{}", "f.json: not valid JSON on line 2", false},
		{"duplicate key", "{\"mcpServers\": {\"a\": 1, \"a\": 2}}", `f.json: key "a" appears twice in "mcpServers"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDocument("f.json", []byte(tc.src), tc.jsonc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
	d, err := parseDocument("f.json", []byte(`{"mcpServers": ["a"]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Set("mcpServers", EntryName, entry); err == nil || !strings.Contains(err.Error(), `key "mcpServers" on line 1 is not an object`) {
		t.Fatalf("Set into a list: %v", err)
	}
}

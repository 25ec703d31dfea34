package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/extension"
)

// absHost returns an absolute host path valid on the OS running the test.
func absHost(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "browserbridge-host")
}

func TestHostManifest(t *testing.T) {
	host := absHost(t)
	other := "abcdefghijklmnopabcdefghijklmnop"
	tests := []struct {
		name        string
		ids         []string
		wantOrigins []string
	}{
		{"extension id", []string{extension.ID()}, []string{extension.Origin()}},
		{"two ids", []string{extension.ID(), other}, []string{extension.Origin(), "chrome-extension://" + other + "/"}},
		{"duplicates dropped", []string{other, other}, []string{"chrome-extension://" + other + "/"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := HostManifest(host, tc.ids)
			if err != nil {
				t.Fatalf("HostManifest: %v", err)
			}
			if !strings.HasSuffix(string(data), "}\n") {
				t.Errorf("manifest does not end in a newline:\n%s", data)
			}
			// Decode strictly into exactly the fields Chrome documents.
			var got struct {
				Name           string   `json:"name"`
				Description    string   `json:"description"`
				Path           string   `json:"path"`
				Type           string   `json:"type"`
				AllowedOrigins []string `json:"allowed_origins"`
			}
			dec := json.NewDecoder(strings.NewReader(string(data)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("manifest is not the expected JSON: %v\n%s", err, data)
			}
			if got.Name != HostName || got.Type != "stdio" || got.Path != host || got.Description == "" {
				t.Errorf("manifest = %+v", got)
			}
			if !reflect.DeepEqual(got.AllowedOrigins, tc.wantOrigins) {
				t.Errorf("allowed_origins = %q, want %q", got.AllowedOrigins, tc.wantOrigins)
			}
		})
	}
}

func TestHostManifestEscapesPath(t *testing.T) {
	host := filepath.Join(t.TempDir(), `odd "dir" & <co>`, "host\\x")
	data, err := HostManifest(host, []string{extension.ID()})
	if err != nil {
		t.Fatalf("HostManifest: %v", err)
	}
	m, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, data)
	}
	if m.Path != host {
		t.Errorf("path = %q, want %q", m.Path, host)
	}
}

func TestHostManifestErrors(t *testing.T) {
	host := absHost(t)
	tests := []struct {
		name    string
		path    string
		ids     []string
		wantErr string
	}{
		{"empty path", "", []string{extension.ID()}, "empty"},
		{"relative path", "bin/browserbridge-host", []string{extension.ID()}, "not absolute"},
		{"no ids", host, nil, "no extension ids"},
		{"short id", host, []string{"abc"}, "3 characters"},
		{"letter past p", host, []string{"abcdefghijklmnopqrstuvwxyzabcdef"}, "'q'"},
		{"upper case", host, []string{"ABCDEFGHIJKLMNOPABCDEFGHIJKLMNOP"}, "'A'"},
		{"digit", host, []string{"0bcdefghijklmnopabcdefghijklmnop"}, "'0'"},
		{"one bad among good", host, []string{extension.ID(), "x"}, "extension id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := HostManifest(tc.path, tc.ids)
			if err == nil {
				t.Fatalf("HostManifest(%q, %q) succeeded", tc.path, tc.ids)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantErr bool
		want    *Manifest
	}{
		{"valid", `{"name":"com.browserbridge.host","path":"/x","type":"stdio","allowed_origins":["chrome-extension://a/"]}`, false,
			&Manifest{Name: HostName, Path: "/x", Type: "stdio", AllowedOrigins: []string{"chrome-extension://a/"}}},
		{"unknown fields ignored", `{"name":"n","extra":1}`, false, &Manifest{Name: "n"}},
		{"not json", `name: x`, true, nil},
		{"wrong type", `{"allowed_origins":"x"}`, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.data))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse error = %v, wantErr %v", err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestAllowsOrigin(t *testing.T) {
	m := &Manifest{AllowedOrigins: []string{extension.Origin()}}
	if !m.AllowsOrigin(extension.Origin()) {
		t.Error("AllowsOrigin(extension origin) = false")
	}
	if m.AllowsOrigin("chrome-extension://abcdefghijklmnopabcdefghijklmnop/") {
		t.Error("AllowsOrigin(other origin) = true")
	}
}

// TestTemplateIsTheSource guards the rule that the template file on disk is
// the one embedded and that it names every field Chrome requires.
func TestTemplateIsTheSource(t *testing.T) {
	onDisk, err := os.ReadFile("com.browserbridge.host.json.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	if string(onDisk) != hostTemplateText {
		t.Fatal("embedded template differs from the file on disk")
	}
	for _, field := range []string{`"name"`, `"description"`, `"path"`, `"type"`, `"allowed_origins"`} {
		if !strings.Contains(hostTemplateText, field) {
			t.Errorf("template lacks %s", field)
		}
	}
}

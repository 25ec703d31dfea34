// Package manifests renders the native-messaging host manifest that tells a
// Chromium browser how to start browserbridge-host and which extensions may
// talk to it.
//
// The manifest's shape lives in one place, the embedded template
// com.browserbridge.host.json.tmpl; this package fills it in, validates what
// goes into it, and parses manifests back for the installer's checks.
package manifests

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/template"
	"unicode/utf8"
)

// HostName is the native-messaging host name the extension passes to
// chrome.runtime.connectNative, and the manifest's file name without ".json".
const HostName = "com.browserbridge.host"

// FileName is the manifest's file name inside a NativeMessagingHosts directory.
const FileName = HostName + ".json"

// Description is the manifest's "description" field.
const Description = "Browser Bridge native messaging host: connects the Browser Bridge extension to the local bridge service"

// TypeStdio is the only host type Chrome supports, and the manifest's "type".
const TypeStdio = "stdio"

// extensionIDLen is the length of a Chrome extension id: 16 bytes written as
// 32 letters from 'a' to 'p'.
const extensionIDLen = 32

//go:embed com.browserbridge.host.json.tmpl
var hostTemplateText string

var hostTemplate = template.Must(template.New("com.browserbridge.host.json.tmpl").
	Funcs(template.FuncMap{"json": jsonValue}).
	Parse(hostTemplateText))

// Manifest is a native-messaging host manifest as Chrome reads it. Fields the
// browser ignores are ignored here too.
type Manifest struct {
	Name           string   `json:"name"`
	Description    string   `json:"description"`
	Path           string   `json:"path"`
	Type           string   `json:"type"`
	AllowedOrigins []string `json:"allowed_origins"`
}

// HostManifest renders the manifest for the host executable at hostPath,
// allowing each of extensionIDs to connect. hostPath must be absolute and
// extensionIDs must hold at least one valid id; duplicate ids are dropped.
// The result is indented JSON ending in a newline.
func HostManifest(hostPath string, extensionIDs []string) ([]byte, error) {
	if hostPath == "" {
		return nil, errors.New("host manifest: host path is empty")
	}
	if !filepath.IsAbs(hostPath) {
		return nil, fmt.Errorf("host manifest: host path %q is not absolute (Chrome requires an absolute path)", hostPath)
	}
	if len(extensionIDs) == 0 {
		return nil, errors.New("host manifest: no extension ids to allow")
	}
	seen := make(map[string]bool, len(extensionIDs))
	var origins []string
	for _, id := range extensionIDs {
		if err := ValidateExtensionID(id); err != nil {
			return nil, fmt.Errorf("host manifest: %w", err)
		}
		if !seen[id] {
			seen[id] = true
			origins = append(origins, Origin(id))
		}
	}
	var buf bytes.Buffer
	err := hostTemplate.Execute(&buf, Manifest{
		Name:           HostName,
		Description:    Description,
		Path:           hostPath,
		Type:           TypeStdio,
		AllowedOrigins: origins,
	})
	if err != nil {
		return nil, fmt.Errorf("host manifest: rendering template: %w", err)
	}
	// The template is the single source of the manifest's shape, so check
	// that what it produced is what Chrome will read.
	if _, err := Parse(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("host manifest: template produced an invalid manifest: %w", err)
	}
	return buf.Bytes(), nil
}

// Parse decodes a host manifest. It checks only that data is a JSON object
// whose known fields have the right types; the installer's checks judge the
// values.
func Parse(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("parsing host manifest: %w", err)
	}
	return &m, nil
}

// AllowsOrigin reports whether origin is listed in the manifest's
// allowed_origins.
func (m *Manifest) AllowsOrigin(origin string) bool {
	for _, o := range m.AllowedOrigins {
		if o == origin {
			return true
		}
	}
	return false
}

// Origin returns the origin Chrome uses for extension id:
// "chrome-extension://<id>/".
func Origin(id string) string { return "chrome-extension://" + id + "/" }

// ValidateExtensionID reports whether id looks like a Chrome extension id:
// exactly 32 letters from 'a' to 'p'.
func ValidateExtensionID(id string) error {
	if len(id) != extensionIDLen {
		return fmt.Errorf("extension id %q has %d characters, want %d", id, len(id), extensionIDLen)
	}
	if i := strings.IndexFunc(id, func(r rune) bool { return r < 'a' || r > 'p' }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(id[i:])
		return fmt.Errorf("extension id %q has %q at position %d; ids use only the letters a to p", id, r, i)
	}
	return nil
}

// jsonValue renders v as a JSON value for the template, without escaping
// '<', '>' and '&' so that paths stay readable.
func jsonValue(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// Package extension embeds the extension's manifest so that the host and the
// installer agree with the browser on the extension's id. The extension itself
// is plain JavaScript in this folder and loads unpacked; this file is the only
// Go in it.
package extension

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

//go:embed manifest.json
var manifestJSON []byte

// ManifestJSON returns the extension's manifest.json as shipped.
func ManifestJSON() []byte { return append([]byte(nil), manifestJSON...) }

// ID returns the id Chrome gives the extension, derived from the manifest's
// "key". It panics only if the embedded manifest is broken, which the tests
// catch at build time.
func ID() string {
	var m struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(manifestJSON, &m); err != nil {
		panic(fmt.Sprintf("extension: embedded manifest.json: %v", err))
	}
	id, err := IDFromKey(m.Key)
	if err != nil {
		panic(fmt.Sprintf("extension: embedded manifest.json: %v", err))
	}
	return id
}

// Origin returns the origin Chrome passes to the native host for this
// extension: "chrome-extension://<id>/".
func Origin() string { return "chrome-extension://" + ID() + "/" }

// IDFromKey derives an extension id from a manifest "key" (base64 DER
// SubjectPublicKeyInfo): the first 16 bytes of its SHA-256, each nibble
// written as a letter from 'a' to 'p'.
func IDFromKey(key string) (string, error) {
	der, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return "", fmt.Errorf("decoding extension key: %w", err)
	}
	if len(der) == 0 {
		return "", fmt.Errorf("extension key is empty")
	}
	sum := sha256.Sum256(der)
	id := make([]byte, 32)
	for i, b := range sum[:16] {
		id[2*i] = 'a' + b>>4
		id[2*i+1] = 'a' + b&0x0f
	}
	return string(id), nil
}

package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// The builders below write messages by splicing raw parts, so a 20 MiB
// result is copied once and never re-encoded.

func appendRequest(b []byte, id json.RawMessage, method string, params json.RawMessage) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"method":`...)
	b = strconv.AppendQuote(b, method)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

func appendNotification(b []byte, method string, params json.RawMessage) []byte {
	b = append(b, `{"jsonrpc":"2.0","method":`...)
	b = strconv.AppendQuote(b, method)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// setMetaField returns params with _meta[key] set to value (nil: removed).
// Only params' top level and its _meta are decoded.
func setMetaField(params json.RawMessage, key string, value json.RawMessage) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if len(params) > 0 {
		if err := json.Unmarshal(params, &top); err != nil {
			return nil, fmt.Errorf("params must be an object: %w", err)
		}
	}
	if top == nil {
		top = map[string]json.RawMessage{}
	}
	var meta map[string]json.RawMessage
	if raw, ok := top["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("params._meta must be an object: %w", err)
		}
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	if value == nil {
		delete(meta, key)
	} else {
		meta[key] = value
	}
	if len(meta) == 0 {
		delete(top, "_meta")
	} else {
		m, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		top["_meta"] = m
	}
	return json.Marshal(top)
}

// setField returns the object obj with key set to value.
func setField(obj json.RawMessage, key string, value any) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(obj, &top); err != nil {
		return nil, err
	}
	v, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	if top == nil {
		top = map[string]json.RawMessage{}
	}
	top[key] = v
	return json.Marshal(top)
}

// idKey turns a raw JSON-RPC id into a map key that tells 1 from "1".
func idKey(id json.RawMessage) string { return string(bytes.TrimSpace(id)) }

package relaywire

import (
	"encoding/json"
	"unicode/utf8"
)

// The encoders below append one complete JSON-RPC 2.0 message to dst and
// return the extended slice, as a WebSocket text frame's payload. Raw
// arguments (ids, params, results, error objects) must be valid JSON; nil
// params are left out, a nil result is written as {}, a nil id as null.

// AppendRequest appends a request with a string id.
func AppendRequest(dst []byte, id, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = AppendString(dst, id)
	return appendMethod(dst, method, params)
}

// AppendRequestRawID appends a request whose id is raw JSON.
func AppendRequestRawID(dst []byte, id json.RawMessage, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendRawOrNull(dst, id)
	return appendMethod(dst, method, params)
}

// AppendClient adds the member "client": client (Message.Client, valid
// JSON) to msg, one complete message as the encoders here append it.
func AppendClient(msg []byte, client json.RawMessage) []byte {
	msg = append(msg[:len(msg)-1], `,"client":`...)
	msg = append(msg, client...)
	return append(msg, '}')
}

// AppendNotification appends a notification.
func AppendNotification(dst []byte, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	return appendMethod(dst, method, params)
}

// AppendRequestNotification appends a notification about the request with
// the mapped id requestID (Message.RequestID): how an extension sends
// MethodProgress.
func AppendRequestNotification(dst []byte, requestID, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","requestId":`...)
	dst = AppendString(dst, requestID)
	return appendMethod(dst, method, params)
}

func appendMethod(dst []byte, method string, params json.RawMessage) []byte {
	dst = append(dst, `,"method":`...)
	dst = AppendString(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// AppendResult appends a successful reply.
func AppendResult(dst []byte, id, result json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendRawOrNull(dst, id)
	dst = append(dst, `,"result":`...)
	if result == nil {
		result = json.RawMessage("{}")
	}
	dst = append(dst, result...)
	return append(dst, '}')
}

// AppendErrorRaw appends an error reply whose error object is raw JSON.
func AppendErrorRaw(dst []byte, id, errObj json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendRawOrNull(dst, id)
	dst = append(dst, `,"error":`...)
	dst = append(dst, errObj...)
	return append(dst, '}')
}

// AppendError appends an error reply.
func AppendError(dst []byte, id json.RawMessage, e *Error) []byte {
	obj, err := json.Marshal(e)
	if err != nil { // only a malformed Data can fail
		obj, _ = json.Marshal(&Error{Code: e.Code, Message: e.Message})
	}
	return AppendErrorRaw(dst, id, obj)
}

// MarshalParams is json.Marshal for params and results of this package's
// types, which cannot fail to encode.
func MarshalParams(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("relaywire: " + err.Error())
	}
	return b
}

func appendRawOrNull(dst []byte, raw json.RawMessage) []byte {
	if raw == nil {
		return append(dst, "null"...)
	}
	return append(dst, raw...)
}

// AppendString appends s as a JSON string. Invalid UTF-8 is replaced by
// U+FFFD, as encoding/json does.
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

package mcpserver

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast path passes the browser's result through: for the shape nearly
// every answer has (text content, maybe isError) it writes the response
// from the result's bytes, where forward decodes the result into the
// SDK's CallToolResult and encodes it again. The bytes are the SDK's, to
// the byte: the SDK encodes a CallToolResult with json.Marshal (_meta,
// content, isError, in that order, HTML-escaped), each text as
// {"type":"text","text":…}, and its strings the way appendGoString
// writes them. Any other shape goes the decoding way.

// forwardResponse is forward for the fast path: it returns the JSON-RPC
// response, with request id id, that the SDK would write for the
// result forward returns.
func (s *Server) forwardResponse(ctx context.Context, c toolCall, id []byte) []byte {
	ans, res, err := s.callBrowser(ctx, c)
	if ans.browser != nil {
		meta := browserMetaJSON(browserInfoOf(ans.browser))
		if out, isError, ok := appendPassThrough(make([]byte, 0, len(ans.raw)+len(meta)+len(id)+96), id, ans.raw, meta); ok {
			if isError {
				s.stats.CallErrors.Add(1)
			}
			return out
		}
		res = s.toolResult(c.name, ans)
	}
	if err == nil && res.Content == nil && !res.NeedsInput() {
		res.Content = []mcp.Content{} // as the SDK does: never "content": null
	}
	return response(id, res, err)
}

// appendPassThrough appends the JSON-RPC response (request id id) whose
// result is the browser's result raw, with browserMeta as its
// browserbridge/browser _meta, if raw has the shape decodeTextResult
// reads: {"content":[{"type":"text","text":…}…],"isError":bool}, isError
// optional, keys in any order, each once. ok is false, and dst as it
// came, for any other shape. raw must be valid JSON (it was decoded from
// the link's frame).
func appendPassThrough(dst, id, raw, browserMeta []byte) (out []byte, isError, ok bool) {
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":{"_meta":{"`+metaBrowser+`":`...)
	dst = append(dst, browserMeta...)
	dst = append(dst, `},"content":[`...)
	first := true
	isError, ok = scanTextResult(raw, func(text []byte) bool {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, `{"type":"text","text":`...)
		var ok bool
		dst, ok = appendGoString(dst, text)
		dst = append(dst, '}')
		return ok
	})
	if !ok {
		return dst[:start], false, false
	}
	dst = append(dst, ']')
	if isError {
		dst = append(dst, `,"isError":true`...)
	}
	dst = append(dst, "}}"...)
	return dst, isError, true
}

// appendGoString appends the JSON string token str as json.Marshal writes
// the string it stands for: `"` and `\` escaped; \b \f \n \r \t; other
// control characters, < > & and U+2028 U+2029 as \u escapes; invalid
// UTF-8 and lone surrogates as U+FFFD (which is what Go's decoder makes of
// them); everything else as itself. ok is false if str is not a string
// token of valid JSON.
func appendGoString(dst, str []byte) (out []byte, ok bool) {
	if len(str) < 2 || str[0] != '"' || str[len(str)-1] != '"' {
		return dst, false
	}
	s := str[1 : len(str)-1]
	dst = append(dst, '"')
	start := 0 // s[start:i] is still to be copied as it is
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				dst = appendGoRune(append(dst, s[start:i]...), r)
				start = i + size
			}
			i += size
			continue
		}
		if c != '\\' {
			if c < 0x20 || c == '"' {
				return dst, false // not valid JSON
			}
			if c == '<' || c == '>' || c == '&' {
				dst = appendGoRune(append(dst, s[start:i]...), rune(c))
				start = i + 1
			}
			i++
			continue
		}
		if i+1 >= len(s) {
			return dst, false
		}
		switch s[i+1] {
		case '"', '\\', 'b', 'f', 'n', 'r', 't':
			i += 2 // written as Go writes it
			continue
		case '/':
			dst = append(append(dst, s[start:i]...), '/')
			i += 2
			start = i
			continue
		case 'u':
		default:
			return dst, false
		}
		r, ok := hex4(s[i+2:])
		if !ok {
			return dst, false
		}
		n := 6
		if utf16.IsSurrogate(r) {
			// A pair is one character; Go decodes anything else as U+FFFD
			// and reads the escape after it on its own.
			r2, ok2 := rune(0), false
			if len(s) >= i+12 && s[i+6] == '\\' && s[i+7] == 'u' {
				r2, ok2 = hex4(s[i+8:])
			}
			if r = utf16.DecodeRune(r, r2); ok2 && r != utf8.RuneError {
				n = 12
			} else {
				r = utf8.RuneError
			}
		}
		dst = appendGoRune(append(dst, s[start:i]...), r)
		i += n
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}

// appendGoRune appends r as json.Marshal writes it inside a string.
func appendGoRune(dst []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	switch r {
	case '"', '\\':
		return append(dst, '\\', byte(r))
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	case '<', '>', '&', '\u2028', '\u2029':
		return append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	if r < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
	}
	return utf8.AppendRune(dst, r)
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// encodedBrowserMeta is a browserbridge/browser _meta and its encoding.
type encodedBrowserMeta struct {
	info browserInfoMeta
	json []byte
}

// lastBrowserMeta holds the encoding of the browser that answered last:
// nearly every call is answered by the same browser as the call before,
// so the encoding is made once per browser rather than once per call. It
// is keyed by the values themselves (a browser may say hello again with
// another version), and so may be shared by every Server.
var lastBrowserMeta atomic.Pointer[encodedBrowserMeta]

// browserMetaJSON returns info encoded as the SDK encodes it inside a
// result (json.Marshal: HTML-escaped, invalid UTF-8 replaced).
func browserMetaJSON(info browserInfoMeta) []byte {
	if m := lastBrowserMeta.Load(); m != nil && m.info == info {
		return m.json
	}
	enc, _ := json.Marshal(info) // a struct of strings: it cannot fail
	lastBrowserMeta.Store(&encodedBrowserMeta{info: info, json: enc})
	return enc
}

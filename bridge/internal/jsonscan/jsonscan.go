// Package jsonscan walks valid JSON without decoding it: the members of an
// object and the elements of an array as slices of the input. The hot
// paths of the bridge (the /mcp fast path, the host link's frames, the
// benchmarks' stand-in extension) read a few members of each message this
// way and pass the rest on as bytes. Every function expects input that
// json.Valid accepts; on anything else it reports false or stops at the
// end of the input, never reading past it.
package jsonscan

// EachMember calls fn with the key (without its quotes) and the raw value
// of each member of a JSON object, in order, stopping at the first false.
// It returns false then, when obj is not an object, or when a key has
// escapes (callers match keys as bytes, so such a key is not one they
// know).
func EachMember(obj []byte, fn func(key, val []byte) bool) bool {
	return EachMemberToken(obj, func(key, val []byte) bool {
		inner := key[1 : len(key)-1]
		for _, c := range inner {
			if c == '\\' {
				return false
			}
		}
		return fn(inner, val)
	})
}

// EachMemberToken is EachMember with each key as its whole string token,
// quotes and escapes included, for callers that decode keys themselves.
func EachMemberToken(obj []byte, fn func(key, val []byte) bool) bool {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = SkipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return SkipSpace(obj, i+1) == len(obj)
	}
	for i < len(obj) && obj[i] == '"' {
		keyEnd := SkipString(obj, i)
		key := obj[i:keyEnd]
		i = SkipSpace(obj, keyEnd)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		i = SkipSpace(obj, i+1)
		end := SkipValue(obj, i)
		if end <= i || !fn(key, obj[i:end]) {
			return false
		}
		i = SkipSpace(obj, end)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case ',':
			i = SkipSpace(obj, i+1)
		case '}':
			return SkipSpace(obj, i+1) == len(obj)
		default:
			return false
		}
	}
	return false
}

// EachElement calls fn with each element of a JSON array, in order,
// stopping at the first false; it returns false then, or when arr is not
// an array.
func EachElement(arr []byte, fn func(val []byte) bool) bool {
	i := SkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return false
	}
	i = SkipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return SkipSpace(arr, i+1) == len(arr)
	}
	for i < len(arr) {
		end := SkipValue(arr, i)
		if end <= i || !fn(arr[i:end]) {
			return false
		}
		i = SkipSpace(arr, end)
		if i >= len(arr) {
			return false
		}
		switch arr[i] {
		case ',':
			i = SkipSpace(arr, i+1)
		case ']':
			return SkipSpace(arr, i+1) == len(arr)
		default:
			return false
		}
	}
	return false
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipValue returns the end of the JSON value starting at b[i].
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = SkipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// SkipString returns the end of the string token starting at b[i] (its
// opening quote).
func SkipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte; a \u escape's four hex digits need no care
		case '"':
			return i + 1
		}
	}
	return i
}

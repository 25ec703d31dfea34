package relaywire

import (
	"errors"
	"strings"
)

// Pairing codes (MethodPairingCode): PairingCodeLength symbols of Crockford's
// base 32, 5 bits each (60 bits), shown in groups of four joined by dashes.
// The alphabet has no I, L, O or U, so nothing in it looks like anything
// else; what a person types is read case-insensitively, with dashes and
// spaces ignored and O, I, L taken for the 0, 1, 1 they look like.
const (
	PairingAlphabet   = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	PairingCodeLength = 12
	// PairingCodeBits is the entropy of a code.
	PairingCodeBits = 5 * PairingCodeLength
)

// ErrPairingCodeFormat is NormalizePairingCode's error for text that
// cannot be a pairing code.
var ErrPairingCodeFormat = errors.New("that is not a pairing code: it has 12 letters and digits, like ABCD-EFGH-JKMN")

// NormalizePairingCode returns a typed code in its canonical form (the
// PairingCodeLength symbols, upper case, no dashes), or ErrPairingCodeFormat.
func NormalizePairingCode(s string) (string, error) {
	if len(s) > 4*PairingCodeLength { // no allocation for junk
		return "", ErrPairingCodeFormat
	}
	var b strings.Builder
	b.Grow(PairingCodeLength)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		switch c {
		case '-', ' ', '\t':
			continue
		case 'O':
			c = '0'
		case 'I', 'L':
			c = '1'
		}
		if strings.IndexByte(PairingAlphabet, c) < 0 {
			return "", ErrPairingCodeFormat
		}
		b.WriteByte(c)
	}
	if b.Len() != PairingCodeLength {
		return "", ErrPairingCodeFormat
	}
	return b.String(), nil
}

// FormatPairingCode writes a canonical code in groups of four joined by
// dashes ("ABCDEFGHJKMN" → "ABCD-EFGH-JKMN").
func FormatPairingCode(canonical string) string {
	var b strings.Builder
	for i := 0; i < len(canonical); i++ {
		if i > 0 && i%4 == 0 {
			b.WriteByte('-')
		}
		b.WriteByte(canonical[i])
	}
	return b.String()
}

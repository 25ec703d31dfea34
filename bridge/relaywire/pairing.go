package relaywire

import (
	"errors"
	"fmt"
	"strings"
)

// Pairing codes (MethodPairingCode): PairingCodeLength symbols of Crockford's
// base 32, 5 bits each (80 bits), shown in groups of four joined by dashes.
// The alphabet has no I, L, O or U, so nothing in it looks like anything
// else; what a person types is read case-insensitively, with dashes and
// spaces ignored and O, I, L taken for the 0, 1, 1 they look like.
//
// Codes were 12 symbols (60 bits) before; 80 bits let a proxy check far more
// guesses a minute (docs/limits.md, "Pairing codes") and still keep the
// chance of any guess finding a live code below one in a million a year. A
// code of the old length is refused with ErrPairingCodeOld.
const (
	PairingAlphabet   = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	PairingCodeLength = 16
	// PairingCodeBits is the entropy of a code.
	PairingCodeBits = 5 * PairingCodeLength
	// OldPairingCodeLength is the length of the codes of earlier versions.
	OldPairingCodeLength = 12
)

// ErrPairingCodeFormat is NormalizePairingCode's error for text that
// cannot be a pairing code.
var ErrPairingCodeFormat = errors.New("that is not a pairing code: it has 16 letters and digits, like ABCD-EFGH-JKMN-PQRS")

// ErrPairingCodeOld is NormalizePairingCode's error for a code of the old
// length (from a bridge or proxy before codes grew to 16 symbols); it
// wraps ErrPairingCodeFormat.
var ErrPairingCodeOld = fmt.Errorf("%w (that one has 12, as codes from before an upgrade of the proxy had, and those no longer work): run `browserbridge pair` again for a new one", ErrPairingCodeFormat)

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
	switch b.Len() {
	case PairingCodeLength:
	case OldPairingCodeLength:
		return "", ErrPairingCodeOld
	default:
		return "", ErrPairingCodeFormat
	}
	return b.String(), nil
}

// FormatPairingCode writes a canonical code in groups of four joined by
// dashes ("ABCDEFGHJKMNPQRS" → "ABCD-EFGH-JKMN-PQRS").
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

package authserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// MinPasswordLength is the shortest password the sign-in page accepts as
// configuration: it faces the internet, where guesses are cheap to try.
const MinPasswordLength = 12

// bcryptMaxBytes: bcrypt reads only the first 72 bytes of a password, so
// a longer one would match any password sharing those bytes.
const bcryptMaxBytes = 72

// hashCost is HashPassword's bcrypt cost: about a quarter second on a
// laptop, which the per-request and per-address limits multiply.
const hashCost = 12

// HashPassword returns a bcrypt hash of pw for IdentityConfig.PasswordHash
// (`browserbridge gateway hash-password`). It refuses a password shorter
// than MinPasswordLength characters or longer than bcrypt's 72 bytes.
func HashPassword(pw string) (string, error) {
	if err := checkPasswordLength(pw); err != nil {
		return "", err
	}
	if len(pw) > bcryptMaxBytes {
		return "", fmt.Errorf("the password is %d bytes; bcrypt uses only the first %d, so choose a shorter one", len(pw), bcryptMaxBytes)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), hashCost)
	if err != nil {
		return "", fmt.Errorf("hashing the password: %w", err)
	}
	return string(h), nil
}

func checkPasswordLength(pw string) error {
	if n := utf8.RuneCountInString(pw); n < MinPasswordLength {
		return fmt.Errorf("the password has %d characters: too short to face the internet (at least %d)", n, MinPasswordLength)
	}
	return nil
}

// passwordCheck is the configured password: a bcrypt hash, or the
// SHA-256 of a password given in the clear.
type passwordCheck struct {
	bcrypt []byte
	sha    [sha256.Size]byte
}

func newPasswordCheck(hash, plain string) (*passwordCheck, error) {
	switch {
	case hash != "" && plain != "":
		return nil, errors.New("authserver: set the password hash or the password (BROWSERBRIDGE_OAUTH_PASSWORD), not both")
	case hash != "":
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return nil, errors.New("authserver: the password hash is not a bcrypt hash (make one with `browserbridge gateway hash-password`)")
		}
		return &passwordCheck{bcrypt: []byte(hash)}, nil
	case plain != "":
		if err := checkPasswordLength(plain); err != nil {
			return nil, fmt.Errorf("authserver: %w", err)
		}
		return &passwordCheck{sha: sha256.Sum256([]byte(plain))}, nil
	}
	return nil, nil
}

// matches reports whether pw is the password, in time that does not depend
// on how much of it is right.
func (p *passwordCheck) matches(pw string) bool {
	if p.bcrypt != nil {
		if len(pw) > bcryptMaxBytes {
			return false
		}
		return bcrypt.CompareHashAndPassword(p.bcrypt, []byte(pw)) == nil
	}
	sum := sha256.Sum256([]byte(pw))
	return subtle.ConstantTimeCompare(sum[:], p.sha[:]) == 1
}

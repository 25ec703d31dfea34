package httpguard

import (
	"errors"
	"net/http"
)

// IsTooLarge reports whether err comes from reading a request body beyond
// the guard's limit. A handler that sees it should answer
// mcphttp.WriteError(w, http.StatusRequestEntityTooLarge, nil, CodeRefused, ...).
func IsTooLarge(err error) bool {
	var tooLarge *http.MaxBytesError
	return errors.As(err, &tooLarge)
}

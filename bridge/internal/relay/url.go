package relay

import (
	"fmt"
	"net/http"
)

// dialError describes a failed WebSocket dial of dialURL, the URL actually
// dialled (not the one configured, which may be the proxy's base URL), with
// the HTTP status when the proxy answered the upgrade with one.
func dialError(dialURL string, resp *http.Response, err error) error {
	if resp != nil {
		hint := ""
		if resp.StatusCode == http.StatusNotFound {
			hint = ": is this the proxy's address?"
		}
		return fmt.Errorf("connecting to the proxy at %s: %v (HTTP %s%s)", dialURL, err, resp.Status, hint)
	}
	return fmt.Errorf("connecting to the proxy at %s: %w", dialURL, err)
}

package daemon

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestMetricLabelsAreAFixedSet floods the bridge with invented HTTP verbs
// and paths, as `curl -X BREW` would, and checks that /metrics stays small:
// every label value of the HTTP metrics comes from a fixed set.
func TestMetricLabelsAreAFixedSet(t *testing.T) {
	base, _ := httpBridge(t, nil) // the default limits: none may refuse this loopback client
	const flood = 10000
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: time.Minute}
	t.Cleanup(client.CloseIdleConnections)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < flood; i += 4 {
				method, path := fmt.Sprintf("BREW%05d", i), "/mcp"
				if i%2 == 1 {
					path = fmt.Sprintf("/invented/%d", i)
				}
				req, err := http.NewRequest(method, base+path, nil)
				if err != nil {
					errs <- err
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					errs <- fmt.Errorf("%s %s: %w", method, path, err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					errs <- fmt.Errorf("%s %s: 429 from loopback: the default rate limit refused a client", method, path)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Requests are counted after their handler returns, which may be just
	// after the client has its answer: poll until all are there.
	var body string
	testutil.WaitFor(t, fmt.Sprintf("/metrics to count the %d invented verbs on /mcp as other", flood/2), func() bool {
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return strings.Contains(body, fmt.Sprintf(`method="other",code="405"} %d`, flood/2))
	})

	allowed := map[string]bool{"GET": true, "POST": true, "DELETE": true, "OPTIONS": true, "HEAD": true, "PUT": true, "PATCH": true, "other": true}
	series := 0
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		series++
		if _, rest, ok := strings.Cut(line, `method="`); ok && strings.HasPrefix(line, "browserbridge_http_") {
			if m, _, _ := strings.Cut(rest, `"`); !allowed[m] {
				t.Errorf("method label %q is not in the fixed set: %s", m, line)
			}
		}
	}
	t.Logf("/metrics after %d invented verbs: %d series, %d bytes", flood, series, len(body))
	if series > 200 || len(body) > 32<<10 {
		t.Errorf("/metrics holds %d series in %d bytes after the flood; want at most 200 series in 32 KiB", series, len(body))
	}
}

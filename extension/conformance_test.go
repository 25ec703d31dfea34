package extension

// The official MCP conformance suite's auth scenarios against the
// extension's remote-MCP client (extension/remote), driven by its Node
// wrapper extension/test/conformance/client.mjs. The suite runs a mock MCP
// server and authorization server per scenario; the wrapper signs in, lists
// and calls tools. Scenarios the client does not pass on purpose are listed,
// with reasons, in extension/test/conformance/expected-failures.yml.
//
// scripts/install-test-tools.sh installs the suite (pinned in tools/npm) and
// a recent enough Node.js; like the daemon's client tests, this test fails,
// never skips, when they are missing.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/npmtools"
)

// authSuites are the suites whose scenarios are all auth/…: required,
// back-compat (2025-03-26), draft and extensions.
var authSuites = []string{"auth", "backcompat", "draft", "extensions"}

// suiteTimeout bounds one suite run; the four run in parallel, and together
// take about 15 s.
const suiteTimeout = 2 * time.Minute

type conformance struct {
	root, node, entry string
}

func needConformance(t *testing.T) conformance {
	t.Helper()
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	c := conformance{root: tools.Root, node: tools.Node}
	if c.entry, err = tools.Module("@modelcontextprotocol", "conformance", "dist", "index.js"); err != nil {
		t.Fatal(err)
	}
	return c
}

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// run runs the suite's CLI in dir and returns its output, stdout then stderr.
func (c conformance) run(t *testing.T, dir string, timeout time.Duration, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.node, append([]string{c.entry}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", timeout, err)
	}
	return ansiEscape.ReplaceAll(out.Bytes(), nil), err
}

// authScenarios lists the suite's client scenarios named auth/….
func (c conformance) authScenarios(t *testing.T) []string {
	t.Helper()
	out, err := c.run(t, t.TempDir(), 30*time.Second, "list")
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	var names []string
	client := false
	item := regexp.MustCompile(`^\s*-\s+(\S+)`)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Client scenarios") {
			client = true
			continue
		}
		if m := item.FindStringSubmatch(line); client && m != nil && strings.HasPrefix(m[1], "auth/") {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		t.Fatalf("conformance list named no auth/ client scenarios:\n%s", out)
	}
	return names
}

// expectedFailures reads the client list of the expected-failures file.
func expectedFailures(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	inClient := false
	item := regexp.MustCompile(`^\s+-\s+(\S+)\s*$`)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") || strings.TrimSpace(line) == "" {
			continue
		}
		if !strings.HasPrefix(line, " ") {
			inClient = strings.TrimSpace(line) == "client:"
			continue
		}
		if m := item.FindStringSubmatch(line); inClient && m != nil {
			out[m[1]] = true
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no client scenarios", path)
	}
	return out
}

type check struct {
	ID, Name, Description, Status string
}

// scenarioResults reads results/<scenario>-<time>/checks.json under dir:
// scenario → the checks that failed or warned (the suite counts both).
func scenarioResults(t *testing.T, dir string) map[string][]check {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "auth", "*", "checks.json"))
	if err != nil {
		t.Fatal(err)
	}
	stamp := regexp.MustCompile(`-\d{4}-\d\d-\d\dT[\d-]+Z$`)
	out := map[string][]check{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []check
		if err := json.Unmarshal(data, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := "auth/" + stamp.ReplaceAllString(filepath.Base(filepath.Dir(f)), "")
		bad := []check{}
		for _, c := range checks {
			if c.Status == "FAILURE" || c.Status == "WARNING" {
				bad = append(bad, c)
			}
		}
		out[name] = bad
	}
	return out
}

func TestConformanceAuth(t *testing.T) {
	c := needConformance(t)
	confDir := filepath.Join(c.root, "extension", "test", "conformance")
	expectedFile := filepath.Join(confDir, "expected-failures.yml")
	expected := expectedFailures(t, expectedFile)
	all := c.authScenarios(t)
	// The suite splits --command on spaces and runs it through a shell.
	command := fmt.Sprintf("'%s' '%s'", c.node, filepath.Join(confDir, "client.mjs"))

	var mu sync.Mutex
	ran := map[string][]check{}
	t.Run("suites", func(t *testing.T) {
		for _, suite := range authSuites {
			t.Run(suite, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				t0 := time.Now()
				out, err := c.run(t, dir, suiteTimeout, "client", "--suite", suite, "--command", command,
					"--expected-failures", expectedFile, "-o", filepath.Join(dir, "results"))
				t.Logf("suite %s (%s):\n%s", suite, time.Since(t0).Round(time.Millisecond), summary(out))
				results := scenarioResults(t, filepath.Join(dir, "results"))
				if len(results) == 0 {
					t.Fatalf("suite %s ran no scenarios (%v):\n%s", suite, err, out)
				}
				for name, bad := range results {
					switch {
					case len(bad) > 0 && !expected[name]:
						var lines []string
						for _, b := range bad {
							lines = append(lines, fmt.Sprintf("  %s %s: %s", b.Status, b.ID, b.Description))
						}
						t.Errorf("%s failed unexpectedly:\n%s", name, strings.Join(lines, "\n"))
					case len(bad) == 0 && expected[name]:
						t.Errorf("%s passes now: remove it from %s", name, expectedFile)
					}
				}
				if err != nil && !t.Failed() {
					t.Errorf("suite %s: %v\n%s", suite, err, out)
				}
				mu.Lock()
				for k, v := range results {
					ran[k] = v
				}
				mu.Unlock()
			})
		}
	})

	for _, name := range all {
		if _, ok := ran[name]; !ok {
			t.Errorf("scenario %s ran in none of the suites %v", name, authSuites)
		}
	}
	for name := range expected {
		if !slices.Contains(all, name) {
			t.Errorf("%s lists %s, which the suite does not have", expectedFile, name)
		}
	}
	passed := 0
	var failed []string
	for name, bad := range ran {
		if len(bad) == 0 {
			passed++
		} else {
			failed = append(failed, name)
		}
	}
	sort.Strings(failed)
	t.Logf("%d auth scenarios: %d passed, %d failed as expected %v", len(ran), passed, len(failed), failed)
}

// summary keeps the suite's summary lines of its output.
func summary(out []byte) string {
	s := string(out)
	if i := strings.Index(s, "=== SUITE SUMMARY ==="); i >= 0 {
		return s[i:]
	}
	return s
}

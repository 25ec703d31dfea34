//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg" // screenshots may come as JPEG
	_ "image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// The environment scripts/bench-alternatives.sh sets for
// BenchmarkTaskAlternatives.
const (
	// envAlternatives is the npm prefix holding @playwright/mcp and
	// chrome-devtools-mcp (its node_modules); unset, the benchmark skips.
	envAlternatives = "BROWSERBRIDGE_BENCH_ALTERNATIVES"
	// envBenchNode is the Node.js that runs them; unset, node from $PATH.
	envBenchNode = "BROWSERBRIDGE_BENCH_NODE"
)

// alternativesHint is what to run when the alternatives are not installed.
const alternativesHint = "run scripts/bench-alternatives.sh (or make bench-alternatives), which installs the pinned @playwright/mcp and chrome-devtools-mcp outside the repository and runs this benchmark"

// taskStepNames name the 10 steps of the task (bench_task_test.go) the same
// way for every server; each server's steps follow this order.
var taskStepNames = []string{"navigate", "snapshot", "fill_4_fields", "type", "read_back_js", "click_submit", "read_result", "screenshot", "navigate_other", "back"}

const (
	snapshotStep   = 1 // the index of the first snapshot in taskStepNames
	screenshotStep = 7
)

// What the task enters and what the page must then say.
const (
	taskFormValues = "Ada Lovelace|ada@example.org|3|it|ring twice"
	taskResult     = "Order placed for Ada Lovelace <ada@example.org>: 3 to it; note: ring twice"
	// readBackJS is the read-back as a function, the form Playwright's
	// browser_evaluate and chrome-devtools-mcp's evaluate_script take.
	readBackJS = `() => ["name", "email", "quantity", "country", "note"].map((id) => document.getElementById(id).value).join("|")`
)

// npmPackage is an installed npm package: its version and the script that
// starts its MCP server on stdio.
type npmPackage struct {
	name, version, entry string
}

// findNPMPackage reads the package's package.json under prefix and checks
// that entry (relative to the package) exists.
func findNPMPackage(prefix, name, entry string) (npmPackage, error) {
	dir := filepath.Join(prefix, "node_modules", filepath.FromSlash(name))
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return npmPackage{}, fmt.Errorf("%s is not installed under %s: %w", name, prefix, err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return npmPackage{}, fmt.Errorf("%s/package.json: %w", dir, err)
	}
	p := npmPackage{name: name, version: pkg.Version, entry: filepath.Join(dir, filepath.FromSlash(entry))}
	if _, err := os.Stat(p.entry); err != nil {
		return npmPackage{}, fmt.Errorf("%s %s has no %s: %w", name, p.version, entry, err)
	}
	return p, nil
}

// benchTarget is one MCP server the task runs against.
type benchTarget struct {
	name, version string
	// command is a new, unstarted process of the server on stdio.
	command func() *exec.Cmd
	// prepare runs once per session, untimed: what the steps act on (our
	// tab id, chrome-devtools-mcp's page id; 0 for Playwright MCP).
	prepare func(tb testing.TB, c *client) int
	// steps are the task's, in taskStepNames order, one call each.
	steps []taskStep
	// roots are the processes whose trees hold the server and the browser
	// it drives, given the session's own process.
	roots func(session *exec.Cmd) []int
	// driver does the page set's tasks (bench_pageset_test.go).
	driver *pageDriver
}

// targetSession is a running server and its client session.
type targetSession struct {
	target *benchTarget
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	c      *client
	stderr *testbrowser.SyncBuffer
	tab    int
}

// startSession starts the target's server and returns the session and the
// cold start: from starting the process to the answer to initialize
// (mcp.Client.Connect also sends notifications/initialized). Every session
// is held to protocol 2025-11-25 and so to the initialize handshake, which
// all three speak: left to itself, the SDK's client first tries the
// stateless server/discover, which only ours answers, and the alternatives'
// cold start would include a refused request.
func startSession(tb testing.TB, t *benchTarget) (*targetSession, time.Duration) {
	tb.Helper()
	s := &targetSession{target: t, cmd: t.command(), stderr: &testbrowser.SyncBuffer{}}
	s.cmd.Stderr = s.stderr
	cl := mcp.NewClient(&mcp.Implementation{Name: "e2e-bench-alternatives", Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: s.cmd, TerminateDuration: stopWait}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	cold := time.Since(start)
	if err != nil {
		tb.Fatalf("%s: MCP connect over stdio to %s: %v\nits stderr:\n%s", t.name, strings.Join(s.cmd.Args, " "), err, tail(s.stderr.String(), 40))
	}
	s.cs, s.c = cs, &client{cs: cs, name: t.name}
	return s, cold
}

// close ends the session (stdin closed, then SIGTERM, then SIGKILL, as the
// SDK does) and kills whatever it left behind: the alternatives start their
// browser in a process group of its own, and it must not outlive the run.
func (s *targetSession) close(tb testing.TB) {
	tb.Helper()
	if tb.Failed() {
		tb.Logf("--- %s stderr ---\n%s", s.target.name, tail(s.stderr.String(), 60))
	}
	below := descendants(s.cmd.Process.Pid)
	_ = s.cs.Close()
	var left []int
	for deadline := time.Now().Add(stopWait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		left = left[:0]
		for _, p := range below {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
	}
	tb.Logf("%s: %d processes outlived the server's session (killed now): %v", s.target.name, len(left), left)
	for _, p := range left {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// targetStats is what the benchmark measured of one target.
type targetStats struct {
	task, cold   []time.Duration // whole task per pass; process start → initialized per start
	steps        [][]time.Duration
	firstTask    time.Duration // the session's first pass (the alternatives launch their browser in it)
	calls, bytes int           // summed over the measured passes
	stepBytes    []replyBytes  // per step, summed over the measured passes
	snapshotB    int           // the first snapshot's result, last pass
	screenshot   image.Config  // last pass
	screenshotB  int           // the image's bytes (decoded from base64), last pass
	passes       int
	serverRSS    int64  // peak, bytes
	servers      string // the server's processes at the peak
	protocol     string // the version the long-lived session speaks
	browserPSS   int64  // peak, bytes
}

// runPass runs the task once on the session and adds to st; it samples the
// memory of the session's processes after every step (untimed).
func runPass(tb testing.TB, s *targetSession, order, other string, st *targetStats) time.Duration {
	tb.Helper()
	run := &taskRun{c: s.c, tab: s.tab, fields: true, order: order, other: other}
	if st.steps == nil {
		st.steps = make([][]time.Duration, len(taskStepNames))
		st.stepBytes = make([]replyBytes, len(taskStepNames))
	}
	var total time.Duration
	for k, step := range s.target.steps {
		start := time.Now()
		results := step.run(tb, run)
		d := time.Since(start)
		total += d
		st.steps[k] = append(st.steps[k], d)
		st.calls += len(results)
		dumpTaskStep(s.target.name, k, taskStepNames[k], results)
		for _, r := range results {
			rb, err := measureReply(r)
			if err != nil {
				tb.Fatalf("%s %s: encoding its result: %v", s.target.name, taskStepNames[k], err)
			}
			st.bytes += rb.json
			st.stepBytes[k] = st.stepBytes[k].add(rb)
			if k == snapshotStep {
				st.snapshotB = rb.json
			}
			if k == screenshotStep {
				data, _, _ := imageOf(r)
				cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
				if err != nil {
					tb.Fatalf("%s screenshot: the image (%d bytes) does not decode: %v", s.target.name, len(data), err)
				}
				st.screenshot, st.screenshotB = cfg, len(data)
			}
		}
		server, browser, servers := treeMemory(s.target.roots(s.cmd))
		if server > st.serverRSS {
			st.serverRSS, st.servers = server, servers
		}
		st.browserPSS = max(st.browserPSS, browser)
	}
	st.passes++
	return total
}

// BenchmarkTaskAlternatives runs the 10-step task of BenchmarkTask (the
// same page, served the same way) against Browser Bridge and the two
// servers people use instead, Playwright MCP and chrome-devtools-mcp, each
// driven by the Go SDK's client over stdio, in interleaved rounds (ours,
// Playwright, DevTools, ours, …) so that all see the same machine.
//
// Browser Bridge is `browserbridge stdio` in front of the running bridge,
// whose browser (headless Chromium with the extension) is the user's own
// and already open; the alternatives launch the same Chromium binary
// headless, isolated, on their first tool call. Each round also starts one
// more process of each server to time its cold start.
//
// Each round then does issue 32's page set (bench_pageset_test.go) with each
// server: six pages of the shapes agents meet, a task on each done by a
// scripted careful agent with that server's own tools, its outcome checked.
//
// The figures go to stdout as markdown tables (the 10-step task, its steps,
// the page set), and as metrics named <server>-<what>; ns/op is one round
// (all three tasks, cold starts and page sets).
// The alternatives come from scripts/bench-alternatives.sh; without them
// Browser Bridge's rounds run alone (make test runs them once, so that this
// path cannot break unseen), and the log says what was left out.
func BenchmarkTaskAlternatives(b *testing.B) {
	alts, missing := findAlternatives()
	if missing != nil {
		b.Logf("Browser Bridge alone: the alternatives are left out (%v): %s", missing, alternativesHint)
	}

	w := startWorld(b, worldOptions{})
	order, other := w.pages.url("order.html"), w.pages.url("index.html")
	scratch := b.TempDir()
	ours := &benchTarget{
		name: "browserbridge", version: checkoutVersion(),
		command: func() *exec.Cmd {
			cmd := exec.Command(bins.Bridge, "stdio", "--url", w.mcpURL)
			cmd.Env = w.env
			return cmd
		},
		prepare: func(tb testing.TB, c *client) int { return c.newTab(tb, other) },
		steps:   taskSteps(),
		driver:  oursDriver(),
		roots: func(session *exec.Cmd) []int {
			return []int{session.Process.Pid, w.serve.Process.Pid, w.chrome.Process.Pid}
		},
	}
	targets := []*benchTarget{ours}
	if missing == nil {
		targets = append(targets, alts.targets(scratch)...)
	}
	for _, t := range targets {
		if len(t.steps) != len(taskStepNames) {
			b.Fatalf("%s has %d steps, the task has %d", t.name, len(t.steps), len(taskStepNames))
		}
	}

	// One long-lived session per server; its start is the first cold-start
	// sample and its first pass (untimed by the benchmark) warms it up.
	sessions := make([]*targetSession, len(targets))
	firstCold := make([]time.Duration, len(targets))
	firstTask := make([]time.Duration, len(targets))
	for i, t := range targets {
		s, cold := startSession(b, t)
		b.Cleanup(func() { s.close(b) })
		sessions[i], firstCold[i] = s, cold
		s.tab = t.prepare(b, s.c)
		firstTask[i] = runPass(b, s, order, other, &targetStats{})
	}

	loadBefore := loadAverage()
	var final []*targetStats
	var pageFinal [][]*pageStats
	b.Run("interleaved", func(b *testing.B) {
		stats := make([]*targetStats, len(targets))
		pageStatsOf := make([][]*pageStats, len(targets))
		for i := range targets {
			pageStatsOf[i] = make([]*pageStats, len(pageSet))
			for k := range pageSet {
				pageStatsOf[i][k] = &pageStats{}
			}
			stats[i] = &targetStats{cold: []time.Duration{firstCold[i]}, firstTask: firstTask[i],
				protocol: sessions[i].cs.InitializeResult().ProtocolVersion}
		}
		b.ResetTimer()
		for range b.N {
			for i, t := range targets {
				s, cold := startSession(b, t)
				stats[i].cold = append(stats[i].cold, cold)
				s.close(b)
				stats[i].task = append(stats[i].task, runPass(b, sessions[i], order, other, stats[i]))
				runPageSet(sessions[i], t.driver, w.pages, pageStatsOf[i])
			}
		}
		b.StopTimer()
		for i, t := range targets {
			reportTarget(b, t.name, stats[i])
		}
		final, pageFinal = stats, pageStatsOf
	})
	if final != nil {
		// On stdout, so that the figures show without -v.
		fmt.Print(alternativesTables(targets, final))
		fmt.Print("\nThe page set (issue 32), per page and server:\n\n" + pageSetTable(targets, pageFinal) + "\n" + pageSetRatios(targets, pageFinal))
		fmt.Printf("load average (1, 5, 15 min) before: %s; after: %s; %d CPUs\n", loadBefore, loadAverage(), runtime.NumCPU())
	}
}

// alternatives are the installed peers of BenchmarkTaskAlternatives.
type alternatives struct {
	playwright, devtools npmPackage
	node                 string
}

// findAlternatives finds the peers scripts/bench-alternatives.sh installs;
// the error says what is missing.
func findAlternatives() (alternatives, error) {
	var a alternatives
	prefix := os.Getenv(envAlternatives)
	if prefix == "" {
		return a, fmt.Errorf("$%s is not set", envAlternatives)
	}
	var err error
	if a.playwright, err = findNPMPackage(prefix, "@playwright/mcp", "cli.js"); err != nil {
		return a, err
	}
	if a.devtools, err = findNPMPackage(prefix, "chrome-devtools-mcp", "build/src/bin/chrome-devtools-mcp.js"); err != nil {
		return a, err
	}
	if a.node = os.Getenv(envBenchNode); a.node == "" {
		if a.node, err = exec.LookPath("node"); err != nil {
			return a, fmt.Errorf("no node in $PATH (%v) and $%s is not set", err, envBenchNode)
		}
	}
	return a, nil
}

// targets are Playwright MCP and chrome-devtools-mcp as benchmark
// targets, working in scratch.
func (a alternatives) targets(scratch string) []*benchTarget {
	// The alternatives run offline and quietly: their own HOME (caches,
	// update stamps), no usage statistics or update checks.
	altEnv := append(os.Environ(),
		"HOME="+filepath.Join(scratch, "home"),
		"CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS=1",
		"CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS=1",
	)
	sessionRoot := func(session *exec.Cmd) []int { return []int{session.Process.Pid} }
	pw := &benchTarget{
		name: "playwright-mcp", version: a.playwright.version,
		command: func() *exec.Cmd {
			// --no-sandbox: the benchmark runs as root, as the harness's
			// Chromium does.
			cmd := exec.Command(a.node, a.playwright.entry, "--headless", "--isolated", "--no-sandbox",
				"--executable-path", chromiumBin, "--output-dir", filepath.Join(scratch, "playwright-output"))
			cmd.Env, cmd.Dir = altEnv, scratch
			return cmd
		},
		prepare: func(testing.TB, *client) int { return 0 },
		steps:   playwrightSteps(),
		driver:  playwrightDriver(),
		roots:   sessionRoot,
	}
	dt := &benchTarget{
		name: "chrome-devtools-mcp", version: a.devtools.version,
		command: func() *exec.Cmd {
			cmd := exec.Command(a.node, a.devtools.entry, "--headless", "--isolated", "--executablePath", chromiumBin,
				"--chromeArg=--no-sandbox", "--no-usage-statistics", "--no-performance-crux")
			cmd.Env, cmd.Dir = altEnv, scratch
			return cmd
		},
		prepare: devtoolsPage,
		steps:   devtoolsSteps(),
		driver:  devtoolsDriver(),
		roots:   sessionRoot,
	}
	return []*benchTarget{pw, dt}
}

// checkoutVersion names the checkout the bridge was built from, as `make
// build` does (git describe).
func checkoutVersion() string {
	out, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v
	}
	return "(this checkout)"
}

// loadAverage is the first three fields of /proc/loadavg: how busy the
// machine was, to read the figures by.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// reportTarget reports one server's figures as metrics <name>-<what>.
func reportTarget(b *testing.B, name string, st *targetStats) {
	n := float64(st.passes)
	task, _ := quantiles(st.task)
	cold, _ := quantiles(st.cold)
	b.ReportMetric(ms(task), name+"-task-ms")
	b.ReportMetric(ms(cold), name+"-coldstart-ms")
	b.ReportMetric(float64(st.calls)/n, name+"-calls")
	b.ReportMetric(float64(st.bytes)/n, name+"-bytes")
	b.ReportMetric(float64(st.snapshotB), name+"-snapshot-B")
	b.ReportMetric(float64(st.screenshotB), name+"-screenshot-B")
	b.ReportMetric(float64(st.serverRSS)/(1<<20), name+"-server-MB")
	b.ReportMetric(float64(st.browserPSS)/(1<<20), name+"-browser-MB")
}

// alternativesTables is the markdown of the figures: the summary, then the
// median of each step.
func alternativesTables(targets []*benchTarget, stats []*targetStats) string {
	var sb strings.Builder
	row := func(label string, cell func(i int) string) {
		sb.WriteString("| " + label + " |")
		for i := range targets {
			sb.WriteString(" " + cell(i) + " |")
		}
		sb.WriteString("\n")
	}
	row("", func(i int) string { return targets[i].name + " " + targets[i].version })
	row("---", func(int) string { return "---:" })
	row("protocol (initialize answered)", func(i int) string { return stats[i].protocol })
	row("whole task, median ms", func(i int) string { p50, _ := quantiles(stats[i].task); return fmt.Sprintf("%.0f", ms(p50)) })
	row("whole task, min–max ms", func(i int) string {
		s := sortedDurations(stats[i].task)
		return fmt.Sprintf("%.0f–%.0f", ms(s[0]), ms(s[len(s)-1]))
	})
	row("first task of a session, ms", func(i int) string { return fmt.Sprintf("%.0f", ms(stats[i].firstTask)) })
	row("tool calls", func(i int) string { return fmt.Sprintf("%d", stats[i].calls/stats[i].passes) })
	row("bytes returned (JSON of the results)", func(i int) string { return fmt.Sprintf("%d", stats[i].bytes/stats[i].passes) })
	row("snapshot bytes", func(i int) string { return fmt.Sprintf("%d", stats[i].snapshotB) })
	row("screenshot", func(i int) string {
		return fmt.Sprintf("%d×%d, %d B", stats[i].screenshot.Width, stats[i].screenshot.Height, stats[i].screenshotB)
	})
	row("screenshot, image tokens (Claude, about)", func(i int) string {
		return fmt.Sprintf("%d", claudeImageTokens(stats[i].screenshot.Width, stats[i].screenshot.Height))
	})
	row("cold start to initialized, median ms", func(i int) string { p50, _ := quantiles(stats[i].cold); return fmt.Sprintf("%.0f", ms(p50)) })
	row("server memory, peak RSS MB", func(i int) string { return fmt.Sprintf("%.0f", float64(stats[i].serverRSS)/(1<<20)) })
	row("browser memory, peak PSS MB", func(i int) string { return fmt.Sprintf("%.0f", float64(stats[i].browserPSS)/(1<<20)) })
	sb.WriteString("\n")
	row("step, median ms", func(i int) string { return targets[i].name })
	row("---", func(int) string { return "---:" })
	for k, name := range taskStepNames {
		row(name, func(i int) string { p50, _ := quantiles(stats[i].steps[k]); return fmt.Sprintf("%.1f", ms(p50)) })
	}
	sb.WriteString("\n")
	names := make([]string, len(targets))
	perPass := make([][]replyBytes, len(targets))
	for i, t := range targets {
		names[i] = t.name
		for _, b := range stats[i].stepBytes {
			perPass[i] = append(perPass[i], b.div(stats[i].passes))
		}
	}
	sb.WriteString(stepBytesTable(taskStepNames, names, perPass))
	sb.WriteString("\n")
	for i, t := range targets {
		fmt.Fprintf(&sb, "%s server processes at the peak: %s\n", t.name, stats[i].servers)
	}
	fmt.Fprintf(&sb, "%d measured passes per server (after one warm-up pass), %d cold starts each.\n", stats[0].passes, len(stats[0].cold))
	return sb.String()
}

func sortedDurations(d []time.Duration) []time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// refsFrom finds, in a snapshot's text, the ref of each of the order form's
// controls: re's groups nameGroup and refGroup are the accessible name and
// the ref.
func refsFrom(tb testing.TB, server, text string, re *regexp.Regexp, nameGroup, refGroup int) map[string]string {
	tb.Helper()
	refs := map[string]string{}
	matches := re.FindAllStringSubmatch(text, -1)
	for _, name := range []string{"Name", "Email", "Quantity", "Country", "Note", "Place order"} {
		for _, m := range matches {
			if m[nameGroup] == name {
				refs[name] = m[refGroup]
				break
			}
		}
		if refs[name] == "" {
			tb.Fatalf("%s: the snapshot of the order page gives no ref for %q:\n%s", server, name, clip(text, 3000))
		}
	}
	return refs
}

// mustContain fails when the text of res lacks want: a step's outcome is
// checked, so a broken mapping fails loudly.
func mustContain(tb testing.TB, server, step string, res *mcp.CallToolResult, want string) {
	tb.Helper()
	if text := testutil.Text(res); !strings.Contains(text, want) {
		tb.Fatalf("%s %s: the answer lacks %q:\n%s", server, step, want, clip(text, 3000))
	}
}

// mustHaveImage fails when res holds no image.
func mustHaveImage(tb testing.TB, server string, res *mcp.CallToolResult) {
	tb.Helper()
	if _, _, ok := imageOf(res); !ok {
		tb.Fatalf("%s screenshot gave no image: %s", server, describe(res))
	}
}

// playwrightRef matches a control of Playwright MCP's YAML snapshot:
// `- textbox "Name" [ref=e6]` (later snapshots number refs f3e6 and so on).
var playwrightRef = regexp.MustCompile(`- (?:textbox|spinbutton|combobox|button) "([^"]+)"[^\n]*\[ref=(\w+)\]`)

// playwrightSteps are the task in Playwright MCP's tools. Its
// browser_fill_form takes the four fields in one call (textbox for the
// number field: the tool's types are textbox, checkbox, radio, combobox and
// slider; a combobox is filled with the option's text).
func playwrightSteps() []taskStep {
	const server = "playwright-mcp"
	one := func(r *mcp.CallToolResult) []*mcp.CallToolResult { return []*mcp.CallToolResult{r} }
	return []taskStep{
		{"navigate", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "browser_navigate", map[string]any{"url": t.order})
			mustContain(tb, server, "navigate", res, "Page URL: "+t.order)
			return one(res)
		}},
		{"snapshot", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "browser_snapshot", nil)
			t.refs = refsFrom(tb, server, testutil.Text(res), playwrightRef, 1, 2)
			return one(res)
		}},
		{"fill_4_fields", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			field := func(name, typ, value string) map[string]any {
				return map[string]any{"target": t.refs[name], "name": name, "type": typ, "value": value}
			}
			return one(t.c.call(tb, "browser_fill_form", map[string]any{"fields": []map[string]any{
				field("Name", "textbox", "Ada Lovelace"),
				field("Email", "textbox", "ada@example.org"),
				field("Quantity", "textbox", "3"),
				field("Country", "combobox", "Italy"),
			}}))
		}},
		{"type", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			return one(t.c.call(tb, "browser_type", map[string]any{"target": t.refs["Note"], "element": "Note", "text": "ring twice"}))
		}},
		{"read_back_js", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "browser_evaluate", map[string]any{"function": readBackJS})
			mustContain(tb, server, "read_back_js", res, taskFormValues)
			return one(res)
		}},
		{"click_submit", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			return one(t.c.call(tb, "browser_click", map[string]any{"target": t.refs["Place order"], "element": "Place order button"}))
		}},
		{"read_result", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "browser_snapshot", nil)
			mustContain(tb, server, "read_result", res, taskResult)
			return one(res)
		}},
		{"screenshot", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "browser_take_screenshot", map[string]any{"type": "png", "scale": "css"})
			mustHaveImage(tb, server, res)
			return one(res)
		}},
		{"navigate_other", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "browser_navigate", map[string]any{"url": t.other})
			mustContain(tb, server, "navigate_other", res, "Page URL: "+t.other)
			return one(res)
		}},
		{"back", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "browser_navigate_back", nil)
			mustContain(tb, server, "back", res, "Page URL: "+t.order)
			return one(res)
		}},
	}
}

// devtoolsRef matches a control of chrome-devtools-mcp's snapshot:
// `uid=1_5 textbox "Name" required`.
var devtoolsRef = regexp.MustCompile(`uid=(\S+) (?:textbox|spinbutton|combobox|button) "([^"]+)"`)

// devtoolsSelectedPage matches list_pages' selected page: `1: about:blank [selected]`.
var devtoolsSelectedPage = regexp.MustCompile(`(?m)^(\d+): .*\[selected\]`)

// devtoolsPage is the page chrome-devtools-mcp acts on (its tools take a
// pageId): the selected one, from list_pages.
func devtoolsPage(tb testing.TB, c *client) int {
	tb.Helper()
	res := c.call(tb, "list_pages", nil)
	m := devtoolsSelectedPage.FindStringSubmatch(testutil.Text(res))
	if m == nil {
		tb.Fatalf("chrome-devtools-mcp list_pages names no selected page:\n%s", clip(testutil.Text(res), 2000))
	}
	id, _ := strconv.Atoi(m[1])
	return id
}

// devtoolsSteps are the task in chrome-devtools-mcp's tools: fill_form for
// the four fields, fill for the note (its type_text types into whatever has
// the focus, with no target), take_snapshot to read the result.
func devtoolsSteps() []taskStep {
	const server = "chrome-devtools-mcp"
	one := func(r *mcp.CallToolResult) []*mcp.CallToolResult { return []*mcp.CallToolResult{r} }
	return []taskStep{
		{"navigate", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "navigate_page", map[string]any{"pageId": t.tab, "type": "url", "url": t.order})
			mustContain(tb, server, "navigate", res, t.order)
			return one(res)
		}},
		{"snapshot", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "take_snapshot", map[string]any{"pageId": t.tab})
			t.refs = refsFrom(tb, server, testutil.Text(res), devtoolsRef, 2, 1)
			return one(res)
		}},
		{"fill_4_fields", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			field := func(name, value string) map[string]any { return map[string]any{"uid": t.refs[name], "value": value} }
			return one(t.c.call(tb, "fill_form", map[string]any{"pageId": t.tab, "elements": []map[string]any{
				field("Name", "Ada Lovelace"),
				field("Email", "ada@example.org"),
				field("Quantity", "3"),
				field("Country", "Italy"),
			}}))
		}},
		{"type", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			return one(t.c.call(tb, "fill", map[string]any{"pageId": t.tab, "uid": t.refs["Note"], "value": "ring twice"}))
		}},
		{"read_back_js", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "evaluate_script", map[string]any{"pageId": t.tab, "function": readBackJS})
			mustContain(tb, server, "read_back_js", res, taskFormValues)
			return one(res)
		}},
		{"click_submit", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			return one(t.c.call(tb, "click", map[string]any{"pageId": t.tab, "uid": t.refs["Place order"]}))
		}},
		{"read_result", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "take_snapshot", map[string]any{"pageId": t.tab})
			mustContain(tb, server, "read_result", res, taskResult)
			return one(res)
		}},
		{"screenshot", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "take_screenshot", map[string]any{"pageId": t.tab})
			mustHaveImage(tb, server, res)
			return one(res)
		}},
		{"navigate_other", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "navigate_page", map[string]any{"pageId": t.tab, "type": "url", "url": t.other})
			mustContain(tb, server, "navigate_other", res, t.other)
			return one(res)
		}},
		{"back", func(tb testing.TB, t *taskRun) []*mcp.CallToolResult {
			res := t.c.call(tb, "navigate_page", map[string]any{"pageId": t.tab, "type": "back"})
			mustContain(tb, server, "back", res, t.order)
			return one(res)
		}},
	}
}

// treeMemory sums the memory of the processes in the trees of roots: the
// resident set (VmRSS) of the server's processes, and the proportional set
// (Pss, shared pages split among their sharers) of the browser's, which
// are Chromium's many processes sharing one binary. A process is the
// browser's when its executable is Chromium's (chromium, chrome_*): our
// host, a child of Chromium, counts as server. servers names each server
// process with its RSS, for the log.
func treeMemory(roots []int) (serverRSS, browserPSS int64, servers string) {
	var parts []string
	for _, pid := range processTree(roots) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			continue // gone meanwhile
		}
		base := filepath.Base(exe)
		if strings.HasPrefix(base, "chrom") {
			browserPSS += procKB(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:") << 10
			continue
		}
		rss := procKB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:") << 10
		serverRSS += rss
		name := base
		// The subcommand or the script, not the host's origin argument.
		if args := procArgs(pid); len(args) > 1 && !strings.Contains(args[1], ":") {
			name += " " + filepath.Base(args[1])
		}
		parts = append(parts, fmt.Sprintf("%s %.0f MB", name, float64(rss)/(1<<20)))
	}
	return serverRSS, browserPSS, strings.Join(parts, ", ")
}

// procArgs is the command line of pid.
func procArgs(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// processTree is roots and all their descendants, read once from /proc.
func processTree(roots []int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The parent follows the state, after the name's closing parenthesis.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	seen := map[int]bool{}
	var all []int
	for queue := append([]int(nil), roots...); len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		if seen[p] {
			continue
		}
		seen[p] = true
		all = append(all, p)
		queue = append(queue, children[p]...)
	}
	return all
}

// procKB reads a "Key:   123 kB" line of a /proc file; 0 when absent.
func procKB(file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

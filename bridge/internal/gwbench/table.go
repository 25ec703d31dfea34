package gwbench

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
)

// report writes the header, the table (with several rounds: their
// medians, then each round's ratios), how each target was started, and the
// notes (skips, failures, first errors). rows have their ratios paired.
func (b *bench) report(out io.Writer, rows []row) {
	e, o := b.env, b.opts
	fmt.Fprintf(out, "MCP stdio gateways in front of @modelcontextprotocol/server-everything %s (tool echo), node %s, %s\n",
		e.pkgs["@modelcontextprotocol/server-everything"].version, e.nodeVer, cpuNote())
	fmt.Fprintf(out, "each row: the target started afresh (not a gateway already running), N sessions in closed loops (direct: N calls in flight on one stdio connection), %v warm-up, %v measured\n",
		o.Warmup, o.Duration)
	table := rows
	if o.Rounds > 1 {
		table = combineRounds(rows)
		fmt.Fprintf(out, "%d rounds, each every session count and target in turn; each figure is the median over the rounds, each ratio the median of the rounds' own ratios\n", o.Rounds)
	}
	fmt.Fprintln(out)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tsessions\tcalls/s\t×direct-sdk\t×tbxark\tp50\tp99\tp99 ×direct-sdk\tsetup p50\tmisrouted\terrors\tgateway RSS idle\tgateway RSS peak\tservers: procs, RSS peak\tCPU µs/call: client\tgateway\tservers")
	for _, r := range table {
		switch {
		case r.skip != "":
			fmt.Fprintf(tw, "%s\t-\tskipped\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t(see notes)\t-\t-\t-\n", r.target)
			continue
		case r.fail == "interrupted":
			fmt.Fprintf(tw, "%s\t%d\tinterrupted\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\n", r.target, r.sessions)
			continue
		case r.fail != "":
			fmt.Fprintf(tw, "%s\t%d\tfailed\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t(see notes)\t-\t-\t-\n", r.target, r.sessions)
			continue
		}
		idle, peak := formatBytes(r.idle.rss), formatBytes(r.peak.rss)
		servers := "-"
		if r.peak.kidsSeen {
			servers = fmt.Sprintf("%d, %s", r.peak.kids, formatBytes(r.peak.kidsRSS))
		}
		cpuGateway := formatMicros(r.cpuPerCall[1])
		if r.direct { // the measured process is the server itself
			idle, peak = "n/a", "n/a"
			servers = fmt.Sprintf("%d, %s", 1+r.peak.kids, formatBytes(r.peak.rss+r.peak.kidsRSS))
			cpuGateway = "n/a"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.target, r.sessions, r.rate(),
			formatRatio(r.xDirect), formatRatio(r.xTBX),
			formatDuration(r.lat.p50), formatDuration(r.lat.p99), formatRatio(r.p99xDirect),
			formatDuration(r.setup), r.misrouted, r.errors, idle, peak, servers,
			formatMicros(r.cpuPerCall[0]), cpuGateway, formatMicros(r.cpuPerCall[2]))
	}
	tw.Flush()
	if o.Rounds > 1 {
		b.reportRounds(out, rows, table)
	}

	fmt.Fprintf(out, `
calls/s    calls answered rightly within the measured %v, divided by it; p50 and p99 over those calls (every duration kept, nearest rank)
×          this row's calls/s (or p99) divided by that of direct-sdk, or of tbxark (tbxark-sdk for the rows driven by the SDK),
           at the same session count in the same round
setup      median time one session took to open (initialize, then notifications/initialized), the N opened at once, after one
           session opened and ended unmeasured (Streamable HTTP targets) so that the server is up; for direct, the server's start
misrouted  replies a session got that were not its own (wrong text for the id, or an id it had not in flight); with errors (failed or
           timed-out calls, %v limit), counted over warm-up and measurement
RSS        VmRSS of the gateway process itself, NOT of the node server(s) it runs: idle once the sessions are initialized, before load;
           peak sampled every %v under load. servers: processes below the gateway (for direct, the server itself) and their summed RSS, at peak
CPU        user+system CPU time spent in the measured window divided by the calls counted: client is this process (the SDK's client, or
           gwbench's own), gateway the gateway process, servers the node server(s) (the /proc figures tick at 10ms); with %d CPUs,
           calls/s cannot exceed %d,000,000 / (their sum)
`, o.Duration, o.CallTimeout, sampleEvery, runtime.NumCPU(), runtime.NumCPU())

	var commands []string
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.target] || r.skip != "" {
			continue
		}
		seen[r.target] = true
		t := targetNamed(r.target)
		switch {
		case r.argv != nil:
			commands = append(commands, fmt.Sprintf("  %-25s %s: %s", r.target, t.about, e.shortArgv(r.argv)))
		case strings.HasPrefix(t.name, "browserbridge") && e.gatewayURL != "":
			commands = append(commands, fmt.Sprintf("  %-25s %s, already running at %s (pid %d)", r.target, t.about, e.gatewayURL, e.gatewayPID))
		}
	}
	if len(commands) > 0 {
		fmt.Fprintf(out, "\ncommands (node server: %s):\n%s\n", e.shortArgv(e.serverArgv()), strings.Join(commands, "\n"))
	}

	var notes []string
	seenSkip := map[string]bool{}
	for _, r := range rows {
		switch {
		case r.skip != "" && !seenSkip[r.target]:
			seenSkip[r.target] = true
			notes = append(notes, fmt.Sprintf("%s skipped: %s", r.target, r.skip))
		case r.fail != "" && r.fail != "interrupted":
			notes = append(notes, fmt.Sprintf("%s, %d sessions%s: %s", r.target, r.sessions, o.roundNote(r), r.fail))
		}
		if r.firstErr != "" {
			notes = append(notes, fmt.Sprintf("%s, %d sessions%s: first error: %s", r.target, r.sessions, o.roundNote(r), r.firstErr))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(out, "\nnotes:")
		for _, n := range notes {
			fmt.Fprintln(out, "  "+n)
		}
	}
}

// shortArgv prints a command line, shell-quoted, with the paths inside the
// repository made relative to it.
func (e *env) shortArgv(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		a = strings.ReplaceAll(a, e.root+"/", "")
		out[i] = shellJoin([]string{a})
	}
	return strings.Join(out, " ")
}

// reportRounds writes each round's ratios to direct-sdk, to show how far
// the medians can be trusted.
func (b *bench) reportRounds(out io.Writer, rows, table []row) {
	fmt.Fprintln(out, "\n×direct-sdk in each round (calls/s; p99 in brackets):")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, c := range table {
		if c.xDirect == 0 || c.target == "direct-sdk" {
			continue
		}
		var per []string
		for _, r := range rows {
			if r.target == c.target && r.sessions == c.sessions && r.measured() {
				per = append(per, fmt.Sprintf("%s (%s)", formatRatio(r.xDirect), formatRatio(r.p99xDirect)))
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\n", c.target, c.sessions, strings.Join(per, "\t"))
	}
	tw.Flush()
}

// roundNote names a row's round in a note when there are several.
func (o *Options) roundNote(r row) string {
	if o.Rounds <= 1 {
		return ""
	}
	return fmt.Sprintf(", round %d", r.round)
}

// formatRatio prints a ratio; "-" for none (0).
func formatRatio(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// formatMicros prints a CPU time per call in µs; "-" when unknown.
func formatMicros(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

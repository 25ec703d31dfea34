package gwbench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// report writes the header, the table, how each target was started, and
// the notes (skips, failures, first errors).
func (b *bench) report(out io.Writer, rows []row) {
	e, o := b.env, b.opts
	fmt.Fprintf(out, "MCP stdio gateways in front of @modelcontextprotocol/server-everything %s (tool echo), node %s, %s\n",
		e.pkgs["@modelcontextprotocol/server-everything"].version, e.nodeVer, cpuNote())
	fmt.Fprintf(out, "each row: the target started afresh (not a gateway already running), N sessions in closed loops (direct: N calls in flight on one stdio connection), %v warm-up, %v measured\n\n",
		o.Warmup, o.Duration)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tsessions\tcalls/s\tp50\tp99\tmisrouted\terrors\tgateway RSS idle\tgateway RSS peak\tservers: procs, RSS peak")
	for _, r := range rows {
		switch {
		case r.skip != "":
			fmt.Fprintf(tw, "%s\t-\tskipped\t-\t-\t-\t-\t-\t-\t%s\n", r.target, r.skip)
			continue
		case r.fail == "interrupted":
			fmt.Fprintf(tw, "%s\t%d\tinterrupted\t-\t-\t-\t-\t-\t-\t-\n", r.target, r.sessions)
			continue
		case r.fail != "":
			fmt.Fprintf(tw, "%s\t%d\tfailed\t-\t-\t-\t-\t-\t-\t(see notes)\n", r.target, r.sessions)
			continue
		}
		idle, peak := formatBytes(r.idle.rss), formatBytes(r.peak.rss)
		servers := "-"
		if r.peak.kidsSeen {
			servers = fmt.Sprintf("%d, %s", r.peak.kids, formatBytes(r.peak.kidsRSS))
		}
		if r.direct { // the measured process is the server itself
			idle, peak = "n/a", "n/a"
			servers = fmt.Sprintf("%d, %s", 1+r.peak.kids, formatBytes(r.peak.rss+r.peak.kidsRSS))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.target, r.sessions, r.rate(),
			formatDuration(r.lat.p50), formatDuration(r.lat.p99), r.misrouted, r.errors, idle, peak, servers)
	}
	tw.Flush()

	fmt.Fprintf(out, `
calls/s    calls answered rightly within the measured %v, divided by it; p50 and p99 over those calls (every duration kept, nearest rank)
misrouted  replies a session got that were not its own (wrong text for the id, or an id it had not in flight); with errors (failed or
           timed-out calls, %v limit), counted over warm-up and measurement
RSS        VmRSS of the gateway process itself, NOT of the node server(s) it runs: idle once the sessions are initialized, before load;
           peak sampled every %v under load. servers: processes below the gateway (for direct, the server itself) and their summed RSS, at peak
`, o.Duration, o.CallTimeout, sampleEvery)

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
			commands = append(commands, fmt.Sprintf("  %-17s %s: %s", r.target, t.about, e.shortArgv(r.argv)))
		case t.name == "browserbridge" && e.gatewayURL != "":
			commands = append(commands, fmt.Sprintf("  %-17s %s, already running at %s (pid %d)", r.target, t.about, e.gatewayURL, e.gatewayPID))
		}
	}
	if len(commands) > 0 {
		fmt.Fprintf(out, "\ncommands (node server: %s):\n%s\n", e.shortArgv(e.serverArgv()), strings.Join(commands, "\n"))
	}

	var notes []string
	for _, r := range rows {
		switch {
		case r.fail != "" && r.fail != "interrupted":
			notes = append(notes, fmt.Sprintf("%s, %d sessions: %s", r.target, r.sessions, r.fail))
		}
		if r.firstErr != "" {
			notes = append(notes, fmt.Sprintf("%s, %d sessions: first error: %s", r.target, r.sessions, r.firstErr))
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

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
	fmt.Fprintln(tw, "target\tsessions\tcalls/s\t×direct-sdk\t×tbxark\tp50\tp99\tp99 ×direct-sdk\tsetup p50\tmisrouted\terrors\tgateway RSS idle\tgateway RSS peak\tservers: procs, RSS peak")
	for _, r := range rows {
		switch {
		case r.skip != "":
			fmt.Fprintf(tw, "%s\t-\tskipped\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t(see notes)\n", r.target)
			continue
		case r.fail == "interrupted":
			fmt.Fprintf(tw, "%s\t%d\tinterrupted\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\n", r.target, r.sessions)
			continue
		case r.fail != "":
			fmt.Fprintf(tw, "%s\t%d\tfailed\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t(see notes)\n", r.target, r.sessions)
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
		direct := peerRow(rows, "direct-sdk", r.sessions)
		tbx := peerRow(rows, "tbxark", r.sessions)
		if targetNamed(r.target).sdk {
			tbx = peerRow(rows, "tbxark-sdk", r.sessions)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.target, r.sessions, r.rate(),
			ratio(r.rate(), direct, (*row).rate), ratio(r.rate(), tbx, (*row).rate),
			formatDuration(r.lat.p50), formatDuration(r.lat.p99),
			ratio(float64(r.lat.p99), direct, func(d *row) float64 { return float64(d.lat.p99) }),
			formatDuration(r.setup), r.misrouted, r.errors, idle, peak, servers)
	}
	tw.Flush()

	fmt.Fprintf(out, `
calls/s    calls answered rightly within the measured %v, divided by it; p50 and p99 over those calls (every duration kept, nearest rank)
×          this row's calls/s (or p99) divided by that of direct-sdk, or of tbxark (tbxark-sdk for the rows driven by the SDK),
           at the same session count in the same run
setup      median time one session took to open (initialize, then notifications/initialized), the N opened at once, after one
           session opened and ended unmeasured (Streamable HTTP targets) so that the server is up; for direct, the server's start
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
	seenSkip := map[string]bool{}
	for _, r := range rows {
		switch {
		case r.skip != "" && !seenSkip[r.target]:
			seenSkip[r.target] = true
			notes = append(notes, fmt.Sprintf("%s skipped: %s", r.target, r.skip))
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

// peerRow returns the measured row of target at n sessions, or nil.
func peerRow(rows []row, target string, n int) *row {
	for i := range rows {
		r := &rows[i]
		if r.target == target && r.sessions == n && r.skip == "" && r.fail == "" && r.calls > 0 {
			return r
		}
	}
	return nil
}

// ratio prints v divided by f(peer), or "-" when there is no peer.
func ratio(v float64, peer *row, f func(*row) float64) string {
	if peer == nil || f(peer) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v/f(peer))
}

package gwbench

import (
	"slices"
	"time"
)

// On a machine shared with other work, throughput moves by more between
// two runs minutes apart than the differences measured (see
// docs/performance.md). Two things keep the comparison fair: the ratios
// are taken between rows of the same round and session count, which run
// back to back, and with several rounds the table gives the median of
// each figure and of each per-round ratio.

// pairRatios sets each measured row's ratios to its peers in the same
// round and at the same session count.
func pairRatios(rows []row) {
	for i := range rows {
		r := &rows[i]
		if !r.measured() {
			continue
		}
		direct := peerRow(rows, "direct-sdk", r.round, r.sessions)
		tbx := peerRow(rows, "tbxark", r.round, r.sessions)
		if targetNamed(r.target).sdk {
			tbx = peerRow(rows, "tbxark-sdk", r.round, r.sessions)
		}
		r.xDirect = ratioOf(r.rate(), direct, (*row).rate)
		r.xTBX = ratioOf(r.rate(), tbx, (*row).rate)
		r.p99xDirect = ratioOf(float64(r.lat.p99), direct, func(d *row) float64 { return float64(d.lat.p99) })
	}
}

// peerRow returns the measured row of target at n sessions in round, or nil.
func peerRow(rows []row, target string, round, n int) *row {
	for i := range rows {
		r := &rows[i]
		if r.target == target && r.round == round && r.sessions == n && r.measured() && r.calls > 0 {
			return r
		}
	}
	return nil
}

// ratioOf is v divided by f(peer); 0 when there is no peer.
func ratioOf(v float64, peer *row, f func(*row) float64) float64 {
	if peer == nil || f(peer) == 0 {
		return 0
	}
	return v / f(peer)
}

// combineRounds returns one row per target and session count, in the order
// they first ran: the median of the rounds measured (errors and misrouted
// replies summed, the RSS peak the highest), or, when no round was, the
// first round's row with its reason. rounds is how many it summarises.
func combineRounds(rows []row) []row {
	type key struct {
		target   string
		sessions int
	}
	var order []key
	groups := map[key][]row{}
	for _, r := range rows {
		k := key{r.target, r.sessions}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]row, 0, len(order))
	for _, k := range order {
		g := groups[k]
		var ok []row
		for _, r := range g {
			if r.measured() {
				ok = append(ok, r)
			}
		}
		if len(ok) == 0 {
			out = append(out, g[0])
			continue
		}
		c := ok[0]
		c.rounds = len(ok)
		c.calls = int(medianOf(ok, func(r row) float64 { return float64(r.calls) }))
		c.lat.p50 = time.Duration(medianOf(ok, func(r row) float64 { return float64(r.lat.p50) }))
		c.lat.p99 = time.Duration(medianOf(ok, func(r row) float64 { return float64(r.lat.p99) }))
		c.setup = time.Duration(medianOf(ok, func(r row) float64 { return float64(r.setup) }))
		c.idle.rss = int64(medianOf(ok, func(r row) float64 { return float64(r.idle.rss) }))
		c.xDirect = medianOf(ok, func(r row) float64 { return r.xDirect })
		c.xTBX = medianOf(ok, func(r row) float64 { return r.xTBX })
		c.p99xDirect = medianOf(ok, func(r row) float64 { return r.p99xDirect })
		for i := range c.cpuPerCall {
			c.cpuPerCall[i] = medianOf(ok, func(r row) float64 { return r.cpuPerCall[i] })
		}
		c.misrouted, c.errors = 0, 0
		for _, r := range ok {
			c.misrouted += r.misrouted
			c.errors += r.errors
			c.peak.rss = max(c.peak.rss, r.peak.rss)
			c.peak.kids = max(c.peak.kids, r.peak.kids)
			c.peak.kidsRSS = max(c.peak.kidsRSS, r.peak.kidsRSS)
			if c.firstErr == "" {
				c.firstErr = r.firstErr
			}
		}
		out = append(out, c)
	}
	return out
}

// medianOf is the median of f over rows, leaving out the values that are
// unknown (negative) or absent (0 for a ratio); 0, or -1 when every value
// is negative, if none is left.
func medianOf(rows []row, f func(row) float64) float64 {
	var v []float64
	negative := false
	for _, r := range rows {
		switch x := f(r); {
		case x > 0:
			v = append(v, x)
		case x < 0:
			negative = true
		}
	}
	if len(v) == 0 {
		if negative {
			return -1
		}
		return 0
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

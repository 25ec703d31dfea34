//go:build linux

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// BenchmarkSnapshotOp times read_page's snapshot op alone (P.run, as the
// extension runs it, scrub included) on every page of issue 32's page set,
// in one document per page that it reads again and again: the cost of the
// walk itself once the page is laid out and the agent's code is warm,
// without the bridge, the worker or executeScript around it. With
// BROWSERBRIDGE_BENCH_BASE (a git revision) that revision's agent runs in
// the same document, in turn with this tree's (the order swapped each
// round), and the log says whether the two gave the same result (outline,
// refs, counts): a change meant only to be faster must say "same" on every
// page.
//
//	BROWSERBRIDGE_BENCH_BASE=HEAD~1 go test -run '^$' -bench SnapshotOp -benchtime 20x ./bridge/internal/e2e/
func BenchmarkSnapshotOp(b *testing.B) {
	w := startWorld(b, worldOptions{})
	dt := w.restartChromiumWithDevTools()
	ns := func(src, name string) string { return strings.ReplaceAll(src, "__browserBridgePage", name) }
	// Each agent under a name of its own; the refs' registry is shared, so both give an element the same ref.
	src := ns(pageAgentSource(b), "__bbNewPage")
	variants := []string{"new"}
	if rev := os.Getenv("BROWSERBRIDGE_BENCH_BASE"); rev != "" {
		src += "\n" + ns(pageAgentSourceAt(b, rev), "__bbBasePage")
		variants = append(variants, "base")
	}
	p := openTab(b, dt, "about:blank")
	pages := []string{"article", "search", "settings", "modal", "belowfold", "table"}
	for _, pg := range pages {
		url := w.pages.url("pageset/" + pg + ".html")
		if err := p.conn.call("Page.navigate", map[string]any{"url": url}, &struct{}{}); err != nil {
			b.Fatalf("DevTools: %v", err)
		}
		testutil.WaitWithin(b, callWait, "", func() (bool, string) {
			return p.js(b, `location.href + ' ' + document.readyState`) == url+" complete", "waiting for " + url
		})
		p.js(b, src+"\n;'loaded'")
		if len(variants) > 1 {
			b.Logf("%s: base and new give %s", pg, p.js(b, snapshotSameJS))
		}
		got := map[string][]float64{}
		for r := range b.N {
			order := slices.Clone(variants)
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, v := range order {
				var ms float64
				p.evalInto(b, fmt.Sprintf(snapshotOpJS, jsString(v)), &ms)
				got[v] = append(got[v], ms)
			}
		}
		var line []string
		for _, v := range variants {
			d := got[v]
			slices.Sort(d)
			line = append(line, fmt.Sprintf("%s %.2f / %.2f", v, d[0], d[len(d)/2]))
			b.ReportMetric(d[len(d)/2], pg+"-"+v+"-ms")
		}
		// To stdout: the testing package cuts a benchmark's log to a few lines.
		fmt.Printf("snapshot op %s (ms, fastest / median of %d): %s\n", pg, b.N, strings.Join(line, ", "))
	}
}

// snapshotOpJS runs the snapshot op of variant %s once, in a task of its
// own, and answers its time in ms.
const snapshotOpJS = `(async (variant) => {
	const P = variant === 'base' ? globalThis.__bbBasePage : globalThis.__bbNewPage;
	await new Promise((r) => setTimeout(r, 0));
	const t0 = performance.now();
	const res = P.run('snapshot', { filter: 'all' });
	const ms = performance.now() - t0;
	if (!res.ok) throw new Error('snapshot: ' + res.error);
	return ms;
})(%s)`

// snapshotSameJS compares the base's and the new agent's results with
// each filter, and with hidden elements kept: "the same result" or what differs.
const snapshotSameJS = `(() => {
	const differ = [];
	for (const args of [{ filter: 'all' }, { filter: 'interactive' }, { filter: 'all', includeHidden: true }]) {
		const a = JSON.stringify(globalThis.__bbBasePage.run('snapshot', args));
		const b = JSON.stringify(globalThis.__bbNewPage.run('snapshot', args));
		if (a !== b) differ.push(JSON.stringify(args) + ' (' + a.length + ' against ' + b.length + ' characters)');
	}
	return differ.length ? 'DIFFERENT results: ' + differ.join(', ') : 'the same result';
})()`

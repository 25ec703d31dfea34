package proxy

import (
	"sync"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// A remote client's HTTP session that ends for good tells the browsers its
// calls went to (session_ended, httpmcp_session.go), so that its tab group
// goes as a local session's does. A browser away at that moment (its
// bridge restarting, say) is told when it authenticates again: its tab
// group outlived the bridge's restart for a session that could carry on,
// and this one cannot. In a cluster the notice is kept in JetStream, for
// whichever node the browser comes back to (cluster_ended.go); endedAway
// keeps it only when that cannot.

// Bounds of the notices kept for browsers away: a browser that never comes
// back must not grow the proxy's memory.
const (
	maxEndedPerBrowser = 64
	maxEndedBrowsers   = 4096
)

// endedAway holds the session_ended notices of browsers that were away,
// by extension id (stable across a browser's reconnections). The zero
// value is ready.
type endedAway struct {
	mu    sync.Mutex
	byExt map[string][]relaywire.SessionEndedParams
}

// add keeps a notice for the browser ext; beyond the bounds it is dropped
// (that session's tab group then stays until the person closes it).
func (a *endedAway) add(ext string, p relaywire.SessionEndedParams) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byExt == nil {
		a.byExt = make(map[string][]relaywire.SessionEndedParams)
	}
	list, ok := a.byExt[ext]
	if (!ok && len(a.byExt) >= maxEndedBrowsers) || len(list) >= maxEndedPerBrowser {
		return false
	}
	a.byExt[ext] = append(list, p)
	return true
}

// take returns and forgets the notices kept for the browser ext.
func (a *endedAway) take(ext string) []relaywire.SessionEndedParams {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.byExt[ext]
	delete(a.byExt, ext)
	return list
}

func sessionEndedMsg(p relaywire.SessionEndedParams) []byte {
	return relaywire.AppendNotification(nil, relaywire.MethodSessionEnded, relaywire.MarshalParams(p))
}

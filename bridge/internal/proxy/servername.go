package proxy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// One holder per server name (docs/relay.md, "One holder per server
// name"). A user's bridges register their gateways' servers as server
// extensions; the first bridge to register a server name holds it while
// it is connected, and another bridge's registration of that name is
// refused with a sentence naming the holder, unless it asks to replace
// (AuthenticateResult.Replace): then the holder's registration ends,
// with a sentence saying who took it over.
//
// A bridge is recognised by its extension's name, "<server> (<relay.name
// or host name>)": the name the proxy already derives stable extension
// ids from. So a bridge that reconnects (after a network drop, a restart)
// while the proxy still holds its old, dead connection is the holder
// coming back, never refused by itself; its newest connection serves.
//
// The rule is a function of the live registrations (holderOf), which
// every node of a cluster sees, those of other nodes through presence:
// a node checks a registration against what it knows when it arrives,
// and again (settleServerName) when presence brings another node's, so
// that two registrations accepted at once on two nodes, before either
// saw the other, end with the same holder on every node.

// serverReg is one live registration of a user's server name: a server
// extension of this node or of another node of the cluster.
type serverReg struct {
	ext     *extension // another node's: a stand-in (remoteExtensions)
	name    string
	id      string
	node    string // "" for this node's
	since   time.Time
	replace bool
}

func (e *extension) reg() serverReg {
	return serverReg{ext: e, name: e.name, id: e.id, node: e.node, since: e.since, replace: e.replace}
}

// holderOf returns the registration by which a server name is held: the
// first (by since, then id), unless a later one of another name asked to
// replace, in which case the last such one. Registrations of the
// holder's name are the holder's; those of other names must end. Every
// node computes the same from the same registrations: since is the wall
// clock of the node that accepted each, as presence carries it. ok is
// false for none.
func holderOf(regs []serverReg) (holder serverReg, ok bool) {
	if len(regs) == 0 {
		return serverReg{}, false
	}
	regs = slices.Clone(regs)
	slices.SortFunc(regs, func(a, b serverReg) int {
		if c := a.since.Compare(b.since); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	holder = regs[0]
	for _, r := range regs[1:] {
		if r.replace && r.name != holder.name {
			holder = r
		}
	}
	return holder, true
}

// serverNameTaken refuses a registration of a server name that another
// bridge of the user holds.
type serverNameTaken struct {
	server string
	holder serverReg
}

func (t *serverNameTaken) Error() string {
	return fmt.Sprintf("server name %q is already offered by %q (%s, since %s): the first bridge to offer a name keeps it while it is connected; "+
		"stop offering it there, or let this bridge take it over (relay.replace_servers)",
		t.server, t.holder.name, t.holder.id, t.holder.since.UTC().Format(time.RFC3339))
}

// replacedSentence tells a holder that another bridge took its name over.
func replacedSentence(server string, by serverReg) string {
	return fmt.Sprintf("server name %q was taken over by %q (%s), which asked to replace this bridge's registration at %s; it is no longer offered from here",
		server, by.name, by.id, by.since.UTC().Format(time.RFC3339))
}

// serverRegsLocked returns the user's live registrations of server on
// this node; s.mu must be held.
func serverRegsLocked(u *user, server string) []serverReg {
	var out []serverReg
	for _, o := range u.exts {
		if o.kind == relaywire.ExtensionKindServer && o.server == server && !o.ended.Load() {
			out = append(out, o.reg())
		}
	}
	return out
}

// checkServerNameLocked refuses e, a server extension about to be
// registered, if its name would not hold e.server among the user's live
// registrations (this node's, and remote: other nodes', read before s.mu
// was taken); s.mu must be held.
func checkServerNameLocked(u *user, e *extension, remote []serverReg) error {
	regs := append(serverRegsLocked(u, e.server), remote...)
	if len(regs) == 0 {
		return nil
	}
	for _, r := range regs {
		// e comes after everything this node knows, whatever another
		// node's clock says, so that settleServerName agrees.
		if !r.since.Before(e.since) {
			e.since = r.since.Add(time.Nanosecond)
		}
	}
	holder, _ := holderOf(append(regs, e.reg()))
	if holder.name == e.name {
		return nil
	}
	return &serverNameTaken{server: e.server, holder: holder}
}

// remoteServerRegs returns the registrations of the user's server name on
// the other live nodes of the cluster (none without one).
func (s *Server) remoteServerRegs(user, server string) []serverReg {
	if s.cluster == nil {
		return nil
	}
	var out []serverReg
	for _, e := range s.cluster.remoteExtensions(user, relaywire.ExtensionKindServer, func(string) bool { return false }) {
		if e.server == server {
			out = append(out, e.reg())
		}
	}
	return out
}

// settleServerName ends this node's registrations of the user's server
// name that do not hold it (holderOf over this node's and the other
// nodes' live ones), each told why: replaced, or refused after all. It
// runs after each registration of a server extension here, and each time
// presence brings one of another node's.
func (s *Server) settleServerName(user, server string) {
	remote := s.remoteServerRegs(user, server)
	s.mu.Lock()
	var regs []serverReg
	if u := s.users[user]; u != nil {
		regs = serverRegsLocked(u, server)
	}
	all := append(slices.Clone(regs), remote...)
	holder, ok := holderOf(all)
	var losers []serverReg
	for _, r := range regs {
		if ok && r.name != holder.name && r.ext.ended.CompareAndSwap(false, true) {
			losers = append(losers, r)
		}
	}
	s.mu.Unlock()
	for _, r := range losers {
		replaced := r.since.Before(holder.since)
		reason := replacedSentence(server, holder)
		if !replaced {
			reason = (&serverNameTaken{server: server, holder: holder}).Error()
		}
		s.log.Info("server name: a registration ended, another bridge of the user holds the name",
			"user", user, "server", server, "ended", r.name, "ended_extension", r.id, "replaced", replaced,
			"holder", holder.name, "holder_extension", holder.id, "holder_node", s.nodeOf(holder), "holder_since", holder.since)
		go tellServerNameTaken(r.ext.c, server, holder, reason, replaced)
	}
}

// nodeOf names the node of a registration ("" without a cluster).
func (s *Server) nodeOf(r serverReg) string {
	if r.node == "" && s.cluster != nil {
		return s.cluster.opts.Node
	}
	return r.node
}

// tellServerNameTaken sends server_name_taken with the whole sentence,
// then closes the connection 1008 with as much of it as a close frame
// holds. Send may wait for room in the queue: callers run it on a
// goroutine of its own unless the connection is theirs.
func tellServerNameTaken(c *wsConn, server string, holder serverReg, reason string, replaced bool) {
	c.Send(relaywire.AppendNotification(nil, relaywire.MethodServerNameTaken, relaywire.MarshalParams(relaywire.ServerNameTakenParams{
		Server: server, Reason: reason, Replaced: replaced,
		Holder: relaywire.ServerNameHolder{Name: holder.name, ExtensionID: holder.id, Since: holder.since.UTC().Format(time.RFC3339)},
	})))
	c.Close(websocket.ClosePolicyViolation, relaywire.CloseServerNameTaken+reason)
}

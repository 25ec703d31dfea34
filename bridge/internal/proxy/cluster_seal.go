package proxy

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The cluster's sealing (docs/proxy-cluster.md, "Trust"). Messages and
// bucket values go through the node's clusterseal.Keyring: a value is
// bound to its bucket and key, a message to its subject. What does not
// open is dropped, counted in browserbridge_proxy_cluster_rejected_total
// and logged at most once per rejectLogEvery.

// sealValue seals a value of kv's key.
func (c *clusterNode) sealValue(kv jetstream.KeyValue, key string, plain []byte) []byte {
	return c.ring.SealValue(kv.Bucket()+"/"+key, plain)
}

// openValue opens a bucket entry (what labels it for the counters); false
// when it does not open.
func (c *clusterNode) openValue(what string, e jetstream.KeyValueEntry) ([]byte, bool) {
	v, err := c.ring.OpenValue(what, e.Bucket()+"/"+e.Key(), e.Value(), e.Created())
	return v, err == nil
}

// A cluster message's plaintext: the control fields that used to travel
// as NATS headers, inside the seal so that nobody can forge a detach:
//
//	op (1: 0 message, 1 detach, 2 detached) | flags (1: 1 strike) |
//	reason length (1) | reason | the JSON-RPC message
const (
	msgOpNone     = 0
	msgOpDetach   = 1
	msgOpDetached = 2
	msgFlagStrike = 1
)

var errBadClusterMessage = errors.New("malformed cluster message")

func opCode(op string) byte {
	switch op {
	case opDetach:
		return msgOpDetach
	case opDetached:
		return msgOpDetached
	}
	return msgOpNone
}

// sealMessage seals a message for subject with its control fields.
func (c *clusterNode) sealMessage(subject string, data []byte, op, reason string, strike bool) []byte {
	if len(reason) > 255 {
		reason = reason[:255]
	}
	var flags byte
	if strike {
		flags |= msgFlagStrike
	}
	var head [3 + 255]byte
	head[0], head[1], head[2] = opCode(op), flags, byte(len(reason))
	n := 3 + copy(head[3:], reason)
	return c.ring.SealMessage(subject, head[:n], data)
}

// openMessage opens a message that came on subject into a mailbox item.
func (c *clusterNode) openMessage(what, subject string, sealed []byte) (boxItem, error) {
	plain, err := c.ring.OpenMessage(what, subject, sealed)
	if err != nil {
		return boxItem{}, err
	}
	if len(plain) < 3 || len(plain) < 3+int(plain[2]) || plain[0] > msgOpDetached {
		c.m.rejected.With(what, "malformed").Inc()
		return boxItem{}, errBadClusterMessage
	}
	n := 3 + int(plain[2])
	it := boxItem{reason: string(plain[3:n]), strike: plain[1]&msgFlagStrike != 0}
	switch plain[0] {
	case msgOpDetach:
		it.op = opDetach
	case msgOpDetached:
		it.op = opDetached
	}
	if n < len(plain) {
		it.data = plain[n:]
	}
	return it, nil
}

// rejectLogEvery bounds the log lines about what did not open: one per
// period at most, with the counts since the last.
const rejectLogEvery = 10 * time.Second

// rejectLog counts rejections between log lines.
type rejectLog struct {
	mu     sync.Mutex
	last   time.Time
	counts map[string]int
}

// watchRejections counts and logs what the keyring refuses, for this node
// and for the stores that share its keyring (OAuth state, pairing codes).
func (c *clusterNode) watchRejections() {
	rl := &rejectLog{counts: map[string]int{}}
	c.ring.OnReject(func(what, reason string) {
		c.m.rejected.With(what, reason).Inc()
		now := time.Now()
		rl.mu.Lock()
		rl.counts[what+"/"+reason]++
		if now.Sub(rl.last) < rejectLogEvery {
			rl.mu.Unlock()
			return
		}
		rl.last = now
		counts := rl.counts
		rl.counts = map[string]int{}
		rl.mu.Unlock()
		c.s.log.Warn("proxy cluster: dropped messages or values that do not open with this deployment's secret (forged, replayed, stale, or another deployment's on a shared NATS)",
			"node", c.opts.Node, "counts", fmt.Sprint(counts))
	})
}

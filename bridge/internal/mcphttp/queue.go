package mcphttp

import "sync"

// MaxQueuedNotifications bounds the notifications a ResponseQueue keeps for
// a slow client; the response itself is never dropped.
const MaxQueuedNotifications = 4096

// A ResponseQueue carries what one POST answers with, from whoever
// produces it to the goroutine that writes the HTTP response: the
// notifications and server requests that come first, and the final
// response. Notifications beyond MaxQueuedNotifications are dropped; the
// final message always gets in, and nothing after it does. Its zero
// value is ready for use, and its methods are safe for concurrent use.
type ResponseQueue struct {
	mu    sync.Mutex
	queue [][]byte
	final bool
	wake  chan struct{}
}

// Send queues msg, the final response when final, and wakes the writer.
func (q *ResponseQueue) Send(msg []byte, final bool) {
	q.mu.Lock()
	if q.final || (!final && len(q.queue) >= MaxQueuedNotifications) {
		q.mu.Unlock()
		return
	}
	q.queue = append(q.queue, msg)
	q.final = final
	wake := q.wake // nil until the writer first waited: nobody to wake
	q.mu.Unlock()
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// Take returns the messages queued since the last Take, and whether the
// final response has been sent (it is then the last of all taken).
func (q *ResponseQueue) Take() ([][]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.queue
	q.queue = nil
	return m, q.final
}

// Wake receives after a Send; one signal may stand for several, so the
// writer Takes each time. The channel is made on the first call, so that
// an answer ready before its writer ever waits costs none; a message
// queued before that call is signalled at once.
func (q *ResponseQueue) Wake() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.wake == nil {
		q.wake = make(chan struct{}, 1)
		if len(q.queue) > 0 {
			q.wake <- struct{}{}
		}
	}
	return q.wake
}

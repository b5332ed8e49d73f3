package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// readAheadChunk is the most the read-ahead asks of a client's body at once.
const readAheadChunk = 16 << 10

// readAhead reads the body of r, an HTTP/2 request of unknown length (a gRPC call
// announces none) that would wait for a slot anyway, into memory so that it may
// move with a Content-Length. It reads until the body ends, more than the pool's
// bound has come, the keep budget (PoolConfig.KeepBudget, shared with the kept
// bodies) has no room for what came, the client leaves, or the decision deadline
// passes, whichever comes first; a client that has sent its whole body
// with the request (a unary call) costs no wait.
//
// whole: the body ended within the bound; r.Body is now an *aheadBody holding it,
// and r.ContentLength its length. Otherwise r.Body gives exactly the bytes read and
// then the rest of the client's body, in order; a read returns what has come
// without waiting for more, so a streaming client that waits for an answer to what
// it sent gets one. release gives back the budget once the request has ended.
func (p *Proxy) readAhead(r *http.Request) (whole bool, release func()) {
	a := &aheadReader{src: r.Body, limit: p.pool.MaxBody(), p: p, done: make(chan struct{})}
	go a.run()
	t := time.NewTimer(p.pool.DecisionDeadline())
	select {
	case <-a.done:
	case <-t.C:
	case <-r.Context().Done():
	}
	t.Stop()
	a.mu.Lock()
	a.stop = true
	a.mu.Unlock()
	release = a.release
	select {
	case <-a.done:
		// The reader has returned: buf and err are final.
		if errors.Is(a.err, io.EOF) && int64(len(a.buf)) <= a.limit && !a.over {
			r.Body = &aheadBody{Reader: bytes.NewReader(a.buf), data: a.buf, src: a.src}
			r.ContentLength = int64(len(a.buf))
			return true, release
		}
	default:
	}
	r.Body = &resumedBody{a: a}
	return false, release
}

// aheadReader reads a client's body ahead (Proxy.readAhead) on its own goroutine,
// reserving what each read brought in the keep budget. The bytes of the read that
// finds the budget full are kept all the same (the local path needs them: at most
// one chunk beyond the budget per request, less than what net/http's HTTP/2 server
// buffers for a stream), and the request does not move.
type aheadReader struct {
	src   io.ReadCloser
	limit int64
	p     *Proxy
	done  chan struct{} // closed when run returns

	mu       sync.Mutex
	buf      []byte
	err      error // the body's error once seen: io.EOF at its end
	stop     bool  // run returns after the read in progress
	held     int64 // bytes reserved in the budget
	over     bool  // the budget had no room for bytes read
	released bool
	off      int // bytes of buf given to resumedBody
}

func (a *aheadReader) run() {
	defer close(a.done)
	chunk := make([]byte, readAheadChunk)
	for {
		a.mu.Lock()
		room := min(int64(readAheadChunk), a.limit+1-int64(len(a.buf)))
		if a.stop || a.released || room <= 0 {
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		n, err := a.src.Read(chunk[:room])
		a.mu.Lock()
		a.buf = append(a.buf, chunk[:n]...)
		switch {
		case n == 0:
		case a.released || !a.p.reserveBytes(int64(n)):
			// Kept for the local path, which needs them, but the request does
			// not move: the budget has no room for its body.
			a.over = true
		default:
			a.held += int64(n)
		}
		a.err = err
		over := a.over
		a.mu.Unlock()
		if err != nil || over {
			return
		}
	}
}

// release gives back what the read-ahead holds of the budget (once).
func (a *aheadReader) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.released {
		a.released = true
		a.p.keptBytes.Add(-a.held)
	}
}

// unread gives a request whose body was read ahead whole back its unknown length
// when it is served here, so that the app gets it as the client sent it (chunked
// to an HTTP/1.1 app), as it would without pooling.
func unread(r *http.Request) {
	if _, ok := r.Body.(*aheadBody); ok {
		r.ContentLength = -1
	}
}

// aheadBody is a request body read ahead whole.
type aheadBody struct {
	*bytes.Reader
	data []byte
	src  io.Closer
}

func (b *aheadBody) Close() error { return b.src.Close() }

// resumedBody gives the bytes read ahead and then the rest of the client's body.
type resumedBody struct {
	a *aheadReader
}

func (b *resumedBody) Read(p []byte) (int, error) {
	if n := b.a.take(p); n > 0 {
		return n, nil
	}
	// Everything read ahead is given: the read in progress, if any, ends when
	// the client sends more or ends its body, as a read of the body itself would.
	<-b.a.done
	if n := b.a.take(p); n > 0 {
		return n, nil
	}
	if err := b.a.err; err != nil {
		return 0, err
	}
	return b.a.src.Read(p)
}

func (b *resumedBody) Close() error { return b.a.src.Close() }

// take copies bytes read ahead and not yet given into p.
func (a *aheadReader) take(p []byte) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := copy(p, a.buf[a.off:])
	a.off += n
	return n
}

// reserveBytes reserves n bytes of the keep budget: false if it has no room.
func (p *Proxy) reserveBytes(n int64) bool {
	for {
		used := p.keptBytes.Load()
		if used+n > p.keepBudget {
			return false
		}
		if p.keptBytes.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

package pool

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/pool/auth"
)

// FrontConfig configures a front.
type FrontConfig struct {
	Keys *auth.Keyring
	// MaxQueue bounds each workload's queue (accepted requests not yet taken by a
	// pull); past it an overflow is refused with 503 and Retry-After.
	MaxQueue int
	// MaxWait bounds a request's wait in the queue; past it the sender gets 503 with
	// Retry-After (the request reached no app).
	MaxWait time.Duration
	// PollTimeout is how long a pull waits for a request before 204.
	PollTimeout time.Duration
	// MaxRequestBytes bounds an overflow request (head and body as carried).
	MaxRequestBytes int64
	// BodyTimeout bounds receiving an accepted request's bytes.
	BodyTimeout time.Duration
	Now         func() time.Time
	Counters    *measure.FrontCounters
	Log         *zap.Logger
}

// Front holds overflow requests in one FIFO per workload and gives each to the
// oldest waiting pull of the same workload.
type Front struct {
	cfg      FrontConfig
	verifier *auth.Verifier
	mux      *http.ServeMux
	draining atomic.Bool
	closing  chan struct{} // closed by Close: queued requests expire, pulls end
	closeOne sync.Once

	mu     sync.Mutex
	queues map[string]*workQueue
	items  map[string]*item // offered items by id
}

// workQueue is one workload's queue and waiting pulls, guarded by Front.mu.
type workQueue struct {
	items *list.List // of *item, oldest first
	pulls *list.List // of *pullWait, oldest first
	n     int        // accepted and not yet taken or expired
}

type itemState int

const (
	itemQueued itemState = iota
	itemOffered
	itemTaken
	itemGone
)

// item is one accepted overflow request.
type item struct {
	id       string
	workload string
	data     []byte
	enq      time.Time
	state    itemState
	elem     *list.Element
	ackTimer *time.Timer
	// result carries the pulling sidecar's result body to the overflow handler;
	// relayed carries back how relaying it ended.
	result  chan io.Reader // unbuffered: a send succeeds only if the sender's handler is there
	relayed chan error     // capacity 1
}

type pullWait struct {
	ch   chan *item // capacity 1: the dispatcher never blocks
	elem *list.Element
}

// NewFront returns a front.
func NewFront(cfg FrontConfig) (*Front, error) {
	if cfg.Keys == nil || cfg.Counters == nil {
		return nil, errors.New("pool: front needs keys and counters")
	}
	if cfg.MaxQueue <= 0 || cfg.MaxWait <= 0 || cfg.MaxWait > MaxFrontWait {
		return nil, fmt.Errorf("pool: front max queue %d must be positive and max wait %s in (0, %s]", cfg.MaxQueue, cfg.MaxWait, MaxFrontWait)
	}
	if cfg.PollTimeout <= 0 || cfg.PollTimeout > MaxPollTimeout {
		return nil, fmt.Errorf("pool: poll timeout %s not in (0, %s]", cfg.PollTimeout, MaxPollTimeout)
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxBody + 64<<10
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	f := &Front{cfg: cfg, verifier: auth.NewVerifier(cfg.Keys, cfg.Now, 0), mux: http.NewServeMux(),
		queues: map[string]*workQueue{}, items: map[string]*item{}, closing: make(chan struct{})}
	f.mux.HandleFunc("POST "+PathOverflow, f.overflow)
	f.mux.HandleFunc("GET "+PathPull, f.pull)
	f.mux.HandleFunc("POST "+PathResult+"{id}", f.result)
	f.mux.HandleFunc("POST "+PathReturn+"{id}", f.giveBack)
	return f, nil
}

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// StartDrain refuses new overflow requests (senders queue them locally); pulls go on
// taking what is queued.
func (f *Front) StartDrain() { f.draining.Store(true) }

// authenticate checks the request's workload and Qas-Auth; it answers 403 (counted)
// and returns "" if they do not hold.
func (f *Front) authenticate(w http.ResponseWriter, r *http.Request, hop string) string {
	workload := r.Header.Get(HeaderWorkload)
	err := errors.New("no valid " + HeaderWorkload)
	if auth.ValidWorkload(workload) && len(r.Header.Values(HeaderWorkload)) == 1 && len(r.Header.Values(auth.Header)) <= 1 {
		err = errors.New(HeaderHop + " is not " + hop)
		if vs := r.Header.Values(HeaderHop); len(vs) == 1 && vs[0] == hop {
			err = f.verifier.Verify(workload, r.Method, r.RequestURI, hop, r.Header.Get(auth.Header))
		}
	}
	if err != nil {
		f.cfg.Counters.Unauthenticated()
		f.cfg.Log.Debug("unauthenticated", zap.String("path", r.URL.Path), zap.Error(err))
		w.Header().Set("Connection", "close")
		http.Error(w, "qas-front: forbidden", http.StatusForbidden)
		return ""
	}
	return workload
}

func (f *Front) queue(workload string) *workQueue {
	q := f.queues[workload]
	if q == nil {
		q = &workQueue{items: list.New(), pulls: list.New()}
		f.queues[workload] = q
	}
	return q
}

func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Connection", "close")
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, msg, code)
}

// overflow takes an overflow request: 403 unauthenticated, 503 full or draining,
// else 100 Continue (accepted), the request's bytes, and later its response.
func (f *Front) overflow(w http.ResponseWriter, r *http.Request) {
	workload := f.authenticate(w, r, HopOverflow)
	if workload == "" {
		return
	}
	if r.Header.Get("Content-Type") != ContentType || r.ContentLength <= 0 || len(r.TransferEncoding) > 0 {
		refuse(w, http.StatusBadRequest, "qas-front: want a message/http body with a Content-Length")
		return
	}
	if r.ContentLength > f.cfg.MaxRequestBytes {
		refuse(w, http.StatusRequestEntityTooLarge, "qas-front: request larger than "+strconv.FormatInt(f.cfg.MaxRequestBytes, 10)+" bytes")
		return
	}
	if f.draining.Load() {
		refuse(w, http.StatusServiceUnavailable, "qas-front: draining")
		return
	}
	f.mu.Lock()
	q := f.queue(workload)
	if q.n >= f.cfg.MaxQueue {
		f.mu.Unlock()
		f.cfg.Counters.RefuseFull()
		refuse(w, http.StatusServiceUnavailable, "qas-front: queue full")
		return
	}
	q.n++
	f.cfg.Counters.Accept()
	f.mu.Unlock()
	accepted := f.cfg.Now()
	leave := func() {
		f.mu.Lock()
		q.n--
		f.mu.Unlock()
		f.cfg.Counters.Expire(f.cfg.Now().Sub(accepted))
	}

	// Accepted: the 100 Continue tells the sender to send the request's bytes.
	w.WriteHeader(http.StatusContinue)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(f.cfg.BodyTimeout))
	data := make([]byte, r.ContentLength)
	_, err := io.ReadFull(r.Body, data)
	_ = rc.SetReadDeadline(time.Time{})
	if err == nil {
		_, err = parseOverflowed(data)
	}
	if err != nil {
		// The sender went away or sent something else than it announced: it was
		// never queued, no app saw it.
		leave()
		f.cfg.Log.Debug("overflow body", zap.Error(err))
		refuse(w, http.StatusBadRequest, "qas-front: bad request bytes")
		return
	}
	it := &item{id: newID(), workload: workload, data: data, enq: accepted,
		result: make(chan io.Reader), relayed: make(chan error, 1)}
	f.mu.Lock()
	f.enqueue(q, it, false)
	f.mu.Unlock()

	expiry := time.NewTimer(max(f.cfg.MaxWait-f.cfg.Now().Sub(accepted), 0))
	defer expiry.Stop()
	closing := f.closing
	for {
		select {
		case body := <-it.result:
			f.relay(w, rc, body, it)
			return
		case <-closing:
			closing = nil
			expiry.Reset(0)
		case <-expiry.C:
			f.mu.Lock()
			if it.state == itemQueued {
				f.remove(q, it)
				f.mu.Unlock()
				f.cfg.Counters.Expire(f.cfg.Now().Sub(accepted))
				// Queued (never taken by a result's 100 Continue, the only
				// moment a pod's app may see it): the sender may serve it
				// itself.
				w.Header().Set(HeaderExpired, ExpiredUnseen)
				refuse(w, http.StatusServiceUnavailable, "qas-front: no pod took the request in time")
				return
			}
			f.mu.Unlock()
			// Offered to a pull: it is taken or offered again within the ack
			// timeout; look again shortly.
			expiry.Reset(50 * time.Millisecond)
		case <-r.Context().Done():
			f.mu.Lock()
			switch it.state {
			case itemQueued, itemOffered:
				f.remove(q, it)
				f.mu.Unlock()
				f.cfg.Counters.Expire(f.cfg.Now().Sub(accepted))
				return
			}
			f.mu.Unlock()
			// Taken: the result handler finds the sender gone when it relays.
			select {
			case body := <-it.result:
				f.relay(w, rc, body, it)
			case <-time.After(ackTimeout):
			}
			return
		}
	}
}

// parseOverflowed parses an overflow request's bytes with net/http: exactly one
// request with a known-length body, no Qas- fields, nothing after it.
func parseOverflowed(data []byte) (*http.Request, error) {
	return parsePulled(data)
}

// enqueue gives it to the oldest waiting pull, or queues it (at the head when it
// comes back from a pull that did not take it). f.mu must be held.
func (f *Front) enqueue(q *workQueue, it *item, head bool) {
	if e := q.pulls.Front(); e != nil {
		p := q.pulls.Remove(e).(*pullWait)
		p.elem = nil
		f.cfg.Counters.PullWaiting(-1)
		f.offer(it)
		p.ch <- it
		return
	}
	it.state = itemQueued
	if head {
		it.elem = q.items.PushFront(it)
	} else {
		it.elem = q.items.PushBack(it)
	}
}

// offer marks it offered to a pull: the pulling sidecar must take it (its result
// POST) within ackTimeout, or it is offered again. f.mu must be held.
func (f *Front) offer(it *item) {
	it.state, it.elem = itemOffered, nil
	f.items[it.id] = it
	it.ackTimer = time.AfterFunc(ackTimeout, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if it.state == itemOffered {
			delete(f.items, it.id)
			f.enqueue(f.queue(it.workload), it, true)
		}
	})
}

// remove takes it out of the queue for good (expired or its sender gone). f.mu
// must be held.
func (f *Front) remove(q *workQueue, it *item) {
	if it.state == itemQueued && it.elem != nil {
		q.items.Remove(it.elem)
	}
	if it.ackTimer != nil {
		it.ackTimer.Stop()
	}
	delete(f.items, it.id)
	it.state, it.elem = itemGone, nil
	q.n--
}

// pull answers a long poll with the oldest queued request of the workload, or 204
// after PollTimeout.
func (f *Front) pull(w http.ResponseWriter, r *http.Request) {
	workload := f.authenticate(w, r, HopControl)
	if workload == "" {
		return
	}
	f.mu.Lock()
	q := f.queue(workload)
	if e := q.items.Front(); e != nil {
		it := q.items.Remove(e).(*item)
		f.offer(it)
		f.mu.Unlock()
		writeItem(w, it)
		return
	}
	p := &pullWait{ch: make(chan *item, 1)}
	p.elem = q.pulls.PushBack(p)
	f.cfg.Counters.PullWaiting(1)
	f.mu.Unlock()
	t := time.NewTimer(f.cfg.PollTimeout)
	defer t.Stop()
	select {
	case it := <-p.ch:
		writeItem(w, it)
		return
	case <-t.C:
	case <-f.closing:
	case <-r.Context().Done():
	}
	f.mu.Lock()
	if p.elem != nil {
		q.pulls.Remove(p.elem)
		f.cfg.Counters.PullWaiting(-1)
		f.mu.Unlock()
		if r.Context().Err() == nil {
			w.WriteHeader(http.StatusNoContent)
		}
		return
	}
	f.mu.Unlock()
	// An item was given to this pull as it ended.
	it := <-p.ch
	if r.Context().Err() != nil {
		f.mu.Lock()
		if it.state == itemOffered {
			it.ackTimer.Stop()
			delete(f.items, it.id)
			f.enqueue(q, it, true)
		}
		f.mu.Unlock()
		return
	}
	writeItem(w, it)
}

func writeItem(w http.ResponseWriter, it *item) {
	h := w.Header()
	h.Set(HeaderID, it.id)
	h.Set("Content-Type", ContentType)
	h.Set("Content-Length", strconv.Itoa(len(it.data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(it.data)
}

// offered finds the item a result or return names, for an authenticated workload.
// f.mu must be held.
func (f *Front) offered(workload, id string) *item {
	it := f.items[id]
	if it == nil || it.workload != workload || it.state != itemOffered {
		return nil
	}
	return it
}

// result takes an offered request for the pulling sidecar (100 Continue: from now on
// its app may see it) and relays the sidecar's result to the request's sender.
func (f *Front) result(w http.ResponseWriter, r *http.Request) {
	workload := f.authenticate(w, r, HopControl)
	if workload == "" {
		return
	}
	id := r.PathValue("id")
	f.mu.Lock()
	it := f.offered(workload, id)
	if it == nil {
		f.mu.Unlock()
		refuse(w, http.StatusConflict, "qas-front: no such request offered")
		return
	}
	it.ackTimer.Stop()
	delete(f.items, id)
	it.state = itemTaken
	q := f.queue(workload)
	q.n--
	f.mu.Unlock()
	f.cfg.Counters.Dispatch(f.cfg.Now().Sub(it.enq))
	w.WriteHeader(http.StatusContinue)
	rc := http.NewResponseController(w)
	var err error
	select {
	case it.result <- &deadlineReader{r: r.Body, rc: rc}:
		// The relay bounds each read and write; it ends when the response does.
		err = <-it.relayed
	case <-time.After(ackTimeout):
		// The sender's handler is gone (it left just as the request was taken).
		err = errors.New("sender gone")
	}
	if err != nil {
		refuse(w, http.StatusBadGateway, "qas-front: relay failed")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// giveBack puts an offered request back at the head of its queue: the pulling
// sidecar's slot was taken meanwhile, and no app saw the request.
func (f *Front) giveBack(w http.ResponseWriter, r *http.Request) {
	workload := f.authenticate(w, r, HopControl)
	if workload == "" {
		return
	}
	f.mu.Lock()
	it := f.offered(workload, r.PathValue("id"))
	if it == nil {
		f.mu.Unlock()
		refuse(w, http.StatusConflict, "qas-front: no such request offered")
		return
	}
	it.ackTimer.Stop()
	delete(f.items, it.id)
	f.enqueue(f.queue(workload), it, true)
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// relay streams the pulling sidecar's result (the app's response as an HTTP/1.1
// message) to the sender, flushing as it comes, and reports the end to the result
// handler.
func (f *Front) relay(w http.ResponseWriter, rc *http.ResponseController, body io.Reader, it *item) {
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 32<<10)
	var err error
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(relayIdleTimeout))
			if _, werr := w.Write(buf[:n]); werr != nil {
				err = werr
				break
			}
			if werr := rc.Flush(); werr != nil {
				err = werr
				break
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	it.relayed <- err
	if err != nil {
		// The sender must not take a cut-off response for a whole one.
		panic(http.ErrAbortHandler)
	}
}

// deadlineReader bounds each read of a result body by relayIdleTimeout.
type deadlineReader struct {
	r  io.Reader
	rc *http.ResponseController
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	_ = d.rc.SetReadDeadline(time.Now().Add(relayIdleTimeout))
	return d.r.Read(p)
}

// Close makes every queued request expire at once (503) and every waiting pull
// end (204): the front is shutting down.
func (f *Front) Close() { f.closeOne.Do(func() { close(f.closing) }) }

// Drain waits until no request is queued or offered, or ctx ends; what is still
// queued then is answered 503 by its handler when the server shuts down.
func (f *Front) Drain(ctx context.Context) {
	for {
		f.mu.Lock()
		n := 0
		for _, q := range f.queues {
			n += q.n
		}
		f.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// queued returns how many requests of workload are queued (tests).
func (f *Front) queued(workload string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.queues[workload]; q != nil {
		return q.items.Len()
	}
	return 0
}

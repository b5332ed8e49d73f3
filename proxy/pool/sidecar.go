package pool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/pool/auth"
)

// SidecarConfig configures a sidecar's side of the pooled data plane.
type SidecarConfig struct {
	Workload string
	Keys     *auth.Keyring
	Fronts   FrontSource
	// DecisionTimeout bounds the wait for the front's accept or refuse (0:
	// DefaultDecisionTimeout).
	DecisionTimeout time.Duration
	// MaxBody is the largest request body that may overflow (0: DefaultMaxBody).
	MaxBody int64
	// MaxHead bounds a pulled request's head (the app port's header limit).
	MaxHead int
	// ResponseTimeout bounds, after the front accepted a request, the wait for its
	// response head: the front's longest wait plus the pulling pod's upstream
	// timeout. Past it the client gets a 504.
	ResponseTimeout time.Duration
	Now             func() time.Time
	Counters        *measure.PoolCounters
	Log             *zap.Logger
}

// Local is what the pull loops need of the sidecar's concurrency limit.
type Local interface {
	// Idle: a slot is free and no request waits.
	Idle() bool
	// TryAdmit takes a free slot only while no request waits.
	TryAdmit() bool
	Release()
}

// ServeFunc sends a pulled request to the local app and writes the app's response,
// as an HTTP/1.1 message, to out; it measures the request as the sidecar's own. The
// caller holds a slot for it.
type ServeFunc func(req *http.Request, out io.Writer)

// Sidecar sends overflow requests to the fronts and pulls from them.
type Sidecar struct {
	cfg       SidecarConfig
	signer    auth.Signer
	transport *http.Transport

	mu      sync.Mutex
	suspect map[string]*suspicion
	// decisions are the fronts' recent decision times: the deadline follows them.
	decisions decisionTimes

	draining  atomic.Bool
	drained   chan struct{} // closed by StartDrain
	drainOnce sync.Once
	wakeMu    sync.Mutex
	wakeCh    chan struct{}
	stopPolls context.CancelFunc // set by RunPull, guarded by wakeMu
}

// suspicion is a front replica's failure state: it is skipped until until, which
// backs off from 1 s doubling to 30 s, and cleared by a success.
type suspicion struct {
	fails int
	until time.Time
}

const (
	suspectFirst = time.Second
	suspectMax   = 30 * time.Second
)

// NewSidecar returns the sidecar's pool client.
func NewSidecar(cfg SidecarConfig) (*Sidecar, error) {
	if cfg.Keys == nil || cfg.Fronts == nil || cfg.Counters == nil {
		return nil, errors.New("pool: keys, fronts and counters are required")
	}
	if !auth.ValidWorkload(cfg.Workload) {
		return nil, fmt.Errorf("pool: workload %q is not a valid name", cfg.Workload)
	}
	if _, err := cfg.Keys.Current(cfg.Workload); err != nil {
		return nil, fmt.Errorf("pool: workload %q: %w", cfg.Workload, err)
	}
	if cfg.DecisionTimeout <= 0 {
		cfg.DecisionTimeout = DefaultDecisionTimeout
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxHead <= 0 {
		cfg.MaxHead = 64 << 10
	}
	if cfg.ResponseTimeout <= 0 {
		cfg.ResponseTimeout = MaxFrontWait + 60*time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	dialer := &net.Dialer{Timeout: controlTimeout, KeepAlive: 30 * time.Second}
	s := &Sidecar{
		cfg: cfg, signer: auth.Signer{Keys: cfg.Keys, Workload: cfg.Workload},
		transport: &http.Transport{
			DialContext:         dialer.DialContext,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			// The 100 Continue is the front's acceptance; our own timers bound the
			// wait for it, and the gate keeps the body unread until it comes.
			ExpectContinueTimeout:  time.Hour,
			MaxResponseHeaderBytes: 16 << 10,
		},
		suspect: map[string]*suspicion{},
		wakeCh:  make(chan struct{}),
		drained: make(chan struct{}),
	}
	return s, nil
}

// MaxBody is the largest body that may overflow.
func (s *Sidecar) MaxBody() int64 { return s.cfg.MaxBody }

// DecisionDeadline is the wait the next overflow allows for a front's decision
// (deadline.go); the sidecar bounds its other waits for an overflow's sake by it too.
func (s *Sidecar) DecisionDeadline() time.Duration {
	return s.decisions.deadline(s.cfg.DecisionTimeout)
}

// CloseIdle closes idle connections to the fronts.
func (s *Sidecar) CloseIdle() { s.transport.CloseIdleConnections() }

// pick chooses a front replica at random among those not suspect, or "".
func (s *Sidecar) pick() string {
	fronts := s.cfg.Fronts.Fronts()
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	var chosen string
	for _, f := range fronts {
		if sp := s.suspect[f]; sp != nil && now.Before(sp.until) {
			continue
		}
		// Reservoir sampling: a uniform choice without building a list.
		n++
		if rand.IntN(n) == 0 {
			chosen = f
		}
	}
	return chosen
}

// fail marks front suspect and counts a front failure.
func (s *Sidecar) fail(front string) {
	s.mu.Lock()
	sp := s.suspect[front]
	if sp == nil {
		sp = &suspicion{}
		s.suspect[front] = sp
	}
	sp.fails++
	backoff := suspectMax
	if sp.fails <= 6 {
		backoff = min(suspectFirst<<(sp.fails-1), suspectMax)
	}
	sp.until = s.cfg.Now().Add(backoff)
	s.mu.Unlock()
	s.cfg.Counters.FrontFailure()
}

// succeed clears front's suspicion.
func (s *Sidecar) succeed(front string) {
	s.mu.Lock()
	delete(s.suspect, front)
	s.mu.Unlock()
}

// suspectFor returns how long front stays suspect (0: not suspect).
func (s *Sidecar) suspectFor(front string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.suspect[front]; sp != nil {
		return max(sp.until.Sub(s.cfg.Now()), 0)
	}
	return 0
}

// Answer is how an overflow ended, as far as the request's safety goes.
type Answer uint8

const (
	// NotAccepted: refused, no decision in time, or no front to ask. Nothing of
	// the body was read and no app saw anything: the caller serves it locally.
	NotAccepted Answer = iota
	// Accepted: the front has the request; the caller relays resp, or answers 502
	// or 504 on err, and never sends the request anywhere again.
	Accepted
	// Expired: the front accepted the request and then gave it up without offering
	// it to any pod's app (its 503 with HeaderExpired: no pull took it within the
	// front's max wait, or the front shut down). No app saw a byte of it, so the
	// caller may serve it locally if it can send it again whole; else it relays
	// resp, the front's 503.
	Expired
)

// Overflow offers one request to a front replica: head is the request as the sidecar
// would send it to its own app (request line and fields, Content-Length included),
// body its body of exactly bodyLen bytes, method its method.
//
// NotAccepted: nothing of body was read and no app saw anything. Accepted: resp is
// the response to relay (the app's, or the front's own 502 or 503), or err says the
// relay failed. Expired: resp is the front's 503, which says no app saw the request.
// Closing resp.Body ends the exchange.
func (s *Sidecar) Overflow(ctx context.Context, method string, head []byte, body io.Reader, bodyLen int64) (resp *http.Response, answer Answer, err error) {
	front := s.pick()
	if front == "" {
		return nil, NotAccepted, nil
	}
	start := s.cfg.Now()
	client := ctx
	ctx, cancel := context.WithCancel(ctx)
	g := newGate(io.MultiReader(bytes.NewReader(head), io.LimitReader(body, bodyLen)))
	trace := &httptrace.ClientTrace{Got100Continue: g.accept}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, "http://"+front+PathOverflow, g)
	if err != nil {
		cancel()
		return nil, NotAccepted, err
	}
	a, err := s.signer.Sign(http.MethodPost, PathOverflow, HopOverflow)
	if err != nil {
		cancel()
		return nil, NotAccepted, err
	}
	req.ContentLength = int64(len(head)) + bodyLen
	req.Header = http.Header{
		"Content-Type": {ContentType}, "Expect": {"100-continue"},
		HeaderWorkload: {s.cfg.Workload}, HeaderHop: {HopOverflow}, auth.Header: {a},
	}
	var timedOut atomic.Bool
	decision := time.AfterFunc(s.DecisionDeadline(), func() {
		if g.abandon() {
			timedOut.Store(true)
			cancel()
		}
	})
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.transport.RoundTrip(req)
		done <- result{r, err}
	}()
	var res result
	select {
	case <-g.accepted:
	case res = <-done:
		if !g.abandon() && g.isAccepted() {
			break // accepted as the answer came: it is the answer to relay
		}
		decision.Stop()
		d := s.cfg.Now().Sub(start)
		if res.resp != nil {
			res.resp.Body.Close()
		}
		// A client that left (an HTTP/2 client resets a stream whenever a gRPC
		// deadline passes) ends the exchange with an error that says nothing of
		// the front: the attempt is counted, the front not blamed.
		left := res.err != nil && !timedOut.Load() && client.Err() != nil
		switch {
		case res.err == nil:
			s.decisions.add(d)
			s.cfg.Counters.Overflow(measure.OverflowRefused, d)
		case timedOut.Load():
			s.cfg.Counters.Overflow(measure.OverflowTimeout, d)
		default:
			s.cfg.Counters.Overflow(measure.OverflowError, d)
		}
		if !left {
			s.fail(front)
		}
		cancel()
		if res.err == nil {
			s.cfg.Log.Debug("overflow refused", zap.String("front", front), zap.Int("status", res.resp.StatusCode))
		} else {
			s.cfg.Log.Debug("overflow failed", zap.String("front", front), zap.Error(res.err))
		}
		return nil, NotAccepted, nil
	}
	decision.Stop()
	d := s.cfg.Now().Sub(start)
	s.decisions.add(d)
	s.cfg.Counters.Overflow(measure.OverflowAccepted, d)
	s.succeed(front)
	// Accepted: from here on the sidecar only relays. The response head must come
	// within ResponseTimeout.
	var headTimedOut atomic.Bool
	headTimer := time.AfterFunc(s.cfg.ResponseTimeout, func() { headTimedOut.Store(true); cancel() })
	if res.resp == nil && res.err == nil {
		res = <-done
	}
	headTimer.Stop()
	if res.err != nil {
		cancel()
		if headTimedOut.Load() {
			return nil, Accepted, fmt.Errorf("%w: %w", ErrResponseTimeout, res.err)
		}
		return nil, Accepted, res.err
	}
	outer := res.resp
	if outer.StatusCode != http.StatusOK || outer.Header.Get("Content-Type") != ContentType {
		// The front's own answer (503 expired, 502 the pulling pod failed). Only the
		// outer answer is read for HeaderExpired: an app's response, inside a 200,
		// can never say that it did not see the request.
		outer.Body = newCancelBody(outer.Body, nil, cancel)
		if outer.StatusCode == http.StatusServiceUnavailable && outer.Header.Get(HeaderExpired) == ExpiredUnseen {
			return outer, Expired, nil
		}
		return outer, Accepted, nil
	}
	inner, err := http.ReadResponse(bufio.NewReader(outer.Body), &http.Request{Method: method})
	if err != nil {
		outer.Body.Close()
		cancel()
		return nil, Accepted, fmt.Errorf("pool: the front's response: %w", err)
	}
	inner.Body = newCancelBody(inner.Body, outer.Body, cancel)
	return inner, Accepted, nil
}

// ErrResponseTimeout: the front accepted the request but no response came in time.
var ErrResponseTimeout = errors.New("pool: no response within the response timeout")

// cancelBody closes the outer body and cancels the exchange when closed, and cancels
// it when a read makes no progress for relayIdleTimeout (a front that stopped
// sending must not hold the client forever).
type cancelBody struct {
	io.ReadCloser
	outer  io.Closer
	cancel context.CancelFunc
	idle   *time.Timer
}

func newCancelBody(rc io.ReadCloser, outer io.Closer, cancel context.CancelFunc) *cancelBody {
	b := &cancelBody{ReadCloser: rc, outer: outer, cancel: cancel}
	b.idle = time.AfterFunc(relayIdleTimeout, cancel)
	return b
}

func (b *cancelBody) Read(p []byte) (int, error) {
	b.idle.Reset(relayIdleTimeout)
	return b.ReadCloser.Read(p)
}

func (b *cancelBody) Close() error {
	b.idle.Stop()
	err := b.ReadCloser.Close()
	if b.outer != nil {
		b.outer.Close()
	}
	b.cancel()
	return err
}

// StartDrain stops the pull loops: a draining pod takes no more work from the
// fronts (the requests it holds are served; overflow continues). It closes
// Drained, so that the requests waiting in the local queue, which no app has seen,
// are offered to a front to be served by pods that stay.
func (s *Sidecar) StartDrain() {
	s.drainOnce.Do(func() { close(s.drained) })
	s.wakeMu.Lock()
	s.draining.Store(true)
	stop := s.stopPolls
	s.wakeMu.Unlock()
	if stop != nil {
		stop()
	}
	s.wake()
}

// Drained is closed when the drain starts.
func (s *Sidecar) Drained() <-chan struct{} { return s.drained }

// Draining reports whether the drain started.
func (s *Sidecar) Draining() bool { return s.draining.Load() }

// wake wakes every pull loop waiting for a free slot.
func (s *Sidecar) wake() {
	s.wakeMu.Lock()
	close(s.wakeCh)
	s.wakeCh = make(chan struct{})
	s.wakeMu.Unlock()
}

func (s *Sidecar) wakeChan() <-chan struct{} {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	return s.wakeCh
}

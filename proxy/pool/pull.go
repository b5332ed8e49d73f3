package pool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/qas-dev/qas/proxy/pool/auth"
)

// reconcileEvery is how often the pull loops follow the front list.
const reconcileEvery = time.Second

// idleRecheck bounds a pull loop's sleep while the sidecar is busy, in case a
// release signal was missed.
const idleRecheck = 50 * time.Millisecond

// RunPull keeps a long poll open to every front replica while the sidecar has a free
// slot and no local queue, and serves what it pulls into that slot. freed signals
// released slots (limit.Limiter.EnableFreed). It returns when ctx ends; requests
// being served are finished first.
func (s *Sidecar) RunPull(ctx context.Context, local Local, freed <-chan struct{}, serve ServeFunc) {
	// StartDrain cancels this context: the open polls end at once.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	s.wakeMu.Lock()
	s.stopPolls = stop
	draining := s.draining.Load()
	s.wakeMu.Unlock()
	if draining {
		stop()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() {
		for {
			select {
			case <-ctx.Done():
				s.wake()
				return
			case <-freed:
				s.wake()
			}
		}
	}()
	loops := map[string]context.CancelFunc{}
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		want := map[string]bool{}
		if !s.draining.Load() {
			for _, f := range s.cfg.Fronts.Fronts() {
				want[f] = true
			}
		}
		for f, stop := range loops {
			if !want[f] {
				stop()
				delete(loops, f)
			}
		}
		for f := range want {
			if loops[f] == nil {
				lctx, stop := context.WithCancel(ctx)
				loops[f] = stop
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.pullLoop(lctx, f, local, serve, &wg)
				}()
			}
		}
		select {
		case <-ctx.Done():
			for _, stop := range loops {
				stop()
			}
			return
		case <-t.C:
		}
	}
}

// pullLoop polls one front replica whenever the sidecar is idle.
func (s *Sidecar) pullLoop(ctx context.Context, front string, local Local, serve ServeFunc, wg *sync.WaitGroup) {
	for {
		if !s.waitIdle(ctx, front, local) {
			return
		}
		id, data, err := s.pullOnce(ctx, front)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.cfg.Log.Debug("pull", zap.String("front", front), zap.Error(err))
			s.fail(front)
		default:
			s.succeed(front)
			if data != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.servePulled(front, id, data, local, serve)
				}()
			}
		}
	}
}

// waitIdle waits until the sidecar is idle and front is not suspect; false when ctx
// ends or the sidecar drains.
func (s *Sidecar) waitIdle(ctx context.Context, front string, local Local) bool {
	for {
		wake := s.wakeChan()
		if ctx.Err() != nil || s.draining.Load() {
			return false
		}
		wait := s.suspectFor(front)
		if wait == 0 {
			if local.Idle() {
				return true
			}
			wait = idleRecheck
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// pullOnce makes one long poll: it returns a request's id and bytes, or nil data
// when the front had none.
func (s *Sidecar) pullOnce(ctx context.Context, front string) (string, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, pullDeadline)
	defer cancel()
	req, err := s.control(ctx, http.MethodGet, front, PathPull, nil)
	if err != nil {
		return "", nil, err
	}
	resp, err := s.transport.RoundTrip(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent:
		return "", nil, nil
	case http.StatusOK:
	default:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return "", nil, fmt.Errorf("pull: front answered %s", resp.Status)
	}
	id := resp.Header.Get(HeaderID)
	if !validID(id) || resp.Header.Get("Content-Type") != ContentType {
		return "", nil, fmt.Errorf("pull: malformed answer (id %q, type %q)", id, resp.Header.Get("Content-Type"))
	}
	limit := int64(s.cfg.MaxHead) + s.cfg.MaxBody
	if resp.ContentLength < 0 || resp.ContentLength > limit {
		return "", nil, fmt.Errorf("pull: request of %d bytes, limit %d", resp.ContentLength, limit)
	}
	data := make([]byte, resp.ContentLength)
	if _, err := io.ReadFull(resp.Body, data); err != nil {
		return "", nil, fmt.Errorf("pull: reading the request: %w", err)
	}
	return id, data, nil
}

// control builds an authenticated control request (pull, result, return).
func (s *Sidecar) control(ctx context.Context, method, front, target string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+front+target, body)
	if err != nil {
		return nil, err
	}
	a, err := s.signer.Sign(method, target, HopControl)
	if err != nil {
		return nil, err
	}
	req.Header[HeaderWorkload] = []string{s.cfg.Workload}
	req.Header[HeaderHop] = []string{HopControl}
	req.Header[auth.Header] = []string{a}
	return req, nil
}

// servePulled takes a slot for a pulled request and serves it, or gives it back to
// the front if the slot was taken meanwhile (a local request came first: a pulled
// request never waits behind local ones). The app sees the request only after the
// front confirmed, with its 100 Continue to the result, that this sidecar has it.
func (s *Sidecar) servePulled(front, id string, data []byte, local Local, serve ServeFunc) {
	if !local.TryAdmit() {
		s.giveBack(front, id)
		return
	}
	// The slot is given back as soon as the app is done with the request, not when
	// the front has relayed the response (another round trip).
	release := sync.OnceFunc(local.Release)
	defer release()
	req, perr := parsePulled(data)
	pr, pw := io.Pipe()
	g := newGate(pr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	target := PathResult + id
	rreq, err := s.control(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got100Continue: g.accept}), http.MethodPost, front, target, g)
	if err != nil {
		s.cfg.Log.Warn("result", zap.Error(err))
		return
	}
	rreq.ContentLength = -1
	rreq.Header["Content-Type"] = []string{ContentType}
	rreq.Header["Expect"] = []string{"100-continue"}
	ack := time.AfterFunc(controlTimeout, func() {
		if g.abandon() {
			cancel()
		}
	})
	done := make(chan error, 1)
	go func() {
		resp, err := s.transport.RoundTrip(rreq)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				err = fmt.Errorf("result: front answered %s", resp.Status)
			}
		}
		pr.CloseWithError(err) // unblocks serve if the front is gone
		done <- err
	}()
	select {
	case <-g.accepted:
	case err := <-done:
		if !g.abandon() && g.isAccepted() {
			// Accepted as the answer came; fall through and serve.
			done <- err
			break
		}
		ack.Stop()
		// The front did not hand it over (offered again after the ack timeout,
		// or its sender left): the app never saw it.
		s.cfg.Log.Debug("pulled request not confirmed", zap.String("front", front), zap.Error(err))
		return
	}
	ack.Stop()
	if perr != nil {
		// The front checked it; a request that still does not parse is answered
		// 502 rather than guessed at.
		s.cfg.Log.Warn("pulled request malformed", zap.Error(perr))
		_, _ = io.WriteString(pw, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 39\r\n\r\nqas-proxy: malformed pulled request\r\n\r\n")
	} else {
		// A front that stops taking the result must not hold the app's response:
		// a write that makes no progress for relayIdleTimeout cancels the exchange,
		// and serve's next write fails.
		idle := time.AfterFunc(relayIdleTimeout, cancel)
		serve(req, idleWriter{w: pw, idle: idle})
		idle.Stop()
		// Counted after serve counted its arrival: a snapshot never shows more
		// pulled requests than arrivals.
		s.cfg.Counters.Pulled()
	}
	pw.Close()
	release()
	t := time.NewTimer(relayIdleTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			s.cfg.Log.Debug("result", zap.String("front", front), zap.Error(err))
		}
	case <-t.C:
	}
}

// parsePulled parses a pulled request with net/http and refuses one the sidecar
// would not have sent: a CONNECT (in any case: the sidecar refuses every one, and
// no app behind the pool is a tunnel's end), a body of unknown length, a Qas-
// field, bytes after the request. The front refuses such a request before queueing
// it, and a puller before its app sees it.
func parsePulled(data []byte) (*http.Request, error) {
	r := bytes.NewReader(data)
	br := bufio.NewReaderSize(r, 4<<10)
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(req.Method, http.MethodConnect) {
		return nil, errors.New("pulled request is a CONNECT")
	}
	if req.ContentLength < 0 || len(req.TransferEncoding) > 0 {
		return nil, errors.New("pulled request has no Content-Length")
	}
	for name := range req.Header {
		if len(name) >= 4 && strings.EqualFold(name[:4], "qas-") {
			return nil, fmt.Errorf("pulled request carries %s", name)
		}
	}
	n, err := io.Copy(io.Discard, req.Body)
	if err != nil || n != req.ContentLength {
		return nil, fmt.Errorf("pulled request body: %d of %d bytes: %w", n, req.ContentLength, err)
	}
	if br.Buffered() > 0 || r.Len() > 0 {
		return nil, errors.New("bytes after the pulled request")
	}
	// The body was read to check it; it is served from the same bytes.
	req.Body = io.NopCloser(bytes.NewReader(data[len(data)-int(n):]))
	if n == 0 {
		req.Body = http.NoBody
	}
	return req, nil
}

// giveBack returns an offered request to the front, which offers it again first.
func (s *Sidecar) giveBack(front, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	req, err := s.control(ctx, http.MethodPost, front, PathReturn+id, nil)
	if err != nil {
		return
	}
	resp, err := s.transport.RoundTrip(req)
	if err != nil {
		// The front offers it again after its ack timeout anyway.
		s.cfg.Log.Debug("return", zap.String("front", front), zap.Error(err))
		return
	}
	resp.Body.Close()
}

// idleWriter re-arms idle before every write.
type idleWriter struct {
	w    io.Writer
	idle *time.Timer
}

func (w idleWriter) Write(p []byte) (int, error) {
	w.idle.Reset(relayIdleTimeout)
	return w.w.Write(p)
}

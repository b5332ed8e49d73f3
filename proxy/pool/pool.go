// Package pool is qas-proxy's pooled data plane (issue #20, docs/pooling.md): a
// sidecar whose concurrency slots are all busy sends a request it cannot serve to a
// shared front instead of queueing it, and a sidecar with a free slot and an empty
// local queue pulls the oldest request waiting at the front. The front is the same
// binary in front mode (Front); the sidecar's side is Sidecar.
//
// The wire protocol (docs/pooling.md, "Wire protocol") carries requests and
// responses as HTTP/1.1 messages (message/http) inside HTTP/1.1 requests between
// sidecars and the front, every one authenticated with the workload's secret
// (proxy/pool/auth), every one bounded in size and time.
package pool

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/qas-dev/qas/proxy/pool/auth"
)

// FrontSource gives the host:port of the ready front replicas. It is called for
// every overflow and once a second by the pull loops, so it must be cheap; it may
// change at any time (an EndpointSlice watcher).
type FrontSource interface {
	Fronts() []string
}

// Static is a fixed list of front replicas (--pool-fronts).
type Static []string

// Fronts returns the list.
func (s Static) Fronts() []string { return s }

// Wire names.
const (
	// HeaderWorkload names the workload whose queue and secret a request is for.
	HeaderWorkload = "Qas-Workload"
	// HeaderHop is "1" on an overflow request (it has made one hop from the sidecar
	// that received it) and "0" on pulls, results and returns.
	HeaderHop = "Qas-Hop"
	// HeaderExpired, with the value ExpiredUnseen, marks the front's own 503 to an
	// overflow it had accepted and then gave up before any pull took it (max wait,
	// or the front shutting down): no pod's app saw a byte of the request, so its
	// sender may serve it locally. The front sends it on no other answer.
	HeaderExpired = "Qas-Expired"
	ExpiredUnseen = "unseen"
	// HeaderID names a pulled request in the pull's answer, results and returns.
	HeaderID = "Qas-Id"
	// PathOverflow, PathPull, PathResult and PathReturn are the front's endpoints.
	PathOverflow = "/qas/overflow"
	PathPull     = "/qas/pull"
	PathResult   = "/qas/result/"
	PathReturn   = "/qas/return/"
	// ContentType is the media type of an HTTP message carried as a body (RFC 9112
	// section 10.1).
	ContentType = "message/http"
	// HopOverflow and HopControl are the Qas-Hop values.
	HopOverflow = "1"
	HopControl  = "0"
)

// Defaults and hard limits.
const (
	// DefaultDecisionTimeout bounds the wait for the front's decision on an overflow.
	DefaultDecisionTimeout = 25 * time.Millisecond
	// DefaultMaxBody is the largest request body that may overflow.
	DefaultMaxBody = 1 << 20
	// MaxPollTimeout bounds the front's long poll; a sidecar gives up on a pull after
	// pullDeadline.
	MaxPollTimeout = 20 * time.Second
	pullDeadline   = MaxPollTimeout + 10*time.Second
	// ackTimeout bounds the time between the front offering a request to a pull and
	// the pulling sidecar taking it (its result POST arriving): past it the front
	// offers the request again, as no app has seen it.
	ackTimeout = 2 * time.Second
	// controlTimeout bounds returns and the sidecar's wait for the front's 100
	// Continue on a result.
	controlTimeout = 2 * time.Second
	// relayIdleTimeout bounds each wait for bytes of a result or a write of them.
	relayIdleTimeout = 2 * time.Minute
	// MaxFrontWait bounds the front's --front-max-wait, so a sidecar can bound its
	// wait for an accepted request's response.
	MaxFrontWait = time.Minute
)

// newID returns a random request id: 32 lowercase hex digits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validID reports whether id is what newID makes.
func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := range len(id) {
		if !auth.IsLowerHex(id[i]) {
			return false
		}
	}
	return true
}

// StripQasFields deletes every field whose name starts with "Qas-" (net/http
// canonicalises names, so "qas-hop" is "Qas-Hop"): on the app port no client chooses
// the data plane.
func StripQasFields(h http.Header) {
	for name := range h {
		if len(name) >= 4 && strings.EqualFold(name[:4], "qas-") {
			delete(h, name)
		}
	}
}

// gate is an outgoing request body that yields nothing until the receiver accepted
// the request (its 100 Continue, through accept): a request refused, or not decided
// in time (abandon), never has a byte of its body read, so it stays untouched where
// it is. accept and abandon race through one compare-and-swap, so exactly one wins.
type gate struct {
	state    atomic.Int32
	accepted chan struct{}
	r        io.Reader
}

const (
	gatePending int32 = iota
	gateAccepted
	gateAbandoned
)

var errNotAccepted = errors.New("pool: body read before the receiver accepted the request")

func newGate(r io.Reader) *gate { return &gate{accepted: make(chan struct{}), r: r} }

func (g *gate) accept() {
	if g.state.CompareAndSwap(gatePending, gateAccepted) {
		close(g.accepted)
	}
}

// abandon reports whether the request was still undecided and is now abandoned.
func (g *gate) abandon() bool { return g.state.CompareAndSwap(gatePending, gateAbandoned) }

func (g *gate) isAccepted() bool { return g.state.Load() == gateAccepted }

func (g *gate) Read(p []byte) (int, error) {
	if g.state.Load() != gateAccepted {
		return 0, errNotAccepted
	}
	return g.r.Read(p)
}

// Close does not close the underlying reader (the client's body belongs to its
// server).
func (g *gate) Close() error { return nil }

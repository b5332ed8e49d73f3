package auth

import (
	"crypto/hmac"
	"sync"
	"time"
)

// DefaultMaxNonces bounds the nonces a Verifier remembers: at 5 s each side of its
// clock, enough for about 6 500 authenticated requests a second. Beyond it requests
// are refused (ErrNonceLimit) rather than the memory growing or a nonce forgotten
// early, which would allow a replay.
const DefaultMaxNonces = 1 << 16

// Verifier checks Qas-Auth headers against a Keyring and remembers nonces.
type Verifier struct {
	keys      *Keyring
	now       Clock
	maxNonces int

	mu     sync.Mutex
	nonces map[string]int64 // workload|nonce → expiry, unix seconds
	order  []nonceEntry     // insertion order, for expiry
	head   int
}

type nonceEntry struct {
	key    string
	expiry int64
}

// NewVerifier returns a Verifier; maxNonces ≤ 0 means DefaultMaxNonces.
func NewVerifier(keys *Keyring, now Clock, maxNonces int) *Verifier {
	if maxNonces <= 0 {
		maxNonces = DefaultMaxNonces
	}
	return &Verifier{keys: keys, now: clockOr(now), maxNonces: maxNonces, nonces: map[string]int64{}}
}

// Verify checks one request's header value. hop is its Qas-Hop value ("" when absent).
func (v *Verifier) Verify(workload, method, target, hop, header string) error {
	if v == nil || v.keys == nil {
		return errNoKeyring
	}
	p, err := Parse(header)
	if err != nil {
		return err
	}
	now := v.now()
	if d := now.Unix() - p.Time; d > int64(Window/time.Second) || d < -int64(Window/time.Second) {
		return ErrStale
	}
	keys := v.keys.valid(workload, now)
	if len(keys) == 0 {
		return ErrNoKey
	}
	ok := false
	for _, k := range keys {
		m := mac(k, workload, method, target, p.Time, p.Nonce, hop)
		// Every key is tried, so the time taken does not say which matched.
		ok = hmac.Equal(m[:], p.MAC[:]) || ok
	}
	if !ok {
		return ErrBadMAC
	}
	return v.remember(workload+"|"+p.Nonce, p.Time+int64(Window/time.Second)+1, now.Unix())
}

// remember records a nonce until expiry, or fails if it was seen.
func (v *Verifier) remember(key string, expiry, now int64) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	// Forget expired nonces from the oldest. Expiries are not strictly in insertion
	// order (timestamps vary within the window), so one may outlive its time by up to
	// the window: harmless, as its timestamp is refused by then anyway.
	for v.head < len(v.order) && v.order[v.head].expiry < now {
		e := v.order[v.head]
		if v.nonces[e.key] == e.expiry {
			delete(v.nonces, e.key)
		}
		v.order[v.head] = nonceEntry{}
		v.head++
	}
	if v.head > len(v.order)/2 && v.head > 1024 {
		v.order = append(v.order[:0], v.order[v.head:]...)
		v.head = 0
	}
	if exp, seen := v.nonces[key]; seen && exp >= now {
		return ErrReplay
	}
	if len(v.nonces) >= v.maxNonces {
		return ErrNonceLimit
	}
	v.nonces[key] = expiry
	v.order = append(v.order, nonceEntry{key: key, expiry: expiry})
	return nil
}

// remembered returns how many nonces are held (tests).
func (v *Verifier) remembered() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.nonces)
}

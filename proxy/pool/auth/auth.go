// Package auth authenticates the requests of the pooled data plane (issue #20): the
// overflow requests sidecars send to a front, their pulls, and the results they post
// back. Every such request carries
//
//	Qas-Auth: t=<unix seconds>,n=<nonce>,mac=<hex HMAC-SHA256(secret, workload|method|target|t|n|hop)>
//
// under its workload's 32-byte secret. The receiver checks the MAC in constant time,
// refuses a timestamp more than Window from its clock, and remembers the nonces it
// accepted within the window, so a captured header cannot be replayed. Secrets are
// read from files (a Kubernetes Secret volume) and re-read when they change; the
// previous secret stays valid for RotationGrace, so senders and receivers that see
// the new one at different moments keep working.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header is the field that carries the authentication.
const Header = "Qas-Auth"

// KeySize is the size of a workload's secret in bytes.
const KeySize = 32

// Window is the largest difference between a request's timestamp and the receiver's
// clock that is accepted; nonces are remembered for as long.
const Window = 5 * time.Second

// RotationGrace is how long the previous secret is still accepted after a new one
// was read.
const RotationGrace = time.Minute

// Limits of the header's parts: a nonce is 16 to 64 characters of [A-Za-z0-9_-], a MAC
// 64 lowercase hex digits, a timestamp at most 12 decimal digits (year 33658), and the
// whole value at most MaxHeaderLen bytes.
const (
	minNonce     = 16
	maxNonce     = 64
	maxTimeLen   = 12
	MaxHeaderLen = 160
)

// Clock returns the current time; tests inject a fake one.
type Clock func() time.Time

// Errors of Verify. All of them mean 403.
var (
	ErrMalformed  = errors.New("malformed " + Header)
	ErrMissing    = errors.New("no " + Header)
	ErrStale      = errors.New(Header + " timestamp outside the window")
	ErrBadMAC     = errors.New(Header + " MAC does not match")
	ErrReplay     = errors.New(Header + " nonce already used")
	ErrNoKey      = errors.New("no secret for this workload")
	ErrNonceLimit = errors.New("too many nonces in the window")
)

// Parsed is a parsed header value.
type Parsed struct {
	Time  int64
	Nonce string
	MAC   [sha256.Size]byte
}

// Parse reads a header value: exactly "t=<digits>,n=<nonce>,mac=<64 hex>", in that
// order, nothing else, t without leading zeros: one header has one spelling. Anything
// else is ErrMalformed.
func Parse(v string) (Parsed, error) {
	var p Parsed
	if v == "" {
		return p, ErrMissing
	}
	if len(v) > MaxHeaderLen {
		return p, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxHeaderLen)
	}
	parts := strings.Split(v, ",")
	if len(parts) != 3 {
		return p, fmt.Errorf("%w: want t=,n=,mac=", ErrMalformed)
	}
	t, ok := strings.CutPrefix(parts[0], "t=")
	if !ok || t == "" || len(t) > maxTimeLen || !allDigits(t) || t[0] == '0' && len(t) > 1 {
		return p, fmt.Errorf("%w: t is not a unix time in seconds", ErrMalformed)
	}
	p.Time, _ = strconv.ParseInt(t, 10, 64) // at most 12 digits: always fits
	n, ok := strings.CutPrefix(parts[1], "n=")
	if !ok || len(n) < minNonce || len(n) > maxNonce || !nonceChars(n) {
		return p, fmt.Errorf("%w: n is not %d to %d characters of [A-Za-z0-9_-]", ErrMalformed, minNonce, maxNonce)
	}
	p.Nonce = n
	m, ok := strings.CutPrefix(parts[2], "mac=")
	if !ok || len(m) != 2*sha256.Size || !lowerHex(m) {
		return p, fmt.Errorf("%w: mac is not %d lowercase hex digits", ErrMalformed, 2*sha256.Size)
	}
	_, _ = hex.Decode(p.MAC[:], []byte(m))
	return p, nil
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func nonceChars(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !isNonceChar(c) {
			return false
		}
	}
	return true
}

func lowerHex(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !IsLowerHex(c) {
			return false
		}
	}
	return true
}

// mac computes the MAC of one request. The fields are joined with '|': the workload,
// method, t, n and hop cannot contain one, so only the target may, and the split is
// unambiguous.
func mac(key []byte, workload, method, target string, t int64, nonce, hop string) [sha256.Size]byte {
	h := hmac.New(sha256.New, key)
	_, _ = h.Write([]byte(workload + "|" + method + "|" + target + "|" + strconv.FormatInt(t, 10) + "|" + nonce + "|" + hop))
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// Sign returns the header value for one request under key at time now.
func Sign(key []byte, now time.Time, workload, method, target, hop string) string {
	var nb [16]byte
	_, _ = rand.Read(nb[:])
	nonce := hex.EncodeToString(nb[:])
	t := now.Unix()
	m := mac(key, workload, method, target, t, nonce, hop)
	return "t=" + strconv.FormatInt(t, 10) + ",n=" + nonce + ",mac=" + hex.EncodeToString(m[:])
}

func isNonceChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// IsLowerHex reports whether c is a lowercase hex digit.
func IsLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

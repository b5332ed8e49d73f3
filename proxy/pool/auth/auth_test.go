package auth

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

func writeKey(t *testing.T, path string, key []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(hex.EncodeToString(key)+"\n"), 0o600))
}

func key(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func setup(t *testing.T) (*clock, string, *Keyring, *Verifier) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "secret")
	writeKey(t, path, key(1))
	k, err := NewFileKeyring("shop", path, c.now)
	require.NoError(t, err)
	return c, path, k, NewVerifier(k, c.now, 0)
}

func TestParse(t *testing.T) {
	good := "t=1800000000,n=0123456789abcdef,mac=" + strings.Repeat("ab", 32)
	p, err := Parse(good)
	require.NoError(t, err)
	require.Equal(t, int64(1800000000), p.Time)
	require.Equal(t, "0123456789abcdef", p.Nonce)
	require.Equal(t, byte(0xab), p.MAC[31])
	for _, tt := range []struct{ name, v, want string }{
		{"empty", "", "no Qas-Auth"},
		{"too long", good + strings.Repeat("x", MaxHeaderLen), "longer than"},
		{"two parts", "t=1,n=0123456789abcdef", "want t=,n=,mac="},
		{"four parts", good + ",x=1", "want t=,n=,mac="},
		{"order", "n=0123456789abcdef,t=1800000000,mac=" + strings.Repeat("ab", 32), "t is not"},
		{"negative t", "t=-1,n=0123456789abcdef,mac=" + strings.Repeat("ab", 32), "t is not"},
		{"leading zero", "t=01800000000,n=0123456789abcdef,mac=" + strings.Repeat("ab", 32), "t is not"},
		{"huge t", "t=9999999999999,n=0123456789abcdef,mac=" + strings.Repeat("ab", 32), "t is not"},
		{"space", "t=1800000000, n=0123456789abcdef,mac=" + strings.Repeat("ab", 32), "n is not"},
		{"short nonce", "t=1,n=abc,mac=" + strings.Repeat("ab", 32), "n is not"},
		{"nonce chars", "t=1,n=0123456789abcde|,mac=" + strings.Repeat("ab", 32), "n is not"},
		{"upper mac", "t=1,n=0123456789abcdef,mac=" + strings.Repeat("AB", 32), "mac is not"},
		{"short mac", "t=1,n=0123456789abcdef,mac=" + strings.Repeat("ab", 31), "mac is not"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.v)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("t=1800000000,n=0123456789abcdef,mac=" + strings.Repeat("ab", 32))
	f.Add("t=,n=,mac=")
	f.Add("t=1,,")
	f.Fuzz(func(t *testing.T, v string) {
		p, err := Parse(v)
		if err != nil {
			require.True(t, errors.Is(err, ErrMalformed) || errors.Is(err, ErrMissing), "every failure is malformed or missing: %v", err)
			return
		}
		// What parses is exactly what Sign writes: it round-trips byte for byte.
		again := "t=" + strconv.FormatInt(p.Time, 10) + ",n=" + p.Nonce + ",mac=" + hex.EncodeToString(p.MAC[:])
		require.Equal(t, v, again)
	})
}

func TestVerify(t *testing.T) {
	c, _, k, v := setup(t)
	sign := func(workload, method, target, hop string) string {
		return Sign(key(1), c.now(), workload, method, target, hop)
	}
	require.NoError(t, v.Verify("shop", "POST", "/qas/overflow", "1", sign("shop", "POST", "/qas/overflow", "1")))

	for _, tt := range []struct {
		name   string
		header string
		want   error
	}{
		{"other workload's request", sign("cart", "POST", "/qas/overflow", "1"), ErrBadMAC},
		{"other method", sign("shop", "GET", "/qas/overflow", "1"), ErrBadMAC},
		{"other target", sign("shop", "POST", "/qas/pull", "1"), ErrBadMAC},
		{"other hop", sign("shop", "POST", "/qas/overflow", "0"), ErrBadMAC},
		{"other key", Sign(key(2), c.now(), "shop", "POST", "/qas/overflow", "1"), ErrBadMAC},
		{"from the future", Sign(key(1), c.now().Add(6*time.Second), "shop", "POST", "/qas/overflow", "1"), ErrStale},
		{"from the past", Sign(key(1), c.now().Add(-6*time.Second), "shop", "POST", "/qas/overflow", "1"), ErrStale},
		{"missing", "", ErrMissing},
		{"garbage", "t=1", ErrMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, v.Verify("shop", "POST", "/qas/overflow", "1", tt.header), tt.want)
		})
	}
	// Within the window either side.
	require.NoError(t, v.Verify("shop", "POST", "/x", "1", Sign(key(1), c.now().Add(5*time.Second), "shop", "POST", "/x", "1")))
	require.NoError(t, v.Verify("shop", "POST", "/x", "1", Sign(key(1), c.now().Add(-5*time.Second), "shop", "POST", "/x", "1")))
	// A workload the keyring does not know.
	require.ErrorIs(t, v.Verify("cart", "POST", "/x", "1", sign("cart", "POST", "/x", "1")), ErrNoKey)
	_ = k
}

func TestReplayRefusedWithinWindowAndForgottenAfter(t *testing.T) {
	c, _, _, v := setup(t)
	h := Sign(key(1), c.now(), "shop", "GET", "/qas/pull", "0")
	require.NoError(t, v.Verify("shop", "GET", "/qas/pull", "0", h))
	require.ErrorIs(t, v.Verify("shop", "GET", "/qas/pull", "0", h), ErrReplay)
	c.add(4 * time.Second)
	require.ErrorIs(t, v.Verify("shop", "GET", "/qas/pull", "0", h), ErrReplay)
	c.add(3 * time.Second)
	require.ErrorIs(t, v.Verify("shop", "GET", "/qas/pull", "0", h), ErrStale, "past the window the timestamp refuses it")
	// Old nonces are forgotten once past the window: memory stays bounded.
	for range 50 {
		require.NoError(t, v.Verify("shop", "GET", "/", "0", Sign(key(1), c.now(), "shop", "GET", "/", "0")))
	}
	c.add(20 * time.Second)
	require.NoError(t, v.Verify("shop", "GET", "/", "0", Sign(key(1), c.now(), "shop", "GET", "/", "0")))
	require.Equal(t, 1, v.remembered())
}

func TestNonceLimit(t *testing.T) {
	c, _, k, _ := setup(t)
	v := NewVerifier(k, c.now, 3)
	for range 3 {
		require.NoError(t, v.Verify("shop", "GET", "/", "0", Sign(key(1), c.now(), "shop", "GET", "/", "0")))
	}
	require.ErrorIs(t, v.Verify("shop", "GET", "/", "0", Sign(key(1), c.now(), "shop", "GET", "/", "0")), ErrNonceLimit)
	c.add(12 * time.Second)
	require.NoError(t, v.Verify("shop", "GET", "/", "0", Sign(key(1), c.now(), "shop", "GET", "/", "0")))
}

func TestRotationAcceptsPreviousKeyForAMinute(t *testing.T) {
	c, path, k, v := setup(t)
	signer := Signer{Keys: k, Workload: "shop"}
	writeKey(t, path, key(2))
	// Not re-read within the second.
	h, err := signer.Sign("GET", "/", "0")
	require.NoError(t, err)
	require.NoError(t, v.Verify("shop", "GET", "/", "0", h), "still the old key")
	c.add(1100 * time.Millisecond)
	h, err = signer.Sign("GET", "/", "0")
	require.NoError(t, err)
	require.NoError(t, v.Verify("shop", "GET", "/", "0", h), "the new key")
	old := func() string { return Sign(key(1), c.now(), "shop", "GET", "/", "0") }
	require.NoError(t, v.Verify("shop", "GET", "/", "0", old()), "the previous key within the grace")
	c.add(58 * time.Second)
	require.NoError(t, v.Verify("shop", "GET", "/", "0", old()))
	c.add(2 * time.Second)
	require.ErrorIs(t, v.Verify("shop", "GET", "/", "0", old()), ErrBadMAC, "after a minute the previous key is refused")

	// A broken file keeps the current key and reports the error.
	require.NoError(t, os.WriteFile(path, []byte("short"), 0o600))
	c.add(2 * time.Second)
	h, err = signer.Sign("GET", "/", "0")
	require.NoError(t, err)
	require.NoError(t, v.Verify("shop", "GET", "/", "0", h))
	require.ErrorContains(t, k.Err(), "a key is 32 bytes or 64 hex digits, got 5 bytes")
}

func TestDirKeyring(t *testing.T) {
	c := newClock()
	dir := t.TempDir()
	writeKey(t, filepath.Join(dir, "shop"), key(1))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cart"), key(2), 0o600)) // raw bytes
	require.NoError(t, os.Mkdir(filepath.Join(dir, "..data"), 0o700))
	k, err := NewDirKeyring(dir, c.now)
	require.NoError(t, err)
	v := NewVerifier(k, c.now, 0)
	require.NoError(t, v.Verify("cart", "GET", "/", "0", Sign(key(2), c.now(), "cart", "GET", "/", "0")))
	require.ErrorIs(t, v.Verify("shop", "GET", "/", "0", Sign(key(2), c.now(), "shop", "GET", "/", "0")), ErrBadMAC, "each workload has its own key")
	require.True(t, k.Known("shop"))
	require.False(t, k.Known("other"))

	for _, tt := range []struct{ name, file, content, want string }{
		{"bad name", "Bad_Name", strings.Repeat("a", 64), "not a workload name"},
		{"bad key", "ok", "nothex" + strings.Repeat("z", 58), "64 hex digits"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(d, tt.file), []byte(tt.content), 0o600))
			_, err := NewDirKeyring(d, c.now)
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err = NewDirKeyring(t.TempDir(), c.now)
	require.ErrorContains(t, err, "no key files")
	_, err = NewFileKeyring("shop", filepath.Join(dir, "absent"), c.now)
	require.ErrorContains(t, err, "no such file")
	_, err = NewFileKeyring("a|b", filepath.Join(dir, "shop"), c.now)
	require.ErrorContains(t, err, "not a valid name")
}

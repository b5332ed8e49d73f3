package auth

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"
)

// reloadEvery is how often the key files are read again at most.
const reloadEvery = time.Second

// workloadName is what a workload may be called: a Kubernetes object name (DNS
// subdomain), which also keeps '|' out of the MAC's fields.
var workloadName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// ValidWorkload reports whether name is a valid workload name.
func ValidWorkload(name string) bool { return workloadName.MatchString(name) }

// keyState is one workload's current key and, for RotationGrace after a change, the
// previous one.
type keyState struct {
	cur, prev  []byte
	prevExpiry time.Time
}

// Keyring holds the workloads' secrets, read from files and re-read (at most once a
// second, when used) so that a rotated Secret takes effect without a restart.
//
// A key file holds exactly 32 bytes, or 64 hex digits optionally followed by a
// newline (as `openssl rand -hex 32` writes them).
type Keyring struct {
	now Clock
	// Either one file for one workload, or a directory whose regular files are named
	// by workload (a Secret mounted as a volume; entries starting with '.' are the
	// kubelet's and skipped).
	workload, file, dir string

	mu       sync.Mutex
	keys     map[string]*keyState
	loadedAt time.Time
	lastErr  error
}

// NewFileKeyring reads one workload's secret from path.
func NewFileKeyring(workload, path string, now Clock) (*Keyring, error) {
	if !ValidWorkload(workload) {
		return nil, fmt.Errorf("workload %q is not a valid name (lowercase DNS subdomain)", workload)
	}
	k := &Keyring{now: clockOr(now), workload: workload, file: path, keys: map[string]*keyState{}}
	if err := k.load(k.now()); err != nil {
		return nil, err
	}
	return k, nil
}

// NewDirKeyring reads every workload's secret from dir, one file per workload.
func NewDirKeyring(dir string, now Clock) (*Keyring, error) {
	k := &Keyring{now: clockOr(now), dir: dir, keys: map[string]*keyState{}}
	if err := k.load(k.now()); err != nil {
		return nil, err
	}
	return k, nil
}

func clockOr(now Clock) Clock {
	if now == nil {
		return time.Now
	}
	return now
}

// ReadKey reads one key file.
func ReadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseKey(b)
}

// ParseKey reads a key: 32 raw bytes, or 64 hex digits and an optional newline.
func ParseKey(b []byte) ([]byte, error) {
	if len(b) == KeySize {
		return bytes.Clone(b), nil
	}
	t := bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(t) == 2*KeySize {
		k := make([]byte, KeySize)
		if _, err := hex.Decode(k, t); err == nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("a key is %d bytes or %d hex digits, got %d bytes", KeySize, 2*KeySize, len(b))
}

// load reads the files and installs changed keys. k.mu must be held or k unshared.
func (k *Keyring) load(now time.Time) error {
	read := map[string][]byte{}
	if k.file != "" {
		key, err := ReadKey(k.file)
		if err != nil {
			return fmt.Errorf("pool secret %s: %w", k.file, err)
		}
		read[k.workload] = key
	} else {
		entries, err := os.ReadDir(k.dir)
		if err != nil {
			return fmt.Errorf("pool secrets %s: %w", k.dir, err)
		}
		for _, e := range entries {
			name := e.Name()
			if name[0] == '.' || e.IsDir() {
				continue
			}
			if !ValidWorkload(name) {
				return fmt.Errorf("pool secrets %s: file %q is not a workload name", k.dir, name)
			}
			key, err := ReadKey(filepath.Join(k.dir, name))
			if err != nil {
				return fmt.Errorf("pool secret %s: %w", filepath.Join(k.dir, name), err)
			}
			read[name] = key
		}
		if len(read) == 0 {
			return fmt.Errorf("pool secrets %s: no key files", k.dir)
		}
	}
	for w, key := range read {
		st := k.keys[w]
		switch {
		case st == nil:
			k.keys[w] = &keyState{cur: key}
		case !bytes.Equal(st.cur, key):
			st.prev, st.cur, st.prevExpiry = st.cur, key, now.Add(RotationGrace)
		}
	}
	// A workload whose file went away keeps its key for the grace period only.
	for w, st := range k.keys {
		if _, ok := read[w]; !ok {
			if st.cur != nil {
				st.prev, st.cur, st.prevExpiry = st.cur, nil, now.Add(RotationGrace)
			}
		}
	}
	k.loadedAt = now
	return nil
}

// refresh re-reads the files if the last read is older than reloadEvery. A failed
// read keeps the keys in use (the kubelet swaps a Secret's files non-atomically for
// an instant) and is reported by Err.
func (k *Keyring) refresh(now time.Time) {
	if now.Sub(k.loadedAt) < reloadEvery && !now.Before(k.loadedAt) {
		return
	}
	k.lastErr = k.load(now)
	if k.lastErr != nil {
		k.loadedAt = now
	}
}

// Err returns the last reload's error, if it failed.
func (k *Keyring) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastErr
}

// Current returns workload's current key, for signing.
func (k *Keyring) Current(workload string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.refresh(k.now())
	if st := k.keys[workload]; st != nil && st.cur != nil {
		return st.cur, nil
	}
	return nil, ErrNoKey
}

// valid returns the keys a request of workload may be signed with now.
func (k *Keyring) valid(workload string, now time.Time) [][]byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.refresh(now)
	st := k.keys[workload]
	if st == nil {
		return nil
	}
	var out [][]byte
	if st.cur != nil {
		out = append(out, st.cur)
	}
	if st.prev != nil && now.Before(st.prevExpiry) {
		out = append(out, st.prev)
	}
	return out
}

// Known reports whether workload has a key (current or in its grace period).
func (k *Keyring) Known(workload string) bool { return len(k.valid(workload, k.now())) > 0 }

// Signer signs requests for one workload.
type Signer struct {
	Keys     *Keyring
	Workload string
}

// Sign returns the Qas-Auth value for a request.
func (s Signer) Sign(method, target, hop string) (string, error) {
	key, err := s.Keys.Current(s.Workload)
	if err != nil {
		return "", err
	}
	return Sign(key, s.Keys.now(), s.Workload, method, target, hop), nil
}

var errNoKeyring = errors.New("auth: no keyring")

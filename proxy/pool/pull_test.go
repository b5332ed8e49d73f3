package pool

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/pool/auth"
)

type oneSlot struct{ busy bool }

func (o *oneSlot) Idle() bool { return !o.busy }
func (o *oneSlot) TryAdmit() bool {
	if o.busy {
		return false
	}
	o.busy = true
	return true
}
func (o *oneSlot) Release() { o.busy = false }

func testSidecar(t *testing.T, front string, rec *measure.Recorder) *Sidecar {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shop"), testKey, 0o600))
	keys, err := auth.NewFileKeyring("shop", filepath.Join(dir, "shop"), nil)
	require.NoError(t, err)
	s, err := NewSidecar(SidecarConfig{Workload: "shop", Keys: keys, Fronts: Static{front}, Counters: rec.EnablePool()})
	require.NoError(t, err)
	t.Cleanup(s.CloseIdle)
	return s
}

// pulledOne is a front holding one accepted overflow (br reads the rest of its
// sender's exchange) and a sidecar (recording into rec) that pulled it: its id and
// bytes.
func pulledOne(t *testing.T) (tf *testFront, br *bufio.Reader, rec *measure.Recorder, s *Sidecar, id string, data []byte) {
	t.Helper()
	tf = newTestFront(t, 5, 10*time.Second)
	_, br = exchange(t, tf.addr, overflowRaw(innerReq))
	require.Equal(t, 100, read(t, br, "POST").StatusCode)
	rec = measure.New(nil, 1, 1)
	s = testSidecar(t, tf.addr, rec)
	id, data, err := s.pullOnce(context.Background(), tf.addr)
	require.NoError(t, err)
	return tf, br, rec, s, id, data
}

// TestPulledCountedAfterArrival: while a pulled request is being served, the
// sidecar's /stats document is valid: the request is counted pulled only once its
// arrival is (a document with more pulled requests than arrivals fails validation,
// and the collector would drop it).
func TestPulledCountedAfterArrival(t *testing.T) {
	tf, br, rec, s, id, data := pulledOne(t)
	require.NotEmpty(t, id)
	served := false
	s.servePulled(tf.addr, id, data, &oneSlot{}, func(req *http.Request, out io.Writer) {
		require.NoError(t, rec.Snapshot().Validate(), "before the arrival is counted")
		rec.Arrive()
		require.Equal(t, "/x", req.URL.Path)
		_, _ = io.WriteString(out, "HTTP/1.1 204 No Content\r\n\r\n")
		served = true
	})
	require.True(t, served)
	require.Equal(t, uint64(1), rec.Snapshot().Pool.Pulled)
	outer := read(t, br, "POST")
	require.Equal(t, 200, outer.StatusCode)
}

// TestPulledGivenBackWhenSlotTaken: a pulled request whose slot was taken meanwhile
// is returned to the front, not served, and offered again.
func TestPulledGivenBackWhenSlotTaken(t *testing.T) {
	tf, _, rec, s, id, data := pulledOne(t)
	s.servePulled(tf.addr, id, data, &oneSlot{busy: true}, func(*http.Request, io.Writer) { t.Fatal("served without a slot") })
	require.Equal(t, 1, tf.f.queued("shop"), "back in the queue")
	id2, _, err := s.pullOnce(context.Background(), tf.addr)
	require.NoError(t, err)
	require.Equal(t, id, id2)
	require.Zero(t, rec.Snapshot().Pool.Pulled)
}

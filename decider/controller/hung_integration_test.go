package controller_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// hungInflux accepts connections and never answers, as an InfluxDB stuck on a
// compaction or a full disk does. It counts the requests in flight (connections the
// client has not given up on) and the most seen at once.
type hungInflux struct {
	ln       net.Listener
	mu       sync.Mutex
	open     int
	maxOpen  int
	accepted int
}

func startHungInflux(t *testing.T) *hungInflux {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &hungInflux{ln: ln}
	var conns sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.open++
			h.accepted++
			h.maxOpen = max(h.maxOpen, h.open)
			h.mu.Unlock()
			conns.Go(func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					// Read the request and whatever follows, answer nothing; the read
					// ends when the client closes the connection (or the test does).
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				h.mu.Lock()
				h.open--
				h.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); conns.Wait() })
	return h
}

func (h *hungInflux) counts() (open, maxOpen, accepted int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open, h.maxOpen, h.accepted
}

// TestHungInfluxDBHoldsEachWorkloadWithinTheCycle: with an InfluxDB that accepts
// and never answers, a cycle reads every workload's measurements at once (workers),
// gives each read up at its deadline, holds each workload saying its data is late,
// and ends. (Before, reads ran one after another with no deadline of their own,
// 20 s each: one hung InfluxDB overran the 15 s cycle for every QueueAutoscaler.)
func TestHungInfluxDBHoldsEachWorkloadWithinTheCycle(t *testing.T) {
	e := setup(t)
	names := []string{"hung-a", "hung-b", "hung-c"}
	for _, n := range names {
		e.deployment(t, n, 2)
		e.queueAutoscaler(t, n, n, false)
	}
	db := startHungInflux(t)
	client := influxdb2.NewClient("http://"+db.ln.Addr().String(), "")
	t.Cleanup(client.Close)
	src := store.Source{Store: &store.Flux{Query: client.QueryAPI(""), Bucket: influxtest.Bucket}, Window: time.Minute}
	ctrl, stop, err := controller.NewForConfig(e.c.Config, src, nil, zaptest.NewLogger(t), e.clock)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); stop() })
	require.NoError(t, ctrl.Start(ctx))
	e.synced(t, ctrl)

	done := make(chan error, 1)
	go func() {
		_, err := ctrl.RunOnce(ctx)
		done <- err
	}()
	require.Eventually(t, func() bool { _, most, _ := db.counts(); return most == len(names) }, time.Minute, 10*time.Millisecond,
		"every workload's read is in flight at once, none waiting behind another's hung read")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the cycle did not end: a read has no deadline")
	}
	open, _, accepted := db.counts()
	require.Equal(t, len(names), accepted, "one read per workload")
	require.Eventually(t, func() bool { open, _, _ = db.counts(); return open == 0 }, time.Minute, 10*time.Millisecond,
		"every read was given up at its deadline")

	for _, n := range names {
		qa := e.get(t, n)
		require.NotNil(t, qa.Status.LastDecision, n)
		require.Contains(t, qa.Status.LastDecision.Reason, "measurements late", n)
		require.Contains(t, qa.Status.LastDecision.Reason, controller.DefaultMeasureTimeout.String(), n)
		active := condition(qa, "ScalingActive")
		require.Equal(t, metav1.ConditionFalse, active.Status, n)
		require.Equal(t, "Holding", active.Reason, n)
		require.Equal(t, int32(2), e.replicas(t, n), "held: nothing scaled on missing data")
	}
}

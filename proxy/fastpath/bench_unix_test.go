//go:build unix

package fastpath_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/qas-dev/qas/proxy/fastpath"
	"github.com/qas-dev/qas/proxy/measure"
)

// BenchmarkProxyRoundTrip: keep-alive GETs through a real fast-path server on
// loopback, from benchClients clients at once (so that application connections pass
// from one client to another through the pool, as under load), to an application
// answering 100 bytes, as make bench's example app does. Besides wall time it reports
// cpu-ns/op: the process's user and system CPU per request (getrusage), for the proxy,
// the clients and the application together, which are the same whatever the proxy
// does; on a shared machine it moves less than wall time. It uses only the package's
// exported API, so the same file runs against an older checkout for a ratio measured
// in the same session.
func BenchmarkProxyRoundTrip(b *testing.B) {
	const benchClients = 8
	app := benchApp(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv, err := fastpath.New(fastpath.Config{
		Upstream: app, DialTimeout: time.Second, MaxIdleConnsPerHost: 64,
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 1 << 16,
	}, measure.New(nil, 0, 0), nil, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no grace: every connection closes at once
		_ = srv.Shutdown(ctx)
	})

	req := []byte("GET /bytes?n=100 HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	clients := make([]*bufio.ReadWriter, benchClients)
	for i := range clients {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { nc.Close() })
		// A bound on every wait: a broken proxy fails the benchmark instead of hanging it.
		if err := nc.SetDeadline(time.Now().Add(10 * time.Minute)); err != nil {
			b.Fatal(err)
		}
		clients[i] = bufio.NewReadWriter(bufio.NewReader(nc), bufio.NewWriter(nc))
		if err := roundTrip(clients[i], req); err != nil { // the pool fills
			b.Fatal(err)
		}
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	var failed atomic.Pointer[error]
	before := cpuNanos()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := roundTrip(c, req); err != nil {
					failed.Store(&err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(cpuNanos()-before)/float64(b.N), "cpu-ns/op")
}

// roundTrip sends req and reads a response with a Content-Length body.
func roundTrip(c *bufio.ReadWriter, req []byte) error {
	if _, err := c.Write(req); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return err
	}
	n := -1
	for {
		line, err := c.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) == 2 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			n, err = strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				return err
			}
		}
	}
	if n < 0 {
		return io.ErrUnexpectedEOF
	}
	_, err := c.Discard(n)
	return err
}

// benchApp starts an application on loopback answering every request with 100 bytes,
// and returns its address.
func benchApp(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n" + string(bytes.Repeat([]byte("x"), 100)))
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			b.Cleanup(func() { nc.Close() })
			go func() {
				br := bufio.NewReader(nc)
				for {
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(line) == 2 {
							break
						}
					}
					if _, err := nc.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// cpuNanos is the process's user and system CPU time so far.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

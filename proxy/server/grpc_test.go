package server

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// grpcApp runs a real gRPC server on loopback with the standard health service, which
// reports service "qas" SERVING. Every unary call ends with the trailer
// x-app-trailer: unary, and a Health.Watch stream ends with status OK and the
// trailer x-watch-sent (the messages sent) after its second message.
func grpcApp(t *testing.T) (string, *health.Server) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			resp, err := h(ctx, req)
			_ = grpc.SetTrailer(ctx, metadata.Pairs("x-app-trailer", "unary"))
			return resp, err
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if info.FullMethod != healthgrpc.Health_Watch_FullMethodName {
				return h(srv, ss)
			}
			ctx, cancel := context.WithCancel(ss.Context())
			defer cancel()
			s := &endAfter{ServerStream: ss, ctx: ctx, cancel: cancel, left: 2}
			err := h(srv, s)
			if s.left > 0 {
				return err
			}
			// Watch ended because this stream's context was cancelled: end it well.
			ss.SetTrailer(metadata.Pairs("x-watch-sent", "2"))
			return nil
		}),
	)
	hs := health.NewServer()
	hs.SetServingStatus("qas", healthgrpc.HealthCheckResponse_SERVING)
	healthgrpc.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String(), hs
}

// endAfter is a server stream whose context ends once it has sent left messages.
type endAfter struct {
	grpc.ServerStream
	ctx    context.Context
	cancel context.CancelFunc
	left   int
}

func (s *endAfter) Context() context.Context { return s.ctx }

func (s *endAfter) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if s.left--; s.left == 0 {
		s.cancel()
	}
	return err
}

func grpcHealthClient(t *testing.T, addr string) healthgrpc.HealthClient {
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return healthgrpc.NewHealthClient(conn)
}

// TestGRPCThroughProxy: with --upstream-protocol=h2c, gRPC calls to a real gRPC
// server pass through the proxy with their status, messages and trailers, a
// server-streaming call streams, and the proxy measures every call.
func TestGRPCThroughProxy(t *testing.T) {
	up, hs := grpcApp(t)
	p := start(t, up, Config{UpstreamProtocol: UpstreamH2C}, Options{FastPath: true})
	client := grpcHealthClient(t, p.srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var trailer metadata.MD
	resp, err := client.Check(ctx, &healthgrpc.HealthCheckRequest{Service: "qas"}, grpc.Trailer(&trailer))
	require.NoError(t, err)
	require.Equal(t, healthgrpc.HealthCheckResponse_SERVING, resp.GetStatus())
	require.Equal(t, []string{"unary"}, trailer.Get("x-app-trailer"))

	// A gRPC error is an HTTP 200 whose trailers carry the status.
	trailer = nil
	_, err = client.Check(ctx, &healthgrpc.HealthCheckRequest{Service: "missing"}, grpc.Trailer(&trailer))
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	require.Equal(t, "unknown service", status.Convert(err).Message())
	require.Equal(t, []string{"unary"}, trailer.Get("x-app-trailer"))

	watch, err := client.Watch(ctx, &healthgrpc.HealthCheckRequest{Service: "qas"})
	require.NoError(t, err)
	msg, err := watch.Recv()
	require.NoError(t, err)
	require.Equal(t, healthgrpc.HealthCheckResponse_SERVING, msg.GetStatus())
	// The first message arrived while the call is open; the app sends the next on a change.
	hs.SetServingStatus("qas", healthgrpc.HealthCheckResponse_NOT_SERVING)
	msg, err = watch.Recv()
	require.NoError(t, err)
	require.Equal(t, healthgrpc.HealthCheckResponse_NOT_SERVING, msg.GetStatus())
	_, err = watch.Recv()
	require.ErrorIs(t, err, io.EOF, "the stream ends with status OK")
	require.Equal(t, []string{"2"}, watch.Trailer().Get("x-watch-sent"))

	require.Eventually(t, func() bool { return snapshot(t, p).Completions == 3 }, 10*time.Second, 10*time.Millisecond)
	s := snapshot(t, p)
	require.Equal(t, uint64(3), s.Arrivals)
	require.Equal(t, uint64(3), s.Codes[1], "gRPC answers HTTP 200, its status is in the trailers")
	require.Zero(t, s.UpstreamErrors+s.ClientCancels+s.UpstreamTimeouts)
	require.Zero(t, s.InFlight)
	require.Greater(t, s.ServiceSecondsSum, 0.0)
	require.False(t, p.srv.FastPath(), "no fast path with an h2c upstream")
}

// TestGRPCNeedsH2CUpstream: with the default --upstream-protocol=http1 the proxy
// speaks HTTP/1.1 to the app, which a gRPC server does not understand (it expects the
// HTTP/2 connection preface and closes the connection); the call fails with a clear
// 502, which gRPC clients report as Unavailable, and the proxy counts an upstream
// error.
func TestGRPCNeedsH2CUpstream(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up, _ := grpcApp(t)
		p := start(t, up, Config{}, Options{FastPath: fast})
		client := grpcHealthClient(t, p.srv.Addr())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := client.Check(ctx, &healthgrpc.HealthCheckRequest{Service: "qas"})
		require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), "unexpected HTTP status code received from server: "+strconv.Itoa(502))
		s := snapshot(t, p)
		require.Equal(t, uint64(1), s.UpstreamErrors)
		require.Equal(t, uint64(1), s.Codes[4])
		requireServedBy(t, p, 0, 1) // h2c from the client always takes the general path
	})
}

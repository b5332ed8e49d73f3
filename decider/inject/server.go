package inject

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// Server is the webhook's HTTPS server. Certificates come from GetCertificate on
// every handshake, so a rotated serving certificate is used without a restart.
type Server struct {
	// Addr is the listen address, e.g. ":8443" or "127.0.0.1:0".
	Addr           string
	Handler        Handler
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	Log            *zap.Logger
	// Ready, when set, receives the bound address once the server listens.
	Ready func(addr net.Addr)
}

// Run serves /mutate and /healthz until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	if s.GetCertificate == nil {
		return errors.New("inject: Server needs GetCertificate")
	}
	mux := http.NewServeMux()
	mux.Handle("/mutate", s.Handler)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	if s.Ready != nil {
		s.Ready(ln.Addr())
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.GetCertificate},
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	}
}

package kubetest

import (
	"context"
	"encoding/pem"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func certPEMOf(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

const podReadySample = `spec:
  selector: {}
  next:
    statusTemplate: |
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
      {{ end }}
`

func TestPatchPodReady(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		delay     time.Duration
		wantErr   string
		wantDelay bool
	}{
		{name: "adds resources to container statuses only", in: podReadySample},
		{name: "adds a ready delay", in: podReadySample, delay: 1500 * time.Millisecond, wantDelay: true},
		{name: "unknown shape is an error", in: "spec: {}\n", wantErr: "anchor not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := patchPodReady(tt.in, tt.delay)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, 1, strings.Count(out, "resources: {{ .resources | toJson }}"))
			// The resources line belongs to the first (regular) container block.
			require.Less(t, strings.Index(out, "resources:"), strings.Index(out, "initContainerStatuses"))
			require.Equal(t, tt.wantDelay, strings.Contains(out, "durationMilliseconds: 1500"))
		})
	}
}

func TestStartValidatesOptions(t *testing.T) {
	_, err := Start(context.Background(), "/nonexistent", "", t.TempDir(), Options{Kwok: true})
	require.ErrorContains(t, err, "needs the kwok binary")
	_, err = Start(context.Background(), "/nonexistent", "", t.TempDir(), Options{Nodes: []NodeSpec{{Name: "n"}}})
	require.ErrorContains(t, err, "needs Options.Kwok")
	_, err = Start(context.Background(), "/nonexistent", "", t.TempDir(), Options{})
	require.ErrorContains(t, err, "start etcd")
}

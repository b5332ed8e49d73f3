package kubelog

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/klog/v2"
)

func TestRouteSendsKlogToZap(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	Route(zap.New(core))
	t.Cleanup(klog.ClearLogger)

	klog.InfoS("watch started", "resource", "pods")
	klog.ErrorS(errors.New("connection refused"), "failed to list", "resource", "nodes")
	klog.Flush()

	entries := logs.All()
	require.Len(t, entries, 2)
	require.Equal(t, "client-go", entries[0].LoggerName)
	require.Equal(t, "watch started", entries[0].Message)
	require.Equal(t, "pods", entries[0].ContextMap()["resource"])
	require.Equal(t, zapcore.ErrorLevel, entries[1].Level)
	require.Equal(t, "failed to list", entries[1].Message)
	require.Equal(t, "connection refused", entries[1].ContextMap()["error"])
}

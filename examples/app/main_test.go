package app

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMainStopsWhenAskedAndRefusesBadFlags(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errs bytes.Buffer
	require.Equal(t, 0, Main(ctx, []string{"--listen", "127.0.0.1:0"}, func(string) string { return "" }, &out, &errs), errs.String())

	out.Reset()
	errs.Reset()
	require.Equal(t, 2, Main(context.Background(), []string{"--listen"}, func(string) string { return "" }, &out, &errs))
	require.Contains(t, errs.String(), "qas-example-app")
	require.Contains(t, errs.String(), "listen")
}

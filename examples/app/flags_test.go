package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/internal/cli"
)

func TestListen(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantErr string
	}{
		{name: "default", want: "127.0.0.1:8081"},
		{name: "flag", args: []string{"--listen=127.0.0.1:9000"}, want: "127.0.0.1:9000"},
		{name: "environment", env: map[string]string{"QAS_APP_LISTEN": "127.0.0.1:9001"}, want: "127.0.0.1:9001"},
		{name: "the webhook's port wins", args: []string{"--listen=127.0.0.1:9000"}, env: map[string]string{"QAS_APP_PORT": "8081"}, want: "127.0.0.1:8081"},
		{name: "positional argument", args: []string{"serve", "--listen=127.0.0.1:9000"}, wantErr: `unexpected argument "serve" (qas-example-app takes flags only)`},
		{name: "unknown flag", args: []string{"--port=1"}, wantErr: "flag provided but not defined: -port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Listen(tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.True(t, cli.IsUsage(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := Listen([]string{"--version"}, func(string) string { return "" })
	require.ErrorIs(t, err, cli.ErrVersion)
}

package inject_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/internal/cli"
)

// TestOptionsConfig: Config is what the webhook injects for its flags (the defaults
// where a flag is absent), and refuses what Validate refuses.
func TestOptionsConfig(t *testing.T) {
	o := parseOptions(t, "--proxy-image=registry/qas-proxy:2", "--admin-port=9999",
		`--proxy-resources={"requests":{"cpu":"0.25"},"limits":{"memory":"1Gi"}}`, "--proxy-image-pull-secrets=a, b")
	cfg, err := o.Config()
	require.NoError(t, err)
	require.Equal(t, "registry/qas-proxy:2", cfg.Image)
	require.Equal(t, int32(9999), cfg.AdminPort)
	require.Equal(t, []string{"a", "b"}, cfg.ImagePullSecrets)
	require.Zero(t, cfg.Resources.Requests.Cpu().Cmp(resource.MustParse("250m")))
	require.Zero(t, cfg.Resources.Limits.Memory().Cmp(resource.MustParse("1Gi")))

	o = parseOptions(t)
	def, err := o.Config()
	require.NoError(t, err)
	require.Equal(t, inject.DefaultConfig(), def)

	o = parseOptions(t, `--proxy-resources={"requests":{"cpu":"lots"}}`)
	_, err = o.Config()
	require.ErrorContains(t, err, "invalid --proxy-resources")
	require.True(t, cli.IsUsage(err))
}

// parseOptions parses args as `qas-decider webhook` does, with no environment, and
// requires that they parse.
func parseOptions(t *testing.T, args ...string) inject.Options {
	t.Helper()
	var o inject.Options
	require.NoError(t, cli.Parse(o.FlagSet(), inject.EnvPrefix, args, func(string) string { return "" }))
	return o
}

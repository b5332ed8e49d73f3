package version

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	info := func(v string, ok bool) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			if !ok {
				return nil, false
			}
			return &debug.BuildInfo{Main: debug.Module{Path: "github.com/qas-dev/qas", Version: v}}, true
		}
	}
	for _, tc := range []struct {
		name, stamp string
		info        func() (*debug.BuildInfo, bool)
		want        string
	}{
		{"stamp wins", "v0.3.0", info("v0.2.0", true), "v0.3.0"},
		{"dev stamp falls back to the module", "dev", info("v0.2.0", true), "v0.2.0"},
		{"empty stamp falls back to the module", "", info("v0.0.0-20260101120000-abcdef012345+dirty", true), "v0.0.0-20260101120000-abcdef012345+dirty"},
		{"module without a version", "dev", info("(devel)", true), "dev"},
		{"module version empty", "dev", info("", true), "dev"},
		{"no build info", "dev", info("", false), "dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, resolve(tc.stamp, tc.info))
		})
	}
}

func TestStringAndLabels(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v1.2.3"
	require.Equal(t, "qas-proxy v1.2.3 ("+runtime.Version()+", "+runtime.GOOS+"/"+runtime.GOARCH+")", String("qas-proxy"))
	require.Equal(t, map[string]string{"version": "v1.2.3", "goversion": runtime.Version()}, Labels())
}

package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommandsBuildOnce: the binaries are built with the flags given, once, into one
// directory; a package that does not build is an error carrying go build's output,
// every time it is asked for.
func TestCommandsBuildOnce(t *testing.T) {
	c := &Commands{
		Packages: []string{"github.com/qas-dev/qas/examples/app/cmd/qas-example-app"},
		Flags:    []string{"-ldflags", "-X github.com/qas-dev/qas/internal/version.Version=v0.0.0-built"},
	}
	dir := c.Dir(t)
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "qas-example-app")
	out, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "qas-example-app v0.0.0-built ")
	require.NoError(t, os.Remove(bin))
	require.Equal(t, dir, c.Dir(t))
	require.NoFileExists(t, bin, "built a second time")

	bad := &Commands{Packages: []string{"github.com/qas-dev/qas/no/such/cmd"}}
	for range 2 {
		badDir, err := bad.build()
		t.Cleanup(func() { os.RemoveAll(badDir) })
		require.ErrorContains(t, err, "go build: ")
		require.ErrorContains(t, err, "no/such/cmd")
	}

	RemoveCommands()
	require.NoDirExists(t, dir, "the binaries go at the end of the tests")
}

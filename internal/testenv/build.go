package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// Commands are Go main packages a test runs as a user would, built once per test
// binary however many tests ask for them. Declare one as a package variable; the
// package's TestMain removes the binaries at the end (RemoveCommands, which
// kubetest.Main calls).
type Commands struct {
	// Packages are the main packages, by import path
	// ("github.com/qas-dev/qas/proxy/cmd/qas-proxy").
	Packages []string
	// Flags are further `go build` flags ("-ldflags", "-X ...", say).
	Flags []string

	once sync.Once
	dir  string
	err  error
}

// Dir builds the packages on its first call and returns the directory holding the
// binaries, each named as `go build` names it (the package's last element). A failed
// build fails every test that asks, with go build's output.
func (c *Commands) Dir(t testing.TB) string {
	t.Helper()
	dir, err := c.build()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func (c *Commands) build() (string, error) {
	c.once.Do(func() {
		c.dir, c.err = os.MkdirTemp("", "qas-bin-")
		if c.err != nil {
			return
		}
		built.mu.Lock()
		built.dirs = append(built.dirs, c.dir)
		built.mu.Unlock()
		args := append(append([]string{"build"}, c.Flags...), "-o", c.dir+"/")
		out, err := exec.Command("go", append(args, c.Packages...)...).CombinedOutput()
		if err != nil {
			c.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	return c.dir, c.err
}

// built are the directories Commands built into in this test binary.
var built struct {
	mu   sync.Mutex
	dirs []string
}

// RemoveCommands removes every directory Commands built into, for a TestMain to
// call once the tests are done.
func RemoveCommands() {
	built.mu.Lock()
	defer built.mu.Unlock()
	for _, d := range built.dirs {
		_ = os.RemoveAll(d)
	}
	built.dirs = nil
}

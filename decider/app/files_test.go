package app

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAtomicFiles: files appear only at commit, all of them; a write that fails
// leaves every file as it was and no temporary file behind.
func TestAtomicFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.md"), filepath.Join(dir, "b.json")
	require.NoError(t, os.WriteFile(b, []byte("old b"), 0o644))
	text := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}

	failed := newAtomicFiles()
	require.NoError(t, failed.write(a, text("new a")))
	err := failed.write(b, func(w io.Writer) error {
		_, _ = io.WriteString(w, "half of b")
		return errors.New("disk full")
	})
	require.EqualError(t, err, "writing "+b+": disk full")
	failed.discard()
	require.Equal(t, []string{"b.json"}, dirFiles(t, dir), "no a.md, no temporary file")
	got, err := os.ReadFile(b)
	require.NoError(t, err)
	require.Equal(t, "old b", string(got))

	ok := newAtomicFiles()
	require.NoError(t, ok.write(a, text("new a")))
	require.NoError(t, ok.write(b, text("new b")))
	require.NoFileExists(t, a, "nothing in place before commit")
	got, err = os.ReadFile(b)
	require.NoError(t, err)
	require.Equal(t, "old b", string(got))
	require.NoError(t, ok.commit())
	ok.discard() // after commit: nothing to remove
	require.Equal(t, []string{"a.md", "b.json"}, dirFiles(t, dir))
	for path, want := range map[string]string{a: "new a", b: "new b"} {
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, want, string(got))
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	}
}

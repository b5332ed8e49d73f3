package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// atomicFiles writes files under temporary names beside them and renames them
// into place together (commit), so that no reader, and no interrupted run, sees
// one half-written.
type atomicFiles struct {
	pending map[string]string // final path → temporary path
	order   []string
}

func newAtomicFiles() *atomicFiles { return &atomicFiles{pending: map[string]string{}} }

// write writes path's content with fill into a temporary file beside it; a
// path that is no regular file (/dev/stdout, a pipe) is written directly.
func (a *atomicFiles) write(path string, fill func(io.Writer) error) error {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if err := fill(f); err != nil {
			f.Close()
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return f.Close()
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	a.pending[path] = f.Name()
	a.order = append(a.order, path)
	if err := fill(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// commit renames every written file into place.
func (a *atomicFiles) commit() error {
	for _, path := range a.order {
		if err := os.Rename(a.pending[path], path); err != nil {
			return err
		}
		delete(a.pending, path)
	}
	return nil
}

// discard removes the temporary files not committed.
func (a *atomicFiles) discard() {
	for _, tmp := range a.pending {
		os.Remove(tmp)
	}
}

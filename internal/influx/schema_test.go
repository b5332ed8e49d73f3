package influx

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSchemaIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Schema {
		require.False(t, seen[m.Name], "duplicate measurement %s", m.Name)
		seen[m.Name] = true
		require.True(t, strings.HasPrefix(m.Name, "qas_"), m.Name)
		fields := map[string]bool{}
		for _, f := range m.Fields {
			require.False(t, fields[f.Name], "%s: duplicate field %s", m.Name, f.Name)
			fields[f.Name] = true
			require.NotEmpty(t, f.Unit, "%s.%s has no unit", m.Name, f.Name)
		}
		for _, tag := range m.Tags {
			require.False(t, fields[tag], "%s: %s is both tag and field", m.Name, tag)
			require.NotContains(t, []string{"request", "client", "path", "url"}, tag, "unbounded cardinality")
		}
	}
	_, ok := Lookup(Decision)
	require.True(t, ok)
}

// TestDocsMatchSchema keeps docs/schema.md generated from the declaration: run
// `go test ./internal/influx -run TestDocsMatchSchema -update` after changing it.
func TestDocsMatchSchema(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "docs", "schema.md")
	if os.Getenv("QAS_UPDATE_DOCS") == "1" {
		require.NoError(t, os.WriteFile(path, []byte(Markdown()), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, Markdown(), string(got), "docs/schema.md is out of date: QAS_UPDATE_DOCS=1 go test ./internal/influx -run TestDocsMatchSchema")
}

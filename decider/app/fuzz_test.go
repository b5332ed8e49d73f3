package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzModelCLI runs `model` with arbitrary flag values: it must not panic,
// must exit 0, 2 (bad input) or 3 (unstable), and on success print one JSON
// object with no NaN or infinity (which JSON cannot carry anyway).
func FuzzModelCLI(f *testing.F) {
	f.Add("95", "100ms", "12", "95", "120ms", "1", "json")
	f.Add("-1", "0s", "0", "100", "-5ms", "0", "yaml")
	f.Add("1e308", "1h", "10000000", "99.9999", "1ns", "1", "text")
	f.Add("NaN", "100", "x", "", "", "", "")
	f.Fuzz(func(t *testing.T, rate, st, servers, pct, target, conc, output string) {
		args := []string{"model", "--arrival-rate", rate, "--service-time", st, "--servers", servers}
		for _, kv := range [][2]string{{"--percentile", pct}, {"--target", target}, {"--concurrency", conc}, {"--output", output}} {
			if kv[1] != "" {
				args = append(args, kv[0], kv[1])
			}
		}
		// Keep each run fast: the O(c) model with c near its limit is benchmarked elsewhere.
		if len(servers) > 6 || len(conc) > 3 {
			return
		}
		var out, errb bytes.Buffer
		code := MainEnv(args, Env{Stdout: &out, Stderr: &errb})
		switch code {
		case 0:
			if output == "" || output == "json" {
				var obj map[string]any
				if err := json.Unmarshal(out.Bytes(), &obj); err != nil {
					t.Fatalf("bad JSON %q for %v: %v", out.String(), args, err)
				}
			}
		case 2, 3:
			if out.Len() != 0 || !strings.Contains(errb.String(), "qas-decider model") {
				t.Fatalf("exit %d with stdout %q stderr %q", code, out.String(), errb.String())
			}
		default:
			t.Fatalf("exit %d for %v: %s", code, args, errb.String())
		}
	})
}

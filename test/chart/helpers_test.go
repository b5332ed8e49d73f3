package chart

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// probeHelpers evaluates the chart's template helpers in Helm's own engine: it
// renders a chart holding the real _helpers.tpl and one ConfigMap whose data applies
// qas.durationNS to every string of durations and qas.quantity to every value of
// quantities, so that one `helm template` evaluates thousands of inputs. It returns
// the results in input order, and the helper qas.influxqlKeywords.
func probeHelpers(t *testing.T, h *helmCmd, durations []string, quantities []any) (ns, values []string, keywords string) {
	t.Helper()
	dir := t.TempDir()
	helpers, err := os.ReadFile(filepath.Join(chartDir(t), "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Chart.yaml":             "apiVersion: v2\nname: probe\nversion: 0.1.0\n",
		"templates/_helpers.tpl": string(helpers),
		"templates/probe.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: probe}
data:
  keywords: {{ include "qas.influxqlKeywords" . | quote }}
  {{- range $i, $in := .Values.durations }}
  d{{ $i }}: {{ include "qas.durationNS" $in | quote }}
  {{- end }}
  {{- range $i, $in := .Values.quantities }}
  q{{ $i }}: {{ include "qas.quantity" $in | quote }}
  {{- end }}
`,
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vals, err := json.Marshal(map[string]any{"durations": durations, "quantities": quantities})
	if err != nil {
		t.Fatal(err)
	}
	objs := h.render(t, "template", "probe", dir, "-f", valuesFile(t, string(vals))).objs
	if len(objs) != 1 {
		t.Fatalf("probe chart rendered %d objects", len(objs))
	}
	cm := convert[corev1.ConfigMap](t, objs[0])
	for i := range durations {
		ns = append(ns, cm.Data[fmt.Sprintf("d%d", i)])
	}
	for i := range quantities {
		values = append(values, cm.Data[fmt.Sprintf("q%d", i)])
	}
	return ns, values, cm.Data["keywords"]
}

// randomDuration builds a string of duration-like parts: numbers of up to 21 digits,
// sometimes with leading zeros or a fraction of up to 12 digits, each with a unit.
// Some match the schema's pattern, some are too fine or beyond Go's range.
func randomDuration(r *rand.Rand) string {
	units := []string{"h", "m", "s", "ms", "us", "µs", "μs", "ns"}
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		return b.String()
	}
	var b strings.Builder
	for range 1 + r.IntN(3) {
		n := 1 + r.IntN(3)
		if r.IntN(8) == 0 {
			n = 1 + r.IntN(21)
		}
		b.WriteString(digits(n))
		if r.IntN(2) == 0 {
			b.WriteString("." + digits(1+r.IntN(12)))
		}
		b.WriteString(units[r.IntN(len(units))])
	}
	return b.String()
}

// TestDurationHelperMatchesGo: for every duration the schema admits, qas.durationNS
// gives exactly the nanoseconds time.ParseDuration does (the binaries' reading), or an
// error where Go's range ends; for anything else it gives an error. So the chart's
// comparisons of durations (window against interval, ...) are the binaries'.
func TestDurationHelperMatchesGo(t *testing.T) {
	p := loadSchemaPatterns(t)
	inputs := []string{
		"15s", "10m", "0s", "0.5s", "1.5h", "1h30m", "90.5s", "0.25h", "500ms", "1.5µs", "2μs", "3us", "7ns",
		"0.000000001s", "1.00000000001h", "1.99999999999h", "1.9999999999m", "0.999999999s", "0.999999ms",
		"00000000000000000000001s", "9223372036854775807ns", "9223372036854775808ns", "2562047h47m16.854775807s",
		"2562047h47m16.854775808s", "2562047h", "2562048h", "2562047.788015215h", "2562047.788015216h",
		"99999999999999999999h", "1h1h1h", "153722867m", "153722868m",
		// Outside the schema's grammar: the helper refuses them too.
		"", "1", "s", ".5s", "5.s", "1.5ns", "1.0000000001s", "1.999999999999h", "-1s", "+1s", "1d", "1 s", "1S", "1.s",
	}
	r := rand.New(rand.NewPCG(6, 1))
	for range 3000 {
		inputs = append(inputs, randomDuration(r))
	}
	got, _, _ := probeHelpers(t, newHelm(t), inputs, nil)
	matched := 0
	for i, s := range inputs {
		if !p.goDuration.MatchString(s) {
			if !strings.HasPrefix(got[i], "error: not a duration") {
				t.Errorf("qas.durationNS(%q) = %q, but the schema refuses it", s, got[i])
			}
			continue
		}
		matched++
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			if !strings.HasPrefix(got[i], "error: out of range") {
				t.Errorf("qas.durationNS(%q) = %q; Go: %v", s, got[i], err)
			}
		case got[i] != strconv.FormatInt(int64(d), 10):
			t.Errorf("qas.durationNS(%q) = %q, Go reads %d ns", s, got[i], int64(d))
		}
	}
	if matched < len(inputs)/3 {
		t.Fatalf("only %d of %d inputs match the schema's pattern: the generator tests too little", matched, len(inputs))
	}
}

// randomQuantity builds a quantity the schema admits whose exact value is a multiple
// of 10⁻⁹ (Kubernetes rounds finer ones up), and returns it with that exact value.
func randomQuantity(r *rand.Rand) (string, *big.Rat) {
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		return b.String()
	}
	intPart := digits(r.IntN(7))
	decimal := map[string]int{"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
	binary := map[string]int{"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
	var suffix string
	exp10, exp1024, maxFrac := 0, 0, 9
	switch r.IntN(3) {
	case 0:
		keys := []string{"n", "u", "m", "", "k", "M", "G", "T", "P", "E"}
		suffix = keys[r.IntN(len(keys))]
		exp10 = decimal[suffix]
		maxFrac = min(9, exp10+9)
	case 1:
		keys := []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
		suffix = keys[r.IntN(len(keys))]
		exp1024 = binary[suffix]
	default:
		exp10 = -9 + r.IntN(40)
		suffix = []string{"e", "E"}[r.IntN(2)]
		if exp10 >= 0 && r.IntN(3) == 0 {
			suffix += "+"
		}
		suffix += strconv.Itoa(exp10)
		maxFrac = min(9, exp10+9)
	}
	number := intPart
	if maxFrac > 0 && (intPart == "" || r.IntN(2) == 0) {
		number += "." + digits(1+r.IntN(maxFrac))
	}
	if number == "" {
		number = "0"
	}
	if r.IntN(10) == 0 {
		number = "+" + number
	}
	v, ok := new(big.Rat).SetString(strings.TrimPrefix(number, "+"))
	if !ok {
		panic(number)
	}
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp10))), nil)
	if exp10 >= 0 {
		v.Mul(v, new(big.Rat).SetInt(scale))
	} else {
		v.Quo(v, new(big.Rat).SetInt(scale))
	}
	v.Mul(v, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(10*exp1024))))
	return number + suffix, v
}

func abs(n int) int { return max(n, -n) }

// TestQuantityHelperIsExact: for every quantity the schema admits, qas.quantity gives
// the float64 nearest its exact value (as Kubernetes parses it), so comparing two
// quantities in the chart (a request against its limit) orders them as the apiserver
// does, unless they agree in about their first 16 digits.
func TestQuantityHelperIsExact(t *testing.T) {
	p := loadSchemaPatterns(t)
	type input struct {
		value any
		exact *big.Rat
	}
	rat := func(s string) *big.Rat { v, _ := new(big.Rat).SetString(s); return v }
	inputs := []input{
		{"100m", rat("0.1")}, {"0.1", rat("0.1")}, {"1Gi", rat("1073741824")}, {"1073741824", rat("1073741824")},
		{"0.1Gi", rat("107374182.4")}, {"1.5Ki", rat("1536")}, {"1G", rat("1000000000")}, {"1e3", rat("1000")},
		{"1E3", rat("1000")}, {"1E", rat("1000000000000000000")}, {"7Ei", new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(7), 60))},
		{"1.", rat("1")}, {".5", rat("0.5")}, {"+2", rat("2")}, {"0", rat("0")}, {"1n", rat("1/1000000000")},
		{"999999.999999999E", rat("999999999999999000000000")}, {"1e-9", rat("1/1000000000")}, {"1e+2", rat("100")},
		// Numbers in the values, as YAML gives them.
		{0.25, rat("0.25")}, {2, rat("2")}, {1073741824, rat("1073741824")}, {1e21, rat("1000000000000000000000")}, {0, rat("0")},
	}
	r := rand.New(rand.NewPCG(6, 2))
	// Kubernetes saturates a binary-suffixed value with a fraction at 2⁶³-1 (8Ei);
	// the generator stays below.
	limit := new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), 63))
	for len(inputs) < 3000 {
		if s, v := randomQuantity(r); v.Cmp(limit) < 0 {
			inputs = append(inputs, input{s, v})
		}
	}
	values := make([]any, len(inputs))
	for i, in := range inputs {
		values[i] = in.value
		s, ok := in.value.(string)
		if !ok {
			continue
		}
		if !p.quantity.MatchString(s) {
			t.Fatalf("input %q: the schema refuses it", s)
		}
		// The exact value is what Kubernetes makes of the string.
		q, err := resource.ParseQuantity(s)
		if err != nil {
			t.Fatalf("input %q: %v", s, err)
		}
		if k8s := rat(q.AsDec().String()); k8s.Cmp(in.exact) != 0 {
			t.Fatalf("input %q: Kubernetes reads %s, the test %s", s, k8s.FloatString(9), in.exact.FloatString(9))
		}
	}
	_, got, _ := probeHelpers(t, newHelm(t), nil, values)
	for i, in := range inputs {
		want, _ := in.exact.Float64()
		f, err := strconv.ParseFloat(got[i], 64)
		if err != nil || f != want || math.IsInf(f, 0) {
			t.Errorf("qas.quantity(%v) = %q, want %v (nearest to %s)", in.value, got[i], want, in.exact.FloatString(9))
		}
	}
}

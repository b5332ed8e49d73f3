package chart

import (
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/qas-dev/qas/internal/influx"
)

// schemaPatterns are the patterns of values.schema.json that stand for a parser of a
// binary, Kubernetes or Go: a value that matches must be one the parser accepts.
type schemaPatterns struct {
	goDuration, positive, quantity, httpURL, dnsSubdomain *regexp.Regexp
	namespace, leaseID, secretName, secretKey, database   *regexp.Regexp
}

func loadSchemaPatterns(t testing.TB) schemaPatterns {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	pattern := func(path string) *regexp.Regexp {
		t.Helper()
		var node any = schema
		for _, key := range strings.Split(path, "/") {
			m, ok := node.(map[string]any)
			if !ok {
				t.Fatalf("values.schema.json: no %s", path)
			}
			node = m[key]
		}
		p, ok := node.(map[string]any)["pattern"].(string)
		if !ok {
			t.Fatalf("values.schema.json: %s has no pattern", path)
		}
		return regexp.MustCompile(p)
	}
	return schemaPatterns{
		goDuration:   pattern("$defs/goDuration"),
		positive:     pattern("$defs/positiveGoDuration"),
		quantity:     pattern("$defs/quantity"),
		httpURL:      pattern("$defs/httpURL"),
		dnsSubdomain: pattern("$defs/dnsSubdomain"),
		namespace:    pattern("properties/collector/properties/namespace"),
		leaseID:      pattern("properties/decider/properties/leaderElection/properties/id"),
		secretName:   pattern("properties/influxdb/properties/external/properties/tokenSecret/properties/name"),
		secretKey:    pattern("properties/influxdb/properties/external/properties/tokenSecret/properties/key"),
		database:     pattern("properties/influxdb/properties/internal/properties/database"),
	}
}

var (
	reDurationPart = regexp.MustCompile(`([0-9]+)(?:\.([0-9]+))?(ns|us|µs|μs|ms|s|m|h)`)
	durationUnits  = map[string]int64{"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}
)

// exactDurationNS is the exact value in nanoseconds of a duration the schema's
// pattern admits (so no fraction is finer than a nanosecond), however large.
func exactDurationNS(t testing.TB, s string) *big.Int {
	t.Helper()
	total := new(big.Rat)
	for _, m := range reDurationPart.FindAllStringSubmatch(s, -1) {
		v, _ := new(big.Rat).SetString(m[1])
		if m[2] != "" {
			f, _ := new(big.Rat).SetString("0." + m[2])
			v.Add(v, f)
		}
		total.Add(total, v.Mul(v, new(big.Rat).SetInt64(durationUnits[m[3]])))
	}
	if !total.IsInt() {
		t.Fatalf("%q: the schema admits a fraction of a nanosecond (%s ns)", s, total.FloatString(3))
	}
	return total.Num()
}

// checkSchemaPatterns: s matches a pattern only if the parser it stands for accepts s.
func checkSchemaPatterns(t *testing.T, p schemaPatterns, s string) {
	if p.goDuration.MatchString(s) {
		exact := exactDurationNS(t, s)
		d, err := time.ParseDuration(s)
		switch {
		case exact.Cmp(big.NewInt(math.MaxInt64)) > 0:
			if err == nil {
				t.Errorf("duration %q is %s ns, beyond Go's range, yet time.ParseDuration gives %v", s, exact, d)
			}
		case err != nil:
			t.Errorf("the schema admits duration %q, which Go refuses: %v", s, err)
		case int64(d) != exact.Int64():
			t.Errorf("duration %q: Go reads %d ns, exactly it is %s", s, int64(d), exact)
		}
		if positive := exact.Sign() > 0; p.positive.MatchString(s) != positive {
			t.Errorf("duration %q (%s ns): positiveGoDuration admits it: %t", s, exact, !positive)
		}
	}
	if p.quantity.MatchString(s) && len(s) <= 64 {
		q, err := resource.ParseQuantity(s)
		if err != nil || q.Sign() < 0 {
			t.Errorf("the schema admits quantity %q, which Kubernetes refuses or finds negative: %v %v", s, q.String(), err)
		}
	}
	if p.httpURL.MatchString(s) {
		if err := (influx.Options{URL: s, Bucket: "qas/autogen"}).Validate(); err != nil {
			t.Errorf("the schema admits InfluxDB URL %q, which the binaries refuse: %v", s, err)
		}
	}
	subdomain := len(validation.IsDNS1123Subdomain(s)) == 0
	for name, re := range map[string]*regexp.Regexp{"dnsSubdomain": p.dnsSubdomain, "leaderElection.id": p.leaseID, "tokenSecret.name": p.secretName} {
		if s != "" && (re.MatchString(s) && len(s) <= 253) != subdomain {
			t.Errorf("%s admits %q: %t; a DNS subdomain: %t", name, s, !subdomain, subdomain)
		}
	}
	if s != "" && (p.namespace.MatchString(s) && len(s) <= 63) != (len(validation.IsDNS1123Label(s)) == 0) {
		t.Errorf("collector.namespace admits %q: %t, against a namespace name's rule", s, p.namespace.MatchString(s))
	}
	if p.secretKey.MatchString(s) && len(s) <= 253 && len(validation.IsConfigMapKey(s)) > 0 {
		t.Errorf("tokenSecret.key admits %q, which is not a Secret key: %v", s, validation.IsConfigMapKey(s))
	}
}

// FuzzSchemaPatterns checks the schema's patterns against the parsers they stand for:
// Go's durations, Kubernetes quantities and names, and the binaries' InfluxDB URL.
func FuzzSchemaPatterns(f *testing.F) {
	p := loadSchemaPatterns(f)
	for _, s := range []string{
		"15s", "0s", "1m30s", "1.5h", "0.000000001s", "1.5ns", "2562047h47m16.854775807s", "2562047h47m16.854775808s",
		"99999999999999999999h", "1.99999999999h", "1.5µs", "2μs", "00001s", "1h1h", ".5s", "5.s",
		"100m", "0.5", "128Mi", "1G", "1e3", "1E", "1e+05", "+1", "1.", ".5", "-1", "1K", "1e", "1e999", "1.5Ki",
		"http://influx:8086", "https://user:pw@influx.example.com:8086/prefix?x=1#f", "http:///x",
		"http://a b", "http://h:port", "http://h/%zz", "http://h/%41", "http://h:",
		"qas", "my.lease", "a..b", "-a", "a-", "Bad_Name", "api_token", "api token", "x.y-z_1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkSchemaPatterns(t, p, s) })
}

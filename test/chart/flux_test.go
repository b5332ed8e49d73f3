package chart

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/qas-dev/qas/internal/influx"
)

// fluxRefs is what a Flux query reads from the schema: the measurements it filters on,
// the fields, the tags it compares, and the columns it keeps, groups, pivots or makes
// distinct. The dashboards write their queries in one style (from |> range |>
// filter(fn: (r) => r._measurement == "m" and r.tag == "v") |> filter(r._field == ...)),
// which this small parser understands; anything it cannot place is an error.
type fluxRefs struct {
	measurements []string
	fields       []string
	tags         []string // r.tag compared or used in map/filter
	columns      []string // keep/group/distinct/pivot/sort columns
}

var (
	reFrom        = regexp.MustCompile(`from\(bucket:\s*"([^"]*)"\)`)
	reMeasurement = regexp.MustCompile(`r(?:\._measurement|\["_measurement"\])\s*==\s*"([^"]+)"`)
	reField       = regexp.MustCompile(`r(?:\._field|\["_field"\])\s*==\s*"([^"]+)"`)
	reRecordRef   = regexp.MustCompile(`\br(?:\.([A-Za-z_][A-Za-z0-9_]*)|\["([^"]+)"\])`)
	reColumnList  = regexp.MustCompile(`\b(?:columns|rowKey|columnKey):\s*\[([^\]]*)\]`)
	reColumn      = regexp.MustCompile(`\bcolumn:\s*"([^"]+)"`)
	reValueColumn = regexp.MustCompile(`\bvalueColumn:\s*"([^"]+)"`)
	reQuoted      = regexp.MustCompile(`"([^"]*)"`)
)

func parseFlux(q string) (fluxRefs, error) {
	var r fluxRefs
	if !reFrom.MatchString(q) {
		return r, fmt.Errorf("no from(bucket: ...)")
	}
	if !strings.Contains(q, "range(") {
		return r, fmt.Errorf("no range(): unbounded query")
	}
	for _, m := range reMeasurement.FindAllStringSubmatch(q, -1) {
		r.measurements = appendUnique(r.measurements, m[1])
	}
	for _, m := range reField.FindAllStringSubmatch(q, -1) {
		r.fields = appendUnique(r.fields, m[1])
	}
	for _, m := range reRecordRef.FindAllStringSubmatch(q, -1) {
		name := m[1] + m[2]
		if !strings.HasPrefix(name, "_") {
			r.tags = appendUnique(r.tags, name)
		}
	}
	for _, m := range reColumnList.FindAllStringSubmatch(q, -1) {
		for _, c := range reQuoted.FindAllStringSubmatch(m[1], -1) {
			r.columns = appendUnique(r.columns, c[1])
		}
	}
	for _, re := range []*regexp.Regexp{reColumn, reValueColumn} {
		for _, m := range re.FindAllStringSubmatch(q, -1) {
			r.columns = appendUnique(r.columns, m[1])
		}
	}
	return r, nil
}

func appendUnique(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// builtinColumns are the columns every Flux table has.
var builtinColumns = []string{"_time", "_value", "_field", "_measurement", "_start", "_stop"}

// checkAgainstSchema returns the problems of a query against internal/influx.Schema:
// exactly one measurement, every field and tag of that measurement, every column a
// tag, a built-in column, or (after pivot) a field.
func checkAgainstSchema(q string) []string {
	refs, err := parseFlux(q)
	if err != nil {
		return []string{err.Error()}
	}
	if len(refs.measurements) != 1 {
		return []string{fmt.Sprintf("filters on %d measurements %v, want exactly one", len(refs.measurements), refs.measurements)}
	}
	m, ok := influx.Lookup(refs.measurements[0])
	if !ok {
		return []string{fmt.Sprintf("measurement %q is not in internal/influx.Schema", refs.measurements[0])}
	}
	fields := make([]string, len(m.Fields))
	for i, f := range m.Fields {
		fields[i] = f.Name
	}
	var problems []string
	if len(refs.fields) == 0 && !strings.Contains(q, "distinct(") {
		problems = append(problems, "no r._field filter: the query reads every field")
	}
	for _, f := range refs.fields {
		if !slices.Contains(fields, f) {
			problems = append(problems, fmt.Sprintf("field %q is not a field of %s %v", f, m.Name, fields))
		}
	}
	for _, tg := range refs.tags {
		if !slices.Contains(m.Tags, tg) {
			problems = append(problems, fmt.Sprintf("tag %q is not a tag of %s %v", tg, m.Name, m.Tags))
		}
	}
	pivoted := strings.Contains(q, "pivot(")
	for _, c := range refs.columns {
		switch {
		case slices.Contains(builtinColumns, c), slices.Contains(m.Tags, c):
		case pivoted && slices.Contains(refs.fields, c):
		default:
			problems = append(problems, fmt.Sprintf("column %q is neither a tag of %s %v nor a built-in or pivoted field column", c, m.Name, m.Tags))
		}
	}
	return problems
}

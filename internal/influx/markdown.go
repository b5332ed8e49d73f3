package influx

import (
	"fmt"
	"strings"
)

// Markdown renders the schema as docs/schema.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString(`# InfluxDB schema

Generated from ` + "`internal/influx/schema.go`" + ` (a test keeps this file in step: ` +
		"`QAS_UPDATE_DOCS=1 go test ./internal/influx -run TestDocsMatchSchema`" + `).

Database ` + "`qas`" + ` (bucket ` + "`qas/autogen`" + ` on InfluxDB 1.8 through the v2 API; the writers create the database
when it is missing). Tags are few and bounded:
namespace, workload, pod, node, queueautoscaler and action. Pods come and go, so ` + "`qas_pod`" + ` grows with
pod churn; keep its retention short.

Retention guidance: ` + "`qas_pod`" + ` and ` + "`qas_node`" + ` 7 days (the decider reads minutes; dashboards a few
days), ` + "`qas_workload`" + ` 30 days, ` + "`qas_decision`" + ` 90 days (for audits of why the autoscaler acted), e.g.
` + "`CREATE RETENTION POLICY week ON qas DURATION 7d REPLICATION 1`" + `.

CPU numbers are **absolute**: cores used, as metrics.k8s.io reports them, not a share of the pod's
request. A pod using 0.9 cores of a 1-core request on a node whose 16 cores are 95 % used is a hot-node
problem that a relative measure hides (seed 001).
`)
	for _, m := range Schema {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\nTags: %s.\n\n| field | unit | meaning |\n|---|---|---|\n", m.Name, m.Help, "`"+strings.Join(m.Tags, "`, `")+"`")
		for _, f := range m.Fields {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.Name, f.Unit, f.Help)
		}
	}
	return b.String()
}

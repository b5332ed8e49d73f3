package pipeline

import "github.com/influxdata/influxdb-client-go/v2/api/write"

type recording struct{ points []*write.Point }

func (r *recording) Write(p ...*write.Point) { r.points = append(r.points, p...) }

type multi []Sink

func (m multi) Write(p ...*write.Point) {
	for _, s := range m {
		s.Write(p...)
	}
}

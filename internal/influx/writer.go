package influx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api"
	ihttp "github.com/influxdata/influxdb-client-go/v2/api/http"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	lp "github.com/influxdata/line-protocol"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
)

// WriterConfig configures a Writer.
type WriterConfig struct {
	URL, Token, Org, Bucket string
	// BufferPoints bounds the points held while InfluxDB is slow or down; beyond it the
	// oldest points are dropped, counted and logged. A point is held as its line
	// protocol, about 610 bytes for a qas_pod point, the largest (BenchmarkWriterBufferBytesPerPoint).
	BufferPoints int
	// BatchPoints is the most points sent in one request.
	BatchPoints int
	// FlushInterval is how often buffered points are sent.
	FlushInterval time.Duration
	// MinBackoff and MaxBackoff bound the exponential wait between failed attempts.
	MinBackoff, MaxBackoff time.Duration
	// ProbeInterval is how often, while InfluxDB does not answer, the writer asks its
	// /ping whether it is back, so that it retries at once rather than after the rest
	// of its backoff (default 1s).
	ProbeInterval time.Duration
	// Timeout bounds one write request.
	Timeout time.Duration
	// LogEvery rate-limits the writer's repeated warnings (buffer full, points dropped):
	// the first is logged at once, the rest at most once per LogEvery with how many
	// there were (default 10s).
	LogEvery time.Duration
	// MetricsPrefix starts the writer's metric names (default "qas_collector", so
	// qas_collector_points_written_total); the decider uses "qas_decider".
	MetricsPrefix string
	// Now is the clock of the rate-limited logs (default time.Now).
	Now func() time.Time
}

func (c *WriterConfig) defaults() {
	if c.BufferPoints == 0 {
		c.BufferPoints = 100_000
	}
	if c.BatchPoints == 0 {
		c.BatchPoints = 5000
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = time.Second
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.LogEvery == 0 {
		c.LogEvery = 10 * time.Second
	}
	if c.MetricsPrefix == "" {
		c.MetricsPrefix = "qas_collector"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Reasons a point is dropped, the label of <prefix>_points_dropped_total.
const (
	// DropBufferFull: the buffer was full and the point was the oldest.
	DropBufferFull = "buffer_full"
	// DropInvalid: the point cannot be encoded (a NaN or infinite field, no fields).
	DropInvalid = "invalid"
	// DropRefused: InfluxDB refused the point itself (a field type conflict, a value it
	// cannot parse) or the request (no such database, not authorised).
	DropRefused = "refused"
	// DropClosed: the writer was closed before the point could be written.
	DropClosed = "closed"
)

// Writer sends points to InfluxDB in batches without blocking its callers. Points wait
// in a bounded buffer; a failed batch stays at the head of the buffer and is retried
// with exponential backoff, so nothing within the bound is lost while InfluxDB is down.
// While InfluxDB does not answer, the writer probes /ping every ProbeInterval and
// retries as soon as it answers.
//
// A point is encoded when it is written: one that cannot be encoded (a NaN or infinite
// field) is dropped and counted there and never reaches a batch. A batch InfluxDB
// refuses as bad data (400, 413) is split in halves until the points it refuses are
// alone; those are dropped and counted, the others written, so one bad point never
// blocks the points around it. (InfluxDB 1.x writes the good points of a partly refused
// batch; writing them again overwrites them with the same values.)
//
// It keeps its own buffer rather than the client's non-blocking WriteAPI because every
// point dropped past the bound must be counted: the client's retry buffer discards old
// batches with only a log line.
//
// On InfluxDB 1.x a bucket is "database/retention-policy"; when the database does not
// exist, the writer creates it (CREATE DATABASE, a no-op when it exists; the token's
// user must then be an admin) and retries the batch.
type Writer struct {
	cfg    WriterConfig
	client influxdb2.Client
	api    api.WriteAPIBlocking
	http   *http.Client // InfluxDB 1.x's /ping and /query, to create the database
	log    *zap.Logger
	// Creating the database (flush only, which runs on the loop goroutine or, after it
	// stopped, in Close): when it was created, and whether InfluxDB refused to create it
	// (no admin, not 1.x), until a write succeeds.
	created   time.Time
	dbRefused bool

	mu      sync.Mutex
	buf     *lineBuffer
	enc     *lp.Encoder   // guarded by mu
	encBuf  *bytes.Buffer // enc's output
	warns   map[string]*limitedWarning
	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}

	written, retried, failed prometheus.Counter
	dropped                  *prometheus.CounterVec
	buffered                 prometheus.GaugeFunc
}

// NewWriter starts a writer; call Close to flush and stop it. reg may be nil.
func NewWriter(cfg WriterConfig, reg prometheus.Registerer, log *zap.Logger) (*Writer, error) {
	if cfg.URL == "" || cfg.Bucket == "" {
		return nil, errors.New("influx: URL and bucket are required")
	}
	cfg.defaults()
	if cfg.BufferPoints < cfg.BatchPoints {
		return nil, fmt.Errorf("influx: buffer (%d points) is smaller than a batch (%d)", cfg.BufferPoints, cfg.BatchPoints)
	}
	opts := influxdb2.DefaultOptions().SetHTTPRequestTimeout(uint(cfg.Timeout / time.Second))
	client := influxdb2.NewClientWithOptions(cfg.URL, cfg.Token, opts)
	encBuf := new(bytes.Buffer)
	enc := lp.NewEncoder(encBuf)
	enc.FailOnFieldErr(true)
	enc.SetFieldTypeSupport(lp.UintSupport)
	enc.SetPrecision(time.Nanosecond)
	w := &Writer{
		cfg: cfg, client: client, api: client.WriteAPIBlocking(cfg.Org, cfg.Bucket), log: log,
		http: &http.Client{Timeout: cfg.Timeout},
		buf:  newLineBuffer(cfg.BufferPoints), enc: enc, encBuf: encBuf, warns: map[string]*limitedWarning{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: cfg.MetricsPrefix + "_points_written_total", Help: "Points InfluxDB accepted."}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{Name: cfg.MetricsPrefix + "_points_retried_total", Help: "Points in batches that failed and were kept for another attempt."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: cfg.MetricsPrefix + "_points_dropped_total",
			Help: "Points discarded, by reason: buffer_full, invalid (cannot be encoded), refused (by InfluxDB), closed (unwritten at shutdown)."}, []string{"reason"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: cfg.MetricsPrefix + "_write_failures_total", Help: "Failed write requests."}),
	}
	for _, r := range []string{DropBufferFull, DropInvalid, DropRefused, DropClosed} {
		w.dropped.WithLabelValues(r) // every reason is exported from the start, at 0
	}
	w.buffered = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: cfg.MetricsPrefix + "_points_buffered", Help: "Points waiting to be written."},
		func() float64 { return float64(w.Buffered()) })
	if reg != nil {
		for _, c := range []prometheus.Collector{w.written, w.retried, w.dropped, w.failed, w.buffered} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	go w.loop()
	return w, nil
}

// Write queues points; it never blocks on InfluxDB. A point that cannot be encoded is
// dropped, counted and logged (naming the point and the field). When the buffer is
// full the oldest points make room, and the loss is counted and logged.
func (w *Writer) Write(points ...*write.Point) {
	var invalid, evicted int
	var firstErr error
	w.mu.Lock()
	for _, p := range points {
		line, err := w.encode(p)
		if err != nil {
			invalid++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if w.buf.push(line) {
			evicted++
		}
	}
	full := w.buf.len() >= w.cfg.BatchPoints
	w.mu.Unlock()
	if invalid > 0 {
		w.drop(DropInvalid, invalid, "influx: dropped points that cannot be encoded", zap.Error(firstErr))
	}
	if evicted > 0 {
		w.drop(DropBufferFull, evicted, "influx buffer full: dropped the oldest points", zap.Int("buffer", w.cfg.BufferPoints))
	}
	if full {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// encode returns p as one line of line protocol (without its newline), or an error
// that names the point and the field at fault. The caller holds mu.
func (w *Writer) encode(p *write.Point) (string, error) {
	for _, f := range p.FieldList() {
		if v, ok := f.Value.(float64); ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
			return "", fmt.Errorf("%s %v: field %s is %v, want a finite number", p.Name(), tagString(p), f.Key, v)
		}
	}
	w.encBuf.Reset()
	if _, err := w.enc.Encode(p); err != nil {
		return "", fmt.Errorf("%s %v: %w", p.Name(), tagString(p), err)
	}
	return strings.TrimSuffix(w.encBuf.String(), "\n"), nil
}

func tagString(p *write.Point) string {
	var sb strings.Builder
	for i, t := range p.TagList() {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(t.Key + "=" + t.Value)
	}
	return sb.String()
}

// drop counts n points dropped for reason and logs it, rate-limited per reason.
func (w *Writer) drop(reason string, n int, msg string, fields ...zap.Field) {
	w.dropped.WithLabelValues(reason).Add(float64(n))
	w.mu.Lock()
	lw := w.warns[reason]
	if lw == nil {
		lw = &limitedWarning{}
		w.warns[reason] = lw
	}
	total, ok := lw.note(w.cfg.Now(), w.cfg.LogEvery, n)
	w.mu.Unlock()
	if ok {
		w.log.Warn(msg, append(fields, zap.Int("dropped", total))...)
	}
}

// limitedWarning lets a repeated warning through at most once per interval, with the
// count of what happened since the last one it let through.
type limitedWarning struct {
	last    time.Time
	pending int
}

// note records n more events at now; it reports whether to log, and how many events
// the log line covers.
func (l *limitedWarning) note(now time.Time, every time.Duration, n int) (int, bool) {
	l.pending += n
	if !l.last.IsZero() && now.Sub(l.last) < every {
		return 0, false
	}
	total := l.pending
	l.last, l.pending = now, 0
	return total, true
}

// Buffered returns the points waiting to be written.
func (w *Writer) Buffered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.len()
}

// Counts returns the points written, retried and dropped (for every reason) so far.
func (w *Writer) Counts() (written, retried, dropped float64) {
	for _, r := range []string{DropBufferFull, DropInvalid, DropRefused, DropClosed} {
		dropped += counterValue(w.dropped.WithLabelValues(r))
	}
	return counterValue(w.written), counterValue(w.retried), dropped
}

// Dropped returns the points dropped for reason so far.
func (w *Writer) Dropped(reason string) float64 {
	return counterValue(w.dropped.WithLabelValues(reason))
}

func (w *Writer) loop() {
	defer close(w.stopped)
	ticker := time.NewTicker(w.cfg.FlushInterval)
	defer ticker.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-ticker.C:
		case <-w.wake:
		}
		backoff := time.Duration(0)
		for {
			err := w.flush(context.Background())
			if err == nil {
				break
			}
			backoff = min(max(2*backoff, w.cfg.MinBackoff), w.cfg.MaxBackoff)
			w.log.Warn("influx write failed; retrying", zap.Error(err), zap.Duration("backoff", backoff), zap.Int("buffered", w.Buffered()))
			if !w.await(backoff, unreachable(err)) {
				return
			}
		}
	}
}

// await waits backoff before the next attempt, or until Close. When InfluxDB did not
// answer (down, restarting, unreachable), it asks /ping every ProbeInterval meanwhile
// and ends the wait as soon as InfluxDB answers, so that a recovery costs at most one
// ProbeInterval rather than up to MaxBackoff (while the buffer fills). When InfluxDB
// answered with an error (overloaded), the whole backoff is kept. It reports false
// when the writer is stopping.
func (w *Writer) await(backoff time.Duration, probe bool) bool {
	deadline := time.NewTimer(backoff)
	defer deadline.Stop()
	var tick <-chan time.Time
	if probe && w.cfg.ProbeInterval < backoff {
		t := time.NewTicker(w.cfg.ProbeInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-w.stop:
			return false
		case <-deadline.C:
			return true
		case <-tick:
			if w.answers() {
				w.log.Info("InfluxDB answers again; retrying now", zap.Int("buffered", w.Buffered()))
				return true
			}
		}
	}
}

// answers reports whether InfluxDB's /ping answers within ProbeInterval.
func (w *Writer) answers() bool {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ProbeInterval)
	defer cancel()
	_, err := w.serverVersion(ctx)
	return err == nil
}

// flush sends the buffer in batches until it is empty or a batch fails.
func (w *Writer) flush(ctx context.Context) error {
	for {
		w.mu.Lock()
		batch, first := w.buf.peek(w.cfg.BatchPoints)
		w.mu.Unlock()
		if len(batch) == 0 {
			return nil
		}
		if err := w.send(ctx, batch, first); err != nil {
			return err
		}
	}
}

// send writes batch, whose first line has sequence number first, and removes what it
// wrote or dropped from the buffer. It returns an error only when the batch (or the
// part of it not yet written) is to be retried.
func (w *Writer) send(ctx context.Context, batch []string, first uint64) error {
	n := len(batch)
	wctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	err := w.api.WriteRecord(wctx, batch...)
	cancel()
	if err == nil {
		w.remove(first, n)
		w.written.Add(float64(n))
		w.dbRefused = false
		return nil
	}
	w.failed.Inc()
	if missingDatabase(err) && !w.dbRefused {
		// InfluxDB 1.x without the bucket's database: create it, and keep the
		// batch for another attempt (unless InfluxDB refuses to create it).
		if cerr := w.ensureDatabase(ctx); cerr != nil {
			w.retried.Add(float64(n))
			return cerr
		}
		if !w.dbRefused {
			w.retried.Add(float64(n))
			return fmt.Errorf("%w: %w", errDatabaseCreated, err)
		}
	}
	switch {
	case badData(err) && n > 1:
		// Some point of the batch is bad: find it by halves, writing the rest.
		if err := w.send(ctx, batch[:n/2], first); err != nil {
			return err
		}
		return w.send(ctx, batch[n/2:], first+uint64(n/2))
	case permanent(err):
		// A point (or, for a refused request, a batch) InfluxDB will never accept:
		// drop it, counted, instead of blocking everything behind it.
		w.remove(first, n)
		w.drop(DropRefused, n, "influx refused points; dropped", zap.Error(err), zap.String("first", truncate(batch[0], 200)))
		return nil
	}
	w.retried.Add(float64(n))
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// remove removes the n lines from sequence number first on (those of them that Write
// has not evicted already).
func (w *Writer) remove(first uint64, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.removeBefore(first + uint64(n))
}

// errDatabaseCreated: the batch failed because the database did not exist; it exists
// now (a new database can refuse writes for a moment), so the batch waits for another
// attempt.
var errDatabaseCreated = errors.New("the database was just created")

// createGrace is how long after creating the database a "database not found" counts as
// InfluxDB catching up rather than the database having gone again.
const createGrace = time.Minute

// ensureDatabase creates the bucket's database after a write found it missing, unless
// it created it within createGrace. When InfluxDB refuses (no admin, not 1.x) it logs
// what to do and sets dbRefused: until a write succeeds, such batches are dropped like
// any batch InfluxDB refuses. It returns an error only when InfluxDB did not answer.
func (w *Writer) ensureDatabase(ctx context.Context) error {
	if !w.created.IsZero() && time.Since(w.created) < createGrace {
		return nil
	}
	version, err := w.createDatabase(ctx)
	switch {
	case err == nil:
		w.created = time.Now()
		w.log.Info("created the InfluxDB database", zap.String("database", v1Database(w.cfg.Bucket)), zap.String("version", version))
		return nil
	case refused(err):
		w.dbRefused = true
		w.log.Error("the InfluxDB database does not exist and cannot be created: create it, or give the token of an admin user",
			zap.String("database", v1Database(w.cfg.Bucket)), zap.String("version", version), zap.Error(err))
		return nil
	default:
		return fmt.Errorf("create the database: %w", err)
	}
}

// Close flushes what it can within ctx, then stops. Points still buffered are counted as
// dropped and logged.
func (w *Writer) Close(ctx context.Context) error {
	close(w.stop)
	<-w.stopped
	err := w.flush(ctx)
	for errors.Is(err, errDatabaseCreated) && time.Since(w.created) < createGrace && sleep(ctx, w.cfg.MinBackoff) {
		err = w.flush(ctx) // the database this flush created is about to accept writes
	}
	if left := w.Buffered(); left > 0 {
		w.dropped.WithLabelValues(DropClosed).Add(float64(left))
		w.log.Error("influx writer closed with unwritten points", zap.Int("dropped", left), zap.Error(err))
	}
	w.client.Close()
	return err
}

// sleep waits d unless ctx ends first; it reports whether it waited the whole time.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// badData reports whether InfluxDB refused the batch for its content (400: a value it
// cannot parse, a field type conflict; 413: too large), so that smaller batches of it
// may be accepted.
func badData(err error) bool {
	var he *ihttp.Error
	return errors.As(err, &he) && (he.StatusCode == http.StatusBadRequest || he.StatusCode == http.StatusRequestEntityTooLarge)
}

// unreachable reports whether err is InfluxDB not answering (refused connection,
// timeout), as opposed to an answer with an error status.
func unreachable(err error) bool {
	var he *ihttp.Error
	return !errors.As(err, &he) || he.StatusCode == 0
}

// permanent reports whether InfluxDB refused the data itself (4xx other than 429), as
// opposed to being unreachable or overloaded.
func permanent(err error) bool {
	var he *ihttp.Error
	if errors.As(err, &he) {
		c := he.StatusCode
		return c >= 400 && c < 500 && c != 429
	}
	return false
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

package influx

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api"
	ihttp "github.com/influxdata/influxdb-client-go/v2/api/http"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
)

// WriterConfig configures a Writer.
type WriterConfig struct {
	URL, Token, Org, Bucket string
	// BufferPoints bounds the points held while InfluxDB is slow or down; beyond it the
	// oldest points are dropped, counted and logged.
	BufferPoints int
	// BatchPoints is the most points sent in one request.
	BatchPoints int
	// FlushInterval is how often buffered points are sent.
	FlushInterval time.Duration
	// MinBackoff and MaxBackoff bound the exponential wait between failed attempts.
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds one write request.
	Timeout time.Duration
	// MetricsPrefix starts the writer's metric names (default "qas_collector", so
	// qas_collector_points_written_total); the decider uses "qas_decider".
	MetricsPrefix string
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
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MetricsPrefix == "" {
		c.MetricsPrefix = "qas_collector"
	}
}

// Writer sends points to InfluxDB in batches without blocking its callers. Points wait
// in a bounded buffer; a failed batch stays at the head of the buffer and is retried
// with exponential backoff, so nothing within the bound is lost while InfluxDB is down.
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
	buf     []*write.Point
	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}

	written, retried, dropped, failed prometheus.Counter
	buffered                          prometheus.GaugeFunc
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
	w := &Writer{
		cfg: cfg, client: client, api: client.WriteAPIBlocking(cfg.Org, cfg.Bucket), log: log,
		http: &http.Client{Timeout: cfg.Timeout},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: cfg.MetricsPrefix + "_points_written_total", Help: "Points InfluxDB accepted."}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{Name: cfg.MetricsPrefix + "_points_retried_total", Help: "Points in batches that failed and were kept for another attempt."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: cfg.MetricsPrefix + "_points_dropped_total", Help: "Points discarded because the buffer was full or InfluxDB rejected them."}),
		failed:  prometheus.NewCounter(prometheus.CounterOpts{Name: cfg.MetricsPrefix + "_write_failures_total", Help: "Failed write requests."}),
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

// Write queues points; it never blocks on InfluxDB. When the buffer is full the oldest
// points make room, and the loss is counted and logged.
func (w *Writer) Write(points ...*write.Point) {
	w.mu.Lock()
	w.buf = append(w.buf, points...)
	over := len(w.buf) - w.cfg.BufferPoints
	if over > 0 {
		w.buf = append(w.buf[:0:0], w.buf[over:]...)
	}
	full := len(w.buf) >= w.cfg.BatchPoints
	w.mu.Unlock()
	if over > 0 {
		w.dropped.Add(float64(over))
		w.log.Warn("influx buffer full: dropped the oldest points", zap.Int("dropped", over), zap.Int("buffer", w.cfg.BufferPoints))
	}
	if full {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Buffered returns the points waiting to be written.
func (w *Writer) Buffered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.buf)
}

// Counts returns the points written, retried and dropped so far.
func (w *Writer) Counts() (written, retried, dropped float64) {
	return counterValue(w.written), counterValue(w.retried), counterValue(w.dropped)
}

func (w *Writer) loop() {
	defer close(w.stopped)
	ticker := time.NewTicker(w.cfg.FlushInterval)
	defer ticker.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-w.stop:
			return
		case <-ticker.C:
		case <-w.wake:
		}
		if backoff > 0 {
			select {
			case <-w.stop:
				return
			case <-time.After(backoff):
			}
		}
		if err := w.flush(context.Background()); err != nil {
			backoff = min(max(2*backoff, w.cfg.MinBackoff), w.cfg.MaxBackoff)
			w.log.Warn("influx write failed; retrying", zap.Error(err), zap.Duration("backoff", backoff), zap.Int("buffered", w.Buffered()))
		} else {
			backoff = 0
		}
	}
}

// flush sends the buffer in batches until it is empty or a batch fails.
func (w *Writer) flush(ctx context.Context) error {
	for {
		w.mu.Lock()
		n := min(len(w.buf), w.cfg.BatchPoints)
		batch := append([]*write.Point(nil), w.buf[:n]...)
		w.mu.Unlock()
		if n == 0 {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
		err := w.api.WritePoint(wctx, batch...)
		cancel()
		if err != nil {
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
			if permanent(err) {
				// A batch InfluxDB refuses (bad data, unknown database) will never be
				// accepted: drop it, counted, instead of blocking everything behind it.
				w.removeHead(batch)
				w.dropped.Add(float64(n))
				w.log.Error("influx rejected a batch; dropped", zap.Int("points", n), zap.Error(err))
				continue
			}
			w.retried.Add(float64(n))
			return err
		}
		w.removeHead(batch)
		w.written.Add(float64(n))
		w.dbRefused = false
	}
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

// removeHead removes batch from the buffer's head, unless Write already evicted those
// points to make room (then only what is left of them goes).
func (w *Writer) removeHead(batch []*write.Point) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := 0
	for i < len(batch) && i < len(w.buf) && w.buf[i] == batch[i] {
		i++
	}
	if i == 0 && len(batch) > 0 {
		// The head moved on (evicted under pressure): drop whatever of the batch remains.
		last := batch[len(batch)-1]
		for j, p := range w.buf {
			if p == last {
				i = j + 1
				break
			}
		}
	}
	w.buf = append(w.buf[:0:0], w.buf[i:]...)
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
		w.dropped.Add(float64(left))
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

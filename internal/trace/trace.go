// Package trace reads arrival-rate traces in the format of ../shared/traces: plain text
// or gzip, one non-negative integer per line, line i holding the requests in second i.
package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Window selects the part of a trace to read, in trace time: [Start, End). A zero End
// reads to the end of the trace.
type Window struct {
	Start, End time.Duration
}

// ParseWindow reads "2h:8h" (either side may be empty: ":30m", "1h:").
func ParseWindow(s string) (Window, error) {
	if s == "" {
		return Window{}, nil
	}
	from, to, ok := strings.Cut(s, ":")
	if !ok {
		return Window{}, fmt.Errorf("window %q: want START:END such as 2h:8h", s)
	}
	var w Window
	var err error
	if from != "" {
		if w.Start, err = time.ParseDuration(from); err != nil {
			return Window{}, fmt.Errorf("window %q: start: %w", s, err)
		}
	}
	if to != "" {
		if w.End, err = time.ParseDuration(to); err != nil {
			return Window{}, fmt.Errorf("window %q: end: %w", s, err)
		}
	}
	if w.Start < 0 || (w.End != 0 && w.End <= w.Start) {
		return Window{}, fmt.Errorf("window %q: want 0 ≤ start < end", s)
	}
	return w, nil
}

// Read returns the per-second request counts of the window, reading no further than
// its end. A line that is not a non-negative integer is an error naming its number.
func Read(r io.Reader, w Window) ([]float64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, err := br.Peek(2); err == nil && bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("trace: gzip: %w", err)
		}
		defer gz.Close()
		br = bufio.NewReaderSize(gz, 64<<10)
	}
	first, last := int(w.Start/time.Second), int(w.End/time.Second)
	var out []float64
	sc := bufio.NewScanner(br)
	line := 0
	for sc.Scan() {
		line++
		sec := line - 1
		if last > 0 && sec >= last {
			break
		}
		if sec < first {
			continue
		}
		text := strings.TrimSpace(sc.Text())
		n, err := strconv.ParseUint(text, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("trace: line %d: %q is not a non-negative integer", line, truncate(text))
		}
		out = append(out, float64(n))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trace: after line %d: %w", line, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("trace: the window %s:%s holds no seconds (the trace has %d)", w.Start, w.End, line)
	}
	return out, nil
}

// ReadFile reads the window of the trace file at path.
func ReadFile(path string, w Window) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rates, err := Read(f, w)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rates, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

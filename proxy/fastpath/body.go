package fastpath

import (
	"bufio"
	"errors"
	"io"
	"sync/atomic"
)

// errChunked is a malformed chunked body from the application.
var errChunked = errors.New("malformed chunked body from the application")

// maxChunkLine bounds a chunk-size line (with extensions) and a trailer line.
const maxChunkLine = 4096

// sink is where a response body goes: the client's buffered writer, flushed whenever
// the source has nothing more buffered so that streams (SSE, chunked, slow large
// bodies) reach the client as the application produces them.
type sink struct {
	w *bufio.Writer
	// t, if set, is told what each copy blocks on and when it moves, for the
	// sweeper's stall limits; readWait and writeWait are the phases a blocking
	// read of the source and a write to w are.
	t                   *tracker
	readWait, writeWait int32
}

// Phases of a copy that the sweeper times (tracker.phase).
const (
	phaseNone        int32 = iota // not copying, or waiting on nothing timed
	phaseBodyRead                 // reading a request body from the client
	phaseAppWrite                 // writing a request to the application
	phaseClientWrite              // writing a response to the client
)

// tracker is what a connection's copies tell the sweeper: the phase they are in and a
// count of their progress.
type tracker struct {
	phase atomic.Int32
	moved atomic.Uint64
}

func (s sink) wait(phase int32) {
	if s.t != nil {
		s.t.phase.Store(phase)
	}
}

func (s sink) progress() {
	if s.t != nil {
		s.t.moved.Add(1)
	}
}

func (s sink) done() {
	if s.t != nil {
		s.t.phase.Store(phaseNone)
	}
}

// copyN copies exactly n bytes from src to s, flushing before every read that may
// block. Errors reading src are returned as readErr and writing as writeErr so the
// caller can tell an application failure from a client that left.
func (s sink) copyN(src *bufio.Reader, n int64) (readErr, writeErr error) {
	defer s.done()
	for n > 0 {
		if src.Buffered() == 0 {
			s.wait(s.writeWait)
			if err := s.w.Flush(); err != nil {
				return nil, err
			}
			s.wait(s.readWait)
			if _, err := src.Peek(1); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err, nil
			}
		}
		b, _ := src.Peek(int(min(int64(src.Buffered()), n)))
		s.wait(s.writeWait)
		if _, err := s.w.Write(b); err != nil {
			return nil, err
		}
		_, _ = src.Discard(len(b))
		n -= int64(len(b))
		s.progress()
	}
	return nil, nil
}

// copyToEOF copies src to s until it ends, as chunks (the body of a response whose
// length the application gave only by closing the connection). It writes the last
// chunk.
func (s sink) copyToEOF(src *bufio.Reader) (readErr, writeErr error) {
	defer s.done()
	for {
		if src.Buffered() == 0 {
			s.wait(s.writeWait)
			if err := s.w.Flush(); err != nil {
				return nil, err
			}
			s.wait(s.readWait)
			if _, err := src.Peek(1); err != nil {
				if err == io.EOF {
					_, err := s.w.WriteString("0\r\n\r\n")
					return nil, err
				}
				return err, nil
			}
		}
		b, _ := src.Peek(src.Buffered())
		s.wait(s.writeWait)
		s.progress()
		if err := s.chunkHeader(len(b)); err != nil {
			return nil, err
		}
		if _, err := s.w.Write(b); err != nil {
			return nil, err
		}
		if _, err := s.w.WriteString("\r\n"); err != nil {
			return nil, err
		}
		_, _ = src.Discard(len(b))
	}
}

func (s sink) chunkHeader(n int) error {
	var buf [20]byte
	i := len(buf)
	buf[i-1], buf[i-2] = '\n', '\r'
	i -= 2
	for {
		i--
		buf[i] = "0123456789abcdef"[n&15]
		n >>= 4
		if n == 0 {
			break
		}
	}
	_, err := s.w.Write(buf[i:])
	return err
}

// copyChunked copies a chunked body from src to s unchanged (chunk extensions and
// trailers included), checking its framing so the end of the message is found.
func (s sink) copyChunked(src *bufio.Reader) (readErr, writeErr error) {
	defer s.done()
	var cw errClientWrite
	if err := s.chunks(src); errors.As(err, &cw) {
		return nil, cw.error
	} else {
		return err, nil
	}
}

func (s sink) chunks(src *bufio.Reader) error {
	for {
		line, err := s.copyLine(src)
		if err != nil {
			return err
		}
		size, err := chunkSize(line)
		if err != nil {
			return err
		}
		if size == 0 {
			break
		}
		if rerr, werr := s.copyN(src, size); rerr != nil {
			return rerr
		} else if werr != nil {
			return errClientWrite{werr}
		}
		crlf, err := s.copyLine(src)
		if err != nil {
			return err
		}
		if len(crlf) != 0 {
			return errChunked
		}
	}
	for { // trailer fields, then the empty line
		line, err := s.copyLine(src)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
	}
}

// copyLine copies one CRLF-terminated line from src to s and returns it without its
// CRLF (the slice is valid until the next read). A failure to write is returned as
// errClientWrite.
func (s sink) copyLine(src *bufio.Reader) ([]byte, error) {
	if src.Buffered() == 0 {
		s.wait(s.writeWait)
		if err := s.w.Flush(); err != nil {
			return nil, errClientWrite{err}
		}
	}
	s.wait(s.readWait)
	line, err := src.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errChunked
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(line) > maxChunkLine || len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errChunked
	}
	s.wait(s.writeWait)
	s.progress()
	if _, err := s.w.Write(line); err != nil {
		return nil, errClientWrite{err}
	}
	return line[:len(line)-2], nil
}

// errClientWrite wraps a failure to write to the client met while reading a line.
type errClientWrite struct{ error }

// chunkSize parses a chunk-size line: hex digits, then optional extensions.
func chunkSize(line []byte) (int64, error) {
	var n int64
	i := 0
	for ; i < len(line) && isHex(line[i]); i++ {
		if i == 15 {
			return 0, errChunked
		}
		c := line[i]
		switch {
		case c >= 'a':
			c = c - 'a' + 10
		case c >= 'A':
			c = c - 'A' + 10
		default:
			c -= '0'
		}
		n = n<<4 | int64(c)
	}
	if i == 0 {
		return 0, errChunked
	}
	for ; i < len(line) && (line[i] == ' ' || line[i] == '\t'); i++ {
	}
	if i < len(line) && line[i] != ';' {
		return 0, errChunked
	}
	for _, c := range line[i:] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return 0, errChunked
		}
	}
	return n, nil
}

//go:build linux

package fastpath

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// sock reads and writes a non-blocking socket with raw system calls, waiting for
// readiness through Go's network poller (syscall.RawConn). A raw call does not tell the
// scheduler it is in a system call: the calls never block, and skipping that saves the
// scheduler's bookkeeping and, above all, the wake-up of its monitor thread, which
// otherwise follows nearly every request when the proxy idles between requests (about
// one futex and one nanosleep per request at 2000 req/s: a tenth of the proxy's CPU).
//
// A sock is used by one goroutine at a time for reading and one for writing.
type sock struct {
	rc syscall.RawConn

	rbuf        []byte
	rn          int
	rerr        syscall.Errno
	wbuf        []byte
	wn          int
	werr        syscall.Errno
	readFn      func(uintptr) bool
	writeFn     func(uintptr) bool
	writeWaitFn func(uintptr) bool
	peekFn      func(uintptr) bool
	wroteAll    bool
	open        bool // what the last peek found
	// checkFirst: before WriteThenRead's send, look for bytes or an end of stream the
	// application sent while the connection idled; stale: there were some, and nothing
	// was sent.
	checkFirst bool
	stale      bool
}

// newSock returns nc's socket, or nil if nc is not a socket (tests may use pipes):
// callers then use nc's own Read and Write.
func newSock(nc net.Conn) *sock {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &sock{rc: rc}
	// Method values made once, so that a read or write allocates nothing.
	s.readFn, s.writeFn, s.writeWaitFn, s.peekFn = s.doRead, s.doWrite, s.doWriteThenWait, s.doPeek
	return s
}

func (s *sock) doRead(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(s.rbuf))), uintptr(len(s.rbuf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		s.rn, s.rerr = int(n), e
		return true
	}
}

// sendFlags: no SIGPIPE for a peer that has gone.
const sendFlags = syscall.MSG_NOSIGNAL

// send writes as much of s.wbuf[s.wn:] as the socket takes; it reports false when the
// socket is full (EAGAIN) before all is written.
func (s *sock) send(fd uintptr) bool {
	for s.wn < len(s.wbuf) {
		rest := s.wbuf[s.wn:]
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(unsafe.SliceData(rest))), uintptr(len(rest)), sendFlags, 0, 0)
		switch e {
		case 0:
			s.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			s.werr = e
			return true
		}
	}
	return true
}

func (s *sock) doWrite(fd uintptr) bool { return s.send(fd) }

// doWriteThenWait runs inside a read wait: it sends the request on its first call
// and then asks to wait for the reply without trying to read first. The poller's
// readiness was reset before this call, so a reply arriving after the send is never
// missed; skipping the read that would only find nothing saves a system call.
//
// Bytes that were already waiting before the reset would be missed, and then taken
// for the reply: with checkFirst (a reused connection), the first call peeks before it
// sends, and sends nothing if anything (bytes, or the end of the stream) is waiting.
// The peek is the same system call pool.get's check makes, made here inside the wait
// the send needs anyway, instead of in a wait of its own.
func (s *sock) doWriteThenWait(fd uintptr) bool {
	if s.checkFirst {
		s.checkFirst = false
		if !s.peekOpen(fd) {
			s.stale = true
			return true
		}
	}
	if !s.wroteAll {
		if !s.send(fd) || s.werr != 0 {
			return true // full or failed: the caller finishes with a plain write
		}
		s.wroteAll = true
		return false
	}
	return s.doRead(fd)
}

// Read reads into p, as net.Conn's Read does.
func (s *sock) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rbuf, s.rn, s.rerr = p, 0, 0
	err := s.rc.Read(s.readFn)
	s.rbuf = nil
	return s.readResult(err)
}

func (s *sock) readResult(err error) (int, error) {
	switch {
	case err != nil:
		return 0, err
	case s.rerr != 0:
		return 0, os.NewSyscallError("read", s.rerr)
	case s.rn == 0:
		return 0, io.EOF
	}
	return s.rn, nil
}

// Write writes all of p, as net.Conn's Write does.
func (s *sock) Write(p []byte) (int, error) {
	s.wbuf, s.wn, s.werr = p, 0, 0
	err := s.rc.Write(s.writeFn)
	s.wbuf = nil
	return s.writeResult(err)
}

func (s *sock) writeResult(err error) (int, error) {
	switch {
	case err != nil:
		return s.wn, err
	case s.werr != 0:
		return s.wn, os.NewSyscallError("write", s.werr)
	}
	return s.wn, nil
}

// WriteThenRead sends req and then reads the reply into p, with no read attempt
// between the two (see doWriteThenWait). If the socket cannot take all of req at
// once it falls back to a plain write and read. With check, it first makes sure the
// application has sent nothing and not closed the connection since its last reply:
// if it has, nothing is sent and the error is errStale.
func (s *sock) WriteThenRead(req, p []byte, check bool) (wrote bool, n int, err error) {
	s.wbuf, s.wn, s.werr, s.wroteAll = req, 0, 0, false
	s.rbuf, s.rn, s.rerr = p, 0, 0
	s.checkFirst, s.stale = check, false
	err = s.rc.Read(s.writeWaitFn)
	s.rbuf = nil
	s.checkFirst = false // if the wait failed before its function ran
	if s.stale {
		s.wbuf = nil
		return false, 0, errStale
	}
	if !s.wroteAll {
		// The write did not finish inside the wait (the socket was full, or failed):
		// finish it plainly, then read plainly.
		if err == nil && s.werr == 0 {
			err = s.rc.Write(s.writeFn)
		}
		s.wbuf = nil
		if _, err = s.writeResult(err); err != nil {
			return false, 0, err
		}
		n, err = s.Read(p)
		return true, n, err
	}
	s.wbuf = nil
	n, err = s.readResult(err)
	return true, n, err
}

func (s *sock) doPeek(fd uintptr) bool {
	s.open = s.peekOpen(fd)
	return true
}

// peekOpen reports whether the socket is open with nothing to read: a non-blocking
// peek finds no byte to read (EAGAIN), neither data nor the end of the stream nor an
// error.
func (s *sock) peekOpen(fd uintptr) bool {
	var b [1]byte
	for {
		_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if e != syscall.EINTR {
			return e == syscall.EAGAIN
		}
	}
}

// alive reports whether an idle connection is still open and has nothing unread: a
// non-blocking peek sees EOF if the application closed it, and data if it sent
// something unasked (such as a 408 before closing).
func alive(c *upConn) bool {
	if c.sock == nil {
		return true // not a socket (tests may use pipes)
	}
	s := c.sock
	s.open = false
	return s.rc.Read(s.peekFn) == nil && s.open
}

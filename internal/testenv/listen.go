package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tcpListen is the state /proc/net/tcp gives a listening socket.
const tcpListen = "0A"

// ListensOn reports whether the process pid holds a listening TCP socket on
// port (any local address), read from /proc. A server a test starts on a port
// picked free a moment before can lose that port to another test's server
// (make test runs packages in parallel); a readiness probe on the port then gets
// the other server's answer. A test that asks ListensOn as well knows the answer
// is its own process's.
func ListensOn(pid, port int) (bool, error) {
	if port <= 0 || port > 65535 {
		return false, fmt.Errorf("listens on: port %d is not a TCP port", port)
	}
	inodes, err := socketInodes(pid)
	if err != nil {
		return false, err
	}
	for _, table := range []string{"tcp", "tcp6"} {
		found, err := listenerIn(filepath.Join("/proc", strconv.Itoa(pid), "net", table), port, inodes)
		if err != nil && !errors.Is(err, os.ErrNotExist) { // no tcp6 without IPv6
			return false, err
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// Listens reports whether p holds a listening TCP socket on port
// (ListensOn). A process that has exited listens on nothing: false, with no
// error, even when it was reaped while /proc was read; Exited says how it
// ended.
func (p *Process) Listens(port int) (bool, error) {
	ok, err := ListensOn(p.Pid(), port)
	if err != nil {
		if exited, _ := p.Exited(); exited {
			return false, nil
		}
	}
	return ok, err
}

// socketInodes are the inodes of the sockets pid holds open ("socket:[N]"
// links in /proc/pid/fd).
func socketInodes(pid int) (map[string]bool, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listens on: %w", err)
	}
	inodes := map[string]bool{}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed since the listing
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	return inodes, nil
}

// listenerIn reports whether the table (/proc/pid/net/tcp's format: "sl
// local_address rem_address st … uid timeout inode", the address as hex
// IP:PORT) has a socket in LISTEN on port whose inode is one of inodes.
func listenerIn(path string, port int, inodes map[string]bool) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			return false, fmt.Errorf("listens on: %s: a line of %d fields, want 10 or more: %q", path, len(fields), sc.Text())
		}
		if strings.HasSuffix(fields[1], want) && fields[3] == tcpListen && inodes[fields[9]] {
			return true, nil
		}
	}
	return false, sc.Err()
}

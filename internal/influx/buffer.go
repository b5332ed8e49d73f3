package influx

// lineBuffer is a bounded FIFO of encoded points (line protocol, one point a line). It
// is a ring: when full, a new line overwrites the oldest without moving the others, so
// a Write under pressure costs one string header, not a copy of the buffer. It grows
// by doubling up to its bound, so an idle writer holds little.
//
// Every line has a sequence number (first is the oldest held); a batch taken with peek
// is removed by sequence, so lines that were evicted while the batch was in flight are
// not removed twice.
type lineBuffer struct {
	lines []string
	head  int    // index of the oldest line
	n     int    // lines held
	limit int    // most lines held
	first uint64 // sequence number of the oldest line
}

func newLineBuffer(limit int) *lineBuffer {
	return &lineBuffer{lines: make([]string, min(limit, 1024)), limit: limit}
}

// push appends line, evicting the oldest line when full; it reports whether it did.
func (b *lineBuffer) push(line string) (evicted bool) {
	if b.n == len(b.lines) && len(b.lines) < b.limit {
		b.grow()
	}
	if b.n == b.limit {
		b.lines[b.head] = line
		b.head = (b.head + 1) % len(b.lines)
		b.first++
		return true
	}
	b.lines[(b.head+b.n)%len(b.lines)] = line
	b.n++
	return false
}

func (b *lineBuffer) grow() {
	bigger := make([]string, min(2*len(b.lines), b.limit))
	for i := range b.n {
		bigger[i] = b.lines[(b.head+i)%len(b.lines)]
	}
	b.lines, b.head = bigger, 0
}

// peek returns up to max of the oldest lines and the sequence number of the first.
func (b *lineBuffer) peek(max int) ([]string, uint64) {
	k := min(max, b.n)
	out := make([]string, k)
	for i := range out {
		out[i] = b.lines[(b.head+i)%len(b.lines)]
	}
	return out, b.first
}

// removeBefore removes the lines whose sequence number is below end.
func (b *lineBuffer) removeBefore(end uint64) {
	for b.n > 0 && b.first < end {
		b.lines[b.head] = "" // let the string go
		b.head = (b.head + 1) % len(b.lines)
		b.n--
		b.first++
	}
}

// len returns the lines held.
func (b *lineBuffer) len() int { return b.n }

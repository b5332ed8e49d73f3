package influx

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLineBufferKeepsTheNewestInOrder(t *testing.T) {
	b := newLineBuffer(3000) // starts at 1024 lines, grows twice
	evicted := 0
	for i := range 5000 {
		if b.push(fmt.Sprint(i)) {
			evicted++
		}
	}
	require.Equal(t, 2000, evicted)
	require.Equal(t, 3000, b.len())
	lines, first := b.peek(10)
	require.Equal(t, uint64(2000), first)
	require.Equal(t, []string{"2000", "2001", "2002", "2003", "2004", "2005", "2006", "2007", "2008", "2009"}, lines)
	all, _ := b.peek(5000)
	require.Len(t, all, 3000)
	require.Equal(t, "4999", all[2999])
}

// TestLineBufferRemovesABatchOnce: a batch taken with peek is removed by sequence
// number, so lines evicted while it was in flight are not counted against the lines
// after it.
func TestLineBufferRemovesABatchOnce(t *testing.T) {
	b := newLineBuffer(4)
	for i := range 4 {
		b.push(fmt.Sprint(i))
	}
	batch, first := b.peek(2) // "0", "1"
	require.Equal(t, []string{"0", "1"}, batch)
	b.push("4") // evicts "0"
	b.push("5") // evicts "1"
	b.push("6") // evicts "2"
	b.removeBefore(first + uint64(len(batch)))
	rest, _ := b.peek(10)
	require.Equal(t, []string{"3", "4", "5", "6"}, rest, "nothing after the batch was removed")
	b.removeBefore(first + 5) // up to "4"
	rest, _ = b.peek(10)
	require.Equal(t, []string{"5", "6"}, rest)
	b.removeBefore(100)
	require.Zero(t, b.len())
	b.push("7")
	rest, next := b.peek(10)
	require.Equal(t, []string{"7"}, rest)
	require.Equal(t, uint64(7), next)
}

//go:build unix

package fastpath

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckEarlySkipsACopyTheSweeperCutOff: the sweeper's stall check closes
// the application's connection of a body copy that made no progress; that
// closed connection reads as pending, and checkEarly, which runs right after
// it, took it for an early answer and the request was relayed into a 502. A
// copy marked stalled is not an early answer; one that is not is, as before.
func TestCheckEarlySkipsACopyTheSweeperCutOff(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stalled int32
		early   bool
	}{
		{"not stalled: the closed connection is the application's answer", phaseNone, true},
		{"stalled writing to the application", phaseAppWrite, false},
		{"stalled reading the client's body", phaseBodyRead, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, _ := tcpPair(t)
			app, _ := tcpPair(t)
			require.NoError(t, app.Close()) // as checkStall closes it
			require.True(t, Pending(app), "a closed connection reads as pending")

			c := &conn{rwc: client, sending: true}
			c.up.Store(&upConn{nc: app})
			c.stalled.Store(tc.stalled)
			c.checkEarly(1)
			require.Equal(t, tc.early, c.early)
		})
	}
}

// Package kubelog routes klog, the logger of client-go (reflectors, leader
// election, event broadcasters), into the command's zap logger, so that a
// binary writes one log stream in one format at one level.
package kubelog

import (
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"k8s.io/klog/v2"
)

// Route sends klog's output to log, named "client-go". klog's verbosity flags are
// not registered: what zap's level lets through is written (client-go logs its
// routine chatter at V(2) and above, which zapr maps below Debug).
func Route(log *zap.Logger) {
	klog.SetLogger(zapr.NewLogger(log.Named("client-go")))
}
